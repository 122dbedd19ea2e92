package minimize_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// codingsOf returns "system|code" of every coding of the output's code
// and its components' values, in order.
func codingsOf(t *testing.T, out []byte) []string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	var got []string
	var walk func(x any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			if s, ok := x["system"].(string); ok {
				got = append(got, s+"|"+x["code"].(string))
			}
			for _, k := range []string{"code", "coding", "component", "valueCodeableConcept"} {
				walk(x[k])
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(m)
	return got
}

// researchObservation is an Observation about Patient/p whose value is a
// CodeableConcept of one coding of system sys with code code.
func researchObservation(sys, code string) []byte {
	b, _ := json.Marshal(map[string]any{"resourceType": "Observation", "status": "final",
		"subject":              map[string]any{"reference": "Patient/p"},
		"code":                 map[string]any{"coding": []any{map[string]any{"system": "http://loinc.org", "code": "8480-6"}}},
		"valueCodeableConcept": map[string]any{"coding": []any{map[string]any{"system": sys, "code": code, "display": "Evelyn Marsh"}}}})
	return b
}

// TestDeidentifyKeepsResearchTerminologies: a coding of the public
// terminologies oncology, genomics and pharmacy research codes with (NCI
// Thesaurus, HGNC, the Sequence Ontology, ATC, ICD-O-3, CDC Race &
// Ethnicity, the genomics reporting guide's TBD codes) is kept, system and
// code, its display dropped, when its code has the terminology's form:
// mCODE's and AU Base's examples lost all of them until h-terms
// (TestIGExamplesViews: a Binet stage's NCIt code, the genes of a
// genomic report).
func TestDeidentifyKeepsResearchTerminologies(t *testing.T) {
	for _, tc := range []struct{ sys, code, want string }{
		{"http://ncicb.nci.nih.gov/xml/owl/EVS/Thesaurus.owl", "C141207", ""},
		{"http://ncicb.nci.nih.gov/xml/owl/EVS/Thesaurus.owl", "C2991", ""},
		{"http://www.genenames.org", "HGNC:1100", ""},
		{"http://www.genenames.org", "HGNC:11998", ""},
		{"http://www.sequenceontology.org", "SO:0001583", ""},
		{"http://www.sequenceontology.org/", "SO:1000044", "http://www.sequenceontology.org"}, // as mCODE writes it
		{"http://www.whocc.no/atc", "L01XC03", ""},
		{"http://www.whocc.no/atc", "A02BD", ""},
		{"http://www.whocc.no/atc", "L01X", ""},
		{"http://www.whocc.no/atc", "J01", ""},
		{"http://www.whocc.no/atc", "L", ""},
		{"http://terminology.hl7.org/CodeSystem/icd-o-3", "8140/3", ""},
		{"http://terminology.hl7.org/CodeSystem/icd-o-3", "9989/1", ""},
		{"http://terminology.hl7.org/CodeSystem/icd-o-3", "C50.9", ""},
		{"http://terminology.hl7.org/CodeSystem/icd-o-3", "C509", ""},
		{"urn:oid:2.16.840.1.113883.6.238", "2106-3", ""},
		{"urn:oid:2.16.840.1.113883.6.238", "2135-2", ""},
		{"urn:oid:2.16.840.1.113883.6.238", "1002-5", ""},
		{"http://hl7.org/fhir/uv/genomics-reporting/CodeSystem/tbd-codes-cs", "functional-effect", ""},
		{"http://hl7.org/fhir/uv/genomics-reporting/CodeSystem/tbd-codes-cs", "therapeutic-implication", ""},
	} {
		want := tc.want
		if want == "" {
			want = tc.sys
		}
		out := deidentify(t, researchObservation(tc.sys, tc.code), testAlias)
		got := codingsOf(t, out)
		if len(got) != 2 || got[1] != want+"|"+tc.code {
			t.Errorf("%s %s: codings %q, want the code kept under %s\n%s", tc.sys, tc.code, got, want, out)
		}
		if strings.Contains(string(out), "Marsh") {
			t.Errorf("%s %s: the display is kept: %s", tc.sys, tc.code, out)
		}
	}
}

// TestDeidentifyResearchTerminologiesRefuseIdentifiers: a coding of those
// terminologies whose code is not of the terminology's form — a name, a
// date, an MRN, a telephone number, a ZIP code, a code with an SSN
// appended — is dropped, and so is every coding of the terminologies
// custos does not keep (NCBI Gene and ClinVar: bare numbers; HGVS:
// free-form expressions with positions of any size; EDQM: eight digits,
// an MRN's form).
func TestDeidentifyResearchTerminologiesRefuseIdentifiers(t *testing.T) {
	refused := map[string][]string{
		"http://ncicb.nci.nih.gov/xml/owl/EVS/Thesaurus.owl": {"EvelynMarsh", "C77441123", "C219099999", "C1412070219099999",
			"77441123", "1931-03-14", "C1931-03-14", "C0141207", "c141207", "C141207 Marsh"},
		"http://www.genenames.org": {"1100", "90210", "HGNC:77441123", "HGNC:1100219099999", "HGNC:Marsh", "HGNC:01100",
			"HGNC:1931-03-14", "BRCA1"},
		"http://www.sequenceontology.org": {"SO:5550145", "SO:77441123", "SO:0001583219099999", "SO:Marsh", "0001583",
			"SO:1931-03-14", "missense_variant"},
		"http://www.whocc.no/atc": {"Marsh", "EVELYN", "E01", "L01XC03219099999", "L01XC033", "L0", "L01XCC", "19310314",
			"L01XC0", "j"},
		"http://terminology.hl7.org/CodeSystem/icd-o-3": {"80463/3", "1931/3", "8140/4", "8140/3219099999", "C81.9", "C50.99",
			"Marsh", "77441123"},
		"urn:oid:2.16.840.1.113883.6.238": {"1931-3", "1931-03", "2106-4", "2106-3219099999", "77441123", "White", "2106-3 Marsh"},
		"http://hl7.org/fhir/uv/genomics-reporting/CodeSystem/tbd-codes-cs": {"evelyn-marsh", "Evelyn", "functional-effect-219099999",
			"FUNCTIONAL-EFFECT", "77441123"},
		// Not kept, whatever the code.
		"https://www.ncbi.nlm.nih.gov/gene":   {"672", "77441123"},
		"http://www.ncbi.nlm.nih.gov/gene":    {"672"},
		"http://varnomen.hgvs.org":            {"NM_004656.4:c.1768C>T", "NC_000016.10:g.19310314G>T"},
		"http://standardterms.edqm.eu":        {"10219000", "77441123"},
		"http://www.ncbi.nlm.nih.gov/clinvar": {"128144"},
	}
	for sys, codes := range refused {
		for _, c := range codes {
			out := deidentify(t, researchObservation(sys, c), testAlias)
			if got := codingsOf(t, out); len(got) != 1 {
				t.Errorf("%s %q: codings %q, want it dropped\n%s", sys, c, got, out)
			}
		}
	}
}
