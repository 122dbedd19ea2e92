package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/custos-mcp/custos/internal/syncbuf"
)

func TestChallenge(t *testing.T) {
	is := newIssuer(t, ecKey)
	v := is.verifier(t)
	const meta = `resource_metadata="https://custos.test/.well-known/oauth-protected-resource/mcp"`
	tests := []struct {
		name   string
		status int
		err    error
		scope  string
		want   string
	}{
		{"missing", 401, ErrMissing, "", `Bearer ` + meta + `, scope="resources:list resources:read"`},
		{"invalid", 401, fmt.Errorf("%w: x", ErrInvalid), "",
			`Bearer ` + meta + `, scope="resources:list resources:read", error="invalid_token", error_description="token invalid"`},
		{"expired", 401, ErrExpired, "",
			`Bearer ` + meta + `, scope="resources:list resources:read", error="invalid_token", error_description="token expired"`},
		{"audience", 401, ErrAudience, "",
			`Bearer ` + meta + `, scope="resources:list resources:read", error="invalid_token", error_description="token not issued for this resource"`},
		{"insufficient scope", 403, ErrInsufficientScope, "resources:read",
			`Bearer ` + meta + `, scope="resources:read", error="insufficient_scope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			v.Challenge(rec, tt.status, tt.err, tt.scope)
			if rec.Code != tt.status {
				t.Errorf("status = %d, want %d", rec.Code, tt.status)
			}
			if got := rec.Header().Values("WWW-Authenticate"); len(got) != 1 || got[0] != tt.want {
				t.Errorf("WWW-Authenticate =\n %q\nwant\n %q", got, tt.want)
			}
		})
	}
	rec := httptest.NewRecorder()
	v.Challenge(rec, 400, ErrPurpose, "")
	if rec.Code != 400 || rec.Header().Get("WWW-Authenticate") != "" {
		t.Errorf("400: code %d, challenge %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
}

func TestMetadata(t *testing.T) {
	is := newIssuer(t, ecKey)
	v := is.verifier(t)
	if got, want := v.MetadataPath(), "/.well-known/oauth-protected-resource/mcp"; got != want {
		t.Errorf("MetadataPath = %q, want %q", got, want)
	}
	mux := http.NewServeMux()
	mux.Handle(v.MetadataPath(), v.MetadataHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + v.MetadataPath())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	want := `{"resource":"https://custos.test/mcp","authorization_servers":["` + is.srv.URL +
		`"],"scopes_supported":["resources:list","resources:read"],"bearer_methods_supported":["header"],"resource_name":"custos"}` + "\n"
	if resp.StatusCode != 200 || string(body) != want {
		t.Errorf("metadata: %d\n got %s\nwant %s", resp.StatusCode, body, want)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}

	root := is.verifier(t, func(c *Config) { c.Audience = "https://custos.test/" })
	if got, want := root.ResourceMetadataURL(), "https://custos.test/.well-known/oauth-protected-resource"; got != want {
		t.Errorf("root ResourceMetadataURL = %q, want %q", got, want)
	}
}

func TestPurposeOfUse(t *testing.T) {
	is := newIssuer(t, ecKey)
	v := is.verifier(t)
	tests := []struct {
		name    string
		claim   string
		header  []string
		want    string
		wantErr bool
	}{
		{"claim", "TREAT", nil, "TREAT", false},
		{"header", "", []string{"HRESCH"}, "HRESCH", false},
		{"both equal", "TREAT", []string{"TREAT"}, "TREAT", false},
		{"both differ", "TREAT", []string{"HRESCH"}, "", true},
		{"unknown claim", "SHOPPING", nil, "", true},
		{"unknown header", "", []string{"treat"}, "", true},
		{"header twice", "", []string{"TREAT", "TREAT"}, "", true},
		{"neither", "", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, x := range tt.header {
				h.Add("X-Purpose-Of-Use", x)
			}
			got, err := v.PurposeOfUse(h, Claims{PurposeOfUse: tt.claim})
			if tt.wantErr {
				if !errors.Is(err, ErrPurpose) {
					t.Fatalf("err = %v, want ErrPurpose", err)
				}
				if strings.Contains(err.Error(), "SHOPPING") || strings.Contains(err.Error(), "HRESCH") {
					t.Errorf("error echoes the value: %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("PurposeOfUse = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// jsonRPCMethod is a test method extractor: the method travels in a header.
func jsonRPCMethod(r *http.Request) ([]string, error) {
	m := r.Header.Get("X-Test-Method")
	if m == "bad" {
		return nil, errors.New("unparsable")
	}
	return strings.Fields(m), nil // a batch: methods separated by spaces
}

func TestMiddleware(t *testing.T) {
	is := newIssuer(t, ecKey)
	v := is.verifier(t)
	var seen Claims
	var sdkInfo *auth.TokenInfo
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := ClaimsFromContext(r.Context())
		if !ok {
			t.Error("no claims in context")
		}
		seen, sdkInfo = c, auth.TokenInfoFromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	})
	h := v.Middleware(next, jsonRPCMethod)
	listOnly := sign(t, ecKey, is.claims(set("scope", "resources:list")))
	expired := sign(t, ecKey, is.claims(set("exp", t0.Add(-DefaultSkew*2).Unix())))
	tests := []struct {
		name, auth, method string
		code               int
		challenge          string // substring of WWW-Authenticate; "" means none expected
	}{
		{"no token", "", "resources/list", 401, `scope="resources:list resources:read"`},
		{"basic auth", "Basic dXNlcjpwYXNz", "resources/list", 401, `scope="resources:list resources:read"`},
		{"invalid", "Bearer abc.def.ghi", "resources/list", 401, `error="invalid_token"`},
		{"expired", "Bearer " + expired, "resources/list", 401, `error_description="token expired"`},
		{"list ok", "Bearer " + listOnly, "resources/list", 204, ""},
		{"templates ok", "bearer " + listOnly, "resources/templates/list", 204, ""},
		{"read needs scope", "Bearer " + listOnly, "resources/read", 403, `scope="resources:read", error="insufficient_scope"`},
		{"a batch needs every message's scope", "Bearer " + listOnly, "resources/list ping resources/read resources/subscribe", 403, `scope="resources:read", error="insufficient_scope"`},
		{"a batch within scope", "Bearer " + listOnly, "resources/list ping resources/templates/list", 204, ""},
		{"no scope needed", "Bearer " + listOnly, "initialize", 204, ""},
		{"bad method", "Bearer " + listOnly, "bad", 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen, sdkInfo = Claims{}, nil
			r := httptest.NewRequest("POST", "/mcp", nil).WithContext(context.Background())
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			r.Header.Set("X-Test-Method", tt.method)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tt.code {
				t.Fatalf("code = %d, want %d (body %q)", rec.Code, tt.code, rec.Body)
			}
			ch := rec.Header().Get("WWW-Authenticate")
			if tt.challenge == "" && ch != "" || !strings.Contains(ch, tt.challenge) {
				t.Errorf("WWW-Authenticate = %q, want it to contain %q", ch, tt.challenge)
			}
			if tt.code == 204 {
				if seen.Subject != "dr.alice" {
					t.Errorf("handler saw claims %+v", seen)
				}
				c, ok := ClaimsFromTokenInfo(sdkInfo)
				if !ok || c.Principal.Sub != "dr.alice" || sdkInfo.UserID != "dr.alice" {
					t.Errorf("SDK TokenInfo = %+v", sdkInfo)
				}
			} else if seen.Subject != "" {
				t.Error("handler ran for a rejected request")
			}
		})
	}
}

func TestTokenVerifier(t *testing.T) {
	is := newIssuer(t, ecKey)
	v := is.verifier(t)
	tv := v.TokenVerifier()
	r := httptest.NewRequest("GET", "/", nil)
	ti, err := tv(context.Background(), sign(t, ecKey, is.claims()), r)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := ClaimsFromTokenInfo(ti); !ok || c.Principal.Tenant != "org-a" || !ti.Expiration.Equal(c.Expiry) {
		t.Errorf("TokenInfo = %+v", ti)
	}
	_, err = tv(context.Background(), sign(t, ecKey, is.claims(set("iss", "x"))), r)
	if !errors.Is(err, auth.ErrInvalidToken) || !errors.Is(err, ErrIssuer) {
		t.Errorf("err = %v, want auth.ErrInvalidToken and ErrIssuer", err)
	}
}

// An access token in the URI query (RFC 6750 §2.3's access_token) is
// refused with 400 invalid_request, with or without a good Authorization
// header, and the answer never quotes it: MCP clients must send tokens in
// the header only (URIs end up in proxy and browser logs). Found by
// probing the built binary: the query was ignored, so a token there alone
// was answered as no token at all (401 without an error code), and one
// next to a good header was served.
func TestTokenInTheURIQueryIsRefused(t *testing.T) {
	is := newIssuer(t, ecKey)
	v := is.verifier(t)
	ran := false
	h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran = true
		w.WriteHeader(http.StatusNoContent)
	}), jsonRPCMethod)
	good := sign(t, ecKey, is.claims())
	for _, tc := range []struct {
		name, query, header string
		code                int
	}{
		{"in the query alone", "access_token=" + good, "", 400},
		{"in the query next to a good header", "access_token=" + good, "Bearer " + good, 400},
		{"an empty access_token next to a good header", "access_token=", "Bearer " + good, 400},
		{"another query next to a good header", "x=1", "Bearer " + good, 204},
		// net/url's Query drops a pair with a semicolon whole, so these
		// were served on the header; servers and proxies that split a
		// query at ";" too (the HTML 4 recommendation) read an
		// access_token parameter in them.
		{"after a semicolon next to a good header", "x=1;access_token=" + good, "Bearer " + good, 400},
		{"before a semicolon next to a good header", "access_token=" + good + ";x=1", "Bearer " + good, 400},
		{"a percent-encoded name next to a good header", "x=1;access%5Ftoken=" + good, "Bearer " + good, 400},
		{"a value naming access_token next to a good header", "x=access_token", "Bearer " + good, 204},
		// Any case, and the other names a token is carried by, were
		// served (the token kept in every access log on the way).
		{"ACCESS_TOKEN next to a good header", "ACCESS_TOKEN=" + good, "Bearer " + good, 400},
		{"Access_Token in the query alone", "Access_Token=" + good, "", 400},
		{"token next to a good header", "token=" + good, "Bearer " + good, 400},
		{"id_token next to a good header", "x=1&id_token=" + good, "Bearer " + good, 400},
		{"a percent-encoded TOKEN next to a good header", "%54OKEN=" + good, "Bearer " + good, 400},
		{"jwt, bearer, api_key, refresh_token", "jwt=1&bearer=2&api_key=3&refresh_token=4", "Bearer " + good, 400},
		{"a name holding token next to a good header", "tokens=1&page_token=2", "Bearer " + good, 204},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran = false
			r := httptest.NewRequest("POST", "/mcp?"+tc.query, nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			r.Header.Set("X-Test-Method", "resources/list")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tc.code || ran != (tc.code == 204) {
				t.Fatalf("code %d (handler ran: %v), want %d", rec.Code, ran, tc.code)
			}
			if tc.code != 400 {
				return
			}
			ch := rec.Header().Get("WWW-Authenticate")
			if ch != `Bearer error="invalid_request", error_description="access token in the URI query"` {
				t.Errorf("WWW-Authenticate = %q", ch)
			}
			if strings.Contains(ch+rec.Body.String(), good) || !strings.Contains(rec.Body.String(), "Authorization") {
				t.Errorf("body %q: want the fix named and no token quoted", rec.Body)
			}
			if _, err := BearerToken(r); !errors.Is(err, ErrMalformedRequest) {
				t.Errorf("BearerToken: %v, want ErrMalformedRequest", err)
			}
		})
	}
}

// Refused tokens cannot flood the operational log: anyone can send them
// (the audit log records them in aggregate, the metrics count them), so
// one is logged at info every 10 s and the others at debug; the one
// rejection the operator must act on, signing keys past
// oauth.jwks_max_staleness, is a warning at most once every 10 s, however
// many callers are refused. Found by probing the
// built binary: 4,000 requests with an expired token from one address
// (3,970 of them answered 429) wrote 3 audit records and 4,000 INFO lines
// (574 KB) in a second, enough to trip journald's rate limit and drop the
// server's own error lines with them.
func TestRejectionsDoNotFloodTheLog(t *testing.T) {
	is := newIssuer(t, ecKey)
	clk := newClock(t0)
	logs := &syncbuf.Buffer{}
	v := is.verifier(t, func(c *Config) {
		c.Now = clk.Now
		c.JWKSMaxStaleness = time.Hour
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }), nil)
	send := func(tok string) int {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	expired := sign(t, ecKey, is.claims(set("exp", t0.Add(-time.Hour).Unix())))
	for range 100 {
		send(expired)
		send("not-a-jwt")
	}
	info := func() int { return strings.Count(logs.String(), `level=INFO msg="oauth: token rejected"`) }
	if n, debug := strings.Count(logs.String(), "token rejected"), strings.Count(logs.String(), `level=DEBUG msg="oauth: token rejected"`); n != 200 || debug != 199 || info() != 1 {
		t.Fatalf("200 refused tokens logged %d times, %d at info and %d at debug; want the first at info, the others at debug", n, info(), debug)
	}
	clk.Add(10 * time.Second)
	send(expired)
	if info() != 2 {
		t.Fatalf("10 s later: %d info lines, want 2", info())
	}
	good := sign(t, ecKey, is.claims(set("exp", t0.Add(48*time.Hour).Unix())))
	is.down.Store(true)
	clk.Add(61 * time.Minute)
	for range 100 {
		if code := send(good); code != http.StatusUnauthorized {
			t.Fatalf("stale keys: %d, want 401", code)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"oauth: token rejected\""); n != 1 {
		t.Fatalf("100 refusals for stale keys logged %d warnings, want 1", n)
	}
	clk.Add(10 * time.Second)
	send(good)
	if n := strings.Count(logs.String(), "level=WARN msg=\"oauth: token rejected\""); n != 2 {
		t.Fatalf("10 s later: %d warnings, want 2", n)
	}
}
