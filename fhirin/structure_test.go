package fhirin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An outside probe (h-outside2) imported structurally invalid R4 and every
// resource was accepted. Each is refused now, by fhirr4.Check, with the
// element's path and never its value; Read fails, so the importer commits
// nothing (docs/import.md, "Errors"). A Bundle
// entry's resource and a contained resource are checked as resources.
func TestReadRefusesInvalidR4(t *testing.T) {
	valid := `{"resourceType":"Patient","id":"p","gender":"female"}`
	for _, tc := range []struct {
		name, file, body string
		err              error
		path             string
	}{
		{"a decimal as a string", "Observation.ndjson", `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p"},"valueQuantity":{"value":"SECRET 5"}}`, ErrJSON, "Observation.valueQuantity.value"},
		{"a list as an object", "Device.ndjson", `{"resourceType":"Device","id":"d","patient":{"reference":"Patient/p"},"udiCarrier":{"deviceIdentifier":"SECRET"}}`, ErrJSON, "Device.udiCarrier"},
		{"an unknown element", "Observation.ndjson", `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p"},"fooBar":"SECRET"}`, ErrStructure, "Observation.fooBar"},
		{"an unknown element in a contained resource", "Observation.ndjson", `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p"},"contained":[{"resourceType":"Practitioner","id":"pr","fooBar":"SECRET"}]}`, ErrStructure, "Observation.contained[0].fooBar"},
		{"30 February", "Patient.ndjson", `{"resourceType":"Patient","id":"p","birthDate":"1931-02-30"}`, ErrValue, "Patient.birthDate"},
		{"a day-first dateTime", "Immunization.ndjson", `{"resourceType":"Immunization","id":"i","status":"completed","vaccineCode":{"text":"x"},"patient":{"reference":"Patient/p"},"occurrenceDateTime":"14/03/2024"}`, ErrValue, "Immunization.occurrenceDateTime"},
		{"an Immunization without vaccineCode", "Immunization.ndjson", `{"resourceType":"Immunization","id":"i","status":"completed","patient":{"reference":"Patient/p"},"occurrenceDateTime":"2024-03-14"}`, ErrStructure, "Immunization.vaccineCode"},
		{"an unknown element in a Bundle entry", "b.json", `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:5c6d7e8f-0000-4000-8000-000000000001","resource":` + valid + `},{"resource":{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p"},"fooBar":"SECRET"}}]}`, ErrStructure, "Observation.fooBar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			body := tc.body
			if strings.HasSuffix(tc.file, ".ndjson") && tc.file != "Patient.ndjson" {
				if err := os.WriteFile(filepath.Join(dir, "Patient.ndjson"), []byte(valid+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				body += "\n"
			}
			if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := readAll(t, dir)
			var fe *Error
			if !errors.As(err, &fe) || !errors.Is(err, tc.err) || fe.Path != tc.path {
				t.Fatalf("err = %v, want %v at %s", err, tc.err, tc.path)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the error quotes content: %v", err)
			}
		})
	}
}
