package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Sealed segments (see doc.go, "Segments", and docs/audit-format.md).
//
// The log is a sequence of bbolt files, its segments. The live segment is
// always the file given to Open (conventionally DATA_DIR/audit.db); sealed
// segments live in SealedDir(path) (DATA_DIR/audit.sealed/NNNNNN.db, N the
// segment number, 1-based) or, once archived, in the archive directory.
// Seq, chain hash and Merkle leaf index are global: segment k+1 starts at
// the record after segment k's last, its first record's prev_hash is
// segment k's head hash, and its tlog bucket starts with copies of the
// stored hashes of the complete subtrees of the tree at its base (the
// "frontier"), from which every later stored hash follows.

// Meta keys of a segment (absent in a log written before segments: segment
// 1, base 0).
var (
	metaSegment  = []byte("segment")   // 8-byte big-endian segment number
	metaBaseSeq  = []byte("base_seq")  // 8-byte big-endian seq of the predecessor's last record
	metaBaseHash = []byte("base_hash") // 32-byte chain hash of that record
	metaBaseTime = []byte("base_time") // TimeLayout text of that record's time
	metaBaseRoot = []byte("base_root") // 32-byte root of the tree of base_seq leaves
	metaSeal     = []byte("seal")      // the seal note (text, signed when a SealSigner is set)
)

const (
	sealedDirSuffix = ".sealed"
	nextSuffix      = ".next"       // the next live segment while a seal is under way
	archivePointer  = "archive-dir" // file in the sealed dir naming the archive directory
	sealHeader      = "custos audit seal v1"
)

var segmentName = regexp.MustCompile(`^([0-9]{6,})\.db$`)

// SealedDir is the directory holding the sealed segments of the log whose
// live segment is path: path without its ".db" extension plus ".sealed"
// (DATA_DIR/audit.db -> DATA_DIR/audit.sealed).
func SealedDir(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + sealedDirSuffix
}

// LockFile is the lock file of the log whose live segment is path
// (DATA_DIR/audit.db -> DATA_DIR/audit.db.lock): the writer holds an
// exclusive flock(2) on it from before Open looks at any file until Close,
// across every seal, since sealing renames the live segment's file (and
// with it bbolt's lock) away. Its content is empty and never read.
func LockFile(path string) string { return path + ".lock" }

// SegmentFile is the file name of sealed segment no (000001.db); its seal
// note sits beside it with the extension ".seal".
func SegmentFile(no uint64) string { return fmt.Sprintf("%06d.db", no) }

// Seal is what a sealed segment commits to: its records First..Last, the
// head of its predecessor (the chain hash of record First-1 and the root of
// the tree of First-1 leaves) and its own head (chain hash of record Last
// and the root of the tree of Last leaves). A segment verifies alone from
// its predecessor's head; consecutive seals are linked by Prev = the
// predecessor's Head.
type Seal struct {
	Segment   uint64
	First     uint64
	Last      uint64
	PrevHash  string    // chain hash (hex) of record First-1; ZeroHash for the first segment
	PrevRoot  tlog.Hash // root of the tree of First-1 leaves
	HeadHash  string    // chain hash (hex) of record Last
	Root      tlog.Hash // root of the tree of Last leaves
	FirstTime time.Time // time of record First
	LastTime  time.Time // time of record Last
}

// Body is the seal's note text:
//
//	custos audit seal v1
//	segment <no>
//	records <first> <last>
//	prev <first-1> <chain hash hex> <tree root base64>
//	head <last> <chain hash hex> <tree root base64>
//	time <first record time> <last record time>
func (s Seal) Body() []byte {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, "%s\nsegment %d\nrecords %d %d\nprev %d %s %s\nhead %d %s %s\ntime %s %s\n",
		sealHeader, s.Segment, s.First, s.Last,
		s.First-1, s.PrevHash, b64(s.PrevRoot[:]),
		s.Last, s.HeadHash, b64(s.Root[:]),
		s.FirstTime.UTC().Format(TimeLayout), s.LastTime.UTC().Format(TimeLayout))
}

// ParseSeal parses a seal note (body, optionally followed by signatures).
// With verifiers, the note must carry a signature one of them verifies
// (note.Open); without, signatures are not checked.
func ParseSeal(text []byte, verifiers note.Verifiers) (Seal, error) {
	body := text
	if verifiers != nil {
		n, err := note.Open(text, verifiers)
		if err != nil {
			return Seal{}, fmt.Errorf("audit: seal signature: %w", err)
		}
		body = []byte(n.Text)
	} else if i := bytes.Index(text, []byte("\n\n")); i >= 0 {
		body = text[:i+1]
	}
	// Scan leniently, then insist on the canonical form: the seal must
	// re-encode to exactly the bytes given.
	var s Seal
	var prevSeq, lastSeq uint64
	var prevRoot, headRoot, ft, lt string
	if _, err := fmt.Sscanf(string(body), sealHeader+"\nsegment %d\nrecords %d %d\nprev %d %s %s\nhead %d %s %s\ntime %s %s\n",
		&s.Segment, &s.First, &s.Last, &prevSeq, &s.PrevHash, &prevRoot, &lastSeq, &s.HeadHash, &headRoot, &ft, &lt); err != nil {
		return Seal{}, fmt.Errorf("audit: malformed seal: %v", err)
	}
	var err error
	for _, h := range []string{s.PrevHash, s.HeadHash} {
		if b, herr := hex.DecodeString(h); herr != nil || len(b) != 32 || hex.EncodeToString(b) != h {
			err = errors.New("bad chain hash")
		}
	}
	for _, r := range []struct {
		text string
		to   *tlog.Hash
	}{{prevRoot, &s.PrevRoot}, {headRoot, &s.Root}} {
		if b, rerr := base64.StdEncoding.DecodeString(r.text); rerr != nil || len(b) != tlog.HashSize {
			err = errors.New("bad tree root")
		} else {
			copy(r.to[:], b)
		}
	}
	if s.FirstTime, err = parseTimeOr(ft, err); err == nil {
		s.LastTime, err = parseTimeOr(lt, err)
	}
	if err != nil {
		return Seal{}, fmt.Errorf("audit: malformed seal: %v", err)
	}
	if s.Segment == 0 || s.First == 0 || s.Last < s.First || prevSeq != s.First-1 || lastSeq != s.Last {
		return Seal{}, errors.New("audit: malformed seal: inconsistent numbers")
	}
	if !bytes.Equal(s.Body(), body) {
		return Seal{}, errors.New("audit: malformed seal: not in canonical form")
	}
	return s, nil
}

// parseTimeOr parses a TimeLayout time unless err is already set.
func parseTimeOr(text string, err error) (time.Time, error) {
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(TimeLayout, text)
}

// segment is one bbolt file of the log. Sealed segments never change; the
// live one grows. db is swapped when sealing closes the writer's handle and
// reopens the file read-only (and when archiving moves it), so every read
// goes through mu. Lock order: Log.segMu before segment.mu is never taken
// (a reader holds mu while it may look up segments); sealing swaps db only
// after it released segMu.
type segment struct {
	no   uint64
	base uint64 // seq of the predecessor's last record (first - 1)

	// seal is set once, when the segment is sealed (nil while live).
	seal atomic.Pointer[Seal]

	mu   sync.RWMutex // guards path and db
	path string
	db   *bolt.DB

	tail *zeroTail // the live segment's zero-filled tail, as opened (tail.go); nil when read-only

	// copies counts the backups' copies (WriteSnapshot) reading the
	// segment now: while there is one, its commits leave out bbolt's
	// freelist (see copyLive).
	copies atomic.Int64
}

// view runs fn in a read transaction of the segment.
func (s *segment) view(fn func(tx *bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	return s.db.View(fn)
}

// update runs fn in a write transaction of the (live) segment.
func (s *segment) update(fn func(tx *bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	return s.db.Update(fn)
}

func (s *segment) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	ferr := writeFreelist(s.db)
	err := s.db.Close()
	s.db = nil
	if ferr != nil {
		ferr = freelistNotWritten(s.path, ferr)
	}
	return errors.Join(ferr, err)
}

// freelistNotWritten is the error of a close whose freelist commit
// (writeFreelist) failed with err: on a full volume that must allocate to
// rewrite a page (copy-on-write: btrfs, ZFS), ENOSPC. bbolt rolled the
// commit back, so the file is what its last commit left, valid without a
// freelist (a read-write open rebuilds it by a scan and writes it). That
// is checked, by reading the closed file's head back read-only, before
// the error says so; err stays wrapped (errors.Is ENOSPC).
func freelistNotWritten(path string, err error) error {
	var seq uint64
	db, rerr := openReadOnlyTimeout(path, DefaultTimeout)
	if rerr == nil {
		rerr = db.View(func(tx *bolt.Tx) error {
			var err error
			seq, _, err = checkHead(tx)
			return err
		})
		db.Close()
	}
	if rerr != nil {
		return fmt.Errorf("the freelist of %s could not be written (%w), and the file then did not read back (%v): run 'custos audit verify'", path, err, rerr)
	}
	return fmt.Errorf("the freelist of %s could not be written (%w); the log is intact up to record %d (its last commit stands; the next open rebuilds the freelist by a scan and needs room on the volume to write it)", path, err, seq)
}

// segmentMeta is a segment's own account of where it sits in the log.
type segmentMeta struct {
	no       uint64
	baseSeq  uint64
	baseHash [32]byte
	baseTime time.Time
	baseRoot tlog.Hash
	seal     []byte // nil while live
}

// readSegmentMeta reads the segment keys of meta (defaults for a log
// written before segments existed: segment 1, base 0).
func readSegmentMeta(meta *bolt.Bucket) (segmentMeta, error) {
	m := segmentMeta{no: 1}
	m.baseRoot, _ = tlog.TreeHash(0, nil)
	bad := func(what string) error {
		return &CorruptError{Kind: KindHeadMismatch, Detail: "meta " + what + " malformed"}
	}
	if v := meta.Get(metaSegment); v != nil {
		if len(v) != 8 || binary.BigEndian.Uint64(v) == 0 {
			return m, bad("segment")
		}
		m.no = binary.BigEndian.Uint64(v)
	}
	if v := meta.Get(metaBaseSeq); v != nil {
		if len(v) != 8 {
			return m, bad("base_seq")
		}
		m.baseSeq = binary.BigEndian.Uint64(v)
		h, t, r := meta.Get(metaBaseHash), meta.Get(metaBaseTime), meta.Get(metaBaseRoot)
		if len(h) != 32 || len(r) != 32 {
			return m, bad("base_hash or base_root")
		}
		copy(m.baseHash[:], h)
		copy(m.baseRoot[:], r)
		if len(t) > 0 {
			bt, err := time.Parse(TimeLayout, string(t))
			if err != nil {
				return m, bad("base_time")
			}
			m.baseTime = bt
		}
	}
	if v := meta.Get(metaSeal); v != nil {
		m.seal = slices.Clone(v)
	}
	return m, nil
}

// openSealed opens a sealed segment file read-only (a shared lock that no
// writer ever contends: nobody opens a sealed file read-write) and checks
// that it is sealed, that its seal names its number and that its meta head
// is the seal's last record.
func openSealed(path string, timeout time.Duration) (*segment, error) {
	db, err := openReadOnlyTimeout(path, timeout)
	if err != nil {
		return nil, err
	}
	s := &segment{path: path, db: db}
	err = db.View(func(tx *bolt.Tx) error {
		if err := checkFormat(tx); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		m, err := readSegmentMeta(meta)
		if err != nil {
			return err
		}
		if m.seal == nil {
			return &CorruptError{Kind: KindSealMismatch, Detail: fmt.Sprintf("segment file %s is not sealed", filepath.Base(path))}
		}
		seal, err := ParseSeal(m.seal, nil)
		if err != nil {
			return &CorruptError{Kind: KindSealMismatch, Detail: fmt.Sprintf("segment %d: %v", m.no, err)}
		}
		h, err := readHead(meta)
		if err != nil {
			return err
		}
		baseHash := ZeroHash
		if m.baseSeq > 0 {
			baseHash = hex.EncodeToString(m.baseHash[:])
		}
		if seal.PrevHash != baseHash || seal.PrevRoot != m.baseRoot {
			return &CorruptError{Seq: m.baseSeq, Kind: KindSealMismatch, Expected: baseHash, Got: seal.PrevHash, Detail: fmt.Sprintf("segment %d's seal does not name the predecessor head its meta records", m.no)}
		}
		if seal.Segment != m.no || seal.First != m.baseSeq+1 || seal.Last != h.seq {
			return &CorruptError{Seq: h.seq, Kind: KindSealMismatch, Expected: fmt.Sprintf("segment %d records %d..%d", m.no, m.baseSeq+1, h.seq),
				Got: fmt.Sprintf("segment %d records %d..%d", seal.Segment, seal.First, seal.Last), Detail: "the seal does not describe its segment"}
		}
		s.no, s.base = m.no, m.baseSeq
		s.seal.Store(&seal)
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	if m := segmentName.FindStringSubmatch(filepath.Base(path)); m == nil || m[1] != fmt.Sprintf("%06d", s.no) {
		db.Close()
		return nil, &CorruptError{Kind: KindSealMismatch, Expected: SegmentFile(s.no), Got: filepath.Base(path), Detail: "sealed segment file named for another segment"}
	}
	return s, nil
}

// archiveDirOf returns the archive directory recorded in the sealed
// directory (the archive-dir file), or "".
func archiveDirOf(sealedDir string) string {
	b, err := os.ReadFile(filepath.Join(sealedDir, archivePointer))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// archiveHint says what about the archive directory may explain a
// missing segment of the log at path opened with archiveDir: the sealed
// directory records another archive directory, or the archive directory
// is not there (not mounted); "" when neither.
func archiveHint(path, archiveDir string) string {
	recorded := archiveDirOf(SealedDir(path))
	if abs, err := filepath.Abs(archiveDir); archiveDir != "" && err == nil && recorded != "" && recorded != abs {
		return "the sealed directory records the archive directory " + recorded + ", not " + abs +
			": copy the archived segments to " + abs + ", or give " + recorded
	}
	if archiveDir == "" {
		archiveDir = recorded
	}
	if archiveDir == "" {
		return ""
	}
	if _, err := os.Stat(archiveDir); err != nil {
		return "the archive directory " + archiveDir + " (where sealed segments are moved) is not there: mount it"
	}
	return ""
}

// supersededHint says, when sealed segments are numbered from the live
// segment liveNo on, that they are not this log's: typically an archive
// that still holds the segments of the history a restore rolled back (the
// restored log numbers its next segments the same). "" when none is.
func supersededHint(sealed []*segment, liveNo uint64) string {
	var beyond []*segment
	for _, s := range sealed {
		if s.no >= liveNo {
			beyond = append(beyond, s)
		}
	}
	if len(beyond) == 0 {
		return ""
	}
	first, last := beyond[0], beyond[len(beyond)-1]
	return fmt.Sprintf("sealed segments %d to %d (%s) are numbered from the live segment %d on, so they are not this log's "+
		"(e.g. the history a restore rolled back): move them out of that directory, keeping them as evidence", first.no, last.no, filepath.Dir(first.path), liveNo)
}

// sealedFiles lists the sealed segment files of the log at path, by
// segment number: from the sealed directory and from the archive
// directory (archiveDir, or the one the sealed directory names); a segment
// in both is read from the sealed directory.
func sealedFiles(path, archiveDir string) (map[uint64]string, error) {
	dir := SealedDir(path)
	if archiveDir == "" {
		archiveDir = archiveDirOf(dir)
	}
	out := map[uint64]string{}
	for _, d := range []string{archiveDir, dir} { // the sealed dir last: it wins
		if d == "" {
			continue
		}
		files, err := segmentFilesIn(d)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, files)
	}
	return out, nil
}

// segmentFilesIn lists the segment files (NNNNNN.db) of directory d, by
// number; a missing directory has none.
func segmentFilesIn(d string) (map[uint64]string, error) {
	out := map[uint64]string{}
	ents, err := os.ReadDir(d)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: sealed segments: %w", err)
	}
	for _, e := range ents {
		m := segmentName.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		no, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil || no == 0 {
			continue
		}
		out[no] = filepath.Join(d, e.Name())
	}
	return out, nil
}

// openSealedAll opens every sealed segment of the log at path, in segment
// order.
func openSealedAll(path, archiveDir string, timeout time.Duration) ([]*segment, error) {
	files, err := sealedFiles(path, archiveDir)
	if err != nil {
		return nil, err
	}
	nos := make([]uint64, 0, len(files))
	for no := range files {
		nos = append(nos, no)
	}
	slices.Sort(nos)
	segs := make([]*segment, 0, len(nos))
	for _, no := range nos {
		s, err := openSealed(files[no], timeout)
		if err != nil {
			closeSegments(segs)
			return nil, err
		}
		segs = append(segs, s)
	}
	return segs, nil
}

func closeSegments(segs []*segment) error {
	var errs []error
	for _, s := range segs {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}

// continuity checks that segs (sealed, in order, then the live one with
// its meta m) form one log: numbers 1, 2, 3, ... and each segment's base
// the previous seal's last record and head. It returns every break found.
func continuity(segs []*segment, liveNo, liveBase uint64, liveBaseHash string) []Problem {
	var out []Problem
	wantNo, wantBase, wantHash := uint64(1), uint64(0), ZeroHash
	check := func(no, base uint64, prevHash string) {
		if no != wantNo || base != wantBase {
			out = append(out, Problem{Seq: wantBase + 1, Kind: KindSegmentMissing,
				Expected: fmt.Sprintf("segment %d from seq %d", wantNo, wantBase+1), Got: fmt.Sprintf("segment %d from seq %d", no, base+1),
				Detail: "a segment is missing (or out of place) before this one"})
		} else if prevHash != wantHash {
			out = append(out, Problem{Seq: base + 1, Kind: KindChainBreak, Expected: wantHash, Got: prevHash,
				Detail: fmt.Sprintf("segment %d's recorded predecessor head is not segment %d's seal", no, no-1)})
		}
	}
	for _, s := range segs {
		seal := s.seal.Load()
		check(s.no, s.base, seal.PrevHash)
		wantNo, wantBase, wantHash = s.no+1, seal.Last, seal.HeadHash
	}
	check(liveNo, liveBase, liveBaseHash)
	return out
}

// fsyncFile fsyncs the file at path.
func fsyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
