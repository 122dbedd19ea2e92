package checkpoint

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// rollbackTitle is the second line of a rollback acknowledgement: it can
// never be a checkpoint's (a decimal size), so neither note can pass for
// the other.
const rollbackTitle = "custos rollback acknowledged"

// Rollback is an acknowledged rollback: the audit log was restored from a
// backup of From records although checkpoints up to Behind had been
// anchored, and the restore appended its own record (leaf From, hash
// Record), giving the tree To = From+1 with root ToRoot. It rides on the
// anchor line of that checkpoint (To, ToRoot) as a second signed note
// (Note), by the same key:
//
//	<origin>
//	custos rollback acknowledged
//	from <From> <FromRoot, base64>
//	behind <Behind> <BehindRoot, base64>
//	to <To> <ToRoot, base64>
//	record <Record, hex>
//
// Current lets it supersede the checkpoints anchored before it, in the
// same anchor file, of size greater than From (the lost history); only
// CheckAgainst, which checks its signature, makes that binding. A custos
// that does not know this line refuses the anchor file (fail closed).
type Rollback struct {
	Origin     string
	From       int64
	FromRoot   tlog.Hash
	Behind     int64
	BehindRoot tlog.Hash
	To         int64
	ToRoot     tlog.Hash
	Record     string // hex SHA-256 of the restore's audit record (seq To)
	Note       []byte // the signed note of Marshal()
}

// ErrBadRollback is returned when a rollback acknowledgement is malformed,
// unsigned, or does not match the anchor line or the local tree it rides
// on. Treat the anchor as tampered with: refuse to serve.
var ErrBadRollback = errors.New("checkpoint: invalid rollback acknowledgement")

// Marshal returns the acknowledgement's body (see Rollback).
func (r Rollback) Marshal() []byte {
	b64 := func(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }
	return fmt.Appendf(nil, "%s\n%s\nfrom %d %s\nbehind %d %s\nto %d %s\nrecord %s\n",
		r.Origin, rollbackTitle, r.From, b64(r.FromRoot), r.Behind, b64(r.BehindRoot), r.To, b64(r.ToRoot), r.Record)
}

func (r Rollback) validate() error {
	if err := validOrigin(r.Origin); err != nil {
		return err
	}
	if r.From < 0 || r.Behind <= r.From || r.To != r.From+1 {
		return fmt.Errorf("%w: sizes from %d behind %d to %d (want from < behind, to = from+1)", ErrBadRollback, r.From, r.Behind, r.To)
	}
	if b, err := hex.DecodeString(r.Record); err != nil || len(b) != 32 || hex.EncodeToString(b) != r.Record {
		return fmt.Errorf("%w: record is not a lowercase hex SHA-256", ErrBadRollback)
	}
	return nil
}

// ParseRollback parses an acknowledgement's body strictly: it must
// re-marshal to exactly text.
func ParseRollback(text []byte) (Rollback, error) {
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	if len(lines) != 6 || lines[1] != rollbackTitle {
		return Rollback{}, fmt.Errorf("%w: not a rollback acknowledgement", ErrBadRollback)
	}
	r := Rollback{Origin: lines[0]}
	sized := func(line, key string, size *int64, root *tlog.Hash) bool {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != key {
			return false
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		h, herr := base64.StdEncoding.Strict().DecodeString(f[2])
		if err != nil || herr != nil || len(h) != tlog.HashSize {
			return false
		}
		*size = n
		copy(root[:], h)
		return true
	}
	rec, ok := strings.CutPrefix(lines[5], "record ")
	if !sized(lines[2], "from", &r.From, &r.FromRoot) || !sized(lines[3], "behind", &r.Behind, &r.BehindRoot) ||
		!sized(lines[4], "to", &r.To, &r.ToRoot) || !ok {
		return Rollback{}, fmt.Errorf("%w: malformed line", ErrBadRollback)
	}
	r.Record = rec
	if err := r.validate(); err != nil {
		return Rollback{}, err
	}
	if string(r.Marshal()) != string(text) {
		return Rollback{}, fmt.Errorf("%w: body is not canonical", ErrBadRollback)
	}
	return r, nil
}

// SignRollback validates r and returns its signed note, signed like a
// checkpoint (signer named r.Origin).
func SignRollback(r Rollback, signer note.Signer) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	if signer == nil || signer.Name() != r.Origin {
		return nil, fmt.Errorf("%w: signer name does not match origin %q", ErrBadRollback, r.Origin)
	}
	n := &note.Note{Text: string(r.Marshal())}
	msg, err := note.Sign(n, signer)
	if errors.Is(err, ErrKeyRotated) {
		msg, err = note.Sign(n, signer)
	}
	return msg, err
}

// OpenRollback verifies a signed acknowledgement and parses it.
func OpenRollback(signed []byte, verifiers note.Verifiers) (Rollback, error) {
	n, err := note.Open(signed, verifiers)
	if err != nil {
		return Rollback{}, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	r, err := ParseRollback([]byte(n.Text))
	if err != nil {
		return Rollback{}, err
	}
	for _, sig := range n.Sigs {
		if sig.Name == r.Origin {
			r.Note = signed
			return r, nil
		}
	}
	return Rollback{}, fmt.Errorf("%w: no verified signature by a key named %q", ErrBadSignature, r.Origin)
}

// rollbackBody parses a signed acknowledgement without verifying it.
func rollbackBody(signed []byte) (Rollback, error) {
	i := strings.LastIndex(string(signed), "\n\n")
	if i < 0 || !strings.HasSuffix(string(signed), "\n") {
		return Rollback{}, fmt.Errorf("%w: not a signed note", ErrBadRollback)
	}
	r, err := ParseRollback(signed[:i+1])
	if err != nil {
		return Rollback{}, err
	}
	r.Note = signed
	return r, nil
}

// Current applies the rollback acknowledgements of one anchor file's
// entries, in file order: an entry carrying a Rollback supersedes the
// entries before it of size greater than its From, which must all be at
// most its Behind (an acknowledgement covers only what was anchored when
// it was made). It returns the entries that still describe the log, in
// order, and a *RegressionError (ErrRolledBack) if sizes decrease
// otherwise. It does not verify signatures: CheckAgainst does, for every
// acknowledgement in what Current returns.
func Current(entries []Entry) ([]Entry, error) {
	out := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if r := e.Rollback; r != nil {
			kept := out[:0:0]
			for _, o := range out {
				switch {
				case o.Size <= r.From:
					kept = append(kept, o)
				case o.Size > r.Behind:
					return nil, &RegressionError{Prev: o, Next: e}
				}
			}
			out = kept
		}
		if n := len(out); n > 0 && e.Size < out[n-1].Size {
			return nil, &RegressionError{Prev: out[n-1], Next: e}
		}
		out = append(out, e)
	}
	return out, nil
}

// checkRollback verifies the acknowledgement on e against verifiers and
// the local tree: its signature, that it is the one on e's line, and that
// the local tree of its From records has FromRoot.
func checkRollback(tree Tree, e Entry, verifiers note.Verifiers) error {
	r, err := OpenRollback(e.Rollback.Note, verifiers)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Location(), err)
	}
	if r.To != e.Size || r.ToRoot != e.Root {
		return fmt.Errorf("%w: %s: acknowledges tree %d, the line is %d", ErrBadRollback, e.Location(), r.To, e.Size)
	}
	h, err := tree.TreeHash(r.From)
	if err != nil {
		return fmt.Errorf("checkpoint: local tree hash at size %d: %w", r.From, err)
	}
	if h != r.FromRoot {
		return &ForkError{Size: r.From, A: Side{Source: e.Location() + " (rollback acknowledgement)", Root: r.FromRoot, Note: r.Note, Verified: true},
			B: Side{Source: "local audit tree", Root: h}}
	}
	return nil
}
