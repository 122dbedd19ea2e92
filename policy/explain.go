package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// FiredRule is a rule of package custos.authz that evaluated to true (a
// body that succeeded) while deciding one input.
type FiredRule struct {
	Rule     string `json:"rule"`     // the head: "grant_mode", "request_denies contains \"subject_missing\"", "has_role(r)"
	Location string `json:"location"` // "file:row" of the rule
}

// Explanation is a decision together with the rules that produced it.
type Explanation struct {
	Decision Decision    `json:"decision"`
	Fired    []FiredRule `json:"fired"` // in file order, each once
}

// authzPackage is the package whose rules Explain reports.
const authzPackage = "data.custos.authz"

// Explain decides in like [Engine.Decide] and also reports which rules of
// package custos.authz fired, from an OPA evaluation trace (rule exit
// events). It evaluates the input twice (once traced) and is meant for
// people (custos policy eval), not for the request path. The error is
// Decide's.
func (e *Engine) Explain(ctx context.Context, in Input) (Explanation, error) {
	d, err := e.Decide(ctx, in)
	ex := Explanation{Decision: d, Fired: []FiredRule{}}
	if verr := in.validate(); verr != nil {
		return ex, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	buf := topdown.NewBufferTracer()
	// The trace is best effort: an evaluation error is already in err.
	_, _ = e.query.Eval(ctx, rego.EvalParsedInput(in.value()), rego.EvalQueryTracer(buf))
	seen := map[string]bool{}
	for _, ev := range *buf {
		if ev.Op != topdown.ExitOp {
			continue
		}
		r, ok := ev.Node.(*ast.Rule)
		if !ok || r.Module == nil || r.Module.Package.Path.String() != authzPackage || r.Location == nil || isData(r) {
			continue
		}
		f := FiredRule{Rule: ruleHead(r), Location: fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)}
		if k := f.Location + " " + f.Rule; !seen[k] {
			seen[k] = true
			ex.Fired = append(ex.Fired, f)
		}
	}
	slices.SortFunc(ex.Fired, func(a, b FiredRule) int { return compareLocation(a.Location, b.Location) })
	return ex, err
}

// ruleHead renders r's head without its value: "name", "name contains key",
// "name(args)", "default name".
func ruleHead(r *ast.Rule) string {
	h := r.Head
	name := h.Ref().String()
	switch {
	case len(h.Args) > 0:
		// The compiler renames argument variables (__local2__): quote the
		// source head, or elide the arguments of an else branch.
		src := strings.SplitN(string(r.Location.Text), "\n", 2)[0]
		if strings.HasPrefix(src, name+"(") {
			if i := strings.Index(src, ") :="); i > 0 {
				name = src[:i+1]
				break
			}
			if i := strings.Index(src, ") if"); i > 0 {
				name = src[:i+1]
				break
			}
		}
		name += "(…)"
	case h.Key != nil && h.Value == nil:
		key := h.Key.String()
		if _, isVar := h.Key.Value.(ast.Var); isVar {
			// The compiler may have renamed it (__local2__): quote the source.
			src, _, _ := strings.Cut(strings.SplitN(string(r.Location.Text), "\n", 2)[0], " if ")
			if _, k, ok := strings.Cut(src, " contains "); ok {
				key = strings.TrimSpace(k)
			}
		}
		name += " contains " + key
	}
	if r.Default {
		name = "default " + name
	}
	if r.Else == nil && isElse(r) {
		name += " (else)"
	}
	return name
}

// isData reports whether r is a constant (a rule without a body, such as
// known_types): it always "fires" and explains nothing.
func isData(r *ast.Rule) bool {
	if r.Default || len(r.Head.Args) > 0 || len(r.Body) != 1 {
		return false
	}
	t, ok := r.Body[0].Terms.(*ast.Term)
	return ok && t.Equal(ast.BooleanTerm(true))
}

// isElse reports whether r is the else branch of another rule: its location
// starts with the keyword else.
func isElse(r *ast.Rule) bool {
	return r.Location != nil && strings.HasPrefix(strings.TrimSpace(string(r.Location.Text)), "else")
}

// compareLocation orders "file:row" by file, then numerically by row.
func compareLocation(a, b string) int {
	fa, ra := splitLocation(a)
	fb, rb := splitLocation(b)
	if c := strings.Compare(fa, fb); c != 0 {
		return c
	}
	return ra - rb
}

func splitLocation(s string) (string, int) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, 0
	}
	n := 0
	fmt.Sscan(s[i+1:], &n)
	return s[:i], n
}
