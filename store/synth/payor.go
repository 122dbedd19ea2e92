package synth

import (
	"fmt"

	"github.com/google/uuid"
)

// payorNamespace derives a payer Organization's id from the tenant and
// the payer's name (a name-based UUID): the same for every patient and
// every seed, so that each Coverage's payor names one Organization of
// the data set, as R4 data does (Coverage.payor: Reference(Organization |
// Patient | RelatedPerson)).
var payorNamespace = uuid.MustParse("8d6f2a4e-1c3b-4f5a-9e7d-6b2c0a1f3e58")

// payorID is the id of the Organization of payer name in tenant.
func payorID(tenant, name string) string {
	return uuid.NewSHA1(payorNamespace, []byte(tenant+"\x00"+name)).String()
}

// payorEntry is the manifest line and the FHIR R4 Organization of payer
// name: tenant-level reference data (fhir://{tenant}/organization/{id},
// no patient), as an insurer is.
func (g *generator) payorEntry(name string) (manifestEntry, []byte) {
	id := payorID(g.opts.Tenant, name)
	org := map[string]any{
		"resourceType": "Organization",
		"id":           id,
		"meta":         map[string]any{"lastUpdated": g.opts.Now.Format(dateTimeFmt)},
		"active":       true,
		"type": []any{map[string]any{"coding": []any{coding{System: "http://terminology.hl7.org/CodeSystem/organization-type",
			Code: "pay", Display: "Payer"}}}},
		"name": name,
	}
	e := g.entry(person{}, "organization", id, fmt.Sprintf("fhir://%s/organization/%s", g.opts.Tenant, id),
		"Organization (payer)", "Insurance payer", mimeFHIR, "fhir/"+id+".json", 0.3, g.opts.Now, nil)
	return e, mustJSON(org)
}

// payor is a Coverage's payor: a reference to the payer's Organization,
// with its name.
func payor(tenant, name string) reference {
	return reference{Reference: "Organization/" + payorID(tenant, name), Display: name}
}
