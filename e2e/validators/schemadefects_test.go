package validators_test

import (
	"strings"
	"testing"

	"github.com/custos-mcp/custos/e2e/validators"
)

// TestSchemaDefectsAreTheSchemas: each known defect of HL7's R4 JSON
// schema is one: valid R4 that shows it is refused by the schema, every
// refusal told as that defect (KnownSchemaDefect; none for
// CanonicalCompanion, whose message tells nothing apart), and taken by
// Medplum's validator (but for a code with a no-break space, which
// Medplum's JavaScript \s refuses too). A schema that lost a defect, or a
// message the list no longer matches, fails here; so does a defect added
// to the list without its example. Resources invalid for another reason
// are told as no defect (but an empty string: StringPattern).
func TestSchemaDefectsAreTheSchemas(t *testing.T) {
	cases := []struct {
		defect       *validators.SchemaDefect
		resource     string
		medplumTakes bool
	}{
		{validators.NullInPrimitiveArray, `{"resourceType":"Patient","name":[{"given":["A",null],"_given":[null,{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}]}]}`, true},
		{validators.StringPattern, `{"resourceType":"Patient","name":[{"text":"A\u00a0B"}]}`, true},
		{validators.CodePattern, `{"resourceType":"Patient","language":"en\u00a0\u00a0US"}`, false},
		{validators.FHIRVersion401, `{"resourceType":"CapabilityStatement","status":"active","date":"2020-01-01","kind":"instance","fhirVersion":"4.0.1","format":["json"],"implementation":{"description":"x"},"rest":[{"mode":"server"}]}`, true},
		{validators.CanonicalCompanion, `{"resourceType":"Questionnaire","status":"active","derivedFrom":["http://example.org/Questionnaire/q"],"_derivedFrom":[{"extension":[{"url":"http://example.org/x","valueCode":"extends"}]}]}`, true},
	}
	otherwise := []string{
		`{"resourceType":"Patient","gender":"femal"}`,
		`{"resourceType":"Patient","birthDate":"1931-14-03"}`,
	}
	seen := map[*validators.SchemaDefect]bool{}
	var resources [][]byte
	for _, c := range cases {
		seen[c.defect] = true
		resources = append(resources, []byte(c.resource))
	}
	for _, d := range validators.SchemaDefects {
		if !seen[d] {
			t.Errorf("the schema defect %q has no example here", d.Why)
		}
	}
	for _, r := range otherwise {
		resources = append(resources, []byte(r))
	}
	refused := make([]bool, len(resources))
	for _, inv := range validators.FHIR(t, resources).Invalid {
		refused[inv.Index] = refused[inv.Index] || inv.Validator == validators.HL7Schema
		got := validators.KnownSchemaDefect(inv)
		if inv.Index >= len(cases) {
			if got != nil {
				t.Errorf("%s: %s: %s: told as the defect %q", otherwise[inv.Index-len(cases)], inv.Validator, inv.Message, got.Why)
			}
			continue
		}
		c := cases[inv.Index]
		switch {
		case inv.Validator == validators.HL7Schema && c.defect == validators.CanonicalCompanion:
			if got != nil || inv.Message != "should NOT have additional properties" {
				t.Errorf("%s: the schema says %q, told as %v; want its message for an unknown member, told as no defect", c.defect.Why, inv.Message, got)
			}
		case inv.Validator == validators.HL7Schema && got != c.defect:
			t.Errorf("%s: the schema's message %q is not told as the defect (%v)", c.defect.Why, inv.Message, got)
		case inv.Validator != validators.HL7Schema && (c.medplumTakes || got != nil):
			t.Errorf("%s: %s refuses it: %s", c.defect.Why, inv.Validator, inv.Message)
		}
	}
	for i, c := range cases {
		if !refused[i] {
			t.Errorf("%s: the schema takes %s: not a defect of it (any more)", c.defect.Why, c.resource)
		}
	}
}

// nullCases are resources whose every refusal by HL7's schema reads
// "<path>[i] should be string": the one R4 JSON's null with its companion
// (json.html) is the schema's defect, each of the others invalid R4 of
// its own, which the message alone excused until h-fhirin.
var nullCases = []struct {
	name, resource string
	defect         bool
}{
	{"a null whose _given companion holds its extension", `{"resourceType":"Patient","name":[{"given":["A",null],"_given":[null,{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}]}]}`, true},
	{"the same in an address line", `{"resourceType":"Patient","address":[{"line":["1 Main St",null],"_line":[null,{"id":"l2"}]}]}`, true},
	{"a number in a string array", `{"resourceType":"Patient","name":[{"given":["A",7]}]}`, false},
	{"an object in a string array", `{"resourceType":"Patient","name":[{"given":["A",{"x":1}]}]}`, false},
	{"a boolean in a string array", `{"resourceType":"Patient","name":[{"given":[true]}]}`, false},
	{"a null without a companion", `{"resourceType":"Patient","name":[{"given":["A",null]}]}`, false},
	{"a null whose companion is null there too", `{"resourceType":"Patient","name":[{"given":["A",null],"_given":[{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]},null]}]}`, false},
	{"a null whose companion is an empty object", `{"resourceType":"Patient","name":[{"given":["A",null],"_given":[null,{}]}]}`, false},
	{"a null whose companion is shorter", `{"resourceType":"Patient","name":[{"given":[null,"A"],"_given":[{"id":"g"}]}]}`, false},
	{"a null whose companion is another name's", `{"resourceType":"Patient","name":[{"given":["A",null]},{"given":["B","C"],"_given":[null,{"id":"g"}]}]}`, false},
	{"a null whose companion is another element's", `{"resourceType":"Patient","name":[{"given":["A",null],"_prefix":[null,{"id":"g"}],"prefix":["x","y"]}]}`, false},
}

// TestNullInPrimitiveArrayIsTheDefectAlone: NullInPrimitiveArray excuses
// the schema's refusal of R4 JSON's null with its companion, and no other
// refusal with the same message: a value of another kind in the array, a
// null without a companion entry at its index (none, a null, an empty
// object, a companion too short, another element's or another
// repetition's). Judged on the refusals as the schema words them, here
// without node, and live below.
func TestNullInPrimitiveArrayIsTheDefectAlone(t *testing.T) {
	for _, c := range nullCases {
		for _, msg := range []string{".name[0].given[1] should be string", ".name[0].given[0] should be string", ".name[1].given[1] should be string"} {
			inv := validators.Invalid{Validator: validators.HL7Schema, Message: msg, Resource: c.resource}
			if validators.NullInPrimitiveArray.Explains(inv) && !c.defect {
				t.Errorf("%s: %q told as the defect", c.name, msg)
			}
		}
	}
	for _, inv := range []validators.Invalid{
		{Validator: validators.HL7Schema, Message: ".name[0].given[1] should be string", Resource: nullCases[0].resource},
		{Validator: validators.HL7Schema, Message: ".address[0].line[1] should be string", Resource: nullCases[1].resource},
	} {
		if !validators.NullInPrimitiveArray.Explains(inv) {
			t.Errorf("%+v: not told as the defect", inv)
		}
	}
	for _, inv := range []validators.Invalid{
		{Validator: validators.HL7Schema, Message: ".name[0].given[1] should be string"}, // no resource to judge by
		{Validator: validators.HL7Schema, Message: ".name[0].given[1] should be string", Resource: "{"},
		{Validator: validators.Medplum, Message: ".name[0].given[1] should be string", Resource: nullCases[0].resource},
		{Validator: validators.HL7Schema, Message: ".name[0].given[1] should be string or null", Resource: nullCases[0].resource},
	} {
		if validators.NullInPrimitiveArray.Explains(inv) {
			t.Errorf("%+v: told as the defect", inv)
		}
	}
	resources := make([][]byte, len(nullCases))
	for i, c := range nullCases {
		resources[i] = []byte(c.resource)
	}
	refused := make([]bool, len(nullCases))
	for _, inv := range validators.FHIR(t, resources).Invalid {
		if inv.Validator != validators.HL7Schema {
			continue
		}
		c := nullCases[inv.Index]
		refused[inv.Index] = true
		if !strings.HasSuffix(inv.Message, "] should be string") {
			t.Errorf("%s: the schema says %q, not the message of the defect: the case tests nothing", c.name, inv.Message)
		}
		if got := validators.NullInPrimitiveArray.Explains(inv); got != c.defect {
			t.Errorf("%s: the schema's %q told as the defect: %v, want %v", c.name, inv.Message, got, c.defect)
		}
	}
	for i, c := range nullCases {
		if !refused[i] {
			t.Errorf("%s: the schema takes it: the case tests nothing", c.name)
		}
	}
}
