package server

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/custos-mcp/custos/secrets"
)

// Cursor wire format (documented in docs/uris.md):
//
//	"c1." || base64url-nopad( nonce(12) || AES-256-GCM(key, nonce, plaintext, aad) )
//	plaintext = {"after":"<last URI seen>","iat":<unix seconds>} padded with spaces to cursorPlainLen bytes
//	aad       = "custos/cursor/v1\x00" || SHA-256(sub \x00 tenant \x00 client_id \x00 purpose_of_use)
//
// The AEAD hides the catalog position from the client and binds the cursor to
// the caller: a cursor issued to one principal does not open for another.
// The padding makes every cursor one length: the last URI examined may be a
// resource the caller may not see (a page ended by the scan budget), and
// the length of an unpadded cursor would tell its scheme and type apart.
const (
	cursorPrefix  = "c1."
	cursorMaxLen  = 1024
	cursorMaxAge  = time.Hour
	cursorAADHead = "custos/cursor/v1\x00"
	// cursorPlainLen is the length of every cursor plaintext: the longest
	// state, {"after":"<a URI of store.MaxURILength bytes>","iat":<20 digits>},
	// is 295 bytes (URIs and templates need no JSON escaping).
	cursorPlainLen = 320
)

// errNotIssued is the authentication failure of a cursor: wrong key or
// wrong caller. openCursorAny tries the next key only on this error.
var errNotIssued = errors.New("not issued to this caller by this server")

type cursorState struct {
	After string `json:"after"`
	IAT   int64  `json:"iat"`
}

// cursorBinding is the caller-specific additional data of a cursor.
func cursorBinding(id Identity) []byte {
	h := sha256.New()
	for _, s := range []string{id.Principal.Sub, id.Principal.Tenant, id.Principal.ClientID, id.PurposeOfUse} {
		io.WriteString(h, s)
		h.Write([]byte{0})
	}
	return append([]byte(cursorAADHead), h.Sum(nil)...)
}

// templatesAADHead replaces cursorAADHead in the binding of
// resources/templates/list cursors:
//
//	aad = "custos/cursor/templates/v1\x00" || SHA-256(sub \x00 tenant \x00 client_id \x00 purpose_of_use)
//
// so that a cursor of one listing never opens for the other.
const templatesAADHead = "custos/cursor/templates/v1\x00"

// templatesCursorBinding is cursorBinding for templates cursors.
func templatesCursorBinding(id Identity) []byte {
	b := cursorBinding(id)
	return append([]byte(templatesAADHead), b[len(cursorAADHead):]...)
}

// sealCursor encrypts st for the caller identified by binding. nonce must be
// 12 fresh random bytes.
func sealCursor(key, binding, nonce []byte, st cursorState) (string, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return "", err
	}
	pt, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	if len(pt) > cursorPlainLen {
		return "", fmt.Errorf("server: cursor state of %d bytes exceeds %d", len(pt), cursorPlainLen)
	}
	// JSON whitespace after the value: openCursor decodes the one value.
	pt = append(pt, bytes.Repeat([]byte{' '}, cursorPlainLen-len(pt))...)
	out := aead.Seal(append([]byte(nil), nonce...), nonce, pt, binding)
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(out), nil
}

// openCursor is the inverse of sealCursor. Every failure wraps ErrBadCursor
// and says which check failed, never what the cursor contained.
func openCursor(key, binding []byte, s string, now time.Time) (cursorState, error) {
	var zero cursorState
	if len(s) > cursorMaxLen {
		return zero, fmt.Errorf("%w: longer than %d bytes", ErrBadCursor, cursorMaxLen)
	}
	body, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok {
		return zero, fmt.Errorf("%w: unknown format", ErrBadCursor)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(body)
	if err != nil {
		return zero, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	aead, err := newAEAD(key)
	if err != nil {
		return zero, err
	}
	if len(raw) < aead.NonceSize()+aead.Overhead() {
		return zero, fmt.Errorf("%w: too short", ErrBadCursor)
	}
	pt, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], binding)
	if err != nil {
		return zero, fmt.Errorf("%w: %w", ErrBadCursor, errNotIssued)
	}
	var st cursorState
	dec := json.NewDecoder(strings.NewReader(string(pt)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return zero, fmt.Errorf("%w: malformed state", ErrBadCursor)
	}
	age := now.Sub(time.Unix(st.IAT, 0))
	if age > cursorMaxAge || age < -time.Minute {
		return zero, fmt.Errorf("%w: expired", ErrBadCursor)
	}
	return st, nil
}

// openCursorAny opens s with each of keys in turn (newest first), so that
// cursors sealed before a key rotation still open. The error is the one of
// the newest key.
func openCursorAny(keys []secrets.Key, binding []byte, s string, now time.Time) (cursorState, error) {
	var first error
	for _, k := range keys {
		st, err := openCursor(k.Bytes, binding, s, now)
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, errNotIssued) {
			return cursorState{}, err // authenticated, but expired or malformed
		}
		if first == nil {
			first = err
		}
	}
	return cursorState{}, first
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("%w: cursor key must be 32 bytes", ErrBadConfig)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
