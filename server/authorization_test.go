package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/ops"
)

// A request with two Authorization headers, or one that is not "Bearer"
// and one token, is malformed: 400 invalid_request (RFC 6750 §3.1), on
// record. Found by probe: over OAuth it was 401 invalid_token, and with
// dev tokens the go-sdk read the first header only and served the request.
func TestMalformedAuthorizationIsInvalidRequest(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newServerFixture(t, fixtureOptions{tune: withMetrics(reg, nil)})
	dev := f.serveHTTP("clinician")
	oauthURL, mint := f.oauthServer(t)
	for _, ep := range []struct{ name, url, tok string }{
		{"dev tokens", dev.url, dev.tokens["clinician"]},
		{"oauth", oauthURL, mint("clinician", "resources:list resources:read")},
	} {
		for _, c := range []struct {
			name string
			auth []string
			desc string
		}{
			{"valid token, then a second header", []string{"Bearer " + ep.tok, "Bearer not-a-token"}, "more than one Authorization header"},
			{"the same token twice", []string{"Bearer " + ep.tok, "Bearer " + ep.tok}, "more than one Authorization header"},
			{"two tokens in one header", []string{"Bearer " + ep.tok + " " + ep.tok}, "malformed Authorization header"},
		} {
			t.Run(ep.name+"/"+c.name, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodPost, ep.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{`+meta2026("")+`}}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", rev2026)
				req.Header.Set("Mcp-Method", "resources/list")
				for _, a := range c.auth {
					req.Header.Add("Authorization", a)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				want := `error="invalid_request", error_description="` + c.desc + `"`
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Header.Get("WWW-Authenticate"), want) {
					t.Fatalf("%d %q %s, want 400 with %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, want)
				}
				if strings.Contains(string(body), ep.tok) || strings.Contains(resp.Header.Get("WWW-Authenticate"), ep.tok) {
					t.Fatal("the answer repeats the token")
				}
			})
		}
	}
	if got := metric(t, reg, "custos_auth_failures_total", ops.FailureInvalidRequest); got != 6 {
		t.Errorf("custos_auth_failures_total{invalid_request} = %v, want 6", got)
	}
	// On record: the first on its own, the other five in the aggregate
	// (refusals.go), all from the caller's address.
	f.srv.Close(context.Background())
	var got []string
	for _, r := range f.records() {
		if r.Action == server.ActionAuthReject && strings.HasPrefix(r.Reason, "http_400,") {
			if r.Outcome != audit.OutcomeDeny || r.Source == "" {
				t.Errorf("record %+v", r)
			}
			reason, _, _ := strings.Cut(r.Reason, ",window=")
			got = append(got, reason)
		}
	}
	if strings.Join(got, " ") != "http_400,invalid_request http_400,invalid_request,aggregate,count=5" {
		t.Fatalf("recorded %q, want the first refusal on its own and the other five in the aggregate", got)
	}
}
