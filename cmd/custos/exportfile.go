package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/custos-mcp/custos/internal/durable"
	"golang.org/x/sys/unix"
)

// exportFile is the -o FILE of 'audit export' while it is being written:
// an anonymous file in FILE's directory (O_TMPFILE), named only once it
// is complete, so that a command killed mid-export (SIGKILL, the OOM
// killer, a power loss) leaves no partial copy of records behind, which
// nothing would ever remove. Where the file system has no anonymous
// files, it is a hidden temporary file, as before.
type exportFile struct {
	*os.File
	dir, path string
	tmp       string // the hidden temporary file; "" for an anonymous one
}

func createExportFile(path string) (*exportFile, error) {
	if err := durable.Replaceable(path); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	// An anonymous file is named through /proc/self/fd (publish): without
	// /proc (a container or chroot without it), a hidden file it is.
	if _, perr := os.Stat("/proc/self/fd"); perr == nil {
		if fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600); err == nil {
			return &exportFile{File: os.NewFile(uintptr(fd), path), dir: dir, path: path}, nil
		}
	}
	f, err := os.CreateTemp(dir, ".custos-export-*")
	if err != nil {
		return nil, err
	}
	return &exportFile{File: f, dir: dir, path: path, tmp: f.Name()}, nil
}

// publish makes the complete file durable under its name, replacing what
// was there (mode 0600). When the file was renamed into place but the
// fsync of its directory failed, the error is an *unconfirmedError: the
// file is there, complete, but its name may not survive a crash.
func (e *exportFile) publish() error {
	err := e.Sync()
	if err == nil {
		err = e.Chmod(0o600)
	}
	if err == nil && e.tmp == "" {
		// Link the anonymous file under a hidden name, then rename it
		// over path (linkat does not replace). Linking through /proc
		// needs no capability, unlike AT_EMPTY_PATH.
		var b [8]byte
		rand.Read(b[:])
		e.tmp = filepath.Join(e.dir, ".custos-export-"+hex.EncodeToString(b[:]))
		if err = unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", e.Fd()), unix.AT_FDCWD, e.tmp, unix.AT_SYMLINK_FOLLOW); err != nil {
			e.tmp = ""
			err = fmt.Errorf("naming the complete export through /proc/self/fd: %w", err)
		}
	}
	if cerr := e.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(e.tmp, e.path)
	}
	if err != nil {
		e.discard()
		return err
	}
	if err := durable.SyncDir(e.dir); err != nil {
		return &unconfirmedError{path: e.path, dir: e.dir, err: err}
	}
	return nil
}

// unconfirmedError is publish's error (and audit pubkey -o's) when the
// complete file is in place under its name but the fsync of its
// directory, which makes the name durable, failed.
type unconfirmedError struct {
	path, dir string
	err       error
}

func (e *unconfirmedError) Error() string {
	return fmt.Sprintf("%s is written, complete, under its name, but that name is not confirmed durable: syncing its directory %s failed: %v; a system crash before the directory reaches the disk may leave no %s, or the file it replaced: check it after a crash, or run the command again", e.path, e.dir, e.err, filepath.Base(e.path))
}

func (e *unconfirmedError) Unwrap() error { return e.err }

// discard removes what an unpublished file left (nothing for an anonymous
// one).
func (e *exportFile) discard() {
	e.Close()
	if e.tmp != "" {
		os.Remove(e.tmp)
	}
}
