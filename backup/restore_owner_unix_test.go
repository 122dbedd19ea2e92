//go:build unix

package backup_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/backup"
)

// TestRestoreAsRootKeepsTheDataDirectoryOwners: docs/operations.md restores
// as root ('systemctl stop custos', 'custos restore … --force', 'systemctl
// start custos'), into a data directory of the account serve runs as. The
// restored directory and every file in it were root's, mode 0700/0600:
// serve as that account could open none of them (systemd's StateDirectory=
// gives /var/lib/custos back at the next start, but not a data directory
// elsewhere, such as the doc's /srv/custos). They now take the owner of the
// directory they replace. Found by probe-ops restoring into a custos-owned
// directory as root.
func TestRestoreAsRootKeepsTheDataDirectoryOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a restore run as root creates files another account must open")
	}
	const nobody = 65534
	ctx := context.Background()
	d := newDataDir(t, 4, 4)
	from := d.saved(t)
	for _, force := range []bool{false, true} {
		to := filepath.Join(t.TempDir(), "custos")
		if err := os.Mkdir(to, 0o700); err != nil {
			t.Fatal(err)
		}
		if force { // a non-empty data directory, replaced
			if err := os.WriteFile(filepath.Join(to, "catalog.db"), []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(to, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		audittest.VerifyOnCleanup(t, filepath.Join(to, backup.FileAudit))
		o := d.restoreOptions(from, to)
		o.Force = force
		if _, err := backup.Restore(ctx, o); err != nil {
			t.Fatal(err)
		}
		n := 0
		err := filepath.WalkDir(to, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			n++
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobody || st.Gid != nobody {
				t.Errorf("force=%v: %s belongs to %d:%d, want the data directory's %d:%d", force, p, st.Uid, st.Gid, nobody, nobody)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < 3 {
			t.Fatalf("test premise: the restored directory holds files (%d entries)", n)
		}
	}
}
