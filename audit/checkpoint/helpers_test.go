package checkpoint

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const testOrigin = "custos.example-hospital/node-1/audit"

// fakeKS is a KeySigner with real ed25519 keys; version i+1 is keys[i].
type fakeKS struct {
	mu      sync.Mutex
	keys    []ed25519.PrivateKey
	signErr error
	corrupt bool // return a signature that does not verify
	// rotateOnSign, if non-zero, adds a key from this seed byte just before
	// the next Sign (simulating a Vault rotation between KeyHash and Sign).
	rotateOnSign byte
	signs        int
}

func seedKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func newFakeKS(seeds ...byte) *fakeKS {
	k := &fakeKS{}
	for _, s := range seeds {
		k.keys = append(k.keys, seedKey(s))
	}
	return k
}

func (k *fakeKS) rotate(seed byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append(k.keys, seedKey(seed))
}

func (k *fakeKS) Sign(ctx context.Context, msg []byte) ([]byte, int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if k.signErr != nil {
		return nil, 0, k.signErr
	}
	if k.rotateOnSign != 0 {
		k.keys = append(k.keys, seedKey(k.rotateOnSign))
		k.rotateOnSign = 0
	}
	k.signs++
	v := len(k.keys)
	sig := ed25519.Sign(k.keys[v-1], msg)
	if k.corrupt {
		sig[0] ^= 1
	}
	return sig, v, nil
}

func (k *fakeKS) PublicKey(version int) (ed25519.PublicKey, int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if version == 0 {
		version = len(k.keys)
	}
	if version < 1 || version > len(k.keys) {
		return nil, 0, fmt.Errorf("no key version %d", version)
	}
	return k.keys[version-1].Public().(ed25519.PublicKey), version, nil
}

func (k *fakeKS) setSignErr(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.signErr = err
}

// memTree is an in-memory tlog tree; it implements Tree.
type memTree struct {
	mu      sync.Mutex
	hashes  []tlog.Hash
	n       int64
	headErr error
}

func (t *memTree) read(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(t.hashes)) {
			return nil, fmt.Errorf("hash index %d not stored", x)
		}
		out[i] = t.hashes[x]
	}
	return out, nil
}

// add appends records.
func (t *memTree) add(records ...[]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range records {
		hs, err := tlog.StoredHashes(t.n, r, tlog.HashReaderFunc(t.read))
		if err != nil {
			panic(err)
		}
		t.hashes = append(t.hashes, hs...)
		t.n++
	}
}

// grow appends n records "rec-<seq>" (prefix p).
func (t *memTree) grow(p string, n int) {
	for range n {
		t.mu.Lock()
		seq := t.n + 1
		t.mu.Unlock()
		t.add(fmt.Appendf(nil, "%s-%d", p, seq))
	}
}

func newTree(p string, n int) *memTree {
	t := &memTree{}
	t.grow(p, n)
	return t
}

func (t *memTree) TreeHead(ctx context.Context) (int64, tlog.Hash, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.headErr != nil {
		return 0, tlog.Hash{}, t.headErr
	}
	h, err := tlog.TreeHash(t.n, tlog.HashReaderFunc(t.read))
	return t.n, h, err
}

func (t *memTree) TreeHash(size int64) (tlog.Hash, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if size > t.n {
		return tlog.Hash{}, errors.New("size beyond head")
	}
	return tlog.TreeHash(size, tlog.HashReaderFunc(t.read))
}

func (t *memTree) ProveTree(oldSize, newSize int64) (tlog.TreeProof, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if newSize > t.n {
		return nil, errors.New("size beyond head")
	}
	return tlog.ProveTree(newSize, oldSize, tlog.HashReaderFunc(t.read))
}

func (t *memTree) size() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// testSigner returns a Signer over a fresh fakeKS (seed 1) and verifiers
// for it.
func testSigner(t *testing.T) (*Signer, *fakeKS, note.Verifiers) {
	t.Helper()
	ks := newFakeKS(1)
	s, vkey, err := NewSigner(context.Background(), testOrigin, ks)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseVerifierFile([]byte(vkey + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return s, ks, v
}

// signedEntry signs the tree head of tr at size and returns its Entry.
func signedEntry(t *testing.T, s note.Signer, tr *memTree, size int64) Entry {
	t.Helper()
	root, err := tr.TreeHash(size)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := Sign(Checkpoint{Origin: testOrigin, Size: size, Root: root}, s)
	if err != nil {
		t.Fatal(err)
	}
	return Entry{Size: size, Root: root, Note: msg}
}
