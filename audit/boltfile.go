package audit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	berrors "go.etcd.io/bbolt/errors"
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
	boltMetaOffset = 16 // the page header
	boltMetaSize   = 64 // magic .. checksum
	boltMinPage    = 0x1000
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
	damaged := func(expected, got string, cause error) error {
		return &CorruptError{Kind: KindSegmentDamaged, Expected: expected, Got: got,
			Detail: fmt.Sprintf("%s is not a bbolt database custos can open (damaged, truncated or replaced)", name), cause: cause}
	}
	if size == 0 {
		return damaged("a bbolt database (two meta pages)", "an empty file", berrors.ErrInvalid)
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
	pageSize := int64(os.Getpagesize())
	if err == nil {
		var m boltMeta
		if m, errs[0] = parseBoltMeta(p0); errs[0] == nil {
			metas, pageSize = append(metas, m), int64(m.pageSize)
		}
	} else {
		errs[0] = err
	}
	if pageSize < boltMinPage {
		pageSize = boltMinPage
	}
	p1, err := read(pageSize)
	if err != nil && !errors.Is(err, berrors.ErrInvalid) {
		return err
	}
	if err == nil {
		var m boltMeta
		if m, errs[1] = parseBoltMeta(p1); errs[1] == nil {
			metas = append(metas, m)
		}
	} else {
		errs[1] = err
	}
	if len(metas) == 0 {
		return damaged("a valid bbolt meta page at page 0 or 1",
			fmt.Sprintf("page 0: %v; page 1: %v (%d bytes)", errs[0], errs[1], size), errs[0])
	}
	m := metas[0]
	if len(metas) == 2 && metas[1].txid > m.txid {
		m = metas[1]
	}
	if need := int64(m.pgid) * int64(m.pageSize); size < need {
		return damaged(fmt.Sprintf("at least %d bytes (%d pages of %d, meta txid %d)", need, m.pgid, m.pageSize, m.txid),
			fmt.Sprintf("%d bytes (truncated)", size), nil)
	}
	return nil
}
