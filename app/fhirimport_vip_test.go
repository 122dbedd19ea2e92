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

// A Patient whose photo names a Binary shares its labels with it like any
// resource naming a Binary (docs/import.md, "Labels"): its CEL is then also
// a label of the Binary's component, which an incremental import never
// takes away (the Binary keeps it and gives it back), so that patient
// stops being a VIP only with a full import holding the Patient, the
// Binary and its carriers. The safe side, documented in "Patient-wide
// labels"; this pins it.
func TestVIPThroughAPhotoLeavesWithAFullImport(t *testing.T) {
	f := newLinkFixture(t)
	pat := func(cel bool) string {
		sec := ""
		if cel {
			sec = `"meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"CEL"}]},`
		}
		return `{"resourceType":"Patient","id":"p",` + sec + `"photo":[{"contentType":"text/plain","url":"Binary/bx"}]}`
	}
	all := map[string][]string{"Patient": {pat(true)}, "Binary": {lnkBin}, "DocumentReference": {lnkDoc("d", "bx", "a")}}
	f.mustImp(true, all)
	f.mustImp(false, map[string][]string{"Patient": {pat(false)}})
	for _, typ := range []string{"Patient", "Binary", "DocumentReference"} {
		id := map[string]string{"Patient": "p", "Binary": "bx", "DocumentReference": "d"}[typ]
		f.want(typ, id, "p", "vip")
	}
	all["Patient"] = []string{pat(false)}
	f.mustImp(true, all)
	f.want("Patient", "p", "p")
	f.want("Binary", "bx", "p")
	f.want("DocumentReference", "d", "p")
}
