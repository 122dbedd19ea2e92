package fhirin

import (
	"slices"

	"github.com/custos-mcp/custos/store"
)

// LabelSystem is the custos code system for security labels that HL7 has
// no code for (VIP), or that a source prefers to write directly: its codes
// are the custos sensitivity label values themselves.
const LabelSystem = "https://github.com/custos-mcp/custos/fhir/CodeSystem/label"

// Code systems by every URI they are written with: canonical, the same
// under https (a common misspelling of the canonical URI, which names the
// same system), pre-R4, OID (labelsOf also takes the OID bare).
var (
	confidentialitySystems = []string{"http://terminology.hl7.org/CodeSystem/v3-Confidentiality", "https://terminology.hl7.org/CodeSystem/v3-Confidentiality",
		"http://hl7.org/fhir/v3/Confidentiality", "urn:oid:2.16.840.1.113883.5.25"}
	actCodeSystems      = store.ActCodeSystems
	usPrivacyLawSystems = []string{"http://terminology.hl7.org/CodeSystem/v3-ActUSPrivacyLaw", "https://terminology.hl7.org/CodeSystem/v3-ActUSPrivacyLaw",
		"http://hl7.org/fhir/v3/ActUSPrivacyLaw", "urn:oid:2.16.840.1.113883.5.1138"}
)

// The mapping from security label codes to custos sensitivity labels
// (docs/import.md, "Labels"). Codes not listed carry no label: N, L, M and
// U confidentiality are the ordinary levels, and other sensitivity codes
// have no rule in the default policy. An ActCode sensitivity code below one
// the policy knows (HL7's _ActInformationSensitivityPolicy hierarchy: BH
// and MH beside PSY, OPIOIDUD and ETHUD below SUD) maps to the same label:
// it names a kind of that information. TestLabelCodesAreHL7 checks every
// code against the R4 code systems.
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
		"SUD":        "sud", // substance use disorder information sensitivity
		"ETHUD":      "sud", // alcohol use disorder information sensitivity (below SUD)
		"OPIOIDUD":   "sud", // opioid use disorder information sensitivity (below SUD)
		"42CFRPart2": "sud", // ActPolicy 42 CFR Part 2 (substance use disorder records)
		"PSY":        "psy", // psychiatry disorder information sensitivity
		"MH":         "psy", // mental health information sensitivity
		"PSYTHPN":    "psy", // psychotherapy note information sensitivity
		"BH":         "psy", // behavioral health information sensitivity
		"COGN":       "psy", // cognitive disability information sensitivity (below BH)
		"DVD":        "psy", // developmental disability information sensitivity (below BH)
		"EMOTDIS":    "psy", // emotional disturbance information sensitivity (below BH)
		"SDV":        "sdv", // sexual assault, abuse, or domestic violence information sensitivity
		"MST":        "sdv", // military sexual trauma information sensitivity
		"STD":        "std",
		"SEX":        "sex",
		"CEL":        "vip", // celebrity information sensitivity
		"CELEB":      "vip", // not in R4's v3-ActCode (HL7's code is CEL), but custos seed writes it and sources copy it
	}
	// usPrivacyLawLabels are v3-ActUSPrivacyLaw's codes (the same codes as
	// ActCode's _ActUSPrivacyLaw).
	usPrivacyLawLabels = map[string]string{"42CFRPart2": "sud"}
	// customLabels are LabelSystem's codes.
	customLabels = map[string]string{"vip": "vip", "hiv": "hiv", "sud": "sud", "psy": "psy", "eth": "eth",
		"sdv": "sdv", "std": "std", "sex": "sex", "restricted": "restricted", "very-restricted": "very-restricted",
		ResidenceLabel: ResidenceLabel}
)

// labelsOf maps security codings to sorted, distinct custos labels.
func labelsOf(cs []coding) []string {
	var out []string
	for _, c := range cs {
		if bareOID(c.System) {
			// A system written as a bare OID, as converters from C-CDA
			// and HL7 v2 write one ("2.16.840.1.113883.5.25"): the code
			// system of that OID. The label was lost.
			c.System = "urn:oid:" + c.System
		}
		var table map[string]string
		switch {
		case slices.Contains(confidentialitySystems, c.System):
			table = confidentialityLabels
		case slices.Contains(actCodeSystems, c.System):
			table = actCodeLabels
		case slices.Contains(usPrivacyLawSystems, c.System):
			table = usPrivacyLawLabels
		case c.System == LabelSystem:
			table = customLabels
		case c.System == "":
			// A security code written without its system ({"code":"R"}):
			// a label must not be lost by being overlooked, and no code
			// means two labels in the tables above, so it is read in all.
			for _, t := range []map[string]string{confidentialityLabels, actCodeLabels, usPrivacyLawLabels, customLabels} {
				if l, ok := t[c.Code]; ok {
					out = append(out, l)
				}
			}
			continue
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

// bareOID reports whether s is an OID without its urn:oid: prefix: digits
// and dots, starting with 0, 1 or 2 (ITU-T X.660's top arcs).
func bareOID(s string) bool {
	if len(s) < 3 || s[0] < '0' || s[0] > '2' || s[1] != '.' || s[len(s)-1] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '.' || s[i] == '.' && s[i-1] == '.' {
			return false
		}
	}
	return true
}
