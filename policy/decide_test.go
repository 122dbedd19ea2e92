package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/custos-mcp/custos/minimize"
)

const (
	patientA = "7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01"
	patientB = "0c6e2b7d-5a44-4d39-8f0f-9b1e7c3a2d02"
	tenant   = "general-hospital"
)

func principal(sub string, roles ...string) Principal {
	return Principal{Sub: sub, Roles: roles, ClientID: "assistant", Tenant: tenant, Patients: []string{patientA}}
}

func resource(typ, patient string) *Resource {
	return &Resource{URI: "custos://" + tenant + "/" + typ + "/" + patient, Type: typ, Patient: patient, Tenant: tenant}
}

func with(r *Resource, f func(*Resource)) *Resource { f(r); return r }

var (
	clinician  = principal("dr.alice", "clinician")
	billing    = principal("bob.billing", "billing")
	researcher = principal("rita.research", "researcher")
	auditor    = principal("audrey.audit", "auditor")
)

// defaultEngine is loaded once; Load is the expensive part.
var defaultEngine = sync.OnceValues(func() (*Engine, error) {
	return Default(context.Background(), Options{Timeout: 10 * time.Second})
})

func mustDefault(tb testing.TB) *Engine {
	tb.Helper()
	e, err := defaultEngine()
	if err != nil {
		tb.Fatalf("Default: %v", err)
	}
	return e
}

func TestDefaultPolicyDecisions(t *testing.T) {
	e := mustDefault(t)
	tests := []struct {
		name       string
		in         Input
		allow      bool
		reason     string   // must be among Reasons
		obligation []string // minimize.Obligation.String() forms that must be present
		noObs      bool     // Obligations must be empty
	}{
		{name: "clinician care team read", allow: true, reason: "clinician_care_team", noObs: true,
			in: Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("observation", patientA)}},
		{name: "clinician care team note", allow: true, reason: "clinician_care_team", noObs: true,
			in: Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("note", patientA)}},
		{name: "clinician no care relationship", reason: "no_care_relationship",
			in: Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("observation", patientB)}},
		{name: "clinician wrong purpose", reason: "purpose_not_permitted",
			in: Input{Principal: clinician, PurposeOfUse: "HMARKT", Action: ActionRead, Resource: resource("observation", patientA)}},
		{name: "missing purpose", reason: "purpose_of_use_missing",
			in: Input{Principal: clinician, Action: ActionRead, Resource: resource("observation", patientA)}},
		{name: "unknown purpose", reason: "purpose_of_use_unknown",
			in: Input{Principal: clinician, PurposeOfUse: "GOSSIP", Action: ActionRead, Resource: resource("observation", patientA)}},
		{name: "billing coverage minimized", allow: true, reason: "billing_payment",
			obligation: []string{"mask:/subscriberId:last4", "mask:/class/*/value:last4", "remove:/identifier", "remove:/beneficiary/display", "remove:/text"},
			in:         Input{Principal: billing, PurposeOfUse: "HPAYMT", Action: ActionRead, Resource: resource("coverage", patientB)}},
		{name: "billing encounter minimized", allow: true, reason: "billing_payment",
			obligation: []string{"remove:/subject/display", "remove:/participant/*/individual/display"},
			in:         Input{Principal: billing, PurposeOfUse: "HPAYMT", Action: ActionList, Resource: resource("encounter", patientB)}},
		{name: "billing note denied", reason: "resource_type_not_permitted",
			in: Input{Principal: billing, PurposeOfUse: "HPAYMT", Action: ActionRead, Resource: resource("note", patientB)}},
		{name: "researcher patient de-identified", allow: true, reason: "research_deidentified",
			obligation: []string{"deidentify::safeharbor"},
			in:         Input{Principal: researcher, PurposeOfUse: "HRESCH", Action: ActionRead, Resource: resource("patient", patientB)}},
		{name: "researcher condition de-identified", allow: true, reason: "research_deidentified",
			obligation: []string{"deidentify::safeharbor"},
			in:         Input{Principal: researcher, PurposeOfUse: "HRESCH", Action: ActionRead, Resource: resource("condition", patientB)}},
		{name: "researcher note denied", reason: "resource_type_not_permitted",
			in: Input{Principal: researcher, PurposeOfUse: "HRESCH", Action: ActionRead, Resource: resource("note", patientB)}},
		{name: "auditor read denied", reason: "auditor_no_phi_access",
			in: Input{Principal: auditor, PurposeOfUse: "HOPERAT", Action: ActionRead, Resource: resource("observation", patientA)}},
		{name: "auditor list denied", reason: "auditor_no_phi_access",
			in: Input{Principal: auditor, PurposeOfUse: "TREAT", Action: ActionList, Resource: resource("observation", patientA)}},
		{name: "hiv without role", reason: "sensitive_category_requires_role",
			in: Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead,
				Resource: with(resource("condition", patientA), func(r *Resource) { r.Sensitivity = []string{"hiv"} })}},
		{name: "hiv with role", allow: true, reason: "clinician_care_team",
			in: Input{Principal: principal("dr.alice", "clinician", "sensitive:hiv"), PurposeOfUse: "TREAT", Action: ActionRead,
				Resource: with(resource("condition", patientA), func(r *Resource) { r.Sensitivity = []string{"hiv"} })}},
		{name: "sud without role", reason: "sensitive_category_requires_role",
			in: Input{Principal: principal("dr.alice", "clinician", "sensitive:hiv"), PurposeOfUse: "TREAT", Action: ActionRead,
				Resource: with(resource("note", patientA), func(r *Resource) { r.Sensitivity = []string{"sud"} })}},
		{name: "opt-out treatment allowed", allow: true, reason: "clinician_care_team",
			in: Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead,
				Resource: with(resource("observation", patientA), func(r *Resource) { r.Consent = []string{"opt-out"} })}},
		{name: "opt-out research denied", reason: "patient_opted_out",
			in: Input{Principal: researcher, PurposeOfUse: "HRESCH", Action: ActionRead,
				Resource: with(resource("observation", patientB), func(r *Resource) { r.Consent = []string{"opt-out"} })}},
		{name: "tenant mismatch", reason: "tenant_mismatch",
			in: Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead,
				Resource: with(resource("observation", patientA), func(r *Resource) { r.Tenant = "other-hospital" })}},
		{name: "vip flagged", allow: true, reason: "vip_patient", noObs: true,
			in: Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead,
				Resource: with(resource("patient", patientA), func(r *Resource) { r.Sensitivity = []string{"vip"} })}},
		{name: "templates any role", allow: true, reason: "templates_no_phi", noObs: true,
			in: Input{Principal: auditor, PurposeOfUse: "HOPERAT", Action: ActionTemplates}},
		{name: "templates need purpose", reason: "purpose_of_use_missing",
			in: Input{Principal: researcher, Action: ActionTemplates}},
		{name: "templates need subject", reason: "subject_missing",
			in: Input{Principal: Principal{Roles: []string{"clinician"}}, PurposeOfUse: "TREAT", Action: ActionTemplates}},
		{name: "unknown role", reason: "role_not_permitted",
			in: Input{Principal: principal("x", "janitor"), PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("observation", patientA)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := e.Decide(context.Background(), tc.in)
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if _, err := uuid.Parse(d.ID); err != nil {
				t.Errorf("ID %q is not a UUID", d.ID)
			}
			if d.Revision != e.Revision() || !strings.HasPrefix(d.Revision, "sha256:") {
				t.Errorf("Revision = %q, want %q", d.Revision, e.Revision())
			}
			if d.Allow != tc.allow {
				t.Errorf("Allow = %v, want %v (reasons %v)", d.Allow, tc.allow, d.Reasons)
			}
			if !slices.Contains(d.Reasons, tc.reason) {
				t.Errorf("Reasons = %v, want %q among them", d.Reasons, tc.reason)
			}
			got := make([]string, len(d.Obligations))
			for i, o := range d.Obligations {
				got[i] = o.String()
			}
			for _, want := range tc.obligation {
				if !slices.Contains(got, want) {
					t.Errorf("Obligations = %v, want %q among them", got, want)
				}
			}
			if (tc.noObs || !tc.allow) && len(d.Obligations) != 0 {
				t.Errorf("Obligations = %v, want none", got)
			}
			if tc.allow && len(tc.obligation) > 0 {
				if err := minimize.ValidateAll(d.Obligations); err != nil {
					t.Errorf("obligations do not validate: %v", err)
				}
			}
		})
	}
}

// TestListMatchesRead checks, over a generated grid of inputs, that list and
// read decisions agree on allow, reasons and obligations: a listing never
// shows what a read would deny.
func TestListMatchesRead(t *testing.T) {
	e := mustDefault(t)
	ctx := context.Background()
	roleSets := [][]string{
		{"clinician"}, {"billing"}, {"researcher"}, {"auditor"}, {},
		{"clinician", "sensitive:hiv"}, {"researcher", "sensitive:sud", "sensitive:hiv"}, {"billing", "clinician"},
	}
	purposes := []string{"", "TREAT", "ETREAT", "HPAYMT", "HRESCH", "HOPERAT", "PUBHLTH", "BOGUS"}
	types := []string{"patient", "observation", "condition", "medicationrequest", "encounter", "coverage", "note", "report", "image"}
	labels := [][]string{nil, {"hiv"}, {"sud"}, {"vip"}, {"hiv", "vip"}}
	consents := [][]string{nil, {"opt-out"}}
	n, allowed := 0, 0
	// A deterministic walk over the product, thinned to keep the test short.
	i := 0
	for _, roles := range roleSets {
		for _, pou := range purposes {
			for _, typ := range types {
				for _, lab := range labels {
					for _, con := range consents {
						for _, pat := range []string{patientA, patientB} {
							for _, ten := range []string{tenant, "other"} {
								i++
								if i%3 != 0 {
									continue
								}
								r := &Resource{URI: "custos://x/" + typ, Type: typ, Patient: pat, Tenant: ten, Sensitivity: lab, Consent: con}
								in := Input{Principal: principal(fmt.Sprint("u", i), roles...), PurposeOfUse: pou, Resource: r}
								in.Action = ActionList
								l, err := e.Decide(ctx, in)
								if err != nil {
									t.Fatalf("list %+v: %v", in, err)
								}
								in.Action = ActionRead
								rd, err := e.Decide(ctx, in)
								if err != nil {
									t.Fatalf("read %+v: %v", in, err)
								}
								n++
								if l.Allow {
									allowed++
								}
								if l.Allow != rd.Allow || !slices.Equal(l.Reasons, rd.Reasons) || !slices.Equal(l.Obligations, rd.Obligations) {
									t.Errorf("roles=%v purpose=%q type=%s labels=%v consent=%v patient=%s tenant=%s:\n list=%+v\n read=%+v",
										roles, pou, typ, lab, con, pat, ten, l, rd)
								}
							}
						}
					}
				}
			}
		}
	}
	if n < 1000 || allowed == 0 || allowed == n {
		t.Fatalf("weak property test: %d inputs, %d allowed", n, allowed)
	}
	t.Logf("%d inputs, %d allowed", n, allowed)
}

func TestDecideBadInput(t *testing.T) {
	e := mustDefault(t)
	for _, in := range []Input{
		{Principal: clinician, PurposeOfUse: "TREAT", Action: "delete", Resource: resource("observation", patientA)},
		{Principal: clinician, PurposeOfUse: "TREAT", Action: "", Resource: resource("observation", patientA)},
		{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead},
		{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionList},
	} {
		d, err := e.Decide(context.Background(), in)
		if !errors.Is(err, ErrBadInput) {
			t.Errorf("Decide(%q, resource=%v) err = %v, want ErrBadInput", in.Action, in.Resource != nil, err)
		}
		checkDenied(t, e, d, "bad_input")
	}
}

func TestDecisionIDsAreFresh(t *testing.T) {
	e := mustDefault(t)
	in := Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("observation", patientA)}
	seen := map[string]bool{}
	for range 50 {
		d, err := e.Decide(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if seen[d.ID] {
			t.Fatalf("duplicate decision ID %s", d.ID)
		}
		seen[d.ID] = true
	}
}

func TestDecideConcurrent(t *testing.T) {
	e := mustDefault(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			p := clinician
			if g%2 == 1 {
				p = researcher
			}
			pou := map[bool]string{true: "HRESCH", false: "TREAT"}[g%2 == 1]
			for range 50 {
				d, err := e.Decide(context.Background(), Input{Principal: p, PurposeOfUse: pou, Action: ActionRead, Resource: resource("observation", patientA)})
				if err != nil || !d.Allow || (g%2 == 1) != (len(d.Obligations) > 0) {
					errs <- fmt.Errorf("goroutine %d: %+v, %v", g, d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// checkDenied asserts the fail-closed shape of a decision.
func checkDenied(t *testing.T, e *Engine, d Decision, reason string) {
	t.Helper()
	if d.Allow {
		t.Errorf("Allow = true, want false")
	}
	if !slices.Equal(d.Reasons, []string{reason}) {
		t.Errorf("Reasons = %v, want [%s]", d.Reasons, reason)
	}
	if d.Obligations != nil {
		t.Errorf("Obligations = %v, want nil", d.Obligations)
	}
	if _, err := uuid.Parse(d.ID); err != nil {
		t.Errorf("ID %q is not a UUID", d.ID)
	}
	if d.Revision == "" || d.Revision != e.Revision() {
		t.Errorf("Revision = %q, want %q", d.Revision, e.Revision())
	}
}
