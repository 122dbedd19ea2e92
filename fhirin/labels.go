package fhirin

import "slices"

// LabelSystem is the custos code system for security labels that HL7 has
// no code for (VIP), or that a source prefers to write directly: its codes
// are the custos sensitivity label values themselves.
const LabelSystem = "https://github.com/custos-mcp/custos/fhir/CodeSystem/label"

// Code systems by every URI they are written with (canonical, pre-R4, OID).
var (
	confidentialitySystems = []string{"http://terminology.hl7.org/CodeSystem/v3-Confidentiality", "http://hl7.org/fhir/v3/Confidentiality", "urn:oid:2.16.840.1.113883.5.25"}
	actCodeSystems         = []string{"http://terminology.hl7.org/CodeSystem/v3-ActCode", "http://hl7.org/fhir/v3/ActCode", "urn:oid:2.16.840.1.113883.5.4"}
)

// The mapping from meta.security codes to custos sensitivity labels
// (docs/import.md, "Labels"). Codes not listed carry no label: N, L, M and
// U confidentiality are the ordinary levels, and other sensitivity codes
// have no rule in the default policy.
var (
	confidentialityLabels = map[string]string{
		"R": "restricted",
		"V": "very-restricted",
		// R4's v3-Confidentiality still holds these retired codes, which
		// older sources write instead of the ActCode ones.
		"HIV": "hiv",
		"ETH": "eth",
		"PSY": "psy",
		"SDV": "sdv",
	}
	actCodeLabels = map[string]string{
		"HIV":        "hiv",
		"ETH":        "eth", // substance abuse information sensitivity
		"PSY":        "psy",
		"SDV":        "sdv",
		"STD":        "std",
		"SEX":        "sex",
		"SUD":        "sud", // substance use disorder information sensitivity
		"42CFRPart2": "sud", // ActPolicy 42 CFR Part 2 (substance use disorder records)
		"CELEB":      "vip", // celebrity information sensitivity
	}
	// customLabels are LabelSystem's codes.
	customLabels = map[string]string{"vip": "vip", "hiv": "hiv", "sud": "sud", "psy": "psy", "eth": "eth",
		"sdv": "sdv", "std": "std", "sex": "sex", "restricted": "restricted", "very-restricted": "very-restricted"}
)

// labelsOf maps security codings to sorted, distinct custos labels.
func labelsOf(cs []coding) []string {
	var out []string
	for _, c := range cs {
		var table map[string]string
		switch {
		case slices.Contains(confidentialitySystems, c.System):
			table = confidentialityLabels
		case slices.Contains(actCodeSystems, c.System):
			table = actCodeLabels
		case c.System == LabelSystem:
			table = customLabels
		default:
			continue
		}
		if l, ok := table[c.Code]; ok {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// isOptOut reports whether a Consent records an opt-out: status "active"
// and a base provision of type "deny" (exceptions nested under it do not
// lift it: an opt-out with exceptions still stops every use but treatment
// under the default policy, which is the safer reading). provision.period
// is not evaluated: a Consent that no longer applies must not be active.
func isOptOut(m map[string]any) bool {
	if m["status"] != "active" {
		return false
	}
	p, _ := m["provision"].(map[string]any)
	return p["type"] == "deny"
}
