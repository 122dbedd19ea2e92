package secrets

import (
	"context"
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
	cursor Key
}

// NewDev returns a development provider with fresh random keys.
func NewDev() (*Dev, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("secrets: drawing dev key: %w", err)
	}
	return &Dev{cursor: Key{ID: "dev-ephemeral-1", Bytes: b}}, nil
}

// CursorKey returns the key that seals list cursors.
func (d *Dev) CursorKey(context.Context) (Key, error) {
	return Key{ID: d.cursor.ID, Bytes: append([]byte(nil), d.cursor.Bytes...)}, nil
}

// Dev reports true: keys from this provider are ephemeral development keys.
func (d *Dev) Dev() bool { return true }

// Name describes the provider for the startup banner.
func (d *Dev) Name() string { return "dev (ephemeral in-memory keys)" }
