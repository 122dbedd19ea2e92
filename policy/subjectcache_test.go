package policy

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// plainAndCached loads the policy in fsys twice, without any cache and with
// the subject cache only (no decision cache).
// testTimeout is the evaluation deadline of the engines the equivalence
// tests compare: generous, so that a starved machine (the race detector,
// neighbours) never turns a decision into a policy_timeout on one side only.
// 10 s was not enough: under -race at load average 10, one DecideBatch of
// TestSubjectCacheConcurrentDecisions (four workers, the whole grid) ran
// past it in a fresh-clone CI run on 2026-12-05 ("evaluation failed:
// context deadline exceeded" after 182 s of the test).
const testTimeout = 60 * time.Second

func plainAndCached(t *testing.T, fsys fstest.MapFS) (plain, cached *Engine) {
	t.Helper()
	ctx := context.Background()
	plain, err := Load(ctx, fsys, Options{DecisionCache: -1, SubjectCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	cached, err = Load(ctx, fsys, Options{DecisionCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if cached.subjects == nil {
		t.Fatal("no subject cache")
	}
	return plain, cached
}

// levelsOf loads the policy src (package custos.authz) and returns the
// subject-level verdict of each named rule.
func levelsOf(t *testing.T, src string, rules ...string) map[string]bool {
	t.Helper()
	e, err := Load(context.Background(), fstest.MapFS{"p.rego": {Data: []byte(src)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e.subjects == nil {
		t.Fatal("no subject cache for a deterministic policy")
	}
	out := map[string]bool{}
	for _, r := range rules {
		out[r] = e.subjects.levels.refLevel(ast.MustParseRef("data.custos.authz." + r))
	}
	return out
}

// TestSubjectLevelAnalysis pins which rules the analysis lets outlive an
// evaluation: only those that reach the input through input.principal and
// input.purpose_of_use alone, and depend on no other rule.
func TestSubjectLevelAnalysis(t *testing.T) {
	got := levelsOf(t, `package custos.authz
import input.resource as res

decision := {"allow": true, "reasons": [], "obligations": []}

principal_only := input.principal.roles[0]
purpose_only := input.purpose_of_use
uses_principal_only := principal_only
constant := {"a": 1}
fn_of_args(x) := concat("/", [x, input.principal.sub])

resource := input.resource.type
action := input.action
whole_input := object.get(input, ["resource", "type"], "")
alias := res.type
dynamic_input := input[k] if k := "action"
uses_resource := resource
fn_reads_resource(x) := concat("/", [x, input.resource.type])
calls_resource_fn := fn_reads_resource("a")
with_kw := x if {
	x := principal_only with input.principal.roles as ["x"]
}
dynamic_data := data.custos.authz[k] if k := "principal_only"
partial_set contains x if some x in input.principal.roles
partial_set contains x if x := input.resource.type
else_branch := 1 if input.principal.sub == "a" else := input.resource.uri
`, "principal_only", "purpose_only", "uses_principal_only", "constant", "fn_of_args",
		"resource", "action", "whole_input", "alias", "dynamic_input", "uses_resource", "fn_reads_resource",
		"calls_resource_fn", "with_kw", "dynamic_data", "partial_set", "else_branch", "decision", "missing_rule")
	want := map[string]bool{
		"principal_only": true, "purpose_only": true, "uses_principal_only": true, "constant": true, "fn_of_args": true,
		"decision": true, // a constant, here
	}
	for r, level := range got {
		if level != want[r] {
			t.Errorf("%s: subject-level = %v, want %v", r, level, want[r])
		}
	}
}

// TestDefaultPolicySubjectLevels pins the verdicts for the default policy's
// entry points and the rules the speed-up depends on.
func TestDefaultPolicySubjectLevels(t *testing.T) {
	e, err := Default(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for rule, want := range map[string]bool{
		"decision": false, "decisions": false, "resource_decision": false, "has_resource": false,
		"grant_mode": true, "principal_denies": true, "care_relationship_patients": true,
		"class_decision": true, "resource_decisions": true, "templates_decision": true,
	} {
		if got := e.subjects.levels.refLevel(ast.MustParseRef("data.custos.authz." + rule)); got != want {
			t.Errorf("%s: subject-level = %v, want %v", rule, got, want)
		}
	}
}

// trapPolicy makes every decision depend, in ways the analysis must see, on
// the parts of the input a subject-level value must not depend on. A value
// wrongly kept across evaluations shows up in the reasons of a later one.
const trapPolicy = `package custos.authz
import input.resource as res

decision := {"allow": true, "reasons": reasons, "obligations": []}

reasons := [
	action, alias, via_get, via_with, via_dynamic, fn_reads("x"), concat(",", sort(partial)),
	else_branch, uses_uses_action, stable,
]

action := input.action
alias := res.type
via_get := object.get(input, ["resource", "patient"], "none")
inner := input.principal.sub
via_with := x if {
	x := inner with input.principal.sub as input.resource.uri
}
via_dynamic := data.custos.authz[k] if k := "action"
fn_reads(x) := concat("/", [x, input.resource.uri])
partial contains x if some x in input.principal.roles
partial contains x if x := input.resource.tenant
else_branch := "never" if input.principal.sub == "nobody" else := input.resource.patient
uses_action := action
uses_uses_action := uses_action
stable := concat("+", [input.principal.sub, input.purpose_of_use])
`

// TestSubjectCacheNeverServesAStaleValue evaluates a sequence of inputs for
// the same principal and purpose (varying the action and the resource) on
// the trap policy with and without the subject cache: every decision must
// be the same.
func TestSubjectCacheNeverServesAStaleValue(t *testing.T) {
	ctx := context.Background()
	plain, cached := plainAndCached(t, fstest.MapFS{"p.rego": {Data: []byte(trapPolicy)}})
	p := clinician
	p.Roles = []string{"clinician", "sensitive:hiv"}
	for round := range 3 {
		for i, typ := range []string{"observation", "note", "patient", "observation"} {
			for _, action := range []Action{ActionRead, ActionList} {
				r := resource(typ, []string{patientA, patientB}[i%2])
				r.URI = fmt.Sprintf("custos://x/%d/%d", round, i)
				r.Tenant = fmt.Sprint("t", i)
				in := Input{Principal: p, PurposeOfUse: "TREAT", Action: action, Resource: r}
				want, err := plain.Decide(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				got, err := cached.Decide(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.Reasons, want.Reasons) {
					t.Fatalf("round %d, %s %s: reasons %q, want %q", round, action, typ, got.Reasons, want.Reasons)
				}
			}
		}
	}
	// The subject-level rules were shared: "stable" and "inner" are in the store.
	if storedValues(cached.subjects) == 0 {
		t.Fatal("nothing was kept across evaluations")
	}
}

// subjectCaller is a principal and purpose the subject-cache equivalence
// tests decide for.
type subjectCaller struct {
	p       Principal
	purpose string
}

// subjectCallers are many role sets and purposes, and the same sub with
// other roles, another tenant or other patients (another subject).
func subjectCallers() []subjectCaller {
	var callers []subjectCaller
	for ri, roles := range [][]string{
		{"clinician"}, {"billing"}, {"researcher"}, {"auditor"}, {},
		{"clinician", "sensitive:hiv"}, {"researcher", "sensitive:sud", "sensitive:hiv"}, {"billing", "clinician"},
	} {
		for _, pou := range []string{"", "TREAT", "ETREAT", "HPAYMT", "HRESCH", "BOGUS"} {
			callers = append(callers, subjectCaller{principal(fmt.Sprint("u", ri), roles...), pou})
		}
	}
	same := principal("u0", "billing")
	callers = append(callers, subjectCaller{same, "HPAYMT"}, subjectCaller{same, "TREAT"})
	other := principal("u0", "clinician")
	other.Tenant = "other"
	callers = append(callers, subjectCaller{other, "TREAT"})
	other = principal("u0", "clinician")
	other.Patients = []string{patientB}
	return append(callers, subjectCaller{other, "TREAT"})
}

// input is c's list input, naming the caller by a Subject when asSubject.
func (c subjectCaller) input(asSubject bool) Input {
	in := Input{Principal: c.p, PurposeOfUse: c.purpose, Action: ActionList}
	if asSubject {
		in.Subject = NewSubject(c.p)
		in.Principal = Principal{}
	}
	return in
}

// defaultPlainAndCached loads the default policy without any cache and with
// the subject cache only.
func defaultPlainAndCached(t *testing.T) (plain, cached *Engine) {
	t.Helper()
	ctx := context.Background()
	plain, err := Default(ctx, Options{DecisionCache: -1, SubjectCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	cached, err = Default(ctx, Options{DecisionCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if cached.subjects == nil {
		t.Fatal("no subject cache")
	}
	return plain, cached
}

// sameDecision reports whether a and b allow alike with the same reasons
// and obligations.
func sameDecision(a, b Decision) bool {
	return a.Allow == b.Allow && slices.Equal(a.Reasons, b.Reasons) && slices.Equal(a.Obligations, b.Obligations)
}

// TestSubjectCacheDecidesLikeAFreshEvaluation runs the default policy over
// the batch grid (every type, label, consent flag, tenant and grant shape)
// for many principals and purposes, single and batch, by principal and by
// subject, twice, on an engine with the subject cache and on one without:
// every decision must be the same. TestSubjectCacheConcurrentDecisions
// decides the same grid from concurrent goroutines.
func TestSubjectCacheDecidesLikeAFreshEvaluation(t *testing.T) {
	ctx := context.Background()
	plain, cached := defaultPlainAndCached(t)
	items := batchGrid()
	callers := subjectCallers()
	want := make([][]Decision, len(callers))
	for round := range 2 {
		for k := range callers {
			i := (k + round*3) % len(callers) // each round its own order
			c := callers[i]
			in := c.input((i+round)%2 == 0)
			ds, err := cached.DecideBatch(ctx, in, items)
			if err != nil {
				t.Fatal(err)
			}
			if want[i] == nil {
				want[i] = make([]Decision, len(items))
				for j, it := range items {
					if want[i][j], err = plain.Decide(ctx, Input{Principal: c.p, PurposeOfUse: c.purpose, Action: ActionRead, Resource: it.Resource, BreakGlass: it.BreakGlass}); err != nil {
						t.Fatal(err)
					}
				}
			}
			for j, it := range items {
				in := in
				in.Action, in.Resource, in.BreakGlass = ActionRead, it.Resource, it.BreakGlass
				d, err := cached.Decide(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				if !sameDecision(d, want[i][j]) || !sameDecision(ds[j], want[i][j]) {
					t.Fatalf("round %d, caller %d (%v, %q) item %d: single %v %v, batch %v %v, want %v %v",
						round, i, c.p.Roles, c.purpose, j, d.Allow, d.Reasons, ds[j].Allow, ds[j].Reasons, want[i][j].Allow, want[i][j].Reasons)
				}
			}
		}
	}
	if storedValues(cached.subjects) == 0 {
		t.Fatal("nothing was kept across evaluations")
	}
}

// TestSubjectCacheConcurrentDecisions decides the grid of
// TestSubjectCacheDecidesLikeAFreshEvaluation from four goroutines at once,
// each in its own order, on one engine with the subject cache. Each caller
// is decided by two of them, one by subject and one by principal (workers
// 0 and 2 take the even callers, 1 and 3 the odd ones); each decides the
// caller's batch and the single decisions of the items j with j%4 equal
// to its number. Every decision must be the engine without the cache's.
// The reference is that engine's batch decision (TestDecideBatchMatchesDecide
// holds batch to single), so that under -race the time goes to the
// concurrent engine.
func TestSubjectCacheConcurrentDecisions(t *testing.T) {
	ctx := context.Background()
	plain, cached := defaultPlainAndCached(t)
	items := batchGrid()
	callers := subjectCallers()
	want := make([][]Decision, len(callers))
	for i, c := range callers {
		ds, err := plain.DecideBatch(ctx, Input{Principal: c.p, PurposeOfUse: c.purpose, Action: ActionList}, items)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = ds
	}
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for worker := range workers {
		wg.Go(func() {
			for k := range callers {
				i := (k + worker*7) % len(callers) // each worker its own order
				if i%2 != worker%2 {
					continue
				}
				c := callers[i]
				in := c.input(worker < 2)
				ds, err := cached.DecideBatch(ctx, in, items)
				if err != nil {
					errs <- err.Error()
					return
				}
				for j, it := range items {
					if !sameDecision(ds[j], want[i][j]) {
						errs <- fmt.Sprintf("caller %d (%v, %q) item %d: batch %v %v, want %v %v",
							i, c.p.Roles, c.purpose, j, ds[j].Allow, ds[j].Reasons, want[i][j].Allow, want[i][j].Reasons)
						return
					}
					if j%workers != worker {
						continue
					}
					in := in
					in.Action, in.Resource, in.BreakGlass = ActionRead, it.Resource, it.BreakGlass
					d, err := cached.Decide(ctx, in)
					if err != nil {
						errs <- err.Error()
						return
					}
					if !sameDecision(d, want[i][j]) {
						errs <- fmt.Sprintf("caller %d (%v, %q) item %d: single %v %v, want %v %v",
							i, c.p.Roles, c.purpose, j, d.Allow, d.Reasons, want[i][j].Allow, want[i][j].Reasons)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if storedValues(cached.subjects) == 0 {
		t.Fatal("nothing was kept across evaluations")
	}
}

// TestSubjectCacheIsBounded fills the cache with more subjects than it
// keeps, and one subject with more values than it keeps.
func TestSubjectCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	e, err := Default(ctx, Options{DecisionCache: -1, SubjectCache: 16})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := e.Decide(ctx, Input{Principal: principal(fmt.Sprint("u", i), "clinician"), PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("note", patientA)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := storedValues(e.subjects); n < 16 || n > 16+2 || e.subjects.values.Load() != int64(n) {
		t.Fatalf("%d values kept (counted %d), want the bound 16 (overshoot by concurrent publishers only)", n, e.subjects.values.Load())
	}
	// The number of stores is bounded too, and dropping a store takes its
	// values off the count.
	e.subjects.mu.Lock()
	for i := len(e.subjects.m); i < maxStores; i++ {
		e.subjects.m[storeKey{p: readsAll, digest: [32]byte{byte(i), byte(i >> 8)}}] = &subjectStore{limit: 1}
	}
	e.subjects.mu.Unlock()
	e.subjects.store(storeKey{p: readsAll, digest: [32]byte{0xff, 0xff, 0xff}})
	if n := len(e.subjects.m); n > maxStores-maxStores/8+1 {
		t.Fatalf("%d stores kept, want at most %d", n, maxStores-maxStores/8+1)
	}
	if n := storedValues(e.subjects); e.subjects.values.Load() != int64(n) {
		t.Fatalf("%d values counted, %d kept", e.subjects.values.Load(), n)
	}
	e, err = Default(ctx, Options{DecisionCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	subj := NewSubject(clinician)
	for i := range subjectCacheEntries + 200 {
		// A patient per read (outside the care team: denied), so that each
		// read's item differs; the URI alone would not (the default policy
		// does not put it in the item).
		r := resource("note", fmt.Sprintf("7d1a3c52-0b8e-4f57-9a77-%012d", i))
		r.URI = fmt.Sprint("custos://x/", i)
		d, err := e.Decide(ctx, Input{Subject: subj, PurposeOfUse: "TREAT", Action: ActionRead, Resource: r})
		if err != nil || d.Allow {
			t.Fatalf("read %d: %+v, %v", i, d, err)
		}
	}
	// Each read's page of one (resource_decisions, keyed by the whole item)
	// goes to the store of the subject's full projection.
	st := e.subjects.forInput(&Input{Subject: subj, PurposeOfUse: "TREAT"}).storeFor(ast.MustParseRef("data.custos.authz.resource_decisions"))
	if st.n != subjectCacheEntries {
		t.Fatalf("%d values kept for one subject, want the bound %d", st.n, subjectCacheEntries)
	}
}

// TestNondeterministicPolicyHasNoSubjectCache: a policy that reads the
// clock is evaluated afresh every time.
func TestNondeterministicPolicyHasNoSubjectCache(t *testing.T) {
	e, err := Load(context.Background(), fstest.MapFS{"p.rego": {Data: []byte(`package custos.authz
decision := {"allow": time.now_ns() > 0, "reasons": ["clock"], "obligations": []}
`)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e.subjects != nil || e.cache != nil {
		t.Fatal("a cache for a policy that calls time.now_ns")
	}
	// Certificate verification reads the clock although OPA does not mark
	// it nondeterministic.
	e, err = Load(context.Background(), fstest.MapFS{"p.rego": {Data: []byte(`package custos.authz
ok if {
	[valid, _] := crypto.x509.parse_and_verify_certificates(input.principal.sub)
	valid
}
decision := {"allow": ok, "reasons": ["certs"], "obligations": []}
`)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e.subjects != nil || e.cache != nil {
		t.Fatal("a cache for a policy that verifies certificates against the clock")
	}
}

// storedValues counts the values kept in every shared store of c.
func storedValues(c *subjectCaches) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.m {
		s.mu.RLock()
		n += s.n
		s.mu.RUnlock()
	}
	return n
}

// sameOutcome reports whether two decisions (with their errors) say the
// same: error or not, allow, reasons and obligations. Decision ids differ.
func sameOutcome(a Decision, aerr error, b Decision, berr error) bool {
	return advOut(a, aerr) == advOut(b, berr) && fmt.Sprint(a.Obligations) == fmt.Sprint(b.Obligations)
}
