package access

import (
	"context"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/audit"
)

// View is the prefix 1..N of an open audit log: what a request reads. The
// log is append-only, so these records, their tree hashes and every root of
// a tree of at most N leaves never change; each method reads in its own
// short read transactions (Records and Inputs in chunks of at most 4,096
// records), so the writer goes on appending. It satisfies bundle.Source,
// report.Source, impact.InputSource and checkpoint.Tree.
type View struct {
	log  *audit.Log
	n    uint64
	hash string // record N's hash
}

// NewView pins the prefix 1..n of log (n <= its head).
func NewView(log *audit.Log, n uint64, hash string) View { return View{log: log, n: n, hash: hash} }

// Head is record N: the end of the view.
func (v View) Head() (uint64, string) { return v.n, v.hash }

func (v View) size(what string, size int64) error {
	if size < 0 || size > int64(v.n) {
		return fmt.Errorf("%w: %s %d, the view ends at %d", audit.ErrOutOfRange, what, size, v.n)
	}
	return nil
}

// TreeHead is the tree of the view: size N and its root.
func (v View) TreeHead(ctx context.Context) (int64, tlog.Hash, error) {
	if err := ctx.Err(); err != nil {
		return 0, tlog.Hash{}, err
	}
	root, err := v.log.TreeHash(int64(v.n))
	return int64(v.n), root, err
}

// TreeHash is the root of the tree of the first size records (size <= N).
func (v View) TreeHash(size int64) (tlog.Hash, error) {
	if err := v.size("tree size", size); err != nil {
		return tlog.Hash{}, err
	}
	return v.log.TreeHash(size)
}

// ReadHashes reads stored tree hashes. Callers ask only for trees of at most
// N leaves (their hashes are written once and never change).
func (v View) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	limit := tlog.StoredHashCount(int64(v.n))
	for _, i := range indexes {
		if i < 0 || i >= limit {
			return nil, fmt.Errorf("%w: stored hash index %d, the view ends at %d", audit.ErrOutOfRange, i, v.n)
		}
	}
	return v.log.ReadHashes(indexes)
}

// ProveRecord is the inclusion proof of record seq in the tree of size
// records (seq <= size <= N).
func (v View) ProveRecord(seq uint64, size int64) (tlog.RecordProof, error) {
	if err := v.size("tree size", size); err != nil {
		return nil, err
	}
	return v.log.ProveRecord(seq, size)
}

// ProveTree is the consistency proof from oldSize to newSize (<= N).
func (v View) ProveTree(oldSize, newSize int64) (tlog.TreeProof, error) {
	if err := v.size("tree size", newSize); err != nil {
		return nil, err
	}
	return v.log.ProveTree(oldSize, newSize)
}

// Records calls fn for records from..to (to <= N) in chunks of read
// transactions; canonical is valid only during the call.
func (v View) Records(ctx context.Context, from, to uint64, fn func(seq uint64, canonical []byte) error) error {
	if to > v.n {
		return fmt.Errorf("%w: records %d..%d, the view ends at %d", audit.ErrOutOfRange, from, to, v.n)
	}
	return v.log.Records(ctx, from, to, fn)
}

// Inputs calls fn for the stored decision inputs of records from..min(to,
// N).
func (v View) Inputs(ctx context.Context, from, to uint64, fn func(seq uint64, input []byte) error) error {
	to = min(to, v.n)
	if from > to {
		return nil
	}
	return v.log.Inputs(ctx, from, to, fn)
}
