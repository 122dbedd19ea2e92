package fhirin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A transaction Bundle's conditional update (PUT Patient?identifier=...)
// and conditional create (POST with ifNoneExist, as Synthea writes its
// Practitioners) resolve against the Bundle and Options.Match (R4
// http.html#cond-update): one match in the catalog, the entry is that
// resource (its id, and references to its urn:uuid fullUrl name it); none,
// it creates its own; several, or another entry of the Bundle, refused;
// a query Read does not resolve, refused naming the entry and the
// parameter. Before, the entry was imported under its urn:uuid, and an
// exporter minting new uuids per export duplicated the patient on every
// re-import.
func TestReadConditionalUpdate(t *testing.T) {
	const (
		mrn = "http://hospital.example.org/identifiers/mrn"
		npi = "http://hl7.org/fhir/sid/us-npi"
		pu  = "urn:uuid:9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f"
		pru = "urn:uuid:4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7a8b"
	)
	patient := func(request string) string {
		return `{"fullUrl":"` + pu + `","resource":{"resourceType":"Patient","identifier":[{"system":"` + mrn + `","value":"12345"}],"name":[{"family":"Marsh","given":["Evelyn"]}]},"request":` + request + `}`
	}
	practitioner := `{"fullUrl":"` + pru + `","resource":{"resourceType":"Practitioner","id":"4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7a8b","identifier":[{"system":"` + npi + `","value":"9999994392"}]},"request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=` + npi + `|9999994392"}}`
	encounter := `{"fullUrl":"urn:uuid:0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","resource":{"resourceType":"Encounter","id":"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"AMB"},"subject":{"reference":"` + pu + `"},"participant":[{"individual":{"reference":"` + pru + `"}}]},"request":{"method":"POST","url":"Encounter"}}`
	put := func(query string) string { return `{"method":"PUT","url":"Patient?` + query + `"}` }
	bundle := func(entries ...string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[` + strings.Join(entries, ",\n") + `]}`
	}
	catalog := map[string][]string{
		"Patient|" + mrn + "|12345":           {"p-old"},
		"Patient|*|12345":                     {"p-old"},
		"Patient|_id|p7":                      {"p7"},
		"Patient|" + mrn + "|twice":           {"p-a", "p-b"},
		"Practitioner|" + npi + "|9999994392": {"pr-old"},
		"Practitioner|" + npi + "|twice":      {"pr-a", "pr-b"},
	}
	for _, tc := range []struct {
		name                  string
		input                 string
		match                 bool   // Options.Match set
		patient, practitioner string // the ids imported; "" = refused
		errPath               string
		errIs                 error
	}{
		{"one match in the catalog", bundle(patient(put("identifier="+mrn+"|12345")), practitioner, encounter), true, "p-old", "pr-old", "", nil},
		{"one match, any system", bundle(patient(put("identifier=12345")), practitioner, encounter), true, "p-old", "pr-old", "", nil},
		{"one match by _id", bundle(patient(put("_id=p7")), practitioner, encounter), true, "p7", "pr-old", "", nil},
		{"no match", bundle(patient(put("identifier="+mrn+"|67890")), practitioner, encounter), true, "9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f", "pr-old", "", nil},
		{"no catalog", bundle(patient(put("identifier="+mrn+"|12345")), practitioner, encounter), false, "9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f", "4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7a8b", "", nil},
		{"two matches (412)", bundle(patient(put("identifier="+mrn+"|twice")), encounter, practitioner), true, "", "", "Bundle.entry[0].request.url", ErrValue},
		{"another entry of the Bundle", bundle(patient(put("identifier="+mrn+"|12345")), practitioner, encounter,
			`{"fullUrl":"urn:uuid:1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","resource":{"resourceType":"Patient","identifier":[{"system":"`+mrn+`","value":"12345"}]},"request":{"method":"POST","url":"Patient"}}`), true, "", "", "Bundle.entry[0].request.url", ErrValue},
		{"a parameter not resolved", bundle(patient(put("name=Evelyn")), practitioner, encounter), true, "", "", "Bundle.entry[0].request.url", ErrUnsupported},
		{"two parameters", bundle(patient(put("identifier="+mrn+"|12345&birthdate=1970-01-01")), practitioner, encounter), true, "", "", "Bundle.entry[0].request.url", ErrUnsupported},
		{"two values", bundle(patient(put("identifier="+mrn+"|12345,"+mrn+"|67890")), practitioner, encounter), true, "", "", "Bundle.entry[0].request.url", ErrUnsupported},
		{"one match, another than its RESTful fullUrl names", bundle(strings.Replace(patient(put("identifier="+mrn+"|12345")), pu, "https://ehr.example/fhir/Patient/9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f", 1), practitioner), true, "", "", "Bundle.entry[0].fullUrl", ErrValue},
		{"one match, the body's id another (400)", bundle(strings.Replace(patient(put("identifier="+mrn+"|12345")), `"Patient",`, `"Patient","id":"p-other",`, 1), practitioner, encounter), true, "", "", "Bundle.entry[0].request.url", ErrValue},
		{"one match, the body's id the match's", bundle(strings.Replace(patient(put("identifier="+mrn+"|12345")), `"Patient",`, `"Patient","id":"p-old",`, 1), practitioner, encounter), true, "p-old", "pr-old", "", nil},
		{"no match, the body's id", bundle(strings.Replace(patient(put("identifier="+mrn+"|67890")), `"Patient",`, `"Patient","id":"9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f",`, 1), practitioner, encounter), true, "9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f", "pr-old", "", nil},
		{"a conditional create posted to its fullUrl's absolute base", strings.Replace(bundle(patient(put("identifier="+mrn+"|12345")), strings.Replace(strings.Replace(practitioner, `"url":"Practitioner"`, `"url":"https://ehr.example/fhir/Practitioner"`, 1), pru, "https://ehr.example/fhir/Practitioner/pr-old", 1), encounter), `"reference":"`+pru, `"reference":"Practitioner/pr-old`, 1), true, "p-old", "pr-old", "", nil},
		{"a conditional create, two matches (412)", bundle(patient(put("identifier="+mrn+"|12345")), strings.Replace(practitioner, "|9999994392\"}}", "|twice\"}}", 1), encounter), true, "", "", "Bundle.entry[1].request.ifNoneExist", ErrValue},
		{"an ifNoneExist not resolved", bundle(patient(put("identifier="+mrn+"|12345")), strings.Replace(practitioner, `"ifNoneExist":"identifier=`, `"ifNoneExist":"family=Evelyn&identifier=`, 1), encounter), true, "", "", "Bundle.entry[1].request.ifNoneExist", ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "b.json")
			if err := os.WriteFile(path, []byte(tc.input), 0o644); err != nil {
				t.Fatal(err)
			}
			opts := Options{Link: testLink}
			asked := 0
			if tc.match {
				opts.Match = func(typ string, q Search) ([]Found, error) {
					asked++
					k := typ + "|" + q.System + "|" + q.Value
					switch {
					case q.ID != "":
						k = typ + "|_id|" + q.ID
					case q.AnySystem:
						k = typ + "|*|" + q.Value
					}
					var found []Found
					for _, id := range catalog[k] {
						found = append(found, Found{ID: id, Patient: map[string]string{"Patient": id}[typ]})
					}
					return found, nil
				}
			}
			var items []Item
			err := Read(context.Background(), path, opts, func(it Item) error {
				items = append(items, it)
				return nil
			})
			if tc.errPath != "" {
				var fe *Error
				if !errors.As(err, &fe) || !errors.Is(err, tc.errIs) || fe.Path != tc.errPath {
					t.Fatalf("err = %v, want %v at %s", err, tc.errIs, tc.errPath)
				}
				if strings.HasSuffix(tc.errPath, ".fullUrl") && !strings.Contains(fe.Detail, "conditional") {
					t.Errorf("the error does not say the conditional match is at fault: %v", err)
				}
				if len(items) != 0 {
					t.Errorf("%d items yielded: nothing may be written", len(items))
				}
				for _, s := range []string{"Evelyn", "12345", "67890", "twice", "hospital.example.org", "1970", "p-other", "p-old"} {
					if strings.Contains(err.Error(), s) {
						t.Errorf("the error quotes the input (%s): %v", s, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := find(t, items, "Patient", tc.patient)
			if !bytes.Contains(p.Body, []byte(`"id":"`+tc.patient+`"`)) {
				t.Errorf("the Patient's body %s does not have id %s", p.Body, tc.patient)
			}
			if pr := find(t, items, "Practitioner", tc.practitioner); pr.Kept != (tc.practitioner == "pr-old") || pr.Kept && (pr.Body != nil || pr.Sensitivity != nil) {
				t.Errorf("the Practitioner's Kept = %v, want it only for the catalog's match (R4: a conditional create leaves it as it is), without content", pr.Kept)
			}
			e := find(t, items, "Encounter", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
			if e.Patient != tc.patient || !bytes.Contains(e.Body, []byte(`"Patient/`+tc.patient+`"`)) || !bytes.Contains(e.Body, []byte(`"Practitioner/`+tc.practitioner+`"`)) {
				t.Errorf("the Encounter (patient %q) does not name the resources imported: %s", e.Patient, e.Body)
			}
			if len(items) != 3 {
				t.Errorf("%d items, want 3 (no duplicate)", len(items))
			}
			if tc.match && asked != 2 {
				t.Errorf("Match asked %d times, want once per search (2)", asked)
			}
		})
	}
}
