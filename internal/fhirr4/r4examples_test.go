package fhirr4

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/e2e/validators"
)

var updateR4Examples = flag.Bool("update-r4examples", false, "rewrite "+r4ExamplesVerdicts+" from the reference validators (all 5,306 files: minutes)")

// r4ExamplesVerdicts holds the reference validators' verdicts
// (e2e/validators: HL7's R4 JSON schema and Medplum's R4 validator) on
// every file of HL7's R4 examples package (hl7.fhir.r4.examples 4.0.1),
// one JSON line each refusal, after a header line. Running both over the
// 5,306 files (161 MB) takes minutes, so they are committed; regenerate
// them with
//
//	go test ./internal/fhirr4 -run '^TestR4ExamplesReference$' -args -update-r4examples
//
// and TestR4ExamplesReference re-derives a sample of them live.
const r4ExamplesVerdicts = "testdata/r4examples-reference.ndjson"

// r4ExamplesHeader is the first line of r4ExamplesVerdicts.
type r4ExamplesHeader struct {
	Package    string   `json:"package"`
	Version    string   `json:"version"`
	Files      int      `json:"files"`
	Validators []string `json:"validators"`
	Regenerate string   `json:"regenerate"`
}

// refusal is one message of one reference validator about one file.
type refusal struct {
	File      string `json:"file"`
	Validator string `json:"validator"`
	Message   string `json:"message"`
}

const (
	hl7Schema = validators.HL7Schema
	medplum   = validators.Medplum
)

// r4ExampleNames returns the resource files of the package in dir
// (every *.json but its package.json), sorted.
func r4ExampleNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".json") && n != "package.json" && e.Type().IsRegular() {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// readR4ExamplesVerdicts reads r4ExamplesVerdicts: its header and the
// refusals by file, each file's in the order written.
func readR4ExamplesVerdicts(t *testing.T) (r4ExamplesHeader, map[string][]refusal) {
	t.Helper()
	f, err := os.Open(r4ExamplesVerdicts)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var h r4ExamplesHeader
	refs := map[string][]refusal{}
	for line := 1; sc.Scan(); line++ {
		if line == 1 {
			if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Files == 0 {
				t.Fatalf("%s:1: no header (%v)", r4ExamplesVerdicts, err)
			}
			continue
		}
		var r refusal
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.File == "" || r.Message == "" {
			t.Fatalf("%s:%d: not a refusal (%v)", r4ExamplesVerdicts, line, err)
		}
		refs[r.File] = append(refs[r.File], r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return h, refs
}

// decodeR4Example decodes one file of the package as Check's callers do
// (encoding/json, UseNumber).
func decodeR4Example(t *testing.T, path string) ([]byte, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return b, m
}

// r4ExamplesCheckOnly are the files of the package that Check refuses and
// both reference validators take, each with the path of Check's first
// problem and the R4 rule the file breaks: neither validator checks
// narrative (see checkOnly).
var r4ExamplesCheckOnly = map[string]struct{ path, why string }{
	"ActivityDefinition-blood-tubes-supply.json":        {"ActivityDefinition.text.div", txt2},
	"ActivityDefinition-heart-valve-replacement.json":   {"ActivityDefinition.text.div", txt2},
	"EventDefinition-example.json":                      {"EventDefinition.text.div", txt2},
	"Questionnaire-zika-virus-exposure-assessment.json": {"Questionnaire.text.div", txt2},
}

const txt2 = "a narrative of whitespace alone breaks R4's txt-2 (narrative.html, severity error: \"The narrative SHALL have some non-whitespace content\")"

// r4ExamplesReferenceOnly are refusals of the reference validators that
// Check does not share, for the files named, each with its reason. A
// refusal excused neither here nor by referenceOnlyR4 makes Check's
// expected verdict on its file a refusal.
var r4ExamplesReferenceOnly = []struct {
	validator string
	message   *regexp.Regexp
	files     []string
	why       string
}{
	{hl7Schema, regexp.MustCompile(`^(\.differential\.element\[2\]\.type\[0\] )?should NOT have additional properties$`), []string{
		"StructureDefinition-ActivityDefinition.json", "StructureDefinition-CapabilityStatement.json", "StructureDefinition-ChargeItemDefinition.json",
		"StructureDefinition-CodeSystem.json", "StructureDefinition-CompartmentDefinition.json", "StructureDefinition-ConceptMap.json",
		"StructureDefinition-EffectEvidenceSynthesis.json", "StructureDefinition-EventDefinition.json", "StructureDefinition-Evidence.json",
		"StructureDefinition-EvidenceVariable.json", "StructureDefinition-ExampleScenario.json", "StructureDefinition-GraphDefinition.json",
		"StructureDefinition-ImplementationGuide.json", "StructureDefinition-Library.json", "StructureDefinition-Measure.json",
		"StructureDefinition-MessageDefinition.json", "StructureDefinition-NamingSystem.json", "StructureDefinition-OperationDefinition.json",
		"StructureDefinition-PlanDefinition.json", "StructureDefinition-Questionnaire.json", "StructureDefinition-ResearchDefinition.json",
		"StructureDefinition-ResearchElementDefinition.json", "StructureDefinition-RiskEvidenceSynthesis.json", "StructureDefinition-SearchParameter.json",
		"StructureDefinition-StructureDefinition.json", "StructureDefinition-StructureMap.json", "StructureDefinition-TerminologyCapabilities.json",
		"StructureDefinition-TestScript.json", "StructureDefinition-ValueSet.json", "StructureDefinition-example-composition.json",
	}, validators.CanonicalCompanion.Why + " (_baseDefinition, ElementDefinition.type._profile)"},
	{hl7Schema, regexp.MustCompile(`^\.id should match pattern `), []string{
		"SearchParameter-questionnaireresponse-extensions-QuestionnaireResponse-item-subject.json",
	}, "an id of 67 characters: R4's StructureDefinitions type Resource.id string (its fhir-type extension), which Check follows; fhirin refuses it (ErrID)"},
	{medplum, regexp.MustCompile(` Invalid base64Binary format$`), []string{
		"Binary-example.json", "DiagnosticReport-gingival-mass.json", "Media-example.json",
	}, "base64 with spaces between groups of four: R4's regex, (\\s*([0-9a-zA-Z\\+/=]){4}\\s*)+, takes them, Medplum's does not"},
	{medplum, regexp.MustCompile(` (Invalid code format|String must contain non-whitespace content)$`), []string{
		"CodeSystem-v2-0550.json", "Bundle-v2-valuesets.json",
	}, "a code holding a no-break space (U+00A0): Medplum's JavaScript \\s takes it for whitespace; R4's code regex, as XML Schema and RE2 read \\s, takes it as a character"},
	{medplum, regexp.MustCompile(`\.text\.div String cannot be larger than 1 MB$`), []string{
		"CodeSystem-dicom-dcim.json", "ValueSet-c80-doc-typecodes.json",
	}, "a narrative over 1 MB: R4 bounds a string (datatypes.html), and xhtml is not one"},
}

// referenceOnlyR4 says why Check takes what inv's validator refuses with
// its message in the file inv.Resource, whose refusals are all, or "" when
// it has no reason to: the rules of TestCheckAgreesWithReference
// (referenceOnly: HL7's schema's known defects, some of which judge the
// refused file as well as the message, NullInPrimitiveArray), and two
// more that hold for any file.
func referenceOnlyR4(inv validators.Invalid, all []refusal) string {
	if why := referenceOnly(inv); why != "" {
		return why
	}
	validator, m := inv.Validator, inv.Message
	switch {
	case validator == medplum && invariant.MatchString(m):
		return "a FHIRPath invariant, which Check does not check (docs/import.md, \"Structure\")"
	case validator == hl7Schema && oneOfBranch.MatchString(m):
		// Where a Bundle entry's resource fails, HL7's schema also
		// reports the other branches of its oneOf of every resource
		// type: the entry's own messages decide.
		entry := oneOfBranch.FindStringSubmatch(m)[1]
		for _, r := range all {
			if r.Validator == hl7Schema && strings.HasPrefix(r.Message, entry+".") {
				return "the branches of HL7's schema's oneOf of a Bundle entry's resource, which fails for another message"
			}
		}
	}
	return ""
}

var (
	invariant   = regexp.MustCompile(`^\S* ?Constraint [a-z]+-[0-9]+ not met: `)
	oneOfBranch = regexp.MustCompile(`^(\.entry\[[0-9]+\]\.resource) should (NOT have additional properties|match exactly one schema in oneOf)$`)
)

// expectRefused says whether Check must refuse the file name, whose JSON
// is raw, given the reference validators' refusals of it, refs, and why,
// from r4ExamplesCheckOnly and the reasons that excuse a reference's
// refusal. used counts the file-specific exceptions used.
func expectRefused(name, raw string, refs []refusal, used map[int]bool) (bool, string) {
	if c, ok := r4ExamplesCheckOnly[name]; ok {
		return true, c.why
	}
	for _, r := range refs {
		if referenceOnlyR4(validators.Invalid{Validator: r.Validator, Message: r.Message, Resource: raw}, refs) != "" {
			continue
		}
		excused := false
		for i, x := range r4ExamplesReferenceOnly {
			if x.validator == r.Validator && x.message.MatchString(r.Message) && slices.Contains(x.files, name) {
				excused, used[i] = true, true
				break
			}
		}
		if !excused {
			return true, r.Validator + ": " + r.Message
		}
	}
	return false, ""
}

// TestCheckR4Examples runs Check over every file of HL7's own R4 examples
// (hl7.fhir.r4.examples 4.0.1, installed with e2e/validators): the
// specification's example and conformance resources, outside data no
// custos code was written against. Its verdict on each file must be the
// one the reference validators' committed verdicts (r4ExamplesVerdicts)
// give with the named exceptions (r4ExamplesCheckOnly,
// r4ExamplesReferenceOnly, referenceOnlyR4): a change that refuses valid
// R4, or takes what both references refuse for a structural rule, fails.
// The package missing skips the test, or fails it under CI=true.
func TestCheckR4Examples(t *testing.T) {
	dir := validators.R4Examples(t)
	h, refs := readR4ExamplesVerdicts(t)
	names := r4ExampleNames(t, dir)
	if h.Version != validators.R4ExamplesVersion || h.Files != len(names) {
		t.Fatalf("%s holds the verdicts on %d files of version %s; the package installed has %d of version %s: regenerate them", r4ExamplesVerdicts, h.Files, h.Version, len(names), validators.R4ExamplesVersion)
	}
	for name := range refs {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s names %s, which the package does not hold", r4ExamplesVerdicts, name)
		}
	}
	used := map[int]bool{}
	var spent time.Duration
	var agree, checkOnly, refOnly, disagree int
	for _, name := range names {
		raw, m := decodeR4Example(t, filepath.Join(dir, name))
		start := time.Now()
		ps := Check(m)
		spent += time.Since(start)
		want, why := expectRefused(name, string(raw), refs[name], used)
		switch {
		case want && len(ps) == 0:
			t.Errorf("%s: Check takes it; want a refusal (%s)", name, why)
		case !want && len(ps) > 0:
			t.Errorf("%s: Check refuses it: %v; want it taken (the references' refusals, if any, are excused: %d)", name, ps, len(refs[name]))
		case want && r4ExamplesCheckOnly[name].path != "" && ps[0].Path != r4ExamplesCheckOnly[name].path:
			t.Errorf("%s: Check's first problem is %v, want one at %s (%s)", name, ps[0], r4ExamplesCheckOnly[name].path, why)
		}
		refused := map[string]bool{}
		for _, r := range refs[name] {
			refused[r.Validator] = true
		}
		switch c, s, m := len(ps) > 0, refused[hl7Schema], refused[medplum]; {
		case s != m:
			disagree++ // (c) the references disagree
		case c == s:
			agree++
		case c:
			checkOnly++ // (a) refused by Check alone
		default:
			refOnly++ // (b) refused by both references alone
		}
	}
	for i, x := range r4ExamplesReferenceOnly {
		if !used[i] {
			t.Errorf("r4ExamplesReferenceOnly[%d] (%s) excuses no refusal any more: remove it", i, x.why)
		}
	}
	t.Logf("%d files (Check %v): %d verdicts as both references', %d refused by Check alone, %d taken by Check alone, %d where the references disagree", len(names), spent.Round(time.Millisecond), agree, checkOnly, refOnly, disagree)
}

// TestR4ExamplesReference re-derives, live, the committed verdicts
// (r4ExamplesVerdicts) of a sample of the package: the files Check alone
// refuses, the smallest file of each exception of r4ExamplesReferenceOnly
// and of each kind of message, and every 500th file the references take,
// all under 256 KiB (HL7's schema is slow on a large invalid resource);
// each file's refusals must be those committed. With -update-r4examples
// it runs the references over every file and rewrites r4ExamplesVerdicts.
func TestR4ExamplesReference(t *testing.T) {
	dir := validators.R4Examples(t)
	names := r4ExampleNames(t, dir)
	if *updateR4Examples {
		writeR4ExamplesVerdicts(t, dir, names)
	}
	_, refs := readR4ExamplesVerdicts(t)
	size := map[string]int64{}
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		size[n] = fi.Size()
	}
	pick := map[string]bool{}
	for n := range r4ExamplesCheckOnly {
		pick[n] = true
	}
	for _, x := range r4ExamplesReferenceOnly {
		small := x.files[0]
		for _, n := range x.files {
			if size[n] < size[small] {
				small = n
			}
		}
		pick[small] = true
	}
	smallest := map[string]string{} // by validator and message with its indexes dropped
	for i, n := range names {
		if len(refs[n]) == 0 && i%500 == 0 {
			pick[n] = true
		}
		for _, r := range refs[n] {
			k := r.Validator + " " + indexes.ReplaceAllString(r.Message, "[]")
			if s, ok := smallest[k]; !ok || size[n] < size[s] {
				smallest[k] = n
			}
		}
	}
	for _, n := range smallest {
		pick[n] = true
	}
	var sample []string
	var raws [][]byte
	for _, n := range names {
		if pick[n] && size[n] < 1<<18 {
			raw, _ := decodeR4Example(t, filepath.Join(dir, n))
			sample, raws = append(sample, n), append(raws, raw)
		}
	}
	got := map[string][]refusal{}
	for _, r := range referenceVerdicts(t, sample, raws) {
		got[r.File] = append(got[r.File], r)
	}
	for _, n := range sample {
		if !slices.Equal(got[n], refs[n]) {
			t.Errorf("%s: the references now say %v; %s says %v", n, got[n], r4ExamplesVerdicts, refs[n])
		}
	}
	t.Logf("%d of %d files re-derived", len(sample), len(names))
}

var indexes = regexp.MustCompile(`\[[0-9]+\]`)

// referenceVerdicts runs the reference validators over raws, the files
// names, in batches, and returns their refusals, each file's messages
// once each, in the order reported.
func referenceVerdicts(t *testing.T, names []string, raws [][]byte) []refusal {
	t.Helper()
	const batch = 500
	var out []refusal
	seen := map[refusal]bool{}
	for lo := 0; lo < len(raws); lo += batch {
		for _, inv := range validators.FHIR(t, raws[lo:min(lo+batch, len(raws))]).Invalid {
			r := refusal{File: names[lo+inv.Index], Validator: inv.Validator, Message: inv.Message}
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b refusal) int { return strings.Compare(a.File, b.File) })
	return out
}

// writeR4ExamplesVerdicts runs the references over every file and writes
// r4ExamplesVerdicts.
func writeR4ExamplesVerdicts(t *testing.T, dir string, names []string) {
	t.Helper()
	raws := make([][]byte, len(names))
	for i, n := range names {
		raws[i], _ = decodeR4Example(t, filepath.Join(dir, n))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	h := r4ExamplesHeader{
		Package: "hl7.fhir.r4.examples", Version: validators.R4ExamplesVersion, Files: len(names),
		Validators: []string{hl7Schema, medplum},
		Regenerate: "go test ./internal/fhirr4 -run '^TestR4ExamplesReference$' -args -update-r4examples",
	}
	if err := enc.Encode(h); err != nil {
		t.Fatal(err)
	}
	for _, r := range referenceVerdicts(t, names, raws) {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(r4ExamplesVerdicts, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s: %d files\n", r4ExamplesVerdicts, len(names))
}

// TestExpectRefusedJudgesTheRefusedFile: HL7's schema's "<path>[i] should
// be string" is excused (validators.NullInPrimitiveArray) only for R4
// JSON's null whose _name companion holds the value's extensions, which
// the defect tells by the refused resource. referenceOnlyR4 built its
// validators.Invalid without the file, so such a refusal of an R4 example
// was never excused and TestCheckR4Examples would have demanded that
// Check refuse valid R4; now the file is judged, and a value of another
// kind, or a null without its companion, is still no excuse.
func TestExpectRefusedJudgesTheRefusedFile(t *testing.T) {
	const (
		name = "Patient-null-given.json" // in none of the file-specific lists
		msg  = ".name[0].given[1] should be string"
	)
	for _, tc := range []struct {
		what, raw string
		refused   bool // the verdict Check must reach
	}{
		{"a null with its companion's extension", `{"resourceType":"Patient","name":[{"given":["A",null],"_given":[null,{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}]}]}`, false},
		{"a number", `{"resourceType":"Patient","name":[{"given":["A",7]}]}`, true},
		{"a null without a companion", `{"resourceType":"Patient","name":[{"given":["A",null]}]}`, true},
	} {
		refs := []refusal{{File: name, Validator: hl7Schema, Message: msg}}
		refused, why := expectRefused(name, tc.raw, refs, map[int]bool{})
		if refused != tc.refused {
			t.Errorf("%s: expectRefused = %v (%s), want %v", tc.what, refused, why, tc.refused)
		}
		if tc.refused {
			continue
		}
		// What is excused is what Check takes: the verdicts agree.
		dec := json.NewDecoder(strings.NewReader(tc.raw))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if ps := Check(m); len(ps) > 0 {
			t.Errorf("%s: Check refuses it: %v", tc.what, ps)
		}
	}
}
