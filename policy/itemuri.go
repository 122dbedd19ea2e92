package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// itemReach is what a value of a policy can reach of the list items'
// URIs (input.items[i].resource.uri): the value is unrelated to them
// (noItem), or it is the input, input.items, one item or one item's
// resource, from which a lookup can reach a URI.
type itemReach uint8

const (
	noItem itemReach = iota
	reachInput
	reachItems
	reachItem
	reachItemResource
)

var (
	inputItems = ast.String("items")
	itemURIKey = ast.String("uri")
	itemResKey = ast.String("resource")
)

// step is what r[key] reaches, and whether that lookup can read an item's
// URI (or cannot be proven not to: a key that is not a constant string,
// in an object that holds one on the way to it).
func (r itemReach) step(key *ast.Term) (itemReach, bool) {
	s, constant := key.Value.(ast.String)
	switch r {
	case reachInput:
		switch {
		case !constant:
			return noItem, true // input[x]
		case s == inputItems:
			return reachItems, false
		}
	case reachItems:
		return reachItem, false // an index, whatever it is
	case reachItem:
		switch {
		case !constant:
			return noItem, true // input.items[i][x]
		case s == itemResKey:
			return reachItemResource, false
		}
	case reachItemResource:
		return noItem, !constant || s == itemURIKey
	}
	return noItem, false
}

// readsItemURI reports whether a rule of the compiled policy can read the
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
func readsItemURI(c *ast.Compiler) (bool, string) {
	a := &itemURIAnalysis{c: c, done: map[string]bool{}}
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

type itemURIAnalysis struct {
	c    *ast.Compiler
	done map[string]bool // function and argument reaches already analysed
	why  string          // the first read found, "" if none
}

// scope is the reach of the variables bound so far in a body (a variable
// absent from reach reaches no item).
type scope struct {
	reach map[ast.Var]itemReach
	bound map[ast.Var]bool
}

func (s scope) copy() scope {
	return scope{reach: cloneMap(s.reach), bound: cloneMap(s.bound)}
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (a *itemURIAnalysis) found(loc *ast.Location, what string) {
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
func (a *itemURIAnalysis) rule(r *ast.Rule, args []itemReach) {
	for rr := r; rr != nil; rr = rr.Else {
		s := scope{reach: map[ast.Var]itemReach{}, bound: map[ast.Var]bool{}}
		params := rr.Head.Args
		if len(params) == 0 {
			params = r.Head.Args
		}
		for i, p := range params {
			reach := noItem
			if i < len(args) {
				reach = args[i]
			}
			if v, ok := p.Value.(ast.Var); ok {
				s.reach[v], s.bound[v] = reach, true
				continue
			}
			if reach != noItem {
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
			if t != nil && a.term(t, s) != noItem {
				a.found(t.Location, "the value of rule "+rr.Head.Ref().String()+" can hold the input or a list item")
			}
		}
	}
}

// bindAll marks every variable of t as bound, reaching no item.
func bindAll(t *ast.Term, s scope) {
	ast.WalkVars(t, func(v ast.Var) bool {
		s.bound[v] = true
		return false
	})
}

func (a *itemURIAnalysis) body(b ast.Body, s scope) {
	for _, e := range b {
		a.expr(e, s)
	}
}

func (a *itemURIAnalysis) expr(e *ast.Expr, s scope) {
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
		elem := noItem
		switch dom {
		case noItem:
		case reachItems:
			elem = reachItem
		default:
			a.found(ts.Location, "every iterates over the input, an item or its resource")
		}
		inner := s.copy()
		if ts.Key != nil {
			bindAll(ts.Key, inner)
		}
		if v, ok := ts.Value.Value.(ast.Var); ok {
			inner.reach[v], inner.bound[v] = elem, true
		} else {
			if elem != noItem {
				a.found(ts.Location, "every matches a list item against a pattern")
			}
			bindAll(ts.Value, inner)
		}
		a.body(ts.Body, inner)
	case *ast.SomeDecl:
		for _, t := range ts.Symbols {
			if a.term(t, s) != noItem {
				a.found(ts.Location, "some ... in iterates over the input, an item or its resource")
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
func (a *itemURIAnalysis) unify(l, r *ast.Term, s scope) {
	if v, ok := l.Value.(ast.Var); ok && !s.bound[v] && !isRoot(v) {
		s.reach[v] = a.term(r, s)
		s.bound[v] = true
		return
	}
	if v, ok := r.Value.(ast.Var); ok && !s.bound[v] && !isRoot(v) {
		s.reach[v] = a.term(l, s)
		s.bound[v] = true
		return
	}
	if a.term(l, s) != noItem || a.term(r, s) != noItem {
		a.found(l.Location, "the input, a list item or its resource is compared or matched against a pattern")
	}
	bindAll(l, s)
	bindAll(r, s)
}

func isRoot(v ast.Var) bool {
	return v.Equal(ast.InputRootDocument.Value) || v.Equal(ast.DefaultRootDocument.Value)
}

// call is op(operands...); withOutput says the last operand past the
// function's arguments receives its value (an expression, not a term).
// The value reaches no item: a function whose value can hold one is a
// read (rule).
func (a *itemURIAnalysis) call(opTerm *ast.Term, operands []*ast.Term, s scope, withOutput bool) {
	op, ok := opTerm.Value.(ast.Ref)
	if !ok {
		for _, t := range operands {
			if a.term(t, s) != noItem {
				a.found(opTerm.Location, "the input or a list item is passed to a dynamic call")
			}
		}
		return
	}
	arity := a.c.GetArity(op)
	if arity < 0 || arity > len(operands) {
		arity = len(operands)
	}
	args := make([]itemReach, arity)
	for i := range arity {
		args[i] = a.term(operands[i], s)
	}
	out := noItem
	name := op.String()
	_, builtin := ast.BuiltinMap[name]
	rules := a.c.GetRulesExact(op)
	switch {
	case typeOnly[name] || name == "count":
		// The type or the size of a value: no URI.
	case name == "object.get" && arity == 3:
		out = a.objectGet(opTerm, operands, args)
	case !builtin && len(rules) > 0:
		if slices.ContainsFunc(args, func(r itemReach) bool { return r != noItem }) {
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
			if r != noItem {
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
		if out != noItem || a.term(t, s) != noItem {
			a.found(t.Location, "the input, a list item or its resource is compared")
		}
		bindAll(t, s)
	}
}

// objectGet is what object.get(obj, key, default) reaches: obj's lookup
// by a constant key or path, or the default.
func (a *itemURIAnalysis) objectGet(opTerm *ast.Term, operands []*ast.Term, args []itemReach) itemReach {
	out := args[0]
	if path, ok := constantPath(operands[1]); ok {
		for _, k := range path {
			var reads bool
			if out, reads = out.step(k); reads {
				a.found(opTerm.Location, "object.get reads a list item's uri (or a key it cannot tell)")
			}
		}
	} else if args[0] != noItem {
		a.found(opTerm.Location, "object.get with a key that is not constant reads the input or a list item")
	}
	if args[1] != noItem {
		a.found(opTerm.Location, "a list item is used as object.get's key")
	}
	switch {
	case args[2] == noItem:
		return out
	case out == noItem || out == args[2]:
		return args[2]
	}
	a.found(opTerm.Location, "object.get's default holds the input or a list item")
	return noItem
}

// term is what t reaches; lookups and calls in it are analysed on the way,
// and the variables a lookup's keys bind are bound.
func (a *itemURIAnalysis) term(t *ast.Term, s scope) itemReach {
	switch v := t.Value.(type) {
	case ast.Var:
		if v.Equal(ast.InputRootDocument.Value) {
			return reachInput
		}
		return s.reach[v]
	case ast.Ref:
		var r itemReach
		switch h := v[0].Value.(type) {
		case ast.Var:
			switch {
			case h.Equal(ast.InputRootDocument.Value):
				r = reachInput
			case h.Equal(ast.DefaultRootDocument.Value):
				r = noItem
			default:
				r = s.reach[h]
			}
		default:
			r = a.term(v[0], s)
		}
		for _, k := range v[1:] {
			if kv, ok := k.Value.(ast.Var); ok && !s.bound[kv] {
				s.bound[kv] = true // an iteration's key: an index or a key name
			} else if !ast.IsConstant(k.Value) && a.term(k, s) != noItem {
				a.found(k.Location, "the input or a list item is used as a key")
			}
			var reads bool
			if r, reads = r.step(k); reads {
				a.found(t.Location, "reads "+refText(v)+", which can be a list item's uri")
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
	return noItem
}

// composite analyses e, an element of an array, set or object built by
// the policy: one that reaches an item is a read (the analysis does not
// follow values into built collections).
func (a *itemURIAnalysis) composite(e *ast.Term, s scope) {
	if a.term(e, s) != noItem {
		a.found(e.Location, "the input, a list item or its resource is put into an array, set or object")
	}
}

// refText is ref as the policy author wrote it, near enough: the compiler's
// local variables are shown as "_".
func refText(r ast.Ref) string {
	s := r.String()
	for _, f := range strings.Fields(strings.NewReplacer("[", " ", "]", " ", ".", " ").Replace(s)) {
		if strings.HasPrefix(f, "__local") {
			s = strings.ReplaceAll(s, f, "_")
		}
	}
	return s
}
