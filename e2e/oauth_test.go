package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// issuer is a real local OAuth issuer: a loopback JWKS endpoint and an
// ES256 key that signs access tokens.
type issuer struct {
	srv    *httptest.Server
	key    *ecdsa.PrivateKey
	signer jose.Signer
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwk := jose.JSONWebKey{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk}})
	}))
	t.Cleanup(srv.Close)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	return &issuer{srv: srv, key: key, signer: signer}
}

func (is *issuer) token(t *testing.T, aud, iss string, exp time.Duration, scope string, extra map[string]any) string {
	t.Helper()
	now := time.Now()
	claims := jwt.Claims{Issuer: iss, Subject: "dr-oauth", Audience: jwt.Audience{aud},
		Expiry: jwt.NewNumericDate(now.Add(exp)), IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute)), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute))}
	custom := map[string]any{"scope": scope, "roles": []string{"clinician"}, "tenant": "general-hospital",
		"patients": []string{}, "azp": "oauth-assistant", "purpose_of_use": "TREAT"}
	for k, v := range extra {
		custom[k] = v
	}
	tok, err := jwt.Signed(is.signer).Claims(claims).Claims(custom).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestOAuthResourceServer: custos verifies real JWT access tokens from a
// local issuer: the TypeScript SDK and go-sdk clients read with a good
// token; wrong audience, wrong issuer, expired and missing-scope tokens and
// a cross-origin request get 401/403 with the right WWW-Authenticate, and
// every rejection is an audit record.
func TestOAuthResourceServer(t *testing.T) {
	d := newDataset(t)
	is := newIssuer(t)
	iss := is.srv.URL
	// The clinician's care team, for the token's patients claim.
	var pf struct{ Patients []string }
	b, _ := os.ReadFile(d.principal("clinician"))
	json.Unmarshal(b, &pf)

	// The audience is this server's canonical URL: fixed port so it is known.
	ln, _ := (&net0{}).free(t)
	aud := "http://" + ln + "/mcp"
	srv := serve(t, d, nil, "--dev", "--listen", ln,
		"--oauth-issuer", iss, "--oauth-jwks", iss+"/jwks", "--oauth-audience", aud)
	url := srv.url

	good := is.token(t, aud, iss, time.Hour, "resources:list resources:read", map[string]any{"patients": pf.Patients})
	ts := runTSClient(t, url, good)
	if ts.Fatal != "" || len(ts.Resources.Pages) == 0 || len(ts.Resources.Pages[0].URIs) == 0 {
		t.Fatalf("TypeScript client with a good token: %+v", ts)
	}
	cs := connect(t, url, good)
	ctx := context.Background()
	page, err := cs.ListResources(ctx, nil)
	if err != nil || len(page.Resources) == 0 {
		t.Fatalf("go-sdk list with a good token: %v", err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: page.Resources[0].URI}); err != nil {
		t.Fatalf("read with a good token: %v", err)
	}

	// A good token whose purpose of use (header) is not a known code: the
	// request is refused and audited as no_identity.
	noPurpose := is.token(t, aud, iss, time.Hour, "resources:list resources:read", map[string]any{"purpose_of_use": nil})
	bad, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-bad-purpose", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: headers{map[string]string{
			"Authorization": "Bearer " + noPurpose, "X-Purpose-Of-Use": "SHOPPING"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.ListResources(ctx, nil); err == nil {
		t.Fatal("a request with an unknown purpose of use was served")
	}
	bad.Close()

	post := func(tok, origin, method string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{"uri":"x"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name, tok, origin, method string
		status                    int
		challenge                 string
	}{
		{"no token", "", "", "resources/list", 401, `resource_metadata="`},
		{"wrong audience", is.token(t, "http://other/mcp", iss, time.Hour, "resources:list resources:read", nil), "", "resources/list", 401, `error="invalid_token", error_description="token not issued for this resource"`},
		{"wrong issuer", is.token(t, aud, "http://evil", time.Hour, "resources:list resources:read", nil), "", "resources/list", 401, `error="invalid_token", error_description="token from an untrusted issuer"`},
		{"expired", is.token(t, aud, iss, -time.Hour, "resources:list resources:read", nil), "", "resources/list", 401, `error="invalid_token", error_description="token expired"`},
		{"list-only token reads", is.token(t, aud, iss, time.Hour, "resources:list", nil), "", "resources/read", 403, `scope="resources:read", error="insufficient_scope"`},
		{"read-only token lists", is.token(t, aud, iss, time.Hour, "resources:read", nil), "", "resources/list", 403, `scope="resources:list", error="insufficient_scope"`},
		{"cross-origin", good, "https://evil.example", "resources/list", 403, "-"},
	} {
		resp := post(tc.tok, tc.origin, tc.method)
		wa := resp.Header.Get("WWW-Authenticate")
		if tc.challenge == "-" && wa != "" {
			t.Errorf("%s: unexpected challenge %q", tc.name, wa)
		}
		if resp.StatusCode != tc.status || (tc.challenge != "-" && !strings.Contains(wa, tc.challenge)) {
			t.Errorf("%s: %d %q, want %d with %s", tc.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tc.status, tc.challenge)
		}
	}
	// An access token in the URI query is refused, even next to a good
	// header, and never quoted (probing this binary found it served).
	raw := func(method, target, tok string, h map[string]string, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b)+resp.Header.Get("WWW-Authenticate"), tok) {
			t.Errorf("%s %s: the answer quotes the token", method, target)
		}
		return resp
	}
	list := `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{}}`
	stateless := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/list"}
	listStateless := `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	if resp := raw("POST", url, good, stateless, listStateless); resp.StatusCode != 200 {
		t.Fatalf("a stateless list with the good token: %d", resp.StatusCode)
	}
	if resp := raw("POST", url+"?access_token="+good, good, stateless, listStateless); resp.StatusCode != 400 ||
		resp.Header.Get("WWW-Authenticate") != `Bearer error="invalid_request", error_description="access token in the URI query"` {
		t.Errorf("token in the URI query: %d %q, want 400 invalid_request", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// A 2025-11-25 session is bound to the principal that opened it, not
	// to its sub: the same sub in another tenant, or through another
	// client, may neither use nor end it (probing this binary found both
	// served 200 and the session ended by the other tenant's DELETE).
	old := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	init := raw("POST", url, good, old, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	sid := init.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize (2025-11-25): %d, no session", init.StatusCode)
	}
	old["Mcp-Session-Id"] = sid
	raw("POST", url, good, old, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	otherTenant := is.token(t, aud, iss, time.Hour, "resources:list resources:read", map[string]any{"tenant": "other-hospital", "patients": pf.Patients})
	otherClient := is.token(t, aud, iss, time.Hour, "resources:list resources:read", map[string]any{"azp": "other-assistant", "patients": pf.Patients})
	if resp := raw("POST", url, otherTenant, old, list); resp.StatusCode != 403 {
		t.Errorf("the same sub of another tenant in the session: %d, want 403", resp.StatusCode)
	}
	if resp := raw("DELETE", url, otherClient, old, ""); resp.StatusCode != 403 {
		t.Errorf("the same sub through another client ending the session: %d, want 403", resp.StatusCode)
	}
	if resp := raw("POST", url, good, old, list); resp.StatusCode != 200 {
		t.Errorf("the owner in its session after the attempts: %d, want 200", resp.StatusCode)
	}

	// RFC 9728 metadata.
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	json.NewDecoder(resp.Body).Decode(&md)
	resp.Body.Close()
	if md.Resource != aud || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != iss {
		t.Errorf("protected resource metadata: %+v", md)
	}
	cs.Close()
	srv.stop(t)

	var rejects []string
	reads, noIdentity := 0, 0
	for _, r := range d.records(t) {
		switch {
		case r.Action == "auth/reject":
			// A 403's record names the caller whose token verified (the
			// cross-origin request carried a good token).
			if strings.HasPrefix(r.Reason, "http_403,") && r.Principal.Sub != "dr-oauth" {
				t.Errorf("%s recorded with principal %q, want the caller dr-oauth", r.Reason, r.Principal.Sub)
			}
			if agg, _, ok := strings.Cut(r.Reason, ",window="); ok {
				r.Reason = agg // the window's times vary
			}
			rejects = append(rejects, r.Reason)
		case r.Reason == "no_identity":
			noIdentity++
		case r.Action == "resources/read" && r.Outcome == "allow":
			reads++
			if r.Principal.Sub != "dr-oauth" || r.Principal.ClientID != "oauth-assistant" || r.PurposeOfUse != "TREAT" {
				t.Errorf("read record principal %+v purpose %s", r.Principal, r.PurposeOfUse)
			}
		}
	}
	// The second insufficient_scope refusal (same source, principal and
	// reason) is counted, and written as an aggregate at shutdown.
	// A refusal naming the caller names its tenant; a session_mismatch
	// also what of the session owner's principal differs.
	want := `http_401,no_token http_401,invalid_token,wrong_audience http_401,invalid_token,wrong_issuer http_401,invalid_token,expired http_403,insufficient_scope,tenant="general-hospital" http_403,cross_origin,tenant="general-hospital" http_400,invalid_request http_403,session_mismatch,tenant="other-hospital",owner_tenant="general-hospital" http_403,session_mismatch,tenant="general-hospital",owner_client="oauth-assistant" http_403,insufficient_scope,tenant="general-hospital",aggregate,count=1`
	if noIdentity != 1 {
		t.Errorf("%d no_identity records for the unknown purpose of use, want 1", noIdentity)
	}
	if strings.Join(rejects, " ") != want || reads < 1 {
		t.Fatalf("auth/reject records %v (want %s), %d reads", rejects, want, reads)
	}
	for _, leak := range []string{good} {
		if strings.Contains(srv.stderr.String(), leak) {
			t.Error("the server log contains a token")
		}
	}
}

type net0 struct{}

// free returns a loopback address with a port that was free a moment ago.
func (net0) free(t *testing.T) (string, error) {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr, nil
}

type headers struct{ h map[string]string }

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}
