package access

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/custos-mcp/custos/internal/partialdir"
)

// maxBundleFile bounds one file of a bundle read from a stream (a bundle
// of millions of records stays well below).
const maxBundleFile = 64 << 30

// tarDir adds the regular files of dir (a bundle: flat) to tw, in name
// order, each named prefix + its name.
func tarDir(tw *tar.Writer, dir, prefix string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("access: bundle holds %s, which is not a regular file", e.Name())
		}
		if err := tarFile(tw, filepath.Join(dir, e.Name()), prefix+e.Name()); err != nil {
			return err
		}
	}
	return nil
}

func tarFile(tw *tar.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: st.Size(), ModTime: st.ModTime(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// tarBytes adds one file name holding b to tw.
func tarBytes(tw *tar.Writer, name string, b []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(b)
	return err
}

// ReadBundle unpacks a bundle stream (OpBundle's output) into the new
// directory dir, as bundle.Write would have written it: dir either does not
// appear or is complete (built next to it and renamed), and an existing
// dir must be empty. Only flat regular file names are accepted. It is
// NewBundleTarget(dir), its Read and its Publish.
func ReadBundle(r io.Reader, dir string) error {
	t, err := NewBundleTarget(dir)
	if err != nil {
		return err
	}
	defer t.Discard()
	return t.unpack(tar.NewReader(r), "")
}

// BundleTarget is the new directory a bundle stream is unpacked into,
// while it is received: a locked partial directory beside it
// (".NAME.partial-*", mode 0700), renamed into place once complete. A
// command makes it before it asks for the bundle, so that a --out that
// cannot take it (a parent it cannot write, a read-only file system) is
// refused before the access, and its record, start.
//
// The directory appears only complete, and only for a command that
// succeeds: Read unpacks into the partial directory (Dir), the command
// reads back what it reports from there, Publish renames it into place
// last, and Withdraw takes it back if what follows (printing the report)
// fails. Each step is a rename, so no one ever sees a bundle with a file
// missing; a command killed at any point leaves at most a partial
// directory, unlocked, which the next command to the same directory
// removes. The lifecycle and its rules are partialdir.Staged's.
type BundleTarget struct {
	staged *partialdir.Staged
	read   bool // Read (or unpack) was called
	filled bool // and succeeded
}

// NewBundleTarget checks that dir does not exist or is empty, removes the
// partial directories of dir that a killed command left behind (unlocked,
// older than a minute: copies of records, PHI, that nothing else would
// remove), and makes and locks a new one.
func NewBundleTarget(dir string) (*BundleTarget, error) {
	dir = filepath.Clean(dir)
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%w: %s", errNotEmpty, dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	s, err := partialdir.Stage(dir)
	if errors.Is(err, partialdir.ErrTaken) {
		return nil, fmt.Errorf("access: the partial directory beside %s was taken by another command for one left behind (is the file system's clock skewed?); retry", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("access: a directory for the bundle beside %s: %w", dir, err)
	}
	return &BundleTarget{staged: s}, nil
}

// Read unpacks the bundle stream r into the partial directory (Dir), each
// file fsynced; it does not put it in place (Publish). On failure the
// partial directory is removed. Call it once.
func (t *BundleTarget) Read(r io.Reader) error {
	if t.read {
		return errors.New("access: bundle target already used")
	}
	t.read = true
	if err := t.fill(tar.NewReader(r), ""); err != nil {
		t.Discard()
		return err
	}
	t.filled = true
	return nil
}

// Dir is the partial directory the bundle is unpacked into: where to read
// it back until Publish.
func (t *BundleTarget) Dir() string { return t.staged.Dir() }

// Publish renames the partial directory, which Read filled, into place
// (replacing the empty directory that was there), fsynced. On failure
// nothing is left: neither the partial directory nor the bundle, but for
// a bundle renamed into place that could not be taken back
// (*partialdir.NotTakenBackError: partialdir.Staged.Publish).
func (t *BundleTarget) Publish() error {
	if !t.filled {
		return errors.New("access: publish of a bundle target not filled")
	}
	if err := os.Chmod(t.staged.Dir(), 0o700); err != nil {
		t.Discard()
		return err
	}
	return t.staged.Publish(nil)
}

// Withdraw takes back the bundle Publish put in place, for a command that
// fails after it (partialdir.Staged.Withdraw: renamed back, removed, a
// given empty directory made again; one renamed back but not removed is
// removed by Discard). Before Publish it is an error.
func (t *BundleTarget) Withdraw() error { return t.staged.Withdraw() }

// Discard removes the partial directory unless Publish put it in place
// (and no Withdraw took it back), and releases its lock the first time.
// Safe to call more than once: a command defers it.
func (t *BundleTarget) Discard() { t.staged.Discard() }

// unpack reads the remaining entries of tr, each named prefix + a flat
// regular file name, into the partial directory, and renames it into
// place (see ReadBundle). On failure the partial directory is removed.
func (t *BundleTarget) unpack(tr *tar.Reader, prefix string) error {
	if t.read {
		return errors.New("access: bundle target already used")
	}
	t.read = true
	defer t.Discard()
	if err := t.fill(tr, prefix); err != nil {
		return err
	}
	t.filled = true
	return t.Publish()
}

func (t *BundleTarget) fill(tr *tar.Reader, prefix string) error {
	files := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("access: bundle stream: %w", err)
		}
		name, found := strings.CutPrefix(h.Name, prefix)
		if !found || h.Typeflag != tar.TypeReg || name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") || h.Size < 0 || h.Size > maxBundleFile {
			return fmt.Errorf("access: bundle stream: unexpected entry %q", h.Name)
		}
		if err := readFile(filepath.Join(t.staged.Dir(), name), tr, h.Size); err != nil {
			return err
		}
		files++
	}
	if files == 0 {
		return errors.New("access: bundle stream: empty")
	}
	return nil
}

func readFile(path string, r io.Reader, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
