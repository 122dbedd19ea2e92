package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/policy"
)

// remoteSigner is a signer custos holds no private key of, as the Vault
// Transit signer is: it is not a *policy.FileSigner.
type remoteSigner struct{ *policy.FileSigner }

// es256KeyPEMs makes a new ECDSA P-256 key: its PKCS #8 private key and
// its public key, in PEM.
func es256KeyPEMs(t *testing.T) (priv, pub []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
}

// TestResignRefusesBrokenPolicy: custos policy sign checks that the policy
// of the bundle compiles and passes its tests before it signs it, whatever
// the signer (--key or --vault), so that no signature vouches for a policy
// every server would reject.
func TestResignRefusesBrokenPolicy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(p, c string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	priv, _ := es256KeyPEMs(t)
	fs, err := policy.ParseFileSigner("team", priv)
	if err != nil {
		t.Fatal(err)
	}
	// A policy whose own test fails, packed unsigned: a bundle custos policy
	// bundle would have refused to build, re-signed.
	write("p/custos/authz.rego", "package custos.authz\n\ndecision := {\"allow\": true, \"reasons\": [\"ok\"], \"obligations\": []}\n")
	write("p/custos/authz_test.rego", "package custos.authz_test\n\nimport data.custos.authz\n\ntest_denies if not authz.decision.allow\n")
	b, err := policy.BuildBundle(ctx, filepath.Join(dir, "p"), "r1")
	if err == nil || !errors.Is(err, policy.ErrTestsFailed) {
		t.Fatalf("BuildBundle = %v, want ErrTestsFailed", err)
	}
	write("p/custos/authz_test.rego", "package custos.authz_test\n\nimport data.custos.authz\n\ntest_allows if authz.decision.allow\n")
	if b, err = policy.BuildBundle(ctx, filepath.Join(dir, "p"), "r1"); err != nil {
		t.Fatal(err)
	}
	for i, m := range b.Modules {
		if filepath.Base(m.Path) == "authz_test.rego" {
			b.Modules[i].Raw = []byte("package custos.authz_test\n\nimport data.custos.authz\n\ntest_denies if not authz.decision.allow\n")
		}
	}
	var buf bytes.Buffer
	if _, err := policy.WriteBundle(&buf, b); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "unsigned.tar.gz")
	if err := os.WriteFile(in, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, signer := range []policy.JWSSigner{fs, remoteSigner{fs}} {
		out := filepath.Join(dir, "signed.tar.gz")
		cmd := &cobra.Command{}
		cmd.SetContext(ctx)
		cmd.SetOut(&bytes.Buffer{})
		err := resignBundle(cmd, in, signer, out, 0, false)
		if !errors.Is(err, policy.ErrTestsFailed) {
			t.Errorf("%T: resignBundle err = %v, want ErrTestsFailed", signer, err)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Errorf("%T: a bundle whose tests fail was signed and written", signer)
			os.Remove(out)
		}
	}
}

// TestPolicyBundleSequence runs custos policy bundle and policy sign: a
// bundle needs --sequence, the claim is written, signed and shown; sign
// keeps it or replaces it with --sequence.
func TestPolicyBundleSequence(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	keyFile := filepath.Join(dir, "k.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, err := policy.NewFileSigner("team", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	keys := []policy.VerificationKey{fs.VerificationKey()}
	src := filepath.Join("..", "..", "rego", "custos")
	out := filepath.Join(dir, "p.tar.gz")
	cli := func(args ...string) (int, string) {
		var o, e bytes.Buffer
		code := run(args, &o, &e)
		return code, o.String() + e.String()
	}
	if code, msg := cli("policy", "bundle", src, "-o", out, "--key", "team="+keyFile); code != 2 || !strings.Contains(msg, "needs --sequence") {
		t.Fatalf("bundle without --sequence: exit %d\n%s", code, msg)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused bundle wrote %s: %v", out, err)
	}
	if code, msg := cli("policy", "bundle", src, "-o", out, "--key", "team="+keyFile, "--sequence", "0"); code != 2 || !strings.Contains(msg, "from 1 to") {
		t.Fatalf("bundle --sequence 0: exit %d\n%s", code, msg)
	}
	if code, msg := cli("policy", "bundle", src, "-o", out, "--key", "team="+keyFile, "--sequence", "12"); code != 0 || !strings.Contains(msg, "sequence 12,") {
		t.Fatalf("bundle --sequence 12: exit %d\n%s", code, msg)
	}
	if _, info, err := policy.LoadBundle(ctx, out, keys, policy.Options{}); err != nil || info.Sequence != 12 {
		t.Fatalf("bundle --sequence 12 loads as %+v, %v", info, err)
	}
	kept, raised := filepath.Join(dir, "kept.tar.gz"), filepath.Join(dir, "raised.tar.gz")
	if code, msg := cli("policy", "sign", out, "-o", kept, "--key", "team="+keyFile); code != 0 || !strings.Contains(msg, "sequence 12,") ||
		!strings.Contains(msg, "refuses this re-signed bundle") {
		t.Fatalf("sign: exit %d\n%s", code, msg)
	}
	if code, msg := cli("policy", "sign", out, "-o", filepath.Join(dir, "zero.tar.gz"), "--key", "team="+keyFile, "--sequence", "0"); code != 2 || !strings.Contains(msg, "from 1 to") {
		t.Fatalf("sign --sequence 0: exit %d\n%s", code, msg)
	}
	if code, msg := cli("policy", "sign", out, "-o", raised, "--key", "team="+keyFile, "--sequence", "13"); code != 0 || !strings.Contains(msg, "sequence 13,") {
		t.Fatalf("sign --sequence 13: exit %d\n%s", code, msg)
	}
	for file, want := range map[string]uint64{kept: 12, raised: 13} {
		if _, info, err := policy.LoadBundle(ctx, file, keys, policy.Options{}); err != nil || info.Sequence != want {
			t.Errorf("%s: %+v, %v; want sequence %d", filepath.Base(file), info, err, want)
		}
	}
}

// TestPolicyVerifyShowsSequence runs custos policy verify on bundles the
// OPA CLI built: the claim is shown; a bundle without one says so; a key
// that did not sign fails.
func TestPolicyVerifyShowsSequence(t *testing.T) {
	opa := filepath.Join("..", "..", "policy", "testdata", "opa")
	cli := func(args ...string) (int, string) {
		var o, e bytes.Buffer
		code := run(args, &o, &e)
		return code, o.String() + e.String()
	}
	seqKey := "--key=default=" + filepath.Join(opa, "seq-ec.pub.pem")
	if code, msg := cli("policy", "verify", filepath.Join(opa, "build-seq7.tar.gz"), seqKey); code != 0 ||
		!strings.Contains(msg, "sequence  7\n") || !strings.Contains(msg, "revision  2026-12-07\n") || !strings.Contains(msg, "key       default\n") {
		t.Fatalf("verify build-seq7: exit %d\n%s", code, msg)
	}
	if code, msg := cli("policy", "verify", filepath.Join(opa, "build-es256.tar.gz"), "--key=default="+filepath.Join(opa, "ec.pub.pem")); code != 0 ||
		!strings.Contains(msg, "sequence  none") {
		t.Fatalf("verify build-es256: exit %d\n%s", code, msg)
	}
	if code, msg := cli("policy", "verify", filepath.Join(opa, "build-seq7.tar.gz"), "--key=default="+filepath.Join(opa, "ec.pub.pem")); code != 1 ||
		!strings.Contains(msg, "signature") {
		t.Fatalf("verify with the wrong key: exit %d\n%s", code, msg)
	}
	if code, msg := cli("policy", "verify", filepath.Join(opa, "build-seq7.tar.gz")); code != 2 {
		t.Fatalf("verify without a key: exit %d\n%s", code, msg)
	}
}

// TestPolicyVerifyJSON: a rollout pipeline reads what 'policy verify'
// verified from --json (one JSON document on stdout), and a key file that
// is not a public key is named.
func TestPolicyVerifyJSON(t *testing.T) {
	opa := filepath.Join("..", "..", "policy", "testdata", "opa")
	var o, e bytes.Buffer
	if code := run([]string{"policy", "verify", filepath.Join(opa, "build-seq7.tar.gz"), "--json",
		"--key=default=" + filepath.Join(opa, "seq-ec.pub.pem")}, &o, &e); code != 0 {
		t.Fatalf("verify --json: exit %d\n%s", code, e.String())
	}
	var got struct {
		Bundle, Digest, Revision, Key string
		Verified                      bool
		Sequence                      uint64
	}
	dec := json.NewDecoder(&o)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil || dec.More() {
		t.Fatalf("verify --json is not one JSON document: %v\n%s", err, o.String())
	}
	if !got.Verified || got.Sequence != 7 || got.Revision != "2026-12-07" || got.Key != "default" ||
		!strings.HasPrefix(got.Digest, "sha256:") || got.Bundle != filepath.Join(opa, "build-seq7.tar.gz") {
		t.Errorf("verify --json = %+v", got)
	}

	// A private key given where the public key belongs.
	sk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	priv := filepath.Join(t.TempDir(), "signing.pem")
	if err := os.WriteFile(priv, privPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	o.Reset()
	e.Reset()
	code := run([]string{"policy", "verify", filepath.Join(opa, "build-seq7.tar.gz"), "--json", "--key=default=" + priv}, &o, &e)
	// No usable key: no verdict on the bundle (exit 2; it was 1, like a
	// bundle whose signature fails).
	if code != 2 || !strings.Contains(e.String(), "--key default="+priv) || o.Len() != 0 {
		t.Errorf("verify with a private key file: exit %d, want 2 naming the file and nothing on stdout\nstdout: %s\nstderr: %s", code, o.String(), e.String())
	}
	if strings.Contains(e.String(), string(privPEM[30:60])) {
		t.Errorf("the error quotes the key file:\n%s", e.String())
	}
}

// TestPolicyKeyFileErrorsNameTheFlag: a --key whose file cannot be read is
// named by the flag and its value, as serve names --policy-key. verify and
// impact said only "open FILE: no such file or directory", bundle "policy:
// bad key: open FILE: ...".
func TestPolicyKeyFileErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	missing := "k1=" + filepath.Join(dir, "missing.pem")
	if err := os.WriteFile(filepath.Join(dir, "policy.tar.gz"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"policy", "verify", filepath.Join(dir, "policy.tar.gz"), "--key", missing},
		{"policy", "impact", "--candidate", filepath.Join(dir, "policy.tar.gz"), "--key", missing, "--data-dir", dir, "--purpose", "HOPERAT"},
		{"policy", "bundle", "../../rego/custos", "-o", filepath.Join(dir, "out.tar.gz"), "--sequence", "1", "--key", missing},
	} {
		code, _, stderr := runCustos(args...)
		if code == 0 || !strings.Contains(stderr, "--key "+missing) {
			t.Errorf("custos %s: exit %d, stderr %q; want a failure naming --key %s", strings.Join(args[:2], " "), code, stderr, missing)
		}
	}
}

// TestPolicyBundleSignJSON: a rollout pipeline reads what 'policy bundle'
// and 'policy sign' wrote from --json, one JSON document on stdout, and its
// values are those of the file written: its path, its SHA-256, and the
// revision, key and sequence a server loading it reports. Warnings stay on
// stderr. There was no --json ("unknown flag: --json").
func TestPolicyBundleSignJSON(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	priv, _ := es256KeyPEMs(t)
	keyFile := filepath.Join(dir, "k.pem")
	if err := os.WriteFile(keyFile, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	fs, err := policy.NewFileSigner("team", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join("..", "..", "rego", "custos")
	type written struct {
		Bundle, Source, Digest, Revision, Key string
		Sequence                              uint64
	}
	cli := func(args ...string) (written, string) {
		t.Helper()
		var o, e bytes.Buffer
		if code := run(append(args, "--json", "--key", "team="+keyFile), &o, &e); code != 0 {
			t.Fatalf("%s --json: exit %d\n%s%s", args[1], code, o.String(), e.String())
		}
		var got written
		dec := json.NewDecoder(&o)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil || dec.More() {
			t.Fatalf("%s --json is not one JSON document: %v\n%s", args[1], err, o.String())
		}
		return got, e.String()
	}
	check := func(what string, got written, file, source string, sequence uint64) {
		t.Helper()
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		_, info, err := policy.LoadBundle(ctx, file, []policy.VerificationKey{fs.VerificationKey()}, policy.Options{})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		want := written{Bundle: file, Source: source, Digest: fmt.Sprintf("sha256:%x", sha256.Sum256(data)),
			Revision: info.Revision, Key: "team", Sequence: sequence}
		if got != want || info.Digest != want.Digest || info.KeyID != "team" || info.Sequence != sequence {
			t.Errorf("%s --json = %+v\nwant %+v (the server loads %+v)", what, got, want, info)
		}
	}
	out := filepath.Join(dir, "p.tar.gz")
	got, stderr := cli("policy", "bundle", src, "-o", out, "--sequence", "12", "--revision", "r-12")
	check("bundle", got, out, src, 12)
	if got.Revision != "r-12" || stderr != "" {
		t.Errorf("bundle --json: revision %q, stderr %q", got.Revision, stderr)
	}
	kept := filepath.Join(dir, "kept.tar.gz")
	got, stderr = cli("policy", "sign", out, "-o", kept)
	check("sign", got, kept, out, 12)
	if !strings.Contains(stderr, "keeping the bundle's sequence claim") {
		t.Errorf("sign --json without --sequence: the warning is not on stderr: %q", stderr)
	}
	raised := filepath.Join(dir, "raised.tar.gz")
	got, _ = cli("policy", "sign", out, "-o", raised, "--sequence", "13")
	check("sign --sequence 13", got, raised, out, 13)
}
