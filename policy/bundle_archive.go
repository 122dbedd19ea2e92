package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// checkArchive checks the gzipped tar of a bundle before OPA's bundle reader
// sees it. OPA's tarball loader (v1/bundle/file.go) reads every regular file
// of the archive into memory before any signature is checked, each up to the
// reader's size limit but with no bound on their sum, and it silently skips
// every entry that is not a regular file. So without this check a bundle of a
// few hundred kilobytes of gzip can make the loader allocate gigabytes, and a
// link stored in place of a module drops that module without a word.
//
// It refuses, naming the entry:
//   - an archive whose uncompressed tar stream (headers, contents, padding)
//     exceeds MaxBundleSize: decompression stops there;
//   - an entry that is neither a regular file nor a directory: symbolic and
//     hard links, devices, FIFOs (a PAX global header, as git archive writes,
//     is allowed);
//   - a file whose name, without one leading "/", is not a clean relative
//     path (fs.ValidPath: no "..", "." or empty element, no trailing "/");
//   - two files with the same name.
//
// Everything it accepts, OPA's reader sees exactly as before; the signature,
// the manifest and the modules are checked by that reader and by LoadBundle.
func checkArchive(data []byte) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not a gzipped tar: %w", err)
	}
	lr := &io.LimitedReader{R: zr, N: MaxBundleSize + 1}
	tooBig := func() error {
		return fmt.Errorf("bundle larger than %d bytes uncompressed", MaxBundleSize)
	}
	tr := tar.NewReader(lr)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if lr.N <= 0 {
			return tooBig()
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the tar archive: %w", err)
		}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader:
			continue
		case tar.TypeReg:
		default:
			return fmt.Errorf("entry %q is a %s, not a regular file: a policy bundle holds files only", h.Name, entryKind(h.Typeflag))
		}
		name := strings.TrimPrefix(h.Name, "/")
		if !fs.ValidPath(name) || name == "." {
			return fmt.Errorf("entry %q is not a clean relative path (no \"..\", \".\" or empty element)", h.Name)
		}
		if seen[name] {
			return fmt.Errorf("entry %q appears twice", h.Name)
		}
		seen[name] = true
		if h.Size > MaxBundleSize {
			return tooBig()
		}
	}
}

// entryKind names a tar entry type for an error message.
func entryKind(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "FIFO"
	}
	return fmt.Sprintf("tar entry of type %q", t)
}
