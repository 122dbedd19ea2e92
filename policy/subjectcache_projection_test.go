package policy

// Tests of the subject cache's projections: a subject-level value is shared
// by every request that agrees on the parts of the principal and purpose its
// rule reads (and only those), so that a principal's first decision reuses
// what colleagues' decisions computed.

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

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
	plain, err := Default(ctx, Options{DecisionCache: -1, SubjectCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Default(ctx, Options{DecisionCache: -1, Timeout: testTimeout})
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
			if !sameOutcome(got, nil, want, nil) {
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

// TestProjectionNumberSpelling: a function that reads nothing of the
// input is shared by every request (projection 0). OPA keys its values by
// Term equality, under which 1 and 1.0 are the same key while builtins such
// as sprintf tell them apart: the first request's representation decides
// for every later request on the engine. Plain OPA does the same within one
// evaluation, so the check is against the plain engine on a single read.
func TestProjectionNumberSpelling(t *testing.T) {
	ctx := context.Background()
	src := `package custos.authz
f(x) := json.marshal(x)
n := to_number(trim_prefix(input.resource.uri, "u://"))
decision := {"allow": f(n) == "1", "reasons": [f(n)], "obligations": []}
`
	plain, cached := plainAndCached(t, fstest.MapFS{"p.rego": {Data: []byte(src)}})
	alice := advPrincipal
	bob := advPrincipal
	bob.Sub, bob.Tenant = "bob", "t9"
	steps := []struct {
		p   Principal
		uri string
	}{{alice, "u://1.0"}, {bob, "u://1"}, {bob, "u://1.0"}, {alice, "u://1"}}
	var bad []string
	for i, s := range steps {
		in := Input{Principal: s.p, PurposeOfUse: "TREAT", Action: ActionRead, Resource: &Resource{URI: s.uri, Type: "note"}}
		w := advOut(plain.Decide(ctx, in))
		g := advOut(cached.Decide(ctx, in))
		t.Logf("step %d %s %s: fresh %+v cached %+v", i, s.p.Sub, s.uri, w, g)
		if w != g {
			bad = append(bad, fmt.Sprintf("step %d %s %s: cached %+v, fresh %+v", i, s.p.Sub, s.uri, g, w))
		}
	}
	if len(bad) > 0 {
		t.Errorf("FAIL: %s", strings.Join(bad, "\n\t"))
	}
}

// TestProjectionConcurrentManyPrincipals: several goroutines decide (single
// and batch) under the default policy for many principals on one engine
// with small bounds, so stores fill, the value bound is hit and stores are
// dropped while evaluations run; every decision must match the plain
// engine. Run with -race.
func TestProjectionConcurrentManyPrincipals(t *testing.T) {
	ctx := context.Background()
	fsys := mapFS(defaultModules())
	plain, err := Load(ctx, fsys, Options{DecisionCache: -1, SubjectCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	roleSets := [][]string{{"clinician"}, {"clinician", "sensitive:hiv"}, {"researcher"}, {"billing"}, nil, {"auditor"}}
	tenants := []string{tenant, "other-hospital"}
	patients := [][]string{{patientA}, {patientB}, nil, {patientA, patientB}}
	purposes := []string{"TREAT", "HRESCH", "HPAYMT", "ETREAT", "", "PATRQT"}
	resources := func(i int) *Resource {
		types := []string{"observation", "note", "coverage", "patient", "encounter", "image"}
		r := resource(types[i%len(types)], []string{patientA, patientB}[i%2])
		switch i % 5 {
		case 1:
			r.Sensitivity = []string{"hiv"}
		case 2:
			r.Tenant = "other-hospital"
		case 3:
			r.Consent = []string{"opt-out"}
		}
		return r
	}
	for _, sc := range []int{0, 40, 500} {
		cached, err := Load(ctx, fsys, Options{DecisionCache: -1, SubjectCache: sc, Timeout: testTimeout})
		if err != nil {
			t.Fatal(err)
		}
		if cached.subjects == nil {
			t.Fatal("no subject cache")
		}
		// Bring the store count near maxStores so that stores are dropped
		// during the run.
		cached.subjects.mu.Lock()
		for i := len(cached.subjects.m); i < maxStores-3; i++ {
			cached.subjects.m[storeKey{p: readsAll, digest: [32]byte{0xee, byte(i), byte(i >> 8)}}] = &subjectStore{limit: 1}
		}
		cached.subjects.mu.Unlock()
		var mu sync.Mutex
		var bad []string
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 80 {
					j := i*7 + g*13
					p := Principal{
						Sub: fmt.Sprintf("u%d", j%9), Roles: roleSets[j%len(roleSets)], ClientID: fmt.Sprintf("c%d", j%2),
						Tenant: tenants[(j/3)%2], Patients: patients[(j/5)%len(patients)],
					}
					pu := purposes[(j/2)%len(purposes)]
					in := Input{Principal: p, PurposeOfUse: pu}
					if i%2 == 0 {
						in.Subject = NewSubject(p)
					}
					if i%4 == 1 {
						in.Action = ActionList
						items := []Item{{Resource: resources(j)}, {Resource: resources(j + 1), BreakGlass: &BreakGlass{Grant: "g", Patient: patientB}}, {Resource: resources(j + 2)}}
						if i%3 == 0 {
							in.Action = ActionRead
						}
						wd, werr := plain.DecideBatch(ctx, in, items)
						gd, gerr := cached.DecideBatch(ctx, in, items)
						for k := range items {
							if w, g := advOut(wd[k], werr), advOut(gd[k], gerr); !sameOutcome(gd[k], gerr, wd[k], werr) {
								mu.Lock()
								bad = append(bad, fmt.Sprintf("sc %d batch %+v %q item %d: cached %+v fresh %+v", sc, p, pu, k, g, w))
								mu.Unlock()
							}
						}
						continue
					}
					in.Action, in.Resource = ActionRead, resources(j)
					if i%7 == 3 {
						in.BreakGlass = &BreakGlass{Grant: "g", Patient: in.Resource.Patient}
					}
					wd, werr := plain.Decide(ctx, in)
					gd, gerr := cached.Decide(ctx, in)
					if w, g := advOut(wd, werr), advOut(gd, gerr); !sameOutcome(gd, gerr, wd, werr) {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("sc %d %+v %q: cached %+v fresh %+v", sc, p, pu, g, w))
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		if len(bad) > 0 {
			t.Errorf("FAIL SubjectCache=%d: %d mismatches, first: %s", sc, len(bad), bad[0])
		}
		if n := storedValues(cached.subjects); int64(n) != cached.subjects.values.Load() {
			t.Errorf("SubjectCache=%d: %d values kept, %d counted", sc, n, cached.subjects.values.Load())
		}
		if storedValues(cached.subjects) == 0 {
			t.Errorf("SubjectCache=%d: nothing shared (the test exercised no store)", sc)
		}
	}
}
