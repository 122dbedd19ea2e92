package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A 2025-11-25 request without Mcp-Session-Id (other than initialize and
// ping) is answered 400 naming the missing header, as the revision asks,
// not 200 with JSON-RPC code 0.
func TestRequestWithoutSessionIsBadRequest(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	for _, hdr := range []map[string]string{{"Mcp-Protocol-Version": rev2025}, nil} {
		st, _, msg := post(t, hs.url, tok, hdr, `{"jsonrpc":"2.0","id":7,"method":"resources/list","params":{}}`)
		e, _ := msg["error"].(map[string]any)
		if st != 400 || e == nil || e["code"] != float64(jsonrpc.CodeInvalidRequest) || !strings.Contains(fmt.Sprint(e["message"]), "missing Mcp-Session-Id header") || msg["id"] != float64(7) {
			t.Errorf("header %v: status %d, answer %v; want 400 and -32600 naming Mcp-Session-Id", hdr, st, msg)
		}
		if st, _, _ := post(t, hs.url, tok, hdr, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); st != 400 {
			t.Errorf("header %v: notification without a session: status %d, want 400", hdr, st)
		}
	}
	// ping and initialize still work without one.
	if st, _, msg := post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2025}, `{"jsonrpc":"2.0","id":8,"method":"ping"}`); st != 200 || msg["error"] != nil {
		t.Errorf("ping without a session: %d %v", st, msg)
	}
	if st, hdr, _ := post(t, hs.url, tok, nil, `{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`); st != 200 || hdr.Get("Mcp-Session-Id") == "" {
		t.Errorf("initialize: %d, session %q", st, hdr.Get("Mcp-Session-Id"))
	}
}

// An older revision's MCP-Protocol-Version header on a request whose _meta
// names a protocol version is answered with the mismatch (-32020), with or
// without a session, not with "2025-11-25 is not supported" (which the
// server supports) nor with a missing session.
func TestRevisionMixUpIsNamed(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	sid := rawSession(t, hs.url, tok)
	for _, h := range []map[string]string{{"Mcp-Protocol-Version": rev2025}, {"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid}} {
		st, _, msg := post(t, hs.url, tok, h, `{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{`+meta2026("")+`}}`)
		e, _ := msg["error"].(map[string]any)
		if st != 400 || e == nil || e["code"] != float64(-32020) || !strings.Contains(fmt.Sprint(e["message"]), "does not match") {
			t.Errorf("headers %v: status %d, error %v; want 400 and -32020 naming the mismatch", h, st, e)
		}
	}
}

// An MCP-Protocol-Version header that is not a revision is refused as
// such (400 naming the supported versions), not sent to the stateless
// handler because "garbage" sorts after "2026-07-28".
func TestMalformedProtocolVersionHeaderIsNamed(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	sid := rawSession(t, hs.url, tok)
	for _, v := range []string{"garbage", "9999", "2026-07-28x", "2O26-07-28"} {
		status, raw := postRaw(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": v, "Mcp-Session-Id": sid}, `{"jsonrpc":"2.0","id":3,"method":"resources/templates/list","params":{}}`)
		named := strings.Contains(string(raw), "Unsupported protocol version") || strings.Contains(string(raw), "is not supported by this server")
		if status != 400 || !named || strings.Contains(string(raw), "_meta") {
			t.Errorf("header %q: status %d, answer %s; want 400 naming the unsupported protocol version", v, status, raw)
		}
	}
}

// A 2026-07-28 notification POSTed without Mcp-Method is accepted (202):
// the revision requires the header on requests only ("header requirements
// for notification POSTs are not defined by this revision"), and the
// TypeScript SDK (@modelcontextprotocol/client 2.4.0) sends
// notifications/cancelled without it when it closes a subscriptions/listen
// stream. A request without it is still refused (-32020).
func TestNotificationWithoutMcpMethodIsAccepted(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	send := func(body string) (int, string) {
		req, _ := http.NewRequest("POST", hs.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+hs.tokens["clinician"])
		req.Header.Set("Mcp-Protocol-Version", rev2026)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"listen:0",` + meta2026("") + `}}`); st != http.StatusAccepted {
		t.Errorf("notification without Mcp-Method: status %d %s, want 202", st, b)
	}
	if st, b := send(`{"jsonrpc":"2.0","id":3,"method":"resources/list","params":{` + meta2026("") + `}}`); st != http.StatusBadRequest || !strings.Contains(b, "-32020") || !strings.Contains(b, "Mcp-Method") {
		t.Errorf("request without Mcp-Method: status %d %s, want 400 -32020 naming the header", st, b)
	}
}
