package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server/oauth"
)

// ActionAuthReject is the audit action of an HTTP request refused before it
// reached MCP: 401 (no, bad or expired token), 403 (insufficient scope or a
// cross-origin request).
const ActionAuthReject = "auth/reject"

// OAuthHandler returns the Streamable HTTP handler for OAuth 2.1 access
// tokens verified by v (issuer, audience, expiry, per-method scopes): the
// MCP endpoint at MCPPath, the RFC 9728 protected resource metadata at
// v.MetadataPath(), cross-origin requests refused, and every rejection
// audited. Both protocol revisions are served as by HTTPHandler.
func (s *Server) OAuthHandler(v *oauth.Verifier) http.Handler {
	h := s.mcpHandler(oauthIdentity(v)) // both protocol revisions, as HTTPHandler
	mux := http.NewServeMux()
	mux.Handle(v.MetadataPath(), v.MetadataHandler())
	mux.Handle(MCPPath, s.auditRejections(http.NewCrossOriginProtection().Handler(v.Middleware(s.rateLimited(h), jsonrpcMethod))))
	return mux
}

// oauthIdentity maps the verified claims to the caller's Identity; the
// purpose of use comes from the token or the purpose header and must be a
// known code.
func oauthIdentity(v *oauth.Verifier) identityFunc {
	return func(req mcp.Request) (Identity, error) {
		extra := req.GetExtra()
		if extra == nil || extra.TokenInfo == nil {
			return Identity{}, ErrNoIdentity
		}
		c, ok := oauth.ClaimsFromTokenInfo(extra.TokenInfo)
		if !ok {
			return Identity{}, ErrNoIdentity
		}
		pou, err := v.PurposeOfUse(extra.Header, c)
		if err != nil {
			return Identity{}, ErrNoIdentity
		}
		return Identity{Principal: c.Principal, PurposeOfUse: pou, Source: "oauth", expires: c.Expiry}, nil
	}
}

// jsonrpcMethod reads the JSON-RPC method of a POST body and leaves the
// body readable for the MCP handler. GET (the SSE stream) and DELETE (end
// of session) have none.
func jsonrpcMethod(r *http.Request) (string, error) {
	if r.Method != http.MethodPost || r.Body == nil {
		return "", nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	return methodOf(b)
}

// methodOf returns the "method" member of one JSON-RPC message. The scope
// check depends on it, so it reads the member exactly as the SDK's
// case-sensitive decoder will: encoding/json matches struct fields without
// regard to case and keeps the last duplicate, so {"method":"resources/read",
// "Method":"ping"} would be scope-checked as ping and served as a read.
// A message with more than one member named method in any case, or one not
// spelled exactly "method", is refused.
func methodOf(b []byte) (string, error) {
	bad := errors.New("body is not one JSON-RPC message")
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", bad
	}
	method, seen := "", 0
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", bad
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", bad
		}
		if !strings.EqualFold(key, "method") {
			continue
		}
		if seen++; seen > 1 || key != "method" || json.Unmarshal(v, &method) != nil {
			return "", errors.New("body has an ambiguous or malformed method member")
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return "", bad
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", bad // trailing data after the message
	}
	return method, nil
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// auditRejections writes an audit record for every 401 and 403 that next
// answers (tokens and Origin are checked before MCP sees the request): the
// source address, the status and the OAuth error code — never the token.
func (s *Server) auditRejections(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status != http.StatusUnauthorized && rec.status != http.StatusForbidden {
			return
		}
		s.cfg.Metrics.AuthRejected(rec.status)
		reason := "http_" + strconv.Itoa(rec.status)
		switch wa := w.Header().Get("WWW-Authenticate"); {
		case strings.Contains(wa, `error="insufficient_scope"`):
			reason += "," + ReasonInsufficientScope
		case strings.Contains(wa, `error="invalid_token"`):
			reason += "," + ReasonInvalidToken
			if code := oauth.RejectionCode(wa); code != "" {
				reason += "," + code // expired, wrong_audience, wrong_issuer, ...
			}
		case rec.status == http.StatusUnauthorized:
			reason += "," + ReasonNoToken
		default:
			reason += "," + ReasonCrossOrigin
		}
		e := s.entry(context.Background(), Identity{Source: r.RemoteAddr}, ActionAuthReject)
		if err := s.refuse(context.Background(), e, audit.OutcomeDeny, reason, nil); err != nil {
			s.log.Error("auditing an HTTP rejection failed", "status", rec.status, "err", err)
		}
	})
}
