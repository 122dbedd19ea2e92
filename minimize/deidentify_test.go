package minimize_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/minimize/safeharbortest"
	"github.com/custos-mcp/custos/store/synth"
)

var (
	safeHarbor = []minimize.Obligation{{Op: minimize.OpDeidentify, Fn: minimize.DeidentifySafeHarbor}}
	deidNow    = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
)

// testAlias stands in for the server's research alias: a UUID made from a
// hash of the id (the server keys it; see server/research.go).
func testAlias(id string) string {
	h := sha256.Sum256([]byte("test-alias\x00" + id))
	u, _ := uuid.FromBytes(h[:16])
	return u.String()
}

func deidentify(t testing.TB, raw []byte, alias func(string) string) []byte {
	t.Helper()
	out, err := minimize.Apply("application/fhir+json", raw, safeHarbor, minimize.Options{Now: deidNow, Alias: alias})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// aliasReference reports whether ref is "Patient/<alias>" of some id.
func aliasReference(ids []string) func(string) bool {
	ok := map[string]bool{}
	for _, id := range ids {
		ok["Patient/"+testAlias(id)] = true
	}
	return func(ref string) bool { return ok[ref] }
}

// TestDeidentifyCorpus is the Safe Harbor check on FHIR nobody tuned the
// policy to: every resource of testdata/fhir-corpus, de-identified by the
// deidentify obligation, holds none of the 18 classes; the raw corpus holds
// every class it was written with (the positive control).
func TestDeidentifyCorpus(t *testing.T) {
	corpus, s := safeharbortest.Corpus(t, deidNow.Year())
	rawFound := map[string]int{}
	for _, r := range corpus {
		for _, f := range s.Scan(r.Raw) {
			rawFound[f.Class]++
		}
	}
	for _, class := range safeharbortest.AllClasses {
		if rawFound[class] == 0 && class != safeharbortest.ClassVehicle {
			t.Errorf("positive control: class %s not found in the raw corpus", class)
		}
	}
	s.PermitReferences(aliasReference([]string{"MRN-77441123", "MRN-55210987"}))
	for _, r := range corpus {
		for _, alias := range []func(string) string{nil, testAlias} {
			out := deidentify(t, r.Raw, alias)
			for _, f := range s.Scan(out) {
				t.Errorf("%s (alias %v): class %s at %s", r.Name, alias != nil, f.Class, f.Where)
			}
		}
	}
}

// TestDeidentifiedIsValidFHIR: the outside validators accept every
// de-identified resource of the corpus and of a synthetic data set, with and
// without aliases (required elements the walk drops carry a
// data-absent-reason extension), and the raw corpus too.
func TestDeidentifiedIsValidFHIR(t *testing.T) {
	corpus, _ := safeharbortest.Corpus(t, deidNow.Year())
	var docs [][]byte
	var names []string
	add := func(name string, b []byte) { docs, names = append(docs, b), append(names, name) }
	for _, r := range corpus {
		add(r.Name+" raw", r.Raw)
		add(r.Name, deidentify(t, r.Raw, testAlias))
		add(r.Name+" without alias", deidentify(t, r.Raw, nil))
	}
	for _, p := range synthPayloads(t) {
		add(p.name, deidentify(t, p.raw, testAlias))
	}
	for _, inv := range safeharbortest.ValidateFHIR(t, docs) {
		t.Errorf("%s is not valid FHIR R4 (%s): %s", names[inv.Index], inv.Validator, inv.Message)
	}
	t.Logf("%d resources validated", len(docs))
}

type synthPayload struct {
	name, typ string
	raw       []byte
}

// synthPayloads generates a 20-patient synthetic data set and returns its
// FHIR payloads.
func synthPayloads(t testing.TB) []synthPayload {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "synth")
	if _, err := synth.Generate(context.Background(), dir, synth.Options{Patients: 20}); err != nil {
		t.Fatal(err)
	}
	mf, err := os.ReadFile(filepath.Join(dir, synth.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []synthPayload
	for line := range strings.SplitSeq(strings.TrimSpace(string(mf)), "\n") {
		var l struct {
			MimeType, File string
			Labels         struct{ Type string }
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		if l.MimeType != "application/fhir+json" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, l.File))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, synthPayload{name: l.File, typ: l.Labels.Type, raw: raw})
	}
	return out
}

// TestDeidentifyRules pins the walk's rules on small inputs.
func TestDeidentifyRules(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"codeable concept text and coding display dropped, local coding dropped",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8480-6","display":"Jane Doe"},{"system":"http://acme.example/codes","code":"X1"}],"text":"Jane Doe"}}`,
			`{"code":{"coding":[{"code":"8480-6","system":"http://loinc.org"}]},"resourceType":"Observation","status":"final"}`},
		{"required code left empty gets data-absent-reason",
			`{"resourceType":"Observation","status":"final","code":{"text":"Jane Doe"}}`,
			`{"code":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]},"resourceType":"Observation","status":"final"}`},
		{"patient reference aliased, others dropped, display dropped",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1"}]},"subject":{"reference":"Patient/p1","display":"Jane"},"performer":[{"reference":"Practitioner/9"}]}`,
			`{"code":{"coding":[{"code":"1","system":"http://loinc.org"}]},"resourceType":"Observation","status":"final","subject":{"reference":"Patient/` + testAlias("p1") + `"}}`},
		{"required subject that is not a patient gets data-absent-reason",
			`{"resourceType":"Condition","subject":{"reference":"Group/g1"}}`,
			`{"resourceType":"Condition","subject":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}}`},
		{"dates to the year, instant dropped, nested extension with a date dropped",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1"}]},"effectiveDateTime":"2025-03-14T08:42:17-05:00","issued":"2025-03-14T08:44:59Z","valueQuantity":{"value":1,"unit":"mmHg","extension":[{"url":"http://x.example/at","valueDateTime":"2025-03-14"}]}}`,
			`{"code":{"coding":[{"code":"1","system":"http://loinc.org"}]},"effectiveDateTime":"2025","resourceType":"Observation","status":"final","valueQuantity":{"unit":"mmHg","value":1}}`},
		{"address: state, ZIP3, country only; restricted ZIP3 is 000",
			`{"resourceType":"Patient","address":[{"line":["1 Main"],"city":"X","state":"VT","postalCode":"05901-1234","country":"US","period":{"start":"2001"}},{"postalCode":"21620"}]}`,
			`{"address":[{"country":"US","postalCode":"000","state":"VT"},{"postalCode":"216"}],"resourceType":"Patient"}`},
		{"birthDate: year, withheld over 89; allowed extension kept",
			`{"resourceType":"Patient","birthDate":"1980-05-06","extension":[{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"F"},{"url":"http://x.example/mmn","valueString":"Smith"}]}`,
			`{"birthDate":"1980","extension":[{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"F"}],"resourceType":"Patient"}`},
		{"age over 89 dropped",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"onsetAge":{"value":92,"unit":"a"}}`,
			`{"resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"contained renumbered, local reference follows, unreferenced contained dropped",
			`{"resourceType":"MedicationRequest","status":"active","intent":"order","subject":{"reference":"Patient/p"},"contained":[{"resourceType":"Medication","id":"m-jane","code":{"coding":[{"system":"http://www.nlm.nih.gov/research/umls/rxnorm","code":"1"}]}},{"resourceType":"Practitioner","id":"dr","name":[{"family":"Who"}]}],"medicationReference":{"reference":"#m-jane"}}`,
			`{"contained":[{"code":{"coding":[{"code":"1","system":"http://www.nlm.nih.gov/research/umls/rxnorm"}]},"id":"c1","resourceType":"Medication"}],"intent":"order","medicationReference":{"reference":"#c1"},"resourceType":"MedicationRequest","status":"active","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"unknown modifier extension drops the element",
			`{"resourceType":"Patient","contact":[{"modifierExtension":[{"url":"http://x.example/not","valueBoolean":true}],"gender":"male"},{"gender":"female"}]}`,
			`{"contact":[{"gender":"female"}],"resourceType":"Patient"}`},
		{"required instant: primitive companion with data-absent-reason",
			`{"resourceType":"Provenance","target":[{"reference":"Patient/p"}],"recorded":"2024-10-02T10:41:13Z"}`,
			`{"_recorded":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]},"resourceType":"Provenance","target":[{"reference":"Patient/` + testAlias("p") + `"}]}`},
		{"unknown element, id, meta, text, identifier dropped",
			`{"resourceType":"Patient","id":"MRN1","meta":{"source":"x"},"text":{"status":"generated","div":"<div>x</div>"},"identifier":[{"value":"1"}],"nickname":"Janey","gender":"female"}`,
			`{"gender":"female","resourceType":"Patient"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(deidentify(t, []byte(tc.in), testAlias)); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestDeidentifyWithholds: what cannot be de-identified is not released.
func TestDeidentifyWithholds(t *testing.T) {
	for _, in := range []string{
		`[1,2]`, `"x"`, `{"resourceType":"NotAType","id":"x"}`, `{"name":"no resourceType"}`,
		`{"resourceType":"Patient","modifierExtension":[{"url":"http://x.example/confidential","valueBoolean":true}]}`,
	} {
		out, err := minimize.Apply("application/fhir+json", []byte(in), safeHarbor, minimize.Options{Now: deidNow})
		if !errors.Is(err, minimize.ErrWithheld) || out != nil {
			t.Errorf("%s: %q, %v; want ErrWithheld", in, out, err)
		}
	}
	if _, err := minimize.Apply("application/fhir+json", []byte(`{"resourceType":"Patient"}`), safeHarbor, minimize.Options{}); !errors.Is(err, minimize.ErrNoReferenceTime) {
		t.Errorf("without Now: %v", err)
	}
	if _, err := minimize.Apply("text/markdown", []byte("x"), safeHarbor, minimize.Options{Now: deidNow}); !errors.Is(err, minimize.ErrNotApplicable) {
		t.Errorf("on text: %v", err)
	}
	if !slices.Contains(minimize.AllowedExtensions(), "http://hl7.org/fhir/StructureDefinition/data-absent-reason") {
		t.Error("data-absent-reason, which the walk writes, is not an allowed extension")
	}
	for _, o := range []minimize.Obligation{{Op: minimize.OpDeidentify}, {Op: minimize.OpDeidentify, Path: "/code", Fn: "safeharbor"}} {
		if o.Validate() == nil {
			t.Errorf("%s validates", o)
		}
	}
}

// BenchmarkDeidentify measures the deidentify obligation per resource type
// of the synthetic data set (and the corpus), decode and encode included.
func BenchmarkDeidentify(b *testing.B) {
	byType := map[string][][]byte{}
	for _, p := range synthPayloads(b) {
		byType[p.typ] = append(byType[p.typ], p.raw)
	}
	corpus, _ := safeharbortest.Corpus(b, deidNow.Year())
	for _, r := range corpus {
		byType["corpus"] = append(byType["corpus"], r.Raw)
	}
	for _, typ := range []string{"patient", "observation", "condition", "medicationrequest", "encounter", "coverage", "corpus"} {
		docs := byType[typ]
		b.Run(typ, func(b *testing.B) {
			opts := minimize.Options{Now: deidNow, Alias: testAlias}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := minimize.Apply("application/fhir+json", docs[i%len(docs)], safeHarbor, opts); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// FuzzDeidentify: on any input the walk either withholds (an error, no
// payload) or returns a JSON object naming a known resource type; it never
// panics.
func FuzzDeidentify(f *testing.F) {
	corpus, _ := safeharbortest.Corpus(f, deidNow.Year())
	for _, r := range corpus {
		f.Add(r.Raw)
	}
	f.Add([]byte(`{"resourceType":"Patient","contained":[{"resourceType":"Patient","id":"x"}],"link":[{"other":{"reference":"#x"}}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, err := minimize.Apply("application/fhir+json", doc, safeHarbor, minimize.Options{Now: deidNow, Alias: testAlias})
		if err != nil {
			if out != nil {
				t.Fatal("a payload with an error")
			}
			return
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil || v["resourceType"] == nil {
			t.Fatalf("output %q is not a resource: %v", out, err)
		}
	})
}
