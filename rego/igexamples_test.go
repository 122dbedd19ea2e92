package rego_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/internal/fhirr4"
)

// igExamplesDir holds the FHIR implementation guide packages of
// e2e/igexamples/packages.lock, which `make igexamples` (a part of `make
// deps`) installs from the npm registry: the International Patient
// Summary (hl7.fhir.uv.ips 2.0.0), AU Base (hl7.fhir.au.base 6.0.0) and
// mCODE (hl7.fhir.us.mcode 4.0.0). Their published examples, in
// <package>/example/, were written by the guides' authors for their
// profiles (IPS documents, AU's IHI and indigenous status, mCODE's
// staging, radiotherapy and genomics), not for custos.
const igExamplesDir = "../e2e/igexamples/packages"

// igPersonas are r4Personas, each with the fewest resources it reads of
// the guides' examples (0: none at all).
func igPersonas() []r4Persona {
	reads := map[string]int{"clinician": 500, "clinician-no-care": 95, "biller": 100, "researcher": 460}
	out := slices.Clone(r4Personas)
	for i := range out {
		out[i].reads = reads[out[i].name]
	}
	return out
}

// igControlKinds are r4ControlKinds but for the kinds the guides'
// examples do not hold in the views' sources: no Attachment in a
// research view's source, no contained resource, disposition or
// processNote in a biller's; and with the text of US Core's race and
// ethnicity in mCODE's Patients (a research view keeps their codes
// alone: raceProblems).
var igControlKinds = map[string][]string{
	"researcher": append(slices.DeleteFunc(slices.Clone(r4ControlKinds["researcher"]), func(k string) bool { return k == "type Attachment" }),
		"a race or ethnicity part other than"),
	"biller": slices.DeleteFunc(slices.Clone(r4ControlKinds["biller"]),
		func(k string) bool { return k == "an element the billing views drop" }),
}

// TestIGExamplesViews runs custos over every published example of the
// implementation guides of igExamplesDir, as TestR4ExamplesViews does
// over HL7's R4 examples, and requires:
//   - every example file to be valid R4 by fhirr4.Check and by the two
//     reference validators (e2e/validators, run once over the files and
//     the minimized views), and the importer to refuse
//     none but for its compartment rule (fhirin.ErrCompartment: two
//     patients, a contained Patient, a patient named by identifier
//     alone), so that a false refusal of valid R4 fails here;
//   - every persona's view of every clinical and administrative resource
//     to pass what TestR4ExamplesViews checks (checkExampleViews).
//
// It logs each refusal, and the extensions the research and billing
// views keep of those their sources carry.
func TestIGExamplesViews(t *testing.T) {
	start := time.Now()
	paths := exampleFiles(t, filepath.Join(igExamplesDir, "*", "example", "*.json"),
		"the FHIR implementation guides' examples are not installed in "+igExamplesDir+" (run `make igexamples`)")
	var sources []exampleFile
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if ps := fhirr4.Check(decodeUseNumber(t, b)); len(ps) > 0 {
			t.Errorf("%s: fhirr4.Check: %v", p, ps)
		}
		sources = append(sources, exampleFile{p, b})
	}
	examples, files, refusals := readExamples(t, paths)
	t.Logf("%d files of clinical and administrative types (%d refused by the importer), %d resources, %d patients",
		files, len(refusals), len(examples), len(examplePatients(examples)))
	if files < 340 || len(examples) < 500 {
		t.Fatalf("only %d files, %d resources read", files, len(examples))
	}
	for _, r := range refusals {
		if !errors.Is(r.err, fhirin.ErrCompartment) {
			t.Errorf("the importer refuses valid R4: %v", r.err)
		} else {
			t.Logf("refused (compartment): %v", r.err)
		}
	}
	views := checkExampleViews(t, examples, igPersonas(), igControlKinds, 450, sources)
	for _, who := range []string{"researcher", "biller"} {
		src, kept := map[string]int{}, map[string]int{}
		for _, v := range views {
			if v.who == who {
				extensionURLs(decodeUseNumber(t, v.x.body), src)
				extensionURLs(decodeUseNumber(t, v.out), kept)
			}
		}
		t.Logf("the %s's views keep the extensions %s of %d in their sources", who, sortedCounts(kept), len(src))
	}
	t.Logf("%v in all", time.Since(start).Round(time.Millisecond))
}

// extensionURLs counts into out the url of every extension and modifier
// extension of x (decoded JSON), nested ones included.
func extensionURLs(x any, out map[string]int) {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if k == "extension" || k == "modifierExtension" {
				for _, e := range asList(v) {
					if m, ok := e.(map[string]any); ok {
						u, _ := m["url"].(string)
						out[strings.TrimPrefix(k, "extension")+u]++
					}
				}
			}
			extensionURLs(v, out)
		}
	case []any:
		for _, v := range x {
			extensionURLs(v, out)
		}
	}
}
