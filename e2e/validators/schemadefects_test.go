package validators_test

import (
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
