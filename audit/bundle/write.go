package bundle

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/custos-mcp/custos/audit"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/internal/durable"
)

// Source is what Write, ResolveTimeRange and InclusionProof read from an
// audit log; *audit.Log satisfies it (also when opened read-only).
type Source interface {
	// TreeHead returns the current tree size (= head seq) and root, as one
	// consistent snapshot.
	TreeHead(ctx context.Context) (size int64, root tlog.Hash, err error)
	// ReadHashes is tlog.HashReader: stored hashes by tlog.StoredHashIndex.
	ReadHashes(indexes []int64) ([]tlog.Hash, error)
	// TreeHash returns the root of the tree of the first size records.
	TreeHash(size int64) (tlog.Hash, error)
	// ProveRecord returns the inclusion proof of record seq (leaf seq-1) in
	// the tree of size records.
	ProveRecord(seq uint64, size int64) (tlog.RecordProof, error)
	// ProveTree returns the consistency proof from the tree of oldSize
	// records to the tree of newSize records.
	ProveTree(oldSize, newSize int64) (tlog.TreeProof, error)
	// Records calls fn for each record with from <= seq <= to, in seq
	// order, with its exact stored canonical bytes; fn must not retain
	// canonical. An error from fn stops the walk and is returned.
	Records(ctx context.Context, from, to uint64, fn func(seq uint64, canonical []byte) error) error
}

// BundleFormat is the manifest's "format" value for this layout.
const BundleFormat = "custos-audit-bundle/v1"

// Bundle file names.
const (
	FileRecords     = "records.jsonl"
	FileCheckpoints = "checkpoints.jsonl"
	FileProof       = "proof.json"
	FileManifest    = "manifest.json"
)

// Manifest is manifest.json: what the bundle holds and the sha256 of every
// other file in it. It is not signed: the signed checkpoints and the proofs
// are what make the records trustworthy; the digests catch damage and make
// the file list explicit.
type Manifest struct {
	Format  string            `json:"format"`  // BundleFormat
	Origin  string            `json:"origin"`  // the checkpoints' origin (log identity)
	From    uint64            `json:"from"`    // first seq, inclusive
	To      uint64            `json:"to"`      // last seq, inclusive
	Records int64             `json:"records"` // To-From+1
	Lower   int64             `json:"lower_size"`
	Upper   int64             `json:"upper_size"`
	Files   map[string]string `json:"files"`           // file name -> "sha256:<hex>"
	VKeys   []string          `json:"vkeys,omitempty"` // verifier keys the exporter names (informational: verify with keys from a trusted source)
	Created string            `json:"created"`         // export time, RFC 3339 UTC
}

// Proof is proof.json.
type Proof struct {
	// Consistency is tlog's consistency proof from the lower checkpoint's
	// tree to the upper one's (empty when the lower one is the empty tree).
	Consistency []tlog.Hash `json:"consistency"`
	// Range is RangeProof(From-1, To, upper size): the maximal subtrees of
	// the upper tree disjoint from the exported records.
	Range []tlog.Hash `json:"range"`
}

// WriteOptions selects what Write exports.
type WriteOptions struct {
	// From and To are the seq range, both inclusive, 1 <= From <= To <= head.
	// For a time range, resolve it first with ResolveTimeRange.
	From, To uint64
	// Checkpoints are the lines of the anchor file (checkpoints.jsonl), in
	// any order. Write picks the bracketing ones: lower = the largest size
	// <= From-1 (none: the empty tree, not written), upper = the smallest
	// size >= To (none: ErrNoCheckpoint). Both must match the local tree.
	Checkpoints [][]byte
	// Formats lists the human formats to write as well (none by default).
	Formats []Format
	// VKeys are verifier keys recorded in the manifest for the reader's
	// information (optional).
	VKeys []string
	// Now is the clock for Manifest.Created; nil = time.Now.
	Now func() time.Time
	// Space, if not nil, is asked before every write to the bundle's
	// files with the bytes about to be written (a buffer's worth, at most
	// 256 KiB, or one small file): an error stops Write before those
	// bytes are written, and Write removes what it wrote and returns that
	// error. The caller decides whether the bundle's volume has room
	// (package access keeps the audit volume's reserve). nil: the file
	// system's own limits only.
	Space func(need uint64) error
}

// Write exports records From..To of src as a bundle in the new directory
// dir: records.jsonl (exact canonical bytes, one per line), checkpoints.jsonl
// (the bracketing anchor lines, lower first, lower omitted for the empty
// tree), proof.json, the requested human formats and manifest.json. It
// checks, before writing anything final, that both checkpoints' roots equal
// the local tree's roots at their sizes (ErrCheckpointMismatch) and that
// the exported records recompute the upper root with the range proof.
//
// The bundle is built in a temporary directory next to dir and renamed into
// place at the end: dir either does not appear or is complete. An existing
// dir must be empty (ErrNotEmpty otherwise).
func Write(ctx context.Context, dir string, src Source, opts WriteOptions) (Manifest, error) {
	if opts.From < 1 || opts.To < opts.From {
		return Manifest{}, fmt.Errorf("%w: [%d, %d]", ErrBadRange, opts.From, opts.To)
	}
	for _, f := range opts.Formats {
		if f.FileName() == "" {
			return Manifest{}, fmt.Errorf("bundle: unknown format %q", f)
		}
	}
	if err := checkTarget(dir); err != nil {
		return Manifest{}, err
	}
	headSize, _, err := src.TreeHead(ctx)
	if err != nil {
		return Manifest{}, err
	}
	if opts.To > uint64(headSize) {
		return Manifest{}, fmt.Errorf("%w: to %d is beyond the log head %d", ErrBadRange, opts.To, headSize)
	}
	lower, upper, err := pickCheckpoints(opts.Checkpoints, opts.From, opts.To)
	if err != nil {
		return Manifest{}, err
	}
	if upper.Size > headSize {
		return Manifest{}, fmt.Errorf("%w: checkpoint size %d is beyond the local log head %d (rolled-back log?)", ErrCheckpointMismatch, upper.Size, headSize)
	}
	for _, c := range []*checkpoint{lower, upper} {
		if c == nil {
			continue
		}
		root, err := src.TreeHash(c.Size)
		if err != nil {
			return Manifest{}, err
		}
		if root != c.Root {
			return Manifest{}, fmt.Errorf("%w: at size %d the checkpoint root is %v, the local tree's %v", ErrCheckpointMismatch, c.Size, c.Root, root)
		}
	}
	if lower != nil && lower.Origin != upper.Origin {
		return Manifest{}, fmt.Errorf("%w: checkpoints have different origins %q and %q", ErrCheckpointMismatch, lower.Origin, upper.Origin)
	}
	var lowerSize int64
	if lower != nil {
		lowerSize = lower.Size
	}
	proof := Proof{Consistency: []tlog.Hash{}}
	if lowerSize > 0 {
		p, err := src.ProveTree(lowerSize, upper.Size)
		if err != nil {
			return Manifest{}, err
		}
		proof.Consistency = append(proof.Consistency, p...)
	}
	proof.Range, err = RangeProof(int64(opts.From-1), int64(opts.To), upper.Size, src)
	if err != nil {
		return Manifest{}, err
	}

	parent := filepath.Dir(filepath.Clean(dir))
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(filepath.Clean(dir))+".tmp-")
	if err != nil {
		return Manifest{}, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	files := map[string]string{}
	w := &writer{dir: tmp, space: opts.Space}

	// records.jsonl and the human formats, in one pass.
	leaves, err := writeRecords(ctx, w, src, opts, files)
	if err != nil {
		return Manifest{}, err
	}
	root, err := RangeRoot(int64(opts.From-1), int64(opts.To), upper.Size, leaves, proof.Range)
	if err != nil {
		return Manifest{}, err
	}
	if root != upper.Root {
		return Manifest{}, fmt.Errorf("%w: the exported records do not recompute the checkpoint root at size %d (%v != %v): run `custos audit verify`",
			audit.ErrCorrupt, upper.Size, root, upper.Root)
	}

	var ck bytes.Buffer
	if lowerSize > 0 {
		ck.Write(lower.Line)
		ck.WriteByte('\n')
	}
	ck.Write(upper.Line)
	ck.WriteByte('\n')
	if err := w.writeFile(FileCheckpoints, ck.Bytes(), files); err != nil {
		return Manifest{}, err
	}
	pj, err := json.MarshalIndent(proof, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	if err := w.writeFile(FileProof, append(pj, '\n'), files); err != nil {
		return Manifest{}, err
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	m := Manifest{
		Format:  BundleFormat,
		Origin:  upper.Origin,
		From:    opts.From,
		To:      opts.To,
		Records: int64(opts.To - opts.From + 1),
		Lower:   lowerSize,
		Upper:   upper.Size,
		Files:   files,
		VKeys:   opts.VKeys,
		Created: now().UTC().Format(time.RFC3339Nano),
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	if err := w.writeFile(FileManifest, append(mj, '\n'), nil); err != nil {
		return Manifest{}, err
	}
	// Publish: an empty dir is replaced, a non-empty one refused.
	if err := durable.PublishDir(tmp, dir, checkTarget); err != nil {
		return Manifest{}, err
	}
	ok = true
	return m, nil
}

// checkTarget refuses an existing non-empty directory (or a non-directory).
func checkTarget(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotEmpty, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("%w: %s", ErrNotEmpty, dir)
	}
	return nil
}

// pickCheckpoints chooses lower (nil: the empty tree) and upper among the
// anchor lines. Among equal sizes the last line wins for lower and the
// first for upper; lines that do not parse are skipped unless none is left.
func pickCheckpoints(lines [][]byte, from, to uint64) (lower, upper *checkpoint, err error) {
	var firstErr error
	for _, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		c, err := parseAnchorLine(l)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if c.Size <= int64(from-1) && c.Size > 0 && (lower == nil || c.Size >= lower.Size) {
			lower = &c
		}
		if c.Size >= int64(to) && (upper == nil || c.Size < upper.Size) {
			upper = &c
		}
	}
	if upper == nil {
		if firstErr != nil {
			return nil, nil, fmt.Errorf("%w (and an anchor line did not parse: %v)", ErrNoCheckpoint, firstErr)
		}
		return nil, nil, fmt.Errorf("%w: no checkpoint has size >= %d", ErrNoCheckpoint, to)
	}
	return lower, upper, nil
}

// writer creates the bundle's files in dir, asking space (nil: nothing)
// before each write to them.
type writer struct {
	dir   string
	space func(need uint64) error
}

// spaceFile asks space for room before each write to f.
type spaceFile struct {
	f     *os.File
	space func(need uint64) error
}

func (s spaceFile) Write(p []byte) (int, error) {
	if s.space != nil && len(p) > 0 {
		if err := s.space(uint64(len(p))); err != nil {
			return 0, err
		}
	}
	return s.f.Write(p)
}

// digestWriter hashes what it writes.
type digestWriter struct {
	f *os.File
	b *bufio.Writer
	h hash.Hash
}

func (w *writer) createDigest(name string) (*digestWriter, error) {
	f, err := os.OpenFile(filepath.Join(w.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	return &digestWriter{f: f, b: bufio.NewWriterSize(io.MultiWriter(spaceFile{f, w.space}, h), 256<<10), h: h}, nil
}

func (d *digestWriter) Write(p []byte) (int, error) { return d.b.Write(p) }

// close flushes, fsyncs and closes the file and records its digest.
func (d *digestWriter) close(name string, files map[string]string) error {
	err := d.b.Flush()
	if err == nil {
		err = d.f.Sync()
	}
	if cerr := d.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && files != nil {
		files[name] = "sha256:" + hex.EncodeToString(d.h.Sum(nil))
	}
	return err
}

func (w *writer) writeFile(name string, data []byte, files map[string]string) error {
	d, err := w.createDigest(name)
	if err != nil {
		return err
	}
	if _, err := d.Write(data); err != nil {
		d.f.Close()
		return err
	}
	return d.close(name, files)
}

// writeRecords writes records.jsonl and the human formats and returns the
// records' leaf hashes. A write that fails (a full disk, or Space
// refusing) stops the walk at once: the buffered writers would keep the
// error and write nothing more, but the walk would render every record
// to the end. Every file is closed on return, also on an error: an open
// descriptor keeps a removed file's blocks allocated.
func writeRecords(ctx context.Context, w *writer, src Source, opts WriteOptions, files map[string]string) ([]tlog.Hash, error) {
	rec, err := w.createDigest(FileRecords)
	if err != nil {
		return nil, err
	}
	defer rec.f.Close() // after close, a no-op
	type human struct {
		f Format
		d *digestWriter
	}
	var hs []human
	for _, f := range slices.Compact(slices.Sorted(slices.Values(opts.Formats))) {
		d, err := w.createDigest(f.FileName())
		if err != nil {
			return nil, err
		}
		defer d.f.Close()
		hs = append(hs, human{f: f, d: d})
		head, err := f.header()
		if err != nil {
			return nil, err
		}
		if _, err := d.Write(head); err != nil {
			return nil, err
		}
	}
	leaves := make([]tlog.Hash, 0, opts.To-opts.From+1)
	next := opts.From
	err = src.Records(ctx, opts.From, opts.To, func(seq uint64, canonical []byte) error {
		if seq != next {
			return fmt.Errorf("%w: record source returned seq %d, want %d", audit.ErrCorrupt, seq, next)
		}
		next++
		leaves = append(leaves, tlog.RecordHash(canonical))
		if _, err := rec.Write(canonical); err != nil {
			return err
		}
		if _, err := rec.Write([]byte{'\n'}); err != nil {
			return err
		}
		if len(hs) == 0 {
			return nil
		}
		r, err := audit.Decode(canonical)
		if err != nil {
			return &audit.CorruptError{Seq: seq, Kind: audit.KindNonCanonical, Detail: "record does not decode; run verify"}
		}
		for _, h := range hs {
			b, err := h.f.render(r)
			if err != nil {
				return err
			}
			if _, err := h.d.Write(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if next != opts.To+1 {
		return nil, fmt.Errorf("%w: record source stopped at seq %d, want %d", audit.ErrCorrupt, next-1, opts.To)
	}
	if err := rec.close(FileRecords, files); err != nil {
		return nil, err
	}
	for _, h := range hs {
		if err := h.d.close(h.f.FileName(), files); err != nil {
			return nil, err
		}
	}
	return leaves, nil
}

// ResolveTimeRange returns the seq range [from, to] of the records of src
// whose time t satisfies since <= t < until (a zero bound is unbounded). It
// relies on the log's invariant that times never decrease and binary
// searches with single-record reads; a log that breaks the invariant is
// reported by `custos audit verify` and by Verify on the bundle. It fails
// with ErrBadRange when no record is in the range.
func ResolveTimeRange(ctx context.Context, src Source, since, until time.Time) (from, to uint64, err error) {
	size, _, err := src.TreeHead(ctx)
	if err != nil {
		return 0, 0, err
	}
	head := uint64(size)
	timeAt := func(seq uint64) (time.Time, error) {
		var t time.Time
		found := false
		err := src.Records(ctx, seq, seq, func(s uint64, canonical []byte) error {
			r, err := audit.Decode(canonical)
			if err != nil {
				return &audit.CorruptError{Seq: s, Kind: audit.KindNonCanonical, Detail: "record does not decode; run verify"}
			}
			t, found = r.Time, true
			return nil
		})
		if err == nil && !found {
			err = fmt.Errorf("%w: record %d missing", audit.ErrCorrupt, seq)
		}
		return t, err
	}
	bound := func(t time.Time) string {
		if t.IsZero() {
			return "open"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	// firstAtOrAfter returns the smallest seq in [1, head+1] whose time is
	// >= bound (head+1: none).
	firstAtOrAfter := func(bound time.Time) (uint64, error) {
		lo, hi := uint64(1), head+1
		for lo < hi {
			mid := lo + (hi-lo)/2
			t, err := timeAt(mid)
			if err != nil {
				return 0, err
			}
			if t.Before(bound) {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		return lo, nil
	}
	from = 1
	if !since.IsZero() {
		if from, err = firstAtOrAfter(since); err != nil {
			return 0, 0, err
		}
	}
	end := head + 1
	if !until.IsZero() {
		if end, err = firstAtOrAfter(until); err != nil {
			return 0, 0, err
		}
	}
	if from >= end {
		return 0, 0, fmt.Errorf("%w: no record in the time range [%s, %s) of a log of %d records", ErrBadRange, bound(since), bound(until), head)
	}
	return from, end - 1, nil
}
