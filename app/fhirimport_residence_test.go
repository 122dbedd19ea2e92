package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store"
)

// A Location that is a patient's home (testdata/fhir-corpus's
// location-home.json: v3-RoleCode PTRES, a street address) is imported
// labelled residence, and the default policy serves it to no biller or
// clinician as reference data, where a ward beside it stays reference
// data. A catalog an older custos wrote holds the home unlabelled; an
// import of the same resource (not full, its bytes unchanged) relabels it
// (docs/import.md, "A patient's home").
func TestImportedPatientHomeIsNotReferenceData(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "fhir-corpus", "location-home.json"))
	if err != nil {
		t.Fatal(err)
	}
	var home bytes.Buffer
	if err := json.Compact(&home, raw); err != nil {
		t.Fatal(err)
	}
	const ward = `{"resourceType":"Location","id":"ward-3","name":"Ward 3","physicalType":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/location-physical-type","code":"wa"}]}}`
	f := newLinkFixture(t)

	// The catalog as an older custos wrote it: the home, unlabelled.
	old := func(yield func(store.Entry, error) bool) {
		yield(store.Entry{Type: "Location", ID: "loc-home-4471", Body: home.Bytes()}, nil)
	}
	_, err = store.ImportEntriesStaged(context.Background(), f.cat, old, store.EntryOptions{Namer: f.namer}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := f.get("Location", "loc-home-4471", ""); len(r.Labels.Sensitivity) != 0 {
		t.Fatalf("old catalog: labels %v", r.Labels.Sensitivity)
	}

	f.mustImp(false, map[string][]string{"Location": {home.String(), ward}})
	f.want("Location", "loc-home-4471", "", "residence")
	f.want("Location", "ward-3", "")

	e, err := policy.Default(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		role, purpose string
	}{{"billing", "HPAYMT"}, {"clinician", "TREAT"}, {"clinician", "ETREAT"}, {"researcher", "HRESCH"}} {
		who := policy.NewSubject(policy.Principal{Sub: "u", Roles: []string{c.role}, Tenant: f.tenant})
		for id, allow := range map[string]bool{"loc-home-4471": false, "ward-3": true} {
			r, _ := f.get("Location", id, "")
			d, err := e.Decide(context.Background(), policy.Input{Subject: who, PurposeOfUse: c.purpose, Action: policy.ActionRead,
				Resource: &policy.Resource{Type: "location", Tenant: r.Labels.Tenant, Patient: r.Labels.Patient, Sensitivity: r.Labels.Sensitivity}})
			if err != nil || d.Allow != allow {
				t.Errorf("%s %s reads %s: %+v %v, want allow %v", c.role, c.purpose, id, d, err, allow)
			}
		}
	}
}
