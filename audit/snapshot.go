package audit

import (
	"fmt"
	"io"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"
)

// Snapshot describes a consistent copy of the log written by WriteSnapshot:
// the copy's byte size and, in the same transaction, its head record and
// its Merkle tree (size = HeadSeq).
type Snapshot struct {
	Bytes    int64
	HeadSeq  uint64
	HeadHash string
	TreeSize int64
	TreeRoot tlog.Hash
}

// WriteSnapshot writes a consistent copy of the whole log file with bbolt's
// tx.WriteTo inside one read transaction (bbolt's supported hot backup):
// the writer goes on appending meanwhile, and the copy holds exactly the
// records committed when the transaction began. It first checks the head
// (as Open does) and reads the tree, then calls open with the Snapshot
// (Bytes known) and writes the copy to the writer open returns.
//
// Caveat: the transaction lasts as long as the copy. A long read
// transaction delays bbolt's remapping when the file must grow (appends
// then wait); the mmap grows by doubling, so this is rare, but write the
// copy to fast storage rather than a slow stream.
func (l *Log) WriteSnapshot(open func(Snapshot) (io.Writer, error)) (Snapshot, error) {
	var s Snapshot
	err := l.view(func(tx *bolt.Tx) error {
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
		s = Snapshot{Bytes: tx.Size(), HeadSeq: seq, HeadHash: hash, TreeSize: n, TreeRoot: root}
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
