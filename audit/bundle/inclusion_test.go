package bundle

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
)

func TestInclusionRealLog(t *testing.T) {
	ctx := context.Background()
	l := openRealLog(t, 21)
	k := newTestKey(t, testOrigin, 1)
	ck := checkpoints(t, k, l, 20)[0]
	vkeys := []byte(k.vkey)
	recs := map[uint64][]byte{}
	l.Records(ctx, 1, 21, func(s uint64, c []byte) error { recs[s] = bytes.Clone(c); return nil })

	for seq := uint64(1); seq <= 20; seq++ {
		in, err := InclusionProof(ctx, l, seq, ck)
		if err != nil {
			t.Fatalf("InclusionProof(%d): %v", seq, err)
		}
		js, err := in.JSON()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseInclusion(js)
		if err != nil {
			t.Fatalf("ParseInclusion: %v\n%s", err, js)
		}
		if err := CheckInclusion(back, recs[seq], vkeys); err != nil {
			t.Fatalf("CheckInclusion(%d): %v", seq, err)
		}
		if txt := in.Text(); !strings.Contains(txt, "seq "+strconv.FormatUint(seq, 10)) || !strings.Contains(txt, in.Checkpoint.Root.String()) {
			t.Errorf("text rendering:\n%s", txt)
		}
		// Another record, or a changed one, does not pass.
		otherSeq := seq%20 + 1
		if err := CheckInclusion(back, recs[otherSeq], vkeys); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckInclusion(%d) with record %d: %v", seq, otherSeq, err)
		}
		changed := bytes.Replace(recs[seq], []byte("user-"), []byte("usex-"), 1)
		if err := CheckInclusion(back, changed, vkeys); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckInclusion(%d) with changed record: %v", seq, err)
		}
	}

	in, err := InclusionProof(ctx, l, 7, ck)
	if err != nil {
		t.Fatal(err)
	}
	tamper := []struct {
		name string
		f    func(*Inclusion)
	}{
		{"proof hash", func(i *Inclusion) { i.Proof[0][0] ^= 1 }},
		{"proof dropped", func(i *Inclusion) { i.Proof = i.Proof[1:] }},
		{"leaf index", func(i *Inclusion) { i.Leaf = 7 }},
		{"seq", func(i *Inclusion) { i.Seq = 8; i.Leaf = 7 }},
		{"checkpoint size", func(i *Inclusion) { i.Checkpoint.Size = 21 }},
		{"checkpoint root", func(i *Inclusion) { i.Checkpoint.Root[0] ^= 1 }},
		{"anchor note", func(i *Inclusion) {
			i.Anchor = bytes.Replace(i.Anchor, []byte(`\n20\n`), []byte(`\n21\n`), 1)
		}},
		{"leaf hash", func(i *Inclusion) { i.LeafHash[3] ^= 1 }},
		{"record hash", func(i *Inclusion) { i.RecordHash = audit.ZeroHash }},
	}
	for _, tc := range tamper {
		c := in
		c.Proof = clone(in.Proof)
		c.Anchor = bytes.Clone(in.Anchor)
		tc.f(&c)
		if err := CheckInclusion(c, recs[7], vkeys); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: CheckInclusion = %v, want ErrInvalid", tc.name, err)
		}
	}
	if err := CheckInclusion(in, recs[7], []byte(newTestKey(t, testOrigin, 9).vkey)); !errors.Is(err, ErrInvalid) {
		t.Errorf("wrong key: %v", err)
	}
	if err := CheckInclusion(in, recs[7], nil); !errors.Is(err, ErrBadVerifierKey) {
		t.Errorf("no key: %v", err)
	}

	// Prover errors.
	if _, err := InclusionProof(ctx, l, 21, ck); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("seq beyond checkpoint: %v", err)
	}
	if _, err := InclusionProof(ctx, l, 0, ck); !errors.Is(err, ErrBadRange) {
		t.Errorf("seq 0: %v", err)
	}
	forged := k.anchorLine(t, testOrigin, 20, in.LeafHash)
	if _, err := InclusionProof(ctx, l, 3, forged); !errors.Is(err, ErrCheckpointMismatch) {
		t.Errorf("forged root: %v", err)
	}
	if _, err := InclusionProof(ctx, l, 3, []byte("{}")); !errors.Is(err, ErrBadCheckpoint) {
		t.Errorf("bad anchor: %v", err)
	}
}
