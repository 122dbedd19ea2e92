package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A server listening on loopback answers only requests that name a
// loopback host (the go-sdk's DNS-rebinding protection); any other Host is
// refused with 403 naming the Host header, not its value. The SDK answered
// `Forbidden: invalid Host header "<the header>"`, quoting client input
// back as custos's answers never do (SECURITY.md).
func TestHostHeaderIsNotQuotedBack(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	before := len(f.records())
	for _, host := range []string{paramSecret + ".example", paramName + ".example:443", "[2001:db8::1]:8080"} {
		req, _ := http.NewRequest(http.MethodPost, hs.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "Host") || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("Host %q: status %d, answer %q; want 403 naming the Host header and no session", host, resp.StatusCode, body)
		}
		if strings.Contains(string(body), paramSecret) || strings.Contains(string(body), paramName) || strings.Contains(string(body), "2001:db8") {
			t.Errorf("Host %q: the answer quotes it: %q", host, body)
		}
	}
	// Recorded as what it is, not as a cross-origin request (it was
	// http_403,cross_origin: the class of any 403 without a scope error or
	// a session mismatch). The first on its own, the repeats in aggregate.
	var reasons []string
	for _, r := range f.records()[before:] {
		reasons = append(reasons, r.Reason)
	}
	if want := "http_403,invalid_host" + tenantSuffix(f, "clinician"); len(reasons) != 1 || reasons[0] != want {
		t.Errorf("non-loopback Host refusals recorded as %q, want one %s", reasons, want)
	}
	for _, host := range []string{"localhost", "127.0.0.1:1", "[::1]:8080"} {
		req, _ := http.NewRequest(http.MethodPost, hs.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("loopback Host %q: status %d, want 200", host, resp.StatusCode)
		}
	}
}
