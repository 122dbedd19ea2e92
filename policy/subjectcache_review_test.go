// The security review's adversarial suite for the subject cache's
// projections (kept from the review of the projection change): some fifty
// policies decided for sixteen principals that differ in one field or
// collide in their encodings, five purposes (with NUL bytes), in three
// orders. It has no concurrency of its own, so `make race` leaves it to
// `make unit` (tools/racetests); TestProjectionConcurrentManyPrincipals is
// the concurrent one.

package policy

// Every test compares an engine with the subject cache against
// one without it over sequences of principals that differ in some fields,
// in several orders (whoever computes a shared value first must not decide
// for the others).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
)

// revPrincipals differ from advPrincipal in one or more fields, including
// values that would concatenate alike.
func revPrincipals() []Principal {
	base := advPrincipal
	ps := []Principal{base}
	mod := func(f func(p *Principal)) {
		p := base
		p.Roles = append([]string(nil), base.Roles...)
		p.Patients = append([]string(nil), base.Patients...)
		f(&p)
		ps = append(ps, p)
	}
	mod(func(p *Principal) { p.Sub = "bob" })
	mod(func(p *Principal) { p.Roles = []string{"clinician", "x:1"} })
	mod(func(p *Principal) { p.Roles = []string{"x:1", "clinician", "x:2"} })
	mod(func(p *Principal) { p.Roles = []string{"clinicianx:1", "x:2"} })
	mod(func(p *Principal) { p.Roles = nil })
	mod(func(p *Principal) { p.Roles = []string{} })
	mod(func(p *Principal) { p.Roles = []string{""} })
	mod(func(p *Principal) { p.ClientID = "c2" })
	mod(func(p *Principal) { p.Tenant = "t2" })
	mod(func(p *Principal) { p.Tenant = "" })
	mod(func(p *Principal) { p.Patients = []string{"p3"} })
	mod(func(p *Principal) { p.Patients = nil })
	mod(func(p *Principal) { p.Sub, p.ClientID = "c1", "alice" })
	mod(func(p *Principal) { p.Sub, p.Tenant = "alice\x00t1", "" })
	mod(func(p *Principal) { p.Sub, p.Roles, p.Tenant = "bob", []string{"researcher"}, "t2" })
	return ps
}

var revPurposes = []string{"TREAT", "HRESCH", "", "TREAT\x00", "\x00TREAT"}

type revStep struct {
	p       Principal
	purpose string
	subject bool
	batch   bool
	r       *Resource
}

func revSteps(order int) []revStep {
	ps := revPrincipals()
	var steps []revStep
	rs := advResources()
	for pi := range ps {
		// order 0: forward; 1: reverse; 2: interleaved by resource first.
		idx := pi
		if order == 1 {
			idx = len(ps) - 1 - pi
		}
		for ui, pu := range revPurposes {
			if order == 2 {
				pu = revPurposes[(ui+pi)%len(revPurposes)]
			}
			for ri, r := range rs {
				steps = append(steps, revStep{p: ps[idx], purpose: pu, subject: (ri+pi)%2 == 0, r: r})
			}
			steps = append(steps, revStep{p: ps[idx], purpose: pu, subject: pi%2 == 1, batch: true})
		}
	}
	return steps
}

// revRun decides every step on a fresh engine with the subject cache per
// order, and compares each decision with the engine without caches. That
// one keeps no state, so it is compiled once and decides each distinct
// step once: its answer to an input is the same in every order and round.
// revRun returns the mismatches.
func revRun(t *testing.T, modules map[string]string) []string {
	t.Helper()
	ctx := context.Background()
	fsys := fstest.MapFS{}
	for name, src := range modules {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	plain, _ := plainAndCached(t, fsys)
	items := func() []Item {
		return []Item{{Resource: advResources()[0]}, {Resource: advResources()[1], BreakGlass: &BreakGlass{Grant: "g", Patient: "p2"}}, {Resource: advResources()[2]}}
	}
	fresh := map[string][]advOutcome{} // by step, across orders and rounds
	freshFor := func(s revStep, in Input) []advOutcome {
		// %#v tells apart what the principals are made to confuse (nil,
		// empty and [""] roles; NUL bytes).
		key := fmt.Sprintf("%#v %q %v %v", s.p, s.purpose, s.subject, s.batch)
		if !s.batch {
			key += fmt.Sprintf(" %#v", *s.r)
		}
		if w, ok := fresh[key]; ok {
			return w
		}
		var w []advOutcome
		if s.batch {
			wd, werr := plain.DecideBatch(ctx, in, items())
			for j := range wd {
				w = append(w, advOut(wd[j], werr))
			}
		} else {
			w = []advOutcome{advOut(plain.Decide(ctx, in))}
		}
		fresh[key] = w
		return w
	}
	var bad []string
	for order := range 3 {
		_, cached := plainAndCached(t, fsys)
		if revForceNone {
			for n := range cached.subjects.levels.reads {
				cached.subjects.levels.reads[n], cached.subjects.levels.atRd[n] = 0, 0
			}
		}
		for round := range 2 {
			for si, s := range revSteps(order) {
				in := Input{Principal: s.p, PurposeOfUse: s.purpose}
				if s.subject {
					in.Subject = NewSubject(s.p)
				}
				if s.batch {
					in.Action = ActionList
					wd := freshFor(s, in)
					gd, gerr := cached.DecideBatch(ctx, in, items())
					for j := range gd {
						if w, g := wd[j], advOut(gd[j], gerr); w != g {
							bad = append(bad, fmt.Sprintf("order %d round %d step %d batch item %d (%+v %q): cached %+v, fresh %+v", order, round, si, j, s.p, s.purpose, g, w))
						}
					}
					continue
				}
				in.Action, in.Resource = ActionRead, s.r
				w := freshFor(s, in)[0]
				g := advOut(cached.Decide(ctx, in))
				if w != g {
					bad = append(bad, fmt.Sprintf("order %d round %d step %d (%+v %q %s): cached %+v, fresh %+v", order, round, si, s.p, s.purpose, s.r.URI, g, w))
				}
			}
		}
	}
	return bad
}

// revForceNone, set by the control, makes every projection empty.
var revForceNone bool

// TestReviewHarnessControl: with every projection forced empty, revRun
// must see stale values (else the tests above prove nothing).
func TestReviewHarnessControl(t *testing.T) {
	revForceNone = true
	defer func() { revForceNone = false }()
	for _, body := range []string{
		"w := input.principal.sub\nv := w\nvi(it) := w",
		"f(x) := concat(\"/\", [x, input.principal.tenant])\nv := f(\"a\")\nvi(it) := f(it.resource.type)",
		"s contains x if some x in input.principal.roles\nv := s\nvi(it) := s",
		"w := input.purpose_of_use\nv := w\nvi(it) := w",
	} {
		if bad := revRun(t, revPkg(body)); len(bad) == 0 {
			t.Errorf("control: no mismatch for %q", body)
		}
	}
}

func revCheck(t *testing.T, cases []advCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if bad := revRun(t, c.modules); len(bad) > 0 {
				n := min(len(bad), 3)
				t.Errorf("FAIL: %d mismatches, first: %s", len(bad), strings.Join(bad[:n], "\n\t"))
			}
		})
	}
}

// revDecision wraps v (any value) in a decision that shows it, and a batch
// rule that shows vi(it) per item.
const revDecision = `
decision := {"allow": true, "reasons": [sprintf("%v", [v])], "obligations": []}
decisions := [d | some it in input.items; d := {"allow": true, "reasons": [sprintf("%v", [vi(it)])], "obligations": []}]
`

func revPkg(body string) map[string]string {
	return map[string]string{"p.rego": "package custos.authz\n\n" + body + revDecision}
}

// TestReviewProjectionEvasion: ways for a rule's value to depend on a
// part of the principal (or the purpose) its projection could miss.
func TestReviewProjectionEvasion(t *testing.T) {
	revCheck(t, []advCase{
		{"principal index number", revPkg(`w := object.get(input.principal, "tenant", "none") if input.principal[0] == 1
else := input.principal.tenant
v := w
vi(it) := [it.resource.uri, w]`)},
		{"principal index true", revPkg(`w := "t" if input.principal[true]
else := concat(",", input.principal.roles)
v := w
vi(it) := [it.resource.uri, w]`)},
		{"some k principal[k]", revPkg(`w contains [k, x] if { some k; x := input.principal[k]; k != "sub" }
v := w
vi(it) := [it.resource.uri, count(w)]`)},
		{"some k,v in principal", revPkg(`w contains x if { some k, x in input.principal; k == "roles" }
v := w
vi(it) := [it.resource.uri, w]`)},
		{"else reads other fields through fn", revPkg(`g(x) := concat("/", [x, input.principal.client_id])
w := "a" if { input.principal.sub == "zzz" } else := g(input.principal.tenant)
v := w
vi(it) := [it.resource.uri, w]`)},
		{"fn in comprehension", revPkg(`f(x) := concat("/", [x, input.principal.tenant])
w := [f(x) | some x in ["a", "b"]]
v := w
vi(it) := [f(it.resource.uri), w]`)},
		{"fn in comprehension over roles", revPkg(`f(x) := concat("/", [x, input.purpose_of_use])
w := {f(x) | some x in input.principal.roles}
v := w
vi(it) := [f(it.resource.type), w]`)},
		{"with fn mock in non-subject rule", revPkg(`f(x) := concat("/", [x, "const"])
g(x) := concat("/", [x, input.principal.sub])
h(x) := f(x)
w := x if { x := h(input.resource.type) with f as g }
v := [w, f(input.resource.type), h(input.resource.type)]
vi(it) := [it.resource.uri, x, h(it.resource.type)] if { x := h(it.resource.type) with f as g }`)},
		{"with fn mock then unmocked same args", revPkg(`f(x) := concat("/", [x, "const"])
g(x) := concat("/", [x, input.principal.tenant])
w1 := x if { x := f("a") with f as g }
w2 := f("a")
v := [w1, w2]
vi(it) := [it.resource.uri, w1, w2]`)},
		{"with fn mock by value", revPkg(`f(x) := concat("/", [x, "const"])
k(x) := f(x)
w1 := x if { x := k("a") with f as input.principal.sub }
w2 := k("a")
v := [w1, w2]
vi(it) := [it.resource.uri, w1, w2]`)},
		{"builtin replaced via with", revPkg(`my_concat(d, xs) := "mock"
c(x) := concat("/", [x, input.principal.client_id])
w1 := x if { x := c("a") with concat as my_concat }
w2 := c("a")
v := [w1, w2]
vi(it) := [it.resource.uri, w1, w2]`)},
		{"builtin replaced via with principal value", revPkg(`c(x) := upper(x)
w1 := x if { x := c("a") with upper as input.principal.sub }
w2 := c("a")
v := [w1, w2]
vi(it) := [it.resource.uri, w1, w2]`)},
		{"with input.principal in non-subject rule", revPkg(`r := input.principal.tenant
f(x) := concat("/", [x, r])
w1 := x if { x := f("a") with input.principal.tenant as input.resource.tenant }
w2 := f("a")
v := [w1, w2]
vi(it) := [it.resource.uri, x, w2] if { x := f("a") with input.principal.tenant as it.resource.tenant }`)},
		{"with data rule replaced", revPkg(`r := input.principal.tenant
f(x) := concat("/", [x, r])
w1 := x if { x := f("a") with r as input.principal.sub }
w2 := f("a")
v := [w1, w2]
vi(it) := [it.resource.uri, w1, w2]`)},
		{"full data path call", revPkg(`f(x) := concat("/", [x, input.principal.client_id])
v := data.custos.authz.f(input.resource.type)
vi(it) := data.custos.authz.f(it.resource.type)`)},
		{"ref head rules", revPkg(`a.b.c := input.principal.tenant
a.b.d := "const"
a.e := input.principal.client_id
v := [data.custos.authz.a, a.b, a.b.c, a.b.d]
vi(it) := [it.resource.uri, a.e, a.b]`)},
		{"ref head generic", revPkg(`q[x].r[y] := concat("/", [x, y, input.principal.sub]) if {
	some x in ["t1", "t2"]
	some y in input.principal.roles
}
v := [q[input.resource.tenant], q.t1.r["x:1"]]
vi(it) := [it.resource.uri, [z | some z in q[it.resource.tenant].r]]`)},
		{"ref head generic scoped", revPkg(`q[x][y][z] := concat("/", [x, y, z, input.principal.tenant]) if {
	some x in ["t1", "t2"]
	some y in ["note", "observation"]
	some z in input.principal.roles
}
v := [s | s := q[input.resource.tenant][_]["clinician"]]
vi(it) := [s | s := q[it.resource.tenant][_]["x:1"]]`)},
		{"fn defined in two modules", map[string]string{
			"a.rego": "package custos.authz\nf(x) := input.principal.sub if x == 1\n",
			"b.rego": "package custos.authz\nf(x) := input.principal.tenant if x == 2\n",
			"p.rego": "package custos.authz\nv := [f(1), f(2)]\nvi(it) := [it.resource.uri, f(2)]\n" + revDecision,
		}},
		{"rule in two modules", map[string]string{
			"a.rego": "package custos.authz\ns contains input.principal.client_id\n",
			"b.rego": "package custos.authz\ns contains input.purpose_of_use\n",
			"p.rego": "package custos.authz\nv := s\nvi(it) := [it.resource.uri, s]\n" + revDecision,
		}},
		{"default rule", revPkg(`default g := "none"
g := input.principal.client_id if input.purpose_of_use == "TREAT"
default f(_) := "dflt"
f(x) := concat("/", [x, input.principal.tenant]) if x == "note"
v := [g, f(input.resource.type)]
vi(it) := [g, f(it.resource.type)]`)},
		{"every", revPkg(`ok if every r in input.principal.roles { startswith(r, "c") }
default ok := false
okf(p) if every r in input.principal.patients { r != p }
v := [ok, okf(input.resource.patient)]
vi(it) := [ok, okf(it.resource.patient)]`)},
		{"print", revPkg(`w := x if { x := input.principal.tenant; print(x) }
v := w
vi(it) := [it.resource.uri, w]`)},
		{"partial set composite key", revPkg(`s contains [r, input.principal.tenant] if some r in input.principal.roles
w if s[["clinician", input.resource.tenant]]
default w := false
v := [w, s[["x:1", "t1"]]]
vi(it) := [it.resource.uri, s[["x:2", it.resource.tenant]]]`)},
		{"partial object composite key", revPkg(`o[[r, t]] := input.principal.sub if { some r in input.principal.roles; t := input.principal.tenant }
v := object.get(o, [["clinician", input.resource.tenant]], "none")
vi(it) := [it.resource.uri, [x | x := o[["x:1", _]]]]`)},
		{"partial object object key", revPkg(`o[{"r": r}] := input.principal.client_id if { some r in input.principal.roles }
v := object.get(o, {"r": "clinician"}, "none")
vi(it) := [it.resource.uri, [x | x := o[{"r": _}]]]`)},
		{"partial set set key", revPkg(`s contains {r, input.principal.purpose_of_use} if some r in input.principal.roles
s contains {input.purpose_of_use} if true
v := [s[{"TREAT"}], s[{"clinician", null}]]
vi(it) := [it.resource.uri, s]`)},
		{"import alias of function package", map[string]string{
			"a.rego": "package custos.lib\nf(x) := concat(\"/\", [x, input.principal.patients[0]])\nwho := input.principal.sub\n",
			"p.rego": "package custos.authz\nimport data.custos.lib\nimport data.custos.lib.who as w\nv := [lib.f(input.resource.type), w]\nvi(it) := [lib.f(it.resource.type), w]\n" + revDecision,
		}},
		{"import input.principal alias dynamic", revPkg(`import input.principal as pr
w := [pr[k] | some k in ["tenant", "client_id"]]
v := w
vi(it) := [it.resource.uri, w]`)},
		{"package prefix mixed", map[string]string{
			"a.rego": "package custos.lib.x\nr := input.principal.tenant\n",
			"b.rego": "package custos.lib.y\nr := input.principal.client_id\nf(x) := concat(\"/\", [x, input.purpose_of_use])\n",
			"p.rego": "package custos.authz\nv := [data.custos.lib.x, data.custos.lib]\nvi(it) := [it.resource.uri, data.custos.lib.y.f(\"z\"), data.custos.lib.y.r]\n" + revDecision,
		}},
		{"dynamic data ref into subpackages", map[string]string{
			"a.rego": "package custos.lib.x\nr := input.principal.tenant\n",
			"b.rego": "package custos.lib.y\nr := input.principal.client_id\n",
			"p.rego": "package custos.authz\nv := [data.custos.lib[k].r | some k in [\"x\", \"y\"]]\nvi(it) := [it.resource.uri, v]\n" + revDecision,
		}},
		{"rule indexing on fields", revPkg(`g := "a" if input.principal.tenant == "t1"
g := "b" if input.principal.tenant == "t2"
g := "c" if input.principal.client_id == "c2"
v := g
vi(it) := [it.resource.uri, g]`)},
		{"number representation through shared fn", revPkg(`f(x) := json.marshal(x)
n := to_number(trim_prefix(input.resource.uri, "u://"))
v := [f(n), f(1)]
vi(it) := [f(to_number(trim_prefix(it.resource.uri, "u://"))), f(1)]`)},
		{"object.keys principal", revPkg(`w := [k | some k in object.keys(input.principal); count(input.principal[k]) > 0]
v := w
vi(it) := [it.resource.uri, w]`)},
		{"json.filter principal", revPkg(`w := json.filter(input.principal, ["client_id"])
v := w
vi(it) := [it.resource.uri, w]`)},
		{"template string", revPkg(`w := $"{input.principal.client_id}/{input.purpose_of_use}"
v := w
vi(it) := [it.resource.uri, w]`)},
		{"function with arg default and else", revPkg(`f(x) := "a" if x == "zzz"
else := concat("/", [x, input.principal.tenant])
v := f(input.resource.type)
vi(it) := f(it.resource.type)`)},
		{"recursion-free chain through partial object", revPkg(`o[k] := v if { some k, v in {"t": input.principal.tenant, "c": "const"} }
f(k) := o[k]
v := [f("t"), f("c")]
vi(it) := [it.resource.uri, f("t")]`)},
		{"purpose via dynamic input key", revPkg(`w := input[k] if k := "purpose_of_use"
v := w
vi(it) := [it.resource.uri, w]`)},
		{"walk of principal roles", revPkg(`w := [x | walk(input.principal.roles, [_, x])]
v := w
vi(it) := [it.resource.uri, w]`)},
		{"ref head key reads field", revPkg(`a[input.principal.sub].b := input.principal.client_id
o[input.principal.tenant] := input.purpose_of_use
c.d[input.principal.patients[_]] := true
v := [a, o, c]
vi(it) := [it.resource.uri, v]`)},
		{"with in else", revPkg(`r := input.principal.tenant
w := "x" if { false } else := y if { y := r with input.principal.tenant as "forced" }
v := [w, r]
vi(it) := [it.resource.uri, v]`)},
		{"with in every body", revPkg(`r := input.principal.tenant
w if every x in ["a"] { x == "a"; r == "forced" with input.principal.tenant as "forced" }
default w := false
v := [w, r]
vi(it) := [it.resource.uri, v]`)},
		{"with in comprehension in function", revPkg(`r := input.principal.tenant
f(x) := [y | y := concat("/", [x, r]) with input.principal.tenant as "forced"]
v := [f("a"), r]
vi(it) := [it.resource.uri, f("b"), r]`)},
		{"with data of subject rule used after", revPkg(`r := input.principal.tenant
f(x) := concat("/", [x, r])
w := [a, b] if { a := f("a") with r as "forced"; b := f("a") }
v := [w, f("a")]
vi(it) := [it.resource.uri, v]`)},
		{"number keyed ref head", map[string]string{
			"a.rego": "package custos.lib\nq[1].r := input.principal.tenant\nq[2].r := input.resource.uri\n",
			"p.rego": "package custos.authz\nv := [data.custos.lib.q[1].r, data.custos.lib.q[1.0].r, data.custos.lib.q[2].r]\nvi(it) := v\n" + revDecision,
		}},
		{"bool and null keyed ref heads", map[string]string{
			"a.rego": "package custos.lib\nq[true].r := input.principal.client_id\nq[null].r := input.resource.uri\n",
			"p.rego": "package custos.authz\nv := [data.custos.lib.q[true].r, data.custos.lib.q[null].r]\nvi(it) := v\n" + revDecision,
		}},
		{"ref args inside composites", revPkg(`f(x) := json.marshal(x)
v := [f([input.resource.uri]), f({"a": input.principal.tenant}), f({input.purpose_of_use}), f([[input.principal.client_id]])]
vi(it) := [f([it.resource.uri]), f({"a": input.principal.sub})]`)},
		{"ref args in comprehension and else heads", revPkg(`f(x) := json.marshal(x)
w := [f([input.principal.sub, x]) | some x in [1, 2]]
g := f(["z"]) if { false } else := f([input.principal.client_id])
v := [w, g, {f({"k": input.principal.tenant}): 1}]
vi(it) := [w, g]`)},
		{"ref args in every and not", revPkg(`f(x) := x[0] == "alice"
ok if every x in [1] { x == 1; f([input.principal.sub]) }
default ok := false
nok if not f([input.principal.sub])
default nok := false
v := [ok, nok]
vi(it) := v`)},
		{"ref args to user function through template", revPkg(`f(x) := json.marshal(x)
v := $"{f([input.principal.tenant])}"
vi(it) := v`)},
		{"rego.metadata.rule", revPkg(`# METADATA
# title: t
w := [rego.metadata.rule(), input.principal.tenant]
v := w
vi(it) := [it.resource.uri, w]`)},
	})
}

// TestReviewCompositeRefHeadKey: a ref-head rule whose ground prefix has a
// composite key (an array) sits on a rule-tree node whose key is a pointer
// value; a constant reference to it misses it in rulesReferred (map lookup
// by pointer), so a rule reading it looks input-free.
func TestReviewCompositeRefHeadKey(t *testing.T) {
	revCheck(t, []advCase{
		{"array key, resource", map[string]string{
			"a.rego": "package custos.lib\nq[[\"a\", \"b\"]].r := input.resource.uri\n",
			"p.rego": "package custos.authz\nv := data.custos.lib.q[[\"a\", \"b\"]].r\nvi(it) := v\n" + revDecision,
		}},
		{"array key, principal", map[string]string{
			"a.rego": "package custos.lib\nq[[\"a\"]].r := input.principal.sub\n",
			"p.rego": "package custos.authz\nv := data.custos.lib.q[[\"a\"]].r\nvi(it) := v\n" + revDecision,
		}},
	})
}

// TestReviewDefaultPolicyGrid: the default policy, principals that
// share roles, tenant and purpose (class_decision's store) but differ in the
// sub (including none: subject_missing), care team and client, in forward
// and reverse order on one engine each; every decision (reasons and
// obligations) must match the plain engine.
func TestReviewDefaultPolicyGrid(t *testing.T) {
	ctx := context.Background()
	fsys := fstest.MapFS{}
	for name, s := range defaultModules() {
		fsys[name] = &fstest.MapFile{Data: []byte(s)}
	}
	var ps []Principal
	for _, sub := range []string{"dr.x", "", "dr.y"} {
		for _, roles := range [][]string{{"clinician"}, {"clinician", "sensitive:hiv"}, {"researcher"}, {"billing"}, {"clinician", "auditor"}} {
			for _, pats := range [][]string{{patientA}, nil} {
				for _, tn := range []string{tenant, "other-hospital"} {
					ps = append(ps, Principal{Sub: sub, Roles: roles, ClientID: "c-" + sub, Tenant: tn, Patients: pats})
				}
			}
		}
	}
	var rs []*Resource
	for _, typ := range []string{"observation", "note", "coverage", "patient"} {
		for _, pat := range []string{patientA, patientB} {
			rs = append(rs, resource(typ, pat))
		}
	}
	rs = append(rs, with(resource("condition", patientA), func(r *Resource) { r.Sensitivity = []string{"hiv"} }),
		with(resource("observation", patientA), func(r *Resource) { r.Consent = []string{"opt-out"} }),
		with(resource("observation", patientA), func(r *Resource) { r.Tenant = "other-hospital" }))
	purposes := []string{"TREAT", "HRESCH", "HPAYMT", "ETREAT", "", "BOGUS"}
	var bad []string
	for _, reverse := range []bool{false, true} {
		plain, cached := plainAndCached(t, fsys)
		for k := range ps {
			pi := k
			if reverse {
				pi = len(ps) - 1 - k
			}
			p := ps[pi]
			for _, pu := range purposes {
				for ri, r := range rs {
					if (ri+pi)%3 != 0 && pu != "TREAT" {
						continue // keep the grid small
					}
					in := Input{Principal: p, PurposeOfUse: pu, Action: ActionRead, Resource: r}
					if ri%2 == 0 {
						in.Subject = NewSubject(p)
					}
					if ri%4 == 3 {
						in.BreakGlass = &BreakGlass{Grant: "g1", Patient: r.Patient}
					}
					wd, werr := plain.Decide(ctx, in)
					gd, gerr := cached.Decide(ctx, in)
					if !sameOutcome(gd, gerr, wd, werr) {
						bad = append(bad, fmt.Sprintf("reverse=%v %+v %q %s: cached %+v %v, fresh %+v %v", reverse, p, pu, r.URI, advOut(gd, gerr), gd.Obligations, advOut(wd, werr), wd.Obligations))
					}
				}
				in := Input{Principal: p, PurposeOfUse: pu, Action: ActionList}
				items := []Item{{Resource: rs[pi%len(rs)]}, {Resource: rs[(pi+3)%len(rs)], BreakGlass: &BreakGlass{Grant: "g2", Patient: rs[(pi+3)%len(rs)].Patient}}}
				wd, werr := plain.DecideBatch(ctx, in, items)
				gd, gerr := cached.DecideBatch(ctx, in, items)
				for j := range items {
					if advOut(wd[j], werr) != advOut(gd[j], gerr) || fmt.Sprint(wd[j].Obligations) != fmt.Sprint(gd[j].Obligations) {
						bad = append(bad, fmt.Sprintf("batch reverse=%v %+v %q item %d: cached %+v, fresh %+v", reverse, p, pu, j, advOut(gd[j], gerr), advOut(wd[j], werr)))
					}
				}
			}
		}
		if storedValues(cached.subjects) == 0 {
			t.Fatal("nothing shared")
		}
	}
	if len(bad) > 0 {
		t.Errorf("FAIL: %d mismatches, first: %s", len(bad), strings.Join(bad[:min(3, len(bad))], "\n\t"))
	}
}
