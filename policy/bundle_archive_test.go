package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
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

// TestLoadBundleSaysWhySignatureFails: bundles that OPA's own signer (the
// code behind opa build --signing-key and opa sign) produces but custos
// cannot verify are refused as ErrSignature with the reason in the words
// of custos's configuration, not only OPA's ("failed to unpack ECDSA
// signature", "verification key ID is empty").
func TestLoadBundleSaysWhySignatureFails(t *testing.T) {
	ctx := context.Background()
	ecPEM := newKeyPEM(t)
	signer, err := ParseFileSigner("security-team", ecPEM)
	if err != nil {
		t.Fatal(err)
	}
	keys := []VerificationKey{signer.VerificationKey()}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)})
	tests := []struct {
		name, key, alg, kid string
		want                string
	}{
		{"RS256", string(rsaPEM), "RS256", "security-team", `signed with "RS256"; custos verifies ES256 (ECDSA P-256) signatures only`},
		// The verification key's PEM as an HMAC secret: the classic
		// algorithm confusion, refused because the algorithm comes from the
		// key configuration.
		{"HS256 over the public key", string(keys[0].PEM), "HS256", "security-team", `signed with "HS256"`},
		{"no key id (opa sign without claims)", string(ecPEM), "ES256", "", `the signature names no key (no "kid" header, no "keyid" claim)`},
		{"key id not configured", string(ecPEM), "ES256", "old-team", `signed with key "old-team", which is not configured (configured: security-team)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBundle(filesOf(reasonPolicy("a")), "r1")
			if err := b.GenerateSignature(bundle.NewSigningConfig(tc.key, tc.alg, ""), tc.kid, true); err != nil {
				t.Fatal(err)
			}
			path, _ := writeBundleFile(t, b)
			e, _, err := LoadBundle(ctx, path, keys, Options{})
			if e != nil || !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadBundle = %v, %v; want ErrSignature saying %q", e != nil, err, tc.want)
			}
			if strings.Contains(err.Error(), strings.Split(b.Signatures.Signatures[0], ".")[2]) {
				t.Error("the error quotes the signature")
			}
		})
	}
}

// TestLoadBundleRefusesSparseBomb: testdata/sparse-bomb.tar.gz was written
// by GNU tar 1.34 (truncate -s 31M pad1.bin … pad8.bin; tar --format=pax
// --sparse --sparse-version=1.0 -czf): 575 bytes holding eight sparse files
// of 31 MiB each, whose PAX GNU.sparse records make Go's tar reader, and
// OPA's loader with it, produce 248 MiB of zeros from a stream that holds
// almost none of them. The sizes count, not the bytes the stream holds.
func TestLoadBundleRefusesSparseBomb(t *testing.T) {
	signer := newSigner(t, "k1")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := LoadBundle(context.Background(), filepath.Join("testdata", "sparse-bomb.tar.gz"), []VerificationKey{signer.VerificationKey()}, Options{})
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("LoadBundle allocated %d MiB to refuse a 575-byte sparse bomb; want under 8 MiB", alloc>>20)
	}
	if !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), "larger than 33554432 bytes uncompressed") {
		t.Errorf("err = %v, want ErrBundle: larger than MaxBundleSize uncompressed", err)
	}
}

// TestOPAToolBundles loads bundles written by the OPA CLI itself
// (testdata/opa/README.md): opa build's ES256 bundle loads under the key
// id OPA writes ("default"); an RS256 one and an opa sign one without a
// key id are refused, saying so in custos's terms.
func TestOPAToolBundles(t *testing.T) {
	ctx := context.Background()
	pub, err := ParseVerificationKey("default", mustRead(t, filepath.Join("testdata", "opa", "ec.pub.pem")))
	if err != nil {
		t.Fatal(err)
	}
	keys := []VerificationKey{pub}
	_, info, err := LoadBundle(ctx, filepath.Join("testdata", "opa", "build-es256.tar.gz"), keys, Options{})
	if err != nil || info.KeyID != "default" || info.Revision != "2026-12-05" {
		t.Fatalf("opa build ES256: %+v, %v", info, err)
	}
	for file, want := range map[string]string{
		"build-rs256.tar.gz": `signed with "RS256"; custos verifies ES256`,
		"sign-nokid.tar.gz":  `the signature names no key`,
	} {
		_, _, err := LoadBundle(ctx, filepath.Join("testdata", "opa", file), keys, Options{})
		if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want ErrSignature saying %q", file, err, want)
		}
	}
}
