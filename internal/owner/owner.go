//go:build unix

// Package owner gives a file that a custos command run as root created in
// a data directory to the account that owns that directory's files, so
// that 'custos serve', running as that account (deploy/systemd: custos),
// can still open it. Root may run the commands that write there (import,
// store reencrypt, the auditor commands on a stopped server;
// docs/operations.md), and a file it creates is root's, mode 0600: a
// catalog.db swapped in that way kept the server out of its own catalog
// (the running server logged "replaced catalog file does not open", and
// the next start failed with permission denied).
package owner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Match gives f the owner and group of ref, or of ref's directory while
// ref does not exist, when this process runs as root and they differ. ref
// is the file f replaces or stands beside (the catalog for its scratch
// copy, the live audit segment for its lock file).
//
// f must be a regular file this process has just created (O_EXCL,
// os.CreateTemp, regularfile.OpenCreate), never one it found: the
// directory is another account's, and a file found there may be a root
// file's second name (a hard link, where fs.protected_hardlinks is off or
// absent, as on macOS and the BSDs), whose link count, read here, that
// account can bring back to one between root's open and this check by
// unlinking its name. Even for a created file, it is given away only while
// it has no other name (one link).
//
// It is best effort and quiet: where root may not chown (NFS with
// root_squash) f stays as it is, and the account that cannot open it later
// is told so by the open's own error.
func Match(f *os.File, ref string) {
	if os.Geteuid() != 0 {
		return
	}
	want, err := os.Stat(ref)
	if errors.Is(err, os.ErrNotExist) {
		want, err = os.Stat(filepath.Dir(ref))
	}
	if err != nil {
		return
	}
	have, err := f.Stat()
	if err != nil {
		return
	}
	w, ok1 := want.Sys().(*syscall.Stat_t)
	h, ok2 := have.Sys().(*syscall.Stat_t)
	if ok1 && ok2 && h.Nlink == 1 && (w.Uid != h.Uid || w.Gid != h.Gid) {
		f.Chown(int(w.Uid), int(w.Gid))
	}
}

// Tree gives dir and everything in it (symbolic links themselves, never
// their targets) the owner and group of ref when this process runs as
// root and ref exists: a restored data directory, staged by root, takes
// the owner of the one it replaces. dir must be a directory this process
// made with mode 0700 and alone wrote in, so that no other account can
// have planted a link or a second name there; it is given away last.
// Best effort and quiet, as Match.
func Tree(dir, ref string) {
	if os.Geteuid() != 0 {
		return
	}
	want, err := os.Stat(ref)
	if err != nil {
		return
	}
	w, ok := want.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != dir {
			os.Lchown(p, int(w.Uid), int(w.Gid))
		}
		return nil
	})
	os.Lchown(dir, int(w.Uid), int(w.Gid))
}
