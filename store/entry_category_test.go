package store

import (
	"encoding/json"
	"testing"
)

// TestCategoryCode: a title names a category only by a code of a public
// terminology, never a local system's code (an MRN fits the code syntax)
// nor display text.
func TestCategoryCode(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs","display":"Jane"}]}]`, "vital-signs"},
		{`{"coding":[{"system":"http://loinc.org","code":"LP29684-5"}]}`, "LP29684-5"},
		{`[{"coding":[{"system":"http://acme.example/mrn","code":"MRN-77441123"}]}]`, ""},
		{`[{"coding":[{"system":"http://acme.example/local","code":"x"},{"system":"http://snomed.info/sct","code":"439401001"}]}]`, "439401001"},
		{`[{"coding":[{"system":"http://hl7.org/fhir/sid/us-ssn","code":"123456789"}]}]`, ""},
		{`[{"coding":[{"code":"MRN-1"}]}]`, ""},
		{`[{"text":"Jane Doe"}]`, ""},
		{`["food"]`, "food"},
		{`["MRN-77441123"]`, ""},
		{`[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"Jane Doe"}]}]`, ""},
	} {
		if got := categoryCode(json.RawMessage(tc.raw)); got != tc.want {
			t.Errorf("categoryCode(%s) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}
