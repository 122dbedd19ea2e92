package fhirin

import (
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/e2e/validators"
	"github.com/custos-mcp/custos/store/synth"
)

// What Read yields as resources is valid FHIR R4 to the outside validators
// (HL7's JSON schema, Medplum's validateResource): resolving references and
// replacing inline attachment data by a link keep a resource valid. The
// inputs are the test Bulk export, the Synthea-shaped Bundle and the Bulk
// export `custos seed` writes.
func TestBodiesAreValidFHIR(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "seed")
	if _, err := synth.Generate(t.Context(), seed, synth.Options{Patients: 6}); err != nil {
		t.Fatal(err)
	}
	var bodies [][]byte
	var where []string
	for _, p := range []string{"testdata/bulk", "testdata/synthea-bundle.json", filepath.Join(seed, synth.BulkManifestFile)} {
		for _, it := range mustReadAll(t, p) {
			if it.MIMEType == FHIRJSON {
				bodies = append(bodies, it.Body)
				where = append(where, it.Where)
			}
		}
	}
	rep := validators.FHIR(t, bodies)
	for _, bad := range rep.Invalid {
		t.Errorf("%s: %s: %s", where[bad.Index], bad.Validator, bad.Message)
	}
}
