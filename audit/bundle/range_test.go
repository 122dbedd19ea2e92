package bundle

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// memTree is an in-memory tlog tree: the stored hashes written by
// tlog.StoredHashes, record by record.
type memTree struct {
	stored []tlog.Hash
	leaves []tlog.Hash
}

func (m *memTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(m.stored)) {
			return nil, fmt.Errorf("memTree: no stored hash %d", x)
		}
		out[i] = m.stored[x]
	}
	return out, nil
}

func (m *memTree) add(t testing.TB, data []byte) {
	hs, err := tlog.StoredHashes(int64(len(m.leaves)), data, m)
	if err != nil {
		t.Fatal(err)
	}
	m.stored = append(m.stored, hs...)
	m.leaves = append(m.leaves, tlog.RecordHash(data))
}

func newMemTree(t testing.TB, n int) *memTree {
	m := &memTree{}
	for i := range n {
		m.add(t, fmt.Appendf(nil, "leaf %d", i))
	}
	return m
}

func TestRangeProofExhaustive(t *testing.T) {
	const maxSize = 40
	m := newMemTree(t, maxSize)
	other := tlog.RecordHash([]byte("other"))
	for size := int64(1); size <= maxSize; size++ {
		want, err := tlog.TreeHash(size, m)
		if err != nil {
			t.Fatal(err)
		}
		for from := int64(0); from < size; from++ {
			for to := from + 1; to <= size; to++ {
				proof, err := RangeProof(from, to, size, m)
				if err != nil {
					t.Fatalf("RangeProof(%d,%d,%d): %v", from, to, size, err)
				}
				if n, _ := RangeProofSize(from, to, size); n != len(proof) {
					t.Fatalf("RangeProofSize(%d,%d,%d) = %d, proof has %d", from, to, size, n, len(proof))
				}
				leaves := m.leaves[from:to]
				got, err := RangeRoot(from, to, size, leaves, proof)
				if err != nil || got != want {
					t.Fatalf("RangeRoot(%d,%d,%d) = %v, %v; want %v", from, to, size, got, err, want)
				}
				mustDiffer := func(what string, l, p []tlog.Hash) {
					t.Helper()
					h, err := RangeRoot(from, to, size, l, p)
					if err == nil && h == want {
						t.Fatalf("range [%d,%d) size %d: %s still gives the root", from, to, size, what)
					}
				}
				// Every changed leaf or proof hash.
				for i := range leaves {
					l := clone(leaves)
					l[i] = other
					mustDiffer(fmt.Sprintf("changed leaf %d", i), l, proof)
				}
				for i := range proof {
					p := clone(proof)
					p[i] = other
					mustDiffer(fmt.Sprintf("changed proof hash %d", i), leaves, p)
				}
				// Missing / extra leaves and proof hashes.
				for i := range leaves {
					l := append(clone(leaves[:i]), leaves[i+1:]...)
					if len(l) > 0 {
						mustDiffer(fmt.Sprintf("missing leaf %d", i), l, proof)
					}
				}
				mustDiffer("extra leaf", append(clone(leaves), other), proof)
				mustDiffer("extra proof hash", leaves, append(clone(proof), other))
				if len(proof) > 0 {
					mustDiffer("missing proof hash", leaves, proof[:len(proof)-1])
				}
				// Reordered leaves and proof hashes (adjacent swaps of distinct hashes).
				for i := 0; i+1 < len(leaves); i++ {
					l := clone(leaves)
					l[i], l[i+1] = l[i+1], l[i]
					mustDiffer(fmt.Sprintf("swapped leaves %d,%d", i, i+1), l, proof)
				}
				for i := 0; i+1 < len(proof); i++ {
					p := clone(proof)
					p[i], p[i+1] = p[i+1], p[i]
					mustDiffer(fmt.Sprintf("swapped proof hashes %d,%d", i, i+1), leaves, p)
				}
				// A proof for a shifted range of the same length does not fit.
				if to < size {
					mustDiffer("leaves shifted by one", m.leaves[from+1:to+1], proof)
				}
			}
		}
	}
}

func TestRangeProofEdges(t *testing.T) {
	m := newMemTree(t, 8)
	for _, tc := range []struct{ from, to, size int64 }{
		{0, 0, 8}, {3, 2, 8}, {-1, 2, 8}, {0, 9, 8}, {8, 9, 8},
	} {
		if _, err := RangeProof(tc.from, tc.to, tc.size, m); !errors.Is(err, ErrRangeProof) {
			t.Errorf("RangeProof(%d,%d,%d) err = %v, want ErrRangeProof", tc.from, tc.to, tc.size, err)
		}
		if _, err := RangeRoot(tc.from, tc.to, tc.size, nil, nil); !errors.Is(err, ErrRangeProof) {
			t.Errorf("RangeRoot(%d,%d,%d) err = %v, want ErrRangeProof", tc.from, tc.to, tc.size, err)
		}
	}
	// The whole tree needs no proof.
	p, err := RangeProof(0, 8, 8, m)
	if err != nil || len(p) != 0 {
		t.Fatalf("RangeProof(0,8,8) = %d hashes, %v", len(p), err)
	}
	// A failing hash reader is reported.
	bad := tlog.HashReaderFunc(func([]int64) ([]tlog.Hash, error) { return nil, errors.New("boom") })
	if _, err := RangeProof(2, 3, 8, bad); err == nil {
		t.Fatal("RangeProof with failing reader: no error")
	}
	short := tlog.HashReaderFunc(func([]int64) ([]tlog.Hash, error) { return nil, nil })
	if _, err := RangeProof(2, 3, 8, short); err == nil {
		t.Fatal("RangeProof with short reader: no error")
	}
}

// TestRangeProofSizeBound checks the proof stays logarithmic.
func TestRangeProofSizeBound(t *testing.T) {
	for _, size := range []int64{1, 2, 3, 1000, 1 << 20, 1<<40 + 12345} {
		for _, r := range [][2]int64{{0, 1}, {size / 3, size/3 + 1}, {size / 2, size}, {size - 1, size}} {
			if r[0] >= r[1] {
				continue
			}
			n, err := RangeProofSize(r[0], r[1], size)
			if err != nil {
				t.Fatal(err)
			}
			bound := 2
			for s := size; s > 1; s = (s + 1) / 2 {
				bound += 2
			}
			if n > bound {
				t.Errorf("RangeProofSize(%d,%d,%d) = %d > %d", r[0], r[1], size, n, bound)
			}
		}
	}
}

func clone(h []tlog.Hash) []tlog.Hash { return append([]tlog.Hash(nil), h...) }
