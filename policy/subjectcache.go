package policy

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The subject cache keeps, across evaluations, the values OPA computes for
// rules that depend only on who asks: the caller's principal and purpose of
// use. Within one evaluation OPA memoizes every complete rule, partial rule
// and function call (keyed by its arguments) in a virtual cache; custos
// hands each evaluation a cache whose entries for such "subject-level" rules
// live in a store shared by every evaluation for the same principal and
// purpose under the same compiled policy. A clinician's second read then
// skips her grant mode, request checks and care team, and every per-resource
// function call (the default policy's class_decision, keyed by the resource
// features) whose arguments were seen before.
//
// Soundness rests on a static analysis of the compiled policy
// (subjectLevelRules): a rule is subject-level when nothing in it (head,
// body, else branches, comprehensions) refers to the input other than
// through input.principal… or input.purpose_of_use, it uses no `with`, and
// every rule it refers to is subject-level. A function's value is then a
// function of its arguments and the principal and purpose; a complete or
// partial rule's value a function of the principal and purpose.
//
// More precisely, of the parts of them the rule reads: the analysis also
// finds each rule's projection, the set of fields of the principal (sub,
// roles, client_id, tenant, patients) and the purpose that the rule, and
// every rule it refers to, reads (input.principal.roles[_] reads roles;
// input.principal, or input.principal[x], reads every field). A value is
// kept in the store of its rule's projection of the request: a rule that
// reads only the roles and the purpose is shared by every principal with
// those roles and purpose, and a rule that reads nothing of the input (a
// constant, or a function of its arguments alone) by every request. The
// default policy decides a combination of resource features
// (class_decision) from the roles, tenant and purpose only, so a
// principal's first read reuses what colleagues' reads computed. A store is
// keyed by the projection's fields and a digest of their values, and
// belongs to one Engine, so a policy reload starts empty. The
// analysis is conservative: the bare `input`, a dynamic lookup into it,
// data reached through a dynamic reference that could name a non-subject
// rule, all make a rule (and everything that uses it) per-evaluation. The
// cache is not used for policies that call a nondeterministic builtin (or
// one that reads the clock, see readsTheClock), and only at the top frame:
// under `with`, OPA pushes a frame whose entries are kept per evaluation as
// usual.
//
// A value is published only when the evaluation that computed it has
// succeeded (evalCache.commit). OPA stores a rule's or function's value at
// its first solution and checks the other solutions and definitions for a
// conflict (or meets a builtin error) afterwards, aborting the evaluation:
// published at once, such a value would outlive the abort, and a policy
// whose fresh evaluation fails (and denies) would allow from the second
// request on. Published values are frozen (OPA sorts set and object keys
// lazily, in place) so that concurrent evaluations only read them.

// DefaultSubjectCache is how many subject-level values an Engine keeps in
// all its stores when Options.SubjectCache is zero (the bound of the first
// subject cache, 256 principals × 1,024 values).
const DefaultSubjectCache = 256 * 1024

// maxStores bounds how many stores (one per projection of a request that
// some rule reads, see above) an Engine keeps; beyond it an eighth of them,
// arbitrary ones, are dropped.
const maxStores = 4096

// subjectCacheEntries bounds the values kept per store (one projection of
// a request); beyond it new values are kept for the evaluation only, so
// that one principal's per-resource function results (a read's page-of-one
// call, keyed by the whole resource) cannot take all of the Engine's room.
const subjectCacheEntries = 1024

// policyCacheEntries bounds the values of the store of the empty projection
// (rules that read nothing of the input), shared by every request.
const policyCacheEntries = 4096

// A projection is a set of the request's parts a rule reads: one bit per
// principal field, and one for the purpose of use.
type projection uint8

const (
	readsSub projection = 1 << iota
	readsRoles
	readsClientID
	readsTenant
	readsPatients
	readsPurpose

	readsPrincipal = readsSub | readsRoles | readsClientID | readsTenant | readsPatients
	readsAll       = readsPrincipal | readsPurpose
)

// principalFields maps the fields of the principal document (principalTerm)
// to their bits. A field not listed here reads as every field.
var principalFields = map[string]projection{
	"sub": readsSub, "roles": readsRoles, "client_id": readsClientID,
	"tenant": readsTenant, "patients": readsPatients,
}

// storeKey names a shared store: a projection, and the digest of the
// request's values of its parts.
type storeKey struct {
	p      projection
	digest [32]byte
}

// subjectCaches is an Engine's set of shared stores, bounded in number and
// in values kept.
type subjectCaches struct {
	levels    ruleLevels
	maxValues int64
	values    atomic.Int64 // kept in the stores of m

	mu sync.Mutex // guards m; taken before a store's mu, never after
	m  map[storeKey]*subjectStore
}

// subjectStore is one projection's shared store of values, by rule or
// function-call key (an ast.Ref, matched exactly as OPA's virtual cache
// matches it: term by term, with Term.Equal). It is a flat map by a hash
// of the key rather than OPA's trie of hash maps (one per key segment): a
// store for a new combination of roles, tenant and purpose is filled with
// every value of a first evaluation at once, and building the trie cost
// about a quarter of that evaluation's allocations.
type subjectStore struct {
	mu      sync.RWMutex
	m       map[uint64]storedValue // refHash(key) -> the value of a key with that hash, and of any other in more
	n       int
	limit   int  // values kept at most
	dropped bool // no longer in subjectCaches.m: takes no more values
}

func newSubjectCaches(levels ruleLevels, maxValues int) *subjectCaches {
	return &subjectCaches{levels: levels, maxValues: int64(maxValues), m: make(map[storeKey]*subjectStore)}
}

// store returns the store for key, made if need be.
func (c *subjectCaches) store(key storeKey) *subjectStore {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[key]
	if !ok {
		if len(c.m) >= maxStores {
			c.dropLocked(maxStores / 8)
		}
		limit := subjectCacheEntries
		if key.p == 0 {
			limit = policyCacheEntries
		}
		s = &subjectStore{m: make(map[uint64]storedValue), limit: limit}
		c.m[key] = s
	}
	return s
}

// dropLocked drops n arbitrary stores, and their values from the count.
// c.mu is held.
func (c *subjectCaches) dropLocked(n int) {
	for k, s := range c.m {
		if n <= 0 {
			return
		}
		delete(c.m, k)
		s.mu.Lock()
		s.dropped = true
		c.values.Add(-int64(s.n))
		s.mu.Unlock()
		n--
	}
}

// forInput returns the virtual cache for one evaluation of in. Values it
// collects reach the shared stores only through its commit, which the
// engine calls when the evaluation has succeeded.
func (c *subjectCaches) forInput(in *Input) *evalCache {
	var fields *[numPrincipalFields][32]byte
	if in.Subject != nil {
		fields = &in.Subject.fields
	} else {
		f := principalFieldDigests(&in.Principal)
		fields = &f
	}
	return &evalCache{levels: c.levels, caches: c, fields: fields, purpose: in.PurposeOfUse, local: newFlatCache()}
}

// storeKey returns the key of the store for projection p of the request.
func (c *evalCache) storeKey(p projection) storeKey {
	return storeKey{p: p, digest: digest(func(b []byte) []byte {
		b = appendField(b, "custos/policy/projection/v1")
		b = append(b, byte(p))
		for i := range numPrincipalFields {
			if p&(1<<i) != 0 {
				b = append(b, c.fields[i][:]...)
			}
		}
		if p&readsPurpose != 0 {
			b = appendField(b, c.purpose)
		}
		return b
	})}
}

// evalCache is the topdown.VirtualCache of one evaluation. It reads
// subject-level entries of the top frame from the shared store of their
// rule's projection of this request; every value
// OPA puts goes to a cache of this evaluation alone, and the subject-level
// ones of the top frame are also kept as pending. OPA puts a rule's value at
// its first solution and only then checks the other solutions and
// definitions for a conflict (or meets a builtin error), aborting the
// evaluation: a value is therefore final only once the whole evaluation
// has succeeded, and only then does commit publish the pending values.
type evalCache struct {
	levels  ruleLevels
	caches  *subjectCaches
	fields  *[numPrincipalFields][32]byte // digests of the principal's fields
	purpose string
	stores  [readsAll + 1]*subjectStore // by projection, found on first use
	local   *flatCache
	depth   int // frames pushed by `with`
	pending []pendingValue
	// arena holds the copies of pending keys, which the stores keep
	// once published (with the chunks they are in).
	arena refArena
}

// pendingHint is the room made for pending values at the first: about
// what a first decision under the default policy puts.
const pendingHint = 16

type pendingValue struct {
	store *subjectStore
	ref   ast.Ref // a copy: OPA reuses its key slices
	value *ast.Term
}

func (c *evalCache) Push() { c.depth++; c.local.Push() }
func (c *evalCache) Pop()  { c.depth--; c.local.Pop() }

// storeFor returns the store that shares ref's value across evaluations;
// nil if its value is kept for this evaluation only.
func (c *evalCache) storeFor(ref ast.Ref) *subjectStore {
	if c.depth > 0 {
		return nil
	}
	ok, p := c.levels.keyLevel(ref)
	if !ok || !sharableKey(ref) {
		return nil
	}
	if c.stores[p] == nil {
		c.stores[p] = c.caches.store(c.storeKey(p))
	}
	return c.stores[p]
}

// sharableKey reports whether a virtual-cache key names a value by its
// exact text: after the root (data) or the function's reference, only
// strings, booleans, null, integers in canonical form and collections of
// them. OPA compares numbers by value (f(1) and f(1.0) are one key) while
// builtins such as json.marshal see their text, so a value computed for one
// spelling must not be served, across evaluations and principals, to a
// request that wrote another (within one evaluation OPA itself merges
// them); and a key that still holds a reference or a variable does not
// name a value at all.
func sharableKey(key ast.Ref) bool {
	for _, t := range key[min(1, len(key)):] {
		if !exactValue(t.Value) {
			return false
		}
	}
	return true
}

func exactValue(v ast.Value) bool {
	switch x := v.(type) {
	case ast.String, ast.Boolean, ast.Null:
		return true
	case ast.Number:
		i, ok := x.Int64()
		return ok && strconv.FormatInt(i, 10) == string(x)
	case *ast.Array:
		return !x.Until(func(t *ast.Term) bool { return !exactValue(t.Value) })
	case ast.Set:
		return !x.Until(func(t *ast.Term) bool { return !exactValue(t.Value) })
	case ast.Object:
		return !x.Until(func(k, v *ast.Term) bool { return !exactValue(k.Value) || !exactValue(v.Value) })
	default: // a reference, variable, call or comprehension
		return false
	}
}

func (c *evalCache) Get(ref ast.Ref) (*ast.Term, bool) {
	if s := c.storeFor(ref); s != nil {
		if v, undefined := s.get(ref); v != nil || undefined {
			return v, undefined
		}
	}
	return c.local.Get(ref)
}

func (s *subjectStore) get(ref ast.Ref) (*ast.Term, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lookup(ref)
}

// storedValue is one value of a subjectStore; value nil means undefined.
// more holds the values of other keys with the same hash (rare), so that a
// value kept costs no allocation of its own.
type storedValue struct {
	ref   ast.Ref
	value *ast.Term
	more  []storedValue
}

// lookup is what topdown.VirtualCache.Get answers for ref: the value, or
// (nil, true) for a key known to be undefined, or (nil, false) for an
// unknown key. s.mu is held.
func (s *subjectStore) lookup(ref ast.Ref) (*ast.Term, bool) {
	return s.lookupHash(refHash(ref), ref)
}

// lookupHash is lookup of ref, whose hash is h.
func (s *subjectStore) lookupHash(h uint64, ref ast.Ref) (*ast.Term, bool) {
	sv, ok := s.m[h]
	if !ok {
		return nil, false
	}
	if sv.ref.Equal(ref) {
		return sv.value, sv.value == nil
	}
	for _, o := range sv.more {
		if o.ref.Equal(ref) {
			return o.value, o.value == nil
		}
	}
	return nil, false
}

// refHash hashes ref's terms in order (ast.Ref.Hash sums them, so that
// the keys of f(a, b) and f(b, a) would always collide).
func refHash(ref ast.Ref) uint64 {
	h := uint64(14695981039346656037) // FNV-1a offset basis, over term hashes
	for _, t := range ref {
		h = (h ^ uint64(t.Value.Hash())) * 1099511628211
	}
	return h
}

func (c *evalCache) Put(ref ast.Ref, value *ast.Term) {
	var copied ast.Ref
	if s := c.storeFor(ref); s != nil {
		if c.pending == nil {
			c.pending = make([]pendingValue, 0, pendingHint)
		}
		copied = c.arena.copy(ref)
		c.pending = append(c.pending, pendingValue{store: s, ref: copied, value: value})
	}
	c.local.put(ref, value, copied)
}

func (c *evalCache) Keys() []ast.Ref { return c.local.Keys() }

// release gives the evaluation's own cache back for reuse; the evaluation
// must have returned, and commit (if at all) been called.
func (c *evalCache) release() {
	c.local.release()
	c.local = nil
}

// commit publishes the pending values of a successful evaluation to the
// shared stores, within their bounds. Values are frozen first.
func (c *evalCache) commit() {
	for _, s := range c.stores {
		if s != nil {
			s.publish(c.pending, c.caches)
		}
	}
	c.pending = nil
}

// publish puts the pending values that belong to s into it, within its
// bound and the Engine's (which concurrent publishers may overshoot by a
// value each).
func (s *subjectStore) publish(pending []pendingValue, c *subjectCaches) {
	if !slices.ContainsFunc(pending, func(p pendingValue) bool { return p.store == s }) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped {
		return
	}
	for _, p := range pending {
		if p.store != s {
			continue
		}
		if v, undefined := s.lookup(p.ref); v != nil || undefined {
			continue // published by another evaluation
		}
		if s.n >= s.limit || c.values.Load() >= c.maxValues {
			return
		}
		for _, t := range p.ref {
			freeze(t.Value)
		}
		if p.value != nil {
			freeze(p.value.Value)
		}
		s.keep(refHash(p.ref), p.ref, p.value)
		s.n++
		c.values.Add(1)
	}
}

// keep adds the value of ref, whose hash is h and which s does not hold.
// s.mu is held.
func (s *subjectStore) keep(h uint64, ref ast.Ref, value *ast.Term) {
	if sv, ok := s.m[h]; ok {
		sv.more = append(sv.more, storedValue{ref: ref, value: value})
		s.m[h] = sv
		return
	}
	s.m[h] = storedValue{ref: ref, value: value}
}

// freeze runs every lazy computation OPA's values do on first use, so that
// a value other goroutines will read is never written again: a set or an
// object sorts its keys in place the first time they are compared or listed
// (under a sync.Once, but other methods read the keys unsynchronized). The
// store's lock then publishes the finished value.
func freeze(v ast.Value) {
	switch x := v.(type) {
	case ast.Set:
		x.Sorted()
		x.Foreach(func(t *ast.Term) { freeze(t.Value) })
	case ast.Object:
		x.Keys()
		x.Foreach(func(k, v *ast.Term) { freeze(k.Value); freeze(v.Value) })
	case *ast.Array:
		x.Foreach(func(t *ast.Term) { freeze(t.Value) })
	case ast.Ref:
		for _, t := range x {
			freeze(t.Value)
		}
	}
}

// ruleLevels says, per node of the compiled rule tree, whether every rule
// at or below it is subject-level, and which projection they read.
type ruleLevels struct {
	root  *ast.TreeNode
	ok    map[*ast.TreeNode]bool       // node -> subtree is subject-level
	at    map[*ast.TreeNode]bool       // node -> rules at this node are subject-level
	reads map[*ast.TreeNode]projection // node -> what the subtree's rules read
	atRd  map[*ast.TreeNode]projection // node -> what the rules at this node read
	fns   *fnLevels                    // memo of keyLevel for function calls
}

// fnLevels memoizes keyLevel for function-call keys by the call's function
// reference term: OPA puts the compiled call's own term there, so there is
// one per call site of the policy (a bound guards against any other use).
type fnLevels struct {
	m sync.Map // *ast.Term -> fnLevel
	n atomic.Int32
}

type fnLevel struct {
	ok bool
	p  projection
}

const maxFnLevels = 4096

// subjectLevel reports whether a virtual-cache key names a subject-level
// value: either a document reference (data.p.rule, data.p.rule[key]) or a
// function call (the function's reference followed by its arguments).
func (l ruleLevels) subjectLevel(key ast.Ref) bool {
	ok, _ := l.keyLevel(key)
	return ok
}

// keyLevel is subjectLevel, and the projection the value depends on.
func (l ruleLevels) keyLevel(key ast.Ref) (bool, projection) {
	if len(key) > 0 {
		if fn, ok := key[0].Value.(ast.Ref); ok {
			if l.fns == nil {
				return l.refProjection(fn)
			}
			if v, ok := l.fns.m.Load(key[0]); ok {
				f := v.(fnLevel)
				return f.ok, f.p
			}
			ok, p := l.refProjection(fn)
			if l.fns.n.Add(1) <= maxFnLevels {
				l.fns.m.Store(key[0], fnLevel{ok, p})
			}
			return ok, p
		}
	}
	return l.refProjection(key)
}

// refLevel reports whether ref names a subject-level document.
func (l ruleLevels) refLevel(ref ast.Ref) bool {
	ok, _ := l.refProjection(ref)
	return ok
}

// refProjection walks ref down the rule tree: every rule passed on the way
// (whose value the rest of ref indexes into) must be subject-level, and so
// must everything below the node where ref ends; the projection is what all
// of them read. A ref that names no rule at all is not a virtual document;
// it is not cached across evaluations.
func (l ruleLevels) refProjection(ref ast.Ref) (bool, projection) {
	node := l.root
	sawRule := false
	var p projection
	for _, t := range ref {
		switch t.Value.(type) {
		case ast.String, ast.Var, ast.Number, ast.Boolean, ast.Null:
		default:
			// Not a rule tree segment (OPA's keys can hold its own
			// scope markers, which are not even hashable): not shared.
			return false, 0
		}
		child := node.Child(t.Value)
		if child == nil {
			return sawRule, p // the rest indexes into the value of the rules passed
		}
		node = child
		if len(node.Values) > 0 {
			if !l.at[node] {
				return false, 0
			}
			sawRule = true
			p |= l.atRd[node]
		}
	}
	if !l.ok[node] || !(sawRule || hasRules(node)) {
		return false, 0
	}
	return true, p | l.reads[node]
}

func hasRules(n *ast.TreeNode) bool {
	found := false
	n.DepthFirst(func(d *ast.TreeNode) bool {
		if len(d.Values) > 0 {
			found = true
		}
		return found
	})
	return found
}

// subjectLevelRules analyses a compiled policy (see the comment at the top
// of this file).
func subjectLevelRules(c *ast.Compiler) ruleLevels {
	type info struct {
		ok    bool
		reads projection
		deps  []*ast.Rule
	}
	rules := map[*ast.Rule]*info{}
	for _, m := range c.Modules {
		for _, r := range m.Rules {
			i := &info{ok: true}
			ast.WalkExprs(r, func(e *ast.Expr) bool {
				if len(e.With) > 0 {
					i.ok = false
				}
				return false
			})
			ast.WalkRefs(r, func(ref ast.Ref) bool {
				switch {
				case ref.HasPrefix(ast.InputRootRef):
					if p, ok := subjectInput(ref); ok {
						i.reads |= p
					} else {
						i.ok = false
					}
				case ref.HasPrefix(ast.DefaultRootRef):
					i.deps = append(i.deps, rulesReferred(c.RuleTree, ref)...)
				}
				return false
			})
			rules[r] = i
		}
	}
	// Fixpoint: a rule that refers to a non-subject rule is not
	// subject-level, and one reads whatever the rules it refers to read.
	for changed := true; changed; {
		changed = false
		for _, i := range rules {
			if !i.ok {
				continue
			}
			for _, d := range i.deps {
				di, known := rules[d]
				if !known || !di.ok {
					i.ok = false
					changed = true
					break
				}
				if i.reads|di.reads != i.reads {
					i.reads |= di.reads
					changed = true
				}
			}
		}
	}
	l := ruleLevels{
		root: c.RuleTree, ok: map[*ast.TreeNode]bool{}, at: map[*ast.TreeNode]bool{},
		reads: map[*ast.TreeNode]projection{}, atRd: map[*ast.TreeNode]projection{},
		fns: &fnLevels{},
	}
	var visit func(n *ast.TreeNode) (bool, projection)
	visit = func(n *ast.TreeNode) (bool, projection) {
		at := true
		var atRd projection
		for _, r := range n.Values {
			i, known := rules[r]
			if !known || !i.ok {
				at = false
				continue
			}
			atRd |= i.reads
		}
		ok, reads := at, atRd
		for _, child := range n.Children {
			cok, crd := visit(child)
			ok = ok && cok
			reads |= crd
		}
		l.at[n], l.ok[n], l.atRd[n], l.reads[n] = at, ok, atRd, reads
		return ok, reads
	}
	visit(c.RuleTree)
	return l
}

var (
	inputPrincipal = ast.StringTerm("principal")
	inputPurpose   = ast.StringTerm("purpose_of_use")
)

// subjectInput reports whether an input reference stays inside
// input.principal or input.purpose_of_use, and which of their parts it reads.
func subjectInput(ref ast.Ref) (projection, bool) {
	switch {
	case len(ref) < 2:
		return 0, false // the whole input
	case ref[1].Equal(inputPurpose):
		return readsPurpose, true
	case !ref[1].Equal(inputPrincipal):
		return 0, false
	case len(ref) < 3:
		return readsPrincipal, true // the whole principal
	}
	if name, ok := ref[2].Value.(ast.String); ok {
		if p, known := principalFields[string(name)]; known {
			return p, true
		}
	}
	return readsPrincipal, true // a dynamic or unknown field: all of them
}

// rulesReferred returns every rule a data reference could depend on: the
// rules on the nodes it passes (it indexes into their values), and, from
// the first segment that is not a constant or where the tree ends in a
// subtree, every rule below.
func rulesReferred(root *ast.TreeNode, ref ast.Ref) []*ast.Rule {
	var out []*ast.Rule
	all := func(n *ast.TreeNode) {
		n.DepthFirst(func(d *ast.TreeNode) bool {
			out = append(out, d.Values...)
			return false
		})
	}
	node := root
	for i, t := range ref {
		if i > 0 && !ast.IsConstant(t.Value) { // ref[0] is the root, data
			all(node)
			return out
		}
		child := node.Child(t.Value)
		if child == nil {
			return out
		}
		node = child
		out = append(out, node.Values...)
	}
	all(node)
	return out
}
