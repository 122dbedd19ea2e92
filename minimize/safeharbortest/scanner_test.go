package safeharbortest

import (
	"regexp"
	"slices"
	"testing"

	"github.com/custos-mcp/custos/minimize"
)

// TestAliasIsNotAnIDToken: a research alias (a UUID) whose first group is
// a letter and digits, "e5252988-...", is shown to the caller by design
// and must not be flagged as an identifier token; an MRN-like token next
// to it still is. Before the fix, about one alias in ten was flagged.
func TestAliasIsNotAnIDToken(t *testing.T) {
	s := NewScanner(2026)
	alias := regexp.MustCompile(`^Patient/[0-9a-f-]{36}$`)
	s.PermitReferences(alias.MatchString)
	clean := []byte(`{"resourceType":"Observation","subject":{"reference":"Patient/e5252988-4b1c-8d2e-9f00-123456789abc"}}`)
	if f := s.Scan(clean); len(f) != 0 {
		t.Fatalf("a permitted alias is flagged: %v", f)
	}
	dirty := []byte(`{"resourceType":"Observation","subject":{"reference":"Patient/e5252988-4b1c-8d2e-9f00-123456789abc"},"note":[{"text":"seen as W123456789"}]}`)
	found := false
	for _, f := range s.Scan(dirty) {
		found = found || f.Class == ClassOtherUnique
	}
	if !found {
		t.Fatal("an identifier token next to an alias is no longer found")
	}
}

// TestScannerFindsSmallGeographyAndBareNumbers: the shapes a third outside
// probe found the walk releasing are findings of the scanner, and their
// harmless neighbours are not.
func TestScannerFindsSmallGeographyAndBareNumbers(t *testing.T) {
	for _, tc := range []struct {
		doc, class string // class "": no finding
	}{
		{`{"resourceType":"Patient","address":[{"state":"GB-LND","country":"GB"}]}`, ClassGeography},
		{`{"resourceType":"Patient","address":[{"state":"FR-75"}]}`, ClassGeography},
		{`{"resourceType":"Patient","address":[{"country":"PCN"}]}`, ClassGeography},
		{`{"resourceType":"Patient","address":[{"state":"DE-BE","country":"DE"},{"state":"AU-NSW"},{"country":"NZ"}]}`, ""},
		{`{"resourceType":"Observation","valueInteger":912448123}`, ClassOtherUnique},
		{`{"resourceType":"Device","property":[{"valueQuantity":[{"value":2088231177}]}]}`, ClassOtherUnique},
		{`{"resourceType":"Observation","valueQuantity":{"value":250000000,"unit":"/L"},"component":[{"valueInteger":999999}]}`, ""},
		// Seven and eight digits without unit (no finding until h-scrub3).
		{`{"resourceType":"Observation","component":[{"valueInteger":12345678}]}`, ClassOtherUnique},
		{`{"resourceType":"ServiceRequest","quantityRatio":{"numerator":{"value":77441123},"denominator":{"value":1}}}`, ClassOtherUnique},
		{`{"resourceType":"Observation","valueQuantity":{"value":-7744112.0}}`, ClassOtherUnique},
		{`{"resourceType":"Observation","valueQuantity":{"value":1,"unit":"912448123"}}`, ClassOtherUnique},
		{`{"resourceType":"Observation","code":{"coding":[{"system":"http://unitsofmeasure.org","code":"{MRN77441123}"}]}}`, ClassOtherUnique},
		{`{"resourceType":"Condition","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0203","code":"912448123"}]}]}`, ClassOtherUnique},
		{`{"resourceType":"Patient","language":"en-x-912448123"}`, ClassOtherUnique},
		{`{"resourceType":"Condition","code":{"coding":[{"system":"http://snomed.info/sct","code":"JaneRoe"}]}}`, ClassOtherUnique},
		{`{"resourceType":"Condition","code":{"coding":[{"system":"http://loinc.org","code":"MRN-77441123"}]}}`, ClassOtherUnique},
		{`{"resourceType":"Condition","code":{"coding":[{"system":"http://snomed.info/sct","code":"44054006"},{"system":"http://loinc.org","code":"LA6751-7"}]}}`, ""},
		{`{"resourceType":"Patient","communication":[{"language":{"coding":[{"system":"urn:ietf:bcp:47","code":"en-x-7744112"}]}}]}`, ClassOtherUnique},
		{`{"resourceType":"Observation","valueQuantity":{"value":250,"unit":"10*3/uL","system":"http://unitsofmeasure.org","code":"10*3/uL"},"code":{"coding":[{"system":"http://snomed.info/sct","code":"1234567891000119108"}]}}`, ""},
		{`{"resourceType":"QuestionnaireResponse","item":[{"answer":[{"valueDate":"1931"}]}]}`, ClassDates},
		{`{"resourceType":"QuestionnaireResponse","item":[{"answer":[{"valueDate":"2020"}]}]}`, ""},
	} {
		var got []string
		for _, f := range NewScanner(2026).Scan([]byte(tc.doc)) {
			got = append(got, f.Class)
		}
		if tc.class == "" && len(got) != 0 || tc.class != "" && !slices.Contains(got, tc.class) {
			t.Errorf("%s: found %v, want %q", tc.doc, got, tc.class)
		}
	}
}

// TestScannerKnowsTheWalksTerminologies: a coding of every terminology
// the deidentify walk keeps by name (minimize.TerminologySystems) is no
// finding, and a coding of another system is a URL. The scanner had a
// list of its own, which lacked the research terminologies the walk came
// to keep (NCI Thesaurus, HGNC, the Sequence Ontology, ATC, genomics
// reporting's TBD codes): each was a URL finding.
func TestScannerKnowsTheWalksTerminologies(t *testing.T) {
	s := NewScanner(2026)
	systems := minimize.TerminologySystems()
	for _, want := range []string{"http://ncicb.nci.nih.gov/xml/owl/EVS/Thesaurus.owl", "http://www.genenames.org",
		"http://www.sequenceontology.org", "http://www.whocc.no/atc", "http://hl7.org/fhir/uv/genomics-reporting/CodeSystem/tbd-codes-cs",
		"http://loinc.org", "urn:oid:2.16.840.1.113883.6.238"} {
		if !slices.Contains(systems, want) {
			t.Errorf("minimize.TerminologySystems() lacks %s", want)
		}
	}
	for _, sys := range append(systems, "http://example.org/local-codes") {
		doc := []byte(`{"resourceType":"Observation","code":{"coding":[{"system":"` + sys + `"}]}}`)
		got := s.Scan(doc)
		if local := sys == "http://example.org/local-codes"; local != slices.ContainsFunc(got, func(f Finding) bool { return f.Class == ClassURL }) || !local && len(got) > 0 {
			t.Errorf("a coding of %s: findings %v", sys, got)
		}
	}
}
