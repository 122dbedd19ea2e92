package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/server"
)

// TestOpsEndpoints: /healthz, /readyz and /metrics on their own listener;
// requests are counted by method and outcome, and the exposition carries no
// URI, patient id or token.
func TestOpsEndpoints(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	opsFile := filepath.Join(t.TempDir(), "ops")
	srv := serve(t, d, nil, "--dev", "--listen", loopback,
		"--tokens", tokens, "--ops-listen", loopback, "--ops-addr-file", opsFile)
	opsURL := srv.waitAddr(t, opsFile)

	cs := connect(t, srv.url, tok)
	ctx := context.Background()
	page, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	uri := page.Resources[0].URI
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	missing := missingURI(uri)
	cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: missing})

	get := func(path string) (int, string) { t.Helper(); return httpGet(t, opsURL+path) }
	if code, body := get("/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"audit":"ok"`) || !strings.Contains(body, `"keys":"ok"`) || !strings.Contains(body, `"policy":"ok"`) {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	code, metrics := get("/metrics")
	for _, want := range []string{
		`custos_requests_total{method="resources/read",outcome="allow"} 1`,
		`custos_requests_total{method="resources/read",outcome="not_found"} 1`,
		`custos_requests_total{method="resources/list",outcome="allow"} 1`,
		`custos_audit_append_duration_seconds_count`,
		`custos_policy_eval_duration_seconds_count`,
	} {
		if code != 200 || !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, leak := range []string{uri, page.Resources[0].URI[strings.Index(uri, "/patients/")+10:][:36], tok, "general-hospital"} {
		if strings.Contains(metrics, leak) {
			t.Errorf("/metrics exposes %q", leak)
		}
	}
}

// TestRateLimitPerPrincipal: beyond its bucket a principal gets 429 with
// Retry-After, each refusal audited and counted; another principal is not
// affected.
func TestRateLimitPerPrincipal(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	other := newToken(t, d.principal("billing"), tokens)
	srv := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--rate-limit", "1", "--rate-burst", "5")
	post := func(tok string) *http.Response {
		req, _ := http.NewRequest("POST", srv.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	limited := 0
	for range 20 {
		if resp := post(tok); resp.StatusCode == http.StatusTooManyRequests {
			limited++
			if resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		}
	}
	if limited < 10 {
		t.Fatalf("%d of 20 rapid requests limited with a burst of 5", limited)
	}
	if resp := post(other); resp.StatusCode == http.StatusTooManyRequests {
		t.Fatal("another principal was limited")
	}
	srv.stop(t)
	// Refusals anyone can cause are recorded in aggregate (docs/audit-format.md):
	// the first of a window on its own, the rest in one record per window
	// whose reason ends ",aggregate,count=N,window=START/END". Together they
	// count every refusal, each under the principal refused.
	n, records := 0, 0
	sub := subOf(t, d.principal("clinician"))
	id, err := server.LoadPrincipalFile(d.principal("clinician"))
	if err != nil {
		t.Fatal(err)
	}
	tenant := ",tenant=" + strconv.Quote(id.Principal.Tenant) // the caller's, in the reason
	for _, r := range d.records(t) {
		if r.Action != "http/rate_limited" {
			continue
		}
		records++
		if r.Principal.Sub != sub || r.Outcome != "deny" {
			t.Errorf("rate-limit record %+v", r)
		}
		switch reason, rest, aggregate := strings.Cut(r.Reason, ",aggregate,count="); {
		case reason != "http_429,rate_limited"+tenant:
			t.Errorf("rate-limit record reason %q", r.Reason)
		case !aggregate:
			n++
		default:
			count, _, _ := strings.Cut(rest, ",window=")
			c, err := strconv.Atoi(count)
			if err != nil || c < 1 {
				t.Errorf("aggregate reason %q", r.Reason)
			}
			n += c
		}
	}
	if n != limited || records >= limited {
		t.Fatalf("%d rate-limit records counting %d refusals, want %d refusals in fewer records", records, n, limited)
	}
}
