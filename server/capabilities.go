package server

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// capabilities are the MCP server capabilities custos declares, in the
// initialize result (2025-11-25) and in server/discover (2026-07-28):
// resources (with subscriptions and list-changed notifications) and
// completions. custos has no tools, no prompts and sends no log messages.
func capabilities() *mcp.ServerCapabilities {
	return &mcp.ServerCapabilities{
		Resources:   &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true},
		Completions: &mcp.CompletionCapabilities{},
	}
}

// featureMethods are the request methods of the server features that exist
// only when their capability is declared.
var featureMethods = map[string]func(*mcp.ServerCapabilities) bool{
	"tools/list":   func(c *mcp.ServerCapabilities) bool { return c.Tools != nil },
	"tools/call":   func(c *mcp.ServerCapabilities) bool { return c.Tools != nil },
	"prompts/list": func(c *mcp.ServerCapabilities) bool { return c.Prompts != nil },
	"prompts/get":  func(c *mcp.ServerCapabilities) bool { return c.Prompts != nil },
	// The SDK answers logging/setLevel on every server, logging capability
	// or not; custos sends no log messages.
	"logging/setLevel": func(c *mcp.ServerCapabilities) bool { return c.Logging != nil },
}

// undeclaredMethods answers -32601 (method not found) to every request of a
// feature whose capability caps does not declare, on both protocol
// revisions (on 2026-07-28 the go-sdk sends it with HTTP 404). The go-sdk
// v1.8.0 registers tools/list, tools/call, prompts/list, prompts/get and
// logging/setLevel on every server whatever it declares, and would answer
// an empty list (or "unknown tool", or accept a level for messages it never
// sends), so a client could not tell an undeclared feature from
// an empty one (the conformance suite's server-stateless scenario checks
// that capabilities match the handlers). Nothing is disclosed and no
// resource is touched, so these refusals are not audited.
func undeclaredMethods(caps *mcp.ServerCapabilities) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if declared, ok := featureMethods[method]; ok && !declared(caps) {
				// The SDK sends it as `method not found: "<method>"`.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
			}
			return next(ctx, method, req)
		}
	}
}
