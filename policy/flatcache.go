package policy

import (
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// flatCache is a topdown.VirtualCache that keeps each frame's values in
// one map by a hash of the key (refHash), where OPA's own cache keeps a
// trie with a hash map per key segment: a function call's key is the
// function and each of its arguments, so every value of a first
// evaluation cost a chain of maps. It answers exactly what OPA's cache
// answers (TestFlatCacheAgreesWithOPA runs both on the same operations):
// keys match term by term with Term.Equal, only the top frame is read,
// Pop drops the top frame, and a key marked undefined stays undefined
// when a value is put for it later.
type flatCache struct {
	frames []map[uint64][]flatEntry
}

type flatEntry struct {
	ref       ast.Ref // a copy: OPA reuses its key slices
	value     *ast.Term
	undefined bool
}

var _ topdown.VirtualCache = (*flatCache)(nil)

func newFlatCache() *flatCache {
	return &flatCache{frames: []map[uint64][]flatEntry{{}}}
}

func (c *flatCache) Push() { c.frames = append(c.frames, map[uint64][]flatEntry{}) }

func (c *flatCache) Pop() {
	if len(c.frames) > 1 {
		c.frames = c.frames[:len(c.frames)-1]
		return
	}
	c.frames[0] = map[uint64][]flatEntry{}
}

func (c *flatCache) top() map[uint64][]flatEntry { return c.frames[len(c.frames)-1] }

func (c *flatCache) Get(ref ast.Ref) (*ast.Term, bool) {
	for _, e := range c.top()[refHash(ref)] {
		if e.ref.Equal(ref) {
			if e.undefined {
				return nil, true
			}
			return e.value, false
		}
	}
	return nil, false
}

func (c *flatCache) Put(ref ast.Ref, value *ast.Term) {
	m, h := c.top(), refHash(ref)
	for i := range m[h] {
		if e := &m[h][i]; e.ref.Equal(ref) {
			if value != nil {
				e.value = value
			} else {
				e.undefined = true
			}
			return
		}
	}
	m[h] = append(m[h], flatEntry{ref: slices.Clone(ref), value: value, undefined: value == nil})
}

func (c *flatCache) Keys() []ast.Ref {
	var keys []ast.Ref
	for _, es := range c.top() {
		for _, e := range es {
			if e.value != nil { // as OPA's: keys with a value, undefined or not
				keys = append(keys, e.ref)
			}
		}
	}
	return keys
}
