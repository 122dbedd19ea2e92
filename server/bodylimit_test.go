package server_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/server"
)

// A body over the request limit is answered 413 Content Too Large (RFC 9110
// 15.5.14), with OAuth as with dev tokens, on both protocol revisions, as
// custos serve serves them (NewHTTPServerWith, MaxRequestBodyBytes 1 MiB).
// Over OAuth it was 400 "bad request: http: request body too large": the
// scope check read the body first and answered every read error 400.
func TestBodyOverTheLimitIsContentTooLarge(t *testing.T) {
	f := newFixture(t, "")
	dev, hs := f.httpHandler("clinician")
	oa, mint := f.oauthHandlerWith(t)
	serve := func(h http.Handler) string {
		return "http://" + serveOnLoopback(t, h, server.HTTPOptions{MaxRequestBodyBytes: 1 << 20}) + server.MCPPath
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{"_meta":{"x":"` + strings.Repeat("a", 1<<20) + `"}}}`
	for _, c := range []struct{ name, url, tok string }{
		{"dev", serve(dev), hs.tokens["clinician"]},
		{"oauth", serve(oa), mint("clinician", "resources:list resources:read", nil)},
	} {
		for _, rev := range []string{rev2025, rev2026} {
			req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(big))
			req.Header.Set("Authorization", "Bearer "+c.tok)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", rev)
			req.Header.Set("Mcp-Method", "resources/list")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "1048576 bytes") {
				t.Errorf("%s %s: %d %q, want 413 naming the limit", c.name, rev, resp.StatusCode, body)
			}
		}
	}
}

// serveOnLoopback serves h as custos serve does (NewHTTPServerWith with
// o) on a loopback port until the test ends, and returns its address.
func serveOnLoopback(t *testing.T, h http.Handler, o server.HTTPOptions) string {
	t.Helper()
	return serveOnLoopbackAs(t, h, o, func(ln net.Listener) net.Listener { return ln })
}

// serveOnLoopbackAs is serveOnLoopback serving the listener wrap makes of
// the loopback one (LimitConnections, TLS).
func serveOnLoopbackAs(t *testing.T, h http.Handler, o server.HTTPOptions, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	srv, err := server.NewHTTPServerWith("127.0.0.1:0", h, o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(wrap(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
