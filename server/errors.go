package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/custos-mcp/custos/store"
)

// CodeResourceNotFound is the JSON-RPC error code custos returns for a read
// of a resource that does not exist AND for one the caller may not read: the
// two are indistinguishable by design (existence must not leak). It is the
// code of protocol revisions up to 2025-11-25; see NotFoundCode.
const CodeResourceNotFound = -32002

// NotFoundCode is the "resource not found" code (denied reads included) a
// client speaking protocolVersion receives: -32002 up to 2025-11-25, -32602
// (invalid params, with data.uri) from 2026-07-28 on (SEP-2164).
func NotFoundCode(protocolVersion string) int64 {
	if protocolVersion >= ProtocolStateless {
		return jsonrpc.CodeInvalidParams
	}
	return CodeResourceNotFound
}

// Sentinel errors of this package. Handlers never return them to the client
// directly; they are mapped to JSON-RPC errors by the functions below.
var (
	// ErrNoIdentity is returned when a request carries no authenticated
	// principal. The request is refused.
	ErrNoIdentity = errors.New("server: request has no authenticated principal")
	// ErrBadCursor is returned when a list cursor cannot be opened for this
	// caller (malformed, forged, sealed for someone else, or expired).
	ErrBadCursor = errors.New("server: invalid cursor")
	// ErrBadConfig is returned by New and the identity loaders for invalid
	// configuration; the message names the field.
	ErrBadConfig = errors.New("server: invalid configuration")
	// ErrMalformedInput is returned by ServeStdio over a transport other
	// than StdioTransport (which answers such lines and reads on) when the
	// client sent a line that is not one JSON-RPC 2.0 message, which ends
	// the session (the go-sdk's transport stops reading there). The SDK's
	// own error quotes the line, and would be logged and printed; this one
	// says what was wrong without it. The client must reconnect.
	ErrMalformedInput = errors.New("server: malformed input on stdio: a line is not one JSON-RPC 2.0 message (the line is not repeated here)")
)

// CodeRequestCancelled answers a request its client cancelled
// (notifications/cancelled, or the HTTP request gone) before its audit
// record was confirmed: nothing was released. MCP defines no code for it
// (a cancelled request need not be answered at all) and JSON-RPC reserves
// -32768 to -32000; -32800 is the code LSP gives a cancelled request. The
// go-sdk answered such requests with code 0, which is no JSON-RPC error
// code.
const CodeRequestCancelled = -32800

// cancelled is the answer to a request cancelled by its client.
func cancelled() error {
	return &jsonrpc.Error{Code: CodeRequestCancelled, Message: "request cancelled by the client: nothing released"}
}

// codedError gives err a JSON-RPC error code if it has none. The go-sdk
// answers a few requests with a plain Go error, which it writes with code
// 0, no JSON-RPC code at all: a second initialize in a session, a request
// before initialize ("method ... is invalid during session
// initialization"; the method is one the server knows, unknown ones are
// answered before), both -32600 here, and a request cancelled before its
// handler ran ("context canceled"), -32800 as cancelled() answers one
// cancelled later. custos's own handlers answer *jsonrpc.Error only.
func codedError(err error) error {
	var je *jsonrpc.Error
	switch {
	case err == nil || errors.As(err, &je):
		return err
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return cancelled()
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: " + err.Error()}
}

// notFound is the one answer for "does not exist" and "not allowed".
func notFound(uri string) error {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return &jsonrpc.Error{Code: CodeResourceNotFound, Message: "Resource not found", Data: data}
}

// invalidParams reports bad client input; msg must name what is wrong and
// must not echo secrets or PHI.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// refused reports a server-side failure that made the server fail closed.
func refused(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
}

// undecided answers a request the policy could not decide (fail closed).
func undecided() error { return refused("access decision unavailable: request refused") }

// badURI answers a URI that does not parse (err wraps store.ErrBadURI and
// names the check that failed, never the input).
func badURI(err error) error {
	return invalidParams("invalid resource uri: %s", strings.TrimPrefix(err.Error(), store.ErrBadURI.Error()+": "))
}

// badCursor answers a cursor that does not open (err wraps ErrBadCursor).
func badCursor(err error) error {
	return invalidParams("invalid cursor: %s", strings.TrimPrefix(err.Error(), ErrBadCursor.Error()+": "))
}

// jsonrpcForbidden answers a templates request the policy denied.
var jsonrpcForbidden = jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "not permitted by policy"}
