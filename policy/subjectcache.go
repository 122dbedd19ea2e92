package policy

import (
	"slices"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
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
// partial rule's value a function of the principal and purpose. The shared
// store is keyed by the principal's digest (every field of it) and the
// purpose, and belongs to one Engine, so a policy reload starts empty. The
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

// DefaultSubjectCache is how many (principal, purpose) pairs an Engine keeps
// subject-level values for when Options.SubjectCache is zero.
const DefaultSubjectCache = 256

// subjectCacheEntries bounds the values kept per (principal, purpose);
// beyond it new values are kept for the evaluation only. The first
// evaluations fill it with the principal-level rules, which every later
// evaluation reuses; per-resource function results (a read's page-of-one
// call, keyed by the whole resource) then take the remaining room.
const subjectCacheEntries = 1024

type subjectKey struct {
	principal [32]byte
	purpose   string
}

// subjectCaches is an Engine's set of shared stores, bounded in number.
type subjectCaches struct {
	levels ruleLevels

	mu  sync.Mutex
	max int
	m   map[subjectKey]*subjectStore
}

// subjectStore is one (principal, purpose)'s shared virtual-cache store.
type subjectStore struct {
	mu sync.RWMutex
	vc topdown.VirtualCache // one frame; never Pushed
	n  int
}

func newSubjectCaches(levels ruleLevels, max int) *subjectCaches {
	return &subjectCaches{levels: levels, max: max, m: make(map[subjectKey]*subjectStore)}
}

// forInput returns the virtual cache for one evaluation of in. Values it
// collects reach the shared store only through its commit, which the
// engine calls when the evaluation has succeeded.
func (c *subjectCaches) forInput(in *Input) *evalCache {
	k := subjectKey{purpose: in.PurposeOfUse}
	if in.Subject != nil {
		k.principal = in.Subject.digest
	} else {
		k.principal = principalDigest(&in.Principal)
	}
	c.mu.Lock()
	s, ok := c.m[k]
	if !ok {
		makeRoom(c.m, c.max)
		s = &subjectStore{vc: topdown.NewVirtualCache()}
		c.m[k] = s
	}
	c.mu.Unlock()
	return &evalCache{levels: c.levels, shared: s, local: topdown.NewVirtualCache()}
}

// evalCache is the topdown.VirtualCache of one evaluation. It reads
// subject-level entries of the top frame from the shared store; every value
// OPA puts goes to a cache of this evaluation alone, and the subject-level
// ones of the top frame are also kept as pending. OPA puts a rule's value at
// its first solution and only then checks the other solutions and
// definitions for a conflict (or meets a builtin error), aborting the
// evaluation: a value is therefore final only once the whole evaluation
// has succeeded, and only then does commit publish the pending values.
type evalCache struct {
	levels  ruleLevels
	shared  *subjectStore
	local   topdown.VirtualCache
	depth   int // frames pushed by `with`
	pending []pendingValue
}

type pendingValue struct {
	ref   ast.Ref // a copy: OPA reuses its key slices
	value *ast.Term
}

func (c *evalCache) Push() { c.depth++; c.local.Push() }
func (c *evalCache) Pop()  { c.depth--; c.local.Pop() }

func (c *evalCache) Get(ref ast.Ref) (*ast.Term, bool) {
	if c.depth == 0 && c.levels.subjectLevel(ref) {
		if v, undefined := c.shared.get(ref); v != nil || undefined {
			return v, undefined
		}
	}
	return c.local.Get(ref)
}

func (s *subjectStore) get(ref ast.Ref) (*ast.Term, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.vc.Get(ref)
}

func (c *evalCache) Put(ref ast.Ref, value *ast.Term) {
	if c.depth == 0 && c.levels.subjectLevel(ref) {
		c.pending = append(c.pending, pendingValue{ref: slices.Clone(ref), value: value})
	}
	c.local.Put(ref, value)
}

func (c *evalCache) Keys() []ast.Ref { return c.local.Keys() }

// commit publishes the pending values of a successful evaluation to the
// shared store, within its bound. Values are frozen first.
func (c *evalCache) commit() {
	if len(c.pending) == 0 {
		return
	}
	s := c.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range c.pending {
		if v, undefined := s.vc.Get(p.ref); v != nil || undefined {
			continue // published by another evaluation
		}
		if s.n >= subjectCacheEntries {
			break
		}
		for _, t := range p.ref {
			freeze(t.Value)
		}
		if p.value != nil {
			freeze(p.value.Value)
		}
		s.vc.Put(p.ref, p.value)
		s.n++
	}
	c.pending = nil
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
// at or below it is subject-level.
type ruleLevels struct {
	root *ast.TreeNode
	ok   map[*ast.TreeNode]bool // node -> subtree is subject-level
	at   map[*ast.TreeNode]bool // node -> rules at this node are subject-level
}

// subjectLevel reports whether a virtual-cache key names a subject-level
// value: either a document reference (data.p.rule, data.p.rule[key]) or a
// function call (the function's reference followed by its arguments).
func (l ruleLevels) subjectLevel(key ast.Ref) bool {
	if len(key) > 0 {
		if fn, ok := key[0].Value.(ast.Ref); ok {
			return l.refLevel(fn)
		}
	}
	return l.refLevel(key)
}

// refLevel walks ref down the rule tree: every rule passed on the way (whose
// value the rest of ref indexes into) must be subject-level, and so must
// everything below the node where ref ends. A ref that names no rule at all
// is not a virtual document; it is not cached across evaluations.
func (l ruleLevels) refLevel(ref ast.Ref) bool {
	node := l.root
	sawRule := false
	for _, t := range ref {
		switch t.Value.(type) {
		case ast.String, ast.Var, ast.Number, ast.Boolean, ast.Null:
		default:
			// Not a rule tree segment (OPA's keys can hold its own
			// scope markers, which are not even hashable): not shared.
			return false
		}
		child := node.Child(t.Value)
		if child == nil {
			return sawRule // the rest indexes into the value of the rules passed
		}
		node = child
		if len(node.Values) > 0 {
			if !l.at[node] {
				return false
			}
			sawRule = true
		}
	}
	return l.ok[node] && (sawRule || hasRules(node))
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
		ok   bool
		deps []*ast.Rule
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
					if !subjectInput(ref) {
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
	// Fixpoint: a rule that refers to a non-subject rule is not subject-level.
	for changed := true; changed; {
		changed = false
		for _, i := range rules {
			if !i.ok {
				continue
			}
			for _, d := range i.deps {
				if di, known := rules[d]; !known || !di.ok {
					i.ok = false
					changed = true
					break
				}
			}
		}
	}
	l := ruleLevels{root: c.RuleTree, ok: map[*ast.TreeNode]bool{}, at: map[*ast.TreeNode]bool{}}
	var visit func(n *ast.TreeNode) bool
	visit = func(n *ast.TreeNode) bool {
		at := true
		for _, r := range n.Values {
			if i, known := rules[r]; !known || !i.ok {
				at = false
			}
		}
		ok := at
		for _, child := range n.Children {
			if !visit(child) {
				ok = false
			}
		}
		l.at[n], l.ok[n] = at, ok
		return ok
	}
	visit(c.RuleTree)
	return l
}

var (
	inputPrincipal = ast.StringTerm("principal")
	inputPurpose   = ast.StringTerm("purpose_of_use")
)

// subjectInput reports whether an input reference stays inside
// input.principal or input.purpose_of_use.
func subjectInput(ref ast.Ref) bool {
	if len(ref) < 2 {
		return false // the whole input
	}
	return ref[1].Equal(inputPrincipal) || ref[1].Equal(inputPurpose)
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
