package policy

// Adversarial tests of the subject cache (from a security review of it).
// Each case loads a crafted policy twice, with the subject cache and
// without, and compares every decision over a sequence of inputs for the
// same principal and purpose: single and batch, read, list and templates,
// with and without break-the-glass grants. The policies try every way we
// found to reach the input, or to make a value depend on the evaluation,
// past the static analysis; a FAIL is a decision a fresh evaluation would
// not have made.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/ast"

	custosrego "github.com/custos-mcp/custos/rego"
)

var advPrincipal = Principal{
	Sub: "alice", Roles: []string{"clinician", "x:1", "x:2"}, ClientID: "c1", Tenant: "t1",
	Patients: []string{"p1", "p2"},
}

type advOutcome struct {
	err     bool
	allow   bool
	reasons string
}

func advOut(d Decision, err error) advOutcome {
	return advOutcome{err: err != nil, allow: d.Allow, reasons: strings.Join(d.Reasons, "|")}
}

func advResources() []*Resource {
	return []*Resource{
		{URI: "u://1", Type: "note", Patient: "p1", Tenant: "t1", Sensitivity: []string{"hiv"}},
		{URI: "u://2", Type: "observation", Patient: "p2", Tenant: "t2", Consent: []string{"opt-out"}},
		{URI: "u://3", Type: "patient", Patient: "p3", Tenant: "t1"},
		{URI: "u://1", Type: "note", Patient: "p1", Tenant: "t1", Sensitivity: []string{"hiv"}},
	}
}

// advRun compares decisions of the cached and the fresh engine for the
// policy modules over single and batch decisions; it returns the mismatches.
func advRun(t *testing.T, modules map[string]string, p Principal, useSubject bool) []string {
	t.Helper()
	ctx := context.Background()
	plain, cached := plainAndCached(t, mapFS(modules))
	if advForceAll {
		for n := range cached.subjects.levels.ok {
			cached.subjects.levels.ok[n], cached.subjects.levels.at[n] = true, true
		}
	}
	var bad []string
	rs := advResources()
	step := 0
	for round := range 2 {
		for i, r := range rs {
			for _, a := range []Action{ActionRead, ActionList} {
				for _, bg := range []*BreakGlass{nil, {Grant: "g1", Patient: r.Patient}} {
					in := Input{Principal: p, PurposeOfUse: "TREAT", Action: a, Resource: r, BreakGlass: bg}
					if useSubject {
						in.Subject = NewSubject(p)
					}
					want := advOut(plain.Decide(ctx, in))
					got := advOut(cached.Decide(ctx, in))
					if want != got {
						bad = append(bad, fmt.Sprintf("step %d round %d res %d %s bg=%v: cached %+v, fresh %+v", step, round, i, a, bg != nil, got, want))
					}
					step++
				}
			}
		}
		in := Input{Principal: p, PurposeOfUse: "TREAT", Action: ActionTemplates}
		if want, got := advOut(plain.Decide(ctx, in)), advOut(cached.Decide(ctx, in)); want != got {
			bad = append(bad, fmt.Sprintf("templates round %d: cached %+v, fresh %+v", round, got, want))
		}
		for _, a := range []Action{ActionList, ActionRead} {
			var items []Item
			for i, r := range rs {
				it := Item{Resource: r}
				if i%2 == 1 {
					it.BreakGlass = &BreakGlass{Grant: "g", Patient: r.Patient}
				}
				items = append(items, it)
			}
			for _, sub := range [][]Item{items, items[1:3], items[2:]} {
				in := Input{Principal: p, PurposeOfUse: "TREAT", Action: a}
				wd, werr := plain.DecideBatch(ctx, in, sub)
				gd, gerr := cached.DecideBatch(ctx, in, sub)
				for j := range sub {
					w, g := advOut(wd[j], werr), advOut(gd[j], gerr)
					if w != g {
						bad = append(bad, fmt.Sprintf("batch %s round %d item %d: cached %+v, fresh %+v", a, round, j, g, w))
					}
				}
			}
		}
	}
	return bad
}

// advForceAll makes every rule subject-level (the control: the harness
// must then see the stale values).
var advForceAll bool

type advCase struct {
	name    string
	modules map[string]string
}

func advCheck(t *testing.T, cases []advCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := advPrincipal
			for _, subj := range []bool{false, true} {
				if bad := advRun(t, c.modules, p, subj); len(bad) > 0 {
					n := min(len(bad), 4)
					t.Errorf("FAIL (subject=%v): %d mismatches, first: %s", subj, len(bad), strings.Join(bad[:n], "\n\t"))
				}
			}
		})
	}
}

func advPkg(body string) map[string]string {
	return map[string]string{"p.rego": "package custos.authz\n\n" + body}
}

// decision wraps a string-valued rule v in a decision; decisions does the
// same per item with a string-valued function vi(item).
const advDecision = `
decision := {"allow": true, "reasons": [sprintf("%v", [v])], "obligations": []}
`

// TestSubjectCacheAdversarialAnalysisEvasion: ways to reach the non-subject input that the
// analysis must see.
func TestSubjectCacheAdversarialAnalysisEvasion(t *testing.T) {
	advCheck(t, []advCase{
		{"import_input", advPkg(`import input
v := x if x := input.resource.uri` + advDecision)},
		{"import_input_resource_alias", advPkg(`import input.resource as r
v := r.uri` + advDecision)},
		{"import_input_alias_whole", advPkg(`import input as i
v := i.resource.uri` + advDecision)},
		{"import_data_rule_alias", advPkg(`import data.custos.authz.w as y
w := input.resource.uri
v := y` + advDecision)},
		{"fn_arg_input", advPkg(`f(x) := x.resource.uri
g := f(input)
v := g` + advDecision)},
		{"fn_arg_input_resource", advPkg(`f(x) := x.uri
v := f(input.resource)` + advDecision)},
		{"walk_input", advPkg(`v := [p | walk(input, [p, x]); x == "hiv"]` + advDecision)},
		{"json_marshal_input", advPkg(`v := json.marshal(input)` + advDecision)},
		{"object_keys_input", advPkg(`v := object.keys(input)` + advDecision)},
		{"some_kv_in_input", advPkg(`v := {k: x | some k, x in input}` + advDecision)},
		{"input_k_from_data", advPkg(`keys := ["resource"]
v := input[keys[0]]` + advDecision)},
		{"input_principal_then_dynamic", advPkg(`v := input.principal[input.action]` + advDecision)},
		{"input_principal_key_from_resource", advPkg(`v := object.get(input.principal, input.resource.type, "none")` + advDecision)},
		{"other_package", map[string]string{
			"p.rego": "package custos.authz\nimport data.other\nv := other.r" + advDecision,
			"o.rego": "package other\nr := input.resource.uri\n",
		}},
		{"dynamic_package_ref", map[string]string{
			"p.rego": "package custos.authz\npkg := \"other\"\nv := data[pkg].r" + advDecision,
			"o.rego": "package other\nr := input.resource.uri\n",
		}},
		{"dynamic_package_ref_from_principal", map[string]string{
			"p.rego": "package custos.authz\nv := data.other[input.principal.sub]" + advDecision,
			"o.rego": "package other\nalice := input.resource.uri\n",
		}},
		{"whole_data", map[string]string{
			"p.rego": "package custos.authz\nv := data.other" + advDecision,
			"o.rego": "package other\nr := input.resource.uri\n",
		}},
		{"data_package_object", map[string]string{
			"p.rego": "package custos.authz\nimport data.other\nv := [k | some k, x in other; x != \"\"]" + advDecision,
			"o.rego": "package other\nr := input.resource.uri if input.action == \"read\"\n",
		}},
		{"ref_head_input_key", advPkg(`a.b[input.resource.type] := 1
v := a.b` + advDecision)},
		{"ref_head_input_key_lookup", advPkg(`a.b[input.resource.type] := 1
v := object.get(a.b, "note", 0)` + advDecision)},
		{"ref_head_sibling_const", advPkg(`a.b.c := 1
a.b[input.resource.type] := 2
v := a.b` + advDecision)},
		{"ref_head_deep", advPkg(`a[input.resource.type].x := input.action
v := a` + advDecision)},
		{"ref_head_deep_lookup", advPkg(`a.note.x := "const"
a[input.resource.type].y := input.action
v := a.note` + advDecision)},
		{"partial_object_key", advPkg(`p[x] := y if { x := input.resource.type; y := input.action }
v := p` + advDecision)},
		{"partial_object_key_lookup", advPkg(`p[x] := 1 if x := input.resource.type
v := object.get(p, "note", 0)` + advDecision)},
		{"partial_object_ground_key", advPkg(`p[x] := input.action if some x in input.principal.roles
v := p["clinician"]` + advDecision)},
		{"multi_value_mixed", advPkg(`s contains x if some x in input.principal.roles
s contains input.resource.type
v := s` + advDecision)},
		{"multi_value_mixed_member", advPkg(`s contains x if some x in input.principal.roles
s contains input.resource.type
v := "note" in s` + advDecision)},
		{"multi_value_member_ground", advPkg(`s contains x if some x in input.principal.roles
s contains input.resource.type
v := s["note"]` + advDecision)},
		{"default_rule", advPkg(`default w := "d"
w := input.resource.type if input.action == "read"
v := w` + advDecision)},
		{"else_chain", advPkg(`w := "a" if input.principal.sub == "x" else := "b" if input.principal.sub == "y" else := input.resource.uri
v := w` + advDecision)},
		{"fn_multi_defs", advPkg(`f(x) := "p" if x == "p"
f(x) := input.resource.type if x != "p"
v := f("q")` + advDecision)},
		{"fn_default", advPkg(`default f(_) := "d"
f(x) := input.resource.type if x == "q"
v := f("q")` + advDecision)},
		{"fn_else", advPkg(`f(x) := "a" if x == "z" else := input.action
v := f("q")` + advDecision)},
		{"other_module_same_package", map[string]string{
			"p.rego": "package custos.authz\nw contains x if some x in input.principal.roles\nv := w" + advDecision,
			"q.rego": "package custos.authz\nw contains input.resource.uri\n",
		}},
		{"with_in_function", advPkg(`inner := input.principal.sub
f(x) := y if y := inner with input.principal.sub as x
v := f(input.resource.uri)` + advDecision)},
		{"with_in_comprehension", advPkg(`inner := input.principal.sub
v := [y | y := inner with input.principal.sub as input.resource.uri]` + advDecision)},
		{"with_data_mock", advPkg(`inner := input.principal.sub
mid := inner
v := y if y := mid with data.custos.authz.inner as input.resource.uri` + advDecision)},
		{"with_fn_mock", advPkg(`g(x) := x
h(x) := input.resource.uri
mid := g("k")
v := y if y := mid with g as h` + advDecision)},
		{"with_builtin_mock", advPkg(`mid := upper(input.principal.sub)
mock(_) := input.resource.uri
v := y if y := mid with upper as mock` + advDecision)},
		{"with_builtin_mock_value", advPkg(`mid := upper(input.principal.sub)
v := y if { u := input.resource.uri; y := mid with upper as u }` + advDecision)},
		{"every", advPkg(`w if every r in input.principal.roles { r != input.resource.type }
default w := false
v := w` + advDecision)},
		{"metadata_rule", advPkg(`# METADATA
# title: t
w := rego.metadata.rule()
v := w` + advDecision)},
		{"data_base_missing", advPkg(`v := object.get(data.base, ["nothing"], "none")` + advDecision)},
		{"fn_set_arg", advPkg(`f(s) := concat(",", [x | some x in s])
v := f({input.resource.type, input.action, "a"})` + advDecision)},
		{"input_in_rule_head_key", advPkg(`m[input.resource.type] := input.principal.sub
v := m` + advDecision)},
		{"bare_input_via_array", advPkg(`w := [input][0].resource.uri
v := w` + advDecision)},
		{"input_via_object_union", advPkg(`w := object.union(input.principal, input)
v := w.uri` + advDecision)},
		{"input_via_comprehension_key", advPkg(`w := {k | input[k]}
v := w` + advDecision)},
		{"purpose_and_resource_mix", advPkg(`w := concat(":", [input.purpose_of_use, input.resource.type])
v := w` + advDecision)},
		{"nested_principal_ref_with_resource_index", advPkg(`w := input.principal.patients[count(input.resource.sensitivity)]
v := w` + advDecision)},
	})
}

// TestSubjectCacheAdversarialEvaluationErrors: OPA publishes a rule or function value to
// the virtual cache at its first solution, before it has checked the other
// solutions and definitions for a conflict or an error; a fresh evaluation
// fails, the cached one is served the first value.
func TestSubjectCacheAdversarialEvaluationErrors(t *testing.T) {
	advCheck(t, []advCase{
		{"complete_rule_conflict_same_body", advPkg(`w := r if { some r in input.principal.roles; startswith(r, "x:") }
v := [w, input.resource.uri]` + advDecision)},
		{"complete_rule_conflict_two_defs", advPkg(`w := "full" if "clinician" in input.principal.roles
w := "none" if "x:2" in input.principal.roles
v := [w, input.resource.uri]` + advDecision)},
		{"function_conflict", advPkg(`f(t) := r if { some r in input.principal.roles; startswith(r, "x:") }
v := f(input.resource.type)` + advDecision)},
		{"complete_rule_builtin_error_later", advPkg(`w := n if { some r in input.principal.roles; n := count(r); n > 8 }
w := n if { some r in input.principal.roles; startswith(r, "x:"); n := to_number(r) }
v := [w, input.resource.uri]` + advDecision)},
		{"partial_object_conflict_ground_key", advPkg(`p[k] := 1 if some k in input.principal.roles
p[k] := 2 if { some k in input.principal.roles; startswith(k, "x:") }
v := [object.get(p, "x:1", 0), input.resource.uri]` + advDecision)},
		{"partial_object_conflict_lookup", advPkg(`p[k] := 1 if some k in input.principal.roles
p[k] := 2 if { some k in input.principal.roles; startswith(k, "x:") }
v := [p["x:1"], input.resource.uri]` + advDecision)},
		{"function_false_conflict", advPkg(`f(x) if x == "note"
f(x) := false if "x:1" in input.principal.roles
v := [f(input.resource.type), input.resource.uri]` + advDecision)},
		{"complete_rule_builtin_error_second_solution", advPkg(`w := 1 if { some r in input.principal.roles; to_number(trim_prefix(r, "x:")) > 0 }
v := [w, input.resource.uri]` + advDecision)},
	})
}

// TestSubjectCacheAdversarialScopedKeyPanics: OPA's virtual-cache key for a partial rule
// queried with a ground segment after a non-ground one carries a
// topdown.vcKeyScope term (a struct holding a Ref, a slice); refLevel hands
// it to TreeNode.Child, whose map lookup panics on an unhashable key.
func TestSubjectCacheAdversarialScopedKeyPanics(t *testing.T) {
	src := `package custos.authz

a[x][y][z] := concat("/", [x, y, z]) if {
	some x in ["k"]
	some y in input.principal.roles
	some z in ["n"]
}
a.k.m.n := "m"

v := [val | val := a.k[_].n]
decision := {"allow": true, "reasons": [sprintf("%v", [v])], "obligations": []}
`
	ctx := context.Background()
	fsys := fstest.MapFS{"p.rego": {Data: []byte(src)}}
	for _, opts := range []Options{{DecisionCache: -1, SubjectCache: -1}, {DecisionCache: -1}} {
		e, err := Load(ctx, fsys, opts)
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("FAIL (SubjectCache=%d): Decide panicked: %v", opts.SubjectCache, r)
				}
			}()
			d, err := e.Decide(ctx, Input{Principal: advPrincipal, PurposeOfUse: "TREAT", Action: ActionRead, Resource: advResources()[0]})
			t.Logf("SubjectCache=%d: %v %v %v", opts.SubjectCache, d.Allow, d.Reasons, err)
			in := Input{Principal: advPrincipal, PurposeOfUse: "TREAT", Action: ActionRead, Resource: advResources()[0]}
			evalOpts, _, _ := e.evalOptions(&in, in.value())
			_, rerr := evaluations.eval(ctx, &e.query, evalOpts...)
			if rerr != nil {
				t.Errorf("FAIL (SubjectCache=%d): raw evaluation error: %v", opts.SubjectCache, rerr)
			}
		}()
	}
}

// TestSubjectCacheAdversarialPathDependentBuiltins: rego.metadata.chain's value depends on
// the path from the query to the rule, not on the input; a value kept
// from a batch evaluation (query decisions) or reached via another rule is
// served to a later evaluation on another path.
func TestSubjectCacheAdversarialPathDependentBuiltins(t *testing.T) {
	advCheck(t, []advCase{
		{"metadata_chain_paths", advPkg(`w := [concat(".", [sprintf("%v", [x]) | some x in c.path]) | some c in rego.metadata.chain()]
via_read := w if input.action == "read"
via_list := w if input.action == "list"
v := object.get({"r": via_read}, "r", via_list)` + advDecision)},
		{"metadata_chain_batch", advPkg(`w := [concat(".", [sprintf("%v", [x]) | some x in c.path]) | some c in rego.metadata.chain()]
v := [w, input.resource.uri]` + advDecision + `
decisions := [d | some it in input.items; d := {"allow": true, "reasons": [sprintf("%v", [[w, it.resource.uri]])], "obligations": []}]
`)},
	})
}

// TestSubjectCacheAdversarialBatchQuery: policies with the batch rule decisions.
func TestSubjectCacheAdversarialBatchQuery(t *testing.T) {
	const batch = `
decisions := [d | some it in input.items; d := {"allow": true, "reasons": [sprintf("%v", [vi(it)])], "obligations": []}]
`
	advCheck(t, []advCase{
		{"batch_fn_of_item", advPkg(`vi(it) := [it.resource.uri, input.principal.sub, count(input.items)]
v := [input.resource.uri]` + advDecision + batch)},
		{"batch_rule_reads_items", advPkg(`n := count(input.items)
vi(it) := [it.resource.uri, n]
v := [input.resource.uri]` + advDecision + batch)},
		{"batch_fn_reads_items_default", advPkg(`default n := 0
n := count(input.items)
f(x) := [x, n]
vi(it) := f(it.resource.uri)
v := f(input.resource.uri)` + advDecision + batch)},
		{"batch_break_glass", advPkg(`f(x) := [x, object.get(input, "break_glass", null)]
vi(it) := [it.resource.uri, it.break_glass, f(1)]
v := f(2)` + advDecision + batch)},
		{"batch_subject_fn_with_item_arg", advPkg(`f(r) := [r.type, input.principal.sub, input.purpose_of_use] if "clinician" in input.principal.roles
vi(it) := f(it.resource)
v := f(input.resource)` + advDecision + batch)},
	})
}

// TestSubjectCacheAdversarialDefaultPolicyConflictBecomesAllow: the default policy says
// that should two grant_mode bodies ever apply, "evaluation fails with a
// conflict error, which the engine turns into a denial". Extend it with one
// plausible rule (researchers may also work under TREAT): a fresh
// evaluation for a clinician+researcher under TREAT fails (denial); with
// the subject cache only the first request fails, and every later one is
// decided with whichever grant_mode the first evaluation met first.
func TestSubjectCacheAdversarialDefaultPolicyConflictBecomesAllow(t *testing.T) {
	ctx := context.Background()
	orig, err := fs.ReadFile(custosrego.FS, "custos/authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"custos/authz.rego": {Data: orig},
		"custos/extra.rego": {Data: []byte(`package custos.authz

grant_mode := "research" if {
	input.purpose_of_use == "TREAT"
	input.principal.roles[_] == "researcher"
}
`)},
	}
	plain, err := Load(ctx, fsys, Options{DecisionCache: -1, SubjectCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	// The production configuration: both caches on.
	cached, err := Load(ctx, fsys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := Principal{Sub: "dr", Roles: []string{"clinician", "researcher"}, ClientID: "c", Tenant: "t1", Patients: []string{"p1"}}
	// resources/list: the batch query.
	for i := range 2 {
		items := []Item{{Resource: &Resource{URI: fmt.Sprint("custos://t1/obs/", i), Type: "observation", Patient: "p1", Tenant: "t1"}}}
		in := Input{Subject: NewSubject(p), PurposeOfUse: "TREAT", Action: ActionList}
		w, werr := plain.DecideBatch(ctx, in, items)
		g, gerr := cached.DecideBatch(ctx, in, items)
		t.Logf("list %d: fresh allow=%v %v err=%v; cached allow=%v %v err=%v", i, w[0].Allow, w[0].Reasons, werr != nil, g[0].Allow, g[0].Reasons, gerr != nil)
		if advOut(w[0], werr) != advOut(g[0], gerr) {
			t.Errorf("FAIL list %d: cached allow=%v %v, fresh allow=%v %v (err %v)", i, g[0].Allow, g[0].Reasons, w[0].Allow, w[0].Reasons, werr)
		}
	}
	for i := range 3 {
		r := &Resource{URI: fmt.Sprint("custos://t1/note/", i), Type: "note", Patient: "p1", Tenant: "t1"}
		in := Input{Subject: NewSubject(p), PurposeOfUse: "TREAT", Action: ActionRead, Resource: r}
		w, werr := plain.Decide(ctx, in)
		g, gerr := cached.Decide(ctx, in)
		t.Logf("read %d: fresh allow=%v %v err=%v; cached allow=%v %v err=%v", i, w.Allow, w.Reasons, werr != nil, g.Allow, g.Reasons, gerr != nil)
		if advOut(w, werr) != advOut(g, gerr) {
			t.Errorf("FAIL read %d: cached allow=%v %v (err %v), fresh allow=%v %v (err %v)", i, g.Allow, g.Reasons, gerr, w.Allow, w.Reasons, werr)
		}
	}
}

// TestSubjectCacheAdversarialSharedSubjectTermRace: NewSubject hands every concurrent
// request for one principal the same principal object. OPA sorts an
// object's keys lazily in place (sync.Once), but (*object).Copy reads them
// without it; `with input.… as` copies the whole input. Run with -race.
func TestSubjectCacheAdversarialSharedSubjectTermRace(t *testing.T) {
	src := `package custos.authz

ks := object.keys(input.principal)
wv := x if x := input.resource.uri with input.purpose_of_use as "X"
decision := {"allow": true, "reasons": [sprintf("%v", [count(ks)])], "obligations": []} if input.resource.type == "note"
decision := {"allow": true, "reasons": [wv], "obligations": []} if input.resource.type != "note"
`
	for _, sc := range []int{-1, 0} {
		t.Run(fmt.Sprintf("SubjectCache=%d", sc), func(t *testing.T) { advRaceOnce(t, src, sc) })
	}
}

func advRaceOnce(t *testing.T, src string, sc int) {
	ctx := context.Background()
	{
		e, err := Load(ctx, fstest.MapFS{"p.rego": {Data: []byte(src)}}, Options{DecisionCache: -1, SubjectCache: sc, Timeout: testTimeout})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			p := advPrincipal
			p.Sub = fmt.Sprintf("race-%d-%d", sc, i)
			var wg sync.WaitGroup
			for g := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					subj := NewSubject(p)
					in := Input{Subject: subj, PurposeOfUse: "TREAT", Action: ActionRead, Resource: advResources()[g]}
					if _, err := e.Decide(ctx, in); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
		}
	}
}

// TestSubjectCacheAdversarialPrincipalsNeverShare: principals that differ in one field,
// or whose fields would concatenate alike, get their own values.
func TestSubjectCacheAdversarialPrincipalsNeverShare(t *testing.T) {
	ctx := context.Background()
	src := `package custos.authz
w := json.marshal(input.principal)
f(x) := concat("#", [x, w, input.purpose_of_use])
decision := {"allow": true, "reasons": [f(input.resource.type)], "obligations": []}
`
	fsys := fstest.MapFS{"p.rego": {Data: []byte(src)}}
	plain, err := Load(ctx, fsys, Options{DecisionCache: -1, SubjectCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	cached, err := Load(ctx, fsys, Options{DecisionCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	ps := []Principal{
		{Sub: "a", Roles: []string{"a", "b"}},
		{Sub: "a", Roles: []string{"ab"}},
		{Sub: "a", Roles: []string{"a", "b"}, Patients: []string{}},
		{Sub: "a", Roles: []string{"a"}, Patients: []string{"b"}},
		{Sub: "x", ClientID: "y"},
		{Sub: "y", ClientID: "x"},
		{Sub: "x", Tenant: "y"},
		{Sub: "x", ClientID: "", Tenant: "", Roles: []string{""}},
		{Sub: "x"},
		{Sub: "x", Patients: []string{""}},
	}
	for round := range 2 {
		for i, p := range ps {
			for _, pou := range []string{"TREAT", "TREAT\x00", ""} {
				for _, subj := range []bool{false, true} {
					in := Input{Principal: p, PurposeOfUse: pou, Action: ActionRead, Resource: advResources()[0]}
					if subj {
						in.Subject = NewSubject(p)
					}
					w, g := advOut(plain.Decide(ctx, in)), advOut(cached.Decide(ctx, in))
					if w != g {
						t.Errorf("FAIL round %d principal %d purpose %q subject %v: cached %+v, fresh %+v", round, i, pou, subj, g, w)
					}
				}
			}
		}
	}
}

// TestSubjectCacheAdversarialEvalCacheFrames: a value put under `with` (depth > 0) is
// never seen at depth 0, and a full store keeps new values per evaluation.
func TestSubjectCacheAdversarialEvalCacheFrames(t *testing.T) {
	ctx := context.Background()
	e, err := Load(ctx, fstest.MapFS{"p.rego": {Data: []byte(`package custos.authz
s := input.principal.sub
decision := {"allow": true, "reasons": [s], "obligations": []}
`)}}, Options{DecisionCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	key := ast.MustParseRef("data.custos.authz.s")
	if !e.subjects.levels.subjectLevel(key) {
		t.Fatal("s is not subject-level")
	}
	in := &Input{Principal: advPrincipal, PurposeOfUse: "TREAT"}
	c := e.subjects.forInput(in)
	c.Push()
	c.Put(key, ast.StringTerm("under-with"))
	c.Pop()
	if v, undef := c.Get(key); v != nil || undef {
		t.Errorf("FAIL: value put under with is visible at depth 0: %v %v", v, undef)
	}
	if v, _ := e.subjects.forInput(in).Get(key); v != nil {
		t.Errorf("FAIL: value put under with reached the shared store: %v", v)
	}
	// A value put at depth 0 reaches the shared store only by commit (after
	// a successful evaluation).
	c1 := e.subjects.forInput(in)
	c1.Put(key, ast.StringTerm("pending"))
	if v, _ := e.subjects.forInput(in).Get(key); v != nil {
		t.Errorf("FAIL: a value reached the shared store before commit: %v", v)
	}
	c1.commit()
	if v, _ := e.subjects.forInput(in).Get(key); v == nil || v.Value.Compare(ast.String("pending")) != 0 {
		t.Errorf("FAIL: commit did not publish the value: %v", v)
	}
	// A full store: the value stays with the evaluation.
	// (s reads the sub only: another principal has another store.)
	otherP := advPrincipal
	otherP.Sub += "-other"
	other := &Input{Principal: otherP, PurposeOfUse: "ETREAT"}
	c2 := e.subjects.forInput(other)
	c2.storeFor(key).n = subjectCacheEntries
	c2.Put(key, ast.StringTerm("local"))
	c2.commit()
	if v, _ := c2.Get(key); v == nil || v.Value.Compare(ast.String("local")) != 0 {
		t.Errorf("FAIL: full store lost the evaluation's own value: %v", v)
	}
	if v, _ := e.subjects.forInput(other).Get(key); v != nil {
		t.Errorf("FAIL: full store took a value: %v", v)
	}
}

// TestSubjectCacheAdversarialLockdown: opa.runtime does not compile; time.now_ns turns
// both caches off.
func TestSubjectCacheAdversarialLockdown(t *testing.T) {
	ctx := context.Background()
	if _, err := Load(ctx, fstest.MapFS{"p.rego": {Data: []byte(`package custos.authz
w := opa.runtime()
decision := {"allow": true, "reasons": [json.marshal(w)], "obligations": []}
`)}}, Options{}); err == nil {
		t.Error("FAIL: opa.runtime compiled")
	}
	e, err := Load(ctx, fstest.MapFS{"p.rego": {Data: []byte(`package custos.authz
w := time.now_ns() if input.principal.sub != ""
decision := {"allow": true, "reasons": [sprintf("%d", [w])], "obligations": []}
`)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e.subjects != nil || e.cache != nil {
		t.Error("FAIL: caches on for a clock-reading policy")
	}
}

// TestSubjectCacheAdversarialConcurrentSetsAndObjects: shared set/object values and keys
// used by concurrent evaluations in every way that reads them. Run with
// -race.
func TestSubjectCacheAdversarialConcurrentSetsAndObjects(t *testing.T) {
	ctx := context.Background()
	src := `package custos.authz
s := {r | some r in input.principal.roles}
o := {r: count(r) | some r in input.principal.roles}
pl := input.principal
f(x) := s | {x}
g(set, obj) := [set - {"clinician"}, set & {"x:1", "zz"}, object.keys(obj), object.union(obj, {"k": 1})]
h(x) := [k | some k, _ in x]
w := [
	f(input.resource.type),
	g({"b", "a", "c"}, {"z": 1, "y": 2}),
	g(s, o),
	g({input.resource.type, input.action, "q"}, {input.resource.uri: 1, "a": 2}),
	h(pl), h(o), json.marshal(pl), s - {input.resource.type},
	[x | x := o[input.resource.type]],
	object.remove(pl, ["sub"]),
	{k: v | some k, v in object.union(pl, {"extra": 1})},
]
decision := {"allow": true, "reasons": [json.marshal(w)], "obligations": []}
decisions := [d | some it in input.items; d := {"allow": true, "reasons": [json.marshal([f(it.resource.type), g(s, o), h(pl)])], "obligations": []}]
`
	fsys := fstest.MapFS{"p.rego": {Data: []byte(src)}}
	plain, err := Load(ctx, fsys, Options{DecisionCache: -1, SubjectCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	cached, err := Load(ctx, fsys, Options{DecisionCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				p := advPrincipal
				p.Sub = fmt.Sprint("u", i%5)
				for j, r := range advResources() {
					in := Input{Principal: p, PurposeOfUse: "TREAT", Action: ActionRead, Resource: r}
					if (g+i+j)%2 == 0 {
						in.Subject = NewSubject(p)
					}
					w, gt := advOut(plain.Decide(ctx, in)), advOut(cached.Decide(ctx, in))
					if w != gt {
						t.Errorf("FAIL: cached %+v, fresh %+v", gt, w)
						return
					}
				}
				items := []Item{{Resource: advResources()[g%4]}, {Resource: advResources()[(g+1)%4]}}
				wd, _ := plain.DecideBatch(ctx, Input{Principal: p, PurposeOfUse: "TREAT", Action: ActionList}, items)
				gd, _ := cached.DecideBatch(ctx, Input{Principal: p, PurposeOfUse: "TREAT", Action: ActionList}, items)
				for k := range items {
					if advOut(wd[k], nil) != advOut(gd[k], nil) {
						t.Errorf("FAIL batch: cached %+v, fresh %+v", gd[k], wd[k])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestSubjectCacheAdversarialAnalysisEvasion2: more syntax that reaches the input.
func TestSubjectCacheAdversarialAnalysisEvasion2(t *testing.T) {
	advCheck(t, []advCase{
		{"template_string", advPkg(`w := $"{input.principal.sub}/{input.resource.uri}"
v := w` + advDecision)},
		{"template_string_in_fn", advPkg(`f(x) := $"{x}/{input.action}"
v := f(input.principal.sub)` + advDecision)},
		{"head_bare_input", advPkg(`w := input
v := w.resource.uri` + advDecision)},
		{"head_array_input", advPkg(`w := [input.principal, input]
v := w[1].resource.uri` + advDecision)},
		{"object_get_default_from_resource", advPkg(`w := object.get(input.principal, "nope", input.resource.uri)
v := w` + advDecision)},
		{"negation", advPkg(`w := "no-bg" if not input.break_glass
w := "bg" if input.break_glass
v := w` + advDecision)},
		{"head_comprehension", advPkg(`w := [x | some x in input.resource.sensitivity]
v := w` + advDecision)},
		{"set_rule_ground_lookup_mixed", advPkg(`s contains "note" if input.resource.type == "note"
s contains r if some r in input.principal.roles
w if s.note
default w := false
v := w` + advDecision)},
		{"fn_recursion_via_rule", advPkg(`r := input.resource.type
f(x) := concat("", [x, r])
g(x) := f(x)
v := g(input.principal.sub)` + advDecision)},
		{"nested_pkg_ref_prefix", map[string]string{
			"p.rego": "package custos.authz\nimport data.custos\nv := custos.authz2.sub.r" + advDecision,
			"o.rego": "package custos.authz2.sub\nr := input.resource.uri\n",
		}},
		{"pkg_prefix_object", map[string]string{
			"p.rego": "package custos.authz\nv := data.zz" + advDecision,
			"o.rego": "package zz.a\nr := input.principal.sub\n",
			"q.rego": "package zz.b\nr := input.resource.uri\n",
		}},
		{"pkg_prefix_with_subpkg_lookup", map[string]string{
			"p.rego": "package custos.authz\nv := data.zz[input.principal.sub]" + advDecision,
			"o.rego": "package zz\nbob := input.principal.sub\n",
			"q.rego": "package zz.alice\nr := input.resource.uri\n",
		}},
		{"ref_head_overlap_pkg", map[string]string{
			"p.rego": "package custos.authz\nv := data.zz.a" + advDecision,
			"o.rego": "package zz\na.b := input.principal.sub\n",
			"q.rego": "package zz.a\nc := input.resource.uri\n",
		}},
	})
}

// TestSubjectCacheAdversarialControl: with the analysis forced to call everything
// subject-level, the harness must report mismatches (else it proves
// nothing).
func TestSubjectCacheAdversarialControl(t *testing.T) {
	advForceAll = true
	defer func() { advForceAll = false }()
	for _, src := range []string{
		`v := input.resource.uri` + advDecision,
		`f(x) := concat("/", [x, input.resource.uri])
v := f("a")` + advDecision,
		`s contains input.resource.type
v := s` + advDecision,
	} {
		if bad := advRun(t, advPkg(src), advPrincipal, false); len(bad) == 0 {
			t.Errorf("control: no mismatch for %q", src)
		}
	}
}

// TestSubjectCacheAdversarialMismatchedSubject: Input.Principal and Input.Subject for
// different principals with the same Sub: the Subject wins everywhere
// (term, decision-cache key, subject-cache key), so the caches agree with
// the evaluation; a zero Subject (constructible outside the package) must
// not panic.
func TestSubjectCacheAdversarialMismatchedSubject(t *testing.T) {
	ctx := context.Background()
	src := `package custos.authz
w := concat(",", input.principal.roles)
decision := {"allow": true, "reasons": [w, input.resource.uri], "obligations": []}
`
	e, err := Load(ctx, fstest.MapFS{"p.rego": {Data: []byte(src)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	auditor := Principal{Sub: "alice", Roles: []string{"auditor"}}
	clin := Principal{Sub: "alice", Roles: []string{"clinician"}}
	// A Principal beside a Subject of another principal (same sub, other
	// roles) is refused, not decided as either of them.
	d1, err1 := e.Decide(ctx, Input{Principal: auditor, Subject: NewSubject(clin), PurposeOfUse: "TREAT", Action: ActionRead, Resource: advResources()[0]})
	if !errors.Is(err1, ErrBadInput) || d1.Allow || !slices.Equal(d1.Reasons, []string{"bad_input"}) {
		t.Errorf("Principal=auditor, Subject=clinician: %+v, %v; want a bad_input denial", d1, err1)
	}
	// A Subject not made by NewSubject is refused, not a panic.
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Decide with a zero Subject panicked: %v", r)
			}
		}()
		d, err := e.Decide(ctx, Input{Subject: &Subject{}, PurposeOfUse: "TREAT", Action: ActionRead, Resource: advResources()[0]})
		if !errors.Is(err, ErrBadInput) || d.Allow {
			t.Errorf("zero Subject: %+v, %v; want a bad_input denial", d, err)
		}
	}()
}

// mapFS is modules (file name -> source) as a file system.
func mapFS(modules map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, src := range modules {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	return fsys
}
