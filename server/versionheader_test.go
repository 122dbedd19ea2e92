package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/internal/syncbuf"
	"github.com/custos-mcp/custos/server"
)

// The MCP-Protocol-Version header and the protocol version in params._meta
// are client input like any other. A POST whose header is no revision is
// answered -32022 with the header in data.requested (the 2026-07-28
// revision asks for the echo; SECURITY.md), but the go-sdk also wrote it
// into a WARN line of the server log. A _meta version that differs from
// the header was quoted with it in the -32020 message. A GET or DELETE
// with such a header was served (a DELETE ended the session) where it must
// be refused and change nothing.
func TestProtocolVersionIsNotQuotedBack(t *testing.T) {
	f := newFixture(t, "")
	var logs syncbuf.Buffer
	f.reconfigure(func(c *server.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	sid := rawSession(t, hs.url, tok)
	bad := "x-" + paramSecret
	badMeta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + bad + `","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	for _, c := range []struct {
		name string
		hdr  map[string]string
		body string
		code string // the JSON-RPC error code
		echo bool   // the answer may echo the header (data.requested)
	}{
		{"header in a session", map[string]string{"Mcp-Protocol-Version": bad, "Mcp-Session-Id": sid},
			`{"jsonrpc":"2.0","id":2,"method":"resources/templates/list","params":{}}`, "-32022", true},
		{"header a name", map[string]string{"Mcp-Protocol-Version": paramName, "Mcp-Session-Id": sid},
			`{"jsonrpc":"2.0","id":2,"method":"ping"}`, "-32022", true},
		{"header and _meta differ", map[string]string{"Mcp-Protocol-Version": bad},
			`{"jsonrpc":"2.0","id":2,"method":"resources/templates/list","params":{` + meta2026("") + `}}`, "-32020", false},
		{"_meta under 2026-07-28", map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/templates/list"},
			`{"jsonrpc":"2.0","id":2,"method":"resources/templates/list","params":{` + badMeta + `}}`, "-32020", false},
		{"_meta in a 2025-11-25 session", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid},
			`{"jsonrpc":"2.0","id":2,"method":"resources/templates/list","params":{` + badMeta + `}}`, "-32020", false},
		{"_meta of a notification", map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "notifications/cancelled"},
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,` + badMeta + `}}`, "-32020", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _, raw := postHeaders(t, hs.url, tok, c.hdr, c.body)
			if !c.echo && (strings.Contains(string(raw), paramSecret) || strings.Contains(string(raw), paramName)) {
				t.Errorf("answer quotes the protocol version: %s", raw)
			}
			if st != http.StatusBadRequest || !strings.Contains(string(raw), `"code":`+c.code) {
				t.Errorf("status %d, answer %s; want 400 and %s", st, raw, c.code)
			}
		})
	}
	for _, method := range []string{http.MethodDelete, http.MethodGet} {
		req, _ := http.NewRequest(method, hs.url, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", bad)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s with a bad header: status %d, want 400", method, resp.StatusCode)
		}
	}
	if st, _, msg := post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid}, `{"jsonrpc":"2.0","id":9,"method":"ping"}`); st != 200 || msg["result"] == nil {
		t.Errorf("session after a refused DELETE: status %d, answer %v; want it open", st, msg)
	}
	if strings.Contains(logs.String(), paramSecret) || strings.Contains(logs.String(), paramName) {
		t.Errorf("the log quotes a protocol version:\n%s", logs.String())
	}
}

// A notification of a method the go-sdk does not know is refused (400, as
// the SDK refuses it) without quoting the method, on both revisions: the
// SDK's own answer is `JSON RPC not handled: "<method>" unsupported`.
func TestUnknownNotificationIsNotQuotedBack(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	method := "notifications/" + paramName
	for _, hdr := range []map[string]string{
		{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": rawSession(t, hs.url, tok)},
		{"Mcp-Protocol-Version": rev2026, "Mcp-Method": method},
		{"Mcp-Protocol-Version": rev2026},
	} {
		st, _, raw := postHeaders(t, hs.url, tok, hdr, `{"jsonrpc":"2.0","method":"`+method+`","params":{}}`)
		if st != http.StatusBadRequest || !strings.Contains(string(raw), "-32601") {
			t.Errorf("headers %v: status %d, answer %s; want 400 and -32601", hdr, st, raw)
		}
		if strings.Contains(string(raw), paramName) {
			t.Errorf("headers %v: answer quotes the method: %s", hdr, raw)
		}
	}
}

// subscriptions/listen is a method of revision 2026-07-28: a 2025-11-25
// session calling it is answered -32601, as the go-sdk answers its
// server/discover, before any decision (nothing is recorded). The SDK
// served it: the session's stream stayed open with the subscriptions
// acknowledged, beside the revision's own resources/subscribe.
func TestListenIsNotServedToAnEarlierRevision(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	sid := rawSession(t, hs.url, tok)
	uri := f.allURIs()[0].URI
	before := len(f.records())
	req, _ := http.NewRequest(http.MethodPost, hs.url, strings.NewReader(`{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["`+uri+`"]}}}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", rev2025)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	n, _ := io.ReadAtLeast(resp.Body, buf, 1)
	if got := string(buf[:n]); !strings.Contains(got, `"code":-32601`) || strings.Contains(got, "acknowledged") {
		t.Errorf("listen in a 2025-11-25 session answered %s, want -32601", got)
	}
	if n := len(f.records()) - before; n != 0 {
		t.Errorf("%d records written for a method of another revision", n)
	}
}

// A session speaks the revision initialize negotiated, not the one the
// client offered. The go-sdk negotiates 2025-11-25 for an offer it does not
// support for sessions (2026-07-28, which has no initialize, a later date,
// or no date at all: "zzz" sorts after every revision), but the server
// judged the revision of a session's requests by the offer: such a session
// was answered in 2026-07-28's terms (a missing resource -32602 instead of
// -32002, a read result with resultType) and was served
// subscriptions/listen, a method of 2026-07-28 only.
func TestSessionSpeaksTheNegotiatedRevision(t *testing.T) {
	f := newFixture(t, "")
	hidden, missing := hiddenAndMissing(t, f, "clinician")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	for _, offer := range []string{rev2026, "2099-01-01", "zzz"} {
		t.Run(offer, func(t *testing.T) {
			_, hdr, init := post(t, hs.url, tok, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+offer+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			res, _ := init["result"].(map[string]any)
			if got, _ := res["protocolVersion"].(string); got != rev2025 {
				t.Fatalf("initialize offering %q negotiated %q, want %s", offer, got, rev2025)
			}
			h := map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": hdr.Get("Mcp-Session-Id")}
			post(t, hs.url, tok, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			for _, uri := range []string{missing, hidden} {
				_, _, msg := post(t, hs.url, tok, h, `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"`+uri+`"}}`)
				e, _ := msg["error"].(map[string]any)
				if code, _ := e["code"].(float64); int64(code) != server.CodeResourceNotFound {
					t.Errorf("read of a resource not shown: %v; want %d, the code of %s", msg, server.CodeResourceNotFound, rev2025)
				}
			}
			list := f.allURIs()
			var readable string
			for _, r := range list {
				if r.URI != hidden {
					_, _, msg := post(t, hs.url, tok, h, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"`+r.URI+`"}}`)
					if res, ok := msg["result"].(map[string]any); ok {
						readable = r.URI
						if _, ok := res["resultType"]; ok {
							t.Errorf("read result in a %s session has resultType (a field of %s)", rev2025, rev2026)
						}
						break
					}
				}
			}
			if readable == "" {
				t.Fatal("the clinician reads nothing")
			}
			before := len(f.records())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.url, strings.NewReader(`{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["`+readable+`"]}}}`))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range h {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 4096)
			n, _ := io.ReadAtLeast(resp.Body, buf, 1)
			if got := string(buf[:n]); !strings.Contains(got, `"code":-32601`) || strings.Contains(got, "acknowledged") {
				t.Errorf("listen in a %s session answered %s, want -32601", rev2025, got)
			}
			if n := len(f.records()) - before; n != 0 {
				t.Errorf("%d records written for a method of another revision", n)
			}
		})
	}
}

// A batch under an MCP-Protocol-Version of 2025-06-18 or later (which
// have no batches) is refused naming the rule, not the header: the go-sdk
// answered "JSON-RPC batching is not supported in 2025-06-18 and later
// (request version: <header>)", and any header from 2026-07-28 on reaches
// it whatever follows the date ("2026-07-28-<secret>"), so the client's
// header came back in a plain-text answer that SECURITY.md did not list.
// Nothing of the batch runs.
func TestBatchRefusalDoesNotQuoteTheVersionHeader(t *testing.T) {
	batchRefusedUnder(t, "batching is not supported", rev2026, "2025-06-18", "2025-11-25")
}

// A batch under an MCP-Protocol-Version that names no supported revision
// is told that the version is unsupported (as the go-sdk answers any
// message under such a header), not that batching is not supported "in
// the revision the header names": it names none. Headers sorting before
// 2026-07-28 are answered by the SDK, quoting nothing; later ones by
// custos, as the SDK's answer would quote them. Nothing of the batch runs.
func TestBatchUnderAnUnsupportedVersionIsToldSo(t *testing.T) {
	batchRefusedUnder(t, "Unsupported protocol version", "2025-07-01", "2025-06-180", rev2026+"-"+paramSecret, "3-"+paramName, "2027-01-01")
}

// batchRefusedUnder posts a batch under each MCP-Protocol-Version of
// versions and fails unless each is answered 400 saying want, without the
// header, and nothing of it runs.
func batchRefusedUnder(t *testing.T, want string, versions ...string) {
	t.Helper()
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	batch := `[{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{` + meta2026("") + `}}]`
	before := len(f.records())
	for _, v := range versions {
		st, raw := postRaw(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": v, "Mcp-Method": "resources/list"}, batch)
		if st != http.StatusBadRequest || !strings.Contains(string(raw), want) {
			t.Errorf("header %.20q: status %d, answer %q; want 400 saying %q", v, st, raw, want)
		}
		if strings.Contains(string(raw), paramSecret) || strings.Contains(string(raw), paramName) {
			t.Errorf("answer quotes the header: %q", raw)
		}
	}
	if n := len(f.records()) - before; n != 0 {
		t.Errorf("%d records written: a refused batch ran", n)
	}
}
