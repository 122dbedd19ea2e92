package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// opaSeqBundle is a bundle of testdata/opa written by opa build (v1.22.2)
// from a directory whose .manifest holds metadata.custos.sequence.
func opaSeqBundle(name string) string { return filepath.Join("testdata", "opa", name) }

func opaSeqKeys(t *testing.T) []VerificationKey {
	t.Helper()
	k, err := ParseVerificationKey("default", mustRead(t, opaSeqBundle("seq-ec.pub.pem")))
	if err != nil {
		t.Fatal(err)
	}
	return []VerificationKey{k}
}

// TestOPAToolSequenceClaim: the claim opa build signs with the manifest is
// read, and CheckSequence orders the bundles by it.
func TestOPAToolSequenceClaim(t *testing.T) {
	ctx := context.Background()
	keys := opaSeqKeys(t)
	info := map[string]BundleInfo{}
	for _, f := range []string{"build-seq5.tar.gz", "build-seq7.tar.gz", "build-seq7-other.tar.gz"} {
		e, in, err := LoadBundle(ctx, opaSeqBundle(f), keys, Options{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if e.BundleSequence() != in.Sequence {
			t.Errorf("%s: engine sequence %d, info %d", f, e.BundleSequence(), in.Sequence)
		}
		info[f] = in
	}
	if info["build-seq5.tar.gz"].Sequence != 5 || info["build-seq7.tar.gz"].Sequence != 7 || info["build-seq7-other.tar.gz"].Sequence != 7 {
		t.Fatalf("sequences: %+v", info)
	}
	hw := HighWater{Sequence: 7, Digest: info["build-seq7.tar.gz"].Digest}
	_, plain, err := LoadBundle(ctx, opaSeqBundle("build-es256.tar.gz"), []VerificationKey{mustKey(t, "default", "ec.pub.pem")}, Options{})
	if err != nil || plain.Sequence != 0 {
		t.Fatalf("opa build without a claim: %+v, %v", plain, err)
	}
	for _, c := range []struct {
		name string
		in   BundleInfo
		want string // "" accepted
	}{
		{"same bundle again", info["build-seq7.tar.gz"], ""},
		{"lower", info["build-seq5.tar.gz"], "claims sequence 5, lower than the high-water mark: sequence 7, bundle " + hw.Digest},
		{"equal, another bundle", info["build-seq7-other.tar.gz"], "claims sequence 7, equal to the high-water mark"},
		{"no claim", plain, "has no sequence claim"},
	} {
		err := CheckSequence(hw, c.in.Sequence, c.in.Digest)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		re, ok := errors.AsType[*RollbackError](err)
		if !ok || !errors.Is(err, ErrRollback) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.in.Digest) {
			t.Errorf("%s: err = %v, want a RollbackError saying %q", c.name, err, c.want)
			continue
		}
		if re.HighWater != hw || re.Sequence != c.in.Sequence || re.Digest != c.in.Digest {
			t.Errorf("%s: evidence %+v", c.name, re)
		}
	}
	// Before any claim (migration) everything passes; then a higher claim.
	if err := CheckSequence(HighWater{Digest: plain.Digest}, 0, info["build-seq5.tar.gz"].Digest); err != nil {
		t.Errorf("no mark yet: %v", err)
	}
	if err := CheckSequence(HighWater{Sequence: 5, Digest: info["build-seq5.tar.gz"].Digest}, 7, info["build-seq7.tar.gz"].Digest); err != nil {
		t.Errorf("higher: %v", err)
	}
}

func mustKey(t *testing.T, id, file string) VerificationKey {
	t.Helper()
	k, err := ParseVerificationKey(id, mustRead(t, filepath.Join("testdata", "opa", file)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// rewriteManifest returns the bundle archive data with its .manifest
// replaced by manifest, every other entry as it was.
func rewriteManifest(t *testing.T, data []byte, manifest string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if strings.TrimPrefix(h.Name, "/") == ".manifest" {
			body = []byte(manifest)
			h.Size = int64(len(body))
		}
		tw.WriteHeader(h)
		tw.Write(body)
	}
	tw.Close()
	zw.Close()
	return out.Bytes()
}

// TestSequenceClaimIsSigned: raising the claim of a bundle opa build signed
// breaks its signature.
func TestSequenceClaimIsSigned(t *testing.T) {
	data := rewriteManifest(t, mustRead(t, opaSeqBundle("build-seq5.tar.gz")),
		`{"revision":"2026-12-05","roots":[""],"rego_version":1,"metadata":{"custos":{"sequence":9}}}`)
	path := filepath.Join(t.TempDir(), "raised.tar.gz")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, info, err := LoadBundle(context.Background(), path, opaSeqKeys(t), Options{})
	if !errors.Is(err, ErrSignature) {
		t.Fatalf("raised claim: %+v, err = %v, want ErrSignature", info, err)
	}
}

func TestManifestSequence(t *testing.T) {
	for _, c := range []struct {
		metadata string
		want     uint64
		bad      bool
	}{
		{`null`, 0, false},
		{`{"other": 1}`, 0, false},
		{`{"custos": {}}`, 0, false},
		{`{"custos": {"sequence": 1}}`, 1, false},
		{`{"custos": {"sequence": 9007199254740991}}`, MaxSequence, false},
		{`{"custos": {"sequence": 9007199254740992}}`, 0, true},
		{`{"custos": {"sequence": 0}}`, 0, true},
		{`{"custos": {"sequence": -3}}`, 0, true},
		{`{"custos": {"sequence": 1.5}}`, 0, true},
		{`{"custos": {"sequence": 2e3}}`, 0, true},
		{`{"custos": {"sequence": "7"}}`, 0, true},
		{`{"custos": {"sequence": null}}`, 0, true},
		{`{"custos": 7}`, 0, true},
	} {
		var md map[string]any
		d := json.NewDecoder(strings.NewReader(c.metadata))
		d.UseNumber() // as OPA's reader decodes the manifest
		if err := d.Decode(&md); err != nil {
			t.Fatal(err)
		}
		b := &bundle.Bundle{Manifest: bundle.Manifest{Metadata: md}}
		got, err := BundleSequence(b)
		if c.bad != (err != nil) || got != c.want {
			t.Errorf("%s: %d, %v", c.metadata, got, err)
		}
		if c.bad && !errors.Is(err, ErrBundle) {
			t.Errorf("%s: err = %v, want ErrBundle", c.metadata, err)
		}
	}
}

// TestSetBundleSequenceRoundTrip: a claim SetBundleSequence sets is signed
// by SignBundle and read back by LoadBundle; other metadata is kept.
func TestSetBundleSequenceRoundTrip(t *testing.T) {
	ctx := context.Background()
	signer := newSigner(t, "k1")
	b := newBundle(filesOf(reasonPolicy("a")), "r1")
	b.Manifest.Metadata = map[string]any{"team": "security", "custos": map[string]any{"note": "x"}}
	if err := SetBundleSequence(b, 42); err != nil {
		t.Fatal(err)
	}
	if err := SetBundleSequence(b, 0); !errors.Is(err, ErrBundle) {
		t.Errorf("sequence 0: %v", err)
	}
	if err := SignBundle(ctx, b, signer); err != nil {
		t.Fatal(err)
	}
	path, digest := writeBundleFile(t, b)
	e, info, err := LoadBundle(ctx, path, []VerificationKey{signer.VerificationKey()}, Options{})
	if err != nil || info.Sequence != 42 || e.BundleSequence() != 42 || info.Digest != digest {
		t.Fatalf("%+v, %v", info, err)
	}
	rb, err := ReadUnverifiedBundle(bytes.NewReader(mustRead(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	if rb.Manifest.Metadata["team"] != "security" || rb.Manifest.Metadata["custos"].(map[string]any)["note"] != "x" {
		t.Errorf("metadata lost: %v", rb.Manifest.Metadata)
	}
}

// TestReloaderRefusesRollback: once armed, a reload to a lower claim, to
// the same claim in another bundle, or to no claim is rejected and the
// last good policy keeps serving; a higher claim loads and moves the mark.
func TestReloaderRefusesRollback(t *testing.T) {
	ctx := context.Background()
	signer := newSigner(t, "k1")
	bundleOf := func(reason string, seq uint64) ([]byte, string) { return reasonBundle(t, signer, reason, seq) }
	path := filepath.Join(t.TempDir(), "policy.tar.gz")
	two, digestTwo := bundleOf("two", 2)
	replaceFile(t, path, two)
	ev := newEvents()
	r, err := New(ctx, BundleSource{Path: path, Keys: []VerificationKey{signer.VerificationKey()}}, ReloaderOptions{OnEvent: ev.record, Rollback: true})
	if err != nil {
		t.Fatal(err)
	}
	if e := ev.wait(t); e.Kind != EventLoaded || e.Sequence != 2 {
		t.Fatalf("initial load: %+v", e)
	}
	if err := r.Arm(HighWater{Sequence: 1, Digest: "sha256:older"}, false); err != nil {
		t.Fatal(err)
	}
	if hw, ok := r.HighWater(); !ok || hw != (HighWater{2, digestTwo}) {
		t.Fatalf("high-water mark %+v %v", hw, ok)
	}
	one, _ := bundleOf("one", 1)
	twoOther, _ := bundleOf("two-other", 2)
	none, _ := bundleOf("none", 0)
	for name, data := range map[string][]byte{"lower": one, "equal, another bundle": twoOther, "no claim": none} {
		replaceFile(t, path, data)
		e, err := r.Reload(ctx)
		if !errors.Is(err, ErrRollback) || e.Kind != EventRejected {
			t.Fatalf("%s: %+v, %v", name, e, err)
		}
		if got := ev.wait(t); got.Kind != EventRejected || got.Sequence != 2 || got.BundleDigest != digestTwo ||
			!strings.Contains(got.Reason, "sequence 2, bundle "+digestTwo) {
			t.Errorf("%s: event %+v", name, got)
		}
		if got := decideReason(t, r.Current()); got != "two" {
			t.Errorf("%s: serving %q after the refusal, want two", name, got)
		}
	}
	three, digestThree := bundleOf("three", 3)
	replaceFile(t, path, three)
	if e, err := r.Reload(ctx); err != nil || e.Sequence != 3 {
		t.Fatalf("higher: %+v, %v", e, err)
	}
	ev.wait(t)
	if hw, _ := r.HighWater(); hw != (HighWater{3, digestThree}) {
		t.Errorf("high-water mark %+v after loading 3", hw)
	}
	// The mark moved: 2 is now a rollback too.
	replaceFile(t, path, two)
	if _, err := r.Reload(ctx); !errors.Is(err, ErrRollback) {
		t.Errorf("back to 2: %v", err)
	}
}

// TestReloaderArm: the policy in force is checked against the mark given;
// refused unless the override is given, which arms with it as the mark.
func TestReloaderArm(t *testing.T) {
	ctx := context.Background()
	keys := opaSeqKeys(t)
	src := BundleSource{Path: opaSeqBundle("build-seq5.tar.gz"), Keys: keys}
	_, seven, err := LoadBundle(ctx, opaSeqBundle("build-seq7.tar.gz"), keys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hw := HighWater{Sequence: seven.Sequence, Digest: seven.Digest}
	r, err := New(ctx, src, ReloaderOptions{Rollback: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Arm(hw, false); !errors.Is(err, ErrRollback) {
		t.Fatalf("Arm below the mark: %v", err)
	}
	if _, armed := r.HighWater(); armed {
		t.Fatal("armed after a refusal")
	}
	if err := r.Arm(hw, true); !errors.Is(err, ErrRollback) {
		t.Fatalf("Arm with the override must still report what it overrode: %v", err)
	}
	if got, armed := r.HighWater(); !armed || got.Sequence != 5 || got.Digest != r.BundleDigest() {
		t.Errorf("after the override: %+v %v", got, armed)
	}
	// A bundle without a claim is not forced: as the mark it would disarm
	// the protection.
	plain, err := New(ctx, BundleSource{Path: opaSeqBundle("build-es256.tar.gz"), Keys: []VerificationKey{mustKey(t, "default", "ec.pub.pem")}}, ReloaderOptions{Rollback: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Arm(hw, true); !errors.Is(err, ErrRollback) {
		t.Fatalf("override of an unclaimed bundle: %v", err)
	}
	if _, armed := plain.HighWater(); armed {
		t.Error("an unclaimed bundle was forced past the mark")
	}
	if err := (&Reloader{}).Arm(hw, false); err == nil {
		t.Error("Arm without ReloaderOptions.Rollback accepted")
	}
}

// TestCheckMinSequence: the floor admits claims at or above it and refuses
// lower ones and none, naming the floor; 0 is no floor.
func TestCheckMinSequence(t *testing.T) {
	for _, c := range []struct {
		min, seq uint64
		ok       bool
		want     string
	}{
		{0, 0, true, ""},
		{0, 3, true, ""},
		{5, 5, true, ""},
		{5, 6, true, ""},
		{5, 4, false, "claims sequence 4, below 5, the lowest this server accepts (policy.min_sequence)"},
		{5, 0, false, "has no sequence claim (manifest metadata.custos.sequence), and this server accepts only bundles claiming at least 5"},
		{MaxSequence, MaxSequence - 1, false, "below 9007199254740991"},
	} {
		err := CheckMinSequence(c.min, c.seq, "sha256:cand")
		if c.ok {
			if err != nil {
				t.Errorf("min %d, claim %d: %v", c.min, c.seq, err)
			}
			continue
		}
		re, isRE := errors.AsType[*RollbackError](err)
		if !isRE || !errors.Is(err, ErrRollback) || re.MinSequence != c.min || re.Sequence != c.seq || re.Digest != "sha256:cand" ||
			!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "sha256:cand") {
			t.Errorf("min %d, claim %d: %v (%+v), want a RollbackError saying %q", c.min, c.seq, err, re, c.want)
		}
	}
}

// TestReloaderMinSequence: the floor refuses the policy in force at Arm,
// with or without the override, whatever the mark; armed, it refuses a
// reload under it even where the mark alone would not.
func TestReloaderMinSequence(t *testing.T) {
	ctx := context.Background()
	keys := opaSeqKeys(t)
	src := BundleSource{Path: opaSeqBundle("build-seq5.tar.gz"), Keys: keys}
	for _, allow := range []bool{false, true} {
		r, err := New(ctx, src, ReloaderOptions{Rollback: true, MinSequence: 6})
		if err != nil {
			t.Fatal(err)
		}
		err = r.Arm(HighWater{}, allow)
		if re, ok := errors.AsType[*RollbackError](err); !ok || re.MinSequence != 6 || re.Sequence != 5 {
			t.Fatalf("Arm of 5 under a floor of 6 (override %v): %v", allow, err)
		}
		if _, armed := r.HighWater(); armed {
			t.Fatalf("armed under the floor (override %v)", allow)
		}
	}
	// At the floor: it arms, even on an empty mark.
	r, err := New(ctx, src, ReloaderOptions{Rollback: true, MinSequence: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Arm(HighWater{}, false); err != nil {
		t.Fatalf("Arm of 5 at a floor of 5: %v", err)
	}

	// Armed with an empty mark, a reload to a lower claim would pass the
	// mark; the floor refuses it, and the policy in force keeps serving.
	signer := newSigner(t, "k1")
	path := filepath.Join(t.TempDir(), "policy.tar.gz")
	write := func(reason string, seq uint64) {
		data, _ := reasonBundle(t, signer, reason, seq)
		replaceFile(t, path, data)
	}
	write("ten", 10)
	fr, err := New(ctx, BundleSource{Path: path, Keys: []VerificationKey{signer.VerificationKey()}}, ReloaderOptions{Rollback: true, MinSequence: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := fr.Arm(HighWater{}, false); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{9, 0} {
		write("below", seq)
		if _, err := fr.Reload(ctx); !errors.Is(err, ErrRollback) || !strings.Contains(err.Error(), "policy.min_sequence") {
			t.Errorf("reload to %d under a floor of 10: %v", seq, err)
		}
		if got := decideReason(t, fr.Current()); got != "ten" {
			t.Errorf("serving %q after refusing %d, want ten", got, seq)
		}
	}
	write("eleven", 11)
	if ev, err := fr.Reload(ctx); err != nil || ev.Sequence != 11 {
		t.Fatalf("reload to 11: %+v, %v", ev, err)
	}

	if _, err := New(ctx, src, ReloaderOptions{MinSequence: 5}); err == nil {
		t.Error("a floor without rollback protection accepted")
	}
	if _, err := New(ctx, src, ReloaderOptions{Rollback: true, MinSequence: MaxSequence + 1}); err == nil {
		t.Error("a floor above MaxSequence accepted")
	}
}

// reasonBundle returns the bytes and digest of a bundle of
// reasonPolicy(reason) with claim seq (none if 0), signed by signer.
func reasonBundle(t *testing.T, signer JWSSigner, reason string, seq uint64) ([]byte, string) {
	t.Helper()
	b := newBundle(filesOf(reasonPolicy(reason)), reason)
	if seq != 0 {
		if err := SetBundleSequence(b, seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := SignBundle(context.Background(), b, signer); err != nil {
		t.Fatal(err)
	}
	p, digest := writeBundleFile(t, b)
	return mustRead(t, p), digest
}

// TestManifestWithDuplicateKeysRefused: OPA hashes the .manifest for the
// signature as a generic JSON value (a key given twice: the last one
// counts) but decodes it into its Manifest struct, whose metadata map takes
// the keys of every "metadata" member. So a manifest holding the signed
// metadata last and a forged one before it kept the signature valid and
// gave the bundle any sequence claim: a signed bundle without a claim
// whose manifest had other metadata (as opa build writes from a
// directory's .manifest) loaded claiming sequence 9, above a high-water
// mark it should not have passed. Such a manifest is refused: it must mean
// one thing.
func TestManifestWithDuplicateKeysRefused(t *testing.T) {
	ctx := context.Background()
	signer := newSigner(t, "k1")
	keys := []VerificationKey{signer.VerificationKey()}
	b := newBundle(filesOf(reasonPolicy("allow_a")), "r1")
	b.Manifest.Metadata = map[string]any{"note": "built by ci"}
	if err := SignBundle(ctx, b, signer); err != nil {
		t.Fatal(err)
	}
	good, _ := writeBundleFile(t, b)
	if _, info, err := LoadBundle(ctx, good, keys, Options{}); err != nil || info.Sequence != 0 {
		t.Fatalf("the signed bundle: %+v, %v; want it loaded without a claim", info, err)
	}
	for _, c := range []struct{ name, manifest, want string }{
		{"forged metadata before the signed one",
			`{"revision":"r1","roots":[""],"rego_version":1,"metadata":{"custos":{"sequence":9}},"metadata":{"note":"built by ci"}}`,
			`key "metadata" appears twice`},
		{"duplicate key inside an object",
			`{"revision":"r1","roots":[""],"rego_version":1,"metadata":{"note":"x","note":"built by ci"}}`,
			`key "note" appears twice`},
		{"a key again in another case, which the struct decode takes for it",
			`{"revision":"r1","roots":[""],"rego_version":1,"Metadata":{"custos":{"sequence":9}},"metadata":{"note":"built by ci"}}`,
			`key "metadata" appears twice`},
		{"a second value after the manifest",
			`{"revision":"r1","roots":[""],"rego_version":1,"metadata":{"note":"built by ci"}} {"metadata":{"custos":{"sequence":9}}}`,
			"more than one JSON value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "forged.tar.gz")
			if err := os.WriteFile(path, rewriteManifest(t, mustRead(t, good), c.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			e, info, err := LoadBundle(ctx, path, keys, Options{})
			if e != nil || !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("LoadBundle = %+v, %v; want ErrBundle saying %q", info, err, c.want)
			}
			if _, err := ReadUnverifiedBundle(bytes.NewReader(mustRead(t, path))); !errors.Is(err, ErrBundle) {
				t.Fatalf("ReadUnverifiedBundle: err = %v, want ErrBundle", err)
			}
		})
	}
}

// TestRollbackRefusedBeforeCompiling: once armed, a bundle whose signed
// claim does not advance the mark is refused as a rollback as soon as its
// signature verifies, before its policy is compiled and its Rego tests run
// (they took seconds on every core, at every change of the file: the
// check came after them, so a rollback whose tests fail, or whose policy
// does not compile, was refused as such, after the work). The record's
// evidence and message are those of any rollback refusal; a bundle that
// advances the mark is still compiled and tested.
func TestRollbackRefusedBeforeCompiling(t *testing.T) {
	ctx := context.Background()
	signer := newSigner(t, "k1")
	path := filepath.Join(t.TempDir(), "policy.tar.gz")
	two, digestTwo := reasonBundle(t, signer, "two", 2)
	replaceFile(t, path, two)
	r, err := New(ctx, BundleSource{Path: path, Keys: []VerificationKey{signer.VerificationKey()}}, ReloaderOptions{Rollback: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Arm(HighWater{}, false); err != nil {
		t.Fatal(err)
	}
	signed := func(files map[string]string, seq uint64) ([]byte, string) {
		b := newBundle(filesOf(files), "broken")
		if err := SetBundleSequence(b, seq); err != nil {
			t.Fatal(err)
		}
		if err := SignBundle(ctx, b, signer); err != nil {
			t.Fatal(err)
		}
		p, digest := writeBundleFile(t, b)
		return mustRead(t, p), digest
	}
	failingTests := reasonPolicy("one")
	failingTests["custos/authz_test.rego"] = "package custos.authz_test\n\ntest_fails if false\n"
	typeError := reasonPolicy("one")
	typeError["custos/authz.rego"] = "package custos.authz\n\ndecision := {\"allow\": count(1), \"reasons\": [], \"obligations\": []}\n"
	for name, files := range map[string]map[string]string{"failing tests": failingTests, "type error": typeError} {
		data, digest := signed(files, 1)
		replaceFile(t, path, data)
		ev, err := r.Reload(ctx)
		want := "policy: bundle rollback refused: bundle " + digest + " claims sequence 1, lower than the high-water mark: sequence 2, bundle " + digestTwo + " (candidate " + digest + ")"
		if !errors.Is(err, ErrRollback) || errors.Is(err, ErrTestsFailed) || errors.Is(err, ErrCompile) || err.Error() != want {
			t.Errorf("%s, sequence 1: %v\nwant %s (refused before compiling)", name, err, want)
		}
		if ev.Kind != EventRejected || ev.Rollback == nil || ev.Rollback.Sequence != 1 || ev.Rollback.Digest != digest || ev.CandidateDigest != digest || ev.Reason != want {
			t.Errorf("%s, sequence 1: event %+v", name, ev)
		}
		// Advancing the mark, the same bundle is compiled and tested.
		data, _ = signed(files, 3)
		replaceFile(t, path, data)
		wantErr := map[string]error{"failing tests": ErrTestsFailed, "type error": ErrCompile}[name]
		if _, err := r.Reload(ctx); !errors.Is(err, wantErr) || errors.Is(err, ErrRollback) {
			t.Errorf("%s, sequence 3: %v, want %v", name, err, wantErr)
		}
	}
	if got := decideReason(t, r.Current()); got != "two" {
		t.Errorf("serving %q, want two", got)
	}
}
