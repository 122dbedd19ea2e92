package policy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/custos-mcp/custos/internal/fhirr4"
)

// Batch agreement. A list page is decided by the policy's decisions rule
// (BatchQuery) and a read by decision (Query); the server relies on
// decisions[i] being the decision decision gives for item i, so that a
// listing never shows what a read would deny (docs/policy.md, "Batch
// decisions"). That is the policy author's contract, and a policy that
// changes decision without decisions breaks it silently: its tests may
// never look at decisions. So every candidate with a decisions rule is
// decided both ways, without caches, on a grid of synthetic list requests
// (agreementGrid) before it may serve ([vet]), and custos policy check
// reports the same ([CheckBatch]). The grid is synthetic: its principals,
// patients and URIs name no one, so an error may quote them.

// agreementPage is one synthetic list request of the grid.
type agreementPage struct {
	in    Input
	items []Item
}

// agreementGrid returns the synthetic list pages: a small cast (a
// clinician, one with sensitive-category roles, billing, research, an
// auditor, no role, another tenant's clinician), each under the purposes
// its grants turn on and one it has none for (and a clinician without
// purpose), each page holding every kind of resource the roles differ on
// (FHIR types, the document families, reference data, an unknown type) of
// the patient in the care team and of one outside it, unlabelled, labelled
// hiv or restricted, opted out, and under a break-the-glass grant. It is
// small on purpose (a few thousand items, under a second at every load):
// it catches a rule added to one entry point and not the other, not every
// divergence a policy could hide.
//
// Its types were fixed too, so a rule deciding by a type the grid did not
// hold (a biller's claim, explanationofbenefit; a type a policy author
// adds) decided unseen; so each page also holds, for each resource type
// the policy names (extraTypes, policyTypes), an unlabelled item of it in
// the compartment of the patient in the care team and one at the tenant's
// level.
//
// Its URIs are synthetic, so a rule deciding by the URI itself (a VIP's
// compartment held back by decision and not by decisions) decided every
// one of them alike both ways. So each page also holds, for each string
// the policy names (strs, policyStrings), an item whose URI is that
// string: a test of the URI against a constant (==, startswith, endswith,
// contains, a lookup in a set of URIs) holds on it as on the URIs it is
// meant for.
//
// The cast is fixed, so a role the policy adds (a pharmacist) was never
// a principal of the grid, and a decisions rule that listed that role
// what decision denied it loaded. So each role the policy names (roles,
// policyRoles) that the cast does not hold is cast too (at most
// maxGridRoles), alone, with the patient in its care team, under every
// purpose of use custos knows.
func agreementGrid(strs, roles, extraTypes []string) []agreementPage {
	const (
		tenant = "agreement-tenant"
		inTeam = "00000000-0000-4000-8000-00000000a001"
		other  = "00000000-0000-4000-8000-00000000a002"
	)
	who := func(sub string, roles []string, tenant string, patients ...string) Principal {
		return Principal{Sub: sub, Roles: roles, ClientID: "agreement-client", Tenant: tenant, Patients: append([]string{}, patients...)}
	}
	clinician := who("agreement-clinician", []string{"clinician"}, tenant, inTeam)
	// Each principal under the purposes its grants turn on, and one or two
	// it has no grant for; the request-level rules (purpose missing,
	// auditor, tenant) come up too.
	cast := []struct {
		p        Principal
		purposes []string
	}{
		{clinician, []string{"TREAT", "ETREAT", "HRESCH", ""}},
		{who("agreement-clinician-sensitive", []string{"clinician", "sensitive:hiv", "sensitive:very-restricted"}, tenant, inTeam), []string{"TREAT"}},
		{who("agreement-billing", []string{"billing"}, tenant), []string{"HPAYMT", "TREAT"}},
		{who("agreement-researcher", []string{"researcher"}, tenant), []string{"HRESCH", "HPAYMT"}},
		{who("agreement-auditor", []string{"auditor", "clinician"}, tenant, inTeam), []string{"TREAT"}},
		{who("agreement-nobody", []string{}, tenant, inTeam), []string{"TREAT"}},
		{who("agreement-elsewhere", []string{"clinician"}, "agreement-other-tenant", inTeam), []string{"TREAT"}},
	}
	held := map[string]bool{}
	for _, c := range cast {
		for _, r := range c.p.Roles {
			held[r] = true
		}
	}
	added := 0
	for i, role := range roles {
		if held[role] || added == maxGridRoles {
			continue
		}
		added++
		cast = append(cast, struct {
			p        Principal
			purposes []string
		}{who(fmt.Sprintf("agreement-role-%d", i), []string{role}, tenant, inTeam), gridPurposes})
	}
	types := gridTypes
	labels := []struct{ sensitivity, consent []string }{
		{[]string{}, []string{}},
		{[]string{"hiv"}, []string{}},
		{[]string{"restricted"}, []string{}},
		{[]string{}, []string{"opt-out"}},
	}
	n := 0
	res := func(typ, patient string, sensitivity, consent []string) *Resource {
		n++
		uri := fmt.Sprintf("fhir://%s/%s/00000000-0000-4000-8000-%012d", tenant, typ, n)
		if patient != "" {
			uri = fmt.Sprintf("fhir://%s/patients/%s/%s/00000000-0000-4000-8000-%012d", tenant, patient, typ, n)
		}
		return &Resource{URI: uri, Type: typ, Patient: patient, Tenant: tenant,
			Sensitivity: slices.Clone(sensitivity), Consent: slices.Clone(consent)}
	}
	var items []Item
	for _, typ := range types {
		for _, p := range []string{inTeam, other} {
			for _, l := range labels {
				items = append(items, Item{Resource: res(typ, p, l.sensitivity, l.consent)})
			}
		}
		items = append(items, Item{Resource: res(typ, other, []string{}, []string{}),
			BreakGlass: &BreakGlass{Grant: "00000000-0000-4000-8000-00000000b001", Patient: other}})
	}
	// A type the policy names: in the compartment of the patient in the
	// care team, and at the tenant's level (reference data).
	for _, typ := range extraTypes {
		for _, p := range []string{inTeam, ""} {
			items = append(items, Item{Resource: res(typ, p, []string{}, []string{})})
		}
	}
	for _, typ := range []string{"organization", "practitioner", "location", "group", "no-such-type"} {
		items = append(items, Item{Resource: res(typ, "", []string{}, []string{})})
	}
	// A patient's home imported as a Location (fhirin's residence label):
	// tenant-level, and the default policy's reference data but for it.
	items = append(items, Item{Resource: res("location", "", []string{"residence"}, []string{})})
	for _, str := range strs {
		r := res("observation", inTeam, []string{}, []string{})
		r.URI = str
		items = append(items, Item{Resource: r})
	}
	var pages []agreementPage
	for _, c := range cast {
		for _, pou := range c.purposes {
			pages = append(pages, agreementPage{in: Input{Principal: c.p, PurposeOfUse: pou, Action: ActionList}, items: items})
		}
	}
	return pages
}

// batchAgrees decides the agreement grid with u both ways and returns an
// error (wrapping ErrBatchDisagrees) naming the first item on which they
// differ and how many did; nil when u has no decisions rule. u must have
// no decision or subject cache, or one way would answer from the other's
// results. Both ways failing (denying) on an item is agreement; one failing
// and the other not is not: a page that always fails lists nothing, and an
// item whose read fails must not be listed. A page that the decisions rule
// cannot decide within the evaluation time-out is an error of its own
// (wrapping ErrEvaluation), not reported as a disagreement.
func batchAgrees(ctx context.Context, u *Engine) error {
	if u.batch == nil {
		return nil
	}
	var first string
	differ, total := 0, 0
	for _, p := range policyGrid(u.policies) {
		batch, berrs, err := decideGridPage(ctx, u, p.in, p.items)
		if err != nil {
			return err
		}
		for i, it := range p.items {
			if err := ctx.Err(); err != nil {
				return err
			}
			x := p.in
			x.Resource, x.BreakGlass = it.Resource, it.BreakGlass
			d, derr := u.Decide(ctx, x)
			total++
			var diff string
			switch berr := berrs[i]; {
			case berr != nil && derr != nil:
			case berr != nil:
				diff = fmt.Sprintf("decisions fails the page (%v); decision %s", berr, describeDecision(d))
			case derr != nil:
				diff = fmt.Sprintf("decisions %s; decision fails (%v)", describeDecision(batch[i]), derr)
			case batch[i].Allow != d.Allow || !slices.Equal(batch[i].Reasons, d.Reasons) || !slices.Equal(batch[i].Obligations, d.Obligations):
				diff = fmt.Sprintf("decisions %s; decision %s", describeDecision(batch[i]), describeDecision(d))
			}
			if diff == "" {
				continue
			}
			differ++
			if first == "" {
				first = describeItem("list", p.in, it) + ": " + diff
			}
		}
	}
	if differ > 0 {
		return fmt.Errorf("%w: on %d of %d synthetic list items; the first: %s", ErrBatchDisagrees, differ, total, first)
	}
	return nil
}

// minGridSplit is the smallest page of the agreement grid that
// decideGridPage still cuts in two when decisions does not decide it
// within the evaluation time-out.
const minGridSplit = 8

// gridDecideBatch decides a page of the agreement grid; a variable only so
// that a test can make a page time out.
var gridDecideBatch = (*Engine).DecideBatch

// decideGridPage decides a page of the agreement grid with u's decisions
// rule: the decisions and, per item, the error of the evaluation that
// decided it (the page's, or of the part it was in). A page that is not
// decided within the evaluation time-out is decided again in two halves,
// down to pages of minGridSplit items: the time-out bounds a served
// page's evaluation, and a loaded machine (a CI run beside other builds)
// exceeded it on a page of 256 items that an idle one decides in a few
// tens of milliseconds, refusing the default policy at load. Each item is
// still compared with its single decision, whatever page decided it. A
// page of minGridSplit items or fewer that still times out is an error
// (wrapping ErrEvaluation): the list rule is too slow to serve a page.
func decideGridPage(ctx context.Context, u *Engine, in Input, items []Item) ([]Decision, []error, error) {
	batch, berr := gridDecideBatch(u, ctx, in, items)
	if !errors.Is(berr, context.DeadlineExceeded) || ctx.Err() != nil {
		errs := make([]error, len(items))
		for i := range errs {
			errs[i] = berr
		}
		if berr != nil {
			batch = make([]Decision, len(items))
		}
		return batch, errs, nil
	}
	if len(items) <= minGridSplit {
		return nil, nil, fmt.Errorf("%w: decisions did not decide a list page of %d synthetic items by %s (roles %s) for purpose %q within the evaluation time-out (%s)",
			ErrEvaluation, len(items), in.Principal.Sub, strings.Join(in.Principal.Roles, ","), in.PurposeOfUse, u.timeout)
	}
	half := len(items) / 2
	d1, e1, err := decideGridPage(ctx, u, in, items[:half])
	if err != nil {
		return nil, nil, err
	}
	d2, e2, err := decideGridPage(ctx, u, in, items[half:])
	if err != nil {
		return nil, nil, err
	}
	return append(d1, d2...), append(e1, e2...), nil
}

// maxGridStrings bounds the items policyStrings adds to each page of the
// agreement grid (~100 µs each, both ways, on every page).
const maxGridStrings = 512

// maxGridPage bounds a list page of the agreement grid: a page is one
// evaluation of decisions, which must finish within the evaluation
// time-out, and the grid's pages grew past 800 items with the types a
// policy names, which a researcher's page did not decide within 1 s under
// the race detector (a loaded machine would refuse the default policy at
// load the same way). A served list page holds at most app.MaxPageSize
// (500) items.
const maxGridPage = 256

// policyGrid is the agreement grid for the policy files, its pages cut to
// at most maxGridPage items.
func policyGrid(files []regoFile) []agreementPage {
	strs := policyStrings(files)
	var out []agreementPage
	for _, p := range agreementGrid(strs[:min(len(strs), maxGridStrings)], policyRoles(files), policyTypes(strs)) {
		for items := range slices.Chunk(p.items, maxGridPage) {
			out = append(out, agreementPage{in: p.in, items: items})
		}
	}
	return out
}

// policyStrings returns the distinct string constants of the policy files,
// shortest first; agreementGrid takes at most maxGridStrings of them as
// URIs. A file that does not parse gives none (its load fails on its own).
func policyStrings(files []regoFile) []string {
	seen := map[string]bool{}
	for _, f := range files {
		m, err := ast.ParseModuleWithOpts(f.path, string(f.content), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			continue
		}
		ast.WalkTerms(m, func(t *ast.Term) bool {
			if s, ok := t.Value.(ast.String); ok && s != "" {
				seen[string(s)] = true
			}
			return false
		})
	}
	strs := slices.Collect(maps.Keys(seen))
	slices.SortFunc(strs, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) })
	return strs
}

// gridTypes are the resource types every page of the agreement grid holds:
// the types the default roles differ on and custos's document families.
var gridTypes = []string{"patient", "observation", "encounter", "coverage", "note", "report", "image", "attachment"}

// maxGridTypes bounds the types policyTypes adds to the grid (each two
// items on every page): more than R4's 146 resource types and custos's
// document families, so that every type a policy names is held.
const maxGridTypes = 160

// resourceTypes are the values input.resource.type takes: every R4
// resource type, lowercased (store's URIs), and custos's document families.
var resourceTypes = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{"note": true, "report": true, "image": true, "attachment": true}
	for t := range fhirr4.Resources {
		m[strings.ToLower(t)] = true
	}
	return m
})

// policyTypes returns the resource types among the policy's string
// constants strs that gridTypes does not hold (at most maxGridTypes, in
// strs' order): a type the policy compares input.resource.type with, or
// lists in a set of types, is a string constant of it.
func policyTypes(strs []string) []string {
	var out []string
	for _, s := range strs {
		if len(out) < maxGridTypes && resourceTypes()[s] && !slices.Contains(gridTypes, s) {
			out = append(out, s)
		}
	}
	return out
}

// gridPurposes are the purposes of use a role the policy adds is cast
// under (docs/policy.md, "Input").
var gridPurposes = []string{"TREAT", "ETREAT", "HPAYMT", "HOPERAT", "HRESCH", "HMARKT", "COVERAGE", "PUBHLTH", "PATRQT"}

// maxGridRoles bounds the roles agreementGrid adds to its cast (each nine
// pages).
const maxGridRoles = 16

var principalRoles = ast.MustParseRef("input.principal.roles")

// policyRoles returns the roles the policy names (sorted), for
// agreementGrid: the strings of each expression that
// reads input.principal.roles ("x" in input.principal.roles,
// input.principal.roles[_] == "x"), the string arguments of each call
// of a function of the policy whose body reads it (has_role("x")), and
// the keys of the policy's own data looked up by a role of the
// principal's (role_purposes[role] after some role in
// input.principal.roles: roleKeyedData). A role the policy reaches
// otherwise (a string built at evaluation time, a key of data looked up
// through a function's argument) is not found. A file that does not parse
// gives none.
func policyRoles(files []regoFile) []string {
	var modules []*ast.Module
	for _, f := range files {
		if m, err := ast.ParseModuleWithOpts(f.path, string(f.content), ast.ParserOptions{RegoVersion: ast.RegoV1}); err == nil {
			modules = append(modules, m)
		}
	}
	readsRoles := func(x any) bool {
		found := false
		ast.WalkRefs(x, func(r ast.Ref) bool {
			found = found || r.HasPrefix(principalRoles)
			return found
		})
		return found
	}
	strs := func(x any, seen map[string]bool) {
		ast.WalkTerms(x, func(t *ast.Term) bool {
			switch v := t.Value.(type) {
			case ast.Ref: // a path (input.principal.roles) or an operator, no role
				return true
			case ast.String:
				if v != "" {
					seen[string(v)] = true
				}
			}
			return false
		})
	}
	funcs := map[string]bool{} // the policy's functions that read the roles
	for _, m := range modules {
		for _, r := range m.Rules {
			if len(r.Head.Args) > 0 && readsRoles(r.Body) {
				funcs[r.Head.Ref().String()] = true
			}
		}
	}
	seen := map[string]bool{}
	for _, m := range modules {
		ast.WalkExprs(m, func(e *ast.Expr) bool {
			if readsRoles(e) {
				strs(e, seen)
			}
			return false
		})
		ast.WalkTerms(m, func(t *ast.Term) bool { // a call inside an expression: x := f("y")
			if call, ok := t.Value.(ast.Call); ok && len(call) > 0 && funcs[call[0].String()] {
				for _, a := range call[1:] {
					strs(a, seen)
				}
			}
			return false
		})
		ast.WalkExprs(m, func(e *ast.Expr) bool { // an expression that is a call: has_role("y")
			if e.IsCall() && funcs[e.Operator().String()] {
				for _, a := range e.Operands() {
					strs(a, seen)
				}
			}
			return false
		})
	}
	roleKeyedData(modules, seen)
	return slices.Sorted(maps.Keys(seen))
}

// roleKeyedData adds to seen the keys of the policy's data that a rule
// looks up by a role of the principal's: in a rule whose body binds a
// variable to an element of input.principal.roles (some role in
// input.principal.roles, some i, role in ..., role := or =
// input.principal.roles[_]), each ref indexed by that variable
// (grants[role], data.custos.authz.grants[role]) names a rule by its path
// (grants in the rule's own package, or data.<package>.<rule>); the string
// keys of that rule's object value (grants := {"pharmacist": ...}) and of
// its partial object rules (grants["pharmacist"] := ...) are roles. A rule
// of the same name in another package is another rule: its keys are no
// roles (TestPolicyRoles).
func roleKeyedData(modules []*ast.Module, seen map[string]bool) {
	// rulePath is the path of the rule ref[:n] names in m ("" if none:
	// a ref that is not all names).
	rulePath := func(m *ast.Module, ref ast.Ref, n int) string {
		if n < 1 {
			return ""
		}
		var path ast.Ref
		switch v := ref[0].Value.(type) {
		case ast.Var:
			if v.Equal(ast.DefaultRootDocument.Value) {
				path = ref[:1].Copy()
			} else {
				path = m.Package.Path.Append(ast.StringTerm(string(v)))
			}
		default:
			return ""
		}
		for _, t := range ref[1:n] {
			s, ok := t.Value.(ast.String)
			if !ok {
				return ""
			}
			path = path.Append(ast.StringTerm(string(s)))
		}
		return path.String()
	}
	keyed := map[string]bool{} // paths of the rules looked up by a role
	for _, m := range modules {
		for _, r := range m.Rules {
			vars := roleVars(r.Body)
			if len(vars) == 0 {
				continue
			}
			ast.WalkRefs(r, func(ref ast.Ref) bool {
				for i := 1; i < len(ref); i++ {
					if v, ok := ref[i].Value.(ast.Var); ok && vars[v] {
						if p := rulePath(m, ref, i); p != "" {
							keyed[p] = true
						}
					}
				}
				return false
			})
		}
	}
	for _, m := range modules {
		for _, r := range m.Rules {
			ref := r.Head.Ref()
			switch {
			case len(ref) == 1 && keyed[rulePath(m, ref, 1)] && r.Head.Value != nil:
				if obj, ok := r.Head.Value.Value.(ast.Object); ok {
					obj.Foreach(func(k, _ *ast.Term) {
						if s, ok := k.Value.(ast.String); ok && s != "" {
							seen[string(s)] = true
						}
					})
				}
			case len(ref) == 2 && keyed[rulePath(m, ref, 1)]:
				if s, ok := ref[1].Value.(ast.String); ok && s != "" {
					seen[string(s)] = true
				}
			}
		}
	}
}

// roleVars returns the variables body binds to an element of
// input.principal.roles.
func roleVars(body ast.Body) map[ast.Var]bool {
	vars := map[ast.Var]bool{}
	isRoles := func(t *ast.Term) bool {
		r, ok := t.Value.(ast.Ref)
		return ok && r.Equal(principalRoles)
	}
	isElement := func(t *ast.Term) bool { // input.principal.roles[_]
		r, ok := t.Value.(ast.Ref)
		return ok && len(r) == len(principalRoles)+1 && r.HasPrefix(principalRoles)
	}
	bind := func(t *ast.Term) {
		if v, ok := t.Value.(ast.Var); ok && !v.IsWildcard() {
			vars[v] = true
		}
	}
	ast.WalkExprs(body, func(e *ast.Expr) bool {
		if some, ok := e.Terms.(*ast.SomeDecl); ok {
			for _, sym := range some.Symbols {
				call, ok := sym.Value.(ast.Call)
				if !ok || len(call) < 3 || !isRoles(call[len(call)-1]) {
					continue
				}
				bind(call[len(call)-2]) // the value: some role in / some i, role in
			}
			return false
		}
		if (e.IsAssignment() || e.IsEquality() || e.IsCall() && e.Operator().Equal(ast.Equal.Ref())) && len(e.Operands()) == 2 {
			a, b := e.Operand(0), e.Operand(1)
			if isElement(a) {
				bind(b)
			}
			if isElement(b) {
				bind(a)
			}
		}
		return false
	})
	return vars
}

// describeItem names a request of the grid: verb ("list", "read") by
// whom, for which purpose, of which resource.
func describeItem(verb string, in Input, it Item) string {
	r := it.Resource
	return fmt.Sprintf("%s by %s (roles %s) for purpose %q of a resource of type %s (uri %q, patient %s, sensitivity %v, consent %v, break-glass %t)",
		verb, in.Principal.Sub, strings.Join(in.Principal.Roles, ","), in.PurposeOfUse, r.Type, r.URI,
		agreementPatient(r.Patient, in.Principal), r.Sensitivity, r.Consent, it.BreakGlass != nil)
}

func agreementPatient(patient string, p Principal) string {
	switch {
	case patient == "":
		return "none"
	case slices.Contains(p.Patients, patient):
		return "in the care team"
	}
	return "outside the care team"
}

func describeDecision(d Decision) string {
	verdict := "denies"
	if d.Allow {
		verdict = "allows"
	}
	s := fmt.Sprintf("%s (reasons %v", verdict, d.Reasons)
	if len(d.Obligations) > 0 {
		obs := make([]string, len(d.Obligations))
		for i, o := range d.Obligations {
			obs[i] = o.String()
		}
		s += ", obligations " + strings.Join(obs, " ")
	}
	return s + ")"
}

// uncached compiles policies again without decision or subject cache, for
// batchAgrees. opts must have been validated.
func uncached(ctx context.Context, policies []regoFile, opts Options) (*Engine, error) {
	opts.DecisionCache = -1
	opts.Logger = slog.New(slog.DiscardHandler) // the candidate's own compile has logged
	return compile(ctx, policies, opts)
}

// CheckBatch reports whether e's decisions rule agrees with its decision
// rule on the agreement grid, as every load requires (custos policy check
// shows it): nil when it does or when e has no decisions rule, else an
// error wrapping ErrBatchDisagrees that names the first item that differs.
func CheckBatch(ctx context.Context, e *Engine) error {
	if e.batch == nil {
		return nil
	}
	opts := Options{Timeout: e.timeout}
	if err := opts.validate(); err != nil {
		return err
	}
	u, err := uncached(ctx, e.policies, opts)
	if err != nil {
		return err
	}
	return batchAgrees(ctx, u)
}

// CheckGrid decides every item of the agreement grid as a read with e's
// decision rule and returns an error (wrapping ErrEvaluation) naming how
// many of them it could not decide and the first, or nil. The server
// denies such a request (policy_error), so a load does not refuse the
// policy for it; but an evaluation error on a request the grid makes up
// is a defect of the policy: a probe's pharmacist role, whose two reasons
// for a denial (outside the care team, another resource type) were two
// definitions of one function, failed with eval_conflict_error on every
// read of another type outside the care team, and policy test, check and
// the load's agreement check (where both ways failing is agreement) all
// passed it; only policy impact showed it, as replay errors. custos
// policy check reports it.
func CheckGrid(ctx context.Context, e *Engine) error {
	var first string
	failed, total := 0, 0
	for _, p := range policyGrid(e.policies) {
		for _, it := range p.items {
			if err := ctx.Err(); err != nil {
				return err
			}
			x := p.in
			x.Action, x.Resource, x.BreakGlass = ActionRead, it.Resource, it.BreakGlass
			total++
			_, err := e.Decide(ctx, x)
			if err == nil {
				continue
			}
			failed++
			if first == "" {
				first = describeItem("read", x, it) + ": " + err.Error()
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: decision could not decide %d of %d synthetic reads; the first: %s", ErrEvaluation, failed, total, first)
	}
	return nil
}
