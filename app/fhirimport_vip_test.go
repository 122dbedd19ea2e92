package app

import (
	"testing"
)

// lnkPatVIP is Patient p labelled CEL (celebrity): a VIP.
const lnkPatVIP = `{"resourceType":"Patient","id":"p","meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"CEL"}]}}`

// A VIP's chart carries vip (docs/import.md, "Patient-wide labels"), and
// loses it with the Patient's CEL, also when an incremental import holds
// a carrier of a stored Binary: the Binary's patient-wide vip is not a
// label of its own that its component shares. Before, the importer read
// the stored Binary's labels whole, so d and bx kept vip as their own
// after p stopped being a VIP, until a full import.
func TestVIPLeavesAStoredBinaryComponent(t *testing.T) {
	f := newLinkFixture(t)
	f.mustImp(true, map[string][]string{"Patient": {lnkPatVIP}, "Binary": {lnkBin}, "DocumentReference": {lnkDoc("d", "bx", "a")}})
	f.want("Patient", "p", "p", "vip")
	f.want("Binary", "bx", "p", "vip")
	f.want("DocumentReference", "d", "p", "vip")
	if r, _ := f.get("Binary", "bx", "p"); len(r.PatientWide) != 1 {
		t.Errorf("bx: patient-wide %v, want [vip]", r.PatientWide)
	}

	// p is no VIP any more; d changed and names bx, which this import
	// does not hold.
	f.mustImp(false, map[string][]string{"Patient": {lnkPat}, "DocumentReference": {lnkDoc("d", "bx", "b")}})
	f.want("Patient", "p", "p")
	f.want("Binary", "bx", "p")
	f.want("DocumentReference", "d", "p")
}
