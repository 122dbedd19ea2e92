package policy

import (
	"sync"

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
//
// A frame's entries live in one slice, chained by hash from the map, and
// the copies of their keys in a shared arena, so that a value put costs
// no allocation of its own (a first decision puts a few dozen).
type flatCache struct {
	frames []flatFrame
	arena  refArena
}

// flatFrame is one frame: first maps a key hash to 1 + the index in
// entries of the last entry put with that hash, whose next (1 + index, or
// 0) leads to the one before.
type flatFrame struct {
	first   map[uint64]int32
	entries []flatEntry
}

type flatEntry struct {
	ref       ast.Ref // a copy: OPA reuses its key slices
	value     *ast.Term
	undefined bool
	next      int32
}

// flatFrameHint is the room a new frame is made with: about what a first
// decision under the default policy puts.
const flatFrameHint = 8

// An arena chunk holds twice as many key terms as the one before, from
// flatArenaFirst up to flatArenaMax.
const (
	flatArenaFirst = 32
	flatArenaMax   = 256
)

var _ topdown.VirtualCache = (*flatCache)(nil)

// flatCaches holds released flat caches for reuse: a first decision's
// cache grows to a few dozen entries (some KB), which was a sixth of what
// the decision allocated.
var flatCaches = sync.Pool{New: func() any {
	c := &flatCache{frames: make([]flatFrame, 1, 2)}
	c.frames[0] = newFlatFrame()
	return c
}}

// newFlatCache returns an empty flat cache, for one evaluation; release it
// when that evaluation has returned.
func newFlatCache() *flatCache { return flatCaches.Get().(*flatCache) }

// release empties c and puts it back for reuse. The evaluation that used c
// must have returned (OPA keeps no reference to its virtual cache beyond
// it), and c must not be used again: its next user gets it empty, with the
// room it grew to and its arena's last chunk, cleared, so that it keeps
// no value or key of this evaluation alive.
func (c *flatCache) release() {
	if len(c.frames) > 1 {
		clear(c.frames[1:])
		c.frames = c.frames[:1]
	}
	f := &c.frames[0]
	if len(f.entries) > flatReuseMax {
		*f = newFlatFrame() // a frame grown past the bound is not kept
	} else {
		clear(f.first)
		clear(f.entries)
		f.entries = f.entries[:0]
	}
	clear(c.arena.chunk)
	c.arena.chunk = c.arena.chunk[:0]
	flatCaches.Put(c)
}

// flatReuseMax bounds the entries of a frame that release keeps for reuse.
const flatReuseMax = 256

func newFlatFrame() flatFrame {
	return flatFrame{first: make(map[uint64]int32, flatFrameHint), entries: make([]flatEntry, 0, flatFrameHint)}
}

func (c *flatCache) Push() { c.frames = append(c.frames, newFlatFrame()) }

func (c *flatCache) Pop() {
	if len(c.frames) > 1 {
		c.frames[len(c.frames)-1] = flatFrame{}
		c.frames = c.frames[:len(c.frames)-1]
		return
	}
	c.frames[0] = newFlatFrame()
}

func (c *flatCache) top() *flatFrame { return &c.frames[len(c.frames)-1] }

// find returns the entry of f for ref, whose hash is h; nil if none.
func (f *flatFrame) find(ref ast.Ref, h uint64) *flatEntry {
	for i := f.first[h]; i != 0; {
		e := &f.entries[i-1]
		if e.ref.Equal(ref) {
			return e
		}
		i = e.next
	}
	return nil
}

func (c *flatCache) Get(ref ast.Ref) (*ast.Term, bool) {
	if e := c.top().find(ref, refHash(ref)); e != nil {
		if e.undefined {
			return nil, true
		}
		return e.value, false
	}
	return nil, false
}

func (c *flatCache) Put(ref ast.Ref, value *ast.Term) { c.put(ref, value, nil) }

// put is Put; copied, if not nil, is a copy of ref that the caller will
// not change, which a new entry keeps instead of making its own.
func (c *flatCache) put(ref ast.Ref, value *ast.Term, copied ast.Ref) {
	f, h := c.top(), refHash(ref)
	if e := f.find(ref, h); e != nil {
		if value != nil {
			e.value = value
		} else {
			e.undefined = true
		}
		return
	}
	if copied == nil {
		copied = c.arena.copy(ref)
	}
	f.entries = append(f.entries, flatEntry{ref: copied, value: value, undefined: value == nil, next: f.first[h]})
	f.first[h] = int32(len(f.entries))
}

// refArena copies keys into shared chunks of terms, which are never
// reused: a copy lives as long as anything holds it (and keeps its chunk).
type refArena struct{ chunk []*ast.Term }

// copy returns a copy of ref.
func (a *refArena) copy(ref ast.Ref) ast.Ref {
	if cap(a.chunk)-len(a.chunk) < len(ref) {
		a.chunk = make([]*ast.Term, 0, max(min(2*cap(a.chunk), flatArenaMax), flatArenaFirst, len(ref)))
	}
	n := len(a.chunk)
	a.chunk = append(a.chunk, ref...)
	return a.chunk[n:len(a.chunk):len(a.chunk)]
}

func (c *flatCache) Keys() []ast.Ref {
	var keys []ast.Ref
	for _, e := range c.top().entries {
		if e.value != nil { // as OPA's: keys with a value, undefined or not
			keys = append(keys, e.ref)
		}
	}
	return keys
}
