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
	dir := unreadableDir(t)
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

// TestAuditPubkeyUnconfirmedNameSaysItIsThere: 'audit pubkey -o FILE'
// renamed the complete verifier file into place, then the fsync of FILE's
// directory failed (mode 0300, as above): it exited 1 with the fsync's
// error alone ("open DIR: permission denied"), FILE there and nothing
// saying so. It now says, as 'audit export -o' does, that FILE is
// written, complete, and its name not confirmed durable; exit 1.
func TestAuditPubkeyUnconfirmedNameSaysItIsThere(t *testing.T) {
	if asnobody.Run(t, "TestAuditPubkeyUnconfirmedNameSaysItIsThere") {
		return
	}
	data := anchoredDataDir(t, 4)
	dir := unreadableDir(t)
	path := filepath.Join(dir, "custos.vkeys")
	var stdout, stderr bytes.Buffer
	code := run([]string{"audit", "pubkey", "--data-dir", data, "--dev", "-o", path}, &stdout, &stderr)
	msg := stderr.String()
	for _, want := range []string{
		path + " is written, complete, under its name, but that name is not confirmed durable: syncing its directory " + dir + " failed: ",
		"permission denied",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if b, err := os.ReadFile(path); err != nil || len(b) == 0 {
		t.Errorf("%s: %q (%v), want the verifier file", path, b, err)
	}
}

// unreadableDir is a new directory of mode 0300: an account may write and
// search it, so a rename in it works, but not open it, so its fsync fails.
func unreadableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o300); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	return dir
}
