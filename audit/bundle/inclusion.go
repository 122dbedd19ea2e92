package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/custos-mcp/custos/audit"
	"golang.org/x/mod/sumdb/tlog"
)

// Inclusion is the proof that record Seq is in the log as committed to by a
// signed checkpoint: `custos audit prove --seq N`. It holds no record
// contents, only the record's leaf hash; the record itself is checked
// separately (CheckInclusion) by whoever holds it.
type Inclusion struct {
	Format     string          `json:"format"` // InclusionFormat
	Seq        uint64          `json:"seq"`
	Leaf       int64           `json:"leaf"`        // Seq-1
	LeafHash   tlog.Hash       `json:"leaf_hash"`   // tlog.RecordHash(canonical record bytes)
	RecordHash string          `json:"record_hash"` // audit.HashRecord(canonical record bytes), as in prev_hash
	Checkpoint CheckpointInfo  `json:"checkpoint"`  // origin, size, root of the checkpoint proved against
	Anchor     json.RawMessage `json:"anchor"`      // the checkpoint's anchor line (with the signed note)
	Proof      []tlog.Hash     `json:"proof"`       // tlog.RecordProof (RFC 6962 audit path)
}

// InclusionFormat is Inclusion.Format.
const InclusionFormat = "custos-audit-inclusion/v1"

// InclusionProof proves record seq against the checkpoint in the anchor
// line ckptLine (normally the latest). The checkpoint must cover seq
// (ErrNoCheckpoint otherwise: wait for the next checkpoint) and its root
// must equal the local tree's at its size (ErrCheckpointMismatch). The
// proof is checked before it is returned.
func InclusionProof(ctx context.Context, src Source, seq uint64, ckptLine []byte) (Inclusion, error) {
	c, err := parseAnchorLine(ckptLine)
	if err != nil {
		return Inclusion{}, err
	}
	if seq < 1 {
		return Inclusion{}, fmt.Errorf("%w: seq %d", ErrBadRange, seq)
	}
	if int64(seq) > c.Size {
		return Inclusion{}, fmt.Errorf("%w: the checkpoint has size %d, seq %d is newer", ErrNoCheckpoint, c.Size, seq)
	}
	root, err := src.TreeHash(c.Size)
	if err != nil {
		return Inclusion{}, err
	}
	if root != c.Root {
		return Inclusion{}, fmt.Errorf("%w: at size %d the checkpoint root is %v, the local tree's %v", ErrCheckpointMismatch, c.Size, c.Root, root)
	}
	var leaf tlog.Hash
	var rh string
	found := false
	err = src.Records(ctx, seq, seq, func(s uint64, canonical []byte) error {
		leaf, rh, found = tlog.RecordHash(canonical), audit.HashRecord(canonical), s == seq
		return nil
	})
	if err != nil {
		return Inclusion{}, err
	}
	if !found {
		return Inclusion{}, fmt.Errorf("%w: record %d not returned by the log", audit.ErrCorrupt, seq)
	}
	p, err := src.ProveRecord(seq, c.Size)
	if err != nil {
		return Inclusion{}, err
	}
	if err := tlog.CheckRecord(p, c.Size, c.Root, int64(seq)-1, leaf); err != nil {
		return Inclusion{}, fmt.Errorf("%w: the log's inclusion proof for seq %d does not check: %v", audit.ErrCorrupt, seq, err)
	}
	return Inclusion{
		Format:     InclusionFormat,
		Seq:        seq,
		Leaf:       int64(seq) - 1,
		LeafHash:   leaf,
		RecordHash: rh,
		Checkpoint: c.info(nil),
		Anchor:     json.RawMessage(c.Line),
		Proof:      append([]tlog.Hash{}, p...),
	}, nil
}

// JSON renders the inclusion proof as indented JSON (ParseInclusion reads
// it back).
func (in Inclusion) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseInclusion parses the JSON rendering of an Inclusion.
func ParseInclusion(b []byte) (Inclusion, error) {
	var in Inclusion
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Inclusion{}, fmt.Errorf("bundle: inclusion proof does not parse: %v", err)
	}
	if in.Format != InclusionFormat {
		return Inclusion{}, fmt.Errorf("bundle: inclusion proof format %q, want %q", in.Format, InclusionFormat)
	}
	return in, nil
}

// Text renders the inclusion proof for people.
func (in Inclusion) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "inclusion proof for audit record seq %d (leaf %d)\n", in.Seq, in.Leaf)
	fmt.Fprintf(&b, "record hash: %s\n", in.RecordHash)
	fmt.Fprintf(&b, "leaf hash:   %v\n", in.LeafHash)
	fmt.Fprintf(&b, "checkpoint:  origin %s size %d root %v", in.Checkpoint.Origin, in.Checkpoint.Size, in.Checkpoint.Root)
	if in.Checkpoint.Time != "" {
		fmt.Fprintf(&b, " anchored %s (unsigned)", in.Checkpoint.Time)
	}
	b.WriteByte('\n')
	if len(in.Checkpoint.Signers) > 0 {
		fmt.Fprintf(&b, "signed by:   %s\n", strings.Join(in.Checkpoint.Signers, ", "))
	}
	fmt.Fprintf(&b, "audit path (%d hashes):\n", len(in.Proof))
	for i, h := range in.Proof {
		fmt.Fprintf(&b, "  %2d %v\n", i, h)
	}
	return b.String()
}

// CheckInclusion checks offline that record (its exact canonical bytes) is
// leaf in.Seq-1 of the tree committed to by the signed checkpoint in
// in.Anchor, with the note verifier keys vkeys (trusted, not from the
// proof): the signature (key named like the origin), the checkpoint body,
// that in.Checkpoint agrees with it, that record decodes canonically with
// seq in.Seq and hashes to in.LeafHash and in.RecordHash, and
// tlog.CheckRecord. It returns an error wrapping ErrInvalid on any failure
// (ErrBadVerifierKey for unusable keys).
func CheckInclusion(in Inclusion, record []byte, vkeys []byte) error {
	vs, _, err := parseVerifierKeys(vkeys)
	if err != nil {
		return err
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: inclusion of seq %d: %s", ErrInvalid, in.Seq, fmt.Sprintf(format, args...))
	}
	c, err := parseAnchorLine(in.Anchor)
	if err != nil {
		return fail("%v", err)
	}
	if _, err := c.verifySignatures(vs); err != nil {
		return fail("checkpoint signature: %v", err)
	}
	if c.Origin != in.Checkpoint.Origin || c.Size != in.Checkpoint.Size || c.Root != in.Checkpoint.Root {
		return fail("the proof's checkpoint fields disagree with its signed note")
	}
	if in.Seq < 1 || int64(in.Seq) > c.Size || in.Leaf != int64(in.Seq)-1 {
		return fail("seq %d, leaf %d outside the checkpoint's tree of size %d", in.Seq, in.Leaf, c.Size)
	}
	r, err := audit.Decode(record)
	if err != nil {
		return fail("record does not decode canonically: %v", err)
	}
	if r.Seq != in.Seq {
		return fail("record has seq %d", r.Seq)
	}
	leaf := tlog.RecordHash(record)
	if leaf != in.LeafHash {
		return fail("record leaf hash %v, proof says %v", leaf, in.LeafHash)
	}
	if h := audit.HashRecord(record); h != in.RecordHash {
		return fail("record hash %s, proof says %s", h, in.RecordHash)
	}
	if err := tlog.CheckRecord(in.Proof, c.Size, c.Root, in.Leaf, leaf); err != nil {
		return fail("audit path does not lead to the checkpoint root: %v", err)
	}
	return nil
}
