package validators_test

import (
	"encoding/json"
	"testing"

	"github.com/custos-mcp/custos/e2e/validators"
)

// TestFHIRReportsAnInvalidResource: the runner is not vacuous. An
// AuditEvent without its required elements and with an empty string is
// rejected, by index; a valid Patient passes.
func TestFHIRReportsAnInvalidResource(t *testing.T) {
	rep := validators.FHIR(t, [][]byte{
		[]byte(`{"resourceType":"Patient","id":"p1","gender":"female"}`),
		[]byte(`{"resourceType":"AuditEvent","id":"a1","outcomeDesc":""}`),
	})
	if len(rep.Invalid) == 0 {
		t.Fatal("an invalid AuditEvent passed both validators")
	}
	for _, inv := range rep.Invalid {
		if inv.Index != 1 {
			t.Errorf("resource %d reported invalid (%s: %s); only resource 1 is", inv.Index, inv.Validator, inv.Message)
		}
	}
}

// TestFHIRReportsInFullOnAPipe: a report longer than a pipe's buffer
// (64 KiB on Linux) reaches the caller whole. validate.mjs wrote it and
// called process.exit, which does not wait for a write to a pipe to
// finish, so that such a report was cut short ("validators: unexpected
// end of JSON input") and TestCheckAgreesWithReference failed on the
// batch that held minimize/testdata/outside3's collection Bundle, whose
// one null in _given gets HL7's schema to report every resource type's
// branch of its oneOf.
func TestFHIRReportsInFullOnAPipe(t *testing.T) {
	// Each is valid for HL7's schema (which is slow on an invalid
	// resource) and breaks one invariant for Medplum's validator: about
	// 200 bytes of report each.
	const n = 5000
	resources := make([][]byte, n)
	for i := range resources {
		resources[i] = []byte(`{"resourceType":"AllergyIntolerance","id":"a","verificationStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/allergyintolerance-verification","code":"confirmed"}]},"patient":{"reference":"Patient/p"}}`)
	}
	rep := validators.FHIR(t, resources)
	seen := map[int]bool{}
	for _, inv := range rep.Invalid {
		seen[inv.Index] = true
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != n || len(b) < 1<<16 {
		t.Errorf("the report (%d bytes) names %d of %d invalid resources, want all of them in more than 64 KiB", len(b), len(seen), n)
	}
}
