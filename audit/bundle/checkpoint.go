package bundle

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// checkpoint is one anchor line (the format of the anchor file
// checkpoints.jsonl) with its parsed note body. This package parses anchor
// lines itself so that the offline verifier depends on nothing but tlog and
// note:
//
//	{"size":N,"root":"<base64>","note":"<signed note text>","time":"<RFC 3339>"}
//
// where the note's text is a C2SP tlog-checkpoint body
// "<origin>\n<size>\n<base64 root>\n".
type checkpoint struct {
	Line   []byte    // the anchor line as given, without its line ending
	Origin string    // first line of the note body
	Size   int64     // tree size (body and line agree)
	Root   tlog.Hash // root hash (body and line agree)
	Note   []byte    // the signed note (text + signatures)
	Time   string    // the anchor line's time, as written (RFC 3339; not signed)
}

type anchorLine struct {
	Size *int64  `json:"size"`
	Root *string `json:"root"`
	Note *string `json:"note"`
	Time *string `json:"time"`
}

// parseAnchorLine parses an anchor line without checking signatures: the
// JSON object, its note's body (strictly), and that the line's size and
// root equal the body's. Leading and trailing white space (a line ending)
// is ignored.
func parseAnchorLine(line []byte) (checkpoint, error) {
	line = bytes.TrimSpace(line)
	var a anchorLine
	if err := json.Unmarshal(line, &a); err != nil {
		return checkpoint{}, fmt.Errorf("%w: anchor line is not a JSON object: %v", ErrBadCheckpoint, err)
	}
	if a.Size == nil || a.Root == nil || a.Note == nil || a.Time == nil {
		return checkpoint{}, fmt.Errorf("%w: anchor line lacks size, root, note or time", ErrBadCheckpoint)
	}
	// The time is not signed (it is not in the note), so it is evidence of
	// nothing; it must at least be a time, as the anchor file's parser
	// (checkpoint.ParseLine) requires, or the transcript would show any
	// text as the checkpoint's time.
	if _, err := time.Parse(time.RFC3339Nano, *a.Time); err != nil {
		return checkpoint{}, fmt.Errorf("%w: anchor line time %q is not an RFC 3339 time", ErrBadCheckpoint, *a.Time)
	}
	root, err := decodeHash(*a.Root)
	if err != nil {
		return checkpoint{}, fmt.Errorf("%w: anchor line root: %v", ErrBadCheckpoint, err)
	}
	text, err := noteText([]byte(*a.Note))
	if err != nil {
		return checkpoint{}, err
	}
	origin, size, bodyRoot, err := parseCheckpointBody(text)
	if err != nil {
		return checkpoint{}, err
	}
	if size != *a.Size || bodyRoot != root {
		return checkpoint{}, fmt.Errorf("%w: anchor line (size %d, root %v) disagrees with its signed note (size %d, root %v)",
			ErrBadCheckpoint, *a.Size, root, size, bodyRoot)
	}
	return checkpoint{
		Line:   append([]byte(nil), line...),
		Origin: origin,
		Size:   size,
		Root:   root,
		Note:   []byte(*a.Note),
		Time:   *a.Time,
	}, nil
}

// noteText returns the text of a signed note without verifying it: the
// bytes up to and including the line ending before the last blank line.
func noteText(msg []byte) ([]byte, error) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return nil, fmt.Errorf("%w: note has no signature block", ErrBadCheckpoint)
	}
	return msg[:i+1], nil
}

// parseCheckpointBody parses a C2SP tlog-checkpoint body, strictly:
// exactly "<origin>\n<size>\n<base64 root>\n", the origin non-empty, the
// size decimal without sign or leading zeros, the root standard base64 of
// 32 bytes. Extension lines are not accepted (custos writes none).
func parseCheckpointBody(text []byte) (origin string, size int64, root tlog.Hash, err error) {
	bad := func(why string) (string, int64, tlog.Hash, error) {
		return "", 0, tlog.Hash{}, fmt.Errorf("%w: checkpoint body: %s", ErrBadCheckpoint, why)
	}
	s := string(text)
	if !strings.HasSuffix(s, "\n") {
		return bad("does not end in a newline")
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) != 3 {
		return bad(fmt.Sprintf("%d lines, want 3", len(lines)))
	}
	if lines[0] == "" {
		return bad("empty origin")
	}
	n := lines[1]
	if n == "" || (len(n) > 1 && n[0] == '0') || strings.TrimLeft(n, "0123456789") != "" {
		return bad("size is not a canonical decimal")
	}
	size, perr := strconv.ParseInt(n, 10, 64)
	if perr != nil {
		return bad("size out of range")
	}
	root, herr := decodeHash(lines[2])
	if herr != nil {
		return bad(herr.Error())
	}
	return lines[0], size, root, nil
}

func decodeHash(s string) (tlog.Hash, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != tlog.HashSize || base64.StdEncoding.EncodeToString(b) != s {
		return tlog.Hash{}, fmt.Errorf("root is not the base64 of a %d-byte hash", tlog.HashSize)
	}
	var h tlog.Hash
	copy(h[:], b)
	return h, nil
}

// verifySignatures opens the checkpoint's note with the given verifiers.
// It returns the names+hashes of the keys whose signatures verified. It
// requires at least one verified signature by a key named like the
// checkpoint's origin (custos signs with key name = origin).
func (c checkpoint) verifySignatures(vs note.Verifiers) ([]string, error) {
	n, err := note.Open(c.Note, vs)
	if err != nil {
		return nil, err
	}
	var signers []string
	byOrigin := false
	for _, s := range n.Sigs {
		signers = append(signers, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
		if s.Name == c.Origin {
			byOrigin = true
		}
	}
	if !byOrigin {
		return signers, fmt.Errorf("no verified signature by a key named %q (the checkpoint's origin)", c.Origin)
	}
	if text, _ := noteText(c.Note); n.Text != string(text) {
		return signers, fmt.Errorf("signed text differs from the parsed body")
	}
	return signers, nil
}

// parseVerifierKeys parses note verifier keys, one per line; blank lines
// and lines starting with '#' are ignored.
func parseVerifierKeys(vkeys []byte) (note.Verifiers, []string, error) {
	var list []note.Verifier
	var names []string
	for _, l := range strings.Split(string(vkeys), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		v, err := note.NewVerifier(l)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrBadVerifierKey, err)
		}
		list = append(list, v)
		names = append(names, l)
	}
	if len(list) == 0 {
		return nil, nil, fmt.Errorf("%w: no verifier keys given", ErrBadVerifierKey)
	}
	return note.VerifierList(list...), names, nil
}

// CheckpointInfo describes a checkpoint in a Transcript or Inclusion.
type CheckpointInfo struct {
	Origin  string    `json:"origin"`
	Size    int64     `json:"size"`
	Root    tlog.Hash `json:"root"`
	Time    string    `json:"time,omitempty"`    // the anchor line's time: when it was anchored, by the signer's clock; not signed
	Signers []string  `json:"signers,omitempty"` // "name+keyhash" of the verified signatures
}

func (c checkpoint) info(signers []string) CheckpointInfo {
	return CheckpointInfo{Origin: c.Origin, Size: c.Size, Root: c.Root, Time: c.Time, Signers: signers}
}
