//go:build unix

package secrets

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDevKeysAsRootStayTheDataDirectoryOwners: a FHIR import without Vault
// run as root (or serve --dev as root once) wrote D/dev-keys.json root's,
// mode 0600: serve --dev as the directory's owner could not read its keys.
// The file now takes the data directory's owner, new or replaced. Found by
// probe-ops, beside the catalog's.
func TestDevKeysAsRootStayTheDataDirectoryOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a command run as root writes files another account must read")
	}
	const nobody = 65534
	dir := t.TempDir()
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, DevKeyFile)
	for _, replace := range []bool{false, true} {
		if _, err := writeDevKeys(p, devKeyFile{}, replace); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != nobody {
			t.Errorf("replace=%v: %s belongs to %d, want the data directory's owner %d", replace, DevKeyFile, uid, nobody)
		}
	}
}
