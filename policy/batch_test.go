package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// batchGrid is a varied list page for DecideBatch: every type, both
// patients, labels, consent flags, a foreign tenant and break-the-glass
// grants that cover the item, cover another patient or have no id. The
// labels include restricted and very-restricted: very-restricted denies for
// two reasons at once outside treatment and without its role, which a
// policy that gives both from one function turns into an evaluation
// conflict failing the whole page (TestDecideBatchMatchesDecide and
// TestNothingVisibleMeansEveryDecisionDenies then fail).
func batchGrid() []Item {
	types := []string{"patient", "observation", "condition", "medicationrequest", "encounter", "coverage", "note", "report", "image", "genome"}
	labels := [][]string{nil, {"hiv"}, {"sud"}, {"vip"}, {"hiv", "vip"}, {"genetic"}, {"restricted"}, {"very-restricted", "psy"}}
	consents := [][]string{nil, {"opt-out"}, {"share"}}
	var items []Item
	i := 0
	for _, typ := range types {
		for _, lab := range labels {
			for _, con := range consents {
				for _, pat := range []string{patientA, patientB} {
					i++
					ten := tenant
					if i%11 == 0 {
						ten = "other"
					}
					it := Item{Resource: &Resource{URI: fmt.Sprintf("custos://x/%s/%d", typ, i), Type: typ, Patient: pat, Tenant: ten, Sensitivity: lab, Consent: con}}
					switch i % 7 {
					case 1:
						it.BreakGlass = &BreakGlass{Grant: "g-1", Patient: pat}
					case 3:
						it.BreakGlass = &BreakGlass{Grant: "g-2", Patient: patientA + patientB}
					case 5:
						it.BreakGlass = &BreakGlass{Patient: pat}
					}
					items = append(items, it)
				}
			}
		}
	}
	return items
}

// TestDecideBatchMatchesDecide decides a generated page in one batch and
// item by item, for many principals and purposes, with the cache disabled:
// each batch decision must equal Decide's, with its own ID.
func TestDecideBatchMatchesDecide(t *testing.T) {
	ctx := context.Background()
	e, err := Default(ctx, Options{DecisionCache: -1, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	items := batchGrid()
	roleSets := [][]string{
		{"clinician"}, {"billing"}, {"researcher"}, {"auditor"}, {},
		{"clinician", "sensitive:hiv"}, {"researcher", "sensitive:sud", "sensitive:hiv"}, {"billing", "clinician"},
	}
	purposes := []string{"", "TREAT", "ETREAT", "HPAYMT", "HRESCH", "PUBHLTH", "BOGUS"}
	n, allowed, obligated := 0, 0, 0
	for ri, roles := range roleSets {
		for pi, pou := range purposes {
			if (ri+pi)%2 == 1 && pou != "TREAT" && pou != "ETREAT" {
				continue // thinned to keep the test short
			}
			p := principal(fmt.Sprint("u", ri), roles...)
			action := ActionList
			if pi%2 == 1 {
				action = ActionRead
			}
			ds, err := e.DecideBatch(ctx, Input{Principal: p, PurposeOfUse: pou, Action: action}, items)
			if err != nil {
				t.Fatalf("DecideBatch(%v, %q): %v", roles, pou, err)
			}
			if len(ds) != len(items) {
				t.Fatalf("%d decisions for %d items", len(ds), len(items))
			}
			ids := map[string]bool{}
			for i, it := range items {
				want, err := e.Decide(ctx, Input{Principal: p, PurposeOfUse: pou, Action: action, Resource: it.Resource, BreakGlass: it.BreakGlass})
				if err != nil {
					t.Fatal(err)
				}
				got := ds[i]
				if got.Allow != want.Allow || !slices.Equal(got.Reasons, want.Reasons) || !slices.Equal(got.Obligations, want.Obligations) {
					t.Errorf("roles=%v purpose=%q item %d %+v bg=%+v:\n batch=%v %v %v\nsingle=%v %v %v",
						roles, pou, i, *it.Resource, it.BreakGlass, got.Allow, got.Reasons, got.Obligations, want.Allow, want.Reasons, want.Obligations)
				}
				if got.Revision != e.Revision() || ids[got.ID] || got.ID == "" {
					t.Errorf("item %d: ID %q (duplicate: %v), revision %q", i, got.ID, ids[got.ID], got.Revision)
				}
				ids[got.ID] = true
				n++
				if got.Allow {
					allowed++
				}
				if len(got.Obligations) > 0 {
					obligated++
				}
			}
		}
	}
	if n < 2000 || allowed == 0 || allowed == n || obligated == 0 {
		t.Fatalf("weak test: %d decisions, %d allowed, %d with obligations", n, allowed, obligated)
	}
	t.Logf("%d decisions, %d allowed, %d with obligations", n, allowed, obligated)
}

// TestDecideBatchUsesTheCache checks that a batch fills the decision cache
// per item, that a repeated batch is answered from it with the same
// decisions and fresh IDs, and that a single Decide shares the entries.
func TestDecideBatchUsesTheCache(t *testing.T) {
	ctx := context.Background()
	e, err := Default(ctx, Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	items := batchGrid()[:40]
	in := Input{Principal: clinician, PurposeOfUse: "ETREAT", Action: ActionList}
	first, err := e.DecideBatch(ctx, in, items)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(e.cache.m); got != len(items) {
		t.Fatalf("cache holds %d decisions after a batch of %d distinct items", got, len(items))
	}
	second, err := e.DecideBatch(ctx, in, items)
	if err != nil {
		t.Fatal(err)
	}
	for i := range items {
		a, b := first[i], second[i]
		if a.Allow != b.Allow || !slices.Equal(a.Reasons, b.Reasons) || !slices.Equal(a.Obligations, b.Obligations) || a.ID == b.ID {
			t.Errorf("item %d: first %+v, second %+v", i, a, b)
		}
		x := in
		x.Resource, x.BreakGlass = items[i].Resource, items[i].BreakGlass
		d, err := e.Decide(ctx, x)
		if err != nil || d.Allow != a.Allow || !slices.Equal(d.Reasons, a.Reasons) {
			t.Errorf("item %d: Decide %+v, %v; batch %+v", i, d, err, a)
		}
	}
	if got := len(e.cache.m); got != len(items) {
		t.Errorf("cache holds %d decisions, want %d (the same keys)", got, len(items))
	}
	// Decisions handed out are copies: changing one changes no other.
	if len(second[0].Reasons) > 0 {
		second[0].Reasons[0] = "tampered"
		third, _ := e.DecideBatch(ctx, in, items[:1])
		if third[0].Reasons[0] == "tampered" {
			t.Error("a returned decision shares its reasons with the cache")
		}
	}
}

func TestDecideBatchBadInput(t *testing.T) {
	e := mustDefault(t)
	items := []Item{{Resource: resource("observation", patientA)}, {Resource: resource("patient", patientB)}}
	for _, c := range []struct {
		name  string
		in    Input
		items []Item
	}{
		{"resource in input", Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionList, Resource: resource("note", patientA)}, items},
		{"grant in input", Input{Principal: clinician, PurposeOfUse: "ETREAT", Action: ActionList, BreakGlass: &BreakGlass{Grant: "g", Patient: patientA}}, items},
		{"templates", Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionTemplates}, items},
		{"unknown action", Input{Principal: clinician, PurposeOfUse: "TREAT", Action: "delete"}, items},
		{"item without resource", Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionList}, append(slices.Clone(items), Item{})},
		{"subject of another principal", Input{Principal: clinician, Subject: NewSubject(researcher), PurposeOfUse: "TREAT", Action: ActionList}, items},
	} {
		t.Run(c.name, func(t *testing.T) {
			ds, err := e.DecideBatch(context.Background(), c.in, c.items)
			if !errors.Is(err, ErrBadInput) {
				t.Errorf("err = %v, want ErrBadInput", err)
			}
			if len(ds) != len(c.items) {
				t.Fatalf("%d decisions for %d items", len(ds), len(c.items))
			}
			for _, d := range ds {
				checkDenied(t, e, d, "bad_input")
			}
		})
	}
	ds, err := e.DecideBatch(context.Background(), Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionList}, nil)
	if err != nil || len(ds) != 0 {
		t.Errorf("empty batch: %v, %v", ds, err)
	}
}

// TestDecideBatchFailsClosed loads custom policies whose batch rule is
// broken: every item of the batch must be denied with the reason code, even
// those the single rule allows.
func TestDecideBatchFailsClosed(t *testing.T) {
	allow := `decision := {"allow": true, "reasons": ["ok"]}` + "\n"
	in := Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionList}
	items := []Item{{Resource: resource("observation", patientA)}, {Resource: resource("note", patientA)}, {Resource: resource("image", patientB)}}
	tests := []struct {
		name   string
		policy string
		reason string
		err    error
	}{
		{"not an array", `decisions := {"allow": true}`, "policy_bad_shape", ErrBadShape},
		{"one short", `decisions := [d | some item in input.items; item.resource.type != "image"; d := {"allow": true}]`, "policy_bad_shape", ErrBadShape},
		{"one too many", `decisions := array.concat([{"allow": true} | some _ in input.items], [{"allow": true}])`, "policy_bad_shape", ErrBadShape},
		{"an item without allow", `decisions := [d | some item in input.items; d := {"allow": item.resource.type != "note"}]`, "", nil},
		{"an element not an object", `decisions := [d | some item in input.items; d := object.get({"note": "yes"}, item.resource.type, {"allow": true})]`, "policy_bad_shape", ErrBadShape},
		{"allow not a boolean on one item", `decisions := [d | some item in input.items; d := {"allow": object.get({"note": "yes"}, item.resource.type, true)}]`, "policy_bad_shape", ErrBadShape},
		{"unknown obligation on one item", `decisions := [d | some item in input.items; d := {"allow": true, "obligations": object.get({"note": [{"op": "shred"}]}, item.resource.type, [])}]`, "unknown_obligation", ErrBadObligation},
		{"misspelt obligations key on one item", `decisions := [d | some item in input.items; d := object.get({"note": {"allow": true, "obligation": [{"op": "remove", "path": "/text"}]}}, item.resource.type, {"allow": true})]`, "policy_bad_shape", ErrBadShape},
		{"undefined", `decisions := [{"allow": true}] if false`, "policy_undefined", ErrUndefined},
		{"builtin error", `decisions := [{"allow": to_number("x") > 0} | some _ in input.items]`, "policy_error", ErrEvaluation},
		{"conflict", "decisions := [{\"allow\": true}]\ndecisions := [{\"allow\": false}] if input.action == \"list\"", "policy_error", ErrEvaluation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := loadPolicy(t, allow+tc.policy)
			if e.batch == nil {
				t.Fatal("the policy defines decisions but the engine has no batch query")
			}
			ds, err := e.DecideBatch(context.Background(), in, items)
			if len(ds) != len(items) {
				t.Fatalf("%d decisions for %d items", len(ds), len(items))
			}
			if tc.err == nil {
				// A well-formed batch: per-item denial without reasons.
				if err != nil || !ds[0].Allow || ds[1].Allow || !slices.Equal(ds[1].Reasons, []string{"denied"}) {
					t.Fatalf("DecideBatch = %+v, %v", ds, err)
				}
				return
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("err = %v, want %v", err, tc.err)
			}
			for _, d := range ds {
				checkDenied(t, e, d, tc.reason)
			}
		})
	}
}

// TestDecideBatchFallsBackToDecide: a policy without the batch rule is
// evaluated per item, and one failing item fails the whole batch.
func TestDecideBatchFallsBackToDecide(t *testing.T) {
	e := loadPolicy(t, `decision := {"allow": input.resource.type != "note", "reasons": [input.resource.type]}
decision := {"allow": to_number("x") > 0} if input.resource.type == "image"`)
	if e.batch != nil {
		t.Fatal("batch query without a decisions rule")
	}
	in := Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead}
	ds, err := e.DecideBatch(context.Background(), in, []Item{{Resource: resource("observation", patientA)}, {Resource: resource("note", patientA)}})
	if err != nil || len(ds) != 2 || !ds[0].Allow || !slices.Equal(ds[0].Reasons, []string{"observation"}) || ds[1].Allow || ds[0].ID == ds[1].ID {
		t.Fatalf("DecideBatch = %+v, %v", ds, err)
	}
	ds, err = e.DecideBatch(context.Background(), in, []Item{{Resource: resource("observation", patientA)}, {Resource: resource("image", patientA)}})
	if !errors.Is(err, ErrEvaluation) || len(ds) != 2 {
		t.Fatalf("DecideBatch = %+v, %v; want ErrEvaluation", ds, err)
	}
	for _, d := range ds {
		checkDenied(t, e, d, "policy_error")
	}
}

func TestDecideBatchTimeout(t *testing.T) {
	dir := writePolicy(t, map[string]string{"authz.rego": `package custos.authz

decision := {"allow": true}

decisions := [{"allow": count(pairs) > 0} | some _ in input.items]

pairs := {[i, j] | some i in numbers.range(1, 2000); some j in numbers.range(1, 2000)}
`})
	e, err := LoadDir(context.Background(), dir, Options{Timeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	items := []Item{{Resource: resource("observation", patientA)}, {Resource: resource("note", patientA)}}
	ds, err := e.DecideBatch(context.Background(), Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionList}, items)
	if !errors.Is(err, ErrEvaluation) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrEvaluation and DeadlineExceeded", err)
	}
	for _, d := range ds {
		checkDenied(t, e, d, "policy_timeout")
	}
}

func TestDecideBatchCancelled(t *testing.T) {
	e := mustDefault(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	items := []Item{{Resource: resource("observation", patientA)}}
	ds, err := e.DecideBatch(ctx, Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionList}, items)
	if !errors.Is(err, ErrEvaluation) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrEvaluation and Canceled", err)
	}
	checkDenied(t, e, ds[0], "policy_error")
}

// TestDecideBatchLockedDown: the batch rule is compiled with the same
// capabilities as decision.
func TestDecideBatchLockedDown(t *testing.T) {
	dir := writePolicy(t, map[string]string{"authz.rego": `package custos.authz

decision := {"allow": false}

decisions := [{"allow": opa.runtime().env != {}} | some _ in input.items]
`})
	if _, err := LoadDir(context.Background(), dir, Options{}); !errors.Is(err, ErrCompile) {
		t.Fatalf("LoadDir = %v, want ErrCompile", err)
	}
}

// TestReloaderDecideBatch: a Reloader decides a batch with its current
// engine, batch rule included.
func TestReloaderDecideBatch(t *testing.T) {
	ctx := context.Background()
	dir := writePolicy(t, defaultPolicyFilesTB(t))
	r, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Current().batch == nil {
		t.Fatal("the default policy loaded by a Reloader has no batch query")
	}
	items := []Item{{Resource: resource("observation", patientA)}, {Resource: resource("observation", patientB)}}
	ds, err := r.DecideBatch(ctx, Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionList}, items)
	if err != nil || len(ds) != 2 || !ds[0].Allow || ds[1].Allow || ds[0].Revision != r.Revision() {
		t.Fatalf("DecideBatch = %+v, %v", ds, err)
	}
}

func TestNewIDs(t *testing.T) {
	ids := newIDs(500)
	seen := map[string]bool{}
	for _, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || seen[id] {
			t.Fatalf("id %q: %v, version %v, duplicate %v", id, err, u.Version(), seen[id])
		}
		seen[id] = true
	}
	if len(newIDs(0)) != 0 {
		t.Error("newIDs(0) not empty")
	}
}
