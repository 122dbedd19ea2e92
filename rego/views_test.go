package rego_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/internal/fhirr4"
	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store/synth"
)

// viewSources are the repository's FHIR fixtures, each read as custos
// import reads it (fhirin.Read: Bundle entries split out, compartment and
// labels); a file the importer refuses (an outside example whose subject
// is a urn:uuid of no Bundle) is read as it is, in the compartment of a
// patient "p".
var viewSources = []string{
	"../testdata/fhir-corpus",
	"../minimize/testdata/outside",
	"../minimize/testdata/outside2/fhir",
	"../minimize/testdata/outside3/fhir",
	"../fhirin/testdata",
	"../fhirin/testdata/bulk",
	"../fhirin/testdata/outside/hl7-r4-binary",
	"../fhirin/testdata/outside/hl7-r4-consent",
	"../fhirin/testdata/outside/smart-bulk",
}

// viewResource is one FHIR resource custos may serve: its type, patient
// and labels as the catalog holds them, and its body.
type viewResource struct {
	where, typ, patient string
	sensitivity         []string
	consent             []string
	body                []byte
}

// viewResources returns every FHIR resource of viewSources and of the
// synthetic data set (custos seed, the demo's data) that is valid R4 by
// fhirr4.Check, the importer's structure check.
func viewResources(t *testing.T) []viewResource {
	t.Helper()
	var out []viewResource
	link := func(typ, id, patient string) string { return "attachment://demo/attachments/placeholder" }
	refused := 0
	for _, src := range viewSources {
		paths := []string{src}
		if src == "../fhirin/testdata" || strings.Contains(src, "minimize/testdata") || strings.HasSuffix(src, "fhir-corpus") {
			// One file at a time: the importer refuses an input as a whole.
			paths, _ = filepath.Glob(filepath.Join(src, "*.json"))
		}
		for _, p := range paths {
			var items []fhirin.Item
			err := fhirin.Read(context.Background(), p, fhirin.Options{Link: link}, func(it fhirin.Item) error {
				items = append(items, it)
				return nil
			})
			if err != nil {
				// Read as it is, as package minimize's tests read these
				// outside examples (a urn:uuid subject of no Bundle).
				refused++
				if b, err := os.ReadFile(p); err == nil {
					var r struct{ ResourceType string }
					if json.Unmarshal(b, &r) == nil && r.ResourceType != "" && r.ResourceType != "Bundle" {
						out = append(out, viewResource{where: p, typ: strings.ToLower(r.ResourceType), patient: "p", body: b})
					}
				}
				continue
			}
			for _, it := range items {
				if it.MIMEType != "application/fhir+json" || it.Deleted {
					continue
				}
				out = append(out, viewResource{where: p + ": " + it.Type + "/" + it.ID, typ: strings.ToLower(it.Type),
					patient: it.Patient, sensitivity: it.Sensitivity, consent: it.Consent, body: it.Body})
			}
		}
	}
	d := newDataset(t)
	for _, l := range d.lines {
		if l.MimeType != "application/fhir+json" {
			continue
		}
		out = append(out, viewResource{where: "synth: " + l.URI, typ: l.Labels.Type, patient: l.Labels.Patient,
			sensitivity: l.Labels.Sensitivity, consent: l.Labels.Consent, body: d.payload(t, l)})
	}
	valid := out[:0]
	for _, r := range out {
		if len(fhirr4.Check(decodeUseNumber(t, r.body))) == 0 {
			valid = append(valid, r)
		}
	}
	t.Logf("%d resources (%d invalid R4 inputs left out, %d files refused by the importer)", len(valid), len(out)-len(valid), refused)
	return valid
}

func decodeUseNumber(t *testing.T, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// viewPersonas are the default policy's personas that read FHIR: each
// reads what its decision allows, minimized by its obligations.
var viewPersonas = []struct {
	name, purpose string
	principal     policy.Principal
}{
	{"clinician", "TREAT", policy.Principal{Sub: "dr.alice", Roles: []string{"clinician", "sensitive:hiv", "sensitive:sud", "sensitive:psy",
		"sensitive:sdv", "sensitive:std", "sensitive:sex", "sensitive:very-restricted"}, ClientID: "ward-assistant", Tenant: synth.DefaultTenant}},
	{"biller", "HPAYMT", policy.Principal{Sub: "bob.billing", Roles: []string{"billing"}, ClientID: "claims-assistant", Tenant: synth.DefaultTenant}},
	{"researcher", "HRESCH", safeHarborResearcher},
}

// TestEveryViewIsValidR4 reads every valid R4 resource the repository
// holds (viewResources) as every persona of the default policy, decided
// and minimized as the server does, and requires each view released to
// pass fhirr4.Check: no empty object, array or string (R4 ele-1 and
// json.html), every required element there, and no local reference
// ("#id") to a contained resource the view does not hold (R4 ref-1). Until h-views the biller's
// views held "payor":[{}], "individual":{}, "origin":{}, "reasonCode":[{}]
// where the obligations had emptied them.
func TestEveryViewIsValidR4(t *testing.T) {
	e := defaultEngine(t)
	resources := viewResources(t)
	if len(resources) < 300 {
		t.Fatalf("only %d resources", len(resources))
	}
	for _, p := range viewPersonas {
		t.Run(p.name, func(t *testing.T) {
			released, minimized, invalid := 0, 0, 0
			for _, r := range resources {
				pr := p.principal
				pr.Patients = []string{r.patient}
				dec, err := e.Decide(context.Background(), policy.Input{Subject: policy.NewSubject(pr), PurposeOfUse: p.purpose, Action: policy.ActionRead,
					Resource: &policy.Resource{Type: r.typ, Patient: r.patient, Tenant: synth.DefaultTenant, Sensitivity: r.sensitivity, Consent: r.consent}})
				if err != nil {
					t.Fatalf("%s: %v", r.where, err)
				}
				if !dec.Allow {
					continue
				}
				out, err := minimize.Apply("application/fhir+json", r.body, dec.Obligations, viewOptions())
				if err != nil {
					if p.name == "researcher" {
						continue // withheld whole (ErrWithheld): nothing released
					}
					t.Fatalf("%s: %v", r.where, err)
				}
				released++
				if len(dec.Obligations) > 0 {
					minimized++
				}
				if !validView(t, r.where, p.name, out) {
					invalid++
				}
			}
			t.Logf("%d views released (%d minimized), %d invalid", released, minimized, invalid)
			if minimized == 0 && p.name != "clinician" {
				t.Fatalf("the %s read nothing minimized", p.name)
			}
		})
	}
}

// validView reports whether out, the view of where that who read, is
// valid R4 by fhirr4.Check and names no contained resource it does not
// hold (R4 ref-1), and fails t otherwise.
func validView(t *testing.T, where, who string, out []byte) bool {
	t.Helper()
	m := decodeUseNumber(t, out)
	if ps := fhirr4.Check(m); len(ps) > 0 {
		t.Errorf("%s: the %s's view is no valid R4: %v\n%s", where, who, ps, out)
		return false
	}
	if d := danglingLocalReferences(m); len(d) > 0 {
		t.Errorf("%s: the %s's view names contained resources it does not hold (ref-1): %v\n%s", where, who, d, out)
		return false
	}
	return true
}

// danglingLocalReferences returns the local references ("#id") of resource
// m, its contained resources' included, that name no contained resource of
// m ("#" alone names m itself).
func danglingLocalReferences(m map[string]any) []string {
	ids := map[string]bool{}
	cs, _ := m["contained"].([]any)
	for _, c := range cs {
		if cm, ok := c.(map[string]any); ok {
			if id, ok := cm["id"].(string); ok {
				ids[id] = true
			}
		}
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["reference"].(string); ok && len(r) > 1 && r[0] == '#' && !ids[r[1:]] {
				out = append(out, r)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(m)
	return out
}
