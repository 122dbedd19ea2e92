package server_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
)

// A request from another origin is refused with 403 whatever its method
// (MCP 2025-11-25, Streamable HTTP: "if the Origin header is present and
// invalid, servers MUST respond with HTTP 403 Forbidden"), and the refusal
// is audited. http.CrossOriginProtection judges only unsafe methods: a GET
// with a valid token, the session's id and Origin https://evil.example
// (Sec-Fetch-Site cross-site) opened the session's SSE stream, 200, over
// dev tokens and OAuth alike.
func TestCrossOriginGETIsRefused(t *testing.T) {
	f := newFixture(t, "")
	for _, c := range f.endpoints(t) {
		t.Run(c.name, func(t *testing.T) {
			sid := rawSession(t, c.url, c.tok)
			get := func(method string, hdr map[string]string) int {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, method, c.url, nil)
				req.Header.Set("Authorization", "Bearer "+c.tok)
				req.Header.Set("Accept", "text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", rev2025)
				req.Header.Set("Mcp-Session-Id", sid)
				for k, v := range hdr {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			for _, o := range []map[string]string{
				{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
				{"Origin": "https://evil.example"},
				{"Origin": "null"},
			} {
				for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
					if st := get(m, o); st != http.StatusForbidden {
						t.Errorf("%s with %v: status %d, want 403", m, o, st)
					}
				}
			}
			// A GET without Origin (not a browser), or from the same origin,
			// still opens the stream.
			if st := get(http.MethodGet, nil); st != http.StatusOK {
				t.Errorf("GET without Origin: status %d, want 200", st)
			}
			sid = rawSession(t, c.url, c.tok) // one standalone stream per session
			if st := get(http.MethodGet, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "https://custos.test"}); st != http.StatusOK {
				t.Errorf("same-origin GET: status %d, want 200", st)
			}
		})
	}
	// The first refusal of its kind is recorded on its own, naming the
	// caller whose token verified (the rest are counted in aggregate).
	sub := f.identity("clinician").Principal.Sub
	if !slices.ContainsFunc(f.records(), func(r audit.Record) bool {
		return r.Action == server.ActionAuthReject && r.Reason == "http_403,cross_origin"+tenantSuffix(f, "clinician") && r.Principal.Sub == sub
	}) {
		t.Error("the cross-origin GET was not audited")
	}
}

// endpoint is one of the two HTTP handlers of a fixture's server, with a
// token of the clinician that it accepts.
type endpoint struct{ name, url, tok string }

// endpoints serves f.srv's dev-token handler and its OAuth handler (with a
// local issuer).
func (f *fixture) endpoints(t *testing.T) []endpoint {
	t.Helper()
	hs := f.serveHTTP("clinician")
	oauthURL, mint := f.oauthServer(t)
	return []endpoint{
		{"dev token", hs.url, hs.tokens["clinician"]},
		{"oauth", oauthURL, mint("clinician", "resources:list resources:read")},
	}
}
