package app_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/app/admin"
)

// TestAddressFilesOnlyOnceStarted: the MCP and ops address files, which
// scripts and operators wait for, appear only once Open has everything up,
// the admin socket included, and not at all when the start fails after the
// listeners were bound. They were written as soon as the listeners were
// bound: a start that then failed (here: the admin socket's path taken by a
// file that is no socket) left both behind, and under load a script that
// removed the admin socket as soon as the address file appeared
// (cmd/custos access_lock_held.txtar) made the server fail its start.
func TestAddressFilesOnlyOnceStarted(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	mcpAddr, opsAddr := filepath.Join(dir, "mcp.url"), filepath.Join(dir, "ops.url")
	options := func() app.Options {
		return app.Options{DataDir: f.data, Dev: true, Node: "test", Version: "test",
			HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", AddrFile: mcpAddr, Tokens: f.tokens(t)},
			Ops:  app.OpsOptions{Listen: "127.0.0.1:0", AddrFile: opsAddr}}
	}

	sock := admin.Path(f.data)
	if err := os.WriteFile(sock, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	if a, err := app.Open(context.Background(), options()); err == nil {
		a.Close()
		t.Fatal("Open succeeded with a regular file at the admin socket's path")
	}
	for _, p := range []string{mcpAddr, opsAddr} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a start that failed at the admin socket left %s (stat: %v); want no address file", filepath.Base(p), err)
		}
	}

	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(context.Background(), options())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	st, err := os.Lstat(sock)
	if err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("after Open the admin socket is %v, %v; want a socket", st, err)
	}
	for p, want := range map[string]string{mcpAddr: a.URL() + "\n", opsAddr: a.OpsURL() + "\n"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", filepath.Base(p), b, err, want)
		}
	}
}
