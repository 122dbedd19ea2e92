package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/server/clientaddr"
	"github.com/custos-mcp/custos/server/oauth"
	"github.com/custos-mcp/custos/server/ops"
)

// ActionAuthReject is the audit action of an HTTP request refused before it
// reached MCP: 401 (no, bad or expired token), 403 (insufficient scope or a
// cross-origin request).
const ActionAuthReject = "auth/reject"

// OAuthHandler returns the Streamable HTTP handler for OAuth 2.1 access
// tokens verified by v (issuer, audience, expiry, per-method scopes): the
// MCP endpoint at MCPPath, the RFC 9728 protected resource metadata at
// v.MetadataPath(), cross-origin requests refused, and every rejection
// audited. Both protocol revisions are served as by HTTPHandler, and the
// source address is resolved as there (Config.TrustedProxies).
func (s *Server) OAuthHandler(v *oauth.Verifier) http.Handler {
	h := s.mcpHandler(oauthIdentity(v)) // both protocol revisions, as HTTPHandler
	mux := http.NewServeMux()
	mux.Handle(v.MetadataPath(), v.MetadataHandler())
	mux.Handle(MCPPath, noStore(s.auditRejections(crossOriginRefused(contentCodingRefused(v.Middleware(noteCaller(s.rateLimited(h)), jsonrpcMethods))), v.TokenVerifier())))
	return spareSlots(closeAfterChunked(boundUnreadBody(clientaddr.Handler(s.cfg.TrustedProxies, mux))))
}

// contentCodingRefused answers a POST whose body has a content coding with
// 415 (refuseContentCoding) before v.Middleware reads the body for its
// method's scope: there the compressed bytes were answered 400 "body is
// not one JSON-RPC message", and the 415 that mcpHandler gives dev-token
// requests was never reached over OAuth
// (TestCompressedBodyOverOAuthIsUnsupportedMediaType). It is answered
// before the token is checked: the answer tells nothing of the token.
func contentCodingRefused(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !refuseContentCoding(w, r) {
			next.ServeHTTP(w, r)
		}
	})
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
		// The source is the caller's address, as for dev tokens; "oauth"
		// only where no HTTP request carried the token.
		src := cmp.Or(oauth.RemoteAddrFromTokenInfo(extra.TokenInfo), "oauth")
		pou, err := v.PurposeOfUse(extra.Header, c)
		if err != nil {
			// The token verified: the refusal is recorded with its caller.
			return Identity{Principal: c.Principal, Source: src}, ErrNoIdentity
		}
		return Identity{Principal: c.Principal, PurposeOfUse: pou, Source: src, expires: c.Expiry}, nil
	}
}

// jsonrpcMethods reads the JSON-RPC methods of a POST body, one for a
// message and one per message of a batch, through the body's memo (bodyOf:
// the body stays readable for the MCP handler). GET (the SSE stream) and
// DELETE (end of session) have none. A batch (protocol revision
// 2025-03-26: "an array batching one or more requests and/or
// notifications", or of responses) was refused 400 "body is not one
// JSON-RPC message" over OAuth while served with dev tokens
// (TestOAuthServesABatchWithEveryScope); now the scope of every message is
// checked (oauth.Verifier.Middleware), and the SDK refuses a batch at the
// revisions that have none.
func jsonrpcMethods(r *http.Request) ([]string, error) {
	p := bodyOf(r)
	if p == nil {
		return nil, nil
	}
	// Over the MCP handler's limit, or the server's (HTTPOptions.
	// MaxRequestBodyBytes, which custos serve sets): 413, never 400.
	var mbe *http.MaxBytesError
	switch {
	case errors.As(p.err, &mbe):
		return nil, fmt.Errorf("%w: it exceeds %d bytes", oauth.ErrBodyTooLarge, mbe.Limit)
	case p.err != nil:
		return nil, p.err
	case len(p.b) > maxBody:
		return nil, fmt.Errorf("%w: it exceeds %d bytes", oauth.ErrBodyTooLarge, maxBody)
	}
	if t := bytes.TrimLeft(p.b, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		m, err := methodOf(p.b)
		return []string{m}, err
	}
	raws, _, err := p.batch()
	if err != nil || len(raws) == 0 {
		return nil, errors.New("body is not a JSON-RPC message or a non-empty batch of them")
	}
	ms := make([]string, 0, len(raws))
	for i, msg := range raws {
		if t := bytes.TrimLeft(msg, " \t\r\n"); len(t) == 0 || t[0] != '{' {
			// No JSON object, so no method and no scope: checkParams
			// answers it -32600 beside the batch's other members
			// (planBatch). It made the whole batch 400 "body is not one
			// JSON-RPC message" (TestOAuthJudgesBatchMembersOneByOne).
			continue
		}
		m, err := methodOf(msg)
		if err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i+1, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
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

// caller is what the handlers inside auditRejections learnt of a request:
// the verified token (noteCaller), and whether it named a session of
// another principal (sessionCap).
type caller struct {
	ti       *auth.TokenInfo
	mismatch bool
	owner    sessionOwner // of the session a mismatched request named
	badHost  bool         // refused by refuseRebinding
	expired  bool         // a dev token past its expires_at (Tokens.Verify)
}

type callerKey struct{}

func callerOf(r *http.Request) *caller {
	c, _ := r.Context().Value(callerKey{}).(*caller)
	return c
}

// noteCaller tells auditRejections the verified token of a request, and
// connSlots that its connection carried an authenticated request; it runs
// after token verification.
func noteCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noteAuthenticated(r)
		if c := callerOf(r); c != nil {
			c.ti = auth.TokenInfoFromContext(r.Context())
		}
		next.ServeHTTP(w, r)
	})
}

// principalOf is the principal of a verified token: the dev token's
// identity or the OAuth claims.
func principalOf(ti *auth.TokenInfo) policy.Principal {
	if id, ok := ti.Extra[tokenInfoKey].(Identity); ok {
		return id.Principal
	}
	if c, ok := oauth.ClaimsFromTokenInfo(ti); ok {
		return c.Principal
	}
	return policy.Principal{Sub: ti.UserID}
}

// rejectWriter passes a response through, except a 401, 403 or 400
// invalid_request (authRefusal) from a source over its limit of failed
// authentications, which it turns into a
// 429 (refusals.go), and a 401 without a challenge, to which it adds one.
type rejectWriter struct {
	http.ResponseWriter
	reject   func(status int) (over bool) // called once, for the first authRefusal
	status   int
	limited  bool // answered 429 instead: the inner handler's body is dropped
	hasToken bool // the request carried a bearer token
}

func (w *rejectWriter) WriteHeader(code int) {
	if w.status != 0 {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.status = code
	if code == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		// RFC 9110 §15.5.2 and RFC 6750 §3: a 401 carries a Bearer
		// challenge. The go-sdk's middleware writes one only with a
		// resource metadata URL or scopes, which dev tokens have neither of;
		// for a token that was presented and refused, with
		// error="invalid_token" (RFC 6750 §3.1), which is also how the
		// refusal is recorded (not as no_token).
		ch := `Bearer realm="custos"`
		if w.hasToken {
			ch += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", ch)
	}
	if authRefusal(code, w.Header().Get("WWW-Authenticate")) && w.reject(code) {
		w.limited = true
		h := w.Header()
		h.Del("WWW-Authenticate")
		http.Error(w.ResponseWriter, "too many failed requests from this address: retry later", http.StatusTooManyRequests)
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

// authRefusal reports whether a response refuses the request's
// authentication: 401, 403, or 400 invalid_request (a malformed
// Authorization header, oauth.InvalidRequest).
func authRefusal(status int, wwwAuthenticate string) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return true
	case http.StatusBadRequest:
		return strings.Contains(wwwAuthenticate, `error="invalid_request"`)
	}
	return false
}

func (w *rejectWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.limited {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *rejectWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.limited {
		f.Flush()
	}
}

func (w *rejectWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// auditRejections records every 401 and 403 that next answers, and every
// 400 invalid_request (a malformed Authorization header) (tokens,
// Origin and session ownership are checked before MCP sees the request):
// the source address, the status and the OAuth error code — never the
// token — and the caller's principal when its token verified (a request
// naming another principal's session, or from another origin, is recorded
// with the identity of whoever made it; verify checks the bearer token of
// a 403 refused before verification). Every rejection is counted in the
// metrics; the records are aggregated and a source over its limit is
// answered 429 (refusals.go).
func (s *Server) auditRejections(next http.Handler, verify auth.TokenVerifier) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &caller{}
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
		var (
			reason, class string
			source        = hostOf(clientaddr.Of(r))
		)
		_, tokErr := oauth.BearerToken(r)
		rw := &rejectWriter{ResponseWriter: w, hasToken: tokErr == nil, reject: func(status int) bool {
			reason, class = rejectionReason(status, w.Header().Get("WWW-Authenticate"), c)
			s.cfg.Metrics.AuthRejected(status)
			s.cfg.Metrics.AuthFailure(class)
			over := s.refusals.failedAuth(source)
			if over {
				s.cfg.Metrics.RateLimited(ops.LimitSource)
				w.Header().Set("Retry-After", s.refusals.retryAfter())
			}
			return over
		}}
		next.ServeHTTP(rw, r)
		if reason == "" {
			return
		}
		id := Identity{Source: clientaddr.Of(r)}
		switch {
		case c.ti != nil:
			id.Principal = principalOf(c.ti)
		case rw.status == http.StatusForbidden && verify != nil:
			if tok, err := oauth.BearerToken(r); err == nil {
				if ti, err := verify(r.Context(), tok, r); err == nil && ti != nil {
					id.Principal = principalOf(ti)
				}
			}
		}
		reason = withTenant(reason, id.Principal.Tenant)
		if c.mismatch {
			reason += ownerDiffers(id.Principal, c.owner)
		}
		e := s.entry(context.Background(), id, ActionAuthReject)
		if err := s.refuseCountedIf(context.Background(), e, audit.OutcomeDeny, reason, nil, !rw.limited); err != nil {
			s.log.Error("auditing an HTTP rejection failed", "status", rw.status, "err", err)
		}
	})
}

// ownerDiffers names, for the record of a request refused for naming
// another principal's session (session_mismatch), what of the session
// owner's principal differs from the caller's: ",owner_sub=…",
// ",owner_tenant=…", ",owner_client=…", each Go-quoted, in that order. The
// caller's sub and client are the record's principal and its tenant is
// ",tenant=…" (withTenant); without these the attempt of the owner's own
// sub and client from another tenant was recorded looking exactly like a
// request of the owner (TestSessionMismatchNamesBothTenants). The owner's
// identity is the auditor's to see: it is whose session was attempted,
// never shown to the caller.
func ownerDiffers(caller policy.Principal, owner sessionOwner) string {
	var b strings.Builder
	for _, f := range []struct{ key, owner, caller string }{
		{"owner_sub", owner.sub, caller.Sub},
		{"owner_tenant", owner.tenant, caller.Tenant},
		{"owner_client", owner.client, caller.ClientID},
	} {
		if f.owner != f.caller {
			b.WriteString("," + f.key + "=" + strconv.Quote(f.owner))
		}
	}
	return b.String()
}

// rejectionReason is the audit reason of an HTTP 401, 403 or 400
// invalid_request and its class
// for custos_auth_failures_total.
func rejectionReason(status int, wwwAuthenticate string, c *caller) (reason, class string) {
	switch {
	case status == http.StatusBadRequest:
		class = ReasonInvalidRequest
	case strings.Contains(wwwAuthenticate, `error="insufficient_scope"`):
		class = ReasonInsufficientScope
	case strings.Contains(wwwAuthenticate, `error="invalid_token"`):
		class = ReasonInvalidToken
	case status == http.StatusUnauthorized:
		class = ReasonNoToken
	case c.mismatch:
		class = ReasonSessionMismatch
	case c.badHost:
		class = ReasonInvalidHost // TestHostHeaderIsNotQuotedBack
	default:
		class = ReasonCrossOrigin
	}
	reason = "http_" + strconv.Itoa(status) + "," + class
	if class == ReasonInvalidToken {
		if code := oauth.RejectionCode(wwwAuthenticate); code != "" {
			reason += "," + code // expired, wrong_audience, wrong_issuer, ...
		} else if c.expired {
			// A dev token past its expires_at: answered as an unknown
			// token, recorded as an expired OAuth token is.
			reason += ",expired"
		}
	}
	return reason, class
}
