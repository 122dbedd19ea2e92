package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// disagreeingPolicy is the default policy with a hold on observations added
// to decision only: its decisions rule, which lists use, still allows
// them. Its own tests (a thin set, as a team writing its policy might ship)
// pass.
func disagreeingPolicy(t *testing.T) map[string]string {
	files := defaultPolicyFiles(t)
	const rule = `decision := resource_decision if input.action in {"list", "read"}`
	p := files["custos/authz.rego"]
	if !strings.Contains(p, rule) {
		t.Fatalf("the default policy no longer has %q", rule)
	}
	files["custos/authz.rego"] = strings.Replace(p, rule, `decision := resource_decision if {
	input.action in {"list", "read"}
	not observation_hold
}

observation_hold if input.resource.type == "observation"

decision := {"allow": false, "reasons": ["observation_hold"], "obligations": []} if {
	input.action in {"list", "read"}
	observation_hold
}`, 1)
	files["custos/authz_test.rego"] = `package custos.authz_test

import data.custos.authz

clin := {"sub": "dr.alice", "roles": ["clinician"], "client_id": "a", "tenant": "t", "patients": ["p1"]}

res(ty) := {"uri": "fhir://t/patients/p1/x/1", "type": ty, "patient": "p1", "tenant": "t", "sensitivity": [], "consent": []}

test_observation_on_hold if {
	d := authz.decision with input as {"principal": clin, "purpose_of_use": "TREAT", "action": "read", "resource": res("observation")}
	d.reasons == ["observation_hold"]
}

test_condition_read if authz.decision.allow with input as {"principal": clin, "purpose_of_use": "TREAT", "action": "read", "resource": res("condition")}
`
	return files
}

// TestBatchMustAgreeWithDecision: a list page is decided by the policy's
// decisions rule, a read by decision, and a listing must never show what a
// read would deny (docs/policy.md). custos took the agreement on trust: a
// policy whose decision held back observations while decisions did not
// loaded, and a clinician's list showed 14 observations whose reads were
// refused (found probing a hand-edited policy with `custos serve --dev
// --policy-dir`; policy test, check and impact all passed it, impact
// replaying reads only). Every load now decides a grid of synthetic
// requests both ways and refuses a candidate on which they differ.
func TestBatchMustAgreeWithDecision(t *testing.T) {
	ctx := context.Background()
	dir := writeDir(t, disagreeingPolicy(t))
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: a policy whose decisions allows what decision denies was accepted", what)
		}
		if !errors.Is(err, ErrTestsFailed) || !strings.Contains(err.Error(), "decisions") || !strings.Contains(err.Error(), "observation") {
			t.Errorf("%s: error %v, want ErrTestsFailed naming decisions and the item", what, err)
		}
	}
	_, err := DirSource{Dir: dir}.Load(ctx)
	check("DirSource.Load", err)
	_, err = BuildBundle(ctx, dir, "r1")
	check("BuildBundle", err)
	b := newBundle(filesOf(disagreeingPolicy(t)), "r1")
	check("CheckBundle", CheckBundle(ctx, b))

	// The default policy, and a policy without decisions (lists evaluate
	// decision per item), load.
	if _, err := (DirSource{Dir: writeDir(t, defaultPolicyFiles(t))}).Load(ctx); err != nil {
		t.Errorf("the default policy: %v", err)
	}
	if _, err := (DirSource{Dir: writeDir(t, reasonPolicy("a"))}).Load(ctx); err != nil {
		t.Errorf("a policy without decisions: %v", err)
	}
}

// TestAgreementGridIsBounded: the agreement grid (about 800 items, each
// decided twice) ran outside the load's budget (TestRunBudget bounded the
// Rego tests only, and a directory without tests ran no budget at all), so
// a candidate whose every decision is slow but within Options.Timeout (1 s)
// held a load, a reload and a start for up to the grid's size in seconds
// (800 items at 0.9 s, twice: twenty-four minutes, on every core). Found
// reviewing vet: the grid ran after the budget's context was cancelled.
// The budget now covers the grid too.
func TestAgreementGridIsBounded(t *testing.T) {
	old := testRunBudget
	testRunBudget = 100 * time.Millisecond
	defer func() { testRunBudget = old }()
	// decision and decisions agree (the old code loads it, after seconds),
	// and each evaluation of one item
	// iterates 1,600 times: under a millisecond, well within the 1 s
	// Options.Timeout, and the grid seconds.
	files := map[string]string{
		"custos/authz.rego": `package custos.authz

slow(r) if {
	some i in numbers.range(1, 40)
	some j in numbers.range(1, 40)
	i * j == count(r.uri) * -1
}

one(r) := {"allow": false, "reasons": ["slow"], "obligations": []} if slow(r)

one(r) := {"allow": true, "reasons": ["fine"], "obligations": []} if not slow(r)

decision := one(input.resource)

decisions := [one(it.resource) | some it in input.items]
`,
	}
	dir := writeDir(t, files)
	start := time.Now()
	_, err := DirSource{Dir: dir, AllowNoTests: true}.Load(context.Background())
	took := time.Since(start)
	if err == nil || !errors.Is(err, ErrTestsFailed) || !strings.Contains(err.Error(), "longer than 100ms") {
		t.Fatalf("a candidate whose agreement grid outlasts the budget: %v (after %v)", err, took)
	}
	if took > 20*time.Second {
		t.Errorf("the refusal took %v", took)
	}
}

// TestSlowListRuleIsNotReportedAsDisagreement: a decisions rule that cannot
// decide a page within the evaluation time-out was refused as "decisions
// disagrees with decision" (the page failed, the reads did not), sending
// the policy author to look for a logic difference that is not there. It
// is refused as too slow, naming the time-out, at the first such page.
func TestSlowListRuleIsNotReportedAsDisagreement(t *testing.T) {
	files := map[string]string{
		"custos/authz.rego": `package custos.authz

one(r) := {"allow": true, "reasons": ["fine"], "obligations": []}

decision := one(input.resource)

slow_page if {
	some i in numbers.range(1, 3000)
	some j in numbers.range(1, 3000)
	i * j == -1
}

decisions := [one(it.resource) | some it in input.items] if not slow_page
`,
	}
	dir := writeDir(t, files)
	start := time.Now()
	_, err := DirSource{Dir: dir, AllowNoTests: true, Options: Options{Timeout: 50 * time.Millisecond}}.Load(context.Background())
	took := time.Since(start)
	if err == nil || !errors.Is(err, ErrTestsFailed) || !errors.Is(err, ErrEvaluation) || errors.Is(err, ErrBatchDisagrees) ||
		!strings.Contains(err.Error(), "within the evaluation time-out (50ms)") {
		t.Fatalf("a candidate whose list rule outlasts the time-out on every page: %v", err)
	}
	if took > 20*time.Second {
		t.Errorf("the refusal took %v", took)
	}
}

// TestURIDisagreementIsRefusedAtLoad: a rule that decides by the URI
// itself (a VIP's compartment held back by one entry point and not the
// other) disagrees only on URIs that the grid's synthetic ones never were,
// so the agreement check passed it and a list showed the URIs a read of
// them denies. The grid now also holds items whose URI is each string the
// policy names, on which such a rule decides as it does on the real URI.
func TestURIDisagreementIsRefusedAtLoad(t *testing.T) {
	const vip = "fhir://t/patients/vip/"
	refusedAtLoad(t, map[string]string{
		"the read denies, the list allows": `decision := {"allow": false, "reasons": ["vip"], "obligations": []} if startswith(input.resource.uri, "` + vip + `")
else := {"allow": true, "reasons": [], "obligations": []}

decisions := [{"allow": true, "reasons": [], "obligations": []} | some _ in input.items]`,
		"the list denies, the read allows": `decision := {"allow": true, "reasons": [], "obligations": []}

decisions := [d(item) | some item in input.items]

d(item) := {"allow": false, "reasons": ["vip"], "obligations": []} if contains(item.resource.uri, "/vip/")
else := {"allow": true, "reasons": [], "obligations": []}`,
	})
}

// refusedAtLoad loads each policy (Rego after the package line) and
// requires the check every load makes (CheckBatch) to refuse it as a list
// rule that disagrees with the read rule.
func refusedAtLoad(t *testing.T, policies map[string]string) {
	t.Helper()
	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			e, err := Load(context.Background(), fstest.MapFS{"p.rego": {Data: []byte("package custos.authz\n\n" + p + "\n")}}, Options{Timeout: testTimeout})
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckBatch(context.Background(), e); !errors.Is(err, ErrBatchDisagrees) {
				t.Fatalf("CheckBatch: %v, want ErrBatchDisagrees", err)
			}
		})
	}
}

// TestListRuleForANewRoleMustAgree: the agreement grid's cast was fixed
// (clinician, billing, researcher, auditor, no role), so a policy adding a
// role decided that role's lists by other rules than its reads unseen. A
// probe's signed bundle adding a pharmacist role whose decisions listed
// every resource of the tenant while decision denied them passed custos
// policy check and verify and loaded on a running server (its Rego tests,
// the default ones, use the old cast too): the pharmacist's list showed
// all 146 resources, each read was refused. The grid now also casts each
// role the policy compares input.principal.roles with.
func TestListRuleForANewRoleMustAgree(t *testing.T) {
	files := defaultPolicyFiles(t)
	const rule = `decisions := resource_decisions(input.items) if input.action in {"list", "read"}`
	p := files["custos/authz.rego"]
	if !strings.Contains(p, rule) {
		t.Fatalf("the default policy no longer has %q", rule)
	}
	files["custos/authz.rego"] = strings.Replace(p, rule, `decisions := resource_decisions(input.items) if {
	input.action in {"list", "read"}
	not has_role("pharmacist")
}

decisions := [{"allow": true, "reasons": ["pharmacy_list"], "obligations": []} | some _ in input.items] if {
	input.action in {"list", "read"}
	has_role("pharmacist")
}`, 1)
	_, err := DirSource{Dir: writeDir(t, files)}.Load(context.Background())
	if err == nil {
		t.Fatal("a policy whose decisions lists everything to a pharmacist while decision denies it loaded")
	}
	if !errors.Is(err, ErrTestsFailed) || !strings.Contains(err.Error(), "roles pharmacist") {
		t.Errorf("error %v, want ErrTestsFailed naming the role pharmacist", err)
	}

	// The same role found otherwise: compared directly
	// (input.principal.roles[_] == "x"), and only as a key of the policy's
	// own data looked up by each role of the principal's (role_purposes[role]
	// in the default policy), which no expression compares with
	// input.principal.roles.
	//
	// And beside a rule of the same name in another package keyed by
	// maxGridRoles patient ids (which sort before the letters): those are
	// no roles. Matched by the rule's last name, they were cast in place of
	// the pharmacist, and the policy loaded.
	var ids []string
	for i := range maxGridRoles {
		ids = append(ids, fmt.Sprintf(`"00000000-0000-4000-8000-%012d": true`, i))
	}
	otherPackage := "package custos.btgext\n\nlist_all_roles := {" + strings.Join(ids, ", ") + "}\n\nheld if list_all_roles[input.resource.patient]\n"
	dataKey := `list_all_roles := {"pharmacist": {"TREAT"}}

pharmacist if {
	some role in input.principal.roles
	list_all_roles[role]
}`
	for _, c := range []struct{ name, pharmacist, other string }{
		{"compared directly", `pharmacist if input.principal.roles[_] == "pharmacist"`, ""},
		{"a data key", dataKey, ""},
		{"a data key, and another package's rule of its name", dataKey, otherPackage},
	} {
		files = defaultPolicyFiles(t)
		if c.other != "" {
			files["custos/btgext.rego"] = c.other
		}
		files["custos/authz.rego"] = strings.Replace(p, rule, `decisions := resource_decisions(input.items) if {
	input.action in {"list", "read"}
	not pharmacist
}

`+c.pharmacist+`

decisions := [{"allow": true, "reasons": ["pharmacy_list"], "obligations": []} | some _ in input.items] if {
	input.action in {"list", "read"}
	pharmacist
}`, 1)
		if _, err := (DirSource{Dir: writeDir(t, files)}).Load(context.Background()); !errors.Is(err, ErrTestsFailed) || !strings.Contains(fmt.Sprint(err), "roles pharmacist") {
			t.Errorf("%s: %v, want ErrTestsFailed naming the role pharmacist", c.name, err)
		}
	}
}

// TestPolicyRoles: the roles the grid casts are the strings compared with
// input.principal.roles, directly or through a function of the policy
// that reads it; the default policy's are the fixed cast's.
func TestPolicyRoles(t *testing.T) {
	got := policyRoles(filesOf(defaultPolicyFiles(t)))
	if want := []string{"auditor", "billing", "clinician", "researcher"}; !slices.Equal(got, want) {
		t.Errorf("default policy roles %q, want %q", got, want)
	}
	src := `package custos.authz

has_role(r) if input.principal.roles[_] == r

a if has_role("pharmacist")

b if "nurse" in input.principal.roles

# Keys of the policy's own data, looked up by a role of the principal's:
# bound by some ... in, by := of an element, as a rule's partial object key,
# and through data.<package>.<rule>.
grants := {"pharmacist": {"TREAT"}, "midwife": {"TREAT"}}

c if {
	some role in input.principal.roles
	grants[role]
}

limits["porter"] := 1

d if {
	r := input.principal.roles[_]
	limits[r] > 0
}

more := {"dietitian": true}

e if {
	some i, role in input.principal.roles
	data.custos.authz.more[role]
}

# Keys of data not looked up by a role are no roles.
types := {"observation": true}

f if {
	some t in input.resource.types
	types[t]
	input.principal.roles[_] == "nurse"
}
`
	// Another package's rule of the same name, keyed by patient ids and
	// never looked up by a role: its keys are no roles. (Matched by the
	// rule's last name, they were cast, and, sorting before the letters,
	// took the places of maxGridRoles that the policy's roles needed:
	// TestListRuleForANewRoleMustAgree.)
	other := `package custos.btg

grants := {"00000000-0000-4000-8000-000000000001": "g1"}

limits["00000000-0000-4000-8000-000000000002"] := 1

b if grants[input.resource.patient]

c if limits[input.resource.patient] > 0
`
	got = policyRoles([]regoFile{{path: "p.rego", content: []byte(src)}, {path: "btg.rego", content: []byte(other)}})
	if want := []string{"dietitian", "midwife", "nurse", "pharmacist", "porter"}; !slices.Equal(got, want) {
		t.Errorf("roles %q, want %q", got, want)
	}
}

// TestDefaultPolicyDecidesTheGrid: custos policy check fails a policy that
// cannot decide a read of the agreement grid (CheckGrid); the default
// policy decides every one.
func TestDefaultPolicyDecidesTheGrid(t *testing.T) {
	e, err := Load(context.Background(), fstest.MapFS{
		"authz.rego": {Data: []byte(defaultPolicyFiles(t)["custos/authz.rego"])},
	}, Options{Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckGrid(context.Background(), e); err != nil {
		t.Error(err)
	}
}

// TestResidenceDisagreementIsRefusedAtLoad: the grid holds a tenant-level
// Location labelled residence (a patient's home, fhirin), so a policy whose
// list rule and read rule differ only on that label is refused at load. The
// grid had no such item until 2026-12-07 (h-review58's finding), and such
// a policy passed the check: its lists would show a patient's home that
// its reads refuse, or the reverse.
func TestResidenceDisagreementIsRefusedAtLoad(t *testing.T) {
	refusedAtLoad(t, map[string]string{
		"the read denies, the list allows": `decision := {"allow": false, "reasons": ["home"], "obligations": []} if "residence" in input.resource.sensitivity
else := {"allow": true, "reasons": [], "obligations": []}

decisions := [{"allow": true, "reasons": [], "obligations": []} | some _ in input.items]`,
		"the list denies, the read allows": `decision := {"allow": true, "reasons": [], "obligations": []}

decisions := [d(item) | some item in input.items]

d(item) := {"allow": false, "reasons": ["home"], "obligations": []} if "residence" in item.resource.sensitivity
else := {"allow": true, "reasons": [], "obligations": []}`,
	})
}

// TestTypeDisagreementIsRefusedAtLoad: the grid's items had the types the
// roles differed on when it was written (coverage the only billing one),
// so a policy whose list and read rules differed on a type it names and
// the grid did not hold (claim, explanationofbenefit: h-biller4's types,
// or a type a policy author adds) loaded: its lists would show claims its
// reads refuse. The grid now also holds an item of each R4 type the
// policy names.
func TestTypeDisagreementIsRefusedAtLoad(t *testing.T) {
	refusedAtLoad(t, map[string]string{
		"the read denies claims, the list allows": `decision := {"allow": false, "reasons": ["claims"], "obligations": []} if input.resource.type == "claim"
else := {"allow": true, "reasons": [], "obligations": []}

decisions := [{"allow": true, "reasons": [], "obligations": []} | some _ in input.items]`,
		"the list denies invoices, the read allows": `decision := {"allow": true, "reasons": [], "obligations": []}

decisions := [d(item) | some item in input.items]

d(item) := {"allow": false, "reasons": ["invoices"], "obligations": []} if item.resource.type in {"invoice"}
else := {"allow": true, "reasons": [], "obligations": []}`,
	})
	// The default policy with a hold on a biller's EOBs added to decision
	// only.
	files := defaultPolicyFiles(t)
	p := eobHoldInDecisionOnly(t, files["custos/authz.rego"])
	e, err := Load(context.Background(), fstest.MapFS{"authz.rego": {Data: []byte(p)}}, Options{Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckBatch(context.Background(), e); !errors.Is(err, ErrBatchDisagrees) {
		t.Fatalf("the default policy holding back EOBs in decision only: CheckBatch: %v, want ErrBatchDisagrees", err)
	}
}

// TestAgreementIsDecidedOncePerPolicy: policy files whose grid agreed are
// not decided again in the process (vetBatch, agreedBefore): a load of the
// same bytes passes within a budget the grid alone overruns, the same
// policy with one byte more does not, and a policy whose grid disagrees is
// refused at every load.
func TestAgreementIsDecidedOncePerPolicy(t *testing.T) {
	files := map[string]string{"custos/authz.rego": `package custos.authz

decision := {"allow": true, "reasons": ["all"], "obligations": []}

decisions := [{"allow": true, "reasons": ["all"], "obligations": []} | some _ in input.items]
# once-per-policy ` + t.Name() + `
`}
	load := func(files map[string]string) error {
		_, err := DirSource{Dir: writeDir(t, files), AllowNoTests: true}.Load(context.Background())
		return err
	}
	if err := load(files); err != nil {
		t.Fatal(err)
	}
	old := testRunBudget
	testRunBudget = time.Microsecond
	defer func() { testRunBudget = old }()
	if err := load(files); err != nil {
		t.Fatalf("the same policy again, its grid agreed before: %v", err)
	}
	files["custos/authz.rego"] += "# one byte more\n"
	if err := load(files); !errors.Is(err, ErrTestsFailed) || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("another policy within a budget its grid overruns: %v, want refused", err)
	}
	testRunBudget = old
	disagree := map[string]string{"custos/authz.rego": `package custos.authz

decision := {"allow": false, "reasons": ["none"], "obligations": []}

decisions := [{"allow": true, "reasons": ["all"], "obligations": []} | some _ in input.items]
`}
	for range 2 {
		if err := load(disagree); !errors.Is(err, ErrBatchDisagrees) {
			t.Fatalf("a disagreeing policy: %v, want ErrBatchDisagrees at every load", err)
		}
	}
}

// TestGridPageTimingOutIsDecidedInParts: a page of the agreement grid that
// decisions does not decide within the evaluation time-out is decided
// again in halves (decideGridPage), so a loaded machine does not refuse
// the default policy at load: a CI run beside other builds refused it
// ("decisions did not decide a list page of 256 synthetic items ...
// within the evaluation time-out (1s)", policy TestReloaderWarmsTheCandidate)
// where an idle machine decides the page in tens of milliseconds. Every
// item is still compared with its single decision (a disagreement is
// found through the halves), and a page of minGridSplit items that still
// times out is refused as too slow. The time-out is simulated by
// gridDecideBatch: a real one depends on the machine's load.
func TestGridPageTimingOutIsDecidedInParts(t *testing.T) {
	old := gridDecideBatch
	t.Cleanup(func() { gridDecideBatch = old })
	var sizes []int
	slowAbove := func(n int) func(*Engine, context.Context, Input, []Item) ([]Decision, error) {
		return func(e *Engine, ctx context.Context, in Input, items []Item) ([]Decision, error) {
			sizes = append(sizes, len(items))
			if len(items) > n {
				return nil, fmt.Errorf("policy: evaluation: %w", context.DeadlineExceeded)
			}
			return old(e, ctx, in, items)
		}
	}
	files := defaultPolicyFiles(t)
	e, err := Load(context.Background(), fstest.MapFS{"authz.rego": {Data: []byte(files["custos/authz.rego"])}}, Options{Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	gridDecideBatch = slowAbove(32)
	if err := CheckBatch(context.Background(), e); err != nil {
		t.Fatalf("the default policy, pages of more than 32 items timing out: %v; want it decided in parts", err)
	}
	if !slices.Contains(sizes, 256) || slices.Max(sizes[1:]) > 256 || !slices.ContainsFunc(sizes, func(n int) bool { return n <= 32 }) {
		t.Errorf("pages decided: %v; want pages of 256 cut down to 32 or fewer", sizes)
	}
	// A disagreement is still found through the halves.
	p := eobHoldInDecisionOnly(t, files["custos/authz.rego"])
	gridDecideBatch = old
	d, err := Load(context.Background(), fstest.MapFS{"authz.rego": {Data: []byte(p)}}, Options{Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	gridDecideBatch = slowAbove(32)
	if err := CheckBatch(context.Background(), d); !errors.Is(err, ErrBatchDisagrees) {
		t.Fatalf("a disagreeing policy decided in parts: %v, want ErrBatchDisagrees", err)
	}
	// A page that times out however small is refused as too slow.
	gridDecideBatch = slowAbove(0)
	if err := CheckBatch(context.Background(), e); !errors.Is(err, ErrEvaluation) || errors.Is(err, ErrBatchDisagrees) ||
		!strings.Contains(err.Error(), fmt.Sprintf("a list page of %d synthetic items", minGridSplit)) {
		t.Fatalf("every page timing out: %v, want ErrEvaluation naming a page of %d items", err, minGridSplit)
	}
}

// eobHoldInDecisionOnly is the default policy p with a hold on a biller's
// EOBs added to decision only, so that decisions disagrees with it.
func eobHoldInDecisionOnly(t *testing.T, p string) string {
	t.Helper()
	const rule = `decision := resource_decision if input.action in {"list", "read"}`
	if !strings.Contains(p, rule) {
		t.Fatalf("the default policy no longer has %q", rule)
	}
	return strings.Replace(p, rule, `decision := resource_decision if {
	input.action in {"list", "read"}
	input.resource.type != "explanationofbenefit"
}

decision := {"allow": false, "reasons": ["eob_hold"], "obligations": []} if {
	input.action in {"list", "read"}
	input.resource.type == "explanationofbenefit"
}`, 1)
}
