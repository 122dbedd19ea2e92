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

	"github.com/custos-mcp/custos/internal/durable"
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
// dir must be empty. Only flat regular file names are accepted.
func ReadBundle(r io.Reader, dir string) error {
	return unpack(tar.NewReader(r), dir, "")
}

// unpack reads the remaining entries of tr, each named prefix + a flat
// regular file name, into the new directory dir (see ReadBundle).
func unpack(tr *tar.Reader, dir, prefix string) error {
	dir = filepath.Clean(dir)
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%w: %s", errNotEmpty, dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
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
		if err := readFile(filepath.Join(tmp, name), tr, h.Size); err != nil {
			return err
		}
		files++
	}
	if files == 0 {
		return errors.New("access: bundle stream: empty")
	}
	if err := os.Chmod(tmp, 0o700); err != nil {
		return err
	}
	if err := durable.PublishDir(tmp, dir, nil); err != nil {
		return err
	}
	ok = true
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
