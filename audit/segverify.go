package audit

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"
)

// Verification across segments. The verifier's state (next seq, previous
// hash, time and version, the recomputed tree) carries from one segment
// into the next; at each segment's start the segment's own account of its
// predecessor (meta base_*, its frontier copies) is checked against that
// state, and at each sealed segment's end its seal is checked against the
// records.

// Problem kinds of segmented logs.
const (
	// KindSegmentMissing: the segments do not follow each other: a
	// segment is missing (or a foreign one is in place). Seq is the first
	// record not found in any segment; Expected and Got name the segment
	// and first seq expected and found.
	KindSegmentMissing = "segment_missing"
	// KindSealMismatch: a sealed segment's seal does not describe its
	// records: its last seq, head hash or tree root (Seq) differ from the
	// records', or its predecessor head differs from the predecessor's
	// records, or the seal is missing or malformed.
	KindSealMismatch = "seal_mismatch"
)

// enter checks, in segment s's first transaction, s's account of its
// predecessor against the verifier's state after the previous segment (or
// the start of the log): base seq and hash, and the frontier copies in its
// tree. On a gap it reports segment_missing and continues from the
// segment's own account, so that the segment is still checked alone.
func (v *verifier) enter(tx *bolt.Tx, s *segment) {
	meta := tx.Bucket(bucketMeta)
	m, err := readSegmentMeta(meta)
	if err != nil {
		v.problem(Problem{Seq: v.expect, Kind: KindHeadMismatch, Detail: err.(*CorruptError).Detail})
		return
	}
	baseHash := hex.EncodeToString(m.baseHash[:])
	if m.baseSeq == 0 {
		baseHash = ZeroHash
	}
	if m.baseSeq != v.expect-1 {
		v.problem(Problem{Seq: v.expect, Kind: KindSegmentMissing, Expected: fmt.Sprintf("segment from seq %d", v.expect),
			Got: fmt.Sprintf("segment %d from seq %d", m.no, m.baseSeq+1), Detail: "records are missing between segments (a segment is missing)"})
		v.seedSegment(tx, m)
		return
	}
	if baseHash != v.prevHash {
		v.problem(Problem{Seq: m.baseSeq + 1, Kind: KindChainBreak, Expected: v.prevHash, Got: baseHash,
			Detail: fmt.Sprintf("segment %d's recorded predecessor head is not the previous record's hash", m.no)})
	}
	if m.baseSeq > 0 && !v.fr.broken && v.fr.size == int64(m.baseSeq) {
		if root := v.fr.root(); root != m.baseRoot {
			v.problem(Problem{Seq: m.baseSeq, Kind: KindSealMismatch, Expected: fmtHash(root[:]), Got: fmtHash(m.baseRoot[:]),
				Detail: fmt.Sprintf("segment %d's recorded predecessor tree root is not the root of the records before it", m.no)})
		}
		v.checkFrontier(tx, m)
	}
}

// checkFrontier compares the frontier copies in a segment's tree with the
// frontier the verifier recomputed.
func (v *verifier) checkFrontier(tx *bolt.Tx, m segmentMeta) {
	tree := tx.Bucket(bucketTree)
	if tree == nil {
		v.problem(Problem{Seq: m.baseSeq, Kind: KindTreeMismatch, Detail: fmt.Sprintf("segment %d has no tree", m.no)})
		return
	}
	n := int64(m.baseSeq)
	for l := range v.fr.level {
		if n>>uint(l)&1 == 0 {
			continue
		}
		start := n >> uint(l+1) << uint(l+1)
		idx := tlog.StoredHashIndex(l, start>>uint(l))
		got, ok := txHashReader{tree}.get(idx)
		if !ok || got != v.fr.level[l] {
			v.problem(Problem{Seq: m.baseSeq, Kind: KindTreeMismatch, Expected: fmtHash(v.fr.level[l][:]), Got: fmtHash(got[:]),
				Detail: fmt.Sprintf("segment %d's copy of stored tree hash %d (level %d) is not the predecessor's", m.no, idx, l)})
		}
	}
}

func (r txHashReader) get(idx int64) (tlog.Hash, bool) {
	var h tlog.Hash
	b := r.b.Get(treeKey(idx))
	if len(b) != tlog.HashSize {
		return h, false
	}
	copy(h[:], b)
	return h, true
}

// seedSegment sets the verifier up to check segment m alone, from its own
// account of its predecessor: base seq, hash and time, and the frontier
// copies in its tree, which must hash to its recorded base root.
func (v *verifier) seedSegment(tx *bolt.Tx, m segmentMeta) {
	v.expect = m.baseSeq + 1
	v.prevHash = ZeroHash
	if m.baseSeq > 0 {
		v.prevHash = hex.EncodeToString(m.baseHash[:])
	}
	v.prevTime, v.haveTime = m.baseTime, !m.baseTime.IsZero()
	v.prevV = 0
	v.fr = frontier{}
	if m.baseSeq == 0 {
		return
	}
	tree := tx.Bucket(bucketTree)
	if tree == nil {
		v.fr = frontier{broken: true}
		v.problem(Problem{Seq: m.baseSeq, Kind: KindTreeMismatch, Detail: fmt.Sprintf("segment %d has no tree", m.no)})
		return
	}
	f, err := frontierAt(int64(m.baseSeq), txHashReader{tree})
	if err != nil {
		v.fr = frontier{broken: true}
		v.problem(Problem{Seq: m.baseSeq, Kind: KindTreeMismatch, Detail: fmt.Sprintf("segment %d's copies of its predecessor's tree hashes are missing", m.no)})
		return
	}
	v.fr = f
	if root := f.root(); root != m.baseRoot {
		v.problem(Problem{Seq: m.baseSeq, Kind: KindSealMismatch, Expected: fmtHash(m.baseRoot[:]), Got: fmtHash(root[:]),
			Detail: fmt.Sprintf("segment %d's copies of its predecessor's tree hashes do not hash to its recorded base root", m.no)})
	}
}

// sealEnd checks, after a sealed segment's last record, its seal (nil: the
// segment was live when the walk began) against what the records gave.
func (v *verifier) sealEnd(s *segment, seal *Seal) {
	if seal == nil {
		return
	}
	if seal.Last != v.sum.HeadSeq || seal.HeadHash != v.sum.HeadHash {
		v.problem(Problem{Seq: seal.Last, Kind: KindSealMismatch, Expected: fmt.Sprintf("%d:%s", seal.Last, seal.HeadHash),
			Got: fmt.Sprintf("%d:%s", v.sum.HeadSeq, v.sum.HeadHash), Detail: fmt.Sprintf("segment %d's seal is not its last record", s.no)})
	}
	if !v.fr.broken && v.fr.size == int64(seal.Last) {
		if root := v.fr.root(); root != seal.Root {
			v.problem(Problem{Seq: seal.Last, Kind: KindSealMismatch, Expected: fmtHash(seal.Root[:]), Got: fmtHash(root[:]),
				Detail: fmt.Sprintf("segment %d's sealed tree root is not the root of the records", s.no)})
		}
	}
	// The seal's time line states the period of its records (an auditor
	// reads it to find the segment of a time): it must be theirs. A record
	// that is missing or does not decode has been reported already.
	_ = s.view(func(tx *bolt.Tx) error {
		records := tx.Bucket(bucketRecords)
		if records == nil {
			return nil
		}
		for _, c := range []struct {
			which string
			seq   uint64
			want  time.Time
		}{{"first", seal.First, seal.FirstTime}, {"last", seal.Last, seal.LastTime}} {
			rec, err := Decode(records.Get(seqKey(c.seq)))
			if err == nil && !rec.Time.Equal(c.want) {
				v.problem(Problem{Seq: c.seq, Kind: KindSealMismatch, Expected: c.want.UTC().Format(TimeLayout), Got: rec.Time.Format(TimeLayout),
					Detail: fmt.Sprintf("segment %d's seal time of its %s record is not that record's time", s.no, c.which)})
			}
		}
		return nil
	})
}

// segmentWalk walks one segment's records (and then its hashes) with a
// verifier; it can stop at the end and resume later (sealing walks the
// live segment without the writer's lock, then its tail under it).
type segmentWalk struct {
	v         *verifier
	s         *segment
	entered   bool
	alone     bool // seed from the segment's own account instead of entering
	afterRec  []byte
	afterHash []byte
	// pace, if set, is called after each chunk of records, outside its
	// transaction, with the number of records checked (throttling).
	pace func(ctx context.Context, n int) error
}

// run walks from where the walk stopped to the segment's current end,
// then checks the end (meta head, stored tree root, seal) and looks for
// stored hashes without records.
func (w *segmentWalk) run(ctx context.Context) error {
	v := w.v
	// A segment sealed while it is walked may have records past the walk's
	// end: only a seal there from the start is checked.
	sealed := w.s.seal.Load()
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := 0
		err := w.s.view(func(tx *bolt.Tx) error {
			meta, records, hashes := tx.Bucket(bucketMeta), tx.Bucket(bucketRecords), tx.Bucket(bucketHashes)
			if meta == nil || records == nil || hashes == nil {
				return notAuditLog("bucket missing")
			}
			if f := meta.Get(metaFormat); string(f) != formatMagic {
				return notAuditLog("unknown storage format")
			}
			if !w.entered {
				w.entered = true
				if w.alone {
					m, err := readSegmentMeta(meta)
					if err != nil {
						return err
					}
					v.seedSegment(tx, m)
					v.sum.HeadSeq, v.sum.HeadHash = m.baseSeq, v.prevHash
				} else {
					v.enter(tx, w.s)
				}
			}
			v.treeState(tx, meta)
			c := records.Cursor()
			k, val := seekAfter(c, w.afterRec)
			for ; k != nil && n < verifyChunk; n++ {
				v.record(k, val, hashes.Get(k))
				w.afterRec = append(w.afterRec[:0], k...)
				k, val = c.Next()
			}
			if k == nil {
				// The end is checked in the same transaction as the last
				// records, so a concurrent Append cannot cause a false alarm.
				v.head(meta)
				v.treeEnd(tx)
				done = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		if w.pace != nil && n > 0 {
			if err := w.pace(ctx, n); err != nil {
				return err
			}
		}
	}
	v.sealEnd(w.s, sealed)
	// Hashes without records.
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := w.s.view(func(tx *bolt.Tx) error {
			records, hashes := tx.Bucket(bucketRecords), tx.Bucket(bucketHashes)
			c := hashes.Cursor()
			k, _ := seekAfter(c, w.afterHash)
			for n := 0; k != nil && n < verifyChunk; n++ {
				if records.Get(k) == nil {
					var seq uint64
					if len(k) == 8 {
						seq = binary.BigEndian.Uint64(k)
					}
					v.problem(Problem{Seq: seq, Kind: KindMissingRecord, Detail: "stored hash without a record"})
				}
				w.afterHash = append(w.afterHash[:0], k...)
				k, _ = c.Next()
			}
			done = k == nil
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// verifySegments verifies segs (sealed in order, then the live one) as one
// log, from record 1; pace (nil: none) is segmentWalk.pace.
func verifySegments(ctx context.Context, segs []*segment, report func(Problem), pace func(ctx context.Context, n int) error) (Summary, error) {
	v := &verifier{report: report, expect: 1, prevHash: ZeroHash}
	v.sum.HeadHash = ZeroHash
	for _, s := range segs {
		w := &segmentWalk{v: v, s: s, pace: pace}
		if err := w.run(ctx); err != nil {
			return v.sum, err
		}
	}
	return v.sum, nil
}

// VerifySegment verifies one segment file alone, from its predecessor's
// head as the segment records it: every record, its stored tree hashes,
// the copies of its predecessor's tree hashes (against its recorded base
// root) and, when it is sealed, its seal. The file is opened read-only. A
// sealed segment is checked in full; problems are reported as VerifyFile
// reports them.
func VerifySegment(ctx context.Context, path string, report func(Problem)) (Summary, error) {
	db, err := openReadOnlyTimeout(path, DefaultTimeout)
	if err != nil {
		return Summary{}, err
	}
	defer db.Close()
	s := &segment{path: path, db: db}
	var sealText []byte
	err = db.View(func(tx *bolt.Tx) error {
		if err := checkFormat(tx); err != nil {
			return err
		}
		m, err := readSegmentMeta(tx.Bucket(bucketMeta))
		s.no, s.base, sealText = m.no, m.baseSeq, m.seal
		return err
	})
	if err != nil {
		return Summary{}, err
	}
	v := &verifier{report: report}
	if sealText != nil {
		seal, err := ParseSeal(sealText, nil)
		if err != nil {
			v.problem(Problem{Seq: s.base + 1, Kind: KindSealMismatch, Detail: err.Error()})
		} else {
			s.seal.Store(&seal)
		}
	}
	w := &segmentWalk{v: v, s: s, alone: true}
	err = w.run(ctx)
	return v.sum, err
}
