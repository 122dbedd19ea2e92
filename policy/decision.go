package policy

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/custos-mcp/custos/minimize"
)

var (
	keyAllow       = ast.StringTerm("allow")
	keyReasons     = ast.StringTerm("reasons")
	keyObligations = ast.StringTerm("obligations")
)

// parseDecision checks the shape of the value the policy produced and decodes
// it, straight from OPA's AST (no conversion to Go maps first). It returns an
// error wrapping ErrBadShape or ErrBadObligation (the latter also wraps the
// minimize validation error). Messages name keys and types, never values,
// except obligation fields (policy-authored).
//
// Shape: an object with "allow" (boolean, required), "reasons" (array of
// strings, optional) and "obligations" (array of objects, optional); a Rego
// set is accepted where an array is expected, in its sorted order, as OPA
// would render it in JSON. Any other key of the decision is rejected
// (ErrBadShape): "obligation", "Obligations" or a key of a vocabulary of its
// own may carry minimizations the server would otherwise release the payload
// without. An obligation is an object with "op" (string, required), "path"
// (string, optional, default "") and "fn" (string, optional); any other key
// is rejected, because an obligation the server only partly understands
// cannot be enforced.
func parseDecision(v ast.Value) (allow bool, reasons []string, obs []minimize.Obligation, err error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return false, nil, nil, fmt.Errorf("%w: decision is %s, want object", ErrBadShape, ast.ValueName(v))
	}
	at, rt, ot := obj.Get(keyAllow), obj.Get(keyReasons), obj.Get(keyObligations)
	// Every key is one of the three exactly when the object holds as many
	// keys as it has of them; only then is Keys' slice made, to name the
	// first unknown key in sorted order (a slice per decision otherwise:
	// docs/benchmarks.md, "Issue 17, twenty-sixth step").
	if known := countNonNil(at, rt, ot); obj.Len() != known {
		for _, k := range obj.Keys() {
			if !k.Equal(keyAllow) && !k.Equal(keyReasons) && !k.Equal(keyObligations) {
				return false, nil, nil, fmt.Errorf("%w: unknown key %.40s (a decision has allow, reasons and obligations)", ErrBadShape, k.String())
			}
		}
	}
	if at == nil {
		return false, nil, nil, fmt.Errorf("%w: decision has no \"allow\"", ErrBadShape)
	}
	b, ok := at.Value.(ast.Boolean)
	if !ok {
		return false, nil, nil, fmt.Errorf("%w: \"allow\" is %s, want boolean", ErrBadShape, ast.ValueName(at.Value))
	}
	if rt != nil {
		elems, ok := elements(rt.Value)
		if !ok {
			return false, nil, nil, fmt.Errorf("%w: \"reasons\" is %s, want array", ErrBadShape, ast.ValueName(rt.Value))
		}
		reasons = make([]string, elems.Len())
		for i := range reasons {
			s, ok := elems.Elem(i).Value.(ast.String)
			if !ok {
				return false, nil, nil, fmt.Errorf("%w: reasons[%d] is %s, want string", ErrBadShape, i, ast.ValueName(elems.Elem(i).Value))
			}
			reasons[i] = string(s)
		}
	}
	if ot != nil {
		elems, ok := elements(ot.Value)
		if !ok {
			return false, nil, nil, fmt.Errorf("%w: \"obligations\" is %s, want array", ErrBadShape, ast.ValueName(ot.Value))
		}
		if n := elems.Len(); n > 0 {
			obs = make([]minimize.Obligation, n)
		}
		for i := range obs {
			o, err := parseObligation(elems.Elem(i).Value)
			if err != nil {
				return false, nil, nil, fmt.Errorf("obligations[%d]: %w", i, err)
			}
			obs[i] = o
		}
	}
	return bool(b), reasons, obs, nil
}

// elements returns the elements of an array, or of a set in sorted order.
func elements(v ast.Value) (*ast.Array, bool) {
	switch x := v.(type) {
	case *ast.Array:
		return x, true
	case ast.Set:
		return x.Sorted(), true
	}
	return nil, false
}

func parseObligation(v ast.Value) (minimize.Obligation, error) {
	var o minimize.Obligation
	obj, ok := v.(ast.Object)
	if !ok {
		return o, fmt.Errorf("%w: obligation is %s, want object", ErrBadShape, ast.ValueName(v))
	}
	hasOp := false
	for _, k := range obj.Keys() {
		ks, ok := k.Value.(ast.String)
		if !ok || (ks != "op" && ks != "path" && ks != "fn") {
			return o, fmt.Errorf("%w: unknown key %.40s", ErrBadObligation, k.String())
		}
		val := obj.Get(k).Value
		s, ok := val.(ast.String)
		if !ok {
			return o, fmt.Errorf("%w: %q is %s, want string", ErrBadShape, string(ks), ast.ValueName(val))
		}
		switch ks {
		case "op":
			o.Op, hasOp = string(s), true
		case "path":
			o.Path = string(s)
		case "fn":
			o.Fn = string(s)
		}
	}
	if !hasOp {
		return o, fmt.Errorf("%w: obligation has no \"op\"", ErrBadShape)
	}
	if err := o.Validate(); err != nil {
		return o, fmt.Errorf("%w: %w", ErrBadObligation, err)
	}
	return o, nil
}

// countNonNil is how many of ts are not nil.
func countNonNil(ts ...*ast.Term) int {
	n := 0
	for _, t := range ts {
		if t != nil {
			n++
		}
	}
	return n
}
