package server

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// subscription answers resources/subscribe, resources/unsubscribe and
// subscriptions/listen.
func (s *Server) subscription(ctx context.Context, ident identityFunc, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not supported: " + method}
}
