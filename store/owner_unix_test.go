//go:build unix

package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is the account the tests give the data directory to, standing in
// for the service account custos (deploy/systemd).
const nobody = 65534

func ownerUID(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

// giveDir gives dir and every file in it to nobody, as the service
// account's data directory.
func giveDir(t *testing.T, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, nobody, nobody)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestImportAsRootKeepsTheCatalogOwner: 'custos import' run as root (the
// routine tasks of docs/operations.md run it so) on the data directory of
// a server running as custos renamed a root-owned 0600 scratch copy over
// catalog.db: the server logged "replaced catalog file does not open;
// still serving the previous one" and its next start failed with
// "store: open: open D/catalog.db: permission denied". So did the import
// lock file that a first import run as root created (a later import as
// custos could not open it), and a first import into the account's empty
// data directory. Found by probe-ops following the routine tasks with the
// unit's account. The files now belong to the catalog's owner, or the
// directory's while there is no catalog.
func TestImportAsRootKeepsTheCatalogOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only an import run as root creates files another account must open")
	}
	dir := t.TempDir()
	giveDir(t, dir)
	path := filepath.Join(dir, "catalog.db")
	f := seedFixture(t, 10)
	ctx := context.Background()

	// The first import, into the account's empty data directory.
	if _, err := ImportStaged(ctx, path, f.dir, Options{Timeout: time.Second}, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + ".import.lock"} {
		if uid := ownerUID(t, p); uid != nobody {
			t.Errorf("first import as root: %s belongs to %d, want the data directory's owner %d", filepath.Base(p), uid, nobody)
		}
	}

	// A re-import that changes something replaces the file: the new one
	// must stay the account's.
	giveDir(t, dir)
	f.writeFile(f.entries[0].File, []byte(strings.Replace(string(f.readFile(f.entries[0].File)), "seed", "seed2", 1)))
	rep, err := ImportStaged(ctx, path, f.dir, Options{Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Updated != 1 {
		t.Fatalf("test premise: the re-import updates one resource: %+v", rep)
	}
	if uid := ownerUID(t, path); uid != nobody {
		t.Errorf("re-import as root: catalog.db belongs to %d, want its previous owner %d", uid, nobody)
	}

	// store reencrypt (serve stopped) compacts into a new file too.
	s := openKeyed(t, path, Options{DataKeys: newFakeKeys(testKEK), Migrate: true})
	if _, err := s.Reencrypt(ctx, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if uid := ownerUID(t, path); uid != nobody {
		t.Errorf("reencrypt as root: catalog.db belongs to %d, want its previous owner %d", uid, nobody)
	}
	checkDB(t, path)
}

// TestExistingImportLockKeepsItsOwner: an import run as root gave an
// import lock file it found, not created, to the catalog's owner whenever
// it had one link. The data directory is that owner's: it can hard-link a
// root file there (where fs.protected_hardlinks is off; macOS and the BSDs
// have no such switch) and unlink that name once root has opened it, so
// that the link count was one again when counted, and root gave the root
// file away. The root-owned one-link file here is what root's descriptor
// then named. Found by review (h-review17); fails on the old code.
func TestExistingImportLockKeepsItsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root chowns another account's file (not a pass)")
	}
	dir := t.TempDir()
	giveDir(t, dir)
	path := filepath.Join(dir, "catalog.db")
	lock := path + ".import.lock"
	if err := os.WriteFile(lock, nil, 0o600); err != nil { // root's
		t.Fatal(err)
	}
	unlock, err := lockFile(lock, path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if uid := ownerUID(t, lock); uid != 0 {
		t.Errorf("an import lock file found by a root import (a root file) was given to %d", uid)
	}
}
