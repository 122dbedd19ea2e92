package store

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeKeys is an in-memory DataKeys provider shaped like Vault Transit: it
// wraps data keys with AES-256-GCM under its own KEK versions and returns
// "fake:v<N>:<base64>" ciphertexts.
type fakeKeys struct {
	name string

	mu       sync.Mutex
	versions [][]byte // KEK versions, newest last

	newCalls    atomic.Int64
	unwrapCalls atomic.Int64
	// failNewAfter > 0 makes every NewDataKey call after that many fail.
	failNewAfter atomic.Int64
	// unwrapErr, if set, is returned by every UnwrapDataKey call.
	unwrapErr atomic.Pointer[error]
	// keyLen overrides the length of the keys NewDataKey returns (0: 32).
	keyLen int
}

// errFakeUnavailable stands for the provider's own "Vault unavailable" error.
var errFakeUnavailable = errors.New("fake vault: unavailable")

func newFakeKeys(name string) *fakeKeys {
	f := &fakeKeys{name: name}
	f.rotate()
	return f
}

// rotate adds a KEK version, as `vault write -f transit/keys/K/rotate` does.
func (f *fakeKeys) rotate() {
	k := make([]byte, 32)
	rand.Read(k)
	f.mu.Lock()
	f.versions = append(f.versions, k)
	f.mu.Unlock()
}

func (f *fakeKeys) KEK() string { return f.name }

func (f *fakeKeys) aead(v int) (cipher.AEAD, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v < 1 || v > len(f.versions) {
		return nil, errors.New("fake vault: unknown key version")
	}
	b, err := aes.NewCipher(f.versions[v-1])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func (f *fakeKeys) newest() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.versions)
}

func (f *fakeKeys) wrap(v int, key []byte) ([]byte, error) {
	a, err := f.aead(v)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, a.NonceSize())
	rand.Read(nonce)
	ct := a.Seal(nonce, nonce, key, nil)
	return []byte(fmt.Sprintf("fake:v%d:%s", v, base64.StdEncoding.EncodeToString(ct))), nil
}

func (f *fakeKeys) NewDataKey(ctx context.Context) ([]byte, []byte, error) {
	n := f.newCalls.Add(1)
	if lim := f.failNewAfter.Load(); lim > 0 && n > lim {
		return nil, nil, errFakeUnavailable
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	key := make([]byte, cmpOr(f.keyLen, DataKeySize))
	rand.Read(key)
	w, err := f.wrap(f.newest(), key)
	return key, w, err
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

func (f *fakeKeys) UnwrapDataKey(ctx context.Context, wrapped []byte) ([]byte, error) {
	f.unwrapCalls.Add(1)
	if p := f.unwrapErr.Load(); p != nil {
		return nil, *p
	}
	rest, ok := strings.CutPrefix(string(wrapped), "fake:v")
	if !ok {
		return nil, errors.New("fake vault: invalid ciphertext")
	}
	vs, b64, ok := strings.Cut(rest, ":")
	if !ok {
		return nil, errors.New("fake vault: invalid ciphertext")
	}
	v, err := strconv.Atoi(vs)
	if err != nil {
		return nil, errors.New("fake vault: invalid ciphertext")
	}
	ct, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New("fake vault: invalid ciphertext")
	}
	a, err := f.aead(v)
	if err != nil {
		return nil, err
	}
	if len(ct) < a.NonceSize() {
		return nil, errors.New("fake vault: invalid ciphertext")
	}
	key, err := a.Open(nil, ct[:a.NonceSize()], ct[a.NonceSize():], nil)
	if err != nil {
		return nil, errors.New("fake vault: cipher: message authentication failed")
	}
	return key, nil
}

// fakeRewrapKeys adds Transit's rewrap to fakeKeys.
type fakeRewrapKeys struct{ *fakeKeys }

func (f fakeRewrapKeys) RewrapDataKey(ctx context.Context, wrapped []byte) ([]byte, error) {
	if bytes.HasPrefix(wrapped, []byte(fmt.Sprintf("fake:v%d:", f.newest()))) {
		return wrapped, nil
	}
	key, err := f.UnwrapDataKey(ctx, wrapped)
	if err != nil {
		return nil, err
	}
	return f.wrap(f.newest(), key)
}

var (
	_ DataKeys  = (*fakeKeys)(nil)
	_ Rewrapper = fakeRewrapKeys{}
)

// Golden vector of the envelope format: a change to it breaks every
// encrypted catalog.
func TestEnvelopeGolden(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	nonce := []byte("nonce-12byte")
	content := []byte("abc")
	digest := sha256.Sum256(content)
	env, err := sealBlob(key, []byte("vault:v1:d3JhcHBlZA=="), nonce, digest[:], content)
	if err != nil {
		t.Fatal(err)
	}
	// "e1" || uint16be(21) || "vault:v1:d3JhcHBlZA==" || "nonce-12byte" ||
	// AES-256-GCM ciphertext (3 bytes) || tag (16 bytes), computed
	// independently of this package.
	const want = "6531" + "0015" + "7661756c743a76313a64334a686348426c5a413d3d" + "6e6f6e63652d313262797465" +
		"04bfce" + "4c42d4ec60cf7ea6891ee5ec256ca71d"
	if got := hex.EncodeToString(env); got != want {
		t.Fatalf("envelope =\n%s\nwant\n%s", got, want)
	}
	p, reason := parseEnvelope(env)
	if reason != "" {
		t.Fatal(reason)
	}
	pt, reason, err := openBlob(nil, key, p, digest[:])
	if err != nil || reason != "" || string(pt) != "abc" {
		t.Fatalf("openBlob = %q, %q, %v", pt, reason, err)
	}
	// The AAD binds the digest: the same envelope under another address
	// fails.
	other := sha256.Sum256([]byte("abd"))
	if _, reason, _ := openBlob(nil, key, p, other[:]); reason != errAuth {
		t.Fatalf("wrong digest: reason %q", reason)
	}
}

func TestParseEnvelope(t *testing.T) {
	valid, _ := encodeEnvelope([]byte("w"), make([]byte, 12), make([]byte, 16))
	for _, tc := range []struct {
		name   string
		in     []byte
		reason string
	}{
		{"valid minimal", valid, ""},
		{"empty", nil, "envelope truncated"},
		{"one short", valid[:len(valid)-1], "envelope truncated"},
		{"bad magic", append([]byte("e2"), valid[2:]...), "envelope has an unknown format marker"},
		{"plaintext", []byte(strings.Repeat("# Note about a patient\n", 3)), "envelope has an unknown format marker"},
		{"empty wrapped key", append([]byte("e1\x00\x00"), make([]byte, 40)...), "envelope has an empty wrapped key"},
		{"wrapped key longer than value", append([]byte("e1\xff\xff"), make([]byte, 40)...), "envelope truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, reason := parseEnvelope(tc.in)
			if reason != tc.reason {
				t.Fatalf("reason = %q, want %q", reason, tc.reason)
			}
			if reason == "" && (string(env.wrapped) != "w" || len(env.nonce) != 12 || len(env.ciphertext) != 16) {
				t.Fatalf("parsed %+v", env)
			}
		})
	}
}

func TestEncodeEnvelopeLimits(t *testing.T) {
	for _, tc := range []struct {
		name               string
		wrapped, nonce, ct []byte
		ok                 bool
	}{
		{"max wrapped", make([]byte, 65535), make([]byte, 12), make([]byte, 16), true},
		{"wrapped too long", make([]byte, 65536), make([]byte, 12), make([]byte, 16), false},
		{"empty wrapped", nil, make([]byte, 12), make([]byte, 16), false},
		{"short nonce", []byte("w"), make([]byte, 11), make([]byte, 16), false},
		{"no tag", []byte("w"), make([]byte, 12), make([]byte, 15), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok := encodeEnvelope(tc.wrapped, tc.nonce, tc.ct)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
		})
	}
}

// FuzzParseEnvelope checks that the envelope encoding is not malleable: a
// value that parses re-encodes to exactly the same bytes.
func FuzzParseEnvelope(f *testing.F) {
	valid, _ := encodeEnvelope([]byte("vault:v1:abc"), make([]byte, 12), make([]byte, 20))
	f.Add(valid)
	f.Add([]byte("e1"))
	f.Fuzz(func(t *testing.T, in []byte) {
		env, reason := parseEnvelope(in)
		if reason != "" {
			if env.wrapped != nil || env.ciphertext != nil {
				t.Fatal("parts returned with a failure")
			}
			return
		}
		out, ok := encodeEnvelope(env.wrapped, env.nonce, env.ciphertext)
		if !ok || !bytes.Equal(out, in) {
			t.Fatalf("round trip: %x -> %x (%v)", in, out, ok)
		}
	})
}
