package app

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/server"
)

// Outside --dev, serve warns once at start when its token file holds
// tokens without expires_at, with their count and the file's path only
// (no digest, no principal); with --dev, or when every token expires, it
// says nothing. It said nothing at all before: a token file of tokens that
// never expire was served in production in silence.
func TestServeWarnsOfTokensThatNeverExpire(t *testing.T) {
	const principal = `{"sub":"dr-a","roles":["clinician"],"client_id":"c","tenant":"t","patients":[],"purpose_of_use":"TREAT"}`
	entry := func(tok, extra string) string {
		return `{"token_sha256":"` + server.HashToken(tok) + `","principal":` + principal + extra + `}`
	}
	dir := t.TempDir()
	mixed := filepath.Join(dir, "mixed.json")
	expiring := filepath.Join(dir, "expiring.json")
	for p, data := range map[string]string{
		mixed: `{"tokens":[` + entry(strings.Repeat("a", 43), "") + `,` + entry(strings.Repeat("b", 43), "") + `,` +
			entry(strings.Repeat("c", 43), `,"expires_at":"2099-01-01T00:00:00Z"`) + `]}`,
		expiring: `{"tokens":[` + entry(strings.Repeat("c", 43), `,"expires_at":"2099-01-01T00:00:00Z"`) + `]}`,
	} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		file string
		dev  bool
		want string // "" : no warning
	}{
		{"production, two never expire", mixed, false, "tokens_without_expiry=2"},
		{"dev", mixed, true, ""},
		{"production, every token expires", expiring, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			a := &App{o: Options{Dev: tc.dev, HTTP: &HTTPOptions{Listen: "127.0.0.1:0", TokensFile: tc.file}},
				log: slog.New(slog.NewTextHandler(&buf, nil))}
			if err := a.prepareTransport(t.Context()); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			if tc.want == "" {
				if strings.Contains(out, "never expire") {
					t.Errorf("warned: %s", out)
				}
				return
			}
			if strings.Count(out, "never expire") != 1 || !strings.Contains(out, "level=WARN") || !strings.Contains(out, tc.want) ||
				!strings.Contains(out, "file="+tc.file) || !strings.Contains(out, "--ttl") || !strings.Contains(out, "OAuth") {
				t.Errorf("log %q, want one warning with %s, the file, --ttl and OAuth", out, tc.want)
			}
			for _, leak := range []string{"dr-a", server.HashToken(strings.Repeat("a", 43))} {
				if strings.Contains(out, leak) {
					t.Errorf("the warning names %q: %s", leak, out)
				}
			}
		})
	}
}
