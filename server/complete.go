package server

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// complete answers completion/complete.
func (s *Server) complete(ctx context.Context, ident identityFunc, req mcp.Request) (mcp.Result, error) {
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not supported: completion/complete"}
}
