package rego_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/e2e/validators"
	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/minimize/safeharbortest"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store/synth"
)

// r4ExamplesDir is HL7's R4 examples package (hl7.fhir.r4.examples 4.0.1,
// CC0), which `make validators` installs from
// e2e/validators/package-lock.json: the specification's 5,307 example
// resources, written by HL7 and not tuned to custos.
const r4ExamplesDir = "../e2e/validators/node_modules/hl7.fhir.r4.examples"

// r4DefinitionTypes are the conformance and knowledge types of R4 (and
// the definitional ones of its clinical reasoning, evidence and testing
// modules): definitions, not records about anyone. TestR4ExamplesViews
// leaves them out, Bundle entries included.
var r4DefinitionTypes = map[string]bool{
	"StructureDefinition": true, "ValueSet": true, "CodeSystem": true, "SearchParameter": true, "ConceptMap": true,
	"OperationDefinition": true, "CapabilityStatement": true, "CompartmentDefinition": true, "ImplementationGuide": true,
	"NamingSystem": true, "TerminologyCapabilities": true, "StructureMap": true, "GraphDefinition": true,
	"MessageDefinition": true, "TestScript": true, "TestReport": true, "ExampleScenario": true,
	"ActivityDefinition": true, "PlanDefinition": true, "Questionnaire": true, "Library": true, "Measure": true,
	"EventDefinition": true, "ObservationDefinition": true, "SpecimenDefinition": true, "ChargeItemDefinition": true,
	"ResearchDefinition": true, "ResearchElementDefinition": true, "EvidenceVariable": true, "Evidence": true,
	"EffectEvidenceSynthesis": true, "RiskEvidenceSynthesis": true,
}

// r4Example is one resource of HL7's examples as custos import reads it:
// its file, type, compartment, labels and body. A file the importer
// refuses (a contained or absolute subject, a second patient) is read as
// it is (refused is true), in the compartment of the patient its subject
// element names (refusedPatient), or of a patient "p": custos would not
// serve it, but its views are checked all the same.
type r4Example struct {
	where, typ, patient string
	sensitivity         []string
	body                []byte
	refused             bool
}

// r4Examples reads the clinical and administrative resources of HL7's R4
// examples (readExamples). A missing package skips the test, or fails it
// under CI=true, as e2e/validators does.
func r4Examples(t *testing.T) (out []r4Example, files, refused int) {
	t.Helper()
	paths := exampleFiles(t, filepath.Join(r4ExamplesDir, "*.json"),
		"HL7's R4 examples (hl7.fhir.r4.examples) are not installed in "+r4ExamplesDir+" (run `make validators`)")
	out, files, refusals := readExamples(t, paths)
	return out, files, len(refusals)
}

// exampleFiles returns the files pattern matches; none skips t, or
// fails it under CI=true (a missing package must never pass as a skip),
// with msg.
func exampleFiles(t *testing.T, pattern, msg string) []string {
	t.Helper()
	paths, _ := filepath.Glob(pattern)
	if len(paths) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; CI=true: a missing package fails", msg)
		}
		t.Skip(msg)
	}
	return paths
}

// exampleRefusal is a file the importer refused, and its error.
type exampleRefusal struct {
	file string
	err  error
}

// readExamples reads the clinical and administrative resources of the
// example files paths (every file but those of r4DefinitionTypes,
// Bundles split into their entries), one file at a time as custos
// import reads it (the importer refuses an input as a whole), and
// returns them, how many files it read and those the importer refused.
func readExamples(t *testing.T, paths []string) (out []r4Example, files int, refusals []exampleRefusal) {
	t.Helper()
	link := func(typ, id, patient string) string { return "attachment://demo/attachments/placeholder" }
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		types := resourceTypes(b)
		if len(types) == 0 || !slices.ContainsFunc(types, func(typ string) bool { return !r4DefinitionTypes[typ] && typ != "Bundle" }) {
			continue // package.json, definitions and Bundles of them alone
		}
		files++
		var items []fhirin.Item
		err = fhirin.Read(context.Background(), p, fhirin.Options{Link: link}, func(it fhirin.Item) error {
			items = append(items, it)
			return nil
		})
		if err != nil {
			refusals = append(refusals, exampleRefusal{p, err})
			if types[0] != "Bundle" {
				out = append(out, r4Example{where: filepath.Base(p), typ: types[0], patient: refusedPatient(t, b), body: b, refused: true})
			}
			continue
		}
		for _, it := range items {
			if it.MIMEType != "application/fhir+json" || it.Deleted || r4DefinitionTypes[it.Type] {
				continue
			}
			out = append(out, r4Example{where: filepath.Base(p) + ": " + it.Type + "/" + it.ID, typ: it.Type,
				patient: it.Patient, sensitivity: it.Sensitivity, body: it.Body})
		}
	}
	return out, files, refusals
}

// refusedPatient is the compartment a file the importer refused is read
// in: the id of the Patient/<id> its subject element (subject, patient,
// beneficiary) names, or "p". (IPS's Observation-tobacco-use-example is
// about Patient/patient-example-female and names another patient as its
// performer: in the compartment "p" its view would name the subject by
// another alias than the checkers expect.)
func refusedPatient(t *testing.T, b []byte) string {
	t.Helper()
	m := decodeUseNumber(t, b)
	for _, k := range []string{"subject", "patient", "beneficiary"} {
		ref, _ := m[k].(map[string]any)
		if r, _ := ref["reference"].(string); strings.HasPrefix(r, "Patient/") && !strings.Contains(r[len("Patient/"):], "/") {
			return r[len("Patient/"):]
		}
	}
	return "p"
}

// resourceTypes returns the value of every "resourceType" member of the
// JSON text b, in order: the file's own type first (HL7's examples write
// it first), then its entries' and contained resources'. It reads the
// text as bytes, without decoding it, since HL7's definition Bundles
// (110 MB) are left out unread.
func resourceTypes(b []byte) []string {
	var out []string
	for _, m := range resourceTypeMember.FindAllSubmatch(b, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

var resourceTypeMember = regexp.MustCompile(`"resourceType"\s*:\s*"([A-Za-z]+)"`)

// r4Persona is one principal of the default policy reading HL7's
// examples, and what it reads of them.
type r4Persona struct {
	name, purpose string
	p             policy.Principal
	careTeam      bool // the principal's patients are every patient of the examples
	reads         int  // the fewest resources it reads (0: none at all)
}

// r4Personas are the default policy's personas: the care team's
// clinician (every sensitive role), a clinician without a care
// relationship (tenant-level reference data alone), the biller, the
// researcher (the sensitive roles a study may hold), the auditor and a
// clinician of another tenant (nothing).
var r4Personas = []r4Persona{
	{name: "clinician", purpose: "TREAT", careTeam: true, p: viewPersonas[0].principal, reads: 750},
	{name: "clinician-no-care", purpose: "TREAT", p: policy.Principal{Sub: "dr.bob", Roles: []string{"clinician"}, ClientID: "ward-assistant",
		Tenant: synth.DefaultTenant}, reads: 160},
	{name: "biller", purpose: "HPAYMT", p: viewPersonas[1].principal, reads: 200},
	{name: "researcher", purpose: "HRESCH", p: safeHarborResearcher, reads: 560},
	{name: "auditor", purpose: "HOPERAT", p: policy.Principal{Sub: "ann.audit", Roles: []string{"auditor"}, ClientID: "audit-assistant",
		Tenant: synth.DefaultTenant}},
	{name: "outsider", purpose: "TREAT", careTeam: true, p: policy.Principal{Sub: "dr.eve", Roles: []string{"clinician"}, ClientID: "ward-assistant",
		Tenant: synth.OutsiderTenant}},
}

// r4Alias is the research alias the views name a patient by
// (minimize.Options.Alias, as the server gives a read by alias).
func r4Alias(id string) string { return "ra" + keyedID("Patient", id)[:20] }

// r4View is one minimized view and what it is a view of.
type r4View struct {
	who string
	x   r4Example
	out []byte
}

// TestR4ExamplesViews decides and minimizes a read of every clinical and
// administrative resource of HL7's R4 examples (r4Examples) as the server
// does (the compartment and labels custos import gives it; the research
// view by the patient's alias), for every persona of the default policy
// (r4Personas), and requires:
//   - every view released to be valid R4 (validView: fhirr4.Check and
//     ref-1), and every minimized view to pass the two reference
//     validators (e2e/validators: HL7's JSON schema and Medplum's) and R4's
//     invariants (safeharbortest.Invariants);
//   - every research view to have the Safe Harbor properties
//     (safeHarborProblems, a checker written apart from package minimize)
//     and to hold no value of the source's identifiers, names, telecom and
//     addresses (leakedSourceValues);
//   - every biller's view to hold nothing docs/policy.md says the billing
//     views drop (billerProblems) and no value of the source's
//     identifiers, names, telecom and addresses but those r4BillerAllowed
//     lists with their reasons;
//   - the clinician without a care relationship to read tenant-level
//     reference data alone, and the auditor and the outsider nothing.
//
// Each persona's reads are pinned from below, and the checkers are shown
// to find what they look for in the sources (r4PositiveControl), so that
// the test cannot pass by checking nothing.
func TestR4ExamplesViews(t *testing.T) {
	start := time.Now()
	examples, files, refused := r4Examples(t)
	t.Logf("%d files of clinical and administrative types (%d refused by the importer), %d resources, %d patients; read in %v",
		files, refused, len(examples), len(examplePatients(examples)), time.Since(start).Round(time.Millisecond))
	if len(examples) < 800 {
		t.Fatalf("only %d resources read", len(examples))
	}
	checkExampleViews(t, examples, r4Personas, r4ControlKinds, 500, nil)
	t.Logf("%v in all", time.Since(start).Round(time.Millisecond))
}

// examplePatients returns the patients of examples' compartments.
func examplePatients(examples []r4Example) []string {
	var out []string
	for _, x := range examples {
		if x.patient != "" && !slices.Contains(out, x.patient) {
			out = append(out, x.patient)
		}
	}
	return out
}

// exampleFile is an example file as it is: its path and content.
// schemaDefect, when set, says why HL7's R4 JSON schema refuses the file
// although it is valid R4: its errors are logged, Medplum's still fail.
type exampleFile struct {
	path         string
	body         []byte
	schemaDefect string
}

// checkExampleViews decides and minimizes a read of every resource of
// examples for every persona of personas, as TestR4ExamplesViews says,
// and fails t unless every view passes, the checkers find each kind of
// controls in the sources (r4PositiveControl) and the minimized views are
// minMinimized or more. The reference validators check files too, in the
// same run as the views (node and the validators start once): each must
// be valid. It returns the minimized views.
func checkExampleViews(t *testing.T, examples []r4Example, personas []r4Persona, controls map[string][]string, minMinimized int,
	files []exampleFile) []r4View {
	t.Helper()
	e := defaultEngine(t)
	careTeam := examplePatients(examples)
	decided := time.Now()
	var minimized []r4View
	for _, v := range personas {
		t.Run(v.name, func(t *testing.T) {
			pr := v.p
			if v.careTeam {
				pr.Patients = careTeam
			}
			sub := policy.NewSubject(pr)
			released, withheld, invalid, problems := 0, 0, 0, 0
			byType, denied := map[string]int{}, map[string]int{}
			for _, x := range examples {
				typ := strings.ToLower(x.typ)
				dec, err := e.Decide(context.Background(), policy.Input{Subject: sub, PurposeOfUse: v.purpose, Action: policy.ActionRead,
					Resource: &policy.Resource{Type: typ, Patient: x.patient, Tenant: synth.DefaultTenant, Sensitivity: x.sensitivity}})
				if err != nil {
					t.Fatalf("%s: %v", x.where, err)
				}
				if !dec.Allow {
					denied[strings.Join(dec.Reasons, ",")]++
					continue
				}
				opts := viewOptions()
				opts.Subject, opts.Alias = x.patient, r4Alias
				out, err := minimize.Apply("application/fhir+json", x.body, dec.Obligations, opts)
				if err != nil {
					if v.name == "researcher" && errors.Is(err, minimize.ErrWithheld) {
						withheld++ // withheld whole: nothing released
						continue
					}
					t.Fatalf("%s: %v", x.where, err)
				}
				released++
				byType[typ]++
				if !validView(t, x.where, v.name, out) {
					invalid++
				}
				if len(dec.Obligations) == 0 {
					if v.name != "clinician" && x.patient != "" {
						t.Errorf("%s: the %s reads a patient's resource whole", x.where, v.name)
					}
					continue
				}
				minimized = append(minimized, r4View{v.name, x, out})
				ps := r4ViewProblems(t, v.name, x, out)
				problems += len(ps)
				for _, p := range ps {
					t.Errorf("%s: the %s's view %s", x.where, v.name, p)
				}
				if len(ps) > 0 {
					t.Logf("%s: the %s's view: %s", x.where, v.name, out)
				}
			}
			t.Logf("%d views released (%d withheld whole), %d invalid, %d problems; by type %s; denied %s", released, withheld,
				invalid, problems, sortedCounts(byType), sortedCounts(denied))
			if released < v.reads || v.reads == 0 && released > 0 {
				t.Errorf("the %s read %d resources, want %d or more (0: none)", v.name, released, v.reads)
			}
		})
	}
	t.Logf("decided, minimized and checked in %v", time.Since(decided).Round(time.Millisecond))
	r4PositiveControl(t, minimized, controls)
	validated := time.Now()
	if len(minimized) < minMinimized {
		t.Fatalf("only %d minimized views", len(minimized))
	}
	views := make([][]byte, len(minimized))
	for i, m := range minimized {
		views[i] = m.out
	}
	checked := slices.Clone(views)
	for _, f := range files {
		checked = append(checked, f.body)
	}
	logged := map[string]bool{}
	for _, inv := range validators.FHIR(t, checked).Invalid {
		if inv.Index >= len(views) {
			f := files[inv.Index-len(views)]
			if f.schemaDefect != "" && inv.Validator == validators.HL7Schema {
				if !logged[f.path] {
					t.Logf("%s: %s: %s (%s)", f.path, inv.Validator, inv.Message, f.schemaDefect)
				}
				logged[f.path] = true
				continue
			}
			t.Errorf("%s: %s: %s", f.path, inv.Validator, inv.Message)
			continue
		}
		m := minimized[inv.Index]
		t.Errorf("%s: the %s's view: %s: %s\n%s", m.x.where, m.who, inv.Validator, inv.Message, m.out)
	}
	for _, f := range safeharbortest.Invariants(t, views) {
		m := minimized[f.Index]
		t.Errorf("%s: the %s's view breaks R4's %s at %s (%s)\n%s", m.x.where, m.who, f.Key, f.Path, f.Type, m.out)
	}
	t.Logf("%d minimized views and %d files validated in %v", len(views), len(files), time.Since(validated).Round(time.Millisecond))
	return minimized
}

// r4ViewProblems returns what is wrong with out, the minimized view of x
// that who read: for the researcher, what safeHarborProblems and
// leakedSourceValues (but researcherAllowed) find; for the biller, what billerProblems and
// leakedSourceValues (but r4BillerAllowed) find.
func r4ViewProblems(t *testing.T, who string, x r4Example, out []byte) []string {
	t.Helper()
	src, view := decodeUseNumber(t, x.body), decodeUseNumber(t, out)
	switch who {
	case "researcher":
		alias := ""
		if x.patient != "" {
			alias = r4Alias(x.patient)
		}
		return append(safeHarborProblems(view, alias, synth.DefaultNow.Year()), leakedSourceValues(src, view, researcherAllowed)...)
	case "biller":
		return append(billerProblems(view), leakedSourceValues(src, view, r4BillerAllowed)...)
	}
	return nil
}

// researcherAllowed are the source values a research view may hold, each
// with its reason.
var researcherAllowed = []string{
	// AU Base's Organization-example1: the word of a contact's e-mail
	// is its purpose's code, PRESS (HL7's contactentity-type), which the
	// view keeps.
	"press@albionhospital.example.com",
	// mCODE's tumor specimens: the word of the identifier is the
	// specimen's type, TUMOR (HL7's v2-0487), which the view keeps.
	"Tumor 1234",
}

// r4BillerAllowed are the source values a biller's view may hold, each
// with its reason.
var r4BillerAllowed = []string{
	// HL7's toy values: the claims' diagnosis code 123456 (no system),
	// which the biller keeps (a diagnosis's code), has the digits of
	// the insurer's BIN 123456 and of the coverage's certificate number
	// 12345 (which the view masks, ***2345) of Claim-100150 to -100155.
	// The contained clinic's identifier 3456 of Claim-100152 is in
	// that code too.
	"123456", "12345", "HOSP12345", "3456",
	// An Encounter's identifier that spells its date
	// (Encounter_Roel_20130311): the biller keeps the period, the
	// dates of service, and drops the identifier.
	"Encounter_Roel_20130311",
	// ExplanationOfBenefit EB3501's identifier error-1 (masked to
	// ***or-1) has the word of its outcome code, error.
	"error-1",
}

// r4PositiveControl fails t unless the checkers find, in the sources of
// the minimized views, what the views must not hold: safeHarborProblems
// each kind of controls["researcher"] (r4ControlKinds for HL7's R4
// examples) in the researcher's, billerProblems each of
// controls["biller"] in the biller's, and
// leakedSourceValues, comparing each source with itself, source values
// in both.
func r4PositiveControl(t *testing.T, views []r4View, controls map[string][]string) {
	t.Helper()
	found := map[string]int{}
	for _, v := range views {
		src := decodeUseNumber(t, v.x.body)
		var ps []string
		switch v.who {
		case "researcher":
			ps = safeHarborProblems(src, "", synth.DefaultNow.Year())
		case "biller":
			ps = billerProblems(src)
		}
		for _, k := range controls[v.who] {
			if slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, k) }) {
				found[v.who+": "+k]++
			}
		}
		if len(leakedSourceValues(src, src, nil)) > 0 {
			found[v.who+": source values"]++
		}
	}
	for who, kinds := range controls {
		for _, k := range append(kinds, "source values") {
			if found[who+": "+k] == 0 {
				t.Errorf("positive control: the checkers find no %q in the %s's sources", k, who)
			}
		}
	}
	t.Logf("positive control, sources in which the checkers find each kind: %s", sortedCounts(found))
}

// r4ControlKinds are the kinds of problem the checkers must find in the
// sources of the views, by persona (those HL7's examples do not hold, a
// member R4 does not define, an extension in a biller's source, are
// TestViewCheckersFindEachProblem's).
var r4ControlKinds = map[string][]string{
	"researcher": {"type HumanName", "type ContactPoint", "type Identifier", "type Narrative", "type Annotation", "type Meta",
		"type Attachment", "free text", "finer than a year", "an address element", "a reference other than", "no known terminology",
		"an id that is not", "a reference element other than", "a companion"},
	"biller": {"type Narrative", "an element the billing views drop", "a reference's display", "a code's display",
		"a code's text", "an identifier's value unmasked"},
}

func sortedCounts(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&b, "%s:%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}
