package checkpoint

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/tlog"
)

// MaxCheckpointSize bounds the checkpoint body Parse accepts. A custos
// checkpoint body is three short lines; anything near this size is garbage.
const MaxCheckpointSize = 4096

// Checkpoint is the body of a C2SP tlog-checkpoint: the log's origin, the
// number of records in the tree (Size = head seq) and the RFC 6962 root
// hash of that tree (tlog.TreeHash).
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// Marshal returns the checkpoint body
//
//	<origin>\n<size in decimal>\n<base64 std root>\n
//
// It does not validate c: use Validate (Sign does).
func (c Checkpoint) Marshal() []byte {
	b := make([]byte, 0, len(c.Origin)+1+20+1+44+1)
	b = append(b, c.Origin...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, c.Size, 10)
	b = append(b, '\n')
	b = base64.StdEncoding.AppendEncode(b, c.Root[:])
	b = append(b, '\n')
	return b
}

// Validate reports whether c can be marshaled into a body that Parse
// accepts: a valid origin (see ValidOrigin) and a non-negative size. The
// error matches ErrBadCheckpoint.
func (c Checkpoint) Validate() error {
	if err := validOrigin(c.Origin); err != nil {
		return err
	}
	if c.Size < 0 {
		return fmt.Errorf("%w: negative size %d", ErrBadCheckpoint, c.Size)
	}
	return nil
}

// ValidOrigin reports whether origin is acceptable as a checkpoint origin
// and note key name: non-empty, valid UTF-8, no Unicode space, no '+', no
// control character (C2SP tlog-checkpoint's SHOULD, which signed-note key
// names make a MUST).
func ValidOrigin(origin string) bool { return validOrigin(origin) == nil }

func validOrigin(origin string) error {
	switch {
	case origin == "":
		return fmt.Errorf("%w: empty origin", ErrBadCheckpoint)
	case !utf8.ValidString(origin):
		return fmt.Errorf("%w: origin is not valid UTF-8", ErrBadCheckpoint)
	case strings.ContainsRune(origin, '+'):
		return fmt.Errorf("%w: origin contains '+'", ErrBadCheckpoint)
	case strings.IndexFunc(origin, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Errorf("%w: origin contains a space or control character", ErrBadCheckpoint)
	}
	return nil
}

// Parse parses a checkpoint body strictly: exactly three lines, each ending
// in '\n' — an origin accepted by ValidOrigin, a decimal size in [0, 2^63)
// without sign or leading zeros, and the canonical standard (padded) base64
// encoding of a 32-byte root. Extension lines (optional in C2SP) are
// rejected: custos never writes them and accepting unknown text would let a
// signed checkpoint say more than its verifier checks. Every accepted body
// re-marshals to exactly the same bytes. Errors match ErrBadCheckpoint.
func Parse(text []byte) (Checkpoint, error) {
	if len(text) > MaxCheckpointSize {
		return Checkpoint{}, fmt.Errorf("%w: body of %d bytes", ErrBadCheckpoint, len(text))
	}
	if !bytes.HasSuffix(text, []byte("\n")) {
		return Checkpoint{}, fmt.Errorf("%w: body does not end in a newline", ErrBadCheckpoint)
	}
	lines := strings.Split(string(text[:len(text)-1]), "\n")
	if len(lines) < 3 {
		return Checkpoint{}, fmt.Errorf("%w: %d lines, want 3", ErrBadCheckpoint, len(lines))
	}
	if len(lines) > 3 {
		return Checkpoint{}, fmt.Errorf("%w: extension lines are not supported", ErrBadCheckpoint)
	}
	if err := validOrigin(lines[0]); err != nil {
		return Checkpoint{}, err
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return Checkpoint{}, fmt.Errorf("%w: size is not a canonical non-negative decimal", ErrBadCheckpoint)
	}
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize || base64.StdEncoding.EncodeToString(root) != lines[2] {
		return Checkpoint{}, fmt.Errorf("%w: root is not the base64 of a 32-byte hash", ErrBadCheckpoint)
	}
	c := Checkpoint{Origin: lines[0], Size: size}
	copy(c.Root[:], root)
	return c, nil
}
