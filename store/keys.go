package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// DataKeys supplies the per-blob data keys of envelope encryption at rest
// and wraps them under a key-encryption key (KEK) that never leaves the
// provider (for custos: HashiCorp Vault Transit, implemented in secrets/).
//
// Contract for implementations: methods are safe for concurrent use; errors
// never contain key bytes (plain or wrapped); returned key slices are not
// modified by the store and may be shared with a provider-side cache, so the
// provider must not modify them after returning them either.
type DataKeys interface {
	// KEK names the key-encryption key, e.g.
	// "vault-transit:transit/custos-blob-kek". It is recorded in the
	// catalog's meta bucket; a catalog wrapped under one KEK refuses to open
	// with another (ErrKEKMismatch). It must be non-empty and stable.
	KEK() string
	// NewDataKey returns a fresh random 32-byte AES-256 data key and its
	// wrapped form: opaque bytes, safe to store, at most 65535 bytes (for
	// Vault the ciphertext string "vault:vN:...").
	NewDataKey(ctx context.Context) (key, wrapped []byte, err error)
	// UnwrapDataKey returns the 32-byte key that wrapped protects. It may be
	// served from a cache. A wrapped value that is not a valid ciphertext
	// under the KEK is an error like any other: the store reports it as a
	// *KeyError, not as corruption, because it cannot tell the two apart.
	UnwrapDataKey(ctx context.Context, wrapped []byte) ([]byte, error)
}

// Rewrapper is implemented by DataKeys providers that can re-wrap a wrapped
// data key under the newest version of the KEK without exposing the data key
// (Vault Transit "rewrap"). Reencrypt uses it to move every blob's key to the
// newest KEK version; the blob ciphertexts are unchanged.
type Rewrapper interface {
	// RewrapDataKey returns wrapped re-wrapped under the newest KEK version.
	// It may return wrapped unchanged (equal bytes) if it already is.
	RewrapDataKey(ctx context.Context, wrapped []byte) ([]byte, error)
}

// Encryption modes, as recorded under meta/"encryption" and returned by
// Store.Encryption.
const (
	// EncryptionNone: blob values are the content itself. A schema-1
	// catalog (which has no "encryption" key) is in this mode.
	EncryptionNone = "none"
	// EncryptionEnvelope: every blob value is an envelope (see doc.go,
	// "Encryption at rest") holding content encrypted under its own data key.
	EncryptionEnvelope = "envelope-v1"
)

// Envelope format constants; see doc.go for the layout.
const (
	// DataKeySize is the size of a data key: AES-256.
	DataKeySize = 32

	envelopeMagic    = "e1"
	envelopeNonceLen = 12 // GCM standard nonce
	envelopeTagLen   = 16 // GCM tag
	maxWrappedLen    = 1<<16 - 1
	// minEnvelopeLen: magic, length, one byte of wrapped key, nonce, tag.
	minEnvelopeLen = len(envelopeMagic) + 2 + 1 + envelopeNonceLen + envelopeTagLen
)

// blobAADPrefix starts the additional authenticated data of every blob
// ciphertext; the 32-byte content address follows.
const blobAADPrefix = "custos/blob/v1\x00"

// envelope is a parsed blob value. Its slices alias the parsed buffer.
type envelope struct {
	wrapped    []byte
	nonce      []byte
	ciphertext []byte // ciphertext || tag
}

// blobAAD returns "custos/blob/v1" || 0x00 || digest: it binds a ciphertext
// to the content address it is stored under, so that a value copied to
// another key fails authentication.
func blobAAD(digest []byte) []byte {
	aad := make([]byte, 0, len(blobAADPrefix)+sha256.Size)
	aad = append(aad, blobAADPrefix...)
	return append(aad, digest...)
}

// encodeEnvelope returns "e1" || uint16be(len(wrapped)) || wrapped || nonce
// || ciphertext. It reports false if wrapped is empty or too long or nonce
// has the wrong size.
func encodeEnvelope(wrapped, nonce, ciphertext []byte) ([]byte, bool) {
	if len(wrapped) == 0 || len(wrapped) > maxWrappedLen || len(nonce) != envelopeNonceLen || len(ciphertext) < envelopeTagLen {
		return nil, false
	}
	out := make([]byte, 0, len(envelopeMagic)+2+len(wrapped)+len(nonce)+len(ciphertext))
	out = append(out, envelopeMagic...)
	out = binary.BigEndian.AppendUint16(out, uint16(len(wrapped)))
	out = append(out, wrapped...)
	out = append(out, nonce...)
	return append(out, ciphertext...), true
}

// parseEnvelope splits a stored blob value. The reason it returns on failure
// describes the structure only, never the bytes.
func parseEnvelope(v []byte) (envelope, string) {
	if len(v) < minEnvelopeLen {
		return envelope{}, "envelope truncated"
	}
	if string(v[:len(envelopeMagic)]) != envelopeMagic {
		return envelope{}, "envelope has an unknown format marker"
	}
	v = v[len(envelopeMagic):]
	n := int(binary.BigEndian.Uint16(v))
	v = v[2:]
	if n == 0 {
		return envelope{}, "envelope has an empty wrapped key"
	}
	if len(v) < n+envelopeNonceLen+envelopeTagLen {
		return envelope{}, "envelope truncated"
	}
	return envelope{
		wrapped:    v[:n:n],
		nonce:      v[n : n+envelopeNonceLen : n+envelopeNonceLen],
		ciphertext: v[n+envelopeNonceLen:],
	}, ""
}

// newBlobAEAD returns AES-256-GCM under key.
func newBlobAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != DataKeySize {
		return nil, fmt.Errorf("provider returned a data key of %d bytes, want %d", len(key), DataKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealBlob encrypts content stored under digest with key and returns the
// envelope value. nonce must be fresh (sealBlobRandom draws one).
func sealBlob(key, wrapped, nonce, digest, content []byte) ([]byte, error) {
	aead, err := newBlobAEAD(key)
	if err != nil {
		return nil, err
	}
	ct := aead.Seal(nil, nonce, content, blobAAD(digest))
	env, ok := encodeEnvelope(wrapped, nonce, ct)
	if !ok {
		return nil, fmt.Errorf("provider returned a wrapped key of %d bytes, want 1..%d", len(wrapped), maxWrappedLen)
	}
	return env, nil
}

// sealBlobRandom is sealBlob with a fresh random nonce.
func sealBlobRandom(key, wrapped, digest, content []byte) ([]byte, error) {
	nonce := make([]byte, envelopeNonceLen)
	rand.Read(nonce) // never returns an error (crypto/rand, Go 1.24+)
	return sealBlob(key, wrapped, nonce, digest, content)
}

// errAuth is what openBlob reports when GCM authentication fails.
const errAuth = "decryption failed: ciphertext, nonce or content address altered"

// openBlob decrypts env with key, authenticating it against digest, and
// appends the plaintext to dst (env.ciphertext[:0] decrypts in place). It
// returns the plaintext, or a reason for an *IntegrityError, or an error
// when key is unusable.
func openBlob(dst, key []byte, env envelope, digest []byte) ([]byte, string, error) {
	aead, err := newBlobAEAD(key)
	if err != nil {
		return nil, "", err
	}
	pt, err := aead.Open(dst, env.nonce, env.ciphertext, blobAAD(digest))
	if err != nil {
		return nil, errAuth, nil
	}
	return pt, "", nil
}
