package server_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strings"
	"testing"
)

// A request body with a content coding (gzip, deflate, ...) is refused
// with 415 naming Content-Encoding (RFC 9110 §15.5.16), on both
// revisions, and changes nothing. The server read the compressed bytes as
// JSON and answered -32700 "the body is not one valid JSON value", which
// says nothing of what the client did wrong.
func TestCompressedRequestBodyIsUnsupportedMediaType(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	sid := rawSession(t, hs.url, tok)
	for _, c := range []struct {
		name string
		hdr  map[string]string
		body string
	}{
		{rev2025, map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid}, `{"jsonrpc":"2.0","id":2,"method":"resources/templates/list"}`},
		{rev2026, map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/templates/list"}, `{"jsonrpc":"2.0","id":2,"method":"resources/templates/list","params":{` + meta2026("") + `}}`},
		{"no header", nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`},
	} {
		for _, coding := range []string{"gzip", "GZIP", "deflate, gzip"} {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write([]byte(c.body))
			zw.Close()
			before := len(f.records())
			req, _ := http.NewRequest(http.MethodPost, hs.url, &buf)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Encoding", coding)
			for k, v := range c.hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			out.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(out.String(), "Content-Encoding") {
				t.Errorf("%s, Content-Encoding %s: status %d, answer %q; want 415 naming Content-Encoding", c.name, coding, resp.StatusCode, out.String())
			}
			if resp.Header.Get("Mcp-Session-Id") != "" {
				t.Errorf("%s, Content-Encoding %s: a session was opened", c.name, coding)
			}
			if n := len(f.records()) - before; n != 0 {
				t.Errorf("%s, Content-Encoding %s: %d records written", c.name, coding, n)
			}
		}
	}
	if st, _, raw := postHeaders(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid, "Content-Encoding": "identity"}, `{"jsonrpc":"2.0","id":9,"method":"ping"}`); st != http.StatusOK || !strings.Contains(string(raw), `"result"`) {
		t.Errorf("Content-Encoding identity: status %d, answer %s; want the ping answered", st, raw)
	}
}
