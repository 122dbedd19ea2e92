package bundle_test

import (
	"fmt"

	"github.com/custos-mcp/custos/audit/bundle"
	"golang.org/x/mod/sumdb/tlog"
)

// A verifier recomputes the root of a tree of 5 leaves from leaves 1..2 and
// the range proof, without seeing leaves 0, 3 and 4.
func ExampleRangeRoot() {
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(ix))
		for i, x := range ix {
			out[i] = stored[x]
		}
		return out, nil
	})
	var leaves []tlog.Hash
	for i := range 5 {
		data := fmt.Appendf(nil, "record %d", i)
		hs, _ := tlog.StoredHashes(int64(i), data, r)
		stored = append(stored, hs...)
		leaves = append(leaves, tlog.RecordHash(data))
	}
	proof, _ := bundle.RangeProof(1, 3, 5, r)
	root, _ := bundle.RangeRoot(1, 3, 5, leaves[1:3], proof)
	want, _ := tlog.TreeHash(5, r)
	fmt.Println(len(proof), root == want)
	// Output: 3 true
}
