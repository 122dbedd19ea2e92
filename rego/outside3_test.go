package rego_test

import (
	"context"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store/synth"
)

// outside3Canaries are the values planted in minimize/testdata/outside3
// (README.md there): the patient's, her relatives' and her contact's
// names, MRN, telephone numbers, e-mail, streets, town, full birth dates
// and birth time, the clinicians' names, claim, member, payment and lot
// numbers, and words of free text (a Communication, a
// conclusion, a device name).
var outside3Canaries = []string{
	"Corvina", "Maelstrom", "Ysolde", "Okonkwo", "Tamsin", "Alaric", "Oriel", "Bertram", "Ilse",
	"Peregrine", "Ashdown", "Wendeline", "Crabtree", "66330217", "555-310-4477", "555-201-7788",
	"corvina.maelstrom", "Finchwood", "Larkspur", "Harrowgate", "1942-05-19", "1939-08-02", "14:35:45",
	"CLM-O3-90210", "MBR-O3-55123", "PAY-O3-7788", "LOTSIM4411", "biopsy", "EVIS",
	"2024-06-11",
}

// TestOutside3Examples replays the h-outside3 probe's outside-shaped R4
// (minimize/testdata/outside3: an IPS document Bundle, a collection and a
// urn:uuid transaction Bundle, primitive extensions, contained resources,
// SampledData, FamilyMemberHistory, Patient.contact and link,
// Communication, Provenance with a signature, ...) under the default
// policy, as TestOutside2Examples does: every resource custos import
// reads of it (fhirin.Read, with its compartment and labels; Bundle
// entries included) is decided and minimized for the biller (HPAYMT) and
// the researcher (HRESCH), and no planted canary may come out. The types
// each reads are pinned, so that the test cannot pass by deciding
// nothing, and what each view must keep is checked. The biller reads
// tenant-level Organizations whole by design (docs/policy.md), and
// Encounter.serviceProvider's display with them: their town is allowed
// to the biller. The lifted PDF and PNG and the Binary are not FHIR JSON
// and are left out here (neither persona reads them: checked over custos
// serve by the probe, README.md).
func TestOutside3Examples(t *testing.T) {
	e := defaultEngine(t)
	items := importedItems(t, "../minimize/testdata/outside3/fhir")
	var in strings.Builder
	for _, it := range items {
		in.Write(it.Body)
	}
	for _, c := range outside3Canaries {
		if !strings.Contains(in.String(), c) {
			t.Errorf("positive control: %q is in no resource read", c)
		}
	}
	for _, v := range []struct {
		role, purpose string
		reads         []string // the types this persona reads of the fixtures
		allowed       []string // canaries the view may show
		kept          []string // what the view must keep
	}{
		// Since h-biller4 the biller reads the transaction Bundle's Claim
		// and ExplanationOfBenefit too.
		{"billing", "HPAYMT", []string{"claim", "encounter", "explanationofbenefit", "organization"}, []string{"Harrowgate", "2024-06-11"},
			[]string{`"code":"AMB"`, `"start":"2024-06-11T09:00:00-04:00"`, `"code":"45378"`, `"value":"***0210"`,
				`"payment":{"amount":{"currency":"USD","value":650},"identifier":{"value":"***7788"}}`}},
		{"researcher", "HRESCH", []string{"allergyintolerance", "condition", "encounter", "familymemberhistory", "medicationadministration",
			"medicationstatement", "observation", "organization", "patient", "procedure"}, nil,
			[]string{`"birthDate":"1942"`, `"postalCode":"053"`, `"code":"BRO"`, `"code":"363406005"`, `"bornDate":"1939"`,
				`"valueSampledData":{"dimensions":1`, `"code":"8867-4"`, `"code":"373270004"`, `"reference":"#c1"`}},
	} {
		t.Run(v.role, func(t *testing.T) {
			sub := policy.NewSubject(policy.Principal{Sub: "probe-" + v.role, Roles: []string{v.role}, ClientID: "outside3", Tenant: synth.DefaultTenant})
			replayViews(t, e, v.role, sub, v.purpose, items, outside3Canaries, v.allowed, v.reads, v.kept)
		})
	}
}

// readImported decides a read of it, a FHIR resource as fhirin.Read gives
// it (its compartment and labels), by the subject for the purpose under
// engine e, and returns the view the decision releases (minimize.Apply, as
// the server does), or false when it is denied.
func readImported(t *testing.T, e *policy.Engine, sub *policy.Subject, purpose string, it fhirin.Item) ([]byte, bool) {
	t.Helper()
	dec, err := e.Decide(context.Background(), policy.Input{Subject: sub, PurposeOfUse: purpose, Action: policy.ActionRead,
		Resource: &policy.Resource{Type: strings.ToLower(it.Type), Patient: it.Patient, Tenant: synth.DefaultTenant, Sensitivity: it.Sensitivity}})
	if err != nil {
		t.Fatal(err)
	}
	if !dec.Allow {
		return nil, false
	}
	out, err := minimize.Apply("application/fhir+json", it.Body, dec.Obligations, viewOptions())
	if err != nil {
		t.Fatalf("%s/%s: %v", it.Type, it.ID, err)
	}
	return out, true
}
