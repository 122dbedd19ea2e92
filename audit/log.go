package audit

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Defaults for Options.
const (
	DefaultMinBatchDelay = 0
	DefaultMaxBatchDelay = 5 * time.Millisecond
	DefaultMaxBatchSize  = 256
	DefaultTimeout       = 2 * time.Second
)

// Bucket and meta key names of the storage layout (see doc.go).
var (
	bucketRecords = []byte("records")
	bucketHashes  = []byte("hashes")
	bucketMeta    = []byte("meta")

	metaFormat   = []byte("format")    // formatMagic
	metaNode     = []byte("node")      // Options.Node of the process that created the file
	metaHeadSeq  = []byte("head_seq")  // 8-byte big-endian seq of the last record (0 when empty)
	metaHeadHash = []byte("head_hash") // 32-byte hash of the last record (zeros when empty)
	metaHeadTime = []byte("head_time") // TimeLayout text of the last record's time ("" when empty)
)

// formatMagic is the value of meta/format: the storage layout version.
const formatMagic = "custos-audit-v1"

// Options configures Open. The zero value of each field is documented.
type Options struct {
	Node   string           // required unless ReadOnly: written into every record
	Logger *slog.Logger     // operational log (never record contents); nil = discard
	Now    func() time.Time // clock; nil = time.Now
	// The group-commit window of a batch that gathers while a commit runs
	// lies between MinBatchDelay (while the process gets CPU promptly) and
	// MaxBatchDelay (while its goroutines queue for CPU); see
	// groupcommit.go. Equal values give a fixed window.
	MinBatchDelay time.Duration // 0 = DefaultMinBatchDelay, 0: commit when the running commit ends
	MaxBatchDelay time.Duration // 0 = DefaultMaxBatchDelay
	MaxBatchSize  int           // records per commit at most; 0 = DefaultMaxBatchSize
	Timeout       time.Duration // file-lock wait; 0 = DefaultTimeout, then ErrLocked
	// ReadOnly opens an existing log under a shared file lock, for
	// verification, export and proofs next to other readers: Append fails
	// with ErrReadOnly, nothing is written, and a log written before the
	// Merkle tree existed is not migrated (the tree methods return
	// ErrNoTree). false = read-write, exclusive lock, migration on Open.
	ReadOnly bool

	// Rollover (read-write only; see roll.go and doc.go, "Segments"). A
	// background goroutine seals the live segment and starts the next one
	// once the live segment holds at least one record and any of these
	// says so. All zero: the log is one segment that only grows.
	RollSize    int64         // the live file has reached this many bytes; 0 = no size limit
	RollPeriod  time.Duration // its first record is this old (by Now); 0 = no age limit
	RollMonthly bool          // it began in an earlier calendar month (UTC) than Now's
	// ArchiveDir, if set, receives every sealed segment and its seal note
	// (copied, fsynced, compared by SHA-256, then removed from the sealed
	// directory); the sealed directory records where it is, so readers
	// given only the live path find archived segments. "" = keep sealed
	// segments in SealedDir(path).
	ArchiveDir string
	// SealVerifyRate bounds the records per second that sealing verifies
	// before it takes the writer's lock (step 1 of roll.go), so that the
	// seal of a large segment does not compete with serving for CPU; the
	// few records appended meanwhile are verified unthrottled. 0 =
	// unthrottled.
	SealVerifyRate int
	// SealSigner, if set, signs each seal note (golang.org/x/mod/sumdb/note,
	// as checkpoints are signed). nil = seal notes are unsigned.
	SealSigner note.Signer
	// OnSegmentFailure, if set, is called (from the rollover goroutine)
	// each time a step of the background rollover fails and is left to a
	// retry: SegmentSeal (the seal, retried; appends continue in the live
	// segment), SegmentSealNote (the seal note, written at the next open)
	// or SegmentArchive (the archive copy, retried every 5 minutes). The
	// failure is logged as well; the hook lets an operator alert on it.
	OnSegmentFailure func(step string)
}

// The steps of the rollover whose failures Options.OnSegmentFailure hears
// of.
const (
	SegmentSeal     = "seal"
	SegmentSealNote = "seal_note"
	SegmentArchive  = "archive"
)

func (o *Options) validate() error {
	if o.Node == "" && !o.ReadOnly {
		return errors.New("audit: Options.Node is required")
	}
	if !utf8.ValidString(o.Node) {
		return errors.New("audit: Options.Node is not valid UTF-8")
	}
	if o.MinBatchDelay < 0 || o.MaxBatchDelay < 0 || o.MaxBatchSize < 0 || o.Timeout < 0 || o.RollSize < 0 || o.RollPeriod < 0 || o.SealVerifyRate < 0 {
		return errors.New("audit: negative Options value")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxBatchDelay == 0 {
		o.MaxBatchDelay = max(DefaultMaxBatchDelay, o.MinBatchDelay)
	}
	if o.MinBatchDelay == 0 {
		o.MinBatchDelay = min(DefaultMinBatchDelay, o.MaxBatchDelay)
	}
	if o.MinBatchDelay > o.MaxBatchDelay {
		return fmt.Errorf("audit: Options.MinBatchDelay %v exceeds MaxBatchDelay %v", o.MinBatchDelay, o.MaxBatchDelay)
	}
	if o.MaxBatchSize == 0 {
		o.MaxBatchSize = DefaultMaxBatchSize
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return nil
}

// Log is an open audit log: the single writer of its live segment, and the
// reader of every segment (see segment.go). It is safe for concurrent use;
// concurrent Appends are group-committed.
type Log struct {
	path string // the live segment
	opts Options
	log  *slog.Logger

	mu       sync.RWMutex // guards closed; Append holds it shared while registering in inflight
	closed   bool
	inflight sync.WaitGroup // Append goroutines still waiting for their commit
	commits  *batcher       // group commit of Appends

	// segMu guards segs and the batcher's file: Append holds it shared
	// over its commit, sealing exclusively while it switches files.
	segMu  sync.RWMutex
	segs   []*segment // sealed segments in order, then the live one
	broken error      // latched when sealing failed half-way: appends refused

	headMu    sync.Mutex
	headSeq   uint64
	headHash  string
	liveFirst time.Time // time of the live segment's first record (zero: none yet)

	roll   roller
	unlock func() // releases the lock file (lockLog), after the segments are closed

	principalSums principalSums // SHA-256 of recent inputs' principals (splitInput)
}

// Open opens the audit log whose live segment is path, creating it (mode
// 0600) if missing, together with its sealed segments (SealedDir(path) and
// Options.ArchiveDir). It takes the exclusive lock of LockFile(path), held
// until Close, then bbolt's exclusive file lock on the live segment,
// waiting at most opts.Timeout for each before failing with ErrLocked;
// sealed segments are opened read-only. On an existing file it checks that
// the head record decodes, hashes to the stored head hash and sits at the
// stored head seq, and that the segments follow each other (numbers, first
// seqs, predecessor heads); otherwise it fails with a *CorruptError
// (errors.Is ErrCorrupt). A seal interrupted by a crash is completed (or,
// before its commit point, rolled back) first; see roll.go.
//
// A log written before the Merkle tree existed is then upgraded in place:
// Open builds the tree's stored hashes from the stored records, in write
// transactions of 10,000 records that each advance meta tree_size (an
// interrupted migration resumes at the next Open), logging progress through
// opts.Logger. Records are not touched. With opts.ReadOnly, Open takes
// shared locks instead (of the lock file only if it exists), refuses a
// missing file, writes nothing, does not migrate and does not complete a
// seal; segments that do not follow each other are then reported by
// Verify rather than refused.
func Open(path string, opts Options) (*Log, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	l := &Log{path: path, opts: opts, log: opts.Logger}
	// The lock file first: nothing below may look at, let alone complete
	// a seal of, files another process is writing (loglock_unix.go).
	unlock, err := lockLog(path, !opts.ReadOnly, opts.Timeout)
	if err != nil {
		return nil, err
	}
	l.unlock = unlock
	ok := false
	defer func() {
		if !ok {
			unlock()
		}
	}()
	// A damaged segment file stops the open at the first one met; every
	// one is named (damagedSegments).
	if !opts.ReadOnly {
		if err := l.recoverSeal(); err != nil {
			return nil, damagedSegments(path, opts.ArchiveDir, err)
		}
		if err := readOnlySealed(path, opts.Timeout); err != nil {
			return nil, damagedSegments(path, opts.ArchiveDir, err)
		}
	}
	if opts.ReadOnly {
		// bbolt would create a missing file before noticing ReadOnly.
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
	}
	sealed, err := openSealedAll(path, opts.ArchiveDir, opts.Timeout)
	if err != nil {
		return nil, damagedSegments(path, opts.ArchiveDir, err)
	}
	live, err := l.openLive(path, len(sealed) == 0)
	if err != nil {
		closeSegments(sealed)
		return nil, damagedSegments(path, opts.ArchiveDir, err)
	}
	l.segs = append(sealed, live)
	l.commits = &batcher{db: live.db, tail: live.tail, copies: &live.copies, minDelay: opts.MinBatchDelay, maxDelay: opts.MaxBatchDelay, maxSize: opts.MaxBatchSize}
	fail := func(err error) (*Log, error) {
		closeSegments(l.segs)
		return nil, err
	}
	var seq uint64
	var hash string
	var lm segmentMeta
	err = live.view(func(tx *bolt.Tx) error {
		var err error
		if seq, hash, err = checkHead(tx); err != nil {
			return err
		}
		lm, err = readSegmentMeta(tx.Bucket(bucketMeta))
		if err != nil {
			return err
		}
		if lm.seal != nil {
			return &CorruptError{Seq: seq, Kind: KindSealMismatch, Detail: "the live segment is sealed; open it read-write to complete the seal"}
		}
		if seq > lm.baseSeq {
			rec, err := Decode(tx.Bucket(bucketRecords).Get(seqKey(lm.baseSeq + 1)))
			if err != nil {
				return &CorruptError{Seq: lm.baseSeq + 1, Kind: KindNonCanonical, Detail: "the live segment's first record does not decode"}
			}
			l.liveFirst = rec.Time
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	live.no, live.base = lm.no, lm.baseSeq
	baseHash := ZeroHash
	if lm.baseSeq > 0 {
		baseHash = hex.EncodeToString(lm.baseHash[:])
	}
	if breaks := continuity(sealed, lm.no, lm.baseSeq, baseHash); len(breaks) > 0 && !opts.ReadOnly {
		p := breaks[0]
		if hint := archiveHint(path, opts.ArchiveDir); hint != "" {
			p.Detail += "; " + hint
		}
		if hint := supersededHint(sealed, lm.no); hint != "" {
			p.Detail += "; " + hint
		}
		return fail(&CorruptError{Seq: p.Seq, Kind: p.Kind, Expected: p.Expected, Got: p.Got, Detail: p.Detail + "; run audit verify"})
	}
	if !opts.ReadOnly && opts.ArchiveDir != "" {
		// Recorded only once the segments were found where it says: a
		// new --audit-archive-dir that lacks them must not overwrite the
		// record of where they are.
		if err := l.notePointer(); err != nil {
			return fail(err)
		}
	}
	l.headSeq, l.headHash = seq, hash
	if opts.ReadOnly {
		var size int64
		var built bool
		err = live.view(func(tx *bolt.Tx) (err error) {
			size, built, err = readTreeSize(tx)
			return err
		})
		if err != nil {
			return fail(err)
		}
		if !built || size != int64(seq) {
			l.log.Warn("audit Merkle tree not built for every record; open read-write to migrate", "tree_size", size, "head_seq", seq)
		}
	} else if err := l.migrateTree(context.Background()); err != nil {
		return fail(err)
	}
	l.log.Info("audit log opened", "head_seq", seq, "segment", lm.no, "sealed_segments", len(sealed), "node", opts.Node, "read_only", opts.ReadOnly)
	if !opts.ReadOnly {
		l.roll.start(l)
	}
	ok = true
	return l, nil
}

// openLive opens the live segment file. A new file is created only as the
// log's first segment: when sealed segments exist the live one is created
// by sealing, and a missing one is corruption.
func (l *Log) openLive(path string, first bool) (*segment, error) {
	if !l.opts.ReadOnly && !first {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, &CorruptError{Kind: KindSegmentMissing, Detail: "the live segment is missing while sealed segments exist"}
		}
	}
	o := bolt.Options{
		Timeout:      l.opts.Timeout,
		FreelistType: bolt.FreelistMapType,
		ReadOnly:     l.opts.ReadOnly,
		OpenFile:     openSegmentFile,
	}
	var db *bolt.DB
	var tail *zeroTail
	var err error
	if l.opts.ReadOnly {
		db, err = bolt.Open(path, 0o600, &o)
	} else {
		db, tail, err = openLiveDB(path, o, l.log) // mapsize.go
	}
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%w (waited %s)", ErrLocked, l.opts.Timeout)
		}
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	// Durability: every commit fsyncs. These are bbolt's defaults; they are
	// set explicitly so that nobody "optimizes" them away.
	db.NoSync = false
	db.NoGrowSync = false
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		l.log.Warn("audit log file is accessible to group or others", "mode", fi.Mode().Perm().String())
	}
	if l.opts.ReadOnly {
		err = db.View(checkFormat)
	} else {
		err = db.Update(l.initTx)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &segment{path: path, db: db, tail: tail}, nil
}

// live returns the live segment.
func (l *Log) live() *segment {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return l.segs[len(l.segs)-1]
}

// segments returns the segments in order, the live one last.
func (l *Log) segments() []*segment {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return slices.Clone(l.segs)
}

// segmentOf returns the segment holding record seq (the last one whose
// base is below seq).
func (l *Log) segmentOf(seq uint64) *segment {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return segmentOf(l.segs, seq)
}

func segmentOf(segs []*segment, seq uint64) *segment {
	i, _ := slices.BinarySearchFunc(segs, seq, func(s *segment, seq uint64) int {
		if s.base < seq {
			return -1
		}
		return 1
	})
	return segs[max(i-1, 0)]
}

// checkFormat checks, in a read-only transaction, that the file holds an
// audit log of the known storage format.
func checkFormat(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return notAuditLog("meta bucket missing")
	}
	if f := meta.Get(metaFormat); string(f) != formatMagic {
		return &CorruptError{Kind: KindHeadMismatch, Expected: formatMagic, Got: string(f), Detail: "unknown storage format"}
	}
	if tx.Bucket(bucketRecords) == nil || tx.Bucket(bucketHashes) == nil {
		return &CorruptError{Kind: KindHeadMismatch, Detail: "records or hashes bucket missing"}
	}
	return nil
}

// initTx creates the buckets and meta of a new file, and checks the format
// of an existing one.
func (l *Log) initTx(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta != nil {
		return checkFormat(tx)
	}
	if tx.Bucket(bucketRecords) != nil || tx.Bucket(bucketHashes) != nil || tx.Bucket(bucketTree) != nil {
		return &CorruptError{Kind: KindHeadMismatch, Detail: "meta bucket missing"}
	}
	var err error
	if meta, err = tx.CreateBucket(bucketMeta); err != nil {
		return err
	}
	if _, err = tx.CreateBucket(bucketRecords); err != nil {
		return err
	}
	if _, err = tx.CreateBucket(bucketHashes); err != nil {
		return err
	}
	if _, err = tx.CreateBucket(bucketTree); err != nil {
		return err
	}
	for _, kv := range [][2][]byte{
		{metaFormat, []byte(formatMagic)},
		{metaNode, []byte(l.opts.Node)},
		{metaHeadSeq, make([]byte, 8)},
		{metaHeadHash, make([]byte, 32)},
		{metaHeadTime, []byte{}},
		{metaTreeSize, make([]byte, 8)},
	} {
		if err := meta.Put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	l.log.Info("audit log created", "node", l.opts.Node)
	return nil
}

// seqKey is the storage key of seq: 8 bytes, big-endian.
func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

// head is the meta bucket's view of the last record.
type head struct {
	seq  uint64
	hash [32]byte
	time time.Time // zero when the log is empty
}

func readHead(meta *bolt.Bucket) (head, error) {
	var h head
	s, hh, ht := meta.Get(metaHeadSeq), meta.Get(metaHeadHash), meta.Get(metaHeadTime)
	if len(s) != 8 || len(hh) != 32 {
		return h, &CorruptError{Kind: KindHeadMismatch, Detail: "meta head_seq or head_hash missing or malformed"}
	}
	h.seq = binary.BigEndian.Uint64(s)
	copy(h.hash[:], hh)
	if len(ht) > 0 {
		t, err := time.Parse(TimeLayout, string(ht))
		if err != nil {
			return h, &CorruptError{Seq: h.seq, Kind: KindHeadMismatch, Detail: "meta head_time malformed"}
		}
		h.time = t
	}
	return h, nil
}

// checkHead verifies, inside tx, that the meta head names the last record,
// that this record decodes canonically and that it hashes to the stored
// head hash and to its entry in the hashes bucket. It returns the head.
func checkHead(tx *bolt.Tx) (uint64, string, error) {
	meta, records, hashes := tx.Bucket(bucketMeta), tx.Bucket(bucketRecords), tx.Bucket(bucketHashes)
	h, err := readHead(meta)
	if err != nil {
		return 0, "", err
	}
	headHex := hex.EncodeToString(h.hash[:])
	k, v := records.Cursor().Last()
	sm, err := readSegmentMeta(meta)
	if err != nil {
		return 0, "", err
	}
	if h.seq == sm.baseSeq {
		baseHex := ZeroHash
		if sm.baseSeq > 0 {
			baseHex = hex.EncodeToString(sm.baseHash[:])
		}
		if k != nil || headHex != baseHex {
			return 0, "", &CorruptError{Seq: h.seq, Kind: KindHeadMismatch, Expected: "empty segment", Got: "records present", Detail: "meta says the segment holds no record"}
		}
		return h.seq, headHex, nil
	}
	if k == nil || len(k) != 8 || binary.BigEndian.Uint64(k) != h.seq {
		got := "no records"
		if len(k) == 8 {
			got = fmt.Sprintf("seq %d", binary.BigEndian.Uint64(k))
		}
		return 0, "", &CorruptError{Seq: h.seq, Kind: KindHeadMismatch, Expected: fmt.Sprintf("seq %d", h.seq), Got: got, Detail: "last stored record is not the meta head"}
	}
	rec, err := Decode(v)
	if err != nil {
		return 0, "", &CorruptError{Seq: h.seq, Kind: KindNonCanonical, Detail: "head record does not decode"}
	}
	if rec.Seq != h.seq {
		return 0, "", &CorruptError{Seq: h.seq, Kind: KindSeqMismatch, Expected: fmt.Sprint(h.seq), Got: fmt.Sprint(rec.Seq)}
	}
	if rec.Hash != headHex {
		return 0, "", &CorruptError{Seq: h.seq, Kind: KindHashMismatch, Expected: headHex, Got: rec.Hash, Detail: "head record does not hash to meta head_hash"}
	}
	if stored := hashes.Get(k); hex.EncodeToString(stored) != headHex {
		return 0, "", &CorruptError{Seq: h.seq, Kind: KindHashMismatch, Expected: hex.EncodeToString(stored), Got: rec.Hash, Detail: "head record does not hash to its stored hash"}
	}
	if !rec.Time.Equal(h.time) {
		return 0, "", &CorruptError{Seq: h.seq, Kind: KindHeadMismatch, Expected: rec.Time.Format(TimeLayout), Got: h.time.UTC().Format(TimeLayout), Detail: "meta head_time differs from the head record's time"}
	}
	return h.seq, headHex, nil
}

// appendTx is the body of one Append inside a (possibly batched) write
// transaction. bbolt may run it several times (a batch that fails is retried,
// and a failing function is rerun alone), so everything it derives — seq,
// time, prev_hash, hash, the Merkle tree's stored hashes — is computed from
// the transaction's own view of the head and of the tree, and its only
// effects are writes to tx and to *out, which the caller reads only after
// Batch returned nil.
func (l *Log) appendTx(tx *bolt.Tx, e *Entry, input storedForm, eventID string, out *Record) error {
	meta, records, hashes, tree := tx.Bucket(bucketMeta), tx.Bucket(bucketRecords), tx.Bucket(bucketHashes), tx.Bucket(bucketTree)
	if meta == nil || records == nil || hashes == nil || tree == nil {
		return &CorruptError{Kind: KindHeadMismatch, Detail: "bucket missing"}
	}
	if meta.Get(metaSeal) != nil {
		return &CorruptError{Kind: KindSealMismatch, Detail: "append to a sealed segment refused"}
	}
	h, err := readHead(meta)
	if err != nil {
		return err
	}
	// The tree covers exactly the records (Open migrated it): leaf h.seq is
	// the new record.
	if ts := meta.Get(metaTreeSize); len(ts) != 8 || binary.BigEndian.Uint64(ts) != h.seq {
		return &CorruptError{Seq: h.seq + 1, Kind: KindTreeRootMismatch, Expected: fmt.Sprintf("tree size %d", h.seq), Got: fmt.Sprintf("%x", ts), Detail: "meta tree_size is not the head seq"}
	}
	seq := h.seq + 1
	key := seqKey(seq)
	// Append-only: never overwrite. A record past the head means the meta
	// and the records disagree; refuse to write.
	if records.Get(key) != nil || hashes.Get(key) != nil {
		return &CorruptError{Seq: seq, Kind: KindHeadMismatch, Detail: "a record already exists past the meta head"}
	}
	now := l.opts.Now().UTC()
	if now.Before(h.time) {
		now = h.time // clocks go backwards; the log does not
	}
	if y := now.Year(); y < 1 || y > 9999 {
		return fmt.Errorf("audit: clock out of range (year %d)", y)
	}
	r := Record{
		V:        FormatVersion,
		Entry:    *e,
		EventID:  eventID,
		Seq:      seq,
		Time:     now,
		Node:     l.opts.Node,
		PrevHash: hex.EncodeToString(h.hash[:]),
	}
	r.Input = nil // context, not evidence: stored aside below, never encoded
	canon := Encode(r)
	sum := hashRaw(canon)
	r.Hash = hex.EncodeToString(sum[:])

	// Sequential keys only ever append: pack pages full.
	records.FillPercent = 1.0
	hashes.FillPercent = 1.0
	if err := records.Put(key, canon); err != nil {
		return err
	}
	if err := hashes.Put(key, sum[:]); err != nil {
		return err
	}
	if len(e.Input) > 0 {
		if err := putInput(tx, key, input); err != nil {
			return err
		}
	}
	// Merkle leaf seq-1 and the interior nodes it completes.
	if tree.Get(treeKey(tlog.StoredHashIndex(0, int64(h.seq)))) != nil {
		return &CorruptError{Seq: seq, Kind: KindTreeMismatch, Detail: "a stored tree hash already exists past the tree size"}
	}
	if err := putStoredHashes(tree, int64(h.seq), canon); err != nil {
		return err
	}
	if err := meta.Put(metaTreeSize, key); err != nil {
		return err
	}
	if err := meta.Put(metaHeadSeq, seqKey(seq)); err != nil {
		return err
	}
	if err := meta.Put(metaHeadHash, sum[:]); err != nil {
		return err
	}
	if err := meta.Put(metaHeadTime, []byte(now.Format(TimeLayout))); err != nil {
		return err
	}
	*out = r
	return nil
}

// Append validates e, assigns it an event id, and appends it as the next
// record, in format version FormatVersion with e.Keys sorted (see
// Entry.Keys; the caller's slice is not modified). Entries with an empty
// Action, an unknown Outcome, a string that is not valid UTF-8, or Keys
// holding an empty or duplicate identifier fail with ErrBadEntry and nothing
// is written. Append returns only once the record is durably committed
// (bbolt commit with fsync), or with an error, in which case the caller must
// release nothing for the audited request.
//
// Concurrent Appends share commits (group commit, Options.MaxBatchDelay).
// If ctx ends before the commit outcome is known, Append returns ctx's error
// at once; the record may still be committed afterwards (an audited request
// that was not served is harmless; the converse never happens).
func (l *Log) Append(ctx context.Context, e Entry) (Record, error) {
	if l.opts.ReadOnly {
		return Record{}, ErrReadOnly
	}
	if err := validateEntry(&e); err != nil {
		return Record{}, err
	}
	e = cloneEntry(e) // the commit may outlive the caller's wait (ctx)
	if err := sortKeys(&e); err != nil {
		return Record{}, err
	}
	if err := ctx.Err(); err != nil {
		return Record{}, fmt.Errorf("audit: append not attempted: %w", err)
	}
	id, err := uuid.NewRandom()
	if err != nil {
		return Record{}, fmt.Errorf("audit: event id: %w", err)
	}
	eventID := id.String()

	// The stored form of the input (a shared principal split off and
	// hashed) depends on the input alone: computed here, once, outside the
	// single-writer transaction.
	input := splitInput(e.Input, l.principalSums.sum)

	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return Record{}, ErrClosed
	}
	l.inflight.Add(1)
	l.mu.RUnlock()

	type result struct {
		rec Record
		err error
	}
	done := make(chan result, 1)
	var rec Record // written by appendTx, read by finish: both on the batcher's goroutine
	finish := func(err error) {
		defer l.inflight.Done() // Close waits for this even when the caller stopped waiting
		if err != nil {
			err = l.liveError(err)
			l.log.Error("audit append failed", "event_id", eventID, "err", err)
			done <- result{err: fmt.Errorf("audit: append: %w", err)}
			return
		}
		l.noteHead(rec)
		done <- result{rec: rec}
	}
	// The segment is held (segMu, shared) from here until the batch that
	// holds this record has committed: a roll (segMu, exclusive) never
	// switches the file under a pending record. The batcher's goroutine
	// releases it, which sync.RWMutex allows.
	l.segMu.RLock()
	if err := l.broken; err != nil {
		l.segMu.RUnlock()
		finish(err)
	} else {
		l.commits.submit(func(tx *bolt.Tx) error {
			return l.appendTx(tx, &e, input, eventID, &rec)
		}, func(err error) { l.segMu.RUnlock(); finish(err) })
	}
	select {
	case res := <-done:
		return res.rec, res.err
	case <-ctx.Done():
		select {
		case res := <-done:
			return res.rec, res.err
		default:
		}
		l.log.Warn("audit append abandoned by caller before commit", "event_id", eventID)
		return Record{}, fmt.Errorf("audit: append not confirmed: %w", ctx.Err())
	}
}

// liveError names, in err, a file error of the live segment's bbolt
// handle, the live segment's file as it is called now: a segment that a
// seal created was opened as P.next and renamed to P, and its handle
// keeps the first name (a file that is gone, or from the next seal's
// step 3 on, another segment).
func (l *Log) liveError(err error) error {
	if pe, ok := err.(*fs.PathError); ok && pe.Path == l.path+nextSuffix {
		return &fs.PathError{Op: pe.Op, Path: l.path, Err: pe.Err}
	}
	return err
}

func (l *Log) noteHead(r Record) {
	l.headMu.Lock()
	if r.Seq > l.headSeq {
		l.headSeq, l.headHash = r.Seq, r.Hash
	}
	if l.liveFirst.IsZero() {
		l.liveFirst = r.Time
	}
	l.headMu.Unlock()
	l.roll.notify()
}

// Commits returns how many group commits (write transactions of Appends)
// this Log has started since Open; with Head it gives the mean number of
// records per commit over an interval (the load harness prints it).
func (l *Log) Commits() uint64 {
	l.commits.mu.Lock()
	defer l.commits.mu.Unlock()
	return l.commits.commits
}

// Broken returns the error a seal that failed half-way latched (Append
// refuses every record with it until a restart settles the seal), or nil.
// The server's readiness reports it, so that a load balancer stops sending
// requests that could only be refused.
func (l *Log) Broken() error {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return l.broken
}

// Head returns the seq and hash of the last record committed through this
// Log (or found at Open): (0, ZeroHash) for an empty log.
func (l *Log) Head() (seq uint64, hash string) {
	l.headMu.Lock()
	defer l.headMu.Unlock()
	return l.headSeq, l.headHash
}

// Close waits for Appends in flight to finish, then closes the file and
// releases the lock. Appends after Close fail with ErrClosed. Closing twice
// is a no-op.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.roll.stop()
	l.roll.mu.Lock() // a Roll in progress finishes first
	defer l.roll.mu.Unlock()
	l.inflight.Wait()
	l.segMu.Lock()
	defer l.segMu.Unlock()
	err := closeSegments(l.segs)
	l.unlock()
	if err != nil {
		return fmt.Errorf("audit: close: %w", err)
	}
	l.log.Info("audit log closed")
	return nil
}

// Verify runs the VerifyFile checks on every segment of the open log,
// concurrently with Appends (each chunk is its own read transaction).
func (l *Log) Verify(ctx context.Context, report func(Problem)) (Summary, error) {
	return l.VerifyPaced(ctx, report, nil)
}

// VerifyPaced is Verify with pace, if not nil, called after each chunk of
// records, outside its read transaction, with the number of records the
// chunk checked (as RangeOptions.Pace): a caller counts the records
// walked there (progress) or throttles. An error stops the walk and is
// returned.
//
// The walk holds l.mu shared (Close waits for it) while it reads, and
// releases it while pace runs: a pace that rests (an auditor's walk beside
// a serving server) does not hold Close for its rests. A walk that finds
// the log closed when pace returns stops with ErrClosed.
func (l *Log) VerifyPaced(ctx context.Context, report func(Problem), pace func(ctx context.Context, n int) error) (Summary, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return Summary{}, ErrClosed
	}
	if pace != nil {
		paced := pace
		pace = func(ctx context.Context, n int) error { return l.unheld(func() error { return paced(ctx, n) }) }
	}
	return verifySegments(ctx, l.segments(), report, pace)
}

// Export runs ExportFile on every segment of the open log. It holds l.mu
// shared while it reads a chunk, and releases it while it writes the
// chunk's output to w and calls filter.Progress (which may rest: a paced
// auditor's walk), so that neither a slow reader of w nor a rest holds
// Close; an export that finds the log closed then stops with ErrClosed.
func (l *Log) Export(ctx context.Context, w io.Writer, f Format, filter Filter) (int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	return exportSegments(ctx, l.segments(), w, f, filter, l.unheld)
}

// unheld runs fn with l.mu, which the caller holds shared, released, and
// takes it again. If the log was closed meanwhile it returns ErrClosed
// (fn's error first): the caller's walk stops there, before its next read,
// with an error that says so rather than a verdict on part of the log.
func (l *Log) unheld(fn func() error) error {
	l.mu.RUnlock()
	err := fn()
	l.mu.RLock()
	if err == nil && l.closed {
		err = fmt.Errorf("%w while it was being read (a walk stops when the log closes)", ErrClosed)
	}
	return err
}

var knownOutcomes = []string{OutcomeAllow, OutcomeDeny, OutcomeError}

// validateEntry enforces what Append requires of an Entry. Messages name the
// field, never its value.
func validateEntry(e *Entry) error {
	if e.Action == "" {
		return fmt.Errorf("%w: empty Action", ErrBadEntry)
	}
	if !slices.Contains(knownOutcomes, e.Outcome) {
		return fmt.Errorf("%w: unknown Outcome", ErrBadEntry)
	}
	strs := []struct {
		name string
		v    string
	}{
		{"Action", e.Action}, {"Reason", e.Reason}, {"Principal.Sub", e.Principal.Sub},
		{"Principal.ClientID", e.Principal.ClientID}, {"PurposeOfUse", e.PurposeOfUse},
		{"Session", e.Session}, {"Source", e.Source}, {"DecisionID", e.DecisionID},
		{"PolicyRevision", e.PolicyRevision},
	}
	for _, s := range strs {
		if !utf8.ValidString(s.v) {
			return fmt.Errorf("%w: %s is not valid UTF-8", ErrBadEntry, s.name)
		}
	}
	lists := []struct {
		name string
		v    []string
	}{
		{"Principal.Roles", e.Principal.Roles}, {"URIs", e.URIs}, {"Patients", e.Patients},
		{"Digests", e.Digests}, {"Obligations", e.Obligations},
	}
	for _, l := range lists {
		for _, v := range l.v {
			if !utf8.ValidString(v) {
				return fmt.Errorf("%w: an element of %s is not valid UTF-8", ErrBadEntry, l.name)
			}
		}
	}
	if err := validateInput(e.Input); err != nil {
		return err
	}
	for _, k := range e.Keys {
		if k == "" {
			return fmt.Errorf("%w: an element of Keys is empty", ErrBadEntry)
		}
		if !utf8.ValidString(k) {
			return fmt.Errorf("%w: an element of Keys is not valid UTF-8", ErrBadEntry)
		}
	}
	return nil
}

// sortKeys sorts e.Keys (a copy: see cloneEntry) into the canonical order and
// rejects duplicates. The result satisfies checkKeys.
func sortKeys(e *Entry) error {
	slices.Sort(e.Keys)
	if err := checkKeys(e.Keys); err != nil {
		return fmt.Errorf("%w: Keys has a duplicate identifier", ErrBadEntry)
	}
	return nil
}

func cloneEntry(e Entry) Entry {
	e.Principal.Roles = slices.Clone(e.Principal.Roles)
	e.URIs = slices.Clone(e.URIs)
	e.Patients = slices.Clone(e.Patients)
	e.Digests = slices.Clone(e.Digests)
	e.Obligations = slices.Clone(e.Obligations)
	e.Keys = slices.Clone(e.Keys)
	e.Input = slices.Clone(e.Input)
	return e
}
