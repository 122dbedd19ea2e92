package minimize

import (
	"encoding/json"
	"math"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// restrictedZIP3 lists the three-digit ZIP code prefixes whose combined
// population is 20,000 or fewer; HIPAA Safe Harbor (45 CFR
// 164.514(b)(2)(i)(B)) requires them to be released as "000". It is the
// union of two tables, so a prefix restricted by either stays restricted
// (fail closed: a newer census may add prefixes, never release one here):
//
//   - 2000 Census: HHS Office for Civil Rights, "Guidance Regarding Methods
//     for De-identification of Protected Health Information in Accordance
//     with the Health Insurance Portability and Accountability Act (HIPAA)
//     Privacy Rule" (November 26, 2012), question "When can ZIP codes be
//     included in de-identified information?": the 17 restricted
//     three-digit ZCTAs 036, 059, 063, 102, 203, 556, 692, 790, 821, 823,
//     830, 831, 878, 879, 884, 890, 893 (see also the preamble to the final
//     rule, 67 FR 53182, 53233-53234, August 14, 2002).
//   - 2010 Census: the three-digit ZCTAs of 20,000 people or fewer in the
//     2010 Census ZCTA populations, the table de-identification pipelines
//     use since HHS, in the same guidance, tells covered entities to use
//     the most current Census data: 036, 059, 102, 202, 203, 204, 205, 369,
//     556, 692, 753, 772, 821, 823, 878, 879, 884, 893. It adds 202, 204,
//     205, 369, 753 and 772: 202, 204, 369, 753 and 772 were released as
//     their digits until h-deid11 (205 was "000" already, as a prefix of
//     no resident population: nonPopulatedZIP3).
//
// It is never modified; use RestrictedZIP3 for a copy.
var restrictedZIP3 = func() map[string]bool {
	m := setOf(restrictedZIP3Census2000...)
	for _, z := range restrictedZIP3Census2010 {
		m[z] = true
	}
	return m
}()

// restrictedZIP3Census2000 and restrictedZIP3Census2010 are the two
// tables of restrictedZIP3, as their sources list them.
var (
	restrictedZIP3Census2000 = []string{"036", "059", "063", "102", "203", "556", "692", "790", "821",
		"823", "830", "831", "878", "879", "884", "890", "893"}
	restrictedZIP3Census2010 = []string{"036", "059", "102", "202", "203", "204", "205", "369", "556",
		"692", "753", "772", "821", "823", "878", "879", "884", "893"}
)

// populatedZIP3 reports whether ZIP3 z may be released: it is a prefix
// USPS assigns to the addresses of a state, DC or a territory
// (zip3Ranges, USPS's list of three-digit ZIP code prefixes, L002), not
// one of the armed forces' "states" AA, AE and AP, not a prefix of no
// resident population (nonPopulatedZIP3), and not restricted
// (restrictedZIP3). Safe Harbor keeps a ZIP3 only if the area of its ZIP
// codes holds more than 20,000 people; a prefix with none holds 20,000 or
// fewer, and the restricted ZIP3s, computed from census areas, could
// not list it. Until 2026-12-06 every prefix but those 17 was released:
// 090-098 (APO/FPO Europe), 205 (federal agencies), 000 to 004 (never
// assigned) among them. This is fail closed only in part: a prefix within
// a state's range that USPS has not assigned (213 in Maryland's 205-219)
// and a populated prefix of 20,000 people or fewer in a census after 2010
// are still released (docs/policy.md, residual limits).
func populatedZIP3(z string) bool {
	n, err := strconv.Atoi(z)
	if err != nil || len(z) != 3 || restrictedZIP3[z] || nonPopulatedZIP3[z] {
		return false
	}
	for state, ranges := range zip3Ranges {
		if armedForces[state] {
			continue
		}
		for _, r := range ranges {
			if r[0] <= n && n <= r[1] {
				return true
			}
		}
	}
	return false
}

// armedForces are the armed forces' postal "states" (APO, FPO, DPO): their
// ZIP codes are military post offices, with no resident population in
// the census's ZIP code tabulation areas.
var armedForces = setOf("AA", "AE", "AP")

// nonPopulatedZIP3 are the prefixes within a state's range (zip3Ranges)
// whose ZIP codes are all unique ZIP codes of an agency or a military
// post office, with no resident population: 005 (the IRS at Holtsville,
// NY: 00501, 00544; the census's ZIP code tabulation areas begin at
// 00601), 055 (the IRS at Andover, MA: 05501, 05544, inside Vermont's
// 050-059 here), 205 (federal agencies in Washington, DC: 20500 the White House,
// 20515 the House, 20530 Justice, ...) and 340 (APO/FPO Americas, which
// USPS's L002 list gives to AA inside Florida's 320-349), and 733 (the
// IRS at Austin, TX: 73301, 73344; inside Texas's ranges, released until
// h-review25, as 005 and 055 had been until h-deid9).
var nonPopulatedZIP3 = setOf("005", "055", "205", "340", "733")

// RestrictedZIP3 returns, in ascending order, the three-digit ZIP prefixes
// that generalize:zip3 replaces with "000" (the 2000 and 2010 Census
// tables together; see restrictedZIP3 for the sources). The slice is a fresh copy.
func RestrictedZIP3() []string {
	out := make([]string, 0, len(restrictedZIP3))
	for z := range restrictedZIP3 {
		out = append(out, z)
	}
	sort.Strings(out)
	return out
}

const (
	masked = "***" // replacement for masked or unrecognized values
	over89 = "90+" // Safe Harbor aggregate for ages over 89
)

// fhirDate matches FHIR R4 date, dateTime and instant values ("2024",
// "2024-03", "2024-03-05", "2024-03-05T10:00:00Z", "...T10:00:00.123+05:30").
// Seconds are optional (lenient); the result of generalization is only the
// year, so leniency cannot leak anything.
var fhirDate = regexp.MustCompile(`^([0-9]{4})(?:-(0[1-9]|1[0-2])(?:-(0[1-9]|[12][0-9]|3[01])` +
	`(?:T(?:[01][0-9]|2[0-3]):[0-5][0-9](?::(?:[0-5][0-9]|60)(?:\.[0-9]{1,9})?)?` +
	`(?:Z|[+-](?:(?:0[0-9]|1[0-3]):[0-5][0-9]|14:00))?)?)?)?$`)

// usZIP matches a 5-digit ZIP, a ZIP+4, or an already generalized ZIP3.
var usZIP = regexp.MustCompile(`^([0-9]{3})(?:[0-9]{2}(?:-[0-9]{4})?)?$`)

// ageString matches a non-negative decimal age in a string.
var ageString = regexp.MustCompile(`^[0-9]+(?:\.[0-9]+)?$`)

// generalize applies generalize function fn to one value. Values that are not
// of the expected form become "***" (fail closed).
func generalize(fn string, v any, now time.Time) any {
	switch fn {
	case GeneralizeYear:
		s, ok := v.(string)
		if !ok {
			return masked
		}
		m := fhirDate.FindStringSubmatch(s)
		if m == nil {
			return masked
		}
		return m[1]
	case GeneralizeZIP3:
		s, ok := v.(string)
		if !ok {
			return masked
		}
		m := usZIP.FindStringSubmatch(s)
		if m == nil {
			return masked
		}
		if !populatedZIP3(m[1]) {
			return "000"
		}
		return m[1]
	case GeneralizeAge90:
		return generalizeAge(v)
	case GeneralizeBirthYear90:
		return generalizeBirthYear(v, now)
	}
	// Unreachable: obligations are validated before they are applied.
	return masked
}

func generalizeAge(v any) any {
	var text string
	switch a := v.(type) {
	case json.Number:
		text = string(a)
	case string:
		if a == over89 {
			return a
		}
		if !ageString.MatchString(a) {
			return masked
		}
		text = a
	default:
		return masked
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return masked
	}
	if f > 89 {
		return over89
	}
	return v
}

func generalizeBirthYear(v any, now time.Time) any {
	s, ok := v.(string)
	if !ok {
		return masked
	}
	if s == over89 {
		return s
	}
	m := fhirDate.FindStringSubmatch(s)
	if m == nil {
		return masked
	}
	y, _ := strconv.Atoi(m[1])
	// A partial date is taken at its earliest possible day, which gives the
	// greatest possible age: "1934" is treated as 1934-01-01 (fail closed).
	mo, d := 1, 1
	if m[2] != "" {
		mo, _ = strconv.Atoi(m[2])
	}
	if m[3] != "" {
		d, _ = strconv.Atoi(m[3])
	}
	if len(s) > 10 {
		// A dateTime's date is local to its zone, up to a day ahead of
		// UTC: take the day before, the greater age (fail closed).
		t := time.Date(y, time.Month(mo), d-1, 0, 0, 0, 0, time.UTC)
		y, mo, d = t.Year(), int(t.Month()), t.Day()
	}
	if ageAt(y, mo, d, now) > 89 {
		return over89
	}
	return m[1]
}

// ageAt returns the age in completed years at now's UTC date of someone born
// on y-m-d.
func ageAt(y, m, d int, now time.Time) int {
	ny, nm, nd := now.UTC().Date()
	age := ny - y
	if int(nm) < m || int(nm) == m && nd < d {
		age--
	}
	return age
}
