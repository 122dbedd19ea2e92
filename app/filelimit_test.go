//go:build unix

package app_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/server"
)

// serve, run with an open-file limit of 256 (soft and hard: a shell's
// ulimit -n, in a child process of this test), logs a warning naming the
// limit and what the default http.max_connections needs (1,120), and none
// with max_connections 100 (196 needed).
func TestServeWarnsOfALowFileLimit(t *testing.T) {
	if os.Getenv("CUSTOS_TEST_FILE_LIMIT_CHILD") == "1" {
		fileLimitChild(t)
		return
	}
	cmd := exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" -test.run='^TestServeWarnsOfALowFileLimit$' -test.count=1 -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), "CUSTOS_TEST_FILE_LIMIT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("the child with ulimit -n 256: %v\n%s", err, out)
	}
}

func fileLimitChild(t *testing.T) {
	for _, tc := range []struct {
		maxConns int
		want     string
	}{
		{0, "open_file_limit=256 needed=1120"},
		{100, ""},
	} {
		var buf bytes.Buffer
		f := newFixture(t)
		o := app.Options{DataDir: f.data, Dev: true, Node: "test", Version: "test", Logger: slog.New(slog.NewTextHandler(&buf, nil)),
			HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: f.tokens(t), Server: server.HTTPOptions{MaxConnections: tc.maxConns}}}
		a, err := app.Open(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		a.Close()
		warned := strings.Contains(buf.String(), "open-file limit")
		if tc.want == "" && warned {
			t.Errorf("max_connections %d under a limit of 256: warned %q; want no warning", tc.maxConns, buf.String())
		}
		if tc.want != "" && !strings.Contains(buf.String(), tc.want) {
			t.Errorf("max_connections %d under a limit of 256: the log %q does not say %q", tc.maxConns, buf.String(), tc.want)
		}
	}
}
