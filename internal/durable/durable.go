package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/custos-mcp/custos/internal/owner"
	"github.com/custos-mcp/custos/internal/regularfile"
)

// SyncDir fsyncs directory dir, making an entry created, renamed or removed
// in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteFile writes data to path atomically and durably with mode (see the
// package invariants). Run as root, the file keeps the owner and group of
// the file it replaces, or takes the directory's when it is new
// (owner.Match): a data directory's state, or a file installed root:custos
// for the service account, stays readable by that account.
func WriteFile(path string, data []byte, mode os.FileMode) (err error) {
	if err := Replaceable(path); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	owner.Match(f, path)
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, mode)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return err
	}
	if err := SyncDir(dir); err != nil {
		return &UnsyncedError{Path: path, Dir: dir, Err: err}
	}
	return nil
}

// UnsyncedError is WriteFile's error when the new file is in place under
// Path, complete, but the fsync of its directory Dir, which makes the name
// durable, failed (Err): a crash may yet leave no file there, or the one
// it replaced. Its text is Err's; a caller that tells its operator what
// is at Path branches on the type.
type UnsyncedError struct {
	Path, Dir string
	Err       error
}

func (e *UnsyncedError) Error() string { return e.Err.Error() }

func (e *UnsyncedError) Unwrap() error { return e.Err }

// NotRegularError: the path a file was to be written to exists, or its
// symbolic link leads to something that exists, and is no regular file.
type NotRegularError struct {
	Path string
	Mode os.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is not a regular file (%s): a file is written beside it and renamed over it, which would replace it; write to standard output and redirect it instead", e.Path, regularfile.Kind(e.Mode))
}

// Replaceable returns a *NotRegularError when path exists (following
// symbolic links) and is no regular file: a write that renames a new
// file over path would replace it. "-o /dev/null" as root replaced the
// system's /dev/null with a regular file of mode 0600 (found 2026-12-06),
// and "-o /dev/stdout" would replace the link /dev/stdout. A path that
// does not exist, or a regular file, is replaceable.
func Replaceable(path string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().IsRegular() {
		return nil
	}
	return &NotRegularError{Path: path, Mode: fi.Mode()}
}

// PublishDir renames the directory tmp, built in dst's parent and whose
// files the caller has fsynced, to dst, durably: it fsyncs tmp, calls
// check (if not nil) on dst so that the caller can refuse what is there
// with its own error (an existing non-empty directory, say), refuses a dst
// that exists and is not a directory, removes an existing (empty) dst,
// renames tmp to dst and fsyncs dst's parent. On an error before the
// rename, tmp is left for the caller to remove and dst is as it was.
func PublishDir(tmp, dst string, check func(dst string) error) error {
	if err := SyncDir(tmp); err != nil {
		return err
	}
	if check != nil {
		if err := check(dst); err != nil {
			return err
		}
	}
	if fi, err := os.Lstat(dst); err == nil && !fi.IsDir() {
		return fmt.Errorf("durable: %s exists and is not a directory", dst)
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(dst))
}
