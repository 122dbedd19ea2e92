package checkpoint

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

var update = flag.Bool("update", false, "rewrite testdata/golden")

// goldenSeed is the ed25519 seed of the golden vectors: bytes 0..31.
func goldenSeed() []byte {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	return seed
}

// seedKS is a one-version KeySigner over a fixed seed.
type seedKS struct{ key ed25519.PrivateKey }

func (k seedKS) Sign(_ context.Context, msg []byte) ([]byte, int, error) {
	return ed25519.Sign(k.key, msg), 1, nil
}

func (k seedKS) PublicKey(v int) (ed25519.PublicKey, int, error) {
	if v != 0 && v != 1 {
		return nil, 0, errors.New("no such version")
	}
	return k.key.Public().(ed25519.PublicKey), 1, nil
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from golden:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// goldenCheckpoint is the tree of records "rec-1".."rec-3".
func goldenCheckpoint(t *testing.T) Checkpoint {
	tr := newTree("rec", 3)
	size, root, err := tr.TreeHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return Checkpoint{Origin: testOrigin, Size: size, Root: root}
}

func TestGoldenSignedNote(t *testing.T) {
	ks := seedKS{ed25519.NewKeyFromSeed(goldenSeed())}
	s, vkey, err := NewSigner(context.Background(), testOrigin, ks)
	if err != nil {
		t.Fatal(err)
	}
	c := goldenCheckpoint(t)
	// Independent RFC 6962 root of three leaves: H(H(l1, l2), l3).
	l := func(s string) tlog.Hash { return tlog.RecordHash([]byte(s)) }
	if want := tlog.NodeHash(tlog.NodeHash(l("rec-1"), l("rec-2")), l("rec-3")); c.Root != want {
		t.Fatalf("golden root %s, want %s", c.Root, want)
	}
	msg, err := Sign(c, s)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "signed-note.txt", msg)
	golden(t, "verifier-keys.txt", FormatVerifierFile([]string{vkey}))

	line, err := FormatLine(Entry{Size: c.Size, Root: c.Root, Note: msg, Time: time.Date(2026, 11, 21, 10, 30, 0, 123456789, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "anchor-line.jsonl", line)

	// The pinned note verifies with note.Open and the pinned verifier key.
	want, err := os.ReadFile(filepath.Join("testdata", "golden", "signed-note.txt"))
	if err != nil {
		t.Fatal(err)
	}
	vk, err := os.ReadFile(filepath.Join("testdata", "golden", "verifier-keys.txt"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(strings.TrimSpace(string(vk)))
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(want, note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open(golden): %v", err)
	}
	if n.Text != string(c.Marshal()) || len(n.Sigs) != 1 || n.Sigs[0].Name != testOrigin {
		t.Fatalf("golden note opened to %+v", n)
	}
	got, _, err := Open(want, note.VerifierList(v))
	if err != nil || got != c {
		t.Fatalf("Open(golden) = %+v, %v", got, err)
	}
}

func TestSignerKeyHash(t *testing.T) {
	ks := newFakeKS(7)
	s, vkey, err := NewSigner(context.Background(), testOrigin, ks)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _ := ks.PublicKey(0)
	want, err := note.NewEd25519VerifierKey(testOrigin, pub)
	if err != nil {
		t.Fatal(err)
	}
	if vkey != want {
		t.Fatalf("vkey = %q, want %q", vkey, want)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	if s.KeyHash() != v.KeyHash() || s.Name() != testOrigin || s.Version() != 1 || s.VerifierKey() != vkey {
		t.Fatalf("signer %08x %q v%d, verifier %08x", s.KeyHash(), s.Name(), s.Version(), v.KeyHash())
	}
}

func TestNewSignerRejects(t *testing.T) {
	ctx := context.Background()
	if _, _, err := NewSigner(ctx, "bad origin", newFakeKS(1)); !errors.Is(err, ErrBadCheckpoint) {
		t.Errorf("bad origin: %v", err)
	}
	ks := newFakeKS(1)
	ks.corrupt = true
	if _, _, err := NewSigner(ctx, testOrigin, ks); !errors.Is(err, ErrBadSignature) {
		t.Errorf("corrupt backend: %v", err)
	}
	ks = newFakeKS(1)
	boom := errors.New("vault unavailable")
	ks.setSignErr(boom)
	if _, _, err := NewSigner(ctx, testOrigin, ks); !errors.Is(err, boom) {
		t.Errorf("backend error: %v", err)
	}
	if _, _, err := NewSigner(ctx, testOrigin, newFakeKS()); err == nil {
		t.Errorf("no key: want error")
	}
}

func TestSignerRotation(t *testing.T) {
	s, ks, _ := testSigner(t)
	old := s.KeyHash()
	c := Checkpoint{Origin: testOrigin, Size: 5, Root: tlog.RecordHash([]byte("r"))}

	// Rotation between NewSigner and Sign: note.Sign fails with
	// ErrKeyRotated, the signer has switched, the next note.Sign works.
	ks.rotate(2)
	_, err := note.Sign(&note.Note{Text: string(c.Marshal())}, s)
	var kr *KeyRotatedError
	if !errors.As(err, &kr) || kr.Old != 1 || kr.New != 2 || !errors.Is(err, ErrKeyRotated) {
		t.Fatalf("note.Sign after rotation: %v", err)
	}
	if s.Version() != 2 || s.KeyHash() == old {
		t.Fatalf("signer did not switch: v%d", s.Version())
	}
	// Sign retries by itself.
	ks.mu.Lock()
	ks.rotateOnSign = 3
	ks.mu.Unlock()
	msg, err := Sign(c, s)
	if err != nil {
		t.Fatalf("Sign across rotation: %v", err)
	}
	if s.Version() != 3 {
		t.Fatalf("version %d, want 3", s.Version())
	}
	vkeys, err := VerifierKeys(testOrigin, ks)
	if err != nil || len(vkeys) != 3 {
		t.Fatalf("VerifierKeys = %v, %v", vkeys, err)
	}
	v, err := ParseVerifierFile(FormatVerifierFile(vkeys))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := Open(msg, v)
	if err != nil || got != c {
		t.Fatalf("Open = %+v, %v", got, err)
	}
	// Only the old key: the note does not verify.
	v1, err := ParseVerifierFile([]byte(vkeys[0]))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(msg, v1); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("Open with old key only: %v", err)
	}
	// Explicit versions.
	two, err := VerifierKeys(testOrigin, ks, 3, 1)
	if err != nil || len(two) != 2 || two[0] != vkeys[2] || two[1] != vkeys[0] {
		t.Fatalf("VerifierKeys(3,1) = %v, %v", two, err)
	}
	if _, err := VerifierKeys(testOrigin, ks, 9); err == nil {
		t.Fatal("VerifierKeys(9): want error")
	}
}

func TestSignerContext(t *testing.T) {
	s, _, _ := testSigner(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := Checkpoint{Origin: testOrigin, Size: 1}
	if _, err := Sign(c, s.WithContext(ctx)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sign with cancelled context: %v", err)
	}
	if _, err := Sign(c, s); err != nil {
		t.Fatalf("Sign: %v", err)
	}
}

func TestSignRejects(t *testing.T) {
	s, _, _ := testSigner(t)
	if _, err := Sign(Checkpoint{Origin: "other/origin", Size: 1}, s); !errors.Is(err, ErrBadCheckpoint) {
		t.Errorf("origin mismatch: %v", err)
	}
	if _, err := Sign(Checkpoint{Origin: testOrigin, Size: -1}, s); !errors.Is(err, ErrBadCheckpoint) {
		t.Errorf("negative size: %v", err)
	}
}

func TestOpenRejects(t *testing.T) {
	s, _, v := testSigner(t)
	c := Checkpoint{Origin: testOrigin, Size: 9, Root: tlog.RecordHash([]byte("r"))}
	msg, err := Sign(c, s)
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := testSignerNamed(t, "custos.other/node-9/audit", 9)
	otherMsg, err := Sign(Checkpoint{Origin: "custos.other/node-9/audit", Size: 9}, other)
	if err != nil {
		t.Fatal(err)
	}
	// A body that is not a checkpoint, validly signed by the trusted key.
	notCkpt, err := note.Sign(&note.Note{Text: testOrigin + "\n9\n"}, s)
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Replace(msg, []byte("\n9\n"), []byte("\n8\n"), 1)
	flipped := append([]byte(nil), msg...)
	i := bytes.LastIndex(flipped, []byte(" ")) + 5
	flipped[i] ^= 1

	tests := []struct {
		name string
		msg  []byte
		want error
	}{
		{"tampered size", tampered, ErrBadSignature},
		{"flipped signature", flipped, ErrBadSignature},
		{"unknown key", otherMsg, ErrBadSignature},
		{"no signature", c.Marshal(), ErrBadSignature},
		{"empty", nil, ErrBadSignature},
		{"not a checkpoint", notCkpt, ErrBadCheckpoint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := Open(tt.msg, v); !errors.Is(err, tt.want) {
				t.Fatalf("Open = %v, want %v", err, tt.want)
			}
		})
	}
	// A checkpoint for origin A signed only by a trusted key named B.
	_, okv, _ := testSignerNamed(t, "custos.other/node-9/audit", 9)
	crossed, err := note.Sign(&note.Note{Text: string(c.Marshal())}, other)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(crossed, okv); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("origin signed by another name: %v", err)
	}
}

func testSignerNamed(t *testing.T, origin string, seed byte) (*Signer, note.Verifiers, string) {
	t.Helper()
	s, vkey, err := NewSigner(context.Background(), origin, newFakeKS(seed))
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseVerifierFile([]byte(vkey))
	if err != nil {
		t.Fatal(err)
	}
	return s, v, vkey
}

func TestVerifierFile(t *testing.T) {
	_, _, vk1 := testSignerNamed(t, testOrigin, 1)
	_, _, vk2 := testSignerNamed(t, testOrigin, 2)
	file := "# custos checkpoint keys\n\n" + vk1 + "\n  " + vk2 + "  \n" + vk1 + "\n"
	v, err := ParseVerifierFile([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	for _, vk := range []string{vk1, vk2} {
		nv, _ := note.NewVerifier(vk)
		got, err := v.Verifier(testOrigin, nv.KeyHash())
		if err != nil || got.KeyHash() != nv.KeyHash() {
			t.Fatalf("Verifier(%08x) = %v, %v", nv.KeyHash(), got, err)
		}
	}
	// Round trip through FormatVerifierFile.
	if _, err := ParseVerifierFile(FormatVerifierFile([]string{vk1, vk2})); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"empty":        "",
		"comment only": "# nothing\n",
		"garbage":      vk1 + "\nnot-a-key\n",
		"bad hash":     testOrigin + "+00000000+" + vk1[strings.LastIndex(vk1, "+")+1:] + "\n",
		"private key":  "PRIVATE+KEY+" + vk1,
	} {
		if _, err := ParseVerifierFile([]byte(bad)); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
}

// TestOpenNamesTheOriginOfAnUnverifiedNote: a checkpoint that no given
// verifier key can check (written by a server of another --node or
// --deployment, whose keys are named by that origin, or signed by a key
// not given) is refused with the checkpoint's origin and the key that
// signed it, so the operator can tell which. note's own error ("note has no
// verifiable signatures") said neither: a restore drill that started serve
// on a machine with another hostname (the default --node) could not tell
// why its restored log was refused.
func TestOpenNamesTheOriginOfAnUnverifiedNote(t *testing.T) {
	other, _, _ := testSignerNamed(t, "custos.local/vaultdev/audit", 9)
	msg, err := Sign(Checkpoint{Origin: "custos.local/vaultdev/audit", Size: 9}, other)
	if err != nil {
		t.Fatal(err)
	}
	_, _, v := testSigner(t) // verifier keys of testOrigin
	_, _, err = Open(msg, v)
	if !errors.Is(err, ErrBadSignature) {
		t.Fatalf("Open = %v, want ErrBadSignature", err)
	}
	for _, want := range []string{`origin "custos.local/vaultdev/audit"`, `"custos.local/vaultdev/audit+`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open = %q; does not name %s", err, want)
		}
	}
}

// TestUnknownKeyIsAnErrorNotAText: a checkpoint signed by a key that is
// not given (after a rotation of the signing key, an old verifier file)
// is ErrUnknownKey, with the origin and the signer as fields, through
// CheckAgainst too; one whose signature by a given key does not verify
// (a changed note), a fork and a rollback acknowledgement signed by
// another key (beside a latest checkpoint the keys verify) are not.
// Callers told them apart by matching the error's text, which holds the
// anchor file's name: a fork in an anchor directory named with that text
// read as a key problem.
func TestUnknownKeyIsAnErrorNotAText(t *testing.T) {
	ctx := context.Background()
	s, ks, v := testSigner(t)
	tr := newTree("r", 4)
	e := signedEntry(t, s, tr, 4)
	ks.rotate(2) // the next checkpoint: the new key version, not in v
	rotated := signedEntry(t, s, tr, 4)

	err := CheckAgainst(ctx, tr, []Entry{rotated}, v)
	var uk *UnknownKeyError
	if !errors.Is(err, ErrUnknownKey) || !errors.Is(err, ErrBadSignature) || !errors.As(err, &uk) {
		t.Fatalf("CheckAgainst, checkpoint by another key version = %v, want ErrUnknownKey and ErrBadSignature", err)
	}
	if uk.Origin != testOrigin || len(uk.Signers) != 1 || !strings.HasPrefix(uk.Signers[0], testOrigin+"+") || !strings.Contains(err.Error(), uk.Signers[0]) {
		t.Errorf("UnknownKeyError = %+v; want origin %q and its one signer, named in %q", uk, testOrigin, err)
	}

	changed := bytes.Replace(e.Note, []byte("\n4\n"), []byte("\n5\n"), 1)
	vkeys, err := VerifierKeys(testOrigin, ks) // both versions
	if err != nil {
		t.Fatal(err)
	}
	both, err := ParseVerifierFile(FormatVerifierFile(vkeys))
	if err != nil {
		t.Fatal(err)
	}
	forkNote, err := Sign(Checkpoint{Origin: testOrigin, Size: 4, Root: tlog.Hash{1}}, s)
	if err != nil {
		t.Fatal(err)
	}
	forked := Entry{Size: 4, Root: tlog.Hash{1}, Note: forkNote}
	// An acknowledgement by the new version, on a line the first verifies.
	ack, err := SignRollback(Rollback{Origin: testOrigin, From: 3, Behind: 4, To: 4, ToRoot: e.Root, Record: strings.Repeat("ab", 32)}, s)
	if err != nil {
		t.Fatal(err)
	}
	withAck := e
	withAck.Rollback = &Rollback{Note: ack}
	for name, err := range map[string]error{
		"a changed note":   func() error { _, _, err := Open(changed, v); return err }(),
		"a fork":           CheckAgainst(ctx, tr, []Entry{forked}, both),
		"a rollback ack":   CheckAgainst(ctx, tr, []Entry{withAck}, v),
		"OpenRollback ack": func() error { _, err := OpenRollback(ack, v); return err }(),
	} {
		if err == nil || errors.Is(err, ErrUnknownKey) {
			t.Errorf("%s: %v, want an error that is not ErrUnknownKey", name, err)
		}
	}
}
