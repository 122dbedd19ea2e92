package server_test

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A batch (2025-03-26) one of whose messages carries a _meta protocol
// version is refused whole, as one such request is refused alone: -32600
// saying that a batch's messages carry no such _meta and are served in
// the session, HTTP 400, id null, quoting nothing the client sent, nothing
// run and nothing audited. The go-sdk answered -32022 "protocol version
// \"2025-03-26\" is not supported by this server" (data.requested the
// same), of a revision it supports, whatever the header and the _meta
// version, to one of the batch's ids.
func TestBatchWithMetaVersionIsToldSo(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	sid := rawSession(t, hs.url, tok)
	meta := func(v string) string { return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `"}` }
	list := `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`
	h := map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": sid}
	for _, c := range []struct {
		name string
		hdr  map[string]string
		body string
	}{
		{"its revision in _meta", h, `[` + list + `,{"jsonrpc":"2.0","id":2,"method":"ping","params":{` + meta("2025-03-26") + `}}]`},
		{"another revision in _meta", h, `[{"jsonrpc":"2.0","id":2,"method":"ping","params":{` + meta("2024-11-05") + `}},` + list + `]`},
		{"a version that is none", h, `[` + list + `,{"jsonrpc":"2.0","id":2,"method":"ping","params":{` + meta("v-secret-9") + `}}]`},
		{"a notification", h, `[` + list + `,{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,` + meta("2025-03-26") + `}}]`},
		{"no header", map[string]string{"Mcp-Session-Id": sid}, `[` + list + `,{"jsonrpc":"2.0","id":2,"method":"ping","params":{` + meta("2025-03-26") + `}}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(f.records())
			st, raw := postRaw(t, hs.url, tok, c.hdr, c.body)
			_, _, msg := post(t, hs.url, tok, c.hdr, c.body)
			e, _ := msg["error"].(map[string]any)
			if st != 400 || e == nil || e["code"] != float64(jsonrpc.CodeInvalidRequest) || msg["id"] != nil || e["data"] != nil {
				t.Fatalf("status %d, answer %s; want 400, -32600, id null, no data", st, raw)
			}
			for _, w := range []string{"batch", "initialize", "Mcp-Session-Id", "params._meta"} {
				if !strings.Contains(e["message"].(string), w) {
					t.Errorf("message %q does not say %q", e["message"], w)
				}
			}
			for _, q := range []string{"2025-03-26", "2024-11-05", "v-secret-9", "requested"} {
				if strings.Contains(string(raw), q) {
					t.Errorf("answer %s quotes %q", raw, q)
				}
			}
			if recs := f.records()[before:]; len(recs) != 0 {
				t.Errorf("%d records (%+v): the batch's list ran", len(recs), recs)
			}
		})
	}
	// A batch without a _meta version is still served.
	if st, raw := postRaw(t, hs.url, tok, h, `[`+list+`]`); st != 200 || !strings.Contains(string(raw), `"resources"`) {
		t.Errorf("plain batch: status %d, answer %.200s", st, raw)
	}
}

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
