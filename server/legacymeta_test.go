package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A request of a revision before 2026-07-28 whose body carries the _meta
// protocol version of that same revision is refused with custos's own
// JSON-RPC error, quoting nothing, with or without a session and with or
// without the MCP-Protocol-Version header, and leaves nothing on record.
// With the header (2025-11-25 and 2025-11-25 in _meta) it went to the
// stateless handler and was served without initialize and without a
// session (HTTP 200, audited with an empty session, any Mcp-Session-Id
// ignored), out of reach of the missing-session refusal, the
// per-principal session cap and idle logoff; without the header the
// go-sdk answered -32022 "protocol version ... is not supported", of a
// revision the server supports.
func TestOlderRevisionWithMetaVersionNeedsItsSession(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	sid := rawSession(t, hs.url, tok)
	before := len(f.records())
	const rev = "2025-06-18" // a supported older revision the answer must not repeat
	meta := func(v string) string { return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `"}` }
	for _, c := range []struct {
		name string
		hdr  map[string]string
		body string
		id   any
	}{
		{"list, header, no session", map[string]string{"Mcp-Protocol-Version": rev2025},
			`{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{` + meta(rev2025) + `}}`, float64(1)},
		{"list, header, session", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid},
			`{"jsonrpc":"2.0","id":"a","method":"resources/list","params":{` + meta(rev2025) + `}}`, "a"},
		{"list, header, a session id that is none", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "no-such-session"},
			`{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{` + meta(rev2025) + `}}`, float64(2)},
		{"read, other older revision", map[string]string{"Mcp-Protocol-Version": rev},
			`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"fhir://x/y",` + meta(rev) + `}}`, float64(3)},
		{"templates, no header", nil,
			`{"jsonrpc":"2.0","id":4,"method":"resources/templates/list","params":{` + meta(rev) + `}}`, float64(4)},
		{"templates, no header, session", map[string]string{"Mcp-Session-Id": sid},
			`{"jsonrpc":"2.0","id":6,"method":"resources/templates/list","params":{` + meta(rev2025) + `}}`, float64(6)},
		{"list, header, _meta given twice", map[string]string{"Mcp-Protocol-Version": rev2025},
			`{"jsonrpc":"2.0","id":7,"method":"resources/list","params":{` + meta(rev) + `,` + meta(rev2025) + `}}`, float64(7)},
		{"ping, header", map[string]string{"Mcp-Protocol-Version": rev},
			`{"jsonrpc":"2.0","id":5,"method":"ping","params":{` + meta(rev) + `}}`, float64(5)},
		{"notification, header", map[string]string{"Mcp-Protocol-Version": rev},
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,` + meta(rev) + `}}`, nil},
	} {
		st, raw := postRaw(t, hs.url, tok, c.hdr, c.body)
		if len(raw) > 300 {
			raw = raw[:300]
		}
		_, _, msg := post(t, hs.url, tok, c.hdr, c.body)
		e, _ := msg["error"].(map[string]any)
		if st != 400 || e == nil || e["code"] != float64(jsonrpc.CodeInvalidRequest) || msg["id"] != c.id || msg["result"] != nil {
			t.Errorf("%s: status %d, answer %s; want 400 and -32600 with id %v", c.name, st, raw, c.id)
			continue
		}
		m := fmt.Sprint(e["message"])
		for _, w := range []string{"initialize", "Mcp-Session-Id", "params._meta"} {
			if !strings.Contains(m, w) {
				t.Errorf("%s: message %q does not say %q", c.name, m, w)
			}
		}
		if strings.Contains(string(raw), rev) || strings.Contains(string(raw), "no-such-session") || e["data"] != nil {
			t.Errorf("%s: answer %s quotes the request", c.name, raw)
		}
	}
	// Without a header, params given twice (the first with the 2026-07-28
	// _meta, the last, which the SDK keeps, without) went to the stateless
	// handler and were served as an earlier revision without a session.
	// So did a method given again as "Method" (encoding/json matches member
	// names case-insensitively; the SDK does not).
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":8,"method":"resources/list","params":{` + meta2026("") + `},"params":{}}`,
		`{"jsonrpc":"2.0","id":8,"method":"resources/list","Method":"server/discover","params":{}}`,
	} {
		st, raw := postRaw(t, hs.url, tok, nil, body)
		if st != 400 || !strings.Contains(string(raw), "missing Mcp-Session-Id") {
			if len(raw) > 300 {
				raw = raw[:300]
			}
			t.Errorf("%s, no header, no session: status %d, answer %s; want 400 naming the missing session", body, st, raw)
		}
	}
	// A header that is no revision, given again as the _meta version, is
	// still named unsupported with every revision the server supports (the
	// official conformance suite sends "v999.0.0" so).
	st, _, msg := post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": "v999.0.0", "Mcp-Method": "server/discover"},
		`{"jsonrpc":"2.0","id":11,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	e, _ := msg["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if st != 400 || e == nil || e["code"] != float64(-32022) || !strings.Contains(fmt.Sprint(data["supported"]), rev2026) {
		t.Errorf("header and _meta v999.0.0: status %d, answer %v; want 400 and -32022 listing %s", st, msg, rev2026)
	}
	if n := len(f.records()); n != before {
		t.Errorf("%d audit records were added; a refused request leaves none", n-before)
	}
	// The session itself is untouched, and a request without the _meta is
	// served in it.
	if st, _, msg := post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid},
		`{"jsonrpc":"2.0","id":9,"method":"resources/templates/list","params":{}}`); st != 200 || msg["result"] == nil {
		t.Errorf("a request of the session without the _meta: %d %v", st, msg)
	}
}
