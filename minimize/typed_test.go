package minimize

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/e2e/validators"
	"github.com/custos-mcp/custos/internal/fhirr4"
	"github.com/custos-mcp/custos/internal/repofiles"
)

// everyKind is one obligation of every kind and function that works on a
// path: remove, mask, generalize and scrub (allow keeps or drops, and
// deidentify works on the whole resource by its own walk).
var everyKind = []Obligation{
	{Op: OpRemove},
	{Op: OpMask, Fn: MaskFull},
	{Op: OpMask, Fn: MaskLast4},
	{Op: OpGeneralize, Fn: GeneralizeYear},
	{Op: OpGeneralize, Fn: GeneralizeZIP3},
	{Op: OpGeneralize, Fn: GeneralizeAge90},
	{Op: OpGeneralize, Fn: GeneralizeBirthYear90},
	{Op: OpScrub},
}

// r4Primitives are R4's primitive types (datatypes.html#primitive): the
// test must reach each.
var r4Primitives = []string{
	"base64Binary", "boolean", "canonical", "code", "date", "dateTime", "decimal", "id", "instant",
	"integer", "markdown", "oid", "positiveInt", "string", "time", "unsignedInt", "uri", "url",
	"uuid", "xhtml",
}

// everyPrimitiveProbe is a real R4 example (Patient "example" of the R4
// specification, cut down) with an extension of every primitive type the
// fixtures may lack (Extension.value[x] takes each), and a repeating
// primitive with a companion.
const everyPrimitiveProbe = `{"resourceType":"Patient","id":"example",
"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>Peter James Chalmers, 1974-12-25</p></div>"},
"identifier":[{"use":"usual","system":"urn:oid:1.2.36.146.595.217.0.1","value":"12345"}],
"active":true,"name":[{"use":"official","family":"Chalmers","given":["Peter","James"],"_given":[null,{"id":"g2"}]}],
"gender":"male","birthDate":"1974-12-25","_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1974-12-25T14:35:45-05:00"}]},
"deceasedBoolean":false,"multipleBirthInteger":2,
"address":[{"use":"home","line":["534 Erewhon St"],"city":"PleasantVille","state":"Vic","postalCode":"3999","period":{"start":"1974-12-25"}}],
"photo":[{"contentType":"image/png","data":"iVBORw0KGgo=","size":12,"hash":"2jmj7l5rSw0yVb/vlWAYkK/YBwk=","url":"http://example.org/photo.png","creation":"2020-01-01T00:00:00Z"}],
"extension":[
{"url":"http://example.org/fhir/StructureDefinition/oid","valueOid":"urn:oid:1.2.3.4.5"},
{"url":"http://example.org/fhir/StructureDefinition/uuid","valueUuid":"urn:uuid:c757873d-ec9a-4326-a141-556f43239520"},
{"url":"http://example.org/fhir/StructureDefinition/time","valueTime":"14:35:45"},
{"url":"http://example.org/fhir/StructureDefinition/instant","valueInstant":"2015-02-07T13:28:17.239+02:00"},
{"url":"http://example.org/fhir/StructureDefinition/id","valueId":"a-1"},
{"url":"http://example.org/fhir/StructureDefinition/positiveInt","valuePositiveInt":93},
{"url":"http://example.org/fhir/StructureDefinition/unsignedInt","valueUnsignedInt":12345},
{"url":"http://example.org/fhir/StructureDefinition/decimal","valueDecimal":92.5},
{"url":"http://example.org/fhir/StructureDefinition/markdown","valueMarkdown":"Call **555-867-5309**"},
{"url":"http://example.org/fhir/StructureDefinition/canonical","valueCanonical":"http://example.org/fhir/Questionnaire/q1"},
{"url":"http://example.org/fhir/StructureDefinition/url","valueUrl":"http://example.org/chart/5558675309"},
{"url":"http://example.org/fhir/StructureDefinition/code","valueCode":"1931-03-14"},
{"url":"http://example.org/fhir/StructureDefinition/date","valueDate":"1931-03"}]}`

// typedFixtures are the R4 resources of minimize's and rego's testdata,
// the repository's FHIR corpus and everyPrimitiveProbe, each valid R4
// (fhirr4.Check), with its name.
func typedFixtures(t *testing.T) (names []string, docs [][]byte) {
	t.Helper()
	add := func(name string, b []byte) {
		var c bytes.Buffer
		if json.Compact(&c, b) != nil {
			return
		}
		m, _ := mustDecode(c.Bytes()).(map[string]any)
		if rt, _ := m[resourceTypeMember].(string); !fhirr4.Resources[rt] {
			return
		}
		if ps := fhirr4.Check(m); len(ps) > 0 {
			t.Logf("%s: not valid R4 as it is, left out: %v", name, ps[0])
			return
		}
		names, docs = append(names, name), append(docs, c.Bytes())
	}
	for _, root := range []string{"testdata", "../rego/testdata", "../testdata/fhir-corpus"} {
		for _, p := range repofiles.Tracked(t, root) { // the fixtures git tracks
			if !strings.HasSuffix(p, ".json") {
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			add(p, b)
		}
	}
	add("everyPrimitiveProbe", []byte(everyPrimitiveProbe))
	return names, docs
}

// sampleKey is the class of a view the reference validators see one
// of: a primitive type under each obligation, and the members R4 JSON gives no companion (a resource's id, a narrative's
// div, Meta.profile, an extension's url) under each.
func sampleKey(typ string, o Obligation, p string) string {
	name := p[strings.LastIndex(p, "/")+1:]
	switch {
	case name == "id" || name == "div" || name == "profile" || name == "url":
		return typ + " " + name + " " + o.Op + ":" + o.Fn
	case primitiveTypes[typ]:
		return typ + " " + o.Op + ":" + o.Fn
	}
	// A complex value masked goes, and a required one is marked by the
	// prune (markRequired) as one removed is: checked by fhirr4.Check
	// above, not sampled here (the prune's marker of a required element
	// under an at-least-one invariant, app-1's participant, is not one
	// the reference takes: docs/policy.md, "Views stay valid R4").
	return ""
}

func mustDecode(b []byte) any {
	v, err := decodeJSON(b)
	if err != nil {
		return nil
	}
	return v
}

// typedPaths returns every path of an element of the R4 resource root
// (each array as "*", a repeating element also as a whole), with its R4
// type, by the R4 table (fhirr4.Elements; a primitive's "_name"
// companion an Element), walked here on its own rather than by the walk
// under test.
func typedPaths(root any) map[string]string {
	out := map[string]string{}
	var visit func(v any, typ, ptr string)
	visit = func(v any, typ, ptr string) {
		switch x := v.(type) {
		case map[string]any:
			defs := fhirr4.Elements[typ]
			if typ == "Resource" {
				rt, _ := x[resourceTypeMember].(string)
				defs = fhirr4.Elements[rt]
			} else if typ == "Element" {
				defs = companionDefs
			}
			for k, c := range x {
				e, ok := defs[k]
				if base, comp := cutCompanion(k); !ok && comp && primitiveTypes[defs[base].Type] {
					e, ok = fhirr4.Element{Type: "Element"}, true
				}
				if !ok {
					continue
				}
				out[ptr+"/"+k] = e.Type
				visit(c, e.Type, ptr+"/"+k)
			}
		case []any:
			for _, c := range x {
				out[ptr+"/*"] = typ
				visit(c, typ, ptr+"/*")
			}
		}
	}
	visit(root, "Resource", "")
	return out
}

// TestEveryObligationKeepsViewsR4 applies every obligation kind that
// works on a path (everyKind) at every path of every element of real R4
// resources (typedFixtures: every primitive type R4 has, complex
// elements, contained resources, Bundle entries) and checks that the
// view is valid R4 (fhirr4.Check): until h-typed a mask, a generalize or
// a scrub wrote "***", "90+" or "[DATE]" into a date, a code, an instant,
// a number or a boolean ("birthDate":"***", "gender":"***"). A sample of
// one view per primitive type and obligation goes to the reference
// validators (e2e/validators) too. A string's mask stays as it was
// (subscriberId masked to its last four).
func TestEveryObligationKeepsViewsR4(t *testing.T) {
	names, docs := typedFixtures(t)
	if len(docs) < 50 {
		t.Fatalf("only %d R4 fixtures", len(docs))
	}
	reached := map[string]bool{}
	sample := map[string][]byte{} // type and obligation -> a view
	sampleWhere := map[string]string{}
	views := 0
	for i, doc := range docs {
		paths := typedPaths(mustDecode(doc))
		for _, p := range slices.Sorted(maps.Keys(paths)) {
			typ := paths[p]
			reached[typ] = true
			for _, o := range everyKind {
				if !primitiveTypes[typ] && (o.Op == OpGeneralize || o.Fn == MaskLast4) {
					continue // a complex value: fit drops it whatever the function
				}
				o.Path = p
				out, err := JSON(doc, []Obligation{o}, Options{Now: refNow})
				if err != nil {
					t.Fatalf("%s: %s: %v", names[i], o, err)
				}
				views++
				m, _ := mustDecode(out).(map[string]any)
				if ps := fhirr4.Check(m); len(ps) > 0 {
					t.Errorf("%s: %s (a %s): the view is not R4: %v", names[i], o, typ, ps)
					continue
				}
				if key := sampleKey(typ, o, p); key != "" && sample[key] == nil {
					sample[key], sampleWhere[key] = out, names[i]+" "+o.String()
				}
			}
		}
	}
	for _, typ := range r4Primitives {
		if !reached[typ] {
			t.Errorf("no fixture has an element of type %s", typ)
		}
	}
	t.Logf("%d views of %d resources checked", views, len(docs))

	keys := slices.Sorted(maps.Keys(sample))
	raws := make([][]byte, len(keys))
	for i, k := range keys {
		raws[i] = sample[k]
	}
	const batch = 100 // validators: a report of a bounded size
	for lo := 0; lo < len(raws); lo += batch {
		for _, inv := range validators.FHIR(t, raws[lo:min(lo+batch, len(raws))]).Invalid {
			where := sampleWhere[keys[lo+inv.Index]]
			if validators.NullInPrimitiveArray.Explains(inv) {
				// R4 json.html: a repeating primitive's array holds null
				// where its companion holds the value's extensions (a
				// value withheld); HL7's schema does not model it, and
				// Medplum's validator takes it.
				continue
			}
			t.Errorf("%s: the reference refuses the view: %s: %s", where, inv.Validator, inv.Message)
		}
	}
	t.Logf("%d sample views valid for the reference validators", len(raws))
}

// TestTypedObligations pins what each obligation makes of a value by its
// R4 type: a string keeps its mask, a date its year, anything else R4
// types is withheld with a data-absent-reason "masked" on its companion.
func TestTypedObligations(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		o         Obligation
		want      string
	}{
		{"a string keeps its last four", `{"resourceType":"Coverage","status":"active","subscriberId":"AB123456789","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"Organization/o"}]}`,
			Obligation{Op: OpMask, Path: "/subscriberId", Fn: MaskLast4},
			`{"beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"Organization/o"}],"resourceType":"Coverage","status":"active","subscriberId":"***6789"}`},
		{"a masked date is withheld", `{"resourceType":"Patient","birthDate":"1974-12-25"}`,
			Obligation{Op: OpMask, Path: "/birthDate"}, `{"_birthDate":` + dar + `,"resourceType":"Patient"}`},
		{"with the companion's extensions", `{"resourceType":"Patient","birthDate":"1974-12-25","_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1974-12-25T14:35:45-05:00"}]}}`,
			Obligation{Op: OpMask, Path: "/birthDate"}, `{"_birthDate":` + dar + `,"resourceType":"Patient"}`},
		{"a date generalized keeps its year", `{"resourceType":"Patient","birthDate":"1974-12-25"}`,
			Obligation{Op: OpGeneralize, Path: "/birthDate", Fn: GeneralizeBirthYear90}, `{"birthDate":"1974","resourceType":"Patient"}`},
		{"a birth date over 89 is withheld", `{"resourceType":"Patient","birthDate":"1931-12-25"}`,
			Obligation{Op: OpGeneralize, Path: "/birthDate", Fn: GeneralizeBirthYear90}, `{"_birthDate":` + dar + `,"resourceType":"Patient"}`},
		{"an instant has no year alone", `{"resourceType":"Patient","meta":{"lastUpdated":"2024-03-05T10:00:00Z"}}`,
			Obligation{Op: OpGeneralize, Path: "/meta/lastUpdated", Fn: GeneralizeYear}, `{"meta":{"_lastUpdated":` + dar + `},"resourceType":"Patient"}`},
		{"a code", `{"resourceType":"Patient","gender":"female"}`,
			Obligation{Op: OpMask, Path: "/gender"}, `{"_gender":` + dar + `,"resourceType":"Patient"}`},
		{"a code generalized", `{"resourceType":"Patient","gender":"female"}`,
			Obligation{Op: OpGeneralize, Path: "/gender", Fn: GeneralizeZIP3}, `{"_gender":` + dar + `,"resourceType":"Patient"}`},
		{"a boolean", `{"resourceType":"Patient","active":true}`,
			Obligation{Op: OpMask, Path: "/active"}, `{"_active":` + dar + `,"resourceType":"Patient"}`},
		{"an age over 89 in a decimal", `{"resourceType":"Observation","status":"final","code":{"text":"age"},"valueQuantity":{"value":93,"unit":"a"}}`,
			Obligation{Op: OpGeneralize, Path: "/valueQuantity/value", Fn: GeneralizeAge90},
			`{"code":{"text":"age"},"resourceType":"Observation","status":"final","valueQuantity":{"_value":` + dar + `,"unit":"a"}}`},
		{"an age under 90 stays", `{"resourceType":"Observation","status":"final","code":{"text":"age"},"valueQuantity":{"value":43,"unit":"a"}}`,
			Obligation{Op: OpGeneralize, Path: "/valueQuantity/value", Fn: GeneralizeAge90},
			`{"code":{"text":"age"},"resourceType":"Observation","status":"final","valueQuantity":{"unit":"a","value":43}}`},
		{"a date scrubbed", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"effectiveDateTime":"2024-03-05"}`,
			Obligation{Op: OpScrub, Path: ""},
			`{"_effectiveDateTime":` + dar + `,"code":{"text":"x"},"resourceType":"Observation","status":"final"}`},
		{"a repeating primitive item by item, the masked items' companions gone", `{"resourceType":"Patient","name":[{"given":["Peter","James"],"_given":[null,{"id":"g2"}]}],"communication":[{"language":{"text":"en"}}]}`,
			Obligation{Op: OpMask, Path: "/name/0/given"},
			`{"communication":[{"language":{"text":"en"}}],"name":[{"given":["***","***"]}],"resourceType":"Patient"}`},
		{"a repeating primitive, one item masked, the other's companion aligned", `{"resourceType":"Patient","name":[{"given":["Peter","James"],"_given":[null,{"id":"g2"}]}],"communication":[{"language":{"text":"en"}}]}`,
			Obligation{Op: OpMask, Path: "/name/0/given/0"},
			`{"communication":[{"language":{"text":"en"}}],"name":[{"_given":[null,{"id":"g2"}],"given":["***","James"]}],"resourceType":"Patient"}`},
		{"a repeating code item withheld", `{"resourceType":"Patient","contact":[{"telecom":[{"value":"x"}],"relationship":[{"text":"x"}]}],"address":[{"line":["a","b"]}]}`,
			Obligation{Op: OpGeneralize, Path: "/address/0/line/1", Fn: GeneralizeYear},
			`{"address":[{"line":["a","***"]}],"contact":[{"relationship":[{"text":"x"}],"telecom":[{"value":"x"}]}],"resourceType":"Patient"}`},
		{"a narrative masked", `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">Peter</div>"}}`,
			Obligation{Op: OpMask, Path: "/text/div"},
			`{"resourceType":"Patient","text":{"div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">***</div>","status":"generated"}}`},
		{"a complex value masked goes", `{"resourceType":"Patient","gender":"male","maritalStatus":{"text":"married"}}`,
			Obligation{Op: OpMask, Path: "/maritalStatus"}, `{"gender":"male","resourceType":"Patient"}`},
		{"a required one is marked", `{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"Organization/o"}]}`,
			Obligation{Op: OpMask, Path: "/payor"}, `{"beneficiary":{"reference":"Patient/p"},"payor":[` + dar + `],"resourceType":"Coverage","status":"active"}`},
		{"no R4 resource: by its JSON", `{"resourceType":"NotAResource","birthDate":"1974-12-25"}`,
			Obligation{Op: OpMask, Path: "/birthDate"}, `{"birthDate":"***","resourceType":"NotAResource"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := JSON([]byte(c.doc), []Obligation{c.o}, Options{Now: refNow})
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			if !strings.Contains(c.doc, "NotAResource") {
				// A view of an R4 resource is labelled.
				m, _ := mustDecode([]byte(c.want)).(map[string]any)
				labelRedacted(m)
				b, err := encodeJSON(m)
				if err != nil {
					t.Fatal(err)
				}
				want = string(b)
			}
			if string(out) != want {
				t.Errorf("got  %s\nwant %s", out, want)
			}
		})
	}
}

// TestTransformedValueLosesItsCompanion: a value an obligation masks,
// generalizes or scrubs loses its "_x" companion, whose extensions
// describe the original value: generalize:/birthDate:year kept
// _birthDate's patient-birthTime (the full date and time of birth), a mask
// of a family name kept its own-name extension (the name), and a scrub of
// given names kept a companion entry's extension holding one (h-review61's
// finding). A value an obligation leaves as it was keeps its companion.
func TestTransformedValueLosesItsCompanion(t *testing.T) {
	birthTime := `{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1974-12-25T14:35:45-05:00"}]}`
	redacted := `"meta":{"security":[{"code":"REDACTED","system":"http://terminology.hl7.org/CodeSystem/v3-ObservationValue"}]},`
	ownName := `{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/humanname-own-name","valueString":"Chalmers"}]}`
	for _, c := range []struct {
		name, in string
		o        Obligation
		want     string
	}{
		{"generalized birth date", `{"resourceType":"Patient","birthDate":"1974-12-25","_birthDate":` + birthTime + `}`,
			Obligation{Op: OpGeneralize, Path: "/birthDate", Fn: GeneralizeYear}, `{"birthDate":"1974",` + redacted + `"resourceType":"Patient"}`},
		{"masked family name", `{"resourceType":"Patient","name":[{"family":"Chalmers-Rey","_family":` + ownName + `}]}`,
			Obligation{Op: OpMask, Path: "/name/0/family"}, `{` + redacted + `"name":[{"family":"***"}],"resourceType":"Patient"}`},
		{"scrubbed given names", `{"resourceType":"Patient","name":[{"given":["call 555-867-5309","Ann"],"_given":[` + ownName + `,` + ownName + `]}]}`,
			Obligation{Op: OpScrub, Path: "/name/0/given"}, `{` + redacted + `"name":[{"_given":[null,` + ownName + `],"given":["call [PHONE]","Ann"]}],"resourceType":"Patient"}`},
		{"a scrubbed given name, the only one with a companion", `{"resourceType":"Patient","name":[{"given":["call 555-867-5309","Ann"],"_given":[` + ownName + `,null]}]}`,
			Obligation{Op: OpScrub, Path: "/name/0/given"}, `{` + redacted + `"name":[{"given":["call [PHONE]","Ann"]}],"resourceType":"Patient"}`},
		{"a scrub that changes nothing", `{"resourceType":"Patient","birthDate":"1974","_birthDate":` + birthTime + `}`,
			Obligation{Op: OpScrub, Path: "/birthDate", Fn: "phone"}, `{"_birthDate":` + birthTime + `,"birthDate":"1974",` + redacted + `"resourceType":"Patient"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := JSON([]byte(c.in), []Obligation{c.o}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want {
				t.Errorf("%s:\n got %s\nwant %s", c.o, out, c.want)
			}
		})
	}
}
