package minimize_test

import (
	"fmt"
	"time"

	"github.com/custos-mcp/custos/minimize"
)

func Example() {
	patient := []byte(`{
	  "resourceType": "Patient",
	  "name": [{"family": "Doe", "given": ["Jane"]}],
	  "telecom": [{"system": "phone", "value": "(617) 555-0142"}],
	  "birthDate": "1934-05-01",
	  "address": [{"state": "MA", "postalCode": "02139-4307"}]
	}`)
	obs := []minimize.Obligation{
		{Op: minimize.OpRemove, Path: "/name"},
		{Op: minimize.OpMask, Path: "/telecom/*/value", Fn: "last4"},
		{Op: minimize.OpGeneralize, Path: "/birthDate", Fn: "birthyear90"},
		{Op: minimize.OpGeneralize, Path: "/address/*/postalCode", Fn: "zip3"},
	}
	if err := minimize.ValidateAll(obs); err != nil {
		fmt.Println("policy error:", err)
		return
	}
	now := time.Date(2026, time.November, 21, 0, 0, 0, 0, time.UTC)
	out, err := minimize.Apply("application/fhir+json", patient, obs, minimize.Options{Now: now})
	if err != nil {
		fmt.Println("withheld:", err)
		return
	}
	fmt.Println(string(out))
	for _, o := range obs {
		fmt.Println(o) // the audit log's form
	}
	// Output:
	// {"_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]},"address":[{"postalCode":"021","state":"MA"}],"meta":{"security":[{"code":"REDACTED","system":"http://terminology.hl7.org/CodeSystem/v3-ObservationValue"}]},"resourceType":"Patient","telecom":[{"system":"phone","value":"***0142"}]}
	// remove:/name
	// mask:/telecom/*/value:last4
	// generalize:/birthDate:birthyear90
	// generalize:/address/*/postalCode:zip3
}

func ExampleText() {
	note := []byte("Seen 3/5/24. Call (617) 555-0142 or jane@example.org; MRN-00123456, SSN 123-45-6789.")
	out, err := minimize.Text(note, []minimize.Obligation{{Op: minimize.OpScrub, Path: ""}}, minimize.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
	// Output: Seen [DATE]. Call [PHONE] or [EMAIL]; [MRN], SSN [SSN].
}

func ExampleScrubString() {
	fmt.Println(minimize.ScrubString("Discharge summary, March 5, 2024 (MRN: 12345678)"))
	// Output: Discharge summary, [DATE] ([MRN])
}

func ExampleApply_binary() {
	pdf := []byte("%PDF-1.7 ...")
	_, err := minimize.Apply("application/pdf", pdf, []minimize.Obligation{{Op: minimize.OpScrub}}, minimize.Options{})
	fmt.Println(err)
	// Output: minimize: binary payload withheld: obligations cannot be applied to binary content
}

// An allow-list keeps only the elements it names (and resourceType);
// obligations before it still see the whole resource. The view of a FHIR
// resource is labelled REDACTED in meta.security.
func ExampleApply_allowList() {
	obs := []byte(`{"resourceType": "Observation", "id": "4f1c", "status": "final",
	  "subject": {"reference": "Patient/7d1a", "display": "Jane Doe"},
	  "code": {"text": "Hemoglobin A1c"}, "effectiveDateTime": "2026-03-05T09:55:00-05:00",
	  "valueQuantity": {"value": 7.4, "unit": "%"}}`)
	research := []minimize.Obligation{
		{Op: minimize.OpGeneralize, Path: "/effectiveDateTime", Fn: "year"},
		{Op: minimize.OpAllow, Path: "", Fn: "/status,/code,/effectiveDateTime,/valueQuantity"},
	}
	out, err := minimize.Apply("application/fhir+json", obs, research, minimize.Options{})
	if err != nil {
		fmt.Println("withheld:", err)
		return
	}
	fmt.Println(string(out))
	for _, o := range research {
		fmt.Println(o.HL7Code(), o)
	}
	// Output:
	// {"code":{"text":"Hemoglobin A1c"},"effectiveDateTime":"2026","meta":{"security":[{"code":"REDACTED","system":"http://terminology.hl7.org/CodeSystem/v3-ObservationValue"}]},"resourceType":"Observation","status":"final","valueQuantity":{"unit":"%","value":7.4}}
	// DEID generalize:/effectiveDateTime:year
	// MINEC allow::/status,/code,/effectiveDateTime,/valueQuantity
}
