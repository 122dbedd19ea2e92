package audit

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"
)

// The Merkle tree over the records (RFC 6962 hashing, golang.org/x/mod/sumdb/tlog
// storage layout). Leaf i (0-based) is record seq i+1; its leaf data are the
// record's canonical bytes exactly as stored; the tree of size N covers
// records 1..N. See doc.go ("Merkle tree") and docs/audit-format.md.

var (
	// bucketTree holds tlog's stored hashes: key = 8-byte big-endian stored
	// hash index (tlog.StoredHashIndex), value = 32 raw bytes.
	bucketTree = []byte("tlog")
	// metaTreeSize is the 8-byte big-endian number of leaves whose stored
	// hashes are in bucketTree. It equals head_seq except while a log written
	// before the tree existed awaits or undergoes migration.
	metaTreeSize = []byte("tree_size")
)

// migrateChunk is the number of records whose stored hashes one migration
// write transaction adds.
var migrateChunk int64 = 10000 // a variable so that tests can cross chunks cheaply

// recordsChunk is the number of records Records reads per read transaction.
var recordsChunk uint64 = 4096 // a variable so that tests can cross chunks cheaply

// LeafHash is the Merkle leaf hash of a record, computed from its canonical
// bytes exactly as stored (Encode output, no trailing newline):
//
//	LeafHash = SHA-256(0x00 || canonical)   (tlog.RecordHash, RFC 6962 leaf)
//
// It differs from the chain hash (HashRecord), which uses a domain prefix.
func LeafHash(canonical []byte) tlog.Hash {
	return tlog.RecordHash(canonical)
}

// treeKey is the storage key of stored hash index i: 8 bytes, big-endian.
func treeKey(i int64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, uint64(i))
	return k
}

// storingSeq is the seq of the record whose append wrote stored hash index i:
// node (level, n) is completed by leaf (n+1)<<level - 1.
func storingSeq(i int64) uint64 {
	level, n := tlog.SplitStoredHashIndex(i)
	return uint64(n+1) << uint(level)
}

// txHashReader is a tlog.HashReader over the tlog bucket of one transaction.
type txHashReader struct{ b *bolt.Bucket }

func (r txHashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		v := r.b.Get(treeKey(idx))
		if len(v) != tlog.HashSize {
			return nil, &CorruptError{Seq: storingSeq(idx), Kind: KindTreeMismatch, Detail: fmt.Sprintf("stored tree hash %d missing or malformed", idx)}
		}
		copy(out[i][:], v)
	}
	return out, nil
}

// readTreeSize returns meta tree_size and whether the tree storage exists
// (both the tlog bucket and meta tree_size). A log written before the tree
// existed has neither.
func readTreeSize(tx *bolt.Tx) (size int64, ok bool, err error) {
	meta, tree := tx.Bucket(bucketMeta), tx.Bucket(bucketTree)
	v := meta.Get(metaTreeSize)
	switch {
	case tree == nil && v == nil:
		return 0, false, nil
	case tree == nil || len(v) != 8:
		return 0, false, &CorruptError{Kind: KindTreeRootMismatch, Detail: "tlog bucket and meta tree_size disagree (one missing or malformed)"}
	}
	return int64(binary.BigEndian.Uint64(v)), true, nil
}

// builtTree returns, inside tx, the tree size and a reader of its stored
// hashes. It fails with ErrNoTree when the log has no tree storage yet.
func builtTree(tx *bolt.Tx) (int64, txHashReader, error) {
	size, ok, err := readTreeSize(tx)
	if err != nil {
		return 0, txHashReader{}, err
	}
	if !ok {
		return 0, txHashReader{}, fmt.Errorf("%w: the log predates the Merkle tree; open it read-write once to migrate", ErrNoTree)
	}
	return size, txHashReader{tx.Bucket(bucketTree)}, nil
}

// putStoredHashes writes the stored hashes that leaf n adds (tlog.StoredHashes)
// into tree. An index already holding the same hash is left alone (a rerun);
// one holding a different hash is corruption: nothing is ever overwritten.
func putStoredHashes(tree *bolt.Bucket, n int64, canonical []byte) error {
	hashes, err := tlog.StoredHashes(n, canonical, txHashReader{tree})
	if err != nil {
		return err
	}
	base := tlog.StoredHashIndex(0, n)
	tree.FillPercent = 1.0 // indexes only ever grow: pack pages full
	for j := range hashes {
		idx := base + int64(j)
		k := treeKey(idx)
		if old := tree.Get(k); old != nil {
			if string(old) != string(hashes[j][:]) {
				return &CorruptError{Seq: uint64(n) + 1, Kind: KindTreeMismatch, Expected: fmtHash(old), Got: fmtHash(hashes[j][:]), Detail: fmt.Sprintf("stored tree hash %d already present with another value", idx)}
			}
			continue
		}
		if err := tree.Put(k, hashes[j][:]); err != nil {
			return err
		}
	}
	return nil
}

// migrateTree builds the Merkle tree of a log written before it existed, in
// write transactions of migrateChunk records each. Each transaction adds the
// stored hashes of the next records and advances meta tree_size, so an
// interrupted migration resumes where it stopped. It does nothing (and
// writes nothing) when the tree already covers every record.
func (l *Log) migrateTree(ctx context.Context) error {
	var size int64
	var headSeq uint64
	var ok bool
	live := l.live()
	err := live.view(func(tx *bolt.Tx) error {
		var err error
		if size, ok, err = readTreeSize(tx); err != nil {
			return err
		}
		h, err := readHead(tx.Bucket(bucketMeta))
		headSeq = h.seq
		return err
	})
	if err != nil {
		return err
	}
	if ok && size == int64(headSeq) {
		return nil
	}
	if size > int64(headSeq) {
		return &CorruptError{Seq: headSeq, Kind: KindTreeRootMismatch, Expected: fmt.Sprintf("tree size <= %d", headSeq), Got: fmt.Sprint(size), Detail: "the Merkle tree covers more records than the log holds"}
	}
	start := time.Now()
	l.log.Info("audit Merkle tree migration started", "tree_size", size, "head_seq", headSeq)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var done bool
		err := live.update(func(tx *bolt.Tx) error {
			cur, ok, err := readTreeSize(tx)
			if err != nil {
				return err
			}
			meta := tx.Bucket(bucketMeta)
			h, err := readHead(meta)
			if err != nil {
				return err
			}
			tree := tx.Bucket(bucketTree)
			if !ok {
				if tree, err = tx.CreateBucket(bucketTree); err != nil {
					return err
				}
			}
			if cur > int64(h.seq) {
				return &CorruptError{Seq: h.seq, Kind: KindTreeRootMismatch, Expected: fmt.Sprintf("tree size <= %d", h.seq), Got: fmt.Sprint(cur), Detail: "the Merkle tree covers more records than the log holds"}
			}
			end := min(cur+migrateChunk, int64(h.seq))
			records := tx.Bucket(bucketRecords)
			for n := cur; n < end; n++ {
				canon := records.Get(seqKey(uint64(n) + 1))
				if canon == nil {
					return &CorruptError{Seq: uint64(n) + 1, Kind: KindSeqGap, Detail: "record missing while building the Merkle tree"}
				}
				if err := putStoredHashes(tree, n, canon); err != nil {
					return err
				}
			}
			if err := meta.Put(metaTreeSize, seqKey(uint64(end))); err != nil {
				return err
			}
			size, headSeq, done = end, h.seq, end == int64(h.seq)
			return nil
		})
		if err != nil {
			l.log.Error("audit Merkle tree migration failed", "tree_size", size, "err", err)
			return fmt.Errorf("audit: Merkle tree migration: %w", err)
		}
		if done {
			l.log.Info("audit Merkle tree migration finished", "tree_size", size, "elapsed", time.Since(start).String())
			return nil
		}
		l.log.Info("audit Merkle tree migration progress", "tree_size", size, "head_seq", headSeq, "elapsed", time.Since(start).String())
	}
}

// view runs fn in a read transaction of the live segment (ErrClosed after
// Close).
func (l *Log) view(fn func(tx *bolt.Tx) error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return l.live().view(fn)
}

// viewSeq runs fn in a read transaction of the segment holding record seq.
func (l *Log) viewSeq(seq uint64, fn func(tx *bolt.Tx, s *segment) error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	s := l.segmentOf(seq)
	return s.view(func(tx *bolt.Tx) error { return fn(tx, s) })
}

// viewIn runs fn in a read transaction of segment s (ErrClosed after
// Close).
func (l *Log) viewIn(s *segment, fn func(tx *bolt.Tx) error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return s.view(fn)
}

// TreeHead returns the size and root hash of the Merkle tree over every
// durable record, read in one transaction (a consistent snapshot). Its size
// is the head seq of that snapshot, or Head's if smaller: bbolt shows a
// commit's meta page to new read transactions (through the mmap) before
// the commit's fdatasync has returned, and a checkpoint signed over such a
// record would, after a power loss in that window, be larger than the log
// (which serve then refuses as rolled back); Head moves only once the
// commit has returned. It fails with ErrNoTree when the tree does not yet
// cover every record: a log written before the tree existed, opened with
// Options.ReadOnly (a read-write Open migrates it). An empty log has size 0
// and the RFC 6962 empty root SHA-256("").
func (l *Log) TreeHead(ctx context.Context) (size int64, root tlog.Hash, err error) {
	if err := ctx.Err(); err != nil {
		return 0, tlog.Hash{}, err
	}
	durable, _ := l.Head() // before the snapshot: every record up to it is in it
	err = l.view(func(tx *bolt.Tx) error {
		n, r, err := builtTree(tx)
		if err != nil {
			return err
		}
		h, err := readHead(tx.Bucket(bucketMeta))
		if err != nil {
			return err
		}
		if n != int64(h.seq) {
			return fmt.Errorf("%w: the tree covers %d of %d records; open the log read-write once to migrate", ErrNoTree, n, h.seq)
		}
		size = n
		root, err = tlog.TreeHash(n, r)
		return err
	})
	if err != nil {
		return 0, tlog.Hash{}, err
	}
	if d := int64(durable); d < size {
		// Records are never rewritten: the tree of the first d is the
		// same in any later snapshot. Its hashes may lie in a segment
		// sealed since (a roll seals every committed record), so the
		// hash is read across segments.
		size = d
		if root, err = l.TreeHash(size); err != nil {
			return 0, tlog.Hash{}, err
		}
	}
	return size, root, nil
}

// logHashReader is a tlog.HashReader over every segment of the log: each
// stored hash is read from the segment whose append stored it (index i was
// stored by record storingSeq(i)).
type logHashReader struct{ l *Log }

func (r logHashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	segs := r.l.segments()
	for i := 0; i < len(indexes); {
		s := segmentOf(segs, storingSeq(indexes[i]))
		j := i + 1
		for j < len(indexes) && segmentOf(segs, storingSeq(indexes[j])) == s {
			j++
		}
		err := r.l.viewIn(s, func(tx *bolt.Tx) error {
			tree := tx.Bucket(bucketTree)
			if tree == nil {
				return fmt.Errorf("%w: the log predates the Merkle tree; open it read-write once to migrate", ErrNoTree)
			}
			h, err := txHashReader{tree}.ReadHashes(indexes[i:j])
			copy(out[i:j], h)
			return err
		})
		if err != nil {
			return nil, err
		}
		i = j
	}
	return out, nil
}

// treeSize is the size of the Merkle tree (the live segment's tree_size),
// or ErrNoTree.
func (l *Log) treeSize() (int64, error) {
	var n int64
	err := l.view(func(tx *bolt.Tx) error {
		var err error
		n, _, err = builtTree(tx)
		return err
	})
	return n, err
}

// ReadHashes returns the stored hashes at the given tlog stored-hash indexes
// (tlog.StoredHashIndex), from whichever segments hold them: *Log is a
// tlog.HashReader. A missing index fails with a *CorruptError (kind
// tree_mismatch) if it lies inside the tree, which callers avoid by asking
// only for trees of size at most TreeHead's; ErrNoTree if the log has no
// tree yet.
func (l *Log) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	size, err := l.treeSize()
	if err != nil {
		return nil, err
	}
	limit := tlog.StoredHashCount(size)
	for _, idx := range indexes {
		if idx < 0 || idx >= limit {
			return nil, fmt.Errorf("%w: stored hash index %d, tree size %d", ErrOutOfRange, idx, size)
		}
	}
	return logHashReader{l}.ReadHashes(indexes)
}

// TreeHash returns the root hash of the tree of the first size records
// (0 <= size <= tree size, else ErrOutOfRange).
func (l *Log) TreeHash(size int64) (tlog.Hash, error) {
	n, err := l.treeSize()
	if err != nil {
		return tlog.Hash{}, err
	}
	if size < 0 || size > n {
		return tlog.Hash{}, fmt.Errorf("%w: tree size %d requested, tree has %d", ErrOutOfRange, size, n)
	}
	return tlog.TreeHash(size, logHashReader{l})
}

// ProveRecord returns the inclusion proof (RFC 6962 audit path) of record
// seq (leaf seq-1) in the tree of the first size records; check it with
// tlog.CheckRecord(p, size, root, int64(seq)-1, LeafHash(canonical)).
// It requires 1 <= seq <= size <= tree size, else ErrOutOfRange. The
// record may lie in any segment.
func (l *Log) ProveRecord(seq uint64, size int64) (tlog.RecordProof, error) {
	n, err := l.treeSize()
	if err != nil {
		return nil, err
	}
	if seq < 1 || size > n || seq > uint64(max(size, 0)) {
		return nil, fmt.Errorf("%w: record %d in tree size %d requested, tree has %d", ErrOutOfRange, seq, size, n)
	}
	return tlog.ProveRecord(size, int64(seq)-1, logHashReader{l})
}

// ProveTree returns the consistency proof that the tree of the first
// newSize records extends the tree of the first oldSize records; check it
// with tlog.CheckTree(p, newSize, newRoot, oldSize, oldRoot). It requires
// 0 <= oldSize <= newSize <= tree size, else ErrOutOfRange. The proof from
// the empty tree (oldSize 0), like the proof between equal sizes, is empty.
func (l *Log) ProveTree(oldSize, newSize int64) (tlog.TreeProof, error) {
	n, err := l.treeSize()
	if err != nil {
		return nil, err
	}
	if oldSize < 0 || oldSize > newSize || newSize > n {
		return nil, fmt.Errorf("%w: consistency %d -> %d requested, tree has %d", ErrOutOfRange, oldSize, newSize, n)
	}
	if oldSize == 0 || oldSize == newSize {
		return tlog.TreeProof{}, nil
	}
	return tlog.ProveTree(newSize, oldSize, logHashReader{l})
}

// Records calls fn for records from..to (inclusive, 1 <= from <= to <= head
// seq, else ErrOutOfRange) in order, from whichever segments hold them,
// with each record's exact stored canonical bytes (the Merkle leaf data).
// The records are read in chunks of read transactions; canonical is valid
// only during the call, so fn must not retain it (copy it), and fn must
// not call the log's read methods (a nested bbolt read transaction can
// deadlock with the writer growing the file). A missing
// record fails with a *CorruptError (kind seq_gap); an error from fn stops
// the walk and is returned as is.
func (l *Log) Records(ctx context.Context, from, to uint64, fn func(seq uint64, canonical []byte) error) error {
	if from < 1 || to < from {
		return fmt.Errorf("%w: records %d..%d", ErrOutOfRange, from, to)
	}
	err := l.view(func(tx *bolt.Tx) error {
		h, err := readHead(tx.Bucket(bucketMeta))
		if err != nil {
			return err
		}
		if to > h.seq {
			return fmt.Errorf("%w: records %d..%d requested, head is %d", ErrOutOfRange, from, to, h.seq)
		}
		return nil
	})
	if err != nil {
		return err
	}
	next := from
	for next <= to {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := l.viewSeq(next, func(tx *bolt.Tx, s *segment) error {
			c := tx.Bucket(bucketRecords).Cursor()
			k, v := c.Seek(seqKey(next))
			for n := uint64(0); n < recordsChunk && next <= to; n++ {
				if seal := s.seal.Load(); k == nil && seal != nil && seal.Last < next {
					return nil // the next segment holds it
				}
				if len(k) != 8 || binary.BigEndian.Uint64(k) != next {
					return &CorruptError{Seq: next, Kind: KindSeqGap, Detail: "record missing"}
				}
				if err := fn(next, v); err != nil {
					return err
				}
				next++
				k, v = c.Next()
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// fmtHash renders raw hash bytes as lowercase hex, the Problem convention.
func fmtHash(b []byte) string { return fmt.Sprintf("%x", b) }
