package secrets

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"log/slog"
)

// KeySize is the size in bytes of every symmetric key this package hands out
// (AES-256).
const KeySize = 32

// Key is a symmetric key together with the id of its version. The id is safe
// to record (it names the key, not its bytes); the bytes are not.
type Key struct {
	ID    string
	Bytes []byte
}

// String prints only the key id, so a key passed to a formatter by mistake
// does not leak.
func (k Key) String() string { return "key(" + k.ID + ")" }

// LogValue implements slog.LogValuer with the same rule as String.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// Dev is the development provider: keys drawn from crypto/rand when it is
// created and never persisted. Cursors sealed by one process cannot be opened
// by the next, which is the intended behaviour for a demo.
type Dev struct {
	cursor  Key
	audit   Key
	signPub ed25519.PublicKey
	signKey ed25519.PrivateKey
}

// NewDev returns a development provider with fresh random keys.
func NewDev() (*Dev, error) {
	b := make([]byte, 2*KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("secrets: drawing dev key: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("secrets: drawing dev signing key: %w", err)
	}
	return &Dev{
		cursor:  Key{ID: "dev-ephemeral-1", Bytes: b[:KeySize]},
		audit:   Key{ID: "dev-ephemeral-1", Bytes: b[KeySize:]},
		signPub: pub, signKey: priv,
	}, nil
}

// CursorKeys returns the one cursor key.
func (d *Dev) CursorKeys(ctx context.Context) ([]Key, error) {
	k, err := d.CursorKey(ctx)
	return []Key{k}, err
}

// AuditKey returns the audit keyed-hash key.
func (d *Dev) AuditKey(context.Context) (Key, error) { return d.audit.clone(), nil }

// KeyIDs names the dev keys in the form audit records carry.
func (d *Dev) KeyIDs() []string {
	return []string{"audit-hmac=dev:ephemeral", "cursor=dev:ephemeral", "signing=dev:ephemeral"}
}

// Check always succeeds: dev keys never go stale.
func (d *Dev) Check() error { return nil }

// Sign signs msg with the ephemeral ed25519 key (version 1).
func (d *Dev) Sign(_ context.Context, msg []byte) ([]byte, int, error) {
	return ed25519.Sign(d.signKey, msg), 1, nil
}

// Verify checks a signature made by Sign.
func (d *Dev) Verify(msg, sig []byte, ver int) bool {
	return ver == 1 && ed25519.Verify(d.signPub, msg, sig)
}

// PublicKey returns the ephemeral public key (version 1).
func (d *Dev) PublicKey(ver int) (ed25519.PublicKey, int, error) {
	if ver != 0 && ver != 1 {
		return nil, 0, fmt.Errorf("%w: no signing key version %d", ErrMissing, ver)
	}
	return append(ed25519.PublicKey(nil), d.signPub...), 1, nil
}

// CursorKey returns the key that seals list cursors.
func (d *Dev) CursorKey(context.Context) (Key, error) {
	return d.cursor.clone(), nil
}

// Dev reports true: keys from this provider are ephemeral development keys.
func (d *Dev) Dev() bool { return true }

// Name describes the provider for the startup banner.
func (d *Dev) Name() string { return "dev (ephemeral in-memory keys)" }
