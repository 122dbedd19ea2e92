package validators_test

import (
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
