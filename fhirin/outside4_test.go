package fhirin_test

import "testing"

// TestReadOutside4Examples reads the h-outside4 probe's national-profile
// R4 (minimize/testdata/outside4/fhir, README.md beside it: UK Core, ISiK
// and KBV, nl-core, AU Core, CA Baseline, CH Core EPR, FR Core and JP
// Core shapes — national identifiers with their extensions, _family,
// _given and _prefix name-part extensions, address lines with
// street/house-number/post-box extensions, kana and kanji names, narrative
// in seven languages) as custos import does: the R4 structure check
// (internal/fhirr4 Check) and the rest of the read must take all of them,
// as both reference validators (e2e/validators) do.
func TestReadOutside4Examples(t *testing.T) {
	types := map[string]int{}
	patients := map[string]bool{}
	items := readProbe(t, "outside4")
	for _, it := range items {
		types[it.Type]++
		patients[it.Patient] = true
	}
	n := len(items)
	if n != 18 || types["Patient"] != 9 || types["Coverage"] != 3 || types["Encounter"] != 3 || types["Observation"] != 2 || types["Condition"] != 1 {
		t.Errorf("read %d items %v, want 18: 9 Patients, 3 Coverages, 3 Encounters, 2 Observations, a Condition", n, types)
	}
	for _, p := range []string{"uk-o4", "de-o4", "VSDMPatient-GKV-V731904826", "nl-o4", "au-o4", "ca-o4", "ch-o4", "fr-o4", "jp-o4"} {
		if !patients[p] {
			t.Errorf("no item in the compartment of Patient/%s (compartments read: %v)", p, patients)
		}
	}
}
