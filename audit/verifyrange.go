package audit

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"
)

// KindCheckpointMismatch: the root of the tree of records 1..Seq,
// recomputed from the records, is not the root the caller expected at
// tree size Seq (RangeOptions.Roots: an anchored, signed checkpoint). The
// records are not the ones that checkpoint signed: a fork. Expected is the
// expected root, Got the recomputed one (hex).
const KindCheckpointMismatch = "checkpoint_mismatch"

// RangeOptions choose what Log.VerifyRange checks.
type RangeOptions struct {
	// From and To bound the records checked, inclusive: 1 <= From <= To
	// <= the head seq when the walk starts (else ErrOutOfRange).
	From, To uint64
	// Roots are tree roots the caller trusts, by tree size (the anchored
	// checkpoints). Every size S in From-1..To is checked against the
	// root recomputed from the records (problem checkpoint_mismatch);
	// other sizes are ignored. nil checks none.
	Roots map[int64]tlog.Hash
	// Chunk is the number of records per read transaction; 0 means 1024.
	// Long read transactions block bbolt's remapping while the writer
	// appends: keep it small.
	Chunk int
	// Pace, if not nil, is called after each read transaction, outside
	// it, with the number of records that transaction checked: a caller
	// throttles the walk by sleeping there. An error stops the walk and
	// is returned.
	Pace func(ctx context.Context, n int) error
}

// Pacer returns a RangeOptions.Pace that holds a walk to rate records per
// second, cumulatively (after done records it waits until start +
// done/rate, start being the time Pacer was called), or nil for rate <= 0
// (unthrottled).
func Pacer(rate int) func(ctx context.Context, n int) error {
	if rate <= 0 {
		return nil
	}
	start, done := time.Now(), 0
	return func(ctx context.Context, n int) error {
		done += n
		d := time.Until(start.Add(time.Duration(float64(done) / float64(rate) * float64(time.Second))))
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
}

// VerifyRange checks records From..To of the open log, next to the writer,
// in chunks of short read transactions, and calls report (which may be
// nil) for every problem found. It checks what VerifyFile checks of each
// record (canonical encoding, stored hash, chain, seq, time and version
// order, the stored Merkle tree hashes its append wrote), and:
//
//   - the chain into the range: record From's prev_hash is record From-1's
//     stored hash, and record From-1 hashes to it;
//   - the tree into the range: the recomputation starts from the stored
//     hashes of the complete subtrees of the tree of size From-1, which
//     are checked against Roots[From-1] when given;
//   - the stored root of the tree of size To is the root recomputed from
//     the range's records (tree_root_mismatch), and so is every root in
//     Roots for a size in the range (checkpoint_mismatch);
//   - meta's head names record To when To is the head (head_mismatch).
//
// With From = 1 and Roots from anchored checkpoints, this proves records
// 1..To against the stored tree and the checkpoints; with From = L (the
// last anchored size) and Roots[L], it proves the suffix L..To extends
// the anchored tree. Records past To (appended meanwhile) are not read.
// Unlike VerifyFile it does not look for stored hashes without records
// past To, nor for stored tree hashes past the head.
//
// Summary: Records, HeadSeq and HeadHash are those of the range; TreeSize
// is To and TreeRoot the root recomputed at To (the empty root if it
// cannot be). The error is non-nil when the range is out of bounds, the
// log is closed, ctx is done, Pace failed or the file is not an audit log.
func (l *Log) VerifyRange(ctx context.Context, ro RangeOptions, report func(Problem)) (Summary, error) {
	if ro.From < 1 || ro.To < ro.From {
		return Summary{}, fmt.Errorf("%w: records %d..%d", ErrOutOfRange, ro.From, ro.To)
	}
	chunk := ro.Chunk
	if chunk <= 0 {
		chunk = verifyChunk
	}
	v := &verifier{report: report, expect: ro.From, prevHash: ZeroHash, roots: ro.Roots}
	v.sum.HeadHash = ZeroHash
	err := l.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return notAuditLog("bucket missing")
		}
		h, err := readHead(meta)
		if err != nil {
			return err
		}
		if ro.To > h.seq {
			return fmt.Errorf("%w: records %d..%d requested, head is %d", ErrOutOfRange, ro.From, ro.To, h.seq)
		}
		return nil
	})
	if err != nil {
		return v.sum, err
	}
	// The chain and the tree into the range, from the segment holding
	// record From-1 (its tree has every hash the tree of From-1 needs).
	if err := l.viewSeq(max(ro.From-1, 1), func(tx *bolt.Tx, _ *segment) error {
		if tx.Bucket(bucketRecords) == nil || tx.Bucket(bucketHashes) == nil {
			return notAuditLog("bucket missing")
		}
		v.seed(tx, ro.From)
		return nil
	}); err != nil {
		return v.sum, err
	}
	segs := l.segments()
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].base < ro.From {
			continue // ends before the range
		}
		if s.base >= ro.To {
			break
		}
		last := i+1 == len(segs) || segs[i+1].base >= ro.To // holds record To
		done, err := l.rangeSegment(ctx, s, ro, chunk, v, last)
		if err != nil || done {
			return v.sum, err
		}
	}
	return v.sum, nil
}

// rangeSegment runs VerifyRange over the part of the range in segment s;
// last says s holds record To (its end is then checked). It reports
// whether the range's end was checked.
func (l *Log) rangeSegment(ctx context.Context, s *segment, ro RangeOptions, chunk int, v *verifier, last bool) (bool, error) {
	var after []byte
	entered := false
	// A seal there before the walk began (no record can follow it) is
	// checked once the walk has passed its last record, as Verify does.
	sealed := s.seal.Load()
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		n, done := 0, false
		err := l.viewIn(s, func(tx *bolt.Tx) error {
			meta, records, hashes := tx.Bucket(bucketMeta), tx.Bucket(bucketRecords), tx.Bucket(bucketHashes)
			if meta == nil || records == nil || hashes == nil {
				return notAuditLog("bucket missing")
			}
			c := records.Cursor()
			var k, val []byte
			if !entered {
				entered = true
				if s.base >= ro.From {
					v.enter(tx, s) // the range crosses into s
				}
				k, val = c.Seek(seqKey(max(ro.From, s.base+1)))
			} else {
				k, val = seekAfter(c, after)
			}
			v.treeState(tx, meta)
			for ; k != nil && n < chunk; n++ {
				if len(k) == 8 && binary.BigEndian.Uint64(k) > ro.To {
					k = nil
					break
				}
				v.record(k, val, hashes.Get(k))
				after = append(after[:0], k...)
				k, val = c.Next()
			}
			if k == nil || len(k) == 8 && binary.BigEndian.Uint64(k) > ro.To {
				done = true
				if last {
					// The end is checked in the transaction that saw the
					// last record of the range.
					v.rangeEnd(tx, meta, ro.To)
				}
			}
			return nil
		})
		if err != nil {
			return false, err
		}
		if ro.Pace != nil && n > 0 {
			if err := ro.Pace(ctx, n); err != nil {
				return false, err
			}
		}
		if done {
			if sealed != nil && sealed.Last <= ro.To {
				v.sealEnd(s, sealed)
			}
			return last, nil
		}
	}
}

// seed sets up v, inside the first transaction, to continue the chain and
// the tree after record from-1: its stored hash, time and version, and the
// stored hashes of the complete subtrees of the tree of size from-1.
func (v *verifier) seed(tx *bolt.Tx, from uint64) {
	prev := from - 1
	if prev == 0 {
		v.checkRoot()
		return
	}
	k := seqKey(prev)
	val, stored := tx.Bucket(bucketRecords).Get(k), tx.Bucket(bucketHashes).Get(k)
	switch {
	case val == nil:
		v.problem(Problem{Seq: prev, Kind: KindSeqGap, Detail: "the record before the range is missing"})
	case len(stored) != 32:
		v.problem(Problem{Seq: prev, Kind: KindMissingHash, Got: HashRecord(val), Detail: "no 32-byte hashes entry for the record before the range"})
	default:
		v.prevHash = hex.EncodeToString(stored)
		if got := HashRecord(val); got != v.prevHash {
			v.problem(Problem{Seq: prev, Kind: KindHashMismatch, Expected: v.prevHash, Got: got, Detail: "record bytes do not hash to the stored hash"})
		}
		if rec, err := Decode(val); err == nil {
			v.prevTime, v.prevV, v.haveTime = rec.Time, rec.V, true
		} else {
			v.problem(Problem{Seq: prev, Kind: KindNonCanonical, Detail: err.Error()})
		}
	}
	size, ok, err := readTreeSize(tx)
	if err == nil && ok && size >= int64(prev) {
		v.fr, err = frontierAt(int64(prev), txHashReader{tx.Bucket(bucketTree)})
	}
	if err != nil || !ok || size < int64(prev) {
		v.fr = frontier{broken: true}
		v.problem(Problem{Seq: prev, Kind: KindTreeRootMismatch, Detail: fmt.Sprintf("the stored tree of size %d cannot be read: the range's tree cannot be recomputed", prev)})
		return
	}
	v.checkRoot()
}

// frontierAt is the frontier of the tree of size n read from stored
// hashes: level l (for each set bit l of n) is the complete subtree of 2^l
// leaves starting at leaf n>>(l+1)<<(l+1). Its root is tlog.TreeHash(n).
func frontierAt(n int64, r tlog.HashReader) (frontier, error) {
	f := frontier{size: n, level: make([]tlog.Hash, bits.Len64(uint64(n)))}
	for l := range f.level {
		if n>>uint(l)&1 == 0 {
			continue
		}
		start := n >> uint(l+1) << uint(l+1)
		h, err := r.ReadHashes([]int64{tlog.StoredHashIndex(l, start>>uint(l))})
		if err != nil {
			return frontier{}, err
		}
		f.level[l] = h[0]
	}
	return f, nil
}

// checkRoot compares the recomputed tree at its current size with the
// root the caller expects there, if any.
func (v *verifier) checkRoot() {
	if v.fr.broken {
		return
	}
	want, ok := v.roots[v.fr.size]
	if !ok {
		return
	}
	if got := v.fr.root(); got != want {
		v.problem(Problem{Seq: uint64(v.fr.size), Kind: KindCheckpointMismatch, Expected: fmtHash(want[:]), Got: fmtHash(got[:]),
			Detail: fmt.Sprintf("the records 1..%d do not hash to the expected (anchored checkpoint) root", v.fr.size)})
	}
}

// rangeEnd checks, in the transaction that saw the range's last record,
// that no record of the range is missing at its end, that the stored root
// at to is the recomputed one and, when to is the head, that meta names it.
func (v *verifier) rangeEnd(tx *bolt.Tx, meta *bolt.Bucket, to uint64) {
	if v.expect <= to {
		v.problem(Problem{Seq: v.expect, Kind: KindSeqGap, Expected: fmt.Sprint(v.expect), Detail: fmt.Sprintf("records %d..%d missing", v.expect, to)})
		v.fr.broken = true
	}
	if v.metaHead == to {
		v.head(meta)
	}
	v.sum.TreeSize = int64(to)
	v.sum.TreeRoot, _ = tlog.TreeHash(0, nil)
	known := !v.fr.broken && v.fr.size == int64(to)
	var recomputed tlog.Hash
	if known {
		recomputed = v.fr.root()
		v.sum.TreeRoot = recomputed
	}
	size, ok, err := readTreeSize(tx)
	if err != nil || !ok || size < int64(to) {
		v.problem(Problem{Seq: to, Kind: KindTreeRootMismatch, Detail: fmt.Sprintf("the stored tree does not cover record %d", to)})
		return
	}
	stored, err := tlog.TreeHash(int64(to), txHashReader{tx.Bucket(bucketTree)})
	switch {
	case err != nil:
		got := ""
		if known {
			got = fmtHash(recomputed[:])
		}
		v.problem(Problem{Seq: to, Kind: KindTreeRootMismatch, Got: got, Detail: "the stored tree is incomplete: its root cannot be computed"})
	case !known:
		v.problem(Problem{Seq: to, Kind: KindTreeRootMismatch, Expected: fmtHash(stored[:]), Detail: fmt.Sprintf("records of the range up to %d are not all present in order: the root cannot be recomputed from them", to)})
	case stored != recomputed:
		v.problem(Problem{Seq: to, Kind: KindTreeRootMismatch, Expected: fmtHash(stored[:]), Got: fmtHash(recomputed[:]), Detail: "the stored tree's root is not the root of the records"})
	}
}
