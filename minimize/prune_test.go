package minimize

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/internal/fhirr4"
)

// dar is the data-absent-reason a view writes for a required element it
// withholds.
const dar = `{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}`

// TestViewPrunesWhatObligationsEmptied: what the obligations leave that R4
// forbids, an empty object, array or string, a companion without its
// value, a local reference to a dropped contained resource, an extension
// without a value, goes; a required element they emptied is marked with
// a data-absent-reason "masked". Until h-views each went out as the
// obligations left it (the biller read "payor":[{}], "individual":{},
// "reasonCode":[{}], "subscriber":{"reference":"#sub1"} with no contained
// resource).
func TestViewPrunesWhatObligationsEmptied(t *testing.T) {
	for _, c := range []struct {
		name, in string
		obs      []Obligation
		want     string
	}{
		{"a required array emptied is marked (Coverage.payor 1..*)",
			`{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"display":"Acme Health"}]}`,
			[]Obligation{{Op: OpAllow, Fn: "/status,/beneficiary/reference,/payor/*/reference"}},
			`{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[` + dar + `]}`},
		{"an emptied item of a required array goes, the others stay",
			`{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"display":"Self"},{"reference":"Organization/o"}]}`,
			[]Obligation{{Op: OpAllow, Fn: "/status,/beneficiary/reference,/payor/*/reference"}},
			`{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"Organization/o"}]}`},
		{"an object of emptied members goes with them (Encounter.participant)",
			`{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"participant":[{"individual":{"display":"Dr. Who"}}],"hospitalization":{"origin":{"display":"12 Elm St"}}}`,
			[]Obligation{{Op: OpRemove, Path: "/participant/*/individual/display"}, {Op: OpRemove, Path: "/hospitalization/origin/display"}},
			`{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"}}`},
		{"a CodeableConcept of text alone goes; a required one is marked",
			`{"resourceType":"Encounter","status":"finished","class":{"display":"ambulatory"},"reasonCode":[{"text":"fall at home"}],"diagnosis":[{"condition":{"display":"T2DM"},"rank":1}]}`,
			[]Obligation{{Op: OpAllow, Fn: "/status,/class/code,/reasonCode/*/coding/*/code,/diagnosis/*/condition/reference,/diagnosis/*/rank"}},
			`{"resourceType":"Encounter","status":"finished","class":` + dar + `,"diagnosis":[{"condition":` + dar + `,"rank":1}]}`},
		{"a local reference to a dropped contained resource goes",
			`{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"Organization/o"}],` +
				`"subscriber":{"reference":"#sub1"},"policyHolder":{"reference":"#sub1","type":"RelatedPerson"},"contained":[{"resourceType":"RelatedPerson","id":"sub1","patient":{"reference":"Patient/p"}}]}`,
			[]Obligation{{Op: OpRemove, Path: "/contained"}},
			`{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"Organization/o"}],"policyHolder":{"type":"RelatedPerson"}}`},
		{"a local reference to a kept contained resource, and # alone, stay",
			`{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"#org"}],` +
				`"contained":[{"resourceType":"Organization","id":"org","name":"Acme","partOf":{"reference":"#"},"alias":["x"]}]}`,
			[]Obligation{{Op: OpRemove, Path: "/contained/0/alias"}},
			`{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"#org"}],` +
				`"contained":[{"resourceType":"Organization","id":"org","name":"Acme","partOf":{"reference":"#"}}]}`},
		{"a companion whose value is gone goes; a required one is marked",
			`{"resourceType":"Patient","birthDate":"1931-03-14","_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1931-03-14T14:35:45-05:00"}]},` +
				`"link":[{"other":{"reference":"Patient/q"},"type":"seealso","_type":{"id":"t1"}}]}`,
			[]Obligation{{Op: OpRemove, Path: "/birthDate"}, {Op: OpRemove, Path: "/link/*/type"}},
			`{"resourceType":"Patient","link":[{"other":{"reference":"Patient/q"},"_type":` + dar + `}]}`},
		{"a null without its companion's entry goes",
			`{"resourceType":"Patient","name":[{"given":[null,"B"],"_given":[{"extension":[{"url":"u","valueString":"x"}]},null]}]}`,
			[]Obligation{{Op: OpAllow, Fn: "/name/*/given"}},
			`{"resourceType":"Patient","name":[{"given":["B"]}]}`},
		{"a companion no longer as long as its values goes",
			`{"resourceType":"Patient","name":[{"given":["A","B"],"_given":[null,{"id":"g2"}]}]}`,
			[]Obligation{{Op: OpRemove, Path: "/name/0/_given/0"}},
			`{"resourceType":"Patient","name":[{"given":["A","B"]}]}`},
		{"a value removed takes its companion's entry with it",
			`{"resourceType":"Patient","name":[{"given":["A","B"],"_given":[null,{"id":"g2"}]}]}`,
			[]Obligation{{Op: OpRemove, Path: "/name/0/given/0"}},
			`{"resourceType":"Patient","name":[{"given":["B"],"_given":[{"id":"g2"}]}]}`},
		{"an extension left without a value goes (ext-1)",
			`{"resourceType":"Patient","gender":"female","extension":[{"url":"http://example.org/x","valueString":"secret"}]}`,
			[]Obligation{{Op: OpRemove, Path: "/extension/*/valueString"}},
			`{"resourceType":"Patient","gender":"female"}`},
		{"an empty string goes",
			`{"resourceType":"Patient","gender":"female","name":[{"family":"","given":["A"]}]}`,
			[]Obligation{{Op: OpMask, Path: "/name/0/given/0"}},
			`{"resourceType":"Patient","gender":"female","name":[{"given":["***"]}]}`},
		{"a required choice is marked by one type, a primitive one where it has one",
			`{"resourceType":"MedicationRequest","status":"active","intent":"order","subject":{"reference":"Patient/p"},"medicationReference":{"display":"Metformin"}}`,
			[]Obligation{{Op: OpRemove, Path: "/medicationReference/display"}},
			`{"resourceType":"MedicationRequest","status":"active","intent":"order","subject":{"reference":"Patient/p"},"medicationCodeableConcept":` + dar + `}`},
		{"a Bundle entry's local references name its own contained resources",
			`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},` +
				`"payor":[{"reference":"#o"}],"contained":[{"resourceType":"Organization","id":"o","name":"Acme"}]}},` +
				`{"resource":{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"#o"}]}}]}`,
			[]Obligation{{Op: OpRemove, Path: "/id"}},
			`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},` +
				`"payor":[{"reference":"#o"}],"contained":[{"resourceType":"Organization","id":"o","name":"Acme"}]}},` +
				`{"resource":{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[` + dar + `]}}]}`},
		{"a document that is no R4 resource is left as it is",
			`{"resourceType":"NotAResource","a":{},"b":[],"c":"","d":1}`,
			[]Obligation{{Op: OpRemove, Path: "/d"}},
			`{"resourceType":"NotAResource","a":{},"b":[],"c":""}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := JSON([]byte(c.in), c.obs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := redacted(t, c.want)
			if strings.HasPrefix(c.in, `{"resourceType":"NotA`) {
				want = canon(t, c.want)
			}
			if string(got) != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
			if strings.HasPrefix(c.in, `{"resourceType":"NotA`) {
				return
			}
			if ps := fhirr4.Check(decodeNumber(t, got)); len(ps) > 0 {
				t.Errorf("no valid R4: %v\n%s", ps, got)
			}
			if strings.Contains(c.obs[0].Path, "/0") {
				return // removing an index again removes the next item
			}
			again, err := JSON(got, c.obs, Options{})
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("not idempotent: %s then %s (%v)", got, again, err)
			}
		})
	}
}

// TestViewIsLabelledRedacted: a view that obligations other than
// deidentify apply to carries HL7's REDACTED label in meta.security, once,
// beside the labels it keeps; a resource without obligations, the research
// view (which withholds Meta: its walk drops it) and a document that is
// no R4 resource carry none.
func TestViewIsLabelledRedacted(t *testing.T) {
	const label = `{"code":"REDACTED","system":"http://terminology.hl7.org/CodeSystem/v3-ObservationValue"}`
	const cel = `{"code":"CEL","system":"http://terminology.hl7.org/CodeSystem/v3-ActCode"}`
	for _, c := range []struct {
		name, in string
		obs      []Obligation
		want     string
	}{
		{"added", `{"resourceType":"Patient","gender":"female","name":[{"family":"Doe"}]}`, []Obligation{{Op: OpRemove, Path: "/name"}},
			`{"gender":"female","meta":{"security":[` + label + `]},"resourceType":"Patient"}`},
		{"beside the labels kept", `{"resourceType":"Patient","meta":{"versionId":"3","security":[` + cel + `]},"gender":"female"}`, []Obligation{{Op: OpMask, Path: "/gender"}},
			`{"_gender":` + dar + `,"meta":{"security":[` + cel + `,` + label + `],"versionId":"3"},"resourceType":"Patient"}`},
		{"once", `{"resourceType":"Patient","meta":{"security":[` + label + `]},"gender":"female"}`, []Obligation{{Op: OpMask, Path: "/gender"}},
			`{"_gender":` + dar + `,"meta":{"security":[` + label + `]},"resourceType":"Patient"}`},
		{"no obligations: none", `{"resourceType":"Patient","gender":"female"}`, nil,
			`{"gender":"female","resourceType":"Patient"}`},
		{"the research view: none", `{"resourceType":"Patient","gender":"female","meta":{"security":[` + cel + `]}}`, []Obligation{{Op: OpDeidentify, Fn: DeidentifySafeHarbor}},
			`{"gender":"female","resourceType":"Patient"}`},
		{"no R4 resource: none", `{"resourceType":"NotAResource","gender":"female"}`, []Obligation{{Op: OpMask, Path: "/gender"}},
			`{"gender":"***","resourceType":"NotAResource"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := JSON([]byte(c.in), c.obs, Options{Now: refNow})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// A resource without obligations is released as it is (normalized), not
// walked: an empty object stays. So does a view whose obligations are
// deidentify's alone, whose walk keeps R4 itself.
func TestViewWithoutObligationsIsNotPruned(t *testing.T) {
	in := `{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"participant":[{"individual":{}}]}`
	got, err := JSON([]byte(in), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := canon(t, in); string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestViewOfEveryRemovalIsValidR4: every valid R4 resource of the
// realistic corpus (testdata/fhir-corpus) and of the outside examples
// (testdata/outside*), with any one element or array item removed (a
// remove obligation of each of its paths but resourceType), is valid R4
// (fhirr4.Check). Removal is what empties objects and arrays and parts a
// companion from its value; pruneView repairs it.
func TestViewOfEveryRemovalIsValidR4(t *testing.T) {
	var files []string
	for _, g := range []string{"../testdata/fhir-corpus/*.json", "testdata/outside/*.json", "testdata/outside2/fhir/*.json", "testdata/outside3/fhir/*.json"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	resources, views := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := decodeNumber(t, b)
		if m == nil || len(fhirr4.Check(m)) > 0 {
			continue
		}
		resources++
		for _, p := range pointers(m, "") {
			out, err := JSON(b, []Obligation{{Op: OpRemove, Path: p}}, Options{})
			if err != nil {
				t.Fatalf("%s: remove %s: %v", f, p, err)
			}
			views++
			if ps := fhirr4.Check(decodeNumber(t, out)); len(ps) > 0 {
				t.Errorf("%s: remove %s: no valid R4: %v", f, p, ps)
			}
		}
	}
	if resources < 60 || views < 5000 {
		t.Fatalf("only %d resources, %d views", resources, views)
	}
	t.Logf("%d resources, %d views", resources, views)
}

// pointers returns the JSON pointer of every member and array item below
// v, resourceType members left out.
func pointers(v any, at string) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if k == "resourceType" {
				continue
			}
			p := at + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
			out = append(out, p)
			out = append(out, pointers(c, p)...)
		}
	case []any:
		for i, c := range x {
			p := at + "/" + itoa(i)
			out = append(out, p)
			out = append(out, pointers(c, p)...)
		}
	}
	return out
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func decodeNumber(t *testing.T, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil
	}
	return m
}

// redacted is canon(s), a view of a FHIR resource, with the REDACTED
// security label the view carries (labelRedacted).
func redacted(t testing.TB, s string) string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("bad JSON in test: %v\n%s", err, s)
	}
	labelRedacted(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A primitive's companion goes with its value when an obligation removes
// the value (a birth time in _birthDate's extension is the birth date's
// own), and stays when the source wrote it without a value (R4 lets a
// primitive carry only extensions: a data-absent-reason "unknown"). Found
// by h-review59: prune dropped the source's _birthDate under any removal
// ("remove /text"), and a removal of /birthDate left _birthDate behind
// for prune to guess at.
func TestViewKeepsACompanionItsSourceWroteAlone(t *testing.T) {
	const unknown = `{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"unknown"}]}`
	const birthTime = `{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1931-03-14T08:30:00Z"}]}`
	for _, c := range []struct {
		name, in, path string
		want, gone     string
	}{
		{"kept alone", `{"resourceType":"Patient","gender":"female","_birthDate":` + unknown + `,"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>"}}`,
			"/text", `"_birthDate":` + unknown, ""},
		{"removed with its value", `{"resourceType":"Patient","gender":"female","birthDate":"1931-03-14","_birthDate":` + birthTime + `}`,
			"/birthDate", "", "1931"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := JSON([]byte(c.in), []Obligation{{Op: OpRemove, Path: c.path}}, Options{Now: refNow})
			if err != nil {
				t.Fatal(err)
			}
			if c.want != "" && !strings.Contains(string(got), c.want) {
				t.Errorf("lost %s: %s", c.want, got)
			}
			if c.gone != "" && strings.Contains(string(got), c.gone) {
				t.Errorf("kept %s: %s", c.gone, got)
			}
			if ps := fhirr4.Check(decodeNumber(t, got)); len(ps) > 0 {
				t.Errorf("the view is not valid R4: %v", ps)
			}
		})
	}
}
