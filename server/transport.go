package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves MCP over the given transport (normally
// &mcp.StdioTransport{}) as one fixed identity, until the client
// disconnects or ctx is done.
func (s *Server) ServeStdio(ctx context.Context, t mcp.Transport, id Identity) error {
	if id.Source == "" {
		id.Source = "stdio"
	}
	return s.newMCPServer(fixedIdentity(id)).Run(ctx, t)
}

// MCPPath is where the Streamable HTTP endpoint is mounted.
const MCPPath = "/mcp"

// HTTPHandler returns the Streamable HTTP handler: bearer tokens verified by
// tokens, cross-origin requests refused, the MCP endpoint at MCPPath.
func (s *Server) HTTPHandler(tokens *Tokens) http.Handler {
	ms := s.newMCPServer(bearerIdentity)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, &mcp.StreamableHTTPOptions{
		Logger:              s.log,
		SessionTimeout:      30 * time.Minute, // automatic logoff of idle sessions
		MaxRequestBodyBytes: 1 << 20,
	})
	protected := auth.RequireBearerToken(tokens.Verify, nil)(s.rateLimited(h))
	mux := http.NewServeMux()
	mux.Handle(MCPPath, s.auditRejections(http.NewCrossOriginProtection().Handler(protected)))
	return mux
}

// IsLoopback reports whether addr ("host:port") names a loopback address.
// Plain HTTP is served only there; other addresses need TLS.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewHTTPServer wraps h with the timeouts a server facing real clients
// needs. Without tlsConfig addr must be a loopback address.
func NewHTTPServer(addr string, h http.Handler, tlsConfig ...*tls.Config) (*http.Server, error) {
	if len(tlsConfig) > 0 && tlsConfig[0] != nil {
		return &http.Server{
			Addr: addr, Handler: h, TLSConfig: tlsConfig[0],
			ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
			IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
		}, nil
	}
	if !IsLoopback(addr) {
		return nil, fmt.Errorf("%w: --listen %s: plain HTTP is only served on a loopback address (127.0.0.1, ::1); other addresses need TLS (--tls-cert, --tls-key)", ErrBadConfig, addr)
	}
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// WriteTimeout stays 0: Streamable HTTP holds SSE streams open.
	}, nil
}
