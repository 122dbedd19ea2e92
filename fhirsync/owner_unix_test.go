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
	unlock()
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
