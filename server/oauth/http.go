package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/custos-mcp/custos/server/clientaddr"
)

// RequiredScope returns the scope an MCP method requires beyond a valid
// token: ScopeList for resources/list, resources/templates/list and
// completion/complete (suggestions are listings); ScopeRead for
// resources/read and for resources/subscribe, resources/unsubscribe and
// subscriptions/listen (an update notification tells that a resource's
// content changed); "" for anything else (initialize, ping, ...).
func (v *Verifier) RequiredScope(mcpMethod string) string {
	switch mcpMethod {
	case "resources/list", "resources/templates/list", "completion/complete":
		return v.cfg.ScopeList
	case "resources/read", "resources/subscribe", "resources/unsubscribe", "subscriptions/listen":
		return v.cfg.ScopeRead
	}
	return ""
}

// lackedScopes is every scope that RequiredScope asks of one of methods and
// c does not grant, once each in the order first asked, space-separated
// (RFC 6750 §3 scope); "" when c may call them all.
func (v *Verifier) lackedScopes(c *Claims, methods []string) string {
	var lacked []string
	for _, m := range methods {
		if scope := v.RequiredScope(m); CheckScope(c, scope) != nil && !slices.Contains(lacked, scope) {
			lacked = append(lacked, scope)
		}
	}
	return strings.Join(lacked, " ")
}

// CheckScope returns an error wrapping ErrInsufficientScope unless scope is
// "" or granted by c.
func CheckScope(c *Claims, scope string) error {
	if scope == "" || c.HasScope(scope) {
		return nil
	}
	return fmt.Errorf("%w: token lacks the required scope", ErrInsufficientScope)
}

// PurposeOfUse returns the caller's purpose of use: the purpose claim if
// present, else the PurposeHeader of h. If both are present they must be
// equal. A present value must be a known code; "" (neither present) is
// returned without error, for the policy to deny. Errors wrap ErrPurpose and
// do not echo the value.
//
// It takes the header rather than the request so that MCP handlers can pass
// mcp.RequestExtra.Header as well as an HTTP middleware r.Header.
func (v *Verifier) PurposeOfUse(h http.Header, c Claims) (string, error) {
	fromHeader := strings.TrimSpace(h.Get(v.cfg.PurposeHeader))
	if len(h.Values(v.cfg.PurposeHeader)) > 1 {
		return "", fmt.Errorf("%w: header %s given more than once", ErrPurpose, v.cfg.PurposeHeader)
	}
	p := c.PurposeOfUse
	switch {
	case p != "" && fromHeader != "" && p != fromHeader:
		return "", fmt.Errorf("%w: claim %q and header %s disagree", ErrPurpose, v.cfg.PurposeClaim, v.cfg.PurposeHeader)
	case p == "":
		p = fromHeader
	}
	if p != "" && !v.known[p] {
		return "", fmt.Errorf("%w: not a known HL7 PurposeOfUse code", ErrPurpose)
	}
	return p, nil
}

// ResourceMetadataURL is the RFC 9728 metadata URL advertised in challenges.
func (v *Verifier) ResourceMetadataURL() string { return v.cfg.ResourceMetadataURL }

// MetadataPath is the path to mount MetadataHandler on: the path of
// ResourceMetadataURL, /.well-known/oauth-protected-resource followed by
// the path of Audience (RFC 9728 §3.1).
func (v *Verifier) MetadataPath() string {
	u, err := url.Parse(v.cfg.ResourceMetadataURL)
	if err != nil { // validated by New
		return "/.well-known/oauth-protected-resource"
	}
	return u.Path
}

// Metadata is the RFC 9728 protected resource metadata of this server.
func (v *Verifier) Metadata() *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               v.cfg.Audience,
		AuthorizationServers:   []string{v.cfg.Issuer},
		ScopesSupported:        []string{v.cfg.ScopeList, v.cfg.ScopeRead},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           v.cfg.ResourceName,
	}
}

// MetadataHandler serves Metadata as JSON (GET, with CORS, via the MCP
// SDK's ProtectedResourceMetadataHandler). Mount it at MetadataPath.
func (v *Verifier) MetadataHandler() http.Handler {
	return auth.ProtectedResourceMetadataHandler(v.Metadata())
}

// Challenge writes an RFC 6750 §3 error response:
//
//   - status 401, err wrapping ErrMissing (or nil): WWW-Authenticate: Bearer
//     resource_metadata="…", scope="…" — no error code (§3.1);
//   - status 401, any other err: the same plus error="invalid_token",
//     error_description="…" (a fixed text per sentinel, never the token);
//   - status 403: error="insufficient_scope" and scope=requiredScope.
//
// scope is requiredScope if set, else all scopes this server knows. Other
// statuses are written as plain errors without a challenge.
func (v *Verifier) Challenge(w http.ResponseWriter, status int, err error, requiredScope string) {
	scope := requiredScope
	if scope == "" {
		scope = v.cfg.ScopeList + " " + v.cfg.ScopeRead
	}
	params := []string{
		fmt.Sprintf(`resource_metadata="%s"`, v.cfg.ResourceMetadataURL),
		fmt.Sprintf(`scope="%s"`, scope),
	}
	switch status {
	case http.StatusUnauthorized:
		if err != nil && !errors.Is(err, ErrMissing) {
			params = append(params, `error="invalid_token"`,
				fmt.Sprintf(`error_description="%s"`, description(err)))
		}
	case http.StatusForbidden:
		params = append(params, `error="insufficient_scope"`)
	default:
		http.Error(w, http.StatusText(status), status)
		return
	}
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	http.Error(w, http.StatusText(status), status)
}

// InvalidRequest writes RFC 6750 §3.1's answer to a malformed request
// (err wrapping ErrMalformedRequest): 400 with WWW-Authenticate: Bearer
// error="invalid_request" and a fixed error_description that names what
// is wrong, never a header's or the URI's value.
func InvalidRequest(w http.ResponseWriter, err error) {
	desc, fix := "malformed Authorization header", "send one Authorization: Bearer <token> header"
	switch {
	case errors.Is(err, errTwoHeaders):
		desc = "more than one Authorization header"
	case errors.Is(err, errTokenInURI):
		desc, fix = "access token in the URI query", "send it only in an Authorization: Bearer <token> header, and treat the token as disclosed"
	}
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_request", error_description="`+desc+`"`)
	http.Error(w, "bad request: "+desc+": "+fix, http.StatusBadRequest)
}

// rejections pairs each sentinel with its fixed, quote-free
// error_description and the short code audit records use.
var rejections = []struct {
	err        error
	text, code string
}{
	{ErrExpired, "token expired", "expired"},
	{ErrNotYetValid, "token not yet valid", "not_yet_valid"},
	{ErrAudience, "token not issued for this resource", "wrong_audience"},
	{ErrIssuer, "token from an untrusted issuer", "wrong_issuer"},
	{ErrJWKS, "signing keys unavailable", "jwks_unavailable"},
	{ErrJWKSStale, "signing keys out of date", "jwks_stale"},
}

// description is the fixed error_description for err's sentinel.
func description(err error) string {
	for _, r := range rejections {
		if errors.Is(err, r.err) {
			return r.text
		}
	}
	return "token invalid"
}

// RejectionCode maps a WWW-Authenticate error_description written by
// Challenge back to a short code for audit records ("expired",
// "wrong_audience", "wrong_issuer", "not_yet_valid", "jwks_unavailable",
// "jwks_stale";
// "invalid" for any other invalid token, "" if the header has none).
func RejectionCode(wwwAuthenticate string) string {
	_, rest, ok := strings.Cut(wwwAuthenticate, `error_description="`)
	if !ok {
		return ""
	}
	text, _, _ := strings.Cut(rest, `"`)
	for _, r := range rejections {
		if text == r.text {
			return r.code
		}
	}
	return "invalid"
}

// The ErrMalformedRequest cases InvalidRequest tells apart.
var (
	errTwoHeaders  = fmt.Errorf("%w: more than one Authorization header", ErrMalformedRequest)
	errNotOneToken = fmt.Errorf("%w: not one token after Bearer", ErrMalformedRequest)
	errTokenInURI  = fmt.Errorf("%w: a token parameter in the URI query", ErrMalformedRequest)
)

// BearerToken extracts the token of an "Authorization: Bearer <token>"
// header; it returns ErrMissing if there is none (or another scheme) and
// ErrMalformedRequest if the header is given more than once or is
// malformed, or if the URI query has a token parameter (RFC 6750 §2.3's
// access_token, or another name a token is carried by: tokenParams), with
// or without the header: custos takes tokens from the header
// only (as MCP requires of clients), and a request that put one in its URI
// is refused rather than served on the header or answered as if no token
// had been sent.
func BearerToken(r *http.Request) (string, error) {
	if r.URL != nil && tokenInQuery(r.URL.RawQuery) {
		return "", errTokenInURI
	}
	vals := r.Header.Values("Authorization")
	switch len(vals) {
	case 0:
		return "", ErrMissing
	case 1:
	default:
		return "", errTwoHeaders
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", ErrMissing // another scheme: challenge for Bearer
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || strings.ContainsAny(tok, " \t") {
		return "", errNotOneToken
	}
	return tok, nil
}

// tokenParams are the query parameter names, lower case, that carry a
// token: RFC 6750 §2.3's access_token, and the names clients and
// libraries use for one (a token, an ID token or refresh token, a JWT, an
// API key). custos's endpoints take no query parameter, so refusing them
// refuses no request it would serve; serving them kept the token in every
// access log on the way (TestTokenInTheURIQueryIsRefused).
var tokenParams = map[string]bool{
	"access_token": true, "access-token": true, "accesstoken": true,
	"token": true, "id_token": true, "refresh_token": true, "bearer": true,
	"jwt": true, "api_key": true, "apikey": true, "authorization": true,
}

// tokenInQuery reports whether a URI query has a parameter named as a
// token carrier (tokenParams), whatever its case ("?ACCESS_TOKEN=" and
// "?token=" were served), splitting it at "&" and at ";" (which some
// servers and proxies treat as a separator too): net/url's Query drops a
// pair holding a semicolon whole, so "?x=1;access_token=T" next to a good
// header was served (TestTokenInTheURIQueryIsRefused).
func tokenInQuery(raw string) bool {
	for raw != "" {
		var pair string
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			pair, raw = raw[:i], raw[i+1:]
		} else {
			pair, raw = raw, ""
		}
		name, _, _ := strings.Cut(pair, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if tokenParams[strings.ToLower(name)] {
			return true
		}
	}
	return false
}

// claimsKey is the TokenInfo.Extra key and context key for Claims.
const claimsKey = "custos.oauth.claims"

// remoteKey is the TokenInfo.Extra key of the remote address of the HTTP
// request whose token was verified (see RemoteAddrFromTokenInfo).
const remoteKey = "custos.oauth.remote"

type ctxKey struct{}

// ClaimsFromTokenInfo returns the Claims a TokenVerifier or Middleware
// attached to ti.
func ClaimsFromTokenInfo(ti *auth.TokenInfo) (Claims, bool) {
	if ti == nil {
		return Claims{}, false
	}
	c, ok := ti.Extra[claimsKey].(Claims)
	return c, ok
}

// RemoteAddrFromTokenInfo returns the source address of the HTTP request
// the TokenInfo was made for (clientaddr.Of: the TCP peer's host:port, or
// the client a trusted proxy named), or "" when it is not known. It
// is the caller's network address for the audit record (hipaa.md: every
// record carries the source address); the TokenInfo is made per request,
// never cached, so it is always the current request's.
func RemoteAddrFromTokenInfo(ti *auth.TokenInfo) string {
	if ti == nil {
		return ""
	}
	a, _ := ti.Extra[remoteKey].(string)
	return a
}

// ClaimsFromContext returns the Claims Middleware attached to the request
// context.
func ClaimsFromContext(ctx context.Context) (Claims, bool) {
	c, ok := ctx.Value(ctxKey{}).(Claims)
	return c, ok
}

// TokenInfo converts verified claims to the MCP SDK's TokenInfo, with the
// Claims under Extra (see ClaimsFromTokenInfo).
func TokenInfo(c Claims) *auth.TokenInfo {
	return &auth.TokenInfo{
		Scopes:     c.Scopes,
		Expiration: c.Expiry,
		UserID:     c.Subject,
		Extra:      map[string]any{claimsKey: c},
	}
}

// TokenVerifier adapts Verify to auth.RequireBearerToken. Errors wrap
// auth.ErrInvalidToken (401). Note that the SDK middleware's challenge
// carries no error code and compares Expiration without our skew; prefer
// Middleware, which writes RFC 6750 challenges.
func (v *Verifier) TokenVerifier() auth.TokenVerifier {
	return func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		c, err := v.Verify(ctx, token)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, err)
		}
		ti := TokenInfo(c)
		if r != nil {
			ti.Extra[remoteKey] = clientaddr.Of(r)
		}
		return ti, nil
	}
}

// Middleware authenticates every request before next sees it: a missing or
// invalid token gets a 401 challenge; then methods (if not nil) names the
// MCP methods of the request (one for a single message, one per message of
// a JSON-RPC batch, none for a GET or DELETE), and a token lacking
// RequiredScope of any of them gets one 403 challenge naming every scope
// it lacks: a batch is served whole or not at all (a methods error gets
// 400 naming it, one wrapping ErrBodyTooLarge 413; methods' errors must
// not quote the body). On success the
// Claims are in
// the request context (ClaimsFromContext) and, through the SDK's
// RequireBearerToken, in auth.TokenInfoFromContext, which the MCP
// streamable handler passes on as RequestExtra.TokenInfo.
//
// methods must leave r.Body readable for next (e.g. read it and replace it).
func (v *Verifier) Middleware(next http.Handler, methods func(r *http.Request) ([]string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := BearerToken(r)
		if errors.Is(err, ErrMalformedRequest) {
			InvalidRequest(w, err)
			return
		}
		if err != nil {
			v.Challenge(w, http.StatusUnauthorized, err, "")
			return
		}
		c, err := v.Verify(r.Context(), tok)
		if err != nil {
			// Anyone can send refused tokens, thousands a second (the
			// audit log records them, in aggregate; the metrics count
			// them): one is logged at info per logEvery, so the operator
			// still sees why tokens are refused (an issuer sending a claim
			// of the wrong type, say), the others at debug. Stale keys
			// refuse every caller and the operator must act: a warning,
			// also at most one per logEvery.
			level := slog.LevelDebug
			switch {
			case errors.Is(err, ErrJWKSStale):
				if due(&v.lastStaleWarn, v.cfg.Now()) {
					level = slog.LevelWarn
				}
			case due(&v.lastRejectInfo, v.cfg.Now()):
				level = slog.LevelInfo
			}
			v.cfg.Logger.Log(r.Context(), level, "oauth: token rejected", "err", err, "remote", clientaddr.Of(r))
			v.Challenge(w, http.StatusUnauthorized, err, "")
			return
		}
		if methods != nil {
			ms, err := methods(r)
			if errors.Is(err, ErrBodyTooLarge) {
				// 413 (RFC 9110 15.5.14), as the MCP handler answers with
				// dev tokens; it was 400 (TestBodyOverTheLimitIsContentTooLarge).
				http.Error(w, strings.TrimPrefix(err.Error(), "oauth: "), http.StatusRequestEntityTooLarge)
				return
			}
			if err != nil {
				// The methods func's errors name what is wrong with the body's
				// shape, never its content.
				http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
				return
			}
			if lacked := v.lackedScopes(&c, ms); lacked != "" {
				v.Challenge(w, http.StatusForbidden, ErrInsufficientScope, lacked)
				return
			}
		}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, c))
		ti := TokenInfo(c)
		ti.Extra[remoteKey] = clientaddr.Of(r)
		auth.RequireBearerToken(func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
			return ti, nil
		}, &auth.RequireBearerTokenOptions{ClockSkew: v.cfg.Skew})(next).ServeHTTP(w, r)
	})
}

// logEvery is the least time between two log lines above debug level
// about refused tokens, one bound for the info lines and one for the
// stale-keys warnings (Middleware).
const logEvery = 10 * time.Second

// due reports whether a line is to be logged now, given when the last one
// was (*last, unix nanoseconds, 0 for never), and if so records now.
func due(last *atomic.Int64, now time.Time) bool {
	n, l := now.UnixNano(), last.Load()
	if l != 0 && n-l < int64(logEvery) {
		return false
	}
	return last.CompareAndSwap(l, n)
}
