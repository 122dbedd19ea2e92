package audit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/bits"
	"os"
	"slices"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/custos-mcp/custos/internal/regularfile"
)

// KindSegmentDamaged: a segment file is not a bbolt database that can be
// opened: empty, neither of its two meta pages valid (bad magic, version
// or checksum: bbolt's ErrInvalid, ErrVersionMismatch, ErrChecksum), or
// shorter than the pages its meta page says it holds (truncated). Seq is
// 0; Expected and Got say what was required and found; Detail names the
// file. It is evidence of damage or tampering, not a file that could not
// be read.
const KindSegmentDamaged = "segment_damaged"

// The bbolt file header (go.etcd.io/bbolt, internal/common/meta.go and
// page.go): pages 0 and 1 are meta pages, each a 16-byte page header
// followed by, in the machine's byte order,
//
//	magic u32 | version u32 | page size u32 | flags u32 | root u64 |
//	sequence u64 | freelist u64 | pgid u64 | txid u64 | checksum u64
//
// where checksum = FNV-64a(magic .. txid) and pgid is the high-water mark:
// the file holds pages 0..pgid-1. bbolt opens a file whose pages end
// before pgid (it maps past the end) and faults (SIGBUS) when it reads
// them: a truncated segment killed every command that opened it.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	boltMetaOffset = 16   // the page header
	boltMetaSize   = 64   // magic .. checksum
	boltMinProbe   = 1024 // bbolt's first guess at the offset of meta page 1
)

// boltMeta is the part of a meta page checkBoltFile needs.
type boltMeta struct {
	pageSize uint32
	pgid     uint64
	txid     uint64
}

// parseBoltMeta decodes the meta page at the start of page and validates it
// as bbolt does (Meta.Validate), returning its sentinel.
func parseBoltMeta(page []byte) (boltMeta, error) {
	if len(page) < boltMetaOffset+boltMetaSize {
		return boltMeta{}, berrors.ErrInvalid
	}
	m := page[boltMetaOffset : boltMetaOffset+boltMetaSize]
	e := binary.NativeEndian
	switch {
	case e.Uint32(m[0:]) != boltMagic:
		return boltMeta{}, berrors.ErrInvalid
	case e.Uint32(m[4:]) != boltVersion:
		return boltMeta{}, berrors.ErrVersionMismatch
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if h.Sum64() != e.Uint64(m[56:]) {
		return boltMeta{}, berrors.ErrChecksum
	}
	return boltMeta{pageSize: e.Uint32(m[8:]), pgid: e.Uint64(m[40:]), txid: e.Uint64(m[48:])}, nil
}

// checkBoltFile returns a *CorruptError of kind segment_damaged (matching
// ErrCorrupt, and the bbolt sentinel when a meta page is at fault) when
// the existing segment file f of size bytes, named name, is no bbolt
// database bbolt can open safely; an I/O error reading it is returned as
// it is (the file could not be read: no evidence either way). It is
// checked before bbolt maps the file: bbolt would initialize an empty file
// as a new log (verify then reported the new, one-record log intact) and
// faults on a truncated one. One invalid meta page is left to bbolt, which
// opens the other: that is how it survives a crash during a commit.
func checkBoltFile(f io.ReaderAt, size int64, name string) error {
	// What to do is said in the error (docs/operations.md, Failure
	// behaviour): a file bbolt had not finished creating (firstStart) is
	// also what a kill during a new log's first start leaves.
	damagedAs := func(firstStart bool, expected, got string, cause error) error {
		return &CorruptError{Kind: KindSegmentDamaged, Expected: expected, Got: got, Detail: damagedDetail(name, firstStart), cause: cause, firstStart: firstStart}
	}
	if size == 0 {
		return damagedAs(true, "a bbolt database (two meta pages)", "an empty file", berrors.ErrInvalid)
	}
	read := func(off int64) ([]byte, error) {
		buf := make([]byte, boltMetaOffset+boltMetaSize)
		if off+int64(len(buf)) > size {
			return nil, berrors.ErrInvalid // the file ends before this meta page
		}
		if _, err := f.ReadAt(buf, off); err != nil {
			return nil, err
		}
		return buf, nil
	}
	metas := make([]boltMeta, 0, 2)
	var errs [2]error
	p0, err := read(0)
	if err != nil && !errors.Is(err, berrors.ErrInvalid) {
		return err
	}
	if err == nil {
		var m boltMeta
		if m, errs[0] = parseBoltMeta(p0); errs[0] == nil {
			metas = append(metas, m)
		}
	} else {
		errs[0] = err
	}
	// Page 1 where bbolt looks for it (db.go, getPageSize and mmap): at
	// page 0's page size when page 0 is valid, else at the first of 1 KiB,
	// 2 KiB, ... 16 MiB that holds a valid meta page. It was looked for
	// only at the page size of this machine (at least 4 KiB): a file
	// whose meta page 0 a crash tore, written where pages are of another
	// size (a 64 KiB-page arm64 or ppc64le server, 16 KiB on Apple
	// silicon, a restored copy), was refused although bbolt opens it.
	offsets := []int64{}
	if len(metas) == 1 {
		offsets = append(offsets, int64(metas[0].pageSize))
	} else {
		for i := 0; i <= 14 && int64(boltMinProbe)<<i < size-boltMinProbe; i++ {
			offsets = append(offsets, int64(boltMinProbe)<<i)
		}
	}
	errs[1] = berrors.ErrInvalid
	for _, off := range offsets {
		p1, err := read(off)
		if err != nil && !errors.Is(err, berrors.ErrInvalid) {
			return err
		}
		if err != nil {
			continue
		}
		m, err := parseBoltMeta(p1)
		if err == nil {
			metas = append(metas, m)
			break
		}
		if errors.Is(errs[1], berrors.ErrInvalid) {
			errs[1] = err // a meta page's magic there, the closest thing found
		}
	}
	if len(metas) == 0 {
		return damagedAs(allZeros(f, size), "a valid bbolt meta page at page 0 or 1",
			fmt.Sprintf("page 0: %v; page 1: %v (%d bytes)", errs[0], errs[1], size), errs[0])
	}
	m := metas[0]
	if len(metas) == 2 && metas[1].txid > m.txid {
		m = metas[1]
	}
	// size < pgid × page size, the product taken without overflow (the
	// checksum is no MAC: any value can be made valid).
	hi, need := bits.Mul64(m.pgid, uint64(m.pageSize))
	if m.pageSize == 0 || hi != 0 || need > uint64(size) {
		want := fmt.Sprintf("at least %d bytes", need)
		if hi != 0 || m.pageSize == 0 {
			want = "a page size and a page count that fit a file"
		}
		// bbolt's first write holds its two meta pages, of txids 0 and 1.
		return damagedAs(m.txid <= 1, fmt.Sprintf("%s (%d pages of %d, meta txid %d)", want, m.pgid, m.pageSize, m.txid),
			fmt.Sprintf("%d bytes (truncated)", size), nil)
	}
	return nil
}

// damagedDetail is the detail of a segment_damaged error for file name:
// what to do. firstStart: the file looks as bbolt leaves it when killed
// while creating it, which only a new log's first start does (a roll's
// next segment is made afresh by the next open: recoverSeal); the advice
// to move it aside then applies, if no record was ever written.
func damagedDetail(name string, firstStart bool) string {
	if firstStart {
		return fmt.Sprintf("%s is not a bbolt database custos can open: bbolt had not finished creating it (custos stopped during a new log's first start) or it was damaged; if no record was ever written to this log, move the file aside and start again, otherwise keep it as evidence and restore the file from a backup", name)
	}
	return fmt.Sprintf("%s is not a bbolt database custos can open (damaged, truncated or replaced): keep it as evidence and restore the file from a backup", name)
}

// allZeros reports whether f, of size bytes, holds only zeros and is no
// longer than bbolt's first write (four pages of at most 64 KiB): a file
// extended for that write whose pages never reached the disk.
func allZeros(f io.ReaderAt, size int64) bool {
	if size > 4<<16 {
		return false
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// DamagedError is the error of a log several of whose segment files are
// damaged (KindSegmentDamaged): one *CorruptError per file, in segment
// order, the live segment last. It matches ErrCorrupt, and errors.As
// finds the first file's *CorruptError; VerifyFile reports each as a
// problem. A log with one damaged file gets that file's *CorruptError
// alone. Every file is named so that the operator restores them all from
// a backup at once, not one per attempt.
type DamagedError struct {
	Files []*CorruptError
}

func (e *DamagedError) Error() string {
	msg := fmt.Sprintf("audit: audit log is corrupt: %d segment files are damaged (%s)", len(e.Files), KindSegmentDamaged)
	for i, f := range e.Files {
		msg += fmt.Sprintf("; %d: expected %q, got %q: %s", i+1, f.Expected, f.Got, f.Detail)
	}
	return msg
}

// Unwrap returns each file's *CorruptError.
func (e *DamagedError) Unwrap() []error {
	out := make([]error, len(e.Files))
	for i, f := range e.Files {
		out[i] = f
	}
	return out
}

// damagedSegments returns err as it is unless it is a segment_damaged
// error, which names only the first damaged file its open met. Then it
// checks the header of every segment file of the log at path (the sealed
// ones, from archiveDir too, in order, then the live one) without opening
// them with bbolt, and returns a *DamagedError naming each damaged one
// when there are several.
func damagedSegments(path, archiveDir string, err error) error {
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Kind != KindSegmentDamaged {
		return err
	}
	files, ferr := sealedFiles(path, archiveDir)
	if ferr != nil {
		return err
	}
	nos := slices.Sorted(maps.Keys(files))
	paths := make([]string, 0, len(nos)+1)
	for _, no := range nos {
		paths = append(paths, files[no])
	}
	// A log with a sealed segment file had records: none of its files is
	// what a killed first start leaves, and moving one aside would put
	// evidence away and start a log that does not follow the sealed ones.
	// So each is told only to restore; err, which gave that advice, is
	// replaced by the file's error found here (its text is fixed when
	// wrapped).
	pastFirstStart := func(ce *CorruptError, name string) {
		if len(paths) > 0 && ce.firstStart {
			ce.firstStart, ce.Detail = false, damagedDetail(name, false)
		}
	}
	var found []*CorruptError
	for _, p := range append(paths, path) {
		f, oerr := regularfile.Open(p, os.O_RDONLY, 0, regularfile.NoFollow)
		if oerr != nil {
			continue // missing, or not a file: its open reports that
		}
		fi, serr := f.Stat()
		if serr == nil {
			var fce *CorruptError
			if cerr := checkBoltFile(f, fi.Size(), p); errors.As(cerr, &fce) {
				pastFirstStart(fce, p)
				found = append(found, fce)
			}
		}
		f.Close()
	}
	if len(found) == 1 && len(paths) > 0 && ce.firstStart {
		return found[0]
	}
	if len(found) < 2 {
		return err
	}
	return &DamagedError{Files: found}
}
