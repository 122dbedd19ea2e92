//go:build unix

package backup

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/custos-mcp/custos/internal/partialdir"
)

// TestStalePartialsAreRemoved: a backup killed while receiving (kill -9)
// leaves its partial directory, with copies of the catalog and the audit
// log, beside the destination. The next backup to the same destination
// removes it, and only it: not one a running backup holds, nor one just
// created, nor another destination's.
func TestStalePartialsAreRemoved(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "b")
	old := time.Now().Add(-2 * partialdir.Grace)
	mk := func(name string, mtime time.Time) string {
		p := filepath.Join(parent, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, FileCatalog), []byte("a copy of the catalog"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	killed := mk(".b.partial-111", old)
	running := mk(".b.partial-222", old)
	fresh := mk(".b.partial-333", time.Now())
	other := mk(".c.partial-444", old)
	release, ok, err := partialdir.Lock(running)
	if err != nil || !ok {
		t.Fatalf("Lock: %v %v", ok, err)
	}
	defer release()

	var stream bytes.Buffer
	tw := tar.NewWriter(&stream)
	tw.WriteHeader(&tar.Header{Name: FileManifest, Mode: 0o600, Size: 2, Typeflag: tar.TypeReg})
	tw.Write([]byte("{}"))
	tw.Close()
	s, err := Receive(&stream, out)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Discard()
	if !slices.Equal(s.Removed, []string{killed}) {
		t.Errorf("removed %v, want only %s", s.Removed, killed)
	}
	if _, err := os.Stat(killed); !os.IsNotExist(err) {
		t.Errorf("the killed backup's partial directory is still there: %v", err)
	}
	for _, p := range []string{running, fresh, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	// The new partial directory is held while it is being received.
	if _, ok, err := partialdir.Lock(s.dir); ok || err != nil {
		t.Errorf("the receiving backup's own directory is not locked: %v %v", ok, err)
	}
}
