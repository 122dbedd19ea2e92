//go:build unix

package fhirsync

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSyncFilesAsRootStayTheDataDirectoryOwners: 'custos sync' run as root
// on a stopped server's data directory (docs/operations.md, "Scheduled FHIR
// sync") created sync-<id>.lock and wrote sync-<id>.json root's, mode 0600:
// the server's scheduled sync, running as custos, could then open neither.
// Both now take the data directory's owner. Found by probe-ops.
func TestSyncFilesAsRootStayTheDataDirectoryOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a sync run as root creates files another account must open")
	}
	const nobody = 65534
	dir := t.TempDir()
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	const base = "https://fhir.example/r4"
	unlock, err := lockBase(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	// The lock file exists while the sync holds it (unlock removes it).
	defer unlock()
	if err := writeState(dir, State{Base: base}); err != nil {
		t.Fatal(err)
	}
	p := statePath(dir, base)
	for _, f := range []string{p, p[:len(p)-len(filepath.Ext(p))] + ".lock"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != nobody {
			t.Errorf("%s belongs to %d, want the data directory's owner %d", filepath.Base(f), uid, nobody)
		}
	}
}

// TestExistingSyncLockKeepsItsOwner: a sync run as root gave a lock file it
// found, not created, to the data directory's owner whenever it had one
// link. That owner can hard-link a root file there (where
// fs.protected_hardlinks is off; macOS and the BSDs have no such switch)
// and unlink that name once root has opened it, so that the link count was
// one again when counted, and root gave the root file away. The root-owned
// one-link file here is what root's descriptor then named. Found by review
// (h-review17); fails on the old code.
func TestExistingSyncLockKeepsItsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root chowns another account's file (not a pass)")
	}
	const nobody = 65534
	dir := t.TempDir()
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	const base = "https://fhir.example/r4"
	p := statePath(dir, base)
	lock := p[:len(p)-len(filepath.Ext(p))] + ".lock"
	if err := os.WriteFile(lock, nil, 0o600); err != nil { // root's
		t.Fatal(err)
	}
	unlock, err := lockBase(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock() // removes the file: its owner is looked at while held
	fi, err := os.Stat(lock)
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 0 {
		t.Errorf("a sync lock file found by a root sync (a root file) was given to %d", uid)
	}
}

// TestDevClientKeyAsRootIsTheDataDirectoryOwners: 'custos sync --dev' run
// as root created D/sync-client-key.pem root's, mode 0600, beside the
// sync-<id>.json and .lock it gave to the data directory's owner: serve
// --dev's scheduled sync, running as that account, could not read its own
// client key. Found by review (h-review17); fails on the old code.
func TestDevClientKeyAsRootIsTheDataDirectoryOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root creates a file for another owner (not a pass)")
	}
	const nobody = 65534
	dir := t.TempDir()
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "sync-client-key.pem")
	if _, _, err := DevKey(p); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobody || st.Gid != nobody || fi.Mode().Perm() != 0o600 {
		t.Errorf("sync-client-key.pem: %d:%d %v, want %d:%d -rw-------", st.Uid, st.Gid, fi.Mode().Perm(), nobody, nobody)
	}
}
