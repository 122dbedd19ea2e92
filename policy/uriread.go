package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// typeOnly names the builtins whose result depends only on the type of
// their argument, never on its content: is_object(input.resource) does
// not read the resource's URI.
var typeOnly = map[string]bool{
	"is_object": true, "is_array": true, "is_set": true, "is_string": true,
	"is_number": true, "is_boolean": true, "is_null": true, "type_name": true,
}

// uriReach is what a value of a policy can reach of a resource's URI
// (input.resource.uri, or a list item's, input.items[i].resource.uri): the
// value is unrelated to them (noURI), or it is the input, input.resource,
// input.items, one item or one item's resource, from which a lookup can
// reach a URI.
type uriReach uint8

const (
	noURI uriReach = iota
	reachInput
	reachInputResource
	reachItems
	reachItem
	reachItemResource
)

var (
	inputItems = ast.String("items")
	uriKey     = ast.String("uri")
	resKey     = ast.String("resource")
)

// whole says a value that reaches r, used as it is, counts as a read: the
// input or input.resource may only be looked up into by a constant key
// (input.resource.type), be object.get's object with a constant key or path,
// or (input.resource) have its type checked; bound to a variable, passed to
// a function, counted, compared or put into a collection, it counts as
// read. The analysis follows list items further (variables, functions,
// count), but the read's own input no further than the text scan it
// replaced did (inputkey.go, until h-policy11).
func (r uriReach) whole() bool { return r == reachInput || r == reachInputResource }

// step is what r[key] reaches, and whether that lookup can read a URI
// (or cannot be proven not to: a key that is not a constant string, in an
// object that holds one on the way to it).
func (r uriReach) step(key *ast.Term) (uriReach, bool) {
	s, constant := key.Value.(ast.String)
	switch r {
	case reachInput:
		switch {
		case !constant:
			return noURI, true // input[x]
		case s == inputItems:
			return reachItems, false
		case s == resKey:
			return reachInputResource, false
		}
	case reachItems:
		return reachItem, false // an index, whatever it is
	case reachItem:
		switch {
		case !constant:
			return noURI, true // input.items[i][x]
		case s == resKey:
			return reachItemResource, false
		}
	case reachInputResource, reachItemResource:
		return noURI, !constant || s == uriKey
	}
	return noURI, false
}

// readsURI reports whether a rule of the compiled policy can read a
// resource's URI, input.resource.uri or a list item's
// (input.items[i].resource.uri), and where: a data-flow analysis of the
// compiled rules that follows the input, input.resource, input.items, an
// item and an item's resource through lookups by constant keys, object.get
// with a constant key or path, and, for list items, variables,
// comprehensions, `every`, count and the arguments of the policy's own
// functions (each function is analysed again for the items its calls pass
// it: the default policy hands input.items whole to resource_decisions,
// which reads each item's fields by name). Calls are resolved as the
// compiler resolved them: a policy function named like a builtin
// (is_object, object.get) is followed as a function. It is conservative;
// besides the lookup itself, any of these counts as reading the URI, as the
// analysis cannot prove it does not:
//
//   - a dynamic key into the input, a resource or an item (input[x],
//     input.resource[k], item[k]);
//   - the input or input.resource used whole (whole), and an import of
//     either;
//   - the items, an item or its resource passed to a builtin (walk(input),
//     json.marshal(input.items)) other than a type check or count,
//     compared (item == x, item in xs), used as a key, or put into an
//     array, set or object;
//   - a rule or function whose value can hold one of them;
//   - a `with` that replaces the input or any part of it, or replaces a
//     rule, function or builtin by a function (the analysis followed the
//     calls into the one replaced), or whose value holds one of them.
//     A `with` that replaces data, a rule or a function by a value that
//     reaches no URI (`with data.custos.authz.flag as true`) does not
//     count: nothing the analysis follows changes.
//
// A policy for which it is true has its decisions cached per URI
// (Engine.keyURI) and gets list items with "uri" (Engine.itemURI).
func readsURI(c *ast.Compiler) (bool, string) {
	a := &uriAnalysis{c: c, done: map[string]bool{}}
	names := make([]string, 0, len(c.Modules))
	for name := range c.Modules {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, imp := range c.Modules[name].Imports {
			if r, ok := imp.Path.Value.(ast.Ref); ok && r.HasPrefix(ast.InputRootRef) {
				a.term(imp.Path, newScope()) // import input.resource as res
			}
		}
		for _, r := range c.Modules[name].Rules {
			a.rule(r, nil)
		}
	}
	return a.why != "", a.why
}

type uriAnalysis struct {
	c    *ast.Compiler
	done map[string]bool // function and argument reaches already analysed
	why  string          // the first read found, "" if none
}

// scope is the reach of the variables bound so far in a body (a variable
// absent from reach reaches no URI).
type scope struct {
	reach map[ast.Var]uriReach
	bound map[ast.Var]bool
}

func newScope() scope {
	return scope{reach: map[ast.Var]uriReach{}, bound: map[ast.Var]bool{}}
}

func (s scope) copy() scope {
	return scope{reach: maps.Clone(s.reach), bound: maps.Clone(s.bound)}
}

func (a *uriAnalysis) found(loc *ast.Location, what string) {
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
// args (nil: none reaches a URI).
func (a *uriAnalysis) rule(r *ast.Rule, args []uriReach) {
	for rr := r; rr != nil; rr = rr.Else {
		s := newScope()
		params := rr.Head.Args
		if len(params) == 0 {
			params = r.Head.Args
		}
		for i, p := range params {
			reach := noURI
			if i < len(args) {
				reach = args[i]
			}
			if v, ok := p.Value.(ast.Var); ok {
				s.reach[v], s.bound[v] = reach, true
				continue
			}
			if reach != noURI {
				a.found(p.Location, "a function argument pattern is matched against the input or a list item")
			}
			bindAll(p, s)
		}
		a.body(rr.Body, s)
		head := []*ast.Term{rr.Head.Key, rr.Head.Value}
		if len(rr.Head.Reference) > 1 {
			head = append(head, rr.Head.Reference[1:]...)
		}
		for _, t := range head {
			if t != nil && a.term(t, s) != noURI {
				a.found(t.Location, "the value of rule "+rr.Head.Ref().String()+" can hold the input or a list item")
			}
		}
	}
}

// bindAll marks every variable of t as bound, reaching no URI.
func bindAll(t *ast.Term, s scope) {
	ast.WalkVars(t, func(v ast.Var) bool {
		s.bound[v] = true
		return false
	})
}

func (a *uriAnalysis) body(b ast.Body, s scope) {
	for _, e := range b {
		a.expr(e, s)
	}
}

// with analyses w, a with modifier: see readsURI for what counts as a read.
// After compilation a value that is still a reference names a function (a
// rule's value or a computed one is bound to a local variable first).
func (a *uriAnalysis) with(w *ast.With, s scope) {
	target, ok := w.Target.Value.(ast.Ref)
	switch {
	case !ok || target.HasPrefix(ast.InputRootRef):
		a.found(w.Location, "a with replaces "+w.Target.String()+" (the analysis does not follow it)")
	case isRef(w.Value):
		a.found(w.Location, "a with replaces "+w.Target.String()+" by the function "+w.Value.String()+" (the analysis follows calls into the one replaced)")
	case a.term(w.Value, s) != noURI:
		a.found(w.Location, "a with replaces "+w.Target.String()+" by the input or a list item")
	}
}

func isRef(t *ast.Term) bool {
	_, ok := t.Value.(ast.Ref)
	return ok
}

func (a *uriAnalysis) expr(e *ast.Expr, s scope) {
	for _, w := range e.With {
		a.with(w, s)
	}
	switch ts := e.Terms.(type) {
	case *ast.Term:
		a.term(ts, s)
	case *ast.Every:
		dom := a.term(ts.Domain, s)
		elem := noURI
		switch dom {
		case noURI:
		case reachItems:
			elem = reachItem
		default:
			a.found(ts.Location, "every iterates over the input, an item or a resource")
		}
		inner := s.copy()
		if ts.Key != nil {
			bindAll(ts.Key, inner)
		}
		if v, ok := ts.Value.Value.(ast.Var); ok {
			inner.reach[v], inner.bound[v] = elem, true
		} else {
			if elem != noURI {
				a.found(ts.Location, "every matches a list item against a pattern")
			}
			bindAll(ts.Value, inner)
		}
		a.body(ts.Body, inner)
	case *ast.SomeDecl:
		for _, t := range ts.Symbols {
			if a.term(t, s) != noURI {
				a.found(ts.Location, "some ... in iterates over the input, an item or a resource")
			}
			bindAll(t, s)
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
func (a *uriAnalysis) unify(l, r *ast.Term, s scope) {
	if v, ok := l.Value.(ast.Var); ok && !s.bound[v] && !isRoot(v) {
		a.assign(v, r, s)
		return
	}
	if v, ok := r.Value.(ast.Var); ok && !s.bound[v] && !isRoot(v) {
		a.assign(v, l, s)
		return
	}
	if a.term(l, s) != noURI || a.term(r, s) != noURI {
		a.found(l.Location, "the input, a list item or a resource is compared or matched against a pattern")
	}
	bindAll(l, s)
	bindAll(r, s)
}

// assign binds v to what t reaches. The compiler moves a call's operands
// into local variables of its own (is_object(input.resource) becomes
// __local0__ = input.resource; is_object(__local0__, ...)): those may hold
// the input or input.resource whole, as their uses are lookups and type
// checks; a variable of the policy's own may not (uriReach.whole): one
// the compiler renamed (r := input.resource) or kept (r = input.resource).
func (a *uriAnalysis) assign(v ast.Var, t *ast.Term, s scope) {
	reach := a.lookup(t, s)
	_, renamed := a.c.RewrittenVars[v]
	if (renamed || !v.IsGenerated()) && reach.whole() {
		a.found(t.Location, "binds "+refText(t)+" whole to a variable (the analysis does not follow it)")
	}
	s.reach[v], s.bound[v] = reach, true
}

func isRoot(v ast.Var) bool {
	return v.Equal(ast.InputRootDocument.Value) || v.Equal(ast.DefaultRootDocument.Value)
}

// call is op(operands...); withOutput says the last operand past the
// function's arguments receives its value (an expression, not a term).
// It returns what the value reaches: only object.get's can reach a URI (a
// function whose value can hold one is a read: rule).
func (a *uriAnalysis) call(opTerm *ast.Term, operands []*ast.Term, s scope, withOutput bool) uriReach {
	op, ok := opTerm.Value.(ast.Ref)
	if !ok {
		for _, t := range operands {
			if a.term(t, s) != noURI {
				a.found(opTerm.Location, "the input or a list item is passed to a dynamic call")
			}
		}
		return noURI
	}
	arity := a.c.GetArity(op)
	if arity < 0 || arity > len(operands) {
		arity = len(operands)
	}
	name := op.String()
	_, builtin := ast.BuiltinMap[name]
	rules := a.c.GetRulesExact(op)
	args := make([]uriReach, arity)
	for i := range arity {
		switch {
		case i == 0 && builtin && (typeOnly[name] || name == "object.get"):
			// Its type, or a lookup in it (objectGet): input.resource may
			// be either.
			args[i] = a.lookup(operands[i], s)
		default:
			args[i] = a.term(operands[i], s)
		}
	}
	out := noURI
	switch {
	case builtin && typeOnly[name]:
		// The type of a value: no URI; the input's type is the input whole.
		if args[0] == reachInput {
			a.found(operands[0].Location, "the input is passed to "+name)
		}
	case builtin && name == "count":
		// The size of a value: no URI.
	case builtin && name == "object.get" && arity == 3:
		out = a.objectGet(opTerm, operands, args)
	case !builtin && len(rules) > 0:
		if slices.ContainsFunc(args, func(r uriReach) bool { return r != noURI }) {
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
			if r != noURI {
				a.found(operands[i].Location, fmt.Sprintf("the input, a list item or a resource is passed to %s", name))
			}
		}
	}
	if out.whole() {
		a.found(opTerm.Location, "object.get returns the input or input.resource whole")
	}
	if !withOutput {
		return out
	}
	for _, t := range operands[arity:] {
		if v, ok := t.Value.(ast.Var); ok && !s.bound[v] {
			s.reach[v], s.bound[v] = out, true
			continue
		}
		if out != noURI || a.term(t, s) != noURI {
			a.found(t.Location, "the input, a list item or a resource is compared")
		}
		bindAll(t, s)
	}
	return noURI
}

// objectGet is what object.get(obj, key, default) reaches: obj's lookup
// by a constant key or path, or the default.
func (a *uriAnalysis) objectGet(opTerm *ast.Term, operands []*ast.Term, args []uriReach) uriReach {
	out := args[0]
	if path, ok := constantPath(operands[1]); ok {
		for _, k := range path {
			var reads bool
			if out, reads = out.step(k); reads {
				a.found(opTerm.Location, "object.get reads a uri (or a key it cannot tell)")
			}
		}
	} else if args[0] != noURI {
		a.found(opTerm.Location, "object.get with a key that is not constant reads the input or a list item")
	}
	if args[1] != noURI {
		a.found(opTerm.Location, "a list item is used as object.get's key")
	}
	switch {
	case args[2] == noURI:
		return out
	case out == noURI || out == args[2]:
		return args[2]
	}
	a.found(opTerm.Location, "object.get's default holds the input or a list item")
	return noURI
}

// constantPath is object.get's key operand as a path: a constant string
// (one key) or an array of constant strings (a path); false for anything
// else, which may name any key.
func constantPath(key *ast.Term) ([]*ast.Term, bool) {
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

// term is what t, used as a value, reaches; the input or input.resource
// used whole is a read (uriReach.whole).
func (a *uriAnalysis) term(t *ast.Term, s scope) uriReach {
	r := a.lookup(t, s)
	if r.whole() {
		a.found(t.Location, "uses "+refText(t)+" whole, not by its fields (the analysis does not follow it)")
	}
	return r
}

// lookup is what t reaches, the input or input.resource being allowed
// (the caller only looks into it, or checks its type); lookups and calls
// in it are analysed on the way, and the variables a lookup's keys bind
// are bound.
func (a *uriAnalysis) lookup(t *ast.Term, s scope) uriReach {
	switch v := t.Value.(type) {
	case ast.Var:
		if v.Equal(ast.InputRootDocument.Value) {
			return reachInput
		}
		return s.reach[v]
	case ast.Ref:
		var r uriReach
		switch h := v[0].Value.(type) {
		case ast.Var:
			switch {
			case h.Equal(ast.InputRootDocument.Value):
				r = reachInput
			case h.Equal(ast.DefaultRootDocument.Value):
				r = noURI
			default:
				r = s.reach[h]
			}
		default:
			r = a.lookup(v[0], s)
		}
		for _, k := range v[1:] {
			if kv, ok := k.Value.(ast.Var); ok && !s.bound[kv] {
				s.bound[kv] = true // an iteration's key: an index or a key name
			} else if !ast.IsConstant(k.Value) && a.term(k, s) != noURI {
				a.found(k.Location, "the input or a list item is used as a key")
			}
			var reads bool
			if r, reads = r.step(k); reads {
				a.found(t.Location, "reads "+refText(t)+", which can be a resource's uri")
			}
		}
		return r
	case ast.Call:
		return a.call(v[0], v[1:], s, false)
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
	return noURI
}

// composite analyses e, an element of an array, set or object built by
// the policy: one that reaches a URI is a read (the analysis does not
// follow values into built collections).
func (a *uriAnalysis) composite(e *ast.Term, s scope) {
	if a.term(e, s) != noURI {
		a.found(e.Location, "the input, a list item or a resource is put into an array, set or object")
	}
}

// refText is t as the policy author wrote it, near enough: the compiler's
// local variables are shown as "_".
func refText(t *ast.Term) string {
	s := t.String()
	for _, f := range strings.Fields(strings.NewReplacer("[", " ", "]", " ", ".", " ").Replace(s)) {
		if strings.HasPrefix(f, "__local") {
			s = strings.ReplaceAll(s, f, "_")
		}
	}
	return s
}
