package server_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/internal/syncbuf"
	"github.com/custos-mcp/custos/server"
)

// A client's protocol mistakes are not server errors: the go-sdk logs
// them at error level ("method removed in the new protocol" for a ping on
// 2026-07-28, "duplicate initialize request", "method invalid during
// initialization", "initialized before initialize", "duplicate initialized
// notification"), so any caller could write error lines, which
// docs/operations.md reserves for a server that failed closed. They are
// logged as warnings.
func TestClientMistakesAreNotLoggedAsErrors(t *testing.T) {
	f := newFixture(t, "")
	var logs syncbuf.Buffer
	f.reconfigure(func(c *server.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2026}, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{`+meta2026("")+`}}`)
	sid := rawSession(t, hs.url, tok)
	post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid},
		`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)

	ctx, conn := rawConn(t, f, f.identity("clinician"))
	send(t, ctx, conn, 0, "notifications/initialized", map[string]any{})
	send(t, ctx, conn, 1, "resources/list", map[string]any{})
	answerTo(t, ctx, conn, 1)
	send(t, ctx, conn, 2, "initialize", map[string]any{"protocolVersion": rev2025, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
	answerTo(t, ctx, conn, 2)
	send(t, ctx, conn, 0, "notifications/initialized", map[string]any{})
	send(t, ctx, conn, 0, "notifications/initialized", map[string]any{})
	send(t, ctx, conn, 3, "ping", map[string]any{}) // answered after the notifications before it
	answerTo(t, ctx, conn, 3)

	out := logs.String()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("a client's mistake logged as an error: %s", line)
		}
	}
	for _, msg := range []string{"method removed in the new protocol", "duplicate initialize request", "method invalid during initialization", "initialized before initialize", "duplicate initialized notification"} {
		if !strings.Contains(out, `"level":"WARN","msg":"`+msg+`"`) {
			t.Errorf("no warning %q in the log:\n%s", msg, out)
		}
	}
}
