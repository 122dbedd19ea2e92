package policy

// The two analyses the URI analysis (uriread.go) replaced, as they were
// before h-policy11 (inputkey.go and itemuri.go at e4efd0a), kept as the
// reference TestURIAnalysisIsAtLeastAsConservative holds the new one to:
// on every construct of their tests and every policy of the repository,
// the new one must find a read wherever either old one did, but for the
// exceptions that test names with their justification. Not used by the
// engine.

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/custos-mcp/custos/internal/repofiles"
)

// oldTypeOnly names the builtins whose result depends only on the type of
// their argument, never on its content: is_object(input.resource) does
// not read the resource's URI.
var oldTypeOnly = map[string]bool{
	"is_object": true, "is_array": true, "is_set": true, "is_string": true,
	"is_number": true, "is_boolean": true, "is_null": true, "type_name": true,
}

var (
	oldInputResource = ast.StringTerm("resource")
	oldResourceURI   = ast.StringTerm("uri")
)

// oldReadsResourceURI reports whether any rule of the policy modules (as
// parsed: the compiler would move a call's operands into local variables)
// can read input.resource.uri. It is conservative: besides the reference
// itself, the bare input, the bare input.resource (but as the operand of a
// builtin of oldTypeOnly), a dynamic key into either (object.get with a key
// that is not a constant string or array of them is one), an import of
// either, and a `with` that replaces any part of the input all count as
// reading it. object.get(input.resource, "type", "") reads
// input.resource.type; object.get(input, ["resource", "uri"], "") the URI. When it is false,
// a decision is a function of the input without the URI, and the decision
// cache keys decisions without it (cacheKey), so that a principal's
// decisions about resources that differ only in their URI (the notes of one
// patient, say) are evaluated once.
//
// Batch decisions (rule decisions over input.items) are cached under the
// same keys. An item's URI, input.items[i].resource.uri, is a second place
// the URI can be read, which readsItemURI finds; the cache leaves the URI
// out, and batch items are given without it, only when neither finds a
// read (Engine.itemURI, batchValue).
func oldReadsResourceURI(modules []*ast.Module) bool {
	reads := false
	for _, m := range modules {
		for _, imp := range m.Imports {
			if r, ok := imp.Path.Value.(ast.Ref); ok && r.HasPrefix(ast.InputRootRef) && oldRefReadsURI(r, false) {
				reads = true
			}
		}
		// What a call reads of an input reference among its operands, by
		// term: the type alone (oldTypeOnly), or, for object.get(ref, key, _)
		// with a constant key or path, ref extended by it.
		typeOperand := map[*ast.Term]bool{}
		reach := map[*ast.Term]ast.Ref{}
		markOperands := func(op ast.Ref, operands []*ast.Term) {
			name := op.String()
			switch {
			case oldTypeOnly[name]:
				for _, t := range operands {
					typeOperand[t] = true
				}
			case name == "object.get" && len(operands) >= 2:
				if r, ok := operands[0].Value.(ast.Ref); ok {
					if path, ok := oldConstantPath(operands[1]); ok {
						reach[operands[0]] = append(r.Copy(), path...)
					}
				}
			}
		}
		ast.WalkExprs(m, func(e *ast.Expr) bool {
			for _, w := range e.With {
				if r, ok := w.Target.Value.(ast.Ref); ok && r.HasPrefix(ast.InputRootRef) {
					reads = true
				}
			}
			if e.IsCall() {
				markOperands(e.Operator(), e.Operands())
			}
			return false
		})
		ast.WalkTerms(m, func(t *ast.Term) bool {
			switch v := t.Value.(type) {
			case ast.Call:
				if op, ok := v[0].Value.(ast.Ref); ok {
					markOperands(op, v[1:])
				}
			case ast.Ref:
				if !v.HasPrefix(ast.InputRootRef) {
					break
				}
				if r, ok := reach[t]; ok {
					v = r
				}
				if oldRefReadsURI(v, typeOperand[t]) {
					reads = true
				}
			}
			return false
		})
	}
	return reads
}

// oldConstantPath is object.get's key operand as a path: a constant string
// (one key) or an array of constant strings (a path); false for anything
// else, which may name any key.
func oldConstantPath(key *ast.Term) ([]*ast.Term, bool) {
	switch k := key.Value.(type) {
	case ast.String:
		return []*ast.Term{key}, true
	case *ast.Array:
		path := make([]*ast.Term, 0, k.Len())
		for i := range k.Len() {
			e := k.Elem(i)
			if _, ok := e.Value.(ast.String); !ok {
				return nil, false
			}
			path = append(path, e)
		}
		return path, true
	}
	return nil, false
}

// oldRefReadsURI reports whether the input reference ref can read
// input.resource.uri; oldTypeOnly says that ref is the operand of a
// type-only builtin.
func oldRefReadsURI(ref ast.Ref, oldTypeOnly bool) bool {
	switch {
	case len(ref) < 2:
		return true // the whole input
	case !ast.IsConstant(ref[1].Value):
		return true // input[x]
	case !ref[1].Equal(oldInputResource):
		return false
	case len(ref) < 3:
		return !oldTypeOnly // the whole resource
	case !ast.IsConstant(ref[2].Value):
		return true // input.resource[x]
	default:
		return ref[2].Equal(oldResourceURI)
	}
}

// oldItemReach is what a value of a policy can reach of the list items'
// URIs (input.items[i].resource.uri): the value is unrelated to them
// (oldNoItem), or it is the input, input.items, one item or one item's
// resource, from which a lookup can reach a URI.
type oldItemReach uint8

const (
	oldNoItem oldItemReach = iota
	oldReachInput
	oldReachItems
	oldReachItem
	oldReachItemResource
)

var (
	oldInputItems = ast.String("items")
	oldItemURIKey = ast.String("uri")
	oldItemResKey = ast.String("resource")
)

// step is what r[key] reaches, and whether that lookup can read an item's
// URI (or cannot be proven not to: a key that is not a constant string,
// in an object that holds one on the way to it).
func (r oldItemReach) step(key *ast.Term) (oldItemReach, bool) {
	s, constant := key.Value.(ast.String)
	switch r {
	case oldReachInput:
		switch {
		case !constant:
			return oldNoItem, true // input[x]
		case s == oldInputItems:
			return oldReachItems, false
		}
	case oldReachItems:
		return oldReachItem, false // an index, whatever it is
	case oldReachItem:
		switch {
		case !constant:
			return oldNoItem, true // input.items[i][x]
		case s == oldItemResKey:
			return oldReachItemResource, false
		}
	case oldReachItemResource:
		return oldNoItem, !constant || s == oldItemURIKey
	}
	return oldNoItem, false
}

// oldReadsItemURI reports whether a rule of the compiled policy can read the
// URI of a list item (input.items[i].resource.uri), and where: a data-flow
// analysis of the compiled rules that follows the input, input.items, an
// item and an item's resource through variables, comprehensions, `every`,
// object.get with a constant key or path, and the arguments of the
// policy's own functions (each function is analysed again for the items
// its calls pass it: the default policy hands input.items whole to
// resource_decisions, which reads each item's fields by name). It is
// conservative; besides the lookup itself, any of these counts as reading
// the URI, as the analysis cannot prove it does not:
//
//   - a dynamic key into the input, an item or its resource (input[x],
//     item[k]);
//   - the input, the items, an item or its resource passed to a builtin
//     (walk(input), json.marshal(input.items)) other than a type check or
//     count, compared (item == x, item in xs), used as a key, or put into an
//     array, set or object;
//   - a rule or function whose value can hold one of them;
//   - any `with` (on the input, or on data, which can replace a function
//     the analysis followed an item into by one it did not).
//
// A policy for which it is true gets list items with "uri", and its
// decisions are cached per URI (Engine.itemURI, Engine.keyURI).
func oldReadsItemURI(c *ast.Compiler) (bool, string) {
	a := &oldItemURIAnalysis{c: c, done: map[string]bool{}}
	names := make([]string, 0, len(c.Modules))
	for name := range c.Modules {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, r := range c.Modules[name].Rules {
			a.rule(r, nil)
		}
	}
	return a.why != "", a.why
}

type oldItemURIAnalysis struct {
	c    *ast.Compiler
	done map[string]bool // function and argument reaches already analysed
	why  string          // the first read found, "" if none
}

// oldScope is the reach of the variables bound so far in a body (a variable
// absent from reach reaches no item).
type oldScope struct {
	reach map[ast.Var]oldItemReach
	bound map[ast.Var]bool
}

func (s oldScope) copy() oldScope {
	return oldScope{reach: oldCloneMap(s.reach), bound: oldCloneMap(s.bound)}
}

func oldCloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (a *oldItemURIAnalysis) found(loc *ast.Location, what string) {
	if a.why != "" {
		return
	}
	where := "a rule"
	if loc != nil {
		where = fmt.Sprintf("%s:%d", loc.File, loc.Row)
	}
	a.why = where + ": " + what
}

// rule analyses r (and its else branches) with its arguments reaching
// args (nil: none reaches an item).
func (a *oldItemURIAnalysis) rule(r *ast.Rule, args []oldItemReach) {
	for rr := r; rr != nil; rr = rr.Else {
		s := oldScope{reach: map[ast.Var]oldItemReach{}, bound: map[ast.Var]bool{}}
		params := rr.Head.Args
		if len(params) == 0 {
			params = r.Head.Args
		}
		for i, p := range params {
			reach := oldNoItem
			if i < len(args) {
				reach = args[i]
			}
			if v, ok := p.Value.(ast.Var); ok {
				s.reach[v], s.bound[v] = reach, true
				continue
			}
			if reach != oldNoItem {
				a.found(p.Location, "a function argument pattern is matched against the input or a list item")
			}
			oldBindAll(p, s)
		}
		a.body(rr.Body, s)
		head := []*ast.Term{rr.Head.Key, rr.Head.Value}
		if len(rr.Head.Reference) > 1 {
			head = append(head, rr.Head.Reference[1:]...)
		}
		for _, t := range head {
			if t != nil && a.term(t, s) != oldNoItem {
				a.found(t.Location, "the value of rule "+rr.Head.Ref().String()+" can hold the input or a list item")
			}
		}
	}
}

// oldBindAll marks every variable of t as bound, reaching no item.
func oldBindAll(t *ast.Term, s oldScope) {
	ast.WalkVars(t, func(v ast.Var) bool {
		s.bound[v] = true
		return false
	})
}

func (a *oldItemURIAnalysis) body(b ast.Body, s oldScope) {
	for _, e := range b {
		a.expr(e, s)
	}
}

func (a *oldItemURIAnalysis) expr(e *ast.Expr, s oldScope) {
	for _, w := range e.With {
		// A with on the input replaces what the analysis follows; one on
		// data can replace a function the analysis followed an item into
		// (safe(item) with safe as leak) by one it did not, and reach
		// rules that iterate the items below this expression.
		a.found(w.Location, "a with replaces "+w.Target.String()+" (the analysis does not follow it)")
	}
	switch ts := e.Terms.(type) {
	case *ast.Term:
		a.term(ts, s)
	case *ast.Every:
		dom := a.term(ts.Domain, s)
		elem := oldNoItem
		switch dom {
		case oldNoItem:
		case oldReachItems:
			elem = oldReachItem
		default:
			a.found(ts.Location, "every iterates over the input, an item or its resource")
		}
		inner := s.copy()
		if ts.Key != nil {
			oldBindAll(ts.Key, inner)
		}
		if v, ok := ts.Value.Value.(ast.Var); ok {
			inner.reach[v], inner.bound[v] = elem, true
		} else {
			if elem != oldNoItem {
				a.found(ts.Location, "every matches a list item against a pattern")
			}
			oldBindAll(ts.Value, inner)
		}
		a.body(ts.Body, inner)
	case *ast.SomeDecl:
		for _, t := range ts.Symbols {
			if a.term(t, s) != oldNoItem {
				a.found(ts.Location, "some ... in iterates over the input, an item or its resource")
			}
			oldBindAll(t, s)
		}
	case []*ast.Term:
		if e.IsEquality() && len(ts) == 3 {
			a.unify(ts[1], ts[2], s)
			return
		}
		a.call(ts[0], ts[1:], s, true)
	}
}

// unify is l = r: an assignment to a variable not bound yet, else a
// comparison (or a pattern), which reads whatever it compares.
func (a *oldItemURIAnalysis) unify(l, r *ast.Term, s oldScope) {
	if v, ok := l.Value.(ast.Var); ok && !s.bound[v] && !oldIsRoot(v) {
		s.reach[v] = a.term(r, s)
		s.bound[v] = true
		return
	}
	if v, ok := r.Value.(ast.Var); ok && !s.bound[v] && !oldIsRoot(v) {
		s.reach[v] = a.term(l, s)
		s.bound[v] = true
		return
	}
	if a.term(l, s) != oldNoItem || a.term(r, s) != oldNoItem {
		a.found(l.Location, "the input, a list item or its resource is compared or matched against a pattern")
	}
	oldBindAll(l, s)
	oldBindAll(r, s)
}

func oldIsRoot(v ast.Var) bool {
	return v.Equal(ast.InputRootDocument.Value) || v.Equal(ast.DefaultRootDocument.Value)
}

// call is op(operands...); withOutput says the last operand past the
// function's arguments receives its value (an expression, not a term).
// The value reaches no item: a function whose value can hold one is a
// read (rule).
func (a *oldItemURIAnalysis) call(opTerm *ast.Term, operands []*ast.Term, s oldScope, withOutput bool) {
	op, ok := opTerm.Value.(ast.Ref)
	if !ok {
		for _, t := range operands {
			if a.term(t, s) != oldNoItem {
				a.found(opTerm.Location, "the input or a list item is passed to a dynamic call")
			}
		}
		return
	}
	arity := a.c.GetArity(op)
	if arity < 0 || arity > len(operands) {
		arity = len(operands)
	}
	args := make([]oldItemReach, arity)
	for i := range arity {
		args[i] = a.term(operands[i], s)
	}
	out := oldNoItem
	name := op.String()
	_, builtin := ast.BuiltinMap[name]
	rules := a.c.GetRulesExact(op)
	switch {
	case oldTypeOnly[name] || name == "count":
		// The type or the size of a value: no URI.
	case name == "object.get" && arity == 3:
		out = a.objectGet(opTerm, operands, args)
	case !builtin && len(rules) > 0:
		if slices.ContainsFunc(args, func(r oldItemReach) bool { return r != oldNoItem }) {
			key := fmt.Sprint(name, args)
			if !a.done[key] {
				a.done[key] = true
				for _, r := range rules {
					a.rule(r, args)
				}
			}
		}
	default:
		for i, r := range args {
			if r != oldNoItem {
				a.found(operands[i].Location, fmt.Sprintf("the input, a list item or its resource is passed to %s", name))
			}
		}
	}
	if !withOutput {
		return
	}
	for _, t := range operands[arity:] {
		if v, ok := t.Value.(ast.Var); ok && !s.bound[v] {
			s.reach[v], s.bound[v] = out, true
			continue
		}
		if out != oldNoItem || a.term(t, s) != oldNoItem {
			a.found(t.Location, "the input, a list item or its resource is compared")
		}
		oldBindAll(t, s)
	}
}

// objectGet is what object.get(obj, key, default) reaches: obj's lookup
// by a constant key or path, or the default.
func (a *oldItemURIAnalysis) objectGet(opTerm *ast.Term, operands []*ast.Term, args []oldItemReach) oldItemReach {
	out := args[0]
	if path, ok := oldConstantPath(operands[1]); ok {
		for _, k := range path {
			var reads bool
			if out, reads = out.step(k); reads {
				a.found(opTerm.Location, "object.get reads a list item's uri (or a key it cannot tell)")
			}
		}
	} else if args[0] != oldNoItem {
		a.found(opTerm.Location, "object.get with a key that is not constant reads the input or a list item")
	}
	if args[1] != oldNoItem {
		a.found(opTerm.Location, "a list item is used as object.get's key")
	}
	switch {
	case args[2] == oldNoItem:
		return out
	case out == oldNoItem || out == args[2]:
		return args[2]
	}
	a.found(opTerm.Location, "object.get's default holds the input or a list item")
	return oldNoItem
}

// term is what t reaches; lookups and calls in it are analysed on the way,
// and the variables a lookup's keys bind are bound.
func (a *oldItemURIAnalysis) term(t *ast.Term, s oldScope) oldItemReach {
	switch v := t.Value.(type) {
	case ast.Var:
		if v.Equal(ast.InputRootDocument.Value) {
			return oldReachInput
		}
		return s.reach[v]
	case ast.Ref:
		var r oldItemReach
		switch h := v[0].Value.(type) {
		case ast.Var:
			switch {
			case h.Equal(ast.InputRootDocument.Value):
				r = oldReachInput
			case h.Equal(ast.DefaultRootDocument.Value):
				r = oldNoItem
			default:
				r = s.reach[h]
			}
		default:
			r = a.term(v[0], s)
		}
		for _, k := range v[1:] {
			if kv, ok := k.Value.(ast.Var); ok && !s.bound[kv] {
				s.bound[kv] = true // an iteration's key: an index or a key name
			} else if !ast.IsConstant(k.Value) && a.term(k, s) != oldNoItem {
				a.found(k.Location, "the input or a list item is used as a key")
			}
			var reads bool
			if r, reads = r.step(k); reads {
				a.found(t.Location, "reads "+oldRefText(v)+", which can be a list item's uri")
			}
		}
		return r
	case ast.Call:
		a.call(v[0], v[1:], s, false)
	case *ast.Array:
		v.Foreach(func(e *ast.Term) { a.composite(e, s) })
	case ast.Set:
		v.Foreach(func(e *ast.Term) { a.composite(e, s) })
	case ast.Object:
		v.Foreach(func(k, e *ast.Term) { a.composite(k, s); a.composite(e, s) })
	case *ast.ArrayComprehension:
		inner := s.copy()
		a.body(v.Body, inner)
		a.composite(v.Term, inner)
	case *ast.SetComprehension:
		inner := s.copy()
		a.body(v.Body, inner)
		a.composite(v.Term, inner)
	case *ast.ObjectComprehension:
		inner := s.copy()
		a.body(v.Body, inner)
		a.composite(v.Key, inner)
		a.composite(v.Value, inner)
	}
	return oldNoItem
}

// composite analyses e, an element of an array, set or object built by
// the policy: one that reaches an item is a read (the analysis does not
// follow values into built collections).
func (a *oldItemURIAnalysis) composite(e *ast.Term, s oldScope) {
	if a.term(e, s) != oldNoItem {
		a.found(e.Location, "the input, a list item or its resource is put into an array, set or object")
	}
}

// oldRefText is ref as the policy author wrote it, near enough: the compiler's
// local variables are shown as "_".
func oldRefText(r ast.Ref) string {
	s := r.String()
	for _, f := range strings.Fields(strings.NewReplacer("[", " ", "]", " ", ".", " ").Replace(s)) {
		if strings.HasPrefix(f, "__local") {
			s = strings.ReplaceAll(s, f, "_")
		}
	}
	return s
}

// TestURIAnalysisIsAtLeastAsConservative runs the URI analysis (readsURI)
// and the two it replaced (above) over the constructs of their tests
// (resourceURICases, itemURICases) and every policy of the repository
// (the directories of non-test .rego files: rego/custos, the impact
// fixtures): wherever either old analysis found a read, the new one must
// find one, but for the constructs of lessConservative, each with why
// that is sound; and wherever it finds one that neither found, the
// construct must be in moreConservative, each with why. An entry that no
// longer differs fails too, so that the lists stay the whole truth.
func TestURIAnalysisIsAtLeastAsConservative(t *testing.T) {
	lessConservative := map[string]string{
		"items/a with on data": "a with replacing data by a value reaching no URI (data.foo as 1) changes nothing the analysis follows: " +
			"no call is redirected and no value reaching a URI enters data; the old item analysis counted any with",
		"items/a rule replaced by a value":       "the same: a rule replaced by a constant string",
		"resource/a builtin replaced by a value": "is_object replaced by the value true: it returns a constant, not the resource",
		"resource/data replaced by a value":      "a rule replaced by the value true; the rule that reads it reads input.resource.type by name",
	}
	moreConservative := map[string]string{
		"resource/a policy function named is_object": "a fail-open both old analyses had: the text scan took the policy's own " +
			"is_object for the type check, and the item analysis does not look at input.resource; the new one follows the " +
			"call as the compiler resolved it, and input.resource passed to a function counts as read",
		"resource/a policy function named type_name":  "the same, with type_name",
		"resource/a policy function named object.get": "the same, with object.get: the text scan took it for the lookup of input.resource.type",
	}
	type construct struct {
		name string
		mods map[string]string
	}
	var all []construct
	for _, tc := range resourceURICases {
		all = append(all, construct{"resource/" + tc.name, map[string]string{"p.rego": uriModuleHead + tc.body + "\n"}})
	}
	for _, tc := range itemURICases {
		all = append(all, construct{"items/" + tc.name, map[string]string{"p.rego": itemModuleHead + tc.rules + "\n"}})
	}
	dirs := map[string]map[string]string{}
	for _, path := range repofiles.Tracked(t, "..") { // the repository's policies: what git tracks
		if !strings.HasSuffix(path, ".rego") || strings.HasSuffix(path, "_test.rego") {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(path)
		if dirs[dir] == nil {
			dirs[dir] = map[string]string{}
		}
		dirs[dir][path] = string(data)
	}
	for _, want := range []string{"../rego/custos", "../policy/impact/testdata/baseline/custos", "../policy/impact/testdata/candidate/custos"} {
		if dirs[want] == nil {
			t.Errorf("no policy found in %s", want)
		}
	}
	for dir, mods := range dirs {
		all = append(all, construct{"file/" + dir, mods})
	}
	seen := map[string]bool{}
	for _, c := range all {
		var parsed []*ast.Module
		for _, path := range slices.Sorted(maps.Keys(c.mods)) {
			src := c.mods[path]
			m, err := ast.ParseModuleWithOpts(path, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			parsed = append(parsed, m)
		}
		compiled := map[string]*ast.Module{}
		for i, m := range parsed {
			compiled[fmt.Sprint(i)] = m.Copy()
		}
		comp := ast.NewCompiler().WithCapabilities(lockedCapabilities()).WithDefaultRegoVersion(ast.RegoV1)
		if comp.Compile(compiled); comp.Failed() {
			t.Errorf("%s: does not compile: %v", c.name, comp.Errors)
			continue
		}
		oldResource := oldReadsResourceURI(parsed)
		oldItems, _ := oldReadsItemURI(comp)
		reads, why := readsURI(comp)
		old := oldResource || oldItems
		switch {
		case old && !reads:
			seen[c.name] = true
			if lessConservative[c.name] == "" {
				t.Errorf("%s: the old analyses found a read (input.resource %v, items %v), the new one none", c.name, oldResource, oldItems)
			}
		case reads && !old:
			seen[c.name] = true
			if moreConservative[c.name] == "" {
				t.Errorf("%s: the new analysis finds a read neither old one found, without a justification: %s", c.name, why)
			}
		}
	}
	for _, m := range []map[string]string{lessConservative, moreConservative} {
		for name := range m {
			if !seen[name] {
				t.Errorf("%s: listed as answered differently, but the analyses agree (or no such construct)", name)
			}
		}
	}
}
