package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

// typeOnly names the builtins whose result depends only on the type of
// their argument, never on its content: is_object(input.resource) does
// not read the resource's URI.
var typeOnly = map[string]bool{
	"is_object": true, "is_array": true, "is_set": true, "is_string": true,
	"is_number": true, "is_boolean": true, "is_null": true, "type_name": true,
}

var (
	inputResource = ast.StringTerm("resource")
	resourceURI   = ast.StringTerm("uri")
)

// readsResourceURI reports whether any rule of the policy modules (as
// parsed: the compiler would move a call's operands into local variables)
// can read input.resource.uri. It is conservative: besides the reference
// itself, the bare input, the bare input.resource (but as the operand of a
// builtin of typeOnly), a dynamic key into either (object.get with a key
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
func readsResourceURI(modules []*ast.Module) bool {
	reads := false
	for _, m := range modules {
		for _, imp := range m.Imports {
			if r, ok := imp.Path.Value.(ast.Ref); ok && r.HasPrefix(ast.InputRootRef) && refReadsURI(r, false) {
				reads = true
			}
		}
		// What a call reads of an input reference among its operands, by
		// term: the type alone (typeOnly), or, for object.get(ref, key, _)
		// with a constant key or path, ref extended by it.
		typeOperand := map[*ast.Term]bool{}
		reach := map[*ast.Term]ast.Ref{}
		markOperands := func(op ast.Ref, operands []*ast.Term) {
			name := op.String()
			switch {
			case typeOnly[name]:
				for _, t := range operands {
					typeOperand[t] = true
				}
			case name == "object.get" && len(operands) >= 2:
				if r, ok := operands[0].Value.(ast.Ref); ok {
					if path, ok := constantPath(operands[1]); ok {
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
				if refReadsURI(v, typeOperand[t]) {
					reads = true
				}
			}
			return false
		})
	}
	return reads
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

// refReadsURI reports whether the input reference ref can read
// input.resource.uri; typeOnly says that ref is the operand of a
// type-only builtin.
func refReadsURI(ref ast.Ref, typeOnly bool) bool {
	switch {
	case len(ref) < 2:
		return true // the whole input
	case !ast.IsConstant(ref[1].Value):
		return true // input[x]
	case !ref[1].Equal(inputResource):
		return false
	case len(ref) < 3:
		return !typeOnly // the whole resource
	case !ast.IsConstant(ref[2].Value):
		return true // input.resource[x]
	default:
		return ref[2].Equal(resourceURI)
	}
}
