package fhirin_test

import (
	"slices"
	"testing"
)

// TestReadOutside5Examples reads the h-outside5 probe's converter and EHR
// vendor API shapes (minimize/testdata/outside5/fhir, README.md beside it:
// Microsoft FHIR-Converter's HL7 v2 and C-CDA output, Epic's and Oracle
// Health's R4 API responses, Google Cloud Healthcare and HAPI searchsets,
// a Bulk Data export with its error file) as custos import does: batch
// Bundles of PUTs with urn:uuid fullUrls, searchsets with links, include
// entries and an outcome, Binaries linked by relative and absolute urls,
// an HL7 v2 message and a C-CDA as inline attachments, NDJSON with meta.source.
// The export's error file, OperationOutcome.ndjson (a warning, no id), is
// read as the export's report, not as data: it refused the whole import
// ("missing or invalid id") until h-outside5.
func TestReadOutside5Examples(t *testing.T) {
	types := map[string]int{}
	patients := map[string]bool{}
	var mimes []string
	for _, it := range readProbe(t, "outside5") {
		types[it.Type]++
		patients[it.Patient] = true
		if it.MIMEType != "application/fhir+json" {
			mimes = append(mimes, it.MIMEType)
		}
	}
	want := map[string]int{"Patient": 6, "Observation": 5, "Encounter": 3, "DocumentReference": 4, "Binary": 3, "Attachment": 2,
		"Condition": 2, "Coverage": 2, "Organization": 1, "RelatedPerson": 1, "Account": 1, "Immunization": 1, "Provenance": 1,
		"MedicationRequest": 1, "ServiceRequest": 1, "Appointment": 1}
	for typ, n := range want {
		if types[typ] != n {
			t.Errorf("read %d %s, want %d (read %v)", types[typ], typ, n, types)
		}
	}
	if types["OperationOutcome"] != 0 {
		t.Errorf("read %d OperationOutcomes: the export's error file and the searchset's outcome are no data", types["OperationOutcome"])
	}
	for _, p := range []string{"6c1f2a4e-93b7-5d0e-a8f1-7e2b94c3d5a1", "0e9d8c7b-6a5f-5e4d-9c3b-2a1f0e9d8c7b", "eXq3MzR7bK9vLpT2wYnHfGA3",
		"12742399", "a84f1c3e-2b6d-4e9a-b7c5-0d3e8f1a2b4c", "bk-5f3e9a21"} {
		if !patients[p] {
			t.Errorf("no item in the compartment of Patient/%s (compartments read: %v)", p, patients)
		}
	}
	slices.Sort(mimes)
	if w := []string{"text/html", "text/html", "text/rtf", "text/xml", "x-application/hl7-v2+er7"}; !slices.Equal(mimes, w) {
		t.Errorf("attachments and Binaries of types %v, want %v", mimes, w)
	}
}
