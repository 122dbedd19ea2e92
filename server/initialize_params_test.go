package server_test

import (
	"strings"
	"testing"
)

// TestInitializeParamsAreNotQuotedBack: initialize params of the wrong types
// (a URI with credentials as the client name) are answered without them, on
// both revisions' routes (found by review: initialize was not checked).
func TestInitializeParamsAreNotQuotedBack(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	secretURI := "fhir://alice:" + paramSecret + "@general-hospital/x"
	bodies := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":5},"note":"` + secretURI + `"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":5,"capabilities":{"x":"` + paramName + `"},"clientInfo":{"name":"` + secretURI + `","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":["` + secretURI + `"]}`,
	}
	for _, hdr := range []map[string]string{nil, {"Mcp-Protocol-Version": rev2025}} {
		for _, b := range bodies {
			status, raw := postRaw(t, hs.url, tok, hdr, b)
			t.Logf("status %d: %s", status, raw)
			if strings.Contains(string(raw), paramSecret) || strings.Contains(string(raw), paramName) {
				t.Errorf("headers %v: answer quotes the params: %s", hdr, raw)
			}
		}
	}
}
