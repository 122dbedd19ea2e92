package server_test

import (
	"strings"
	"testing"
)

// A 2026-07-28 tools/call or prompts/get whose name is empty is answered
// as one of any other name (custos declares neither tools nor prompts:
// -32601, HTTP 404), whether its Mcp-Name header is absent, empty or the
// Base64 form of nothing, and is no more audited than that one. The go-sdk
// answered -32020 "missing required Mcp-Name header", which no client can
// send for an empty name (an empty header is a missing one).
func TestEmptyToolOrPromptNameIsAnsweredAsAnyOther(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	for _, method := range []string{"tools/call", "prompts/get"} {
		call := func(name string) string {
			return `{"jsonrpc":"2.0","id":5,"method":"` + method + `","params":{` + meta2026(`,"name":"`+name+`"`) + `}}`
		}
		before := len(f.records())
		wantSt, want := postRaw(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": method, "Mcp-Name": "no-such"}, call("no-such"))
		if wantSt != 404 || !strings.Contains(string(want), `"code":-32601`) {
			t.Fatalf("%s of an unknown name: %d %s; want 404 -32601", method, wantSt, want)
		}
		unknown := len(f.records()) - before
		for _, hdr := range []map[string]string{
			{"Mcp-Protocol-Version": rev2026, "Mcp-Method": method},
			{"Mcp-Protocol-Version": rev2026, "Mcp-Method": method, "Mcp-Name": ""},
			{"Mcp-Protocol-Version": rev2026, "Mcp-Method": method, "Mcp-Name": "=?base64??="},
		} {
			before := len(f.records())
			st, raw := postRaw(t, hs.url, tok, hdr, call(""))
			if st != wantSt || string(raw) != string(want) {
				t.Errorf("%s of an empty name, Mcp-Name %q: %d %s; want %d %s as for any other name", method, hdr["Mcp-Name"], st, raw, wantSt, want)
			}
			if n := len(f.records()) - before; n != unknown {
				t.Errorf("%s of an empty name: %d records, %d for another name", method, n, unknown)
			}
		}
	}
}
