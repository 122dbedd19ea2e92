package main

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestTokenNewKeepsTheFileReadableByServe: docs/operations.md installs the
// token file root:custos 0640 so that serve, running as custos, reads it.
// 'custos token new' run as root to add a token rewrote it root:root 0600:
// serve's next start failed on it. An existing file keeps its mode (and,
// run as root, its owner and group); a new one is created 0600. Found by
// probe-ops adding a second token to /etc/custos/tokens.json.
func TestTokenNewKeepsTheFileReadableByServe(t *testing.T) {
	dir := t.TempDir()
	principal := filepath.Join(dir, "principal.json")
	if err := os.WriteFile(principal, []byte(`{"sub": "dr.alice", "roles": ["clinician"], "client_id": "assistant", "tenant": "general-hospital", "patients": [], "purpose_of_use": "TREAT"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.json")
	newToken := func() {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run([]string{"token", "new", "--principal", principal, "--tokens", tokens}, &out, &errb); code != 0 {
			t.Fatalf("token new: exit %d: %s", code, errb.String())
		}
	}
	newToken()
	if fi, err := os.Stat(tokens); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("a new token file: %v, %v; want mode 0600", fi.Mode().Perm(), err)
	}

	// As installed: group-readable, the group the service account's.
	if err := os.Chmod(tokens, 0o640); err != nil {
		t.Fatal(err)
	}
	const group = 65534
	asRoot := os.Geteuid() == 0
	if asRoot {
		if err := os.Chown(tokens, 0, group); err != nil {
			t.Fatal(err)
		}
	}
	newToken()
	fi, err := os.Stat(tokens)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("after adding a token: mode %v, want the file's 0640 kept", fi.Mode().Perm())
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; asRoot && gid != group {
		t.Errorf("after adding a token as root: group %d, want the file's %d kept", gid, group)
	}
}
