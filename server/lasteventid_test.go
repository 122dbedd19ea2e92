package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A GET whose Last-Event-ID the go-sdk cannot parse is refused with 400
// without repeating the header: the SDK answered `malformed Last-Event-ID
// "<the header>"`, quoting client input back as custos's answers never do
// (SECURITY.md). The session stays open.
func TestLastEventIDIsNotQuotedBack(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	sid := rawSession(t, hs.url, tok)
	for _, v := range []string{"x-" + paramSecret, paramName + "_-1", paramName + "_x_1"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.url, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", rev2025)
		req.Header.Set("Last-Event-ID", v)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Last-Event-ID") {
			t.Errorf("Last-Event-ID %q: status %d, answer %q; want 400 naming Last-Event-ID", v, resp.StatusCode, body)
		}
		if strings.Contains(string(body), paramSecret) || strings.Contains(string(body), paramName) {
			t.Errorf("Last-Event-ID %q: the answer quotes it: %q", v, body)
		}
	}
	if st, _, msg := post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid}, `{"jsonrpc":"2.0","id":9,"method":"ping"}`); st != 200 || msg["result"] == nil {
		t.Errorf("session after a refused GET: status %d, answer %v; want it open", st, msg)
	}
}
