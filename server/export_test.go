package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/custos-mcp/custos/store"
)

// SetMaxListenURIs lowers the per-listen URI bound for a test and returns
// the function that restores it.
func SetMaxListenURIs(n int) (restore func()) {
	old := maxListenURIs
	maxListenURIs = n
	return func() { maxListenURIs = old }
}

// WithExpiry returns id with its credential expiring at t, as an OAuth
// token's exp sets it.
func WithExpiry(id Identity, t time.Time) Identity {
	id.expires = t
	return id
}

// SetTokensClock sets the clock t checks token expiries on.
func SetTokensClock(t *Tokens, now func() time.Time) { t.now = now }

// ResearchAlias is the research alias of a catalog id under key.
func ResearchAlias(key []byte, tenant, id string) string { return researchAlias(key, tenant, id) }

// PatientOf is patientOf of a server on catalog, with its fast paths, and
// lookupPatientOf, the plain catalog lookup it must agree with.
func PatientOf(catalog Catalog) (fast, plain func(store.URI) string) {
	s := &Server{cfg: Config{Catalog: catalog}}
	return s.patientOf, func(u store.URI) string { id, _ := s.lookupPatientOf(u); return id }
}

// PlainAliasesBuilt reports whether the server built the research alias
// index of the whole catalog (aliases.real), which an indexed catalog
// never needs.
func (s *Server) PlainAliasesBuilt() bool {
	s.aliases.mu.Lock()
	defer s.aliases.mu.Unlock()
	return s.aliases.real != nil
}

// AliasedTenants are the tenants whose research aliases the server has
// made (per audit key and catalog index).
func (s *Server) AliasedTenants() []string {
	s.aliases.mu.Lock()
	defer s.aliases.mu.Unlock()
	var out []string
	for t := range s.aliases.tenants {
		out = append(out, t)
	}
	return out
}

// CountBodyWork has fn told of every read of a request body ahead of the
// go-sdk and of every decoding of it ("read", "message", "meta", "batch")
// and returns the function that stops it. Not for parallel tests.
func CountBodyWork(fn func(kind string)) (restore func()) {
	countDecode.Store(&fn)
	return func() { countDecode.Store(nil) }
}

// PlainPeeks has every check before the go-sdk read and decode the body
// anew, through the previous check's reader, as each did before the body
// memo (plainBodyOf), and returns the function that restores the memo.
// The reference of TestBodyMemoAgreesWithPlainPeeks; not for parallel
// tests.
func PlainPeeks() (restore func()) {
	plain := plainBodyOf
	plainBody.Store(&plain)
	return func() { plainBody.Store(nil) }
}

// plainBodyOf is the plain peekBody path: it reads up to maxBody+1 bytes
// of a POST's body, puts them back in front of the rest, and keeps no
// memo (the peekedBody it returns is not the request's body).
func plainBodyOf(r *http.Request) *peekedBody {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), rest), rest}
	return &peekedBody{bodyMemo: newBodyMemo(b), err: err}
}

// RoutedHandler is the chain of HTTPHandler from the rate limit to the
// go-sdk's handlers (and OAuthHandler's method check, jsonrpcMethods), with
// sdk's handlers in place of the SDK's: "stateful" (behind the session
// cap), "stateless" and "statelessJSON". method is told what
// jsonrpcMethods returned.
func (s *Server) RoutedHandler(sdk func(name string) http.Handler, method func([]string, error)) http.Handler {
	routed := s.rateLimited(s.routeMCP(newSessionCap(s, s.newMCPServer(bearerIdentity)).handler(sdk("stateful")), sdk("stateless"), sdk("statelessJSON")))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method(jsonrpcMethods(r))
		routed.ServeHTTP(w, r)
	})
}

// EmptyURIForTest is the stand-in emptyName puts in place of an empty
// uri.
func EmptyURIForTest(s *Server) string { return s.emptyURI }

// DevTokenIdentity is the Identity toks gives token's bearer, as the HTTP
// handler sees it (with the credential a subscription checks).
func DevTokenIdentity(toks *Tokens, token string) (Identity, error) {
	info, err := toks.Verify(context.Background(), token, httptest.NewRequest("POST", "/mcp", nil))
	if err != nil {
		return Identity{}, err
	}
	return info.Extra[tokenInfoKey].(Identity), nil
}
