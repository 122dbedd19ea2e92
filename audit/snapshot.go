package audit

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Snapshot describes a consistent copy of the log written by WriteSnapshot:
// the copy's byte size and, in the same transaction, its head record and
// its Merkle tree (size = HeadSeq).
type Snapshot struct {
	Segment  uint64 // the live segment's number: sealed segments before it complete the copy (WriteSealed)
	Bytes    int64
	HeadSeq  uint64
	HeadHash string
	TreeSize int64
	TreeRoot tlog.Hash
}

// WriteSnapshot writes a consistent copy of the live segment's file with bbolt's
// tx.WriteTo inside one read transaction (bbolt's supported hot backup):
// the writer goes on appending meanwhile, and the copy holds exactly the
// records committed when the transaction began. It first checks the head
// (as Open does) and reads the tree, then calls open with the Snapshot
// (Bytes known) and writes the copy to the writer open returns.
//
// The copy is the whole log only together with the sealed segments before
// Snapshot.Segment (WriteSealed), which never change.
//
// The transaction lasts as long as the copy. It does not delay appends
// (the live segment never remaps: mapsize.go), but bbolt cannot reuse the
// pages freed meanwhile, so the file grows by the pages the commits write
// meanwhile (about 11 pages of 4 KiB for a one-record commit; measured in
// docs/operations.md, "audit.db grows during a backup"). The commits made
// during the copy leave out bbolt's freelist (copyLive), which would list
// those pending pages and grow the file about exponentially.
func (l *Log) WriteSnapshot(open func(Snapshot) (io.Writer, error)) (Snapshot, error) {
	var s Snapshot
	err := l.copyLive(func(tx *bolt.Tx) error {
		seq, hash, err := checkHead(tx)
		if err != nil {
			return err
		}
		n, r, err := builtTree(tx)
		if err != nil {
			return err
		}
		if n != int64(seq) {
			return fmt.Errorf("%w: the tree covers %d of %d records", ErrNoTree, n, seq)
		}
		root, err := tlog.TreeHash(n, r)
		if err != nil {
			return err
		}
		sm, err := readSegmentMeta(tx.Bucket(bucketMeta))
		if err != nil {
			return err
		}
		s = Snapshot{Segment: sm.no, Bytes: tx.Size(), HeadSeq: seq, HeadHash: hash, TreeSize: n, TreeRoot: root}
		w, err := open(s)
		if err != nil {
			return err
		}
		written, err := tx.WriteTo(w)
		if err == nil && written != s.Bytes {
			err = fmt.Errorf("audit: snapshot wrote %d of %d bytes", written, s.Bytes)
		}
		return err
	})
	return s, err
}

// copyLive runs fn, a backup's copy, in a read transaction of the live
// segment, counted in the segment's copies from before the transaction
// begins until it ends.
//
// While a read transaction is open bbolt reuses no page freed after it
// began: they are pending. Every commit writes bbolt's freelist, which
// lists the pending pages too (8 bytes each) and frees the previous
// freelist's pages, pending in turn: each commit adds about 1/512 of the
// pending pages again, and after C commits during a copy the file had
// grown by about 27 MiB × (e^(C/512) − 1). So while the segment's copies
// are above zero its batched commits set bbolt's DB.NoFreelistSync (read
// by Commit under the writer's lock, so it is changed only inside a write
// transaction: commitOne), and their meta pages name no freelist; the
// first commit after the last copy ended writes it again, and so does a
// seal's commit and the segment's close (writeFreelist). The freelist
// stays whole in memory. A file left without one (a crash during a copy)
// is still a valid bbolt file: a read-only open needs no freelist, and a
// read-write open rebuilds it by scanning the file and writes it. So does
// bbolt after a failed commit during a copy (tx.rollback: NoSyncReload of
// freepages()), a scan of the whole file (docs/operations.md).
func (l *Log) copyLive(fn func(tx *bolt.Tx) error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	s := l.live()
	s.copies.Add(1)
	defer s.copies.Add(-1)
	return s.view(fn)
}

// writeFreelist commits, on the writable bbolt db, a transaction that
// writes the freelist if its last commit left it out (copyLive), so that
// a closed live segment names its freelist as every bbolt file does.
func writeFreelist(db *bolt.DB) error {
	if db.IsReadOnly() {
		return nil
	}
	err := db.Update(func(tx *bolt.Tx) error {
		if !tx.DB().NoFreelistSync {
			return errFreelistWritten
		}
		tx.DB().NoFreelistSync = false
		return nil
	})
	if errors.Is(err, errFreelistWritten) {
		return nil
	}
	return err
}

// errFreelistWritten rolls back writeFreelist's transaction: there is
// nothing to write.
var errFreelistWritten = errors.New("audit: freelist written")

// LiveBytes is the number of bytes of the live segment's file in use: what
// WriteSnapshot would copy now (Snapshot.Bytes). The file itself is larger,
// grown ahead of its pages (mapsize.go).
func (l *Log) LiveBytes() (int64, error) {
	var n int64
	err := l.view(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n, err
}

// SealedSegment describes a sealed segment as WriteSealed copies it: its
// number, records, file size and seal note (as written beside the file,
// signed when a SealSigner was set; the unsigned seal body if the note is
// not there).
type SealedSegment struct {
	No          uint64
	First, Last uint64
	Bytes       int64
	Note        []byte
}

// WriteSealed copies each sealed segment numbered below before, in order:
// it calls open with the segment's description and writes the file to the
// writer open returns. With before = Snapshot.Segment it completes a
// WriteSnapshot copy into the whole log.
//
// The copy is the file's exact bytes (its first tx.Size() bytes: the whole
// file once the seal trimmed it), not bbolt's tx.WriteTo, which rewrites
// both meta pages: a restored segment is then the same file as its copy in
// the archive, and the archiver, which never replaces an archived file with
// different bytes, accepts it as already archived.
func (l *Log) WriteSealed(before uint64, open func(SealedSegment) (io.Writer, error)) error {
	return l.eachSealed(before, func(d SealedSegment, path string) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		w, err := open(d)
		if err != nil {
			return err
		}
		written, err := io.CopyN(w, f, d.Bytes)
		if err != nil || written != d.Bytes {
			err = fmt.Errorf("audit: segment %d: wrote %d of %d bytes: %v", d.No, written, d.Bytes, err)
		}
		return err
	})
}

// SealedSegments describes every sealed segment as WriteSealed would
// copy it now, wherever it is (the sealed directory or the archive
// directory), without reading its records: a backup's size is mostly
// theirs.
func (l *Log) SealedSegments() ([]SealedSegment, error) {
	before := uint64(math.MaxUint64)
	for _, s := range l.segments() {
		if s.seal.Load() == nil { // the live segment
			before = s.no
			break
		}
	}
	var out []SealedSegment
	err := l.eachSealed(before, func(d SealedSegment, _ string) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// eachSealed calls fn, in order, with the description and the file of
// each sealed segment numbered below before, inside a read transaction on
// it: the segment's lock is held, so neither the archiver nor
// finishSealed can move or trim the file meanwhile. Until finishSealed,
// s.path is the live path, which names the next segment; the sealed file
// is linked under its sealed name, which fn gets.
func (l *Log) eachSealed(before uint64, fn func(d SealedSegment, path string) error) error {
	for _, s := range l.segments() {
		if s.no >= before {
			break
		}
		err := l.viewIn(s, func(tx *bolt.Tx) error {
			seal := s.seal.Load()
			if seal == nil {
				return fmt.Errorf("audit: segment %d is not sealed", s.no)
			}
			n, err := os.ReadFile(l.notePath(s.path, seal))
			if err != nil {
				n = seal.Body()
			}
			return fn(SealedSegment{No: s.no, First: seal.First, Last: seal.Last, Bytes: tx.Size(), Note: n}, l.segmentPath(s.path, seal))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// notePath is the seal note of a sealed segment whose file is at path.
// Between a seal's commit point and the end of its roll (finishSealed) the
// segment's path is still the live path, which names the next segment by
// then: its note is beside its sealed name.
func (l *Log) notePath(path string, seal *Seal) string {
	return sealNotePath(l.segmentPath(path, seal))
}

// segmentPath is the file of a sealed segment whose path is path: its
// sealed name while path is still the live path (see notePath).
func (l *Log) segmentPath(path string, seal *Seal) string {
	if path == l.path {
		return filepath.Join(SealedDir(l.path), SegmentFile(seal.Segment))
	}
	return path
}

// CheckSeals checks the seal note of every sealed segment against
// verifiers (the checkpoint verifier keys: seals are signed like
// checkpoints): the note must be there, carry a signature one of them
// verifies, and state the seal stored in the segment. It reports a
// seal_mismatch Problem for each one that does not, naming the segment's
// first record.
func (l *Log) CheckSeals(verifiers note.Verifiers) []Problem {
	var out []Problem
	for _, s := range l.segments() {
		stored := s.seal.Load()
		if stored == nil {
			break
		}
		s.mu.RLock()
		path := s.path
		s.mu.RUnlock()
		bad := func(detail string) {
			out = append(out, Problem{Seq: stored.First, Kind: KindSealMismatch, Detail: fmt.Sprintf("segment %d's seal note: %s", stored.Segment, detail)})
		}
		text, err := os.ReadFile(l.notePath(path, stored))
		if errors.Is(err, fs.ErrNotExist) && filepath.Dir(l.notePath(path, stored)) == SealedDir(l.path) {
			// The server (another process) may have archived the segment
			// since this log listed it: the note moved with it.
			if a := cmp.Or(l.opts.ArchiveDir, archiveDirOf(SealedDir(l.path))); a != "" {
				text, err = os.ReadFile(sealNotePath(filepath.Join(a, SegmentFile(stored.Segment))))
			}
		}
		if err != nil {
			bad("missing")
			continue
		}
		got, err := ParseSeal(text, verifiers)
		switch {
		case err != nil:
			bad(err.Error())
		case got != *stored:
			bad("not the seal stored in the segment")
		}
	}
	return out
}
