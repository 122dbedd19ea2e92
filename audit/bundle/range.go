package bundle

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// A range-completeness proof shows that leaves [from, to) of the RFC 6962
// tree of size leaves are exactly a given list of leaf hashes: together with
// the hashes of the maximal subtrees disjoint from the range, they recompute
// the tree's root. A missing, extra, changed or reordered leaf changes the
// root (or the leaf count, which fixes the proof's shape).
//
// The subtrees are those met by the RFC 6962 section 2.1 recursion
//
//	MTH(D[lo:hi]) = NodeHash(MTH(D[lo:lo+k]), MTH(D[lo+k:hi])), k = largest power of 2 < hi-lo
//
// when it stops at every subtree that lies entirely inside or entirely
// outside [from, to); the proof lists the outside ones left to right (the
// order of a depth-first, left-first walk), which is the order RangeRoot
// consumes them in. There are at most 2·log₂(size) of them.

// RangeProof returns the range-completeness proof for the leaf range
// [from, to) (0-based leaf indexes, 0 <= from < to <= size) of the tree with
// size leaves, reading stored hashes from r (tlog.StoredHashIndex layout) in
// a single ReadHashes call.
func RangeProof(from, to, size int64, r tlog.HashReader) ([]tlog.Hash, error) {
	if err := checkRange(from, to, size); err != nil {
		return nil, err
	}
	var spans [][2]int64
	walkRange(0, size, from, to, &spans)
	if len(spans) == 0 {
		return []tlog.Hash{}, nil
	}
	var indexes []int64
	for _, s := range spans {
		indexes = storedIndexes(s[0], s[1], indexes)
	}
	hashes, err := r.ReadHashes(indexes)
	if err != nil {
		return nil, err
	}
	if len(hashes) != len(indexes) {
		return nil, fmt.Errorf("bundle: ReadHashes(%d indexes) returned %d hashes", len(indexes), len(hashes))
	}
	proof := make([]tlog.Hash, 0, len(spans))
	for _, s := range spans {
		var h tlog.Hash
		h, hashes = combineStored(s[0], s[1], hashes)
		proof = append(proof, h)
	}
	return proof, nil
}

// RangeProofSize returns the number of hashes in the range-completeness
// proof for [from, to) in a tree of size leaves.
func RangeProofSize(from, to, size int64) (int, error) {
	if err := checkRange(from, to, size); err != nil {
		return 0, err
	}
	var spans [][2]int64
	walkRange(0, size, from, to, &spans)
	return len(spans), nil
}

// RangeRoot recomputes the root of the tree with size leaves from the leaf
// hashes of leaves [from, to) (len(leafHashes) must be to-from) and the
// range-completeness proof returned by RangeProof. It fails if the proof or
// the leaf list has the wrong length; a wrong hash anywhere yields a
// different root, which the caller compares with a signed one.
func RangeRoot(from, to, size int64, leafHashes []tlog.Hash, proof []tlog.Hash) (tlog.Hash, error) {
	if err := checkRange(from, to, size); err != nil {
		return tlog.Hash{}, err
	}
	if int64(len(leafHashes)) != to-from {
		return tlog.Hash{}, fmt.Errorf("%w: %d leaf hashes for a range of %d leaves", ErrRangeProof, len(leafHashes), to-from)
	}
	if n, _ := RangeProofSize(from, to, size); n != len(proof) {
		return tlog.Hash{}, fmt.Errorf("%w: proof has %d hashes, want %d", ErrRangeProof, len(proof), n)
	}
	v := rangeVerifier{from: from, to: to, leaves: leafHashes, proof: proof}
	return v.root(0, size), nil
}

func checkRange(from, to, size int64) error {
	if from < 0 || from >= to || to > size {
		return fmt.Errorf("%w: invalid range [%d, %d) in a tree of %d leaves", ErrRangeProof, from, to, size)
	}
	return nil
}

// walkRange appends to spans, left to right, the maximal subtrees of the
// RFC 6962 subtree [lo, hi) that are disjoint from [from, to).
func walkRange(lo, hi, from, to int64, spans *[][2]int64) {
	switch {
	case hi <= from || lo >= to: // disjoint
		*spans = append(*spans, [2]int64{lo, hi})
	case from <= lo && hi <= to: // inside
	default:
		k := splitPoint(hi - lo)
		walkRange(lo, lo+k, from, to, spans)
		walkRange(lo+k, hi, from, to, spans)
	}
}

// splitPoint returns the largest power of two smaller than n (n >= 2).
func splitPoint(n int64) int64 {
	k := int64(1)
	for k<<1 < n {
		k <<= 1
	}
	return k
}

// storedIndexes appends the stored-hash indexes whose combination is the
// hash of the subtree [lo, hi): the complete aligned subtrees of sizes
// decreasing powers of two that tile it (as tlog's TreeHash does). Every
// subtree reached by walkRange is aligned that way.
func storedIndexes(lo, hi int64, need []int64) []int64 {
	for lo < hi {
		k, level := maxAligned(hi - lo)
		need = append(need, tlog.StoredHashIndex(level, lo>>uint(level)))
		lo += k
	}
	return need
}

// combineStored consumes the hashes storedIndexes(lo, hi) asked for and
// returns the subtree hash and the rest.
func combineStored(lo, hi int64, hashes []tlog.Hash) (tlog.Hash, []tlog.Hash) {
	n := 0
	for l := lo; l < hi; n++ {
		k, _ := maxAligned(hi - l)
		l += k
	}
	h := hashes[n-1]
	for i := n - 2; i >= 0; i-- {
		h = tlog.NodeHash(hashes[i], h)
	}
	return h, hashes[n:]
}

// maxAligned returns the largest power of two k <= n and log₂ k.
func maxAligned(n int64) (k int64, level int) {
	k = 1
	for k<<1 <= n {
		k <<= 1
		level++
	}
	return k, level
}

type rangeVerifier struct {
	from, to int64
	leaves   []tlog.Hash
	proof    []tlog.Hash
	used     int
}

func (v *rangeVerifier) root(lo, hi int64) tlog.Hash {
	switch {
	case hi <= v.from || lo >= v.to:
		h := v.proof[v.used]
		v.used++
		return h
	case v.from <= lo && hi <= v.to:
		return subtreeRoot(v.leaves[lo-v.from : hi-v.from])
	default:
		k := splitPoint(hi - lo)
		l := v.root(lo, lo+k)
		return tlog.NodeHash(l, v.root(lo+k, hi))
	}
}

// subtreeRoot is MTH over leaf hashes (RFC 6962 section 2.1), len(leaves) >= 1.
func subtreeRoot(leaves []tlog.Hash) tlog.Hash {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := splitPoint(int64(len(leaves)))
	return tlog.NodeHash(subtreeRoot(leaves[:k]), subtreeRoot(leaves[k:]))
}
