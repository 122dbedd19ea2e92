package rego_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/e2e/validators"
	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/internal/fhirr4"
	"github.com/custos-mcp/custos/minimize"
)

// igExamplesDir holds the FHIR implementation guide packages of
// e2e/igexamples/packages.lock, which `make igexamples` (a part of `make
// deps`) installs from the npm registry: the International Patient
// Summary (hl7.fhir.uv.ips 2.0.0), AU Base (hl7.fhir.au.base 6.0.0),
// mCODE (hl7.fhir.us.mcode 4.0.0), Genomics Reporting
// (hl7.fhir.uv.genomics-reporting 3.0.0) and Structured Data Capture
// (hl7.fhir.uv.sdc 4.0.0-ballot). Their published examples, in
// <package>/example/, were written by the guides' authors for their
// profiles (IPS documents, AU's IHI and indigenous status, mCODE's
// staging, radiotherapy and genomics, genomic variants, haplotypes and
// genotypes with their operations' Parameters, SDC's questionnaires and
// responses), not for custos.
const igExamplesDir = "../e2e/igexamples/packages"

// igPersonas are r4Personas, each with the fewest resources it reads of
// the guides' examples (0: none at all).
func igPersonas() []r4Persona {
	reads := map[string]int{"clinician": 900, "clinician-no-care": 115, "biller": 120, "researcher": 800}
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
//     the minimized views; HL7's JSON schema lacks the "_name" companion
//     of a canonical element, so a file with one passes it when the file
//     without them does: canonicalSchemaDefect), and the importer to
//     refuse none but for its compartment rule (fhirin.ErrCompartment:
//     two patients, a contained Patient, a patient named by identifier
//     alone or absolutely on another server) or what docs/import.md says
//     it does not import (expectedUnsupported), so that a false refusal
//     of valid R4 fails here;
//   - every persona's view of every clinical and administrative resource
//     to pass what TestR4ExamplesViews checks (checkExampleViews);
//   - the research walk of every QuestionnaireResponse (not a research
//     type: the researcher reads none, but one contained in a research
//     type is walked so) to be valid R4 and to pass the Safe Harbor
//     checks and hold no source value (checkResearchWalk).
//
// It logs each refusal, the extensions the research and billing views
// keep of those their sources carry, and the coding systems the research
// views keep.
func TestIGExamplesViews(t *testing.T) {
	start := time.Now()
	igPackagesAreTheLocked(t)
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
		sources = append(sources, canonicalSchemaDefect(t, exampleFile{path: p, body: b})...)
	}
	examples, files, refusals := readExamples(t, paths)
	t.Logf("%d files of clinical and administrative types (%d refused by the importer), %d resources, %d patients",
		files, len(refusals), len(examples), len(examplePatients(examples)))
	if files < 560 || len(examples) < 930 {
		t.Fatalf("only %d files, %d resources read", files, len(examples))
	}
	for _, r := range refusals {
		switch {
		case errors.Is(r.err, fhirin.ErrCompartment):
			t.Logf("refused (compartment): %v", r.err)
		case errors.Is(r.err, fhirin.ErrUnsupported) && expectedUnsupported(t, r.file):
			t.Logf("refused (not imported, docs/import.md): %v", r.err)
		default:
			t.Errorf("the importer refuses valid R4: %v", r.err)
		}
	}
	views := checkExampleViews(t, examples, igPersonas(), igControlKinds, 800, sources)
	checkResearchWalk(t, examples, "QuestionnaireResponse", 7)
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
	src, kept := map[string]int{}, map[string]int{}
	for _, v := range views {
		if v.who == "researcher" {
			codingSystems(decodeUseNumber(t, v.x.body), src)
			codingSystems(decodeUseNumber(t, v.out), kept)
		}
	}
	t.Logf("the researcher's views keep codings of the systems %s; their sources hold codings of %s", sortedCounts(kept), sortedCounts(src))
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

// codingSystems counts into out the system of every Coding of x (decoded
// JSON: an object with a code beside a system), nested ones included.
func codingSystems(x any, out map[string]int) {
	switch x := x.(type) {
	case map[string]any:
		if s, ok := x["system"].(string); ok && x["code"] != nil {
			out[s]++
		}
		for _, v := range x {
			codingSystems(v, out)
		}
	case []any:
		for _, v := range x {
			codingSystems(v, out)
		}
	}
}

// expectedUnsupported reports whether the example file path is one the
// importer refuses as docs/import.md says it does (fhirin.ErrUnsupported),
// valid R4 as it is: a Parameters, an operation's input or output
// (Genomics Reporting's operation outputs, SDC's $populate), or a
// batch-response Bundle (SDC's $extract example).
func expectedUnsupported(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := decodeUseNumber(t, b)
	return m["resourceType"] == "Parameters" || m["resourceType"] == "Bundle" && m["type"] == "batch-response"
}

// canonicalSchemaDefect returns f and, when it holds the "_name"
// companion of an element of type canonical (SDC's
// Questionnaire.derivedFrom with its derivation type), which R4's JSON
// format allows on every primitive and HL7's R4 JSON schema lacks
// (validators.CanonicalCompanion, among the schema's known defects), f
// marked so (exampleFile.schemaDefect) and a copy of f without them,
// which must pass both validators: the schema may refuse f for that alone.
func canonicalSchemaDefect(t *testing.T, f exampleFile) []exampleFile {
	t.Helper()
	m := decodeUseNumber(t, f.body)
	strip := func(o map[string]any, typ string) {
		for k := range o {
			if strings.HasPrefix(k, "_") && fhirr4.Elements[typ][k[1:]].Type == "canonical" {
				delete(o, k)
			}
		}
	}
	typ, _ := m["resourceType"].(string)
	strip(m, typ)
	walkTyped(m, "", func(_, _ string, el fhirr4.Element, x any, _ string) bool {
		if o, ok := x.(map[string]any); ok {
			typ := el.Type
			if typ == "Resource" {
				typ, _ = o["resourceType"].(string)
			}
			strip(o, typ)
		}
		return true
	})
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(b, mustCompact(t, f.body)) {
		return []exampleFile{f}
	}
	f.schemaDefect = validators.CanonicalCompanion.Why
	return []exampleFile{f, {path: f.path + " without its canonicals' _name companions", body: b}}
}

func mustCompact(t *testing.T, b []byte) []byte {
	t.Helper()
	out, err := json.Marshal(decodeUseNumber(t, b))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkResearchWalk applies the research obligation (deidentify
// safeharbor) to every resource of examples of type typ, as the research
// walk treats one contained in a research type, whatever the policy
// decides of typ itself, and fails t unless each of the n or more views
// is valid R4 (validView), passes safeHarborProblems and holds no source
// value (leakedSourceValues).
func checkResearchWalk(t *testing.T, examples []r4Example, typ string, n int) {
	t.Helper()
	walked := 0
	for _, x := range examples {
		if x.typ != typ {
			continue
		}
		opts := viewOptions()
		opts.Subject, opts.Alias = x.patient, r4Alias
		out, err := minimize.Apply("application/fhir+json", x.body, []minimize.Obligation{{Op: "deidentify", Fn: "safeharbor"}}, opts)
		if err != nil {
			t.Errorf("%s: the research walk: %v", x.where, err)
			continue
		}
		walked++
		if !validView(t, x.where, "research walk", out) {
			continue
		}
		for _, p := range r4ViewProblems(t, "researcher", x, out) {
			t.Errorf("%s: the research walk's view %s\n%s", x.where, p, out)
		}
	}
	if walked < n {
		t.Errorf("the research walk saw %d %s, want %d or more", walked, typ, n)
	}
}

// igPackagesAreTheLocked fails the test when igExamplesDir holds packages
// installed from another packages.lock than the committed one (its
// install stamp, .custos-installed-lock, is a copy of the lock it
// installed): after the lock changed without `make igexamples`, or an
// install that failed and left the old packages, the test would run over
// other examples than it names. Without an installed stamp it does
// nothing: exampleFiles reports the missing packages.
func igPackagesAreTheLocked(t *testing.T) {
	t.Helper()
	installed, err := os.ReadFile(filepath.Join(igExamplesDir, ".custos-installed-lock"))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.ReadFile(filepath.Join(igExamplesDir, "..", "packages.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(installed, lock) {
		t.Fatalf("%s holds packages installed from another packages.lock than ../packages.lock: run `make igexamples`", igExamplesDir)
	}
}
