package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
)

// A read of an empty URI is told that the URI is empty, and audited as a
// malformed read (deny, bad_uri), at every revision and on every
// transport. On 2026-07-28 over HTTP the go-sdk answered it first, with
// -32020 "missing required Mcp-Name header for method \"resources/read\"":
// a client cannot send an Mcp-Name header that matches an empty URI (an
// empty header is a missing one), so it was told to fix a header it had
// sent as well as it could, and nothing was on record.
func TestEmptyURIReadIsToldSoAndAudited(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	const want = "invalid resource uri: uri is empty"
	audited := func(t *testing.T, before int) {
		t.Helper()
		recs := f.records()[before:]
		if len(recs) != 1 || recs[0].Action != server.ActionRead || recs[0].Outcome != audit.OutcomeDeny || recs[0].Reason != server.ReasonBadURI {
			t.Errorf("audited as %+v, want one %s / deny / %s record", recs, server.ActionRead, server.ReasonBadURI)
		}
	}
	raw := func(t *testing.T, hdr map[string]string, body string) {
		t.Helper()
		before := len(f.records())
		_, _, msg := post(t, hs.url, tok, hdr, body)
		e, _ := msg["error"].(map[string]any)
		b, _ := json.Marshal(msg)
		if e == nil || e["code"] != float64(jsonrpc.CodeInvalidParams) || e["message"] != want {
			t.Errorf("answer %s; want -32602 %q", b, want)
		}
		audited(t, before)
	}
	read26 := `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{` + meta2026(`,"uri":""`) + `}}`
	t.Run("2026-07-28 raw, empty Mcp-Name", func(t *testing.T) {
		raw(t, map[string]string{"Mcp-Protocol-Version": rev2026}, read26)
	})
	t.Run("2026-07-28 raw, Mcp-Name in Base64", func(t *testing.T) {
		raw(t, map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Name": "=?base64??="}, read26)
	})
	t.Run("2026-07-28 raw, duplicate uri members", func(t *testing.T) {
		// The last member is the one the SDK reads, and the one judged.
		uri := f.allURIs()[0].URI
		raw(t, map[string]string{"Mcp-Protocol-Version": rev2026},
			`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{`+meta2026(`,"uri":"`+uri+`","uri":""`)+`}}`)
	})
	t.Run("2025-11-25 raw", func(t *testing.T) {
		raw(t, map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": rawSession(t, hs.url, tok)},
			`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":""}}`)
	})
	for _, rev := range []string{rev2025, rev2026} {
		t.Run(rev+" go-sdk client over HTTP", func(t *testing.T) {
			before := len(f.records())
			_, err := hs.connect(t, "clinician", rev).ReadResource(context.Background(), &mcp.ReadResourceParams{URI: ""})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("read of an empty uri: %v; want %q", err, want)
			}
			audited(t, before)
		})
		t.Run(rev+" go-sdk client over stdio", func(t *testing.T) {
			before := len(f.records())
			_, err := f.connectRev(f.identity("clinician"), rev).ReadResource(context.Background(), &mcp.ReadResourceParams{URI: ""})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("read of an empty uri: %v; want %q", err, want)
			}
			audited(t, before)
		})
	}
	// A read that names a URI still needs its Mcp-Name header.
	uri := f.allURIs()[0].URI
	st, _, b := postHeaders(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/read"},
		`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{`+meta2026(`,"uri":"`+uri+`"`)+`}}`)
	var msg map[string]any
	json.Unmarshal(b, &msg)
	if e, _ := msg["error"].(map[string]any); st != 400 || e == nil || e["code"] != float64(mcp.CodeHeaderMismatch) {
		t.Errorf("read of a uri without Mcp-Name: status %d, answer %s; want 400, %d", st, b, mcp.CodeHeaderMismatch)
	}
}
