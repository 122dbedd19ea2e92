package admin

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
)

// TestDeepDataDirectory: a data directory whose admin socket path is
// longer than a Unix socket address holds (108 bytes) is served and found
// like any other (before, serve refused to start: "bind: invalid
// argument"), and the socket is removed when the server stops.
func TestDeepDataDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if n := len(Path(dir)); n <= 108 {
		t.Fatalf("socket path of %d bytes: not deep enough for the test", n)
	}
	l := audittest.OpenPath(t, filepath.Join(dir, "audit.db"), audit.Options{Node: "n1"})
	s, err := Listen(Path(dir), Config{Service: access.New(l, nil, dir, nil)})
	if err != nil {
		t.Fatalf("Listen on a %d-byte socket path: %v", len(Path(dir)), err)
	}
	go s.Serve()
	c, err := Dial(context.Background(), Path(dir))
	if err != nil {
		s.Shutdown(context.Background())
		t.Fatalf("Dial on a %d-byte socket path: %v", len(Path(dir)), err)
	}
	res, err := c.Do(context.Background(), access.OpHash, access.HashRequest{Ask: access.Ask{Purpose: "PATRQT"}, Patient: "hk1-0123456789abcdef0123456789abcdef"}, access.Discard)
	c.Close()
	if err != nil || res.AccessSeq != 1 {
		t.Errorf("hash through the socket: %+v, %v", res, err)
	}
	if st, err := os.Stat(Path(dir)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v, %v; want mode 0600", st, err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(Path(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after Shutdown the socket is still there: %v", err)
	}
	if _, err := Dial(context.Background(), Path(dir)); !errors.Is(err, ErrNoSocket) {
		t.Fatalf("after Shutdown: %v, want ErrNoSocket", err)
	}
}
