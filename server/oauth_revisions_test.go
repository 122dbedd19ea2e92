package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/oauth"
)

// oauthServer serves f.srv's OAuthHandler with a real local issuer (JWKS
// over loopback HTTP, ES256) and returns the MCP URL and a token minter.
func (f *fixture) oauthServer(t *testing.T) (string, func(persona, scope string) string) {
	t.Helper()
	url, mint := f.oauthServerWith(t)
	return url, func(persona, scope string) string { return mint(persona, scope, nil) }
}

// oauthServerWith is oauthServer whose minter sets or replaces the claims
// of extra (e.g. another tenant or azp for the persona's sub).
func (f *fixture) oauthServerWith(t *testing.T) (string, func(persona, scope string, extra map[string]any) string) {
	t.Helper()
	h, mint := f.oauthHandlerWith(t)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + server.MCPPath, mint
}

// oauthHandlerWith is oauthServerWith's handler, to be served by the test.
func (f *fixture) oauthHandlerWith(t *testing.T) (http.Handler, func(persona, scope string, extra map[string]any) string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}})
	is := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(jwks)
	}))
	t.Cleanup(is.Close)
	const aud = "https://custos.test/mcp"
	v, err := oauth.New(context.Background(), oauth.Config{Issuer: is.URL, JWKSURL: is.URL + "/jwks", Audience: aud})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	mint := func(persona, scope string, extra map[string]any) string {
		id := f.identity(persona)
		now := time.Now()
		claims := map[string]any{
			"iss": is.URL, "sub": id.Principal.Sub, "aud": aud, "azp": id.Principal.ClientID,
			"exp": now.Add(5 * time.Minute).Unix(), "iat": now.Add(-time.Minute).Unix(), "nbf": now.Add(-time.Minute).Unix(),
			"jti": persona + scope, "scope": scope, "roles": id.Principal.Roles, "tenant": id.Principal.Tenant,
			"patients": id.Principal.Patients, "purpose_of_use": id.PurposeOfUse,
		}
		for k, v := range extra {
			claims[k] = v
		}
		tok, err := jwt.Signed(signer).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return f.srv.OAuthHandler(v), mint
}

// The OAuth endpoint serves both revisions through the same token, scope
// and audit checks.
func TestOAuthServesBothProtocolRevisions(t *testing.T) {
	f := newFixture(t, "")
	url, mint := f.oauthServer(t)
	full := mint("clinician", "resources:list resources:read")
	listOnly := mint("clinician", "resources:list")
	for _, rev := range []string{rev2025, rev2026} {
		t.Run(rev, func(t *testing.T) {
			hs := &httpServer{url: url, tokens: map[string]string{"full": full, "list": listOnly}}
			cs := hs.connect(t, "full", rev)
			if got := cs.InitializeResult().ProtocolVersion; got != rev || (cs.ID() != "") != (rev == rev2025) {
				t.Fatalf("negotiated %s session %q", got, cs.ID())
			}
			res, err := cs.ListResources(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			before := len(f.records())
			if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: res.Resources[0].URI}); err != nil {
				t.Fatal(err)
			}
			if r := f.records()[before]; r.Action != server.ActionRead || r.Outcome != audit.OutcomeAllow || !strings.HasPrefix(r.Source, "127.0.0.1:") || r.Session != cs.ID() {
				t.Fatalf("read audited as %s/%s source %q session %q", r.Action, r.Outcome, r.Source, r.Session)
			}

			// The read scope is checked on both revisions.
			ro := hs.connect(t, "list", rev)
			before = len(f.records())
			if _, err := ro.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: res.Resources[0].URI}); err == nil {
				t.Fatal("read with a list-only token succeeded")
			}
			// The first refusal of its kind (source, principal, reason) is
			// recorded on its own, with the caller's principal; the second,
			// on the other revision, is counted for the aggregate record.
			recs := f.records()[before:]
			if rev == rev2026 {
				if len(recs) != 0 {
					t.Fatalf("a repeated refusal was recorded on its own: %d records", len(recs))
				}
				return
			}
			if len(recs) != 1 || recs[0].Action != server.ActionAuthReject || recs[0].Reason != "http_403,insufficient_scope"+tenantSuffix(f, "clinician") || recs[0].Principal.Sub != f.identity("clinician").Principal.Sub {
				for _, r := range recs {
					t.Logf("%s/%s %q by %q", r.Action, r.Outcome, r.Reason, r.Principal.Sub)
				}
				t.Fatal("insufficient scope not audited as one auth/reject naming the caller")
			}
		})
	}
	before := len(f.records())
	f.srv.Close(context.Background())
	recs := f.records()[before:]
	if len(recs) != 1 || !strings.HasPrefix(recs[0].Reason, "http_403,insufficient_scope"+tenantSuffix(f, "clinician")+",aggregate,count=1,window=") || recs[0].Source != "127.0.0.1" {
		t.Fatalf("the repeated refusal was not flushed as one aggregate on Close: %+v", recs)
	}
}

// The scope check reads the method exactly as the SDK will: a second,
// case-changed "Method" member cannot make a read pass as a ping (found by
// review: encoding/json matches keys case-insensitively, the SDK does not).
func TestScopeCheckCannotBeFooledByACaseChangedMethod(t *testing.T) {
	f := newFixture(t, "")
	url, mint := f.oauthServer(t)
	listOnly := mint("clinician", "resources:list")
	uri := f.allURIs()[0].URI
	h26 := map[string]string{"Mcp-Protocol-Version": rev2026}
	before := len(f.records())
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + uri + `",` + meta2026("") + `},"Method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"Method":"ping","method":"resources/read","params":{"uri":"` + uri + `",` + meta2026("") + `}}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping","method":"resources/read","params":{"uri":"` + uri + `",` + meta2026("") + `}}`,
	} {
		// The headers the SDK checks against the body's exact "method".
		hdr := map[string]string{"Mcp-Method": "resources/read", "Mcp-Name": uri}
		for k, v := range h26 {
			hdr[k] = v
		}
		status, b := postRaw(t, url, listOnly, hdr, body)
		if status != http.StatusBadRequest || !strings.Contains(string(b), "ambiguous or malformed method member") {
			t.Fatalf("list-only token read through %s: %d %s", body[:60], status, b)
		}
	}
	for _, r := range f.records()[before:] {
		if r.Action == server.ActionRead {
			t.Fatalf("a read was served and audited: %s/%s", r.Action, r.Outcome)
		}
	}
}

// A request whose token verified but whose purpose of use is unknown is
// refused (no_identity) and recorded with the caller's principal and
// address, not as "unidentified" (found by probe: the record named nobody,
// so who was trying purposes the policy does not know was not on record).
func TestUnknownPurposeIsRecordedWithTheCaller(t *testing.T) {
	f := newFixture(t, "")
	url, mint := f.oauthServer(t)
	tok := mint("clinician", "resources:list resources:read")
	before := len(f.records())
	body := `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{` + meta2026("") + `}}`
	status, b := postRaw(t, url, tok, map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/list", "X-Purpose-Of-Use": "NOSUCHCODE"}, body)
	if status != http.StatusOK || !strings.Contains(string(b), "unknown purpose of use") || strings.Contains(string(b), "NOSUCHCODE") {
		t.Fatalf("unknown purpose: %d %s", status, b)
	}
	recs := f.records()[before:]
	if len(recs) != 1 || recs[0].Reason != server.ReasonNoIdentity || recs[0].Outcome != audit.OutcomeDeny {
		t.Fatalf("recorded %+v, want one no_identity refusal", recs)
	}
	r := recs[0]
	if r.Principal.Sub != f.identity("clinician").Principal.Sub || !strings.HasPrefix(r.Source, "127.0.0.1:") || r.PurposeOfUse != "" {
		t.Fatalf("no_identity recorded as %q from %q (purpose %q), want the caller %q from its address and no purpose",
			r.Principal.Sub, r.Source, r.PurposeOfUse, f.identity("clinician").Principal.Sub)
	}
}

// The rate-limit bucket is the principal's as a session is bound to it:
// sub, tenant and client. Keyed by the sub alone, a token of the same sub
// in another tenant, or through another client, emptied the bucket of the
// others (probing the binary: 16 requests of other-hospital's dr-x, then
// general-hospital's dr-x was refused 429 ten times out of ten), and the
// refusal was recorded naming the sub only, with no client or roles.
func TestRateLimitBucketIsPerPrincipal(t *testing.T) {
	f := newFixture(t, "")
	f.reconfigure(func(c *server.Config) { c.RateLimit = server.RateLimit{PerSecond: 0.001, Burst: 1} })
	url, mint := f.oauthServerWith(t)
	const scopes = "resources:list resources:read"
	id := f.identity("clinician")
	h26 := map[string]string{"Mcp-Protocol-Version": rev2026}
	body := `{"jsonrpc":"2.0","id":1,"method":"resources/templates/list","params":{` + meta2026("") + `}}`
	otherTenant := mint("clinician", scopes, map[string]any{"tenant": "other-hospital"})
	if st, _, _ := post(t, url, otherTenant, h26, body); st != http.StatusOK {
		t.Fatalf("first request of the other tenant's token: %d", st)
	}
	if st, _, _ := post(t, url, otherTenant, h26, body); st != http.StatusTooManyRequests {
		t.Fatalf("second request of the other tenant's token: %d, want 429", st)
	}
	otherClient := mint("clinician", scopes, map[string]any{"azp": "other-assistant"})
	if st, _, _ := post(t, url, otherClient, h26, body); st != http.StatusOK {
		t.Errorf("the same sub through another client, after the other tenant's ran dry: %d, want 200", st)
	}
	own := mint("clinician", scopes, nil)
	if st, _, _ := post(t, url, own, h26, body); st != http.StatusOK {
		t.Errorf("the same sub in its own tenant, after the other tenant's ran dry: %d, want 200", st)
	}
	before := len(f.records())
	if st, _, _ := post(t, url, otherClient, h26, body); st != http.StatusTooManyRequests {
		t.Fatalf("second request through the other client: %d, want 429", st)
	}
	recs := f.records()[before:]
	if len(recs) != 1 || recs[0].Action != server.ActionRateLimited || recs[0].Principal.Sub != id.Principal.Sub ||
		recs[0].Principal.ClientID != "other-assistant" || !slices.Equal(recs[0].Principal.Roles, id.Principal.Roles) {
		t.Fatalf("the refusal was recorded as %+v, want one %s naming sub %q, client other-assistant and roles %v", recs, server.ActionRateLimited, id.Principal.Sub, id.Principal.Roles)
	}
}

// Over OAuth too, a request body with a content coding is answered 415
// naming Content-Encoding, with Accept-Encoding: identity, and changes
// nothing. The OAuth middleware read the compressed bytes for the method's
// scope first and answered 400 "body is not one JSON-RPC message" (found
// by probing the binary with curl --data-binary @body.gz).
func TestCompressedBodyOverOAuthIsUnsupportedMediaType(t *testing.T) {
	f := newFixture(t, "")
	url, mint := f.oauthServer(t)
	tok := mint("clinician", "resources:list resources:read")
	for _, c := range []struct {
		name string
		hdr  map[string]string
		body string
	}{
		{rev2026, map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/list"}, `{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{` + meta2026("") + `}}`},
		{"no header", nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`},
	} {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write([]byte(c.body))
		zw.Close()
		before := len(f.records())
		hdr := map[string]string{"Content-Encoding": "gzip"}
		for k, v := range c.hdr {
			hdr[k] = v
		}
		st, h, raw := postHeaders(t, url, tok, hdr, buf.String())
		if st != http.StatusUnsupportedMediaType || !strings.Contains(string(raw), "Content-Encoding") || h.Get("Accept-Encoding") != "identity" {
			t.Errorf("%s: status %d, Accept-Encoding %q, answer %q; want 415 naming Content-Encoding", c.name, st, h.Get("Accept-Encoding"), raw)
		}
		if h.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: a session was opened", c.name)
		}
		if n := len(f.records()) - before; n != 0 {
			t.Errorf("%s: %d records written", c.name, n)
		}
	}
}

// A JSON-RPC batch (protocol revision 2025-03-26: the POST body may be "an
// array batching one or more requests and/or notifications") is served
// over OAuth as with dev tokens, when the token has the scope of every
// message; a batch with one message whose scope the token lacks is refused
// whole, 403 insufficient_scope naming that scope, and nothing of it runs.
// Over OAuth every batch was answered 400 "body is not one JSON-RPC
// message": the scope check read one method.
func TestOAuthServesABatchWithEveryScope(t *testing.T) {
	f := newFixture(t, "")
	url, mint := f.oauthServerWith(t)
	full, listOnly := mint("clinician", "resources:list resources:read", nil), mint("clinician", "resources:list", nil)
	_, hdr, _ := post(t, url, full, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	h := map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": hdr.Get("Mcp-Session-Id")}
	if h["Mcp-Session-Id"] == "" {
		t.Fatal("initialize (2025-03-26) opened no session")
	}
	post(t, url, full, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	listAndPing := `[{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{}},{"jsonrpc":"2.0","id":3,"method":"ping"}]`
	if st, raw := postRaw(t, url, full, h, listAndPing); st != http.StatusOK || strings.Count(string(raw), `"result"`) != 2 {
		t.Fatalf("a batch of a list and a ping: status %d, answer %.300s; want 2 results", st, raw)
	}
	// The session is the principal's (sub, tenant, client): a token of the
	// same principal with less scope may use it.
	if st, raw := postRaw(t, url, listOnly, h, listAndPing); st != http.StatusOK || strings.Count(string(raw), `"result"`) != 2 {
		t.Fatalf("the same batch with a list-only token: status %d, answer %.300s; want 2 results", st, raw)
	}
	before := len(f.records())
	read := `{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"phi://x"}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`[{"jsonrpc":"2.0","id":4,"method":"resources/list","params":{}},`+read+`]`))
	req.Header.Set("Authorization", "Bearer "+listOnly)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusForbidden || !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="resources:read"`) {
		t.Fatalf("a batch with a read and a list-only token: %d %q, want 403 insufficient_scope naming resources:read", resp.StatusCode, ch)
	}
	for _, r := range f.records()[before:] {
		if r.Action != server.ActionAuthReject {
			t.Errorf("a message of the refused batch ran: %s %s", r.Action, r.Outcome)
		}
	}
}

// Over OAuth a batch member that is no JSON object (1, "x") needs no
// scope: it is answered -32600 beside the batch's other members, which
// run, as with dev tokens (TestBatchMembersAreJudgedOneByOne). The scope
// check made the whole batch 400 "body is not one JSON-RPC message".
func TestOAuthJudgesBatchMembersOneByOne(t *testing.T) {
	f := newFixture(t, "")
	url, mint := f.oauthServerWith(t)
	tok := mint("clinician", "resources:list resources:read", nil)
	_, hdr, _ := post(t, url, tok, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	h := map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": hdr.Get("Mcp-Session-Id")}
	post(t, url, tok, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	st, raw := postRaw(t, url, tok, h, `[1,{"jsonrpc":"2.0","id":2,"method":"resources/list"},"x"]`)
	if got, _ := answerKeys(t, string(raw)); st != http.StatusOK || fmt.Sprint(got) != "[-32600 null -32600 null result 2]" {
		t.Fatalf("a batch of a list and two non-objects: status %d, answer %.300s; want the list's result and two -32600", st, raw)
	}
}
