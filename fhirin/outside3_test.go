package fhirin_test

import "testing"

// TestReadOutside3Examples reads the h-outside3 probe's valid outside R4
// (minimize/testdata/outside3/fhir, README.md beside it: an IPS document
// Bundle, a collection and a urn:uuid transaction Bundle, primitive
// extensions with nulls in _given, contained resources with # references,
// SampledData, Questionnaire items nested three deep, a Binary, a
// DiagnosticReport's presentedForm PDF and a Media's PNG, ...) as custos
// import does: the R4 structure check (internal/fhirr4 Check) and the
// rest of the read must take all of them. Every one is valid for
// Medplum's R4 validator (HL7's schema refuses only the null in _given,
// which R4 json.html allows).
func TestReadOutside3Examples(t *testing.T) {
	types := map[string]int{}
	mimes := map[string]int{}
	items := readProbe(t, "outside3")
	for _, it := range items {
		types[it.Type]++
		mimes[it.MIMEType]++
	}
	n := len(items)
	if n != 32 || types["Patient"] != 2 || types["FamilyMemberHistory"] != 2 || types["Composition"] != 1 || types["ExplanationOfBenefit"] != 1 {
		t.Errorf("read %d items %v, want 32: 2 Patients, 2 FamilyMemberHistories, a Composition, an ExplanationOfBenefit", n, types)
	}
	if mimes["application/pdf"] != 1 || mimes["image/png"] != 1 || mimes["text/plain"] != 1 {
		t.Errorf("read %v, want one PDF (presentedForm), one PNG (Media) and one text/plain (Binary)", mimes)
	}
}
