package fhirin

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A Location that is a patient's home (R4 v3-RoleCode PTRES or DADDR, under
// every spelling of its system or none; physicalType ho; an address or a
// telecom of use home), alone or contained in a tenant-level resource, is
// labelled residence, so that the policy does not serve it as reference
// data; a ward, a clinic and a site are not. Until h-biller3 every one of
// them was unlabelled tenant-level reference data, the home address of
// testdata/fhir-corpus/location-home.json included.
func TestReadResidenceLabel(t *testing.T) {
	dir := t.TempDir()
	home := []string{"residence"}
	cases := []struct {
		typ, json string
		want      []string
	}{
		{"Location", `{"resourceType":"Location","id":"ptres","name":"Marsh residence","type":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode","code":"PTRES"}]}],"address":{"line":["14 Orchard Lane"],"city":"Chestertown","state":"MD"}}`, home},
		{"Location", `{"resourceType":"Location","id":"ptres-oid","type":[{"text":"home"},{"coding":[{"system":"urn:oid:2.16.840.1.113883.5.111","code":"PTRES"}]}]}`, home},
		{"Location", `{"resourceType":"Location","id":"ptres-pre-r4","type":[{"coding":[{"system":"http://hl7.org/fhir/v3/RoleCode","code":"PTRES"}]}]}`, home},
		{"Location", `{"resourceType":"Location","id":"ptres-nosystem","type":[{"coding":[{"code":"PTRES"}]}]}`, home},
		{"Location", `{"resourceType":"Location","id":"daddr","type":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode","code":"DADDR"}]}]}`, home},
		{"Location", `{"resourceType":"Location","id":"house","mode":"instance","physicalType":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/location-physical-type","code":"ho"}]}}`, home},
		{"Location", `{"resourceType":"Location","id":"home-address","name":"J. Doe","address":{"use":"home","line":["1 Elm St"]}}`, home},
		{"Location", `{"resourceType":"Location","id":"home-phone","telecom":[{"system":"phone","value":"555-0100","use":"work"},{"system":"phone","value":"555-0101","use":"home"}]}`, home},
		{"Location", `{"resourceType":"Location","id":"labelled","meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV"}]},"type":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode","code":"PTRES"}]}]}`, []string{"hiv", "residence"}},
		{"Location", `{"resourceType":"Location","id":"ward","name":"Ward 3","type":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode","code":"HU"}]}],"physicalType":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/location-physical-type","code":"wa"}]},"address":{"use":"work","line":["1 Hospital Rd"]}}`, nil},
		{"Location", `{"resourceType":"Location","id":"other-system","type":[{"coding":[{"system":"http://example.org/codes","code":"PTRES"}]}],"physicalType":{"coding":[{"system":"http://example.org/codes","code":"ho"}]}}`, nil},
		{"HealthcareService", `{"resourceType":"HealthcareService","id":"visits","contained":[{"resourceType":"Location","id":"h","physicalType":{"coding":[{"code":"ho"}]}}],"location":[{"reference":"#h"}]}`, home},
		{"Organization", `{"resourceType":"Organization","id":"clinic","name":"Clinic","address":[{"use":"work","line":["2 Main St"]}]}`, nil},
	}
	files := map[string][]string{}
	for _, c := range cases {
		files[c.typ] = append(files[c.typ], c.json)
	}
	for typ, lines := range files {
		if err := os.WriteFile(filepath.Join(dir, typ+".ndjson"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	items := mustReadAll(t, dir)
	for _, c := range cases {
		var id struct{ ID string }
		if err := json.Unmarshal([]byte(c.json), &id); err != nil {
			t.Fatal(err)
		}
		it := find(t, items, c.typ, id.ID)
		if it.Patient != "" {
			t.Errorf("%s %s: patient %q, want tenant-level", c.typ, id.ID, it.Patient)
		}
		if !slices.Equal(it.Sensitivity, c.want) {
			t.Errorf("%s %s: labels %v, want %v", c.typ, id.ID, it.Sensitivity, c.want)
		}
	}
}

// An element the residence rule reads, of the wrong JSON type, fails the
// import (ErrJSON) at its FHIR path: a home must not pass as reference data
// by being overlooked.
func TestReadResidenceMalformed(t *testing.T) {
	for _, c := range []struct{ json, path string }{
		{`{"resourceType":"Location","id":"a","type":{"coding":[{"code":"PTRES"}]}}`, "Location.type"},
		{`{"resourceType":"Location","id":"a","type":["PTRES"]}`, "Location.type[0]"},
		{`{"resourceType":"Location","id":"a","physicalType":{"coding":{"code":"ho"}}}`, "Location.physicalType.coding"},
		// The R4 structure check (fhirr4.Check) runs first and names the element itself.
		{`{"resourceType":"Location","id":"a","address":{"use":["home"]}}`, "Location.address.use"},
		{`{"resourceType":"Location","id":"a","telecom":["555-0101"]}`, "Location.telecom[0]"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "Location.ndjson"), []byte(c.json+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := readAll(t, dir)
		var fe *Error
		if !errors.Is(err, ErrJSON) || !errors.As(err, &fe) || fe.Path != c.path {
			t.Errorf("%s: %v, want ErrJSON at %s", c.json, err, c.path)
		}
	}
}

// The role codes that mean a patient's home are R4 v3-RoleCode codes of
// its service delivery location roles (the binding of Location.type).
func TestResidenceCodesAreHL7(t *testing.T) {
	parents := v3Parents(t)[roleCodeSystems[0]]
	if len(parents) == 0 {
		t.Fatal("no v3-RoleCode among the definitions' code systems")
	}
	for _, c := range residenceRoleCodes {
		p, ok := parents[c]
		for p != "" && p != "_ServiceDeliveryLocationRoleType" {
			p = parents[p]
		}
		if !ok || p == "" {
			t.Errorf("%s is not an R4 v3-RoleCode service delivery location role", c)
		}
	}
}
