package minimize

import (
	"bytes"
	"strings"
	"testing"
)

// patientJSON is a synthetic FHIR R4 Patient carrying every identifier the
// de-identification obligations must remove.
const patientJSON = `{
  "resourceType": "Patient",
  "id": "pat-0001",
  "meta": {"versionId": "3", "lastUpdated": "2026-10-02T14:31:07Z"},
  "text": {
    "status": "generated",
    "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">Jane Quinn Doe, born 1986-02-10, MRN-00123456, tel (617) 555-0142</div>"
  },
  "identifier": [
    {
      "use": "usual",
      "type": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v2-0203", "code": "MR"}]},
      "system": "urn:oid:2.16.840.1.113883.19.5",
      "value": "MRN-00123456"
    },
    {
      "use": "official",
      "type": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v2-0203", "code": "SS"}]},
      "system": "http://hl7.org/fhir/sid/us-ssn",
      "value": "123-45-6789"
    }
  ],
  "active": true,
  "name": [{"use": "official", "family": "Doe", "given": ["Jane", "Quinn"]}],
  "telecom": [
    {"system": "phone", "value": "(617) 555-0142", "use": "mobile"},
    {"system": "email", "value": "jane.doe@example.org", "use": "home"}
  ],
  "gender": "female",
  "birthDate": "1986-02-10",
  "address": [{
    "use": "home",
    "line": ["77 Massachusetts Ave", "Apt 4B"],
    "city": "Cambridge",
    "state": "MA",
    "postalCode": "02139-4307",
    "country": "US"
  }],
  "contact": [{
    "relationship": [{"text": "daughter"}],
    "name": {"family": "Doe", "given": ["Lena"]},
    "telecom": [{"system": "phone", "value": "+1 617 555 0175"}]
  }],
  "extension": [{
    "url": "http://example.org/fhir/StructureDefinition/intake-note",
    "valueString": "Prefers text to 617-555-0199; SSN 123-45-6789 on file since 03/14/2019."
  }]
}`

// deidObligations is a Safe Harbor style obligation set for a Patient, as a
// research policy would return it.
var deidObligations = []Obligation{
	{Op: OpRemove, Path: "/text"},
	{Op: OpRemove, Path: "/name"},
	{Op: OpRemove, Path: "/identifier"},
	{Op: OpRemove, Path: "/telecom"},
	{Op: OpRemove, Path: "/contact/*/name"},
	{Op: OpRemove, Path: "/contact/*/telecom"},
	{Op: OpRemove, Path: "/address/*/line"},
	{Op: OpRemove, Path: "/address/*/city"},
	{Op: OpGeneralize, Path: "/address/*/postalCode", Fn: GeneralizeZIP3},
	{Op: OpGeneralize, Path: "/birthDate", Fn: GeneralizeBirthYear90},
	{Op: OpScrub, Path: ""},
}

func TestPatientDeID(t *testing.T) {
	tests := []struct {
		name    string
		replace *strings.Replacer
		want    string // exact output
		gone    []string
	}{
		{
			name:    "40 years old",
			replace: strings.NewReplacer(),
			want: `{"active":true,"address":[{"country":"US","postalCode":"021","state":"MA","use":"home"}],` +
				`"birthDate":"1986","contact":[{"relationship":[{"text":"daughter"}]}],` +
				`"extension":[{"url":"http://example.org/fhir/StructureDefinition/intake-note",` +
				`"valueString":"Prefers text to [PHONE]; SSN [SSN] on file since [DATE]."}],` +
				`"gender":"female","id":"pat-0001","meta":{"_lastUpdated":` + dar + `,"versionId":"3"},"resourceType":"Patient"}`,
		},
		{
			name:    "92 years old in a restricted ZIP3",
			replace: strings.NewReplacer(`"1986-02-10"`, `"1934-05-01"`, `"02139-4307"`, `"03601"`),
			want: `{"_birthDate":` + dar + `,"active":true,"address":[{"country":"US","postalCode":"000","state":"MA","use":"home"}],` +
				`"contact":[{"relationship":[{"text":"daughter"}]}],` +
				`"extension":[{"url":"http://example.org/fhir/StructureDefinition/intake-note",` +
				`"valueString":"Prefers text to [PHONE]; SSN [SSN] on file since [DATE]."}],` +
				`"gender":"female","id":"pat-0001","meta":{"_lastUpdated":` + dar + `,"versionId":"3"},"resourceType":"Patient"}`,
			gone: []string{"1934", "036"},
		},
	}
	identifiers := []string{
		"Jane", "Quinn", "Doe", "Lena",
		"617", "555-0142", "0142", "555 0175", "0199",
		"jane.doe", "example.org\"", "@",
		"00123456", "MRN", "123-45-6789", "6789",
		"Massachusetts", "Apt 4B", "Cambridge", "02139", "4307",
		"1986-02-10", "02-10", "03/14/2019", "2026-10-02", "14:31",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.replace.Replace(patientJSON)
			out, err := Apply("application/fhir+json", []byte(in), deidObligations, Options{Now: refNow})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range append(identifiers, tt.gone...) {
				if bytes.Contains(out, []byte(id)) {
					t.Errorf("de-identified output contains %q:\n%s", id, out)
				}
			}
			if want := redacted(t, tt.want); string(out) != want {
				t.Errorf("got  %s\nwant %s", out, want)
			}
		})
	}
}

func BenchmarkApplyPatientDeID(b *testing.B) {
	payload := []byte(patientJSON)
	opts := Options{Now: refNow}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Apply("application/fhir+json", payload, deidObligations, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScrubClinicalNote(b *testing.B) {
	b.SetBytes(int64(len(clinicalNote)))
	b.ReportAllocs()
	for b.Loop() {
		_ = ScrubString(clinicalNote)
	}
}
