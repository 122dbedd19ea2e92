package policy

// Tests of the subject cache's projections: a subject-level value is shared
// by every request that agrees on the parts of the principal and purpose its
// rule reads (and only those), so that a principal's first decision reuses
// what colleagues' decisions computed.

import (
	"context"
	"fmt"
	"io/fs"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	custosrego "github.com/custos-mcp/custos/rego"
)

func TestSubjectInputProjection(t *testing.T) {
	for _, c := range []struct {
		ref  string
		want projection
		ok   bool
	}{
		{"input.principal.sub", readsSub, true},
		{"input.principal.roles[_]", readsRoles, true},
		{"input.principal.roles[0]", readsRoles, true},
		{"input.principal.client_id", readsClientID, true},
		{"input.principal.tenant", readsTenant, true},
		{"input.principal.patients[i]", readsPatients, true},
		{"input.purpose_of_use", readsPurpose, true},
		{"input.purpose_of_use.x", readsPurpose, true},
		{`input["principal"]["tenant"]`, readsTenant, true},
		{"input.principal", readsPrincipal, true},
		{"input.principal[k]", readsPrincipal, true},
		{"input.principal[k].x", readsPrincipal, true},
		{"input.principal.department", readsPrincipal, true}, // unknown: all
		{"input.resource.type", 0, false},
		{"input.action", 0, false},
		{"input[k]", 0, false},
		{"input", 0, false},
	} {
		got, ok := subjectInput(ast.MustParseRef(c.ref))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: (%06b, %v), want (%06b, %v)", c.ref, got, ok, c.want, c.ok)
		}
	}
}

// projectionsOf loads src (package custos.authz) and returns the projection
// of each named rule; -1 for a rule that is not subject-level.
func projectionsOf(t *testing.T, e *Engine, rules ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range rules {
		ok, p := e.subjects.levels.refProjection(ast.MustParseRef("data.custos.authz." + r))
		out[r] = int(p)
		if !ok {
			out[r] = -1
		}
	}
	return out
}

// TestDefaultPolicyProjections pins what the default policy's rules read:
// the decision about a combination of resource features (class_decision)
// reads the roles, tenant and purpose only, which is what lets a principal's
// first decision reuse colleagues' values.
func TestDefaultPolicyProjections(t *testing.T) {
	e, err := Default(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"class_decision":             int(readsRoles | readsTenant | readsPurpose),
		"grant_mode":                 int(readsRoles | readsPurpose),
		"request_denies":             int(readsSub | readsPurpose),
		"principal_denies":           int(readsRoles),
		"principal_tenants":          int(readsTenant),
		"care_relationship_patients": int(readsPatients),
		"resource_decisions":         int(readsSub | readsRoles | readsTenant | readsPatients | readsPurpose),
		"known_purposes":             0,
		"research_obligations":       0,
		"grant":                      0,
		"decision":                   -1,
		"resource_decision":          -1,
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	got := projectionsOf(t, e, names...)
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: projection %06b, want %06b", n, got[n], w)
		}
	}
}

// TestProjectionSharesBetweenPrincipals: a colleague's first read finds
// class_decision's values in the store of her roles, tenant and purpose,
// and decides like a fresh evaluation.
func TestProjectionSharesBetweenPrincipals(t *testing.T) {
	ctx := context.Background()
	plain, err := Default(ctx, Options{DecisionCache: -1, SubjectCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Default(ctx, Options{DecisionCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	alice := clinician
	bob := clinician
	bob.Sub, bob.Patients, bob.ClientID = "dr.bob", []string{patientB}, "other-assistant"
	classRef := ast.MustParseRef("data.custos.authz.class_decision")
	store := func(p Principal) *subjectStore {
		return e.subjects.forInput(&Input{Subject: NewSubject(p), PurposeOfUse: "TREAT"}).storeFor(classRef)
	}
	if store(alice) != store(bob) {
		t.Fatal("alice and bob (same roles, tenant, purpose) have different class_decision stores")
	}
	carol := clinician
	carol.Tenant = "another-hospital"
	if store(alice) == store(carol) {
		t.Fatal("a principal of another tenant shares alice's class_decision store")
	}
	if n := store(alice).n; n != 0 {
		t.Fatalf("%d values before any decision", n)
	}
	for i, p := range []Principal{alice, bob, carol, alice, bob} {
		for _, pat := range []string{patientA, patientB} {
			in := Input{Subject: NewSubject(p), PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("observation", pat)}
			want, err := plain.Decide(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Decide(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if advOut(got, nil) != advOut(want, nil) || fmt.Sprint(got.Obligations) != fmt.Sprint(want.Obligations) {
				t.Fatalf("step %d %s reads %s: %+v, fresh evaluation %+v", i, p.Sub, pat, got, want)
			}
		}
		if i == 0 && store(bob).n == 0 {
			t.Fatal("alice's decisions left nothing in the store bob's would use")
		}
	}
}

// projForceNone, set by a control, makes every subject-level rule read
// nothing (every value shared by every request): the harness must then see
// stale values.
var projForceNone bool

// projPrincipals differ from advPrincipal in exactly one field each.
func projPrincipals() []Principal {
	base := advPrincipal
	ps := []Principal{base}
	p := base
	p.Sub = "bob"
	ps = append(ps, p)
	p = base
	p.Roles = []string{"clinician", "x:1"}
	ps = append(ps, p)
	p = base
	p.ClientID = "c2"
	ps = append(ps, p)
	p = base
	p.Tenant = "t2"
	ps = append(ps, p)
	p = base
	p.Patients = []string{"p3"}
	ps = append(ps, p)
	return ps
}

// projRun decides the same resources for principals that differ in one
// field each, and two purposes, interleaved, on one engine with the subject
// cache and one without; it returns the mismatches.
func projRun(t *testing.T, modules map[string]string) []string {
	t.Helper()
	ctx := context.Background()
	plain, cached := plainAndCached(t, mapFS(modules))
	if projForceNone {
		for n := range cached.subjects.levels.reads {
			cached.subjects.levels.reads[n], cached.subjects.levels.atRd[n] = 0, 0
		}
	}
	var bad []string
	for round := range 2 {
		for _, purpose := range []string{"TREAT", "HRESCH"} {
			for pi, p := range projPrincipals() {
				for ri, r := range advResources() {
					for _, useSubject := range []bool{false, true} {
						in := Input{Principal: p, PurposeOfUse: purpose, Action: ActionRead, Resource: r}
						if useSubject {
							in.Subject = NewSubject(p)
						}
						want := advOut(plain.Decide(ctx, in))
						got := advOut(cached.Decide(ctx, in))
						if want != got {
							bad = append(bad, fmt.Sprintf("round %d %s principal %d resource %d: cached %+v, fresh %+v", round, purpose, pi, ri, got, want))
						}
					}
				}
				in := Input{Principal: p, PurposeOfUse: purpose, Action: ActionList}
				items := []Item{{Resource: advResources()[0]}, {Resource: advResources()[2]}}
				wd, werr := plain.DecideBatch(ctx, in, items)
				gd, gerr := cached.DecideBatch(ctx, in, items)
				for j := range items {
					if w, g := advOut(wd[j], werr), advOut(gd[j], gerr); w != g {
						bad = append(bad, fmt.Sprintf("batch round %d %s principal %d item %d: cached %+v, fresh %+v", round, purpose, pi, j, g, w))
					}
				}
			}
		}
	}
	return bad
}

// projCases are policies whose values depend on one part of the principal
// or the purpose, reached in every way we could think of; a projection that
// missed the part would share a value between principals it must not.
var projCases = []advCase{
	{"field read directly", map[string]string{"p.rego": `package custos.authz
v := input.principal.client_id
decision := {"allow": true, "reasons": [v], "obligations": []}
`}},
	{"field through a function", map[string]string{"p.rego": `package custos.authz
f(x) := concat("/", [x, input.principal.tenant])
decision := {"allow": true, "reasons": [f(input.resource.type)], "obligations": []}
`}},
	{"field through a chain of rules", map[string]string{"p.rego": `package custos.authz
a := input.principal.sub
b := concat("-", [a, "x"])
c(t) := concat(":", [b, t])
decision := {"allow": true, "reasons": [c(input.resource.type)], "obligations": []}
`}},
	{"partial rule over a list field", map[string]string{"p.rego": `package custos.authz
s contains x if some x in input.principal.patients
decision := {"allow": input.resource.patient in s, "reasons": [json.marshal(s)], "obligations": []}
`}},
	{"partial set looked up by key", map[string]string{"p.rego": `package custos.authz
s contains x if some x in input.principal.patients
found if s[input.resource.patient]
decision := {"allow": found, "reasons": ["r"], "obligations": []} if found
else := {"allow": false, "reasons": ["not_found"], "obligations": []}
`}},
	{"partial object looked up by key", map[string]string{"p.rego": `package custos.authz
o[k] := v if some k, v in {"t": input.principal.tenant, "c": input.principal.client_id}
decision := {"allow": true, "reasons": [o.t, o["c"]], "obligations": []}
`}},
	{"whole principal", map[string]string{"p.rego": `package custos.authz
w := json.marshal(input.principal)
decision := {"allow": true, "reasons": [w], "obligations": []}
`}},
	{"dynamic field", map[string]string{"p.rego": `package custos.authz
names := ["sub", "roles", "client_id", "tenant", "patients"]
v := [input.principal[k] | some k in names]
decision := {"allow": true, "reasons": [json.marshal(v)], "obligations": []}
`}},
	{"object.get on the principal", map[string]string{"p.rego": `package custos.authz
v := object.get(input.principal, "tenant", "none")
decision := {"allow": true, "reasons": [v], "obligations": []}
`}},
	{"walk over the principal", map[string]string{"p.rego": `package custos.authz
v := [x | walk(input.principal, [_, x]); is_string(x)]
decision := {"allow": true, "reasons": [json.marshal(v)], "obligations": []}
`}},
	{"import of a field", map[string]string{"p.rego": `package custos.authz
import input.principal.roles as rs
v := count(rs)
decision := {"allow": true, "reasons": [sprintf("%d", [v])], "obligations": []}
`}},
	{"rule in another package", map[string]string{
		"a.rego": `package custos.lib
who := input.principal.sub
`,
		"p.rego": `package custos.authz
import data.custos.lib
v := lib.who
decision := {"allow": true, "reasons": [v], "obligations": []}
`}},
	{"dynamic data reference", map[string]string{
		"a.rego": `package custos.lib
x := input.principal.tenant
y := "constant"
`,
		"p.rego": `package custos.authz
v := [data.custos.lib[k] | some k in ["x", "y"]]
decision := {"allow": true, "reasons": [json.marshal(v)], "obligations": []}
`}},
	{"purpose by string key", map[string]string{"p.rego": `package custos.authz
v := input["purpose_of_use"]
decision := {"allow": true, "reasons": [v], "obligations": []}
`}},
	{"purpose and a field together", map[string]string{"p.rego": `package custos.authz
g := "care" if {
	input.purpose_of_use == "TREAT"
	"x:2" in input.principal.roles
}
g := "none" if not input.purpose_of_use == "TREAT"
g := "norole" if {
	input.purpose_of_use == "TREAT"
	not "x:2" in input.principal.roles
}
d(t) := {"allow": g == "care", "reasons": [g, t], "obligations": []}
decision := d(input.resource.type)
`}},
	{"function reading a field, called with input", map[string]string{"p.rego": `package custos.authz
mine(p) if p in input.principal.patients
decision := {"allow": mine(input.resource.patient), "reasons": ["r"], "obligations": []}
`}},
	{"else branch reads a field", map[string]string{"p.rego": `package custos.authz
v := "never" if {
	false
} else := input.principal.client_id
decision := {"allow": true, "reasons": [v], "obligations": []}
`}},
	{"default policy", defaultModules()},
}

func defaultModules() map[string]string {
	src, err := fs.ReadFile(custosrego.FS, "custos/authz.rego")
	if err != nil {
		panic(err)
	}
	return map[string]string{"custos/authz.rego": string(src)}
}

// TestProjectionAdversarial: for every case, principals that differ in one
// field (and two purposes) on one engine decide exactly as a fresh
// evaluation would.
func TestProjectionAdversarial(t *testing.T) {
	for _, c := range projCases {
		t.Run(c.name, func(t *testing.T) {
			if bad := projRun(t, c.modules); len(bad) > 0 {
				t.Errorf("FAIL: %d mismatches, first: %s", len(bad), bad[0])
			}
		})
	}
}

// TestProjectionAdversarialControl: with every projection forced empty
// (every value shared by every request), the harness sees stale values in
// every case: proof that TestProjectionAdversarial can fail.
func TestProjectionAdversarialControl(t *testing.T) {
	projForceNone = true
	defer func() { projForceNone = false }()
	for _, c := range projCases {
		t.Run(c.name, func(t *testing.T) {
			if bad := projRun(t, c.modules); len(bad) == 0 {
				t.Errorf("the harness saw no stale value with every projection empty")
			}
		})
	}
}
