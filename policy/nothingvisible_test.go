package policy

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// nothingGrid is batchGrid plus tenant-level reference data (decided by
// reference_grant, which every grant mode can earn), with and without a
// break-the-glass grant, so that a caller who can see anything at all
// sees something of it.
func nothingGrid() []Item {
	items := batchGrid()
	for _, typ := range []string{"organization", "medication", "group"} {
		r := &Resource{URI: "custos://" + tenant + "/" + typ + "/x", Type: typ, Tenant: tenant}
		items = append(items, Item{Resource: r}, Item{Resource: r, BreakGlass: &BreakGlass{Grant: "g-1", Patient: patientA}})
	}
	return items
}

// TestNothingVisibleMeansEveryDecisionDenies is the property the list
// shortcut rests on, checked against the plain path: for every persona
// (roles, tenant, care team, sub) and purpose, decide every item of a
// varied page the ordinary way. Where NothingVisible says true, every
// decision must deny, by the policy's own rules (no decision may carry the
// engine's override reason: the default policy implies the rule); where it
// says false, some item of the page must be allowed, so that the rule is
// not merely safe but exact on this page.
func TestNothingVisibleMeansEveryDecisionDenies(t *testing.T) {
	ctx := context.Background()
	e, err := Default(ctx, Options{DecisionCache: -1, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	items := nothingGrid()
	roleSets := [][]string{
		{"clinician"}, {"billing"}, {"researcher"}, {"auditor"}, {}, {"nurse"},
		{"auditor", "clinician"}, {"clinician", "sensitive:hiv"}, {"billing", "researcher"},
	}
	purposes := []string{"TREAT", "ETREAT", "HPAYMT", "HRESCH", "HOPERAT", "PUBHLTH", "PATRQT", "", "CURIOSITY"}
	blind, seeing := 0, 0
	for _, roles := range roleSets {
		for _, pou := range purposes {
			for _, ten := range []string{tenant, ""} {
				for _, sub := range []string{"someone", ""} {
					p := Principal{Sub: sub, Roles: roles, ClientID: "assistant", Tenant: ten, Patients: []string{patientA}}
					in := Input{Principal: p, PurposeOfUse: pou, Action: ActionList}
					nv, err := e.NothingVisible(ctx, in)
					if err != nil {
						t.Fatalf("NothingVisible(%v, %q): %v", roles, pou, err)
					}
					ds, err := e.DecideBatch(ctx, in, items)
					if err != nil {
						t.Fatalf("DecideBatch(%v, %q): %v", roles, pou, err)
					}
					allowed := slices.IndexFunc(ds, func(d Decision) bool { return d.Allow })
					override := slices.IndexFunc(ds, func(d Decision) bool { return slices.Contains(d.Reasons, ReasonNothingVisible) })
					switch {
					case override >= 0:
						t.Errorf("roles=%v purpose=%q tenant=%q sub=%q: the engine overrode an allow (%+v); the rules must imply nothing_visible", roles, pou, ten, sub, ds[override])
					case nv && allowed >= 0:
						t.Errorf("roles=%v purpose=%q tenant=%q sub=%q: nothing visible, yet item %d allowed: %+v", roles, pou, ten, sub, allowed, ds[allowed])
					case !nv && allowed < 0:
						t.Errorf("roles=%v purpose=%q tenant=%q sub=%q: something visible, yet the page allows nothing", roles, pou, ten, sub)
					}
					if nv {
						blind++
					} else {
						seeing++
					}
				}
			}
		}
	}
	// Both sides of the property were exercised.
	if blind == 0 || seeing == 0 {
		t.Fatalf("blind=%d seeing=%d: the grid does not exercise both answers", blind, seeing)
	}
	// The personas of the issue: the auditor sees nothing, the others something.
	for _, c := range []struct {
		p    Principal
		pou  string
		want bool
	}{{auditor, "HOPERAT", true}, {clinician, "TREAT", false}, {billing, "HPAYMT", false}, {researcher, "HRESCH", false}} {
		nv, err := e.NothingVisible(ctx, Input{Principal: c.p, PurposeOfUse: c.pou, Action: ActionList})
		if err != nil || nv != c.want {
			t.Errorf("NothingVisible(%v, %s) = %v, %v; want %v", c.p.Roles, c.pou, nv, err, c.want)
		}
	}
}

// nothingPolicy allows everything, but says nothing is visible to
// auditors: a custom policy whose rules do not imply its nothing_visible.
const nothingPolicy = `default nothing_visible := false

nothing_visible if "auditor" in input.principal.roles

decision := {"allow": true, "reasons": ["all"], "obligations": [{"op": "remove", "path": "/text"}]}
`

// TestNothingVisibleIsEnforced: whatever the rules say, a list or read
// decision made while nothing_visible holds denies, single or batch (with
// and without the batch rule, and from the decision cache); templates are
// not resources and are left alone; other principals are unaffected.
func TestNothingVisibleIsEnforced(t *testing.T) {
	ctx := context.Background()
	for name, body := range map[string]string{
		"per item": nothingPolicy,
		"batch":    nothingPolicy + "\ndecisions := [decision | some _ in input.items]\n",
	} {
		t.Run(name, func(t *testing.T) {
			e := loadPolicy(t, body)
			if (e.batch != nil) != (name == "batch") || e.nothing == nil {
				t.Fatalf("batch=%v nothing=%v", e.batch != nil, e.nothing != nil)
			}
			items := []Item{{Resource: resource("observation", patientA)}, {Resource: resource("note", patientB)}}
			for round := range 2 { // the second round comes from the decision cache
				for _, act := range []Action{ActionList, ActionRead} {
					in := Input{Principal: auditor, PurposeOfUse: "HOPERAT", Action: act}
					nv, err := e.NothingVisible(ctx, in)
					if err != nil || !nv {
						t.Fatalf("NothingVisible = %v, %v; want true", nv, err)
					}
					ds, err := e.DecideBatch(ctx, in, items)
					if err != nil {
						t.Fatal(err)
					}
					x := in
					x.Resource = items[0].Resource
					d, err := e.Decide(ctx, x)
					if err != nil {
						t.Fatal(err)
					}
					for _, d := range append(ds, d) {
						if d.Allow || d.Obligations != nil || !slices.Equal(d.Reasons, []string{"all", ReasonNothingVisible}) {
							t.Errorf("round %d %s: auditor decision %+v; want a denial for nothing_visible", round, act, d)
						}
					}
					x.Principal = clinician
					if d, err := e.Decide(ctx, x); err != nil || !d.Allow || len(d.Obligations) != 1 {
						t.Errorf("round %d %s: clinician decision %+v, %v; want the policy's allow", round, act, d, err)
					}
				}
			}
			d, err := e.Decide(ctx, Input{Principal: auditor, PurposeOfUse: "HOPERAT", Action: ActionTemplates})
			if err != nil || !d.Allow {
				t.Errorf("templates: %+v, %v; want the policy's allow", d, err)
			}
		})
	}
}

// TestNothingVisibleUndefined: a policy without the rule, or with it but
// without a default, is not asked (false, nil) and decides as it would
// without it; a rule that is not a boolean fails closed.
func TestNothingVisibleUndefined(t *testing.T) {
	ctx := context.Background()
	allow := `decision := {"allow": true}` + "\n"
	in := Input{Principal: auditor, PurposeOfUse: "HOPERAT", Action: ActionList}
	read := Input{Principal: auditor, PurposeOfUse: "HOPERAT", Action: ActionRead, Resource: resource("observation", patientA)}
	for name, body := range map[string]string{
		"no rule":    allow,
		"no default": allow + `nothing_visible if "auditor" in input.principal.roles` + "\n",
		// Evaluated on the principal alone, this would say true; with a
		// resource, false: not a rule about the principal, so not used.
		"reads the resource": allow + "default nothing_visible := false\nnothing_visible if not input.resource\n",
		"reads the action":   allow + "default nothing_visible := false\nnothing_visible if input.action == \"list\"\n",
	} {
		e := loadPolicy(t, body)
		if nv, err := e.NothingVisible(ctx, in); nv || err != nil {
			t.Errorf("%s: NothingVisible = %v, %v; want false, nil", name, nv, err)
		}
		if d, err := e.Decide(ctx, read); err != nil || !d.Allow {
			t.Errorf("%s: Decide = %+v, %v; want the policy's allow", name, d, err)
		}
	}
	e := loadPolicy(t, allow+`default nothing_visible := "no"`+"\n")
	if nv, err := e.NothingVisible(ctx, in); nv || !errors.Is(err, ErrBadShape) {
		t.Errorf("non-boolean: NothingVisible = %v, %v; want false, ErrBadShape", nv, err)
	}
	if d, err := e.Decide(ctx, read); d.Allow || !errors.Is(err, ErrBadShape) {
		t.Errorf("non-boolean: Decide = %+v, %v; want a denial with ErrBadShape", d, err)
	}
	if nv, err := e.NothingVisible(ctx, read); nv || !errors.Is(err, ErrBadInput) {
		t.Errorf("with a resource: NothingVisible = %v, %v; want false, ErrBadInput", nv, err)
	}
}
