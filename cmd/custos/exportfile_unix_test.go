//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/internal/asnobody"
)

// TestExportFileUnconfirmedNameSaysItIsThere: 'audit export -o FILE'
// renamed the complete export into place, then the fsync of FILE's
// directory failed (here: the account may write in the directory but not
// open it, mode 0300): it exited 1 saying "export failed, nothing written
// to FILE", with FILE there, complete. It now says FILE is written,
// complete, under its name, and that the name is not confirmed durable,
// and why; exit 1.
func TestExportFileUnconfirmedNameSaysItIsThere(t *testing.T) {
	if asnobody.Run(t, "TestExportFileUnconfirmedNameSaysItIsThere") {
		return
	}
	data := t.TempDir()
	audittest.OpenPath(t, filepath.Join(data, "audit.db"), audit.Options{}).Close()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o300); err != nil { // write and search, not read
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	path := filepath.Join(dir, "x.jsonl")
	var stdout, stderr bytes.Buffer
	code := run([]string{"audit", "export", "--data-dir", data, "--purpose", "HOPERAT", "--format", "jsonl", "-o", path}, &stdout, &stderr)
	msg := stderr.String()
	for _, want := range []string{
		path + " is written, complete, under its name, but that name is not confirmed durable: syncing its directory " + dir + " failed: ",
		"permission denied",
		"exported 1 records, but ",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "nothing written") {
		t.Errorf("the message says nothing was written, with %s in place:\n%s", path, msg)
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Contains(b, []byte(`"seq":1`)) {
		t.Errorf("%s: %q (%v), want the export", path, b, err)
	}
}
