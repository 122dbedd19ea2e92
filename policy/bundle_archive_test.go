package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// repack returns a copy of the gzipped tar bundle at path with the entries
// of extra appended (each a header and, for a regular file, a body), as a
// hand-made or tampered archive would carry them. The signature is left as
// it was.
func repack(t *testing.T, path string, extra ...tarEntry) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(mustRead(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range extra {
		h := e.hdr
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if h.Mode == 0 && h.Typeflag != tar.TypeXGlobalHeader {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "repacked.tar.gz")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type tarEntry struct {
	hdr  tar.Header
	body []byte
}

func regEntry(name string, body []byte) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg}, body: body}
}

// TestLoadBundleRefusesArchiveShapes feeds LoadBundle archives that OPA's
// own tooling never writes but a hand-made or hostile bundle can carry. Each
// must be refused as a bad bundle (ErrBundle) that names the entry, before
// OPA's reader decompresses it: a gzip bomb must not be inflated into
// memory, and a link must not silently stand in for a module.
func TestLoadBundleRefusesArchiveShapes(t *testing.T) {
	ctx := context.Background()
	signer := newSigner(t, "k1")
	keys := []VerificationKey{signer.VerificationKey()}
	b := newBundle(filesOf(reasonPolicy("a")), "r1")
	if err := SignBundle(ctx, b, signer); err != nil {
		t.Fatal(err)
	}
	good, _ := writeBundleFile(t, b)
	if _, _, err := LoadBundle(ctx, good, keys, Options{}); err != nil {
		t.Fatalf("the unmodified bundle does not load: %v", err)
	}
	module := b.Modules[0].Raw
	// Two files of 17 MiB of zeros: each below the per-file limit OPA's
	// reader applies, together above MaxBundleSize; about 70 KiB gzipped.
	zeros := make([]byte, 17<<20)

	tests := []struct {
		name  string
		extra []tarEntry
		want  string // in the error
	}{
		{"gzip bomb", []tarEntry{regEntry("/pad1.bin", zeros), regEntry("/pad2.bin", zeros)},
			"larger than 33554432 bytes uncompressed"},
		{"symbolic link", []tarEntry{{hdr: tar.Header{Name: "/custos/deny.rego", Typeflag: tar.TypeSymlink, Linkname: "/etc/custos/deny.rego"}}},
			`entry "/custos/deny.rego" is a symbolic link`},
		{"hard link", []tarEntry{{hdr: tar.Header{Name: "/custos/copy.rego", Typeflag: tar.TypeLink, Linkname: "custos/authz.rego"}}},
			`entry "/custos/copy.rego" is a hard link`},
		{"FIFO", []tarEntry{{hdr: tar.Header{Name: "/custos/pipe.rego", Typeflag: tar.TypeFifo}}},
			`entry "/custos/pipe.rego" is a FIFO`},
		{"duplicate entry", []tarEntry{regEntry("/"+b.Modules[0].Path, module)},
			"appears twice"},
		{"duplicate entry after normalization", []tarEntry{regEntry(b.Modules[0].Path, module)},
			"appears twice"},
		{"path traversal", []tarEntry{regEntry("../custos/evil.rego", module)},
			`entry "../custos/evil.rego" is not a clean relative path`},
		{"traversal inside", []tarEntry{regEntry("/custos/../../evil.rego", module)},
			"is not a clean relative path"},
		{"dot prefix", []tarEntry{regEntry("./custos/authz.rego", module)},
			"is not a clean relative path"},
		{"double slash", []tarEntry{regEntry("//custos/x.rego", module)},
			"is not a clean relative path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := repack(t, good, tc.extra...)
			e, _, err := LoadBundle(ctx, path, keys, Options{})
			if e != nil || !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadBundle = %v, %v; want ErrBundle saying %q", e != nil, err, tc.want)
			}
			if _, err := ReadUnverifiedBundle(bytes.NewReader(mustRead(t, path))); !errors.Is(err, ErrBundle) {
				t.Fatalf("ReadUnverifiedBundle: err = %v, want ErrBundle", err)
			}
		})
	}

	// The refusal costs what the check reads, not what the archive inflates
	// to: OPA's reader would hold both 17 MiB files in memory first.
	t.Run("gzip bomb is not inflated into memory", func(t *testing.T) {
		path := repack(t, good, regEntry("/pad1.bin", zeros), regEntry("/pad2.bin", zeros))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := LoadBundle(ctx, path, keys, Options{})
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
			t.Errorf("LoadBundle allocated %d MiB to refuse a %d KiB bomb; want under 8 MiB", alloc>>20, len(mustRead(t, path))>>10)
		}
		if !errors.Is(err, ErrBundle) {
			t.Errorf("err = %v, want ErrBundle", err)
		}
	})

	// What OPA's tooling and git write is still accepted: directory entries
	// and a PAX global header (git archive) beside the files.
	t.Run("directories and PAX global header", func(t *testing.T) {
		path := repack(t, good,
			tarEntry{hdr: tar.Header{Name: "/custos/", Typeflag: tar.TypeDir, Mode: 0o755}},
			tarEntry{hdr: tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "0123abcd"}}})
		if _, _, err := LoadBundle(ctx, path, keys, Options{}); err != nil {
			t.Fatalf("LoadBundle: %v", err)
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
