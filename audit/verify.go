package audit

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/mod/sumdb/tlog"
)

// Problem kinds reported by VerifyFile.
const (
	KindHashMismatch   = "hash_mismatch"   // the record's bytes do not hash to its stored hash: this record was altered
	KindChainBreak     = "chain_break"     // prev_hash differs from the stored hash of the record before it
	KindNonCanonical   = "non_canonical"   // the stored bytes are not a canonical record encoding
	KindSeqGap         = "seq_gap"         // records are missing before this one (Seq = first missing)
	KindSeqMismatch    = "seq_mismatch"    // the record's seq field differs from its key
	KindTimeRegression = "time_regression" // the record's time is earlier than the previous record's
	KindMissingHash    = "missing_hash"    // a record has no entry in the hashes bucket
	KindMissingRecord  = "missing_record"  // the hashes bucket has an entry with no record
	KindHeadMismatch   = "head_mismatch"   // meta's head (seq, hash) is not the last record
	KindBadKey         = "bad_key"         // a records key is not 8 bytes
	// KindInputDocMissing: a stored decision input refers to a principal
	// that is not in the input-docs bucket, or not under its digest (inputs
	// are context, not evidence: Inputs reports it, VerifyFile does not).
	KindInputDocMissing = "input_doc_missing"
	// KindVersionRegression: the record's format version is lower than the
	// previous record's. An older custos cannot open a log whose head is of a
	// newer version, so no legitimate writer produces this.
	KindVersionRegression = "version_regression"
	// KindTreeMismatch: a stored Merkle tree hash (tlog bucket) is missing
	// or differs from the hash recomputed from the record (a leaf) or from
	// its two stored children (an interior node), or a record lies outside
	// a fully built tree. Seq is the record whose append stored the hash;
	// Expected is the stored hash, Got the recomputed one (like
	// hash_mismatch). Detail names the stored hash index and level.
	KindTreeMismatch = "tree_mismatch"
	// KindTreeRootMismatch: the root of the stored tree at meta tree_size
	// differs from the root recomputed from the records 1..tree_size, or
	// cannot be recomputed because records are missing, or the tree
	// storage is inconsistent. Seq is the tree size; Expected is the
	// stored root, Got the recomputed one (hex). Any checkpoint signed for
	// that size commits to Expected, so the records are not the ones it
	// signed.
	KindTreeRootMismatch = "tree_root_mismatch"
)

// Problem is one integrity failure found by VerifyFile, with its evidence.
// Hashes are lowercase hex; seqs are decimal.
type Problem struct {
	Seq      uint64 `json:"seq"`      // the record concerned
	Kind     string `json:"kind"`     // one of the Kind* constants
	Expected string `json:"expected"` // what the invariants require
	Got      string `json:"got"`      // what is stored
	Detail   string `json:"detail"`   // explanation; never record contents
}

func (p Problem) String() string {
	s := fmt.Sprintf("seq %d: %s", p.Seq, p.Kind)
	if p.Expected != "" || p.Got != "" {
		s += fmt.Sprintf(": expected %s, got %s", p.Expected, p.Got)
	}
	if p.Detail != "" {
		s += " (" + p.Detail + ")"
	}
	return s
}

// Summary is the outcome of a verification.
type Summary struct {
	Records  uint64 `json:"records"`   // records walked
	HeadSeq  uint64 `json:"head_seq"`  // key of the last record (0 if none)
	HeadHash string `json:"head_hash"` // stored hash of the last record (ZeroHash if none)
	Problems int    `json:"problems"`  // problems reported; 0 means the log verified
	// Records by format version, counting records that decode: a log
	// migrated in place has RecordsV1 older records followed by RecordsV2
	// newer ones.
	RecordsV1 uint64 `json:"records_v1"`
	RecordsV2 uint64 `json:"records_v2"`
	// TreeSize is the number of records the Merkle tree covers (meta
	// tree_size): HeadSeq for every log written or opened read-write by
	// this version, less (0) for a log written before the tree existed and
	// not yet migrated (read-only). TreeRoot is the root of the tree of
	// the first TreeSize records recomputed from the records themselves
	// (the RFC 6962 empty root when TreeSize is 0); when Problems is 0 it
	// equals the stored root, i.e. what TreeHead returns and checkpoints
	// sign. Its JSON form is base64, as in checkpoints.
	TreeSize int64     `json:"tree_size"`
	TreeRoot tlog.Hash `json:"tree_root"`
}

// verifyChunk is the number of records examined per read transaction: long
// read transactions block bbolt's remapping of a growing file.
const verifyChunk = 1024

// VerifyFile checks the audit log at path, opened read-only under a shared
// file lock (ErrLocked if a writer holds it for DefaultTimeout). It walks
// every record, in chunks of read transactions, and calls report for EVERY
// problem found (report may be nil):
//
//   - non_canonical: the bytes do not Decode;
//   - hash_mismatch: HashRecord(bytes) differs from the hashes bucket entry;
//   - chain_break: prev_hash differs from the stored hash of the previous
//     record (ZeroHash for the first);
//   - seq_gap, seq_mismatch, bad_key: keys not 1, 2, 3, ... or not matching
//     the record's seq;
//   - time_regression: a record earlier than the one before it;
//   - version_regression: a record of a lower format version than the one
//     before it (v1 records may be followed by v2 records, not the reverse);
//   - missing_hash, missing_record: the two buckets disagree;
//   - head_mismatch: meta's head is not the last record;
//   - tree_mismatch: a stored Merkle tree hash is missing or differs from
//     the leaf hash of its record or from the hash of its stored children,
//     or a record lies outside a fully built tree;
//   - tree_root_mismatch: the stored tree's root at meta tree_size is not
//     the root recomputed from records 1..tree_size (or cannot be).
//
// A log written before the Merkle tree existed and not yet migrated (opened
// only read-only since) verifies its chain; Summary.TreeSize < HeadSeq says
// the tree is not built and no tree problem is reported for it.
//
// The error is non-nil only when the file cannot be read (I/O, lock, ctx,
// or a file that is not an audit log at all).
func VerifyFile(ctx context.Context, path string, report func(Problem)) (Summary, error) {
	return VerifyFilePaced(ctx, path, report, nil)
}

// VerifyFilePaced is VerifyFile with pace, if not nil, called after each
// chunk of records as Log.VerifyPaced calls it (progress, throttling).
//
// A segment file that bbolt cannot open because it is damaged (empty,
// truncated, neither meta page valid: KindSegmentDamaged) is a problem
// reported, not an error: no record of the log can then be walked, and
// the summary is empty.
func VerifyFilePaced(ctx context.Context, path string, report func(Problem), pace func(ctx context.Context, n int) error) (Summary, error) {
	segs, err := openFileSegments(path)
	if err != nil {
		return reportDamaged(err, report)
	}
	defer closeSegments(segs)
	return verifySegments(ctx, segs, report, pace)
}

// openFileSegments opens every segment of the log at path read-only: the
// sealed ones in order, then the live one. A sealed name that is the live
// file itself is left out: a seal stopped after step 5 linked the sealed
// file and before the next segment replaced it at the live path leaves
// it so (the next read-write open completes the seal), and the segment
// was walked twice, its records counted twice and a segment_missing
// problem reported for a log that had lost nothing (VerifyFile), its
// records exported twice (ExportFile).
//
// Every damaged segment file is named (damagedSegments), not only the
// first one met.
func openFileSegments(path string) ([]*segment, error) {
	db, err := openReadOnly(path)
	if err != nil {
		return nil, damagedSegments(path, "", err)
	}
	live := &segment{path: path, db: db}
	sealed, err := openSealedAll(path, "", DefaultTimeout)
	if err != nil {
		live.close()
		return nil, damagedSegments(path, "", err)
	}
	if n := len(sealed); n > 0 {
		a, errA := os.Stat(sealed[n-1].path)
		b, errB := os.Stat(path)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			sealed[n-1].close()
			sealed = sealed[:n-1]
		}
	}
	return append(sealed, live), nil
}

// reportDamaged reports err as the verification's problems if it names
// damaged segment files (KindSegmentDamaged): one problem per file (a
// *DamagedError names several); any other error is returned.
func reportDamaged(err error, report func(Problem)) (Summary, error) {
	var de *DamagedError
	var ce *CorruptError
	files := []*CorruptError{}
	switch {
	case errors.As(err, &de):
		files = de.Files
	case errors.As(err, &ce) && ce.Kind == KindSegmentDamaged:
		files = append(files, ce)
	default:
		return Summary{}, err
	}
	for _, f := range files {
		report(Problem{Kind: f.Kind, Expected: f.Expected, Got: f.Got, Detail: f.Detail})
	}
	return Summary{Problems: len(files)}, nil
}

func openReadOnly(path string) (*bolt.DB, error) { return openReadOnlyTimeout(path, DefaultTimeout) }

func openReadOnlyTimeout(path string, timeout time.Duration) (*bolt.DB, error) {
	// bbolt would create a missing file before noticing ReadOnly; refuse.
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout, OpenFile: openSegmentFile})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%w (waited %s)", ErrLocked, timeout)
		}
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	return db, nil
}

// errNotAuditLog is returned (wrapped in a *CorruptError) when a bucket of the
// layout is missing altogether.
func notAuditLog(detail string) error {
	return &CorruptError{Kind: KindHeadMismatch, Detail: "not an audit log: " + detail}
}

type verifier struct {
	report   func(Problem)
	sum      Summary
	expect   uint64    // next expected seq
	prevHash string    // stored hash of the previous record
	prevTime time.Time // time of the previous decodable record
	prevV    int       // format version of the previous decodable record
	haveTime bool

	// Merkle tree state. tree, treeSize, treeBuilt and metaHead are those of
	// the current read transaction.
	tree      *bolt.Bucket
	treeSize  int64
	treeBuilt bool
	metaHead  uint64
	// fr is the tree recomputed from the records alone: the roots of the
	// complete subtrees of the first fr.size leaves (a compact range).
	fr frontier
	// rootAt is fr's root when fr.size first equalled a transaction's
	// tree_size (a partially migrated, read-only log).
	rootAt     tlog.Hash
	rootAtSize int64
	// roots are the roots expected at some tree sizes (VerifyRange).
	roots map[int64]tlog.Hash
}

// frontier folds leaf hashes into the roots of the complete subtrees of
// the tree so far, one per set bit of size: the minimum state from which
// the RFC 6962 root follows.
type frontier struct {
	size   int64
	broken bool        // a leaf was out of order: the root cannot be recomputed
	level  []tlog.Hash // level[l]: the latest complete subtree of 2^l leaves
}

func (f *frontier) push(leaf tlog.Hash) {
	h, l := leaf, 0
	for ; f.size>>l&1 == 1; l++ {
		h = tlog.NodeHash(f.level[l], h)
	}
	if l == len(f.level) {
		f.level = append(f.level, h)
	} else {
		f.level[l] = h
	}
	f.size++
}

// root is the RFC 6962 root of the first f.size leaves: the complete
// subtrees combined right to left.
func (f *frontier) root() tlog.Hash {
	if f.size == 0 {
		h, _ := tlog.TreeHash(0, nil)
		return h
	}
	var h tlog.Hash
	first := true
	for l := 0; l < len(f.level); l++ {
		if f.size>>l&1 == 0 {
			continue
		}
		if first {
			h, first = f.level[l], false
		} else {
			h = tlog.NodeHash(f.level[l], h)
		}
	}
	return h
}

func (v *verifier) problem(p Problem) {
	v.sum.Problems++
	if v.report != nil {
		v.report(p)
	}
}

func (v *verifier) record(k, val, stored []byte) {
	v.sum.Records++
	if len(k) != 8 {
		v.problem(Problem{Seq: v.expect, Kind: KindBadKey, Got: hex.EncodeToString(k), Detail: "record key is not 8 bytes"})
		return
	}
	seq := binary.BigEndian.Uint64(k)
	if seq != v.expect {
		d := fmt.Sprintf("expected seq %d next, found %d", v.expect, seq)
		if seq > v.expect {
			d = fmt.Sprintf("records %d..%d missing", v.expect, seq-1)
		}
		v.problem(Problem{Seq: v.expect, Kind: KindSeqGap, Expected: fmt.Sprint(v.expect), Got: fmt.Sprint(seq), Detail: d})
	}
	computed := HashRecord(val)
	chainHash := computed
	switch {
	case stored == nil:
		v.problem(Problem{Seq: seq, Kind: KindMissingHash, Got: computed, Detail: "no hashes entry for this record"})
	case len(stored) != 32:
		v.problem(Problem{Seq: seq, Kind: KindHashMismatch, Expected: hex.EncodeToString(stored), Got: computed, Detail: "stored hash is not 32 bytes"})
	default:
		chainHash = hex.EncodeToString(stored)
		if chainHash != computed {
			v.problem(Problem{Seq: seq, Kind: KindHashMismatch, Expected: chainHash, Got: computed, Detail: "record bytes do not hash to the stored hash"})
		}
	}
	rec, err := Decode(val)
	if err != nil {
		v.problem(Problem{Seq: seq, Kind: KindNonCanonical, Detail: err.Error()})
	} else {
		if rec.Seq != seq {
			v.problem(Problem{Seq: seq, Kind: KindSeqMismatch, Expected: fmt.Sprint(seq), Got: fmt.Sprint(rec.Seq), Detail: "record's seq field differs from its key"})
		}
		if rec.PrevHash != v.prevHash {
			v.problem(Problem{Seq: seq, Kind: KindChainBreak, Expected: v.prevHash, Got: rec.PrevHash, Detail: "prev_hash is not the previous record's stored hash"})
		}
		if v.haveTime && rec.Time.Before(v.prevTime) {
			v.problem(Problem{Seq: seq, Kind: KindTimeRegression, Expected: ">= " + v.prevTime.Format(TimeLayout), Got: rec.Time.Format(TimeLayout)})
		}
		if v.haveTime && rec.V < v.prevV {
			v.problem(Problem{Seq: seq, Kind: KindVersionRegression, Expected: fmt.Sprintf("v >= %d", v.prevV), Got: fmt.Sprintf("v %d", rec.V), Detail: "format version lower than the previous record's"})
		}
		switch rec.V {
		case FormatVersion1:
			v.sum.RecordsV1++
		case FormatVersion2:
			v.sum.RecordsV2++
		}
		v.prevTime, v.prevV, v.haveTime = rec.Time, rec.V, true
	}
	v.treeRecord(seq, val)
	v.prevHash = chainHash
	v.expect = seq + 1
	v.sum.HeadSeq, v.sum.HeadHash = seq, chainHash
}

func (v *verifier) head(meta *bolt.Bucket) {
	s, h := meta.Get(metaHeadSeq), meta.Get(metaHeadHash)
	if len(s) != 8 || len(h) != 32 {
		v.problem(Problem{Seq: v.sum.HeadSeq, Kind: KindHeadMismatch, Detail: "meta head_seq or head_hash missing or malformed"})
		return
	}
	seq, hash := binary.BigEndian.Uint64(s), hex.EncodeToString(h)
	if seq != v.sum.HeadSeq || hash != v.sum.HeadHash {
		v.problem(Problem{
			Seq:      seq,
			Kind:     KindHeadMismatch,
			Expected: fmt.Sprintf("%d:%s", seq, hash),
			Got:      fmt.Sprintf("%d:%s", v.sum.HeadSeq, v.sum.HeadHash),
			Detail:   "meta head (seq:hash) is not the last stored record",
		})
	}
}

// treeState loads the transaction's Merkle tree storage into v.
func (v *verifier) treeState(tx *bolt.Tx, meta *bolt.Bucket) {
	v.tree, v.treeSize, v.treeBuilt = nil, 0, false
	if s := meta.Get(metaHeadSeq); len(s) == 8 {
		v.metaHead = binary.BigEndian.Uint64(s)
	}
	size, ok, err := readTreeSize(tx)
	if err != nil || !ok {
		return // reported once, at the end
	}
	v.tree, v.treeSize, v.treeBuilt = tx.Bucket(bucketTree), size, true
}

// treeGet returns stored hash index i of the current transaction.
func (v *verifier) treeGet(i int64) (tlog.Hash, bool) { return txHashReader{v.tree}.get(i) }

// treeRecord checks record seq against the Merkle tree: it folds the
// record's leaf hash into the recomputed tree and checks the stored hashes
// its append wrote, each against the record (the leaf) or against its two
// stored children (interior nodes), so that each problem is blamed on the
// record whose append stored the faulty hash.
func (v *verifier) treeRecord(seq uint64, val []byte) {
	n := int64(seq) - 1
	leaf := LeafHash(val)
	if !v.fr.broken && n == v.fr.size && seq != 0 {
		v.fr.push(leaf)
		v.checkRoot()
		if v.treeBuilt && v.fr.size == v.treeSize && v.rootAtSize != v.treeSize {
			v.rootAt, v.rootAtSize = v.fr.root(), v.fr.size
		}
	} else {
		v.fr.broken = true
	}
	if !v.treeBuilt || seq == 0 {
		return
	}
	if n >= v.treeSize {
		if v.treeSize >= int64(v.metaHead) {
			v.problem(Problem{Seq: seq, Kind: KindTreeMismatch, Expected: fmt.Sprintf("seq <= tree size %d", v.treeSize), Got: fmt.Sprint(seq), Detail: "record is not in the Merkle tree"})
		}
		return
	}
	base := tlog.StoredHashIndex(0, n)
	m := bits.TrailingZeros64(uint64(n + 1))
	want, wantOK := leaf, true
	var prev tlog.Hash
	prevOK := false
	for j := 0; j <= m; j++ {
		idx := base + int64(j)
		what := "the record's leaf hash"
		if j > 0 {
			what = "the hash of its stored children"
			left, okL := v.treeGet(tlog.StoredHashIndex(j-1, n>>uint(j-1)-1))
			want, wantOK = tlog.NodeHash(left, prev), okL && prevOK
		}
		got, ok := v.treeGet(idx)
		switch {
		case !ok:
			w := ""
			if wantOK {
				w = fmtHash(want[:])
			}
			v.problem(Problem{Seq: seq, Kind: KindTreeMismatch, Got: w, Detail: fmt.Sprintf("stored tree hash %d (level %d) missing or malformed", idx, j)})
		case wantOK && got != want:
			v.problem(Problem{Seq: seq, Kind: KindTreeMismatch, Expected: fmtHash(got[:]), Got: fmtHash(want[:]), Detail: fmt.Sprintf("stored tree hash %d (level %d) is not %s", idx, j, what)})
		}
		prev, prevOK = got, ok
	}
}

// treeEnd checks, in the transaction that saw the last record, that the
// stored tree's root at tree_size is the root recomputed from the records
// and that the tree storage holds nothing past tree_size.
func (v *verifier) treeEnd(tx *bolt.Tx) {
	v.sum.TreeRoot, _ = tlog.TreeHash(0, nil)
	size, ok, err := readTreeSize(tx)
	if err != nil {
		v.problem(Problem{Kind: KindTreeRootMismatch, Detail: err.(*CorruptError).Detail})
		return
	}
	if !ok {
		return // a log written before the tree existed
	}
	v.sum.TreeSize = size
	tree := tx.Bucket(bucketTree)
	if k, _ := tree.Cursor().Last(); k != nil {
		if len(k) != 8 || int64(binary.BigEndian.Uint64(k)) >= tlog.StoredHashCount(size) {
			v.problem(Problem{Seq: uint64(size) + 1, Kind: KindTreeMismatch, Expected: fmt.Sprintf("stored hash indexes < %d", tlog.StoredHashCount(size)), Got: fmt.Sprintf("%x", k), Detail: "stored tree hashes past the tree size"})
		}
	}
	if size == 0 {
		return
	}
	stored, err := tlog.TreeHash(size, txHashReader{tree})
	var recomputed tlog.Hash
	known := false
	switch {
	case !v.fr.broken && v.fr.size == size:
		recomputed, known = v.fr.root(), true
	case v.rootAtSize == size:
		recomputed, known = v.rootAt, true
	}
	switch {
	case err != nil:
		got := ""
		if known {
			got = fmtHash(recomputed[:])
		}
		v.problem(Problem{Seq: uint64(size), Kind: KindTreeRootMismatch, Got: got, Detail: "the stored tree is incomplete: its root cannot be computed"})
	case !known:
		v.problem(Problem{Seq: uint64(size), Kind: KindTreeRootMismatch, Expected: fmtHash(stored[:]), Detail: fmt.Sprintf("records 1..%d are not all present in order: the root cannot be recomputed from them", size)})
	case stored != recomputed:
		v.problem(Problem{Seq: uint64(size), Kind: KindTreeRootMismatch, Expected: fmtHash(stored[:]), Got: fmtHash(recomputed[:]), Detail: "the stored tree's root is not the root of the records"})
	}
	if known {
		v.sum.TreeRoot = recomputed
	}
}

// seekAfter positions c on the first key strictly after after (the first key
// when after is nil).
func seekAfter(c *bolt.Cursor, after []byte) ([]byte, []byte) {
	if after == nil {
		return c.First()
	}
	k, v := c.Seek(after)
	if k != nil && bytes.Equal(k, after) {
		k, v = c.Next()
	}
	return k, v
}
