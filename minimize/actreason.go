package minimize

import "slices"

// actReasonSystem is the HL7 v3 ActReason code system: its codes include
// every purpose of use (the v3 PurposeOfUse value set is drawn from it).
const actReasonSystem = "http://terminology.hl7.org/CodeSystem/v3-ActReason"

// IsActReasonCode reports whether code is a concept code of HL7 v3
// ActReason as FHIR R4's terminology lists it (fhircodes_gen.go, generated
// from the R4 definitions), such as HOPERAT, PATRQT or HLEGAL. Abstract
// codes (leading '_') are not purposes a caller can state.
func IsActReasonCode(code string) bool {
	if code == "" || code[0] == '_' {
		return false
	}
	return slices.Contains(fhirCodeSystemCodes[actReasonSystem], code)
}
