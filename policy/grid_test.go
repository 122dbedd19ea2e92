package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// decisionGrid is a cross product of requests for whole-policy properties:
// principals that differ in every field the default policy reads (no roles,
// roles that grant nothing, sensitive roles, the auditor, no tenant, no sub,
// an empty care-team entry), every purpose the policy names a grant for, one
// it names none for, none and an unknown one, and resources of every kind of
// type, patient, tenant, label set and consent flag, with and without
// break-the-glass grants.
func decisionGrid() (principals []Principal, purposes []string, items []Item) {
	const tn, other = "general-hospital", "other-hospital"
	const pa, pb = "6f1c2a44-0000-4000-8000-00000000000a", "6f1c2a44-0000-4000-8000-00000000000b"
	for _, roles := range [][]string{
		nil, {"visitor"}, {"clinician"}, {"clinician", "sensitive:hiv", "sensitive:psy"},
		{"clinician", "sensitive:very-restricted", "team-7"}, {"billing"}, {"billing", "sensitive:very-restricted"},
		{"researcher"}, {"researcher", "sensitive:sud"}, {"auditor"}, {"clinician", "auditor"}, {"billing", "researcher"},
	} {
		for _, tenant := range []string{tn, ""} {
			principals = append(principals, Principal{Sub: "dr.x", Roles: roles, ClientID: "assistant", Tenant: tenant, Patients: []string{pa}})
		}
	}
	principals = append(principals,
		Principal{Sub: "", Roles: []string{"clinician"}, Tenant: tn, Patients: []string{pa}},
		Principal{Sub: "dr.y", Roles: []string{"clinician"}, Tenant: tn, Patients: []string{"", pa}},
		Principal{Sub: "dr.z", Roles: []string{"clinician"}, Tenant: other, Patients: []string{pa, pb}},
	)
	purposes = []string{"TREAT", "ETREAT", "HPAYMT", "HRESCH", "HOPERAT", "", "treatment"}
	grants := []*BreakGlass{nil, {Grant: "g-1", Patient: pa}, {Grant: "g-2", Patient: pb}, {Grant: "", Patient: pa}}
	labels := [][]string{nil, {"vip"}, {"hiv"}, {"restricted"}, {"very-restricted"}, {"very-restricted", "psy"}, {"sud", "eth", "vip"}, {"no-such-label"}}
	consents := [][]string{nil, {"opt-out"}, {"no-such-flag"}, {"opt-out", "no-such-flag"}}
	add := func(typ, patient, tenant string, l, c []string) {
		r := &Resource{URI: fmt.Sprintf("custos://%s/%s/%s/%d", tenant, typ, patient, len(items)), Type: typ, Patient: patient, Tenant: tenant, Sensitivity: l, Consent: c}
		items = append(items, Item{Resource: r, BreakGlass: grants[len(items)%len(grants)]})
	}
	// Every type, patient and tenant, with labels and flags in turn; then
	// every label set with every consent set for a clinical type, a
	// document type and a reference type.
	for _, typ := range []string{"observation", "note", "attachment", "coverage", "encounter", "patient", "organization", "medication", "auditevent", "widget", ""} {
		for _, patient := range []string{pa, pb, ""} {
			for _, tenant := range []string{tn, other, ""} {
				add(typ, patient, tenant, labels[len(items)%len(labels)], consents[len(items)%len(consents)])
			}
		}
	}
	for _, r := range []struct{ typ, patient string }{{"observation", pa}, {"note", pb}, {"organization", ""}} {
		for _, l := range labels {
			for _, c := range consents {
				add(r.typ, r.patient, tn, l, c)
			}
		}
	}
	return principals, purposes, items
}

// TestDefaultPolicyDecidesEveryRequest: the default policy decides every
// request of the grid, single and as a list page, without an evaluation
// error. An error denies (fail closed), but as policy_error, which the
// server logs as a failure and the audit records as one; and a conflict
// (two definitions of a function giving different values for one argument)
// fails the whole evaluation, so one such resource would deny every item of
// its list page. Over the same grid, a list page's decisions are the single
// reads' (one decision function for list and read), and a principal to whom
// nothing is visible is allowed nothing.
func TestDefaultPolicyDecidesEveryRequest(t *testing.T) {
	ctx := context.Background()
	e, err := Default(ctx, Options{DecisionCache: -1, SubjectCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	principals, purposes, items := decisionGrid()
	var bad []string
	decisions, allowed := 0, 0
	for _, p := range principals {
		for _, pou := range purposes {
			subj := NewSubject(p)
			singles := make([]Decision, len(items))
			anyAllowed := false
			for i, it := range items {
				d, err := e.Decide(ctx, Input{Subject: subj, PurposeOfUse: pou, Action: ActionRead, Resource: it.Resource, BreakGlass: it.BreakGlass})
				singles[i] = d
				decisions++
				if d.Allow {
					allowed++
					anyAllowed = true
				}
				if err != nil && len(bad) < 10 {
					bad = append(bad, fmt.Sprintf("read: %+v %q %+v %+v: %v", p, pou, *it.Resource, it.BreakGlass, err))
				}
			}
			in := Input{Subject: subj, PurposeOfUse: pou, Action: ActionList}
			page, err := e.DecideBatch(ctx, in, items)
			if err != nil && len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("list page of %d items: %+v %q: %v", len(items), p, pou, err))
			}
			for i := range page {
				if g, w := fmt.Sprint(page[i].Allow, page[i].Reasons, page[i].Obligations), fmt.Sprint(singles[i].Allow, singles[i].Reasons, singles[i].Obligations); g != w && len(bad) < 10 {
					bad = append(bad, fmt.Sprintf("list item %d of %+v %q: %s, read %s", i, p, pou, g, w))
				}
			}
			if nothing, err := e.NothingVisible(ctx, in); err != nil || (nothing && anyAllowed) {
				bad = append(bad, fmt.Sprintf("nothing visible to %+v %q: %v (%v), yet a read was allowed: %v", p, pou, nothing, err, anyAllowed))
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("the default policy failed to decide:\n%s", strings.Join(bad, "\n"))
	}
	// The grid is of like things: some of it is allowed, most of it denied.
	if allowed == 0 || allowed == decisions {
		t.Fatalf("%d of %d decisions allowed: the grid does not exercise the policy", allowed, decisions)
	}
	t.Logf("%d decisions (%d allowed) and %d list pages of %d items, none failed, every page equal to its reads", decisions, allowed, len(principals)*len(purposes), len(items))
}
