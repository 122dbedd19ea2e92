package policy

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// JWSSigner signs policy bundles with ES256 (ECDSA P-256 with SHA-256, RFC
// 7518 section 3.4). It is implemented by [FileSigner] for a local PEM key
// and can be implemented over Vault Transit (an ecdsa-p256 key, signing the
// input with hash_algorithm=sha2-256 and marshaling_algorithm=jws, whose
// signature is base64url of exactly the bytes SignES256 must return).
type JWSSigner interface {
	// KeyID is the key id written into the JWS "kid" header; verifiers look
	// the public key up by it. It must not be empty.
	KeyID() string
	// SignES256 returns the ES256 signature of signingInput (the JWS
	// "header.payload" bytes): SHA-256 of signingInput signed with the P-256
	// key, encoded as the 64-byte big-endian r || s (not ASN.1 DER).
	SignES256(ctx context.Context, signingInput []byte) (sig []byte, err error)
}

// FileSigner is a [JWSSigner] over a local ECDSA P-256 private key. It is safe
// for concurrent use.
type FileSigner struct {
	keyID string
	key   *ecdsa.PrivateKey
}

// NewFileSigner reads a PEM ECDSA P-256 private key ("EC PRIVATE KEY", SEC 1,
// or "PRIVATE KEY", PKCS #8) from path. Errors wrap [ErrKey]; they name the
// file but never include key material.
func NewFileSigner(keyID, path string) (*FileSigner, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	s, err := ParseFileSigner(keyID, b)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return s, nil
}

// ParseFileSigner is NewFileSigner over PEM bytes.
func ParseFileSigner(keyID string, pemBytes []byte) (*FileSigner, error) {
	if keyID == "" {
		return nil, fmt.Errorf("%w: empty key id", ErrKey)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block", ErrKey)
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%w: PEM block %q is not a private key", ErrKey, block.Type)
	}
	if err != nil {
		// x509 parse errors describe the structure, not the key bytes.
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	ek, ok := key.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: not an ECDSA P-256 private key (ES256 needs one)", ErrKey)
	}
	return &FileSigner{keyID: keyID, key: ek}, nil
}

// KeyID implements [JWSSigner].
func (s *FileSigner) KeyID() string { return s.keyID }

// SignES256 implements [JWSSigner] with crypto/ecdsa.
func (s *FileSigner) SignES256(ctx context.Context, signingInput []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h := sha256.Sum256(signingInput)
	r, ss, err := ecdsa.Sign(rand.Reader, s.key, h[:])
	if err != nil {
		return nil, err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	ss.FillBytes(sig[32:])
	return sig, nil
}

// Public returns the signer's *ecdsa.PublicKey. [SignBundle] uses it to check
// every signature it produces.
func (s *FileSigner) Public() crypto.PublicKey { return &s.key.PublicKey }

// VerificationKey returns the public half of the signer as a
// [VerificationKey] under the signer's key id.
func (s *FileSigner) VerificationKey() VerificationKey {
	der, err := x509.MarshalPKIXPublicKey(&s.key.PublicKey)
	if err != nil {
		// A P-256 public key always marshals.
		panic(err)
	}
	return VerificationKey{ID: s.keyID, PEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})}
}

// VerificationKey is a public key that may sign policy bundles.
type VerificationKey struct {
	// ID is the key id the signer writes into the JWS "kid" header.
	ID string
	// PEM is the PKIX ("PUBLIC KEY") PEM encoding of an ECDSA P-256 public
	// key, as openssl ec -pubout and Vault Transit's key read produce.
	PEM []byte
}

// ParseVerificationKey returns a VerificationKey after checking that pemBytes
// hold an ECDSA P-256 public key. Errors wrap [ErrKey].
func ParseVerificationKey(id string, pemBytes []byte) (VerificationKey, error) {
	k := VerificationKey{ID: id, PEM: pemBytes}
	if _, err := k.publicKey(); err != nil {
		return VerificationKey{}, err
	}
	return k, nil
}

func (k VerificationKey) publicKey() (*ecdsa.PublicKey, error) {
	if k.ID == "" {
		return nil, fmt.Errorf("%w: empty key id", ErrKey)
	}
	block, _ := pem.Decode(k.PEM)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%w: key %q: want a PEM \"PUBLIC KEY\" block", ErrKey, k.ID)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: %w", ErrKey, k.ID, err)
	}
	ek, ok := pub.(*ecdsa.PublicKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: key %q is not an ECDSA P-256 public key", ErrKey, k.ID)
	}
	return ek, nil
}

// checkKeys validates keys for verification: at least one, each a P-256
// public key, ids unique.
func checkKeys(keys []VerificationKey) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: no verification keys configured (a signed bundle is mandatory)", ErrKey)
	}
	seen := make(map[string]bool, len(keys))
	var errs []error
	for _, k := range keys {
		if _, err := k.publicKey(); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[k.ID] {
			errs = append(errs, fmt.Errorf("%w: duplicate key id %q", ErrKey, k.ID))
		}
		seen[k.ID] = true
	}
	return errors.Join(errs...)
}
