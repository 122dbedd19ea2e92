package policy

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"

	custosrego "github.com/custos-mcp/custos/rego"
)

// newKeyPEM returns a fresh ECDSA P-256 private key as PKCS #8 PEM.
func newKeyPEM(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// newSigner writes a fresh key to a file in a temporary directory and loads
// it with NewFileSigner.
func newSigner(t *testing.T, keyID string) *FileSigner {
	t.Helper()
	path := filepath.Join(t.TempDir(), keyID+".pem")
	if err := os.WriteFile(path, newKeyPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := NewFileSigner(keyID, path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeDir writes files (path → content) under a new temporary directory.
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		writeFile(t, filepath.Join(dir, p), c)
	}
	return dir
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// defaultPolicyFiles is the embedded default policy with its tests.
func defaultPolicyFiles(t *testing.T) map[string]string { return defaultPolicyFilesTB(t) }

func defaultPolicyFilesTB(t testing.TB) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := fs.WalkDir(custosrego.FS, ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		b, err := fs.ReadFile(custosrego.FS, p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// reasonPolicy is a small self-contained policy (two modules, one in a
// subdirectory, and tests) allowing list and read with one reason code. The
// tests check that reason code, so a policy and tests for different codes
// fail.
func reasonPolicy(reason string) map[string]string {
	return map[string]string{
		"custos/authz.rego": fmt.Sprintf(`package custos.authz

import data.custos.lib

decision := {"allow": lib.allowed(input.action), "reasons": [%q], "obligations": []}
`, reason),
		"custos/lib/lib.rego": `package custos.lib

default allowed(_) := false

allowed(action) if action in {"list", "read"}
`,
		"custos/authz_test.rego": fmt.Sprintf(`package custos.authz_test

import data.custos.authz

test_reason if authz.decision.reasons == [%q] with input as {"action": "read"}

test_read_allowed if authz.decision.allow with input as {"action": "read"}

test_templates_denied if not authz.decision.allow with input as {"action": "templates"}
`, reason),
	}
}

func filesOf(m map[string]string) []regoFile {
	var files []regoFile
	for p, c := range m {
		files = append(files, regoFile{path: p, content: []byte(c)})
	}
	return sortFiles(files)
}

// writeBundleFile writes b to a new file and returns its path and digest.
func writeBundleFile(t *testing.T, b *bundle.Bundle) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	digest, err := WriteBundle(&buf, b)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	if want := "sha256:" + hex.EncodeToString(sum[:]); digest != want {
		t.Fatalf("WriteBundle digest %s, want %s", digest, want)
	}
	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, digest
}

var readInput = Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("observation", patientA)}

func TestBundleRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := writeDir(t, reasonPolicy("a"))
	signer := newSigner(t, "custos-policy-2026")
	for _, rev := range []string{"2026-05-01.1", ""} {
		t.Run("revision="+rev, func(t *testing.T) {
			b, err := BuildBundle(ctx, dir, rev)
			if err != nil {
				t.Fatal(err)
			}
			if err := SignBundle(ctx, b, signer); err != nil {
				t.Fatal(err)
			}
			path, digest := writeBundleFile(t, b)
			e, info, err := LoadBundle(ctx, path, []VerificationKey{signer.VerificationKey()}, Options{})
			if err != nil {
				t.Fatalf("LoadBundle: %v", err)
			}
			fromDir, err := LoadDir(ctx, dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			wantRev := rev
			if rev == "" {
				wantRev = fromDir.Revision()
			}
			if info.Digest != digest || e.BundleDigest() != digest || info.KeyID != "custos-policy-2026" || info.Revision != wantRev {
				t.Errorf("info = %+v, BundleDigest = %s; want digest %s, revision %s", info, e.BundleDigest(), digest, wantRev)
			}
			if e.Revision() != fromDir.Revision() {
				t.Errorf("bundle revision %s != directory revision %s", e.Revision(), fromDir.Revision())
			}
			if fromDir.BundleDigest() != "" {
				t.Errorf("directory engine BundleDigest = %q, want empty", fromDir.BundleDigest())
			}
			d, err := e.Decide(ctx, readInput)
			if err != nil || !d.Allow || d.Reasons[0] != "a" || d.Revision != e.Revision() {
				t.Errorf("Decide = %+v, %v", d, err)
			}
			// The test modules are shipped in the bundle.
			var names []string
			for _, m := range b.Modules {
				names = append(names, m.Path)
			}
			if !slices.Contains(names, "custos/authz_test.rego") {
				t.Errorf("bundle modules %v lack the tests", names)
			}
		})
	}
}

func TestWriteBundleDeterministic(t *testing.T) {
	b := newBundle(filesOf(reasonPolicy("a")), "r1")
	var b1, b2 bytes.Buffer
	d1, err1 := WriteBundle(&b1, b)
	d2, err2 := WriteBundle(&b2, b)
	if err1 != nil || err2 != nil || d1 != d2 || !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Fatalf("two writes differ: %s %v, %s %v", d1, err1, d2, err2)
	}
}

func TestBuildBundleRefusesBrokenPolicy(t *testing.T) {
	failing := reasonPolicy("a")
	failing["custos/authz_test.rego"] = strings.Replace(failing["custos/authz_test.rego"], `["a"]`, `["b"]`, 1)
	noTests := reasonPolicy("a")
	delete(noTests, "custos/authz_test.rego")
	for name, tc := range map[string]struct {
		files map[string]string
		want  error
	}{
		"failing tests": {failing, ErrTestsFailed},
		"no tests":      {noTests, ErrTestsFailed},
		"parse error":   {map[string]string{"custos/authz.rego": "package custos.authz\n\ndecision := {\n"}, ErrCompile},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := BuildBundle(context.Background(), writeDir(t, tc.files), ""); !errors.Is(err, tc.want) {
				t.Fatalf("BuildBundle error %v, want %v", err, tc.want)
			}
		})
	}
}

func TestLoadBundleRejects(t *testing.T) {
	ctx := context.Background()
	signer := newSigner(t, "k1")
	keys := []VerificationKey{signer.VerificationKey()}
	good := filesOf(reasonPolicy("a"))
	signed := func(t *testing.T, files []regoFile, s JWSSigner) *bundle.Bundle {
		t.Helper()
		b := newBundle(files, "r1")
		if err := SignBundle(ctx, b, s); err != nil {
			t.Fatal(err)
		}
		return b
	}
	failing := reasonPolicy("a")
	failing["custos/authz_test.rego"] += "\ntest_denies if not authz.decision.allow with input as {\"action\": \"read\"}\n"
	noTests := reasonPolicy("a")
	delete(noTests, "custos/authz_test.rego")
	sandboxEscape := reasonPolicy("a")
	sandboxEscape["custos/net.rego"] = "package custos.net\n\nr := http.send({\"method\": \"get\", \"url\": \"http://x\"})\n"

	tests := []struct {
		name   string
		bundle func(t *testing.T) *bundle.Bundle
		keys   []VerificationKey
		want   error
	}{
		{name: "unsigned", want: ErrSignature,
			bundle: func(t *testing.T) *bundle.Bundle { return newBundle(good, "r1") }},
		{name: "tampered module", want: ErrSignature,
			bundle: func(t *testing.T) *bundle.Bundle {
				b := signed(t, good, signer)
				b.Modules[0].Raw = []byte(strings.Replace(string(b.Modules[0].Raw), `"a"`, `"b"`, 1))
				return b
			}},
		{name: "tampered manifest", want: ErrSignature,
			bundle: func(t *testing.T) *bundle.Bundle {
				b := signed(t, good, signer)
				b.Manifest.Revision = "r2"
				return b
			}},
		{name: "sequence claim raised after signing", want: ErrSignature,
			bundle: func(t *testing.T) *bundle.Bundle {
				b := newBundle(filesOf(failing), "r1")
				if err := SetBundleSequence(b, 1); err != nil {
					t.Fatal(err)
				}
				if err := SignBundle(ctx, b, signer); err != nil {
					t.Fatal(err)
				}
				if err := SetBundleSequence(b, 99); err != nil {
					t.Fatal(err)
				}
				return b
			}},
		{name: "file added after signing", want: ErrSignature,
			bundle: func(t *testing.T) *bundle.Bundle {
				b := signed(t, good, signer)
				b.Modules = append(b.Modules, bundle.ModuleFile{URL: "custos/x.rego", Path: "custos/x.rego",
					Raw: []byte("package custos.x\n\ny := 1\n")})
				return b
			}},
		{name: "file removed after signing", want: ErrSignature,
			bundle: func(t *testing.T) *bundle.Bundle {
				b := signed(t, good, signer)
				b.Modules = b.Modules[:len(b.Modules)-1]
				return b
			}},
		{name: "signed by another key under the same id", want: ErrSignature,
			bundle: func(t *testing.T) *bundle.Bundle { return signed(t, good, newSigner(t, "k1")) }},
		{name: "signed by an unknown key id", want: ErrSignature,
			bundle: func(t *testing.T) *bundle.Bundle { return signed(t, good, newSigner(t, "k2")) }},
		{name: "signature from another bundle", want: ErrSignature,
			bundle: func(t *testing.T) *bundle.Bundle {
				other := signed(t, filesOf(reasonPolicy("b")), signer)
				b := newBundle(good, "r1")
				b.Signatures = other.Signatures
				return b
			}},
		{name: "failing tests", want: ErrTestsFailed,
			bundle: func(t *testing.T) *bundle.Bundle { return signed(t, filesOf(failing), signer) }},
		{name: "no tests", want: ErrTestsFailed,
			bundle: func(t *testing.T) *bundle.Bundle { return signed(t, filesOf(noTests), signer) }},
		{name: "parse error", want: ErrCompile,
			bundle: func(t *testing.T) *bundle.Bundle {
				return signed(t, filesOf(map[string]string{"custos/authz.rego": "package custos.authz\n\ndecision := {\n"}), signer)
			}},
		{name: "compile error", want: ErrCompile,
			bundle: func(t *testing.T) *bundle.Bundle {
				return signed(t, filesOf(map[string]string{"custos/authz.rego": "package custos.authz\n\ndecision := x\n"}), signer)
			}},
		{name: "forbidden builtin", want: ErrCompile,
			bundle: func(t *testing.T) *bundle.Bundle { return signed(t, filesOf(sandboxEscape), signer) }},
		{name: "data documents", want: ErrBundle,
			bundle: func(t *testing.T) *bundle.Bundle {
				b := newBundle(good, "r1")
				b.Data = map[string]any{"custos": map[string]any{"allow_all": true}}
				if err := SignBundle(ctx, b, signer); err != nil {
					t.Fatal(err)
				}
				return b
			}},
		{name: "no verification keys", keys: []VerificationKey{}, want: ErrKey,
			bundle: func(t *testing.T) *bundle.Bundle { return signed(t, good, signer) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, digest := writeBundleFile(t, tc.bundle(t))
			k := keys
			if tc.keys != nil {
				k = tc.keys
			}
			e, _, err := LoadBundle(ctx, path, k, Options{})
			if e != nil || !errors.Is(err, tc.want) {
				t.Fatalf("LoadBundle = %v, %v; want error %v", e, err, tc.want)
			}
			ce, ok := errors.AsType[*CandidateError](err)
			if !ok {
				t.Fatalf("error %T is not a *CandidateError", err)
			}
			if tc.want != ErrKey && ce.Digest != digest {
				t.Errorf("candidate digest %q, want %q", ce.Digest, digest)
			}
			// A bundle whose signature did not verify names nothing of
			// itself but its digest: its claims are the sender's
			// (policy/reject candidate_revision=, candidate_sequence=,
			// candidate_key=; 'custos policy status').
			if (tc.want == ErrSignature || tc.want == ErrKey) && (ce.Revision != "" || ce.Sequence != 0 || ce.KeyID != "") {
				t.Errorf("unverified candidate named as revision %q sequence %d key %q", ce.Revision, ce.Sequence, ce.KeyID)
			}
			t.Logf("rejected: %v", err)
		})
	}
	t.Run("not a bundle", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.tar.gz")
		writeFile(t, path, "not gzip")
		if _, _, err := LoadBundle(ctx, path, keys, Options{}); !errors.Is(err, ErrBundle) {
			t.Fatalf("err = %v, want ErrBundle", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		if _, _, err := LoadBundle(ctx, filepath.Join(t.TempDir(), "none"), keys, Options{}); !errors.Is(err, ErrBundle) {
			t.Fatalf("err = %v, want ErrBundle", err)
		}
	})
}

// TestSignBundleMatchesOPA checks interoperability with OPA's own signing
// code: OPA's DefaultSigner, given the same key, signs the same file digests,
// and a bundle it signed loads with LoadBundle.
func TestSignBundleMatchesOPA(t *testing.T) {
	ctx := context.Background()
	keyPEM := newKeyPEM(t)
	signer, err := ParseFileSigner("opa-key", keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	files := filesOf(defaultPolicyFiles(t))

	ours := newBundle(files, "r1")
	if err := SignBundle(ctx, ours, signer); err != nil {
		t.Fatal(err)
	}
	theirs := newBundle(files, "r1")
	if err := theirs.GenerateSignature(bundle.NewSigningConfig(string(keyPEM), "ES256", ""), "opa-key", true); err != nil {
		t.Fatal(err)
	}
	decode := func(tok string) (jwsHeader, jwsPayload) {
		t.Helper()
		parts := strings.Split(tok, ".")
		if len(parts) != 3 {
			t.Fatalf("token has %d parts", len(parts))
		}
		var h jwsHeader
		var p jwsPayload
		for i, v := range []any{&h, &p} {
			b, err := base64.RawURLEncoding.DecodeString(parts[i])
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatal(err)
			}
		}
		return h, p
	}
	oh, op := decode(ours.Signatures.Signatures[0])
	th, tp := decode(theirs.Signatures.Signatures[0])
	if oh != th {
		t.Errorf("header %+v, OPA's %+v", oh, th)
	}
	if !slices.Equal(op.Files, tp.Files) || op.KeyID != tp.KeyID {
		t.Errorf("payload %+v\nOPA's   %+v", op, tp)
	}
	if len(op.Files) != len(files)+2 { // modules, data.json, .manifest
		t.Errorf("signed %d files, want %d", len(op.Files), len(files)+2)
	}
	// A bundle signed by OPA loads. (The default policy's own tests are run
	// by TestRegoUnitTests; a self-contained policy keeps this test about
	// signatures.)
	theirs = newBundle(filesOf(reasonPolicy("a")), "r1")
	if err := theirs.GenerateSignature(bundle.NewSigningConfig(string(keyPEM), "ES256", ""), "opa-key", true); err != nil {
		t.Fatal(err)
	}
	path, _ := writeBundleFile(t, theirs)
	if _, _, err := LoadBundle(ctx, path, []VerificationKey{signer.VerificationKey()}, Options{}); err != nil {
		t.Fatalf("OPA-signed bundle: %v", err)
	}
}

// TestResignBundle is the custos policy sign path: read an unsigned bundle,
// sign it, load it.
func TestResignBundle(t *testing.T) {
	ctx := context.Background()
	signer := newSigner(t, "k1")
	unsigned, _ := writeBundleFile(t, newBundle(filesOf(reasonPolicy("a")), "r1"))
	f, err := os.Open(unsigned)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := ReadUnverifiedBundle(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := SignBundle(ctx, b, signer); err != nil {
		t.Fatal(err)
	}
	path, _ := writeBundleFile(t, b)
	e, info, err := LoadBundle(ctx, path, []VerificationKey{signer.VerificationKey()}, Options{})
	if err != nil || info.Revision != "r1" {
		t.Fatalf("LoadBundle = %+v, %v", info, err)
	}
	if d, err := e.Decide(ctx, readInput); err != nil || d.Reasons[0] != "a" {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
}

type fakeSigner struct {
	kid string
	sig []byte
}

func (f fakeSigner) KeyID() string { return f.kid }
func (f fakeSigner) SignES256(context.Context, []byte) ([]byte, error) {
	return f.sig, nil
}

// mismatched signs with signer's key but claims pub's public key.
type mismatched struct{ pub, signer *FileSigner }

func (m mismatched) KeyID() string { return m.signer.KeyID() }
func (m mismatched) SignES256(ctx context.Context, in []byte) ([]byte, error) {
	return m.signer.SignES256(ctx, in)
}
func (m mismatched) Public() crypto.PublicKey { return m.pub.Public() }

func TestSignBundleRejectsBadSignatures(t *testing.T) {
	ctx := context.Background()
	s1, s2 := newSigner(t, "k1"), newSigner(t, "k1")
	for name, s := range map[string]JWSSigner{
		"empty key id":   fakeSigner{kid: "", sig: make([]byte, 64)},
		"short":          fakeSigner{kid: "k", sig: make([]byte, 63)},
		"ASN.1 not r||s": fakeSigner{kid: "k", sig: make([]byte, 72)},
		"wrong key":      mismatched{pub: s1, signer: s2},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBundle(filesOf(reasonPolicy("a")), "r1")
			if err := SignBundle(ctx, b, s); err == nil {
				t.Fatal("SignBundle succeeded")
			}
			if len(b.Signatures.Signatures) != 0 {
				t.Fatal("bundle was modified")
			}
		})
	}
}

func TestKeysRejected(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(typ string) func([]byte, error) []byte {
		return func(der []byte, err error) []byte {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
		}
	}
	rsaPriv := pemOf("PRIVATE KEY")(x509.MarshalPKCS8PrivateKey(rsaKey))
	rsaPub := pemOf("PUBLIC KEY")(x509.MarshalPKIXPublicKey(&rsaKey.PublicKey))
	p384Priv := pemOf("EC PRIVATE KEY")(x509.MarshalECPrivateKey(p384))
	p384Pub := pemOf("PUBLIC KEY")(x509.MarshalPKIXPublicKey(&p384.PublicKey))
	good := newKeyPEM(t)

	for name, tc := range map[string]struct {
		id  string
		pem []byte
	}{
		"rsa":          {"k", rsaPriv},
		"p384":         {"k", p384Priv},
		"public key":   {"k", p384Pub},
		"garbage":      {"k", []byte("not pem")},
		"empty key id": {"", good},
	} {
		t.Run("signer "+name, func(t *testing.T) {
			if _, err := ParseFileSigner(tc.id, tc.pem); !errors.Is(err, ErrKey) {
				t.Fatalf("err = %v, want ErrKey", err)
			}
		})
	}
	goodPub := newSigner(t, "k").VerificationKey().PEM
	for name, tc := range map[string]struct {
		id  string
		pem []byte
	}{
		"rsa":          {"k", rsaPub},
		"p384":         {"k", p384Pub},
		"private key":  {"k", good},
		"garbage":      {"k", []byte("not pem")},
		"empty key id": {"", goodPub},
	} {
		t.Run("verification key "+name, func(t *testing.T) {
			if _, err := ParseVerificationKey(tc.id, tc.pem); !errors.Is(err, ErrKey) {
				t.Fatalf("err = %v, want ErrKey", err)
			}
		})
	}
	if _, err := ParseVerificationKey("k", goodPub); err != nil {
		t.Fatalf("good key: %v", err)
	}
	if err := checkKeys([]VerificationKey{{ID: "k", PEM: goodPub}, {ID: "k", PEM: goodPub}}); !errors.Is(err, ErrKey) {
		t.Fatalf("duplicate key ids: err = %v, want ErrKey", err)
	}
	// SEC 1 keys load too, and error messages never quote key material.
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, err := ParseFileSigner("k", pemOf("EC PRIVATE KEY")(x509.MarshalECPrivateKey(k))); err != nil {
		t.Fatalf("SEC 1 key: %v", err)
	}
	if _, err := ParseFileSigner("k", rsaPriv); err != nil && strings.Contains(err.Error(), "PRIVATE KEY-----") {
		t.Fatalf("error quotes the key: %v", err)
	}
}

// TestBundleParseErrorLocationsAreRelative: a parse error in a bundle names
// the module as a type error in it and a policy directory do,
// "custos/authz.rego:8", in LoadBundle's error, a Reloader's rejection
// reason (the policy/reject record and the log) and ReadUnverifiedBundle's
// error (custos policy sign). OPA's bundle reader parses by archive path:
// it said "/custos/authz.rego:8".
func TestBundleParseErrorLocationsAreRelative(t *testing.T) {
	ctx := context.Background()
	signer := newSigner(t, "k1")
	keys := []VerificationKey{signer.VerificationKey()}
	files := reasonPolicy("x")
	files["custos/authz.rego"] += "\nbroken := {\n"
	b := newBundle(filesOf(files), "r")
	if err := SignBundle(ctx, b, signer); err != nil {
		t.Fatal(err)
	}
	path, _ := writeBundleFile(t, b)
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "\ncustos/authz.rego:8: rego_parse_error") || strings.Contains(err.Error(), "/custos/authz.rego") {
			t.Errorf("%s: %v\nwant the location custos/authz.rego:8, bundle-relative", what, err)
		}
	}
	_, _, err := LoadBundle(ctx, path, keys, Options{})
	if !errors.Is(err, ErrCompile) {
		t.Errorf("LoadBundle: %v, want ErrCompile", err)
	}
	check("LoadBundle", err)

	good, _ := reasonBundle(t, signer, "good", 0)
	live := filepath.Join(t.TempDir(), "policy.tar.gz")
	replaceFile(t, live, good)
	r, err := New(ctx, BundleSource{Path: live, Keys: keys}, ReloaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, live, mustRead(t, path))
	ev, err := r.Reload(ctx)
	check("Reload", err)
	check("rejection reason", errors.New(ev.Reason))

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = ReadUnverifiedBundle(f)
	check("ReadUnverifiedBundle", err)
}
