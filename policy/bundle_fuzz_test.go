package policy

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadBundle mutates a signed bundle file. Whatever the bytes,
// LoadBundle must not panic, must fail with one of its documented errors,
// and may only succeed for a file whose policy is exactly the signed one:
// the signature covers every file, so an accepted mutation (say, of the gzip
// header) has the original revision.
func FuzzLoadBundle(f *testing.F) {
	ctx := context.Background()
	// A fixed key, so that the seed corpus stays signed by it; it is derived
	// here rather than committed as a PEM file.
	scalar := sha256.Sum256([]byte("custos policy bundle fuzz key"))
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar[:])
	if err != nil {
		f.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		f.Fatal(err)
	}
	signer, err := ParseFileSigner("fuzz", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		f.Fatal(err)
	}
	keys := []VerificationKey{signer.VerificationKey()}
	files := filesOf(reasonPolicy("a"))
	signed := newBundle(files, "r1")
	if err := SignBundle(ctx, signed, signer); err != nil {
		f.Fatal(err)
	}
	var good, unsigned bytes.Buffer
	if _, err := WriteBundle(&good, signed); err != nil {
		f.Fatal(err)
	}
	if _, err := WriteBundle(&unsigned, newBundle(files, "r1")); err != nil {
		f.Fatal(err)
	}
	wantRevision := revision(filesOf(map[string]string{
		"custos/authz.rego":   reasonPolicy("a")["custos/authz.rego"],
		"custos/lib/lib.rego": reasonPolicy("a")["custos/lib/lib.rego"],
	}))
	f.Add(good.Bytes())
	f.Add(unsigned.Bytes())
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "b.tar.gz")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		e, _, err := LoadBundle(ctx, path, keys, Options{})
		if err != nil {
			for _, want := range []error{ErrBundle, ErrSignature, ErrCompile, ErrTestsFailed} {
				if errors.Is(err, want) {
					return
				}
			}
			t.Fatalf("undocumented error: %v", err)
		}
		if e.Revision() != wantRevision {
			t.Fatalf("loaded revision %s, want the signed %s", e.Revision(), wantRevision)
		}
	})
}
