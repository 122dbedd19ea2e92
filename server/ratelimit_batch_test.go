package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/server"
)

// A JSON-RPC batch (revision 2025-03-26, which a client may still
// negotiate) costs the per-principal bucket one token per message, not one
// per HTTP request: a batch of 1,000 reads in one POST was served whole by
// a server limited to 5 requests a second with bursts of 5 (found by the
// hostile-input probe: 1,000 reads, 1,000 records, 1.6 MB released in 2 s).
// A batch larger than the bucket is refused (429) and nothing of it runs.
func TestRateLimitCountsTheMessagesOfABatch(t *testing.T) {
	f := newFixture(t, "")
	f.reconfigure(func(c *server.Config) { c.RateLimit = server.RateLimit{PerSecond: 0.001, Burst: 6} })
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	// initialize and notifications/initialized: 2 tokens.
	_, hdr, _ := post(t, hs.url, tok, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	h := map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": hdr.Get("Mcp-Session-Id")}
	post(t, hs.url, tok, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	read := `{"jsonrpc":"2.0","id":%d,"method":"resources/templates/list","params":{}}`
	batch := func(n int) string {
		calls := make([]string, n)
		for i := range calls {
			calls[i] = strings.Replace(read, "%d", string(rune('0'+i%10)), 1)
		}
		return "[" + strings.Join(calls, ",") + "]"
	}
	before := len(f.records())
	if st, raw := postRaw(t, hs.url, tok, h, batch(5)); st != http.StatusTooManyRequests {
		t.Errorf("a batch of 5 with 4 tokens left: status %d, want 429: %.200s", st, raw)
	}
	if st, raw := postRaw(t, hs.url, tok, h, batch(7)); st != http.StatusTooManyRequests || !strings.Contains(string(raw), "a batch of 7 messages is more than the 6") {
		t.Errorf("a batch of 7 with a burst of 6: status %d, answer %.200s; want 429 naming the sizes", st, raw)
	}
	for _, r := range f.records()[before:] {
		if r.Action != server.ActionRateLimited {
			t.Errorf("a call of the refused batch ran: %s %s", r.Action, r.Outcome)
		}
	}
	if st, raw := postRaw(t, hs.url, tok, h, batch(4)); st != http.StatusOK || strings.Count(string(raw), `"result"`) != 4 {
		t.Errorf("a batch of 4 with 4 tokens left: status %d, answer %.200s; want 4 results", st, raw)
	}
	if st, _ := postRaw(t, hs.url, tok, h, `{"jsonrpc":"2.0","id":9,"method":"ping"}`); st != http.StatusTooManyRequests {
		t.Errorf("a request after the batch took the last tokens: status %d, want 429", st)
	}
}

// A principal over its bucket is refused before its body is read: the
// limit bounds what a caller can make the server do. With the body memo
// (h-req3) messagesIn read every POST's body, up to 1 MiB, ahead of the
// limit check, so a principal whose bucket was empty still had each of
// its bodies read in full before its 429 (a body that opens with '{' was
// read one byte far before: only a batch, '[', needs counting).
func TestRateLimitRefusesWithoutReadingTheBody(t *testing.T) {
	f := newFixture(t, "")
	f.reconfigure(func(c *server.Config) { c.RateLimit = server.RateLimit{PerSecond: 0.001, Burst: 1} })
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	h := map[string]string{"Mcp-Protocol-Version": "2025-03-26"}
	post(t, hs.url, tok, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	big := `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"` + strings.Repeat("x", 900<<10) + `"}}`
	reads := 0
	restore := server.CountBodyWork(func(kind string) {
		if kind == "read" {
			reads++
		}
	})
	st, _ := postRaw(t, hs.url, tok, h, "\n "+big)
	restore()
	if st != http.StatusTooManyRequests {
		t.Fatalf("a request past the bucket: status %d, want 429", st)
	}
	if reads != 0 {
		t.Errorf("the body of a request past the bucket was read ahead %d times before its 429, want none", reads)
	}
}
