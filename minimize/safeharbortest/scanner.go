// Package safeharbortest is the Safe Harbor scanner of custos's tests: it
// finds, in a JSON document, the 18 HIPAA Safe Harbor identifier classes of
// 45 CFR 164.514(b)(2)(i)(A)-(R), by the identifying strings it was given
// (Add, Collect) and by the forms the classes take (dates finer than a year,
// ZIPs longer than three digits, UUIDs, literal references, URLs, IP
// addresses, identifier-like tokens, photos and encoded content, bare whole
// numbers of seven digits or more, ISO 3166-2 codes of units smaller than a
// state, countries of 20,000 people or fewer, any year (a birth, an event,
// a questionnaire answer's)
// of someone over 89). The
// research (HRESCH) tests of packages rego, minimize and server scan what
// custos releases with it: zero findings, and a positive control on the
// raw data that finds them.
//
// It is a test helper: it never runs in the server.
package safeharbortest

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/custos-mcp/custos/minimize"
)

// The 18 HIPAA Safe Harbor identifier classes, 45 CFR 164.514(b)(2)(i)(A)-(R).
const (
	ClassNames       = "A names"
	ClassGeography   = "B geography smaller than a state"
	ClassDates       = "C dates (except year) and ages over 89"
	ClassPhone       = "D telephone numbers"
	ClassFax         = "E fax numbers"
	ClassEmail       = "F e-mail addresses"
	ClassSSN         = "G social security numbers"
	ClassMRN         = "H medical record numbers"
	ClassHealthPlan  = "I health plan beneficiary numbers"
	ClassAccount     = "J account numbers"
	ClassLicense     = "K certificate/license numbers"
	ClassVehicle     = "L vehicle identifiers"
	ClassDevice      = "M device identifiers and serial numbers"
	ClassURL         = "N web URLs"
	ClassIP          = "O IP addresses"
	ClassBiometric   = "P biometric identifiers"
	ClassPhoto       = "Q full-face photographs"
	ClassOtherUnique = "R other unique identifying numbers, characteristics, codes"
)

var AllClasses = []string{ClassNames, ClassGeography, ClassDates, ClassPhone, ClassFax, ClassEmail,
	ClassSSN, ClassMRN, ClassHealthPlan, ClassAccount, ClassLicense, ClassVehicle, ClassDevice,
	ClassURL, ClassIP, ClassBiometric, ClassPhoto, ClassOtherUnique}

// terminologySystems are code system URIs. They name vocabularies, not
// people, and may stay; any other URL or URN in an output is a leak. They
// are the ones the deidentify walk keeps (minimize.TerminologySystems):
// a list of the scanner's own lagged behind the walk's (NCI Thesaurus,
// HGNC, the Sequence Ontology, ATC and genomics reporting's TBD codes,
// which research views keep, were findings). The codes under them are
// judged by the walk's code checks, not here.
var terminologySystems = minimize.TerminologySystems()

var (
	fullDateRE  = regexp.MustCompile(`(1[89]|20)\d\d-(0[1-9]|1[0-2])|\bT?\d\d:\d\d|\b\d{1,2}/\d{1,2}/\d{2,4}\b`)
	uuidRE      = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	referenceRE = regexp.MustCompile(`\b(Patient|RelatedPerson|Person|Practitioner|PractitionerRole|Organization|Location|` +
		`Encounter|EpisodeOfCare|Condition|Observation|MedicationRequest|Coverage|Device|Group|Account|` +
		`DocumentReference|DiagnosticReport|Procedure|ServiceRequest)/[A-Za-z0-9.-]{1,64}`) // literal FHIR references
	ipRE      = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b|\b[0-9a-f]{1,4}(:[0-9a-f]{0,4}){3,7}\b`)
	urlRE     = regexp.MustCompile(`(?i)\b(https?|ftp|urn|mailto|tel|file|data):|\bwww\.`)
	idTokenRE = regexp.MustCompile(`\b[A-Za-z]{1,5}-?\d{5,}\b`) // MRN-00123456, W123456789, ENC-..., GRP-...
	ageKeyRE  = regexp.MustCompile(`^age$|Age$`)                // age, onsetAge, abatementAge
	// ageRangeKeyRE: ranges that hold ages (FamilyMemberHistory.ageRange,
	// Condition.onsetRange, ReferenceRange.age ...), unitless values in years.
	ageRangeKeyRE = regexp.MustCompile(`^age(Range)?$|^(onset|abatement|deceased|performed)Range$`)
	birthKeyRE    = regexp.MustCompile(`^birthDate$|^born`)
	yearRE        = regexp.MustCompile(`^((1[89]|20)\d\d)(-\d\d(-\d\d(T.*)?)?)?$`)
)

// timeUnitYears are units of time (UCUM codes and common unit texts) in
// years: a quantity in one of them is an age or a duration, and one of
// over 89 years can only be an age.
var timeUnitYears = map[string]float64{
	"a": 1, "y": 1, "yr": 1, "yrs": 1, "year": 1, "years": 1, "mo": 1.0 / 12, "month": 1.0 / 12,
	"months": 1.0 / 12, "wk": 7 / 365.25, "week": 7 / 365.25, "weeks": 7 / 365.25, "d": 1 / 365.25,
	"day": 1 / 365.25, "days": 1 / 365.25,
}

// LOINC codes of Observations whose value is an age, or a birth date or
// year (the HL7 LOINCObservationActContextAgeType value set and age at
// death; birth date, birth year).
var ageLOINC = []string{"30525-0", "21611-9", "21612-7", "29553-5", "30972-4", "39016-1", "63900-5"}
var birthLOINC = []string{"21112-8", "80904-6"}

// Scanner finds the Safe Harbor identifier classes in a JSON document.
type Scanner struct {
	known   map[string]string // identifying string -> class
	values  []string          // keys of known, longest first
	nowYear int               // reference year for ages
	// permitted, if set, says which reference values are research aliases
	// the caller is shown anyway (they are then not flagged).
	permitted func(reference string) bool
}

// PermitReferences makes the scanner accept the reference values f reports
// true for: references by research alias, which the caller is shown in its
// URIs anyway. Everything else in them is still scanned.
func (s *Scanner) PermitReferences(f func(reference string) bool) { s.permitted = f }

func NewScanner(nowYear int) *Scanner {
	return &Scanner{known: map[string]string{}, nowYear: nowYear}
}

// Add registers identifying strings of a class (short strings match
// anything and are ignored, as synth.Identifiers does).
func (s *Scanner) Add(class string, vals ...string) {
	for _, v := range vals {
		if len(v) >= 3 {
			if _, dup := s.known[v]; !dup {
				s.known[v] = class
				s.values = append(s.values, v)
			}
		}
	}
	sort.Slice(s.values, func(i, j int) bool { return len(s.values[i]) > len(s.values[j]) })
}

// A Finding names a class and where it was found (a JSON pointer), never
// the value.
type Finding struct{ Class, Where string }

// Scan decodes doc and reports every identifier it holds.
func (s *Scanner) Scan(doc []byte) []Finding {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return []Finding{{ClassOtherUnique, "(not JSON)"}}
	}
	var out []Finding
	s.walk("", "", v, &out)
	s.agePlusYear(v, &out)
	return out
}

// agePlusYear finds, in each resource of v (a top-level one and each
// Bundle entry's), an age at an event and a year that together tell the
// birth year of someone now over 89: the greatest age it holds, carried
// from the earliest year of a date it holds (birth dates apart) to
// nowYear, is over 89.
func (s *Scanner) agePlusYear(v any, out *[]Finding) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	maxAge, minYear := -1.0, 0
	var visit func(key string, v any, inEntry bool)
	visit = func(key string, v any, inEntry bool) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["resourceType"]; ok && inEntry {
				s.agePlusYear(x, out) // a resource of its own: judged alone
				return
			}
			if years, ok := quantityAge(key, x); ok {
				maxAge = max(maxAge, years)
			}
			for k, c := range x {
				visit(k, c, k == "resource")
			}
		case []any:
			for _, c := range x {
				visit(key, c, false)
			}
		case string:
			if m := yearRE.FindStringSubmatch(x); m != nil && !birthKeyRE.MatchString(key) && key != "code" && key != "value" {
				if y, _ := strconv.Atoi(m[1]); minYear == 0 || y < minYear {
					minYear = y
				}
			}
		}
	}
	for k, c := range m {
		visit(k, c, k == "resource")
	}
	if maxAge >= 0 && minYear > 0 && float64(s.nowYear-minYear)+maxAge > 89 {
		*out = append(*out, Finding{ClassDates, "(an age and a year: a birth year of someone over 89)"})
	}
}

// quantityAge returns the age in years that x, the value of member key,
// states: a quantity in a unit of time, or any number under an age key.
func quantityAge(key string, x map[string]any) (float64, bool) {
	n, ok := x["value"].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil {
		return 0, false
	}
	for _, k := range []string{"code", "unit"} {
		if u, ok := x[k].(string); ok {
			if per, ok := timeUnitYears[strings.ToLower(u)]; ok {
				return f * per, true
			}
		}
	}
	return f, ageKeyRE.MatchString(key)
}

// loincCode reports whether the CodeableConcept c has a LOINC coding of
// one of codes.
func loincCode(c any, codes []string) bool {
	cm, _ := c.(map[string]any)
	for _, x := range asSlice(cm["coding"]) {
		xm, _ := x.(map[string]any)
		code, _ := xm["code"].(string)
		if xm["system"] == "http://loinc.org" && slices.Contains(codes, code) {
			return true
		}
	}
	return false
}

func (s *Scanner) walk(ptr, key string, v any, out *[]Finding) {
	add := func(class string) { *out = append(*out, Finding{class, ptr}) }
	switch x := v.(type) {
	case map[string]any:
		if years, ok := quantityAge(key, x); ok && years > 89 { // an Age, or a quantity of time
			add(ClassDates)
		}
		if ageRangeKeyRE.MatchString(key) { // a Range of ages: unitless values are years
			for _, end := range []string{"low", "high"} {
				if q, ok := x[end].(map[string]any); ok {
					if n, ok := q["value"].(json.Number); ok {
						if f, err := n.Float64(); err == nil && f > 89 {
							add(ClassDates)
						}
					}
				}
			}
		}
		if loincCode(x["code"], ageLOINC) { // an age Observation (or component)
			for k, c := range x {
				if !strings.HasPrefix(k, "value") {
					continue
				}
				n, _ := c.(json.Number)
				if q, ok := c.(map[string]any); ok {
					n, _ = q["value"].(json.Number)
				}
				if f, err := n.Float64(); err == nil && f > 89 {
					add(ClassDates)
				}
			}
		}
		if loincCode(x["code"], birthLOINC) { // a birth date Observation: as birthDate
			for k, c := range x {
				if val, ok := c.(string); ok && strings.HasPrefix(k, "value") {
					s.scalar(ptr+"/"+k, "birthDate", val, add)
				}
			}
		}
		if c, ok := x["country"].(string); ok && x["postalCode"] != nil && !slices.Contains([]string{"US", "USA", "United States"}, c) {
			add(ClassGeography) // another country's postal code: no ZIP3 rule applies
		}
		if st, ok := x["state"].(string); ok && iso3166SubRE.MatchString(st) && !firstLevelRE.MatchString(st) {
			add(ClassGeography) // an ISO 3166-2 unit smaller than a state (GB-LND, FR-75)
		}
		if c, ok := x["code"].(string); ok && sixDigitsRE.MatchString(c) && wordCodes(x["system"]) {
			add(ClassOtherUnique) // a UCUM or HL7 code that holds an identifier's digits
		}
		if c, ok := x["code"].(string); ok && (x["system"] == "http://snomed.info/sct" && !snomedCodeRE.MatchString(c) ||
			x["system"] == "http://loinc.org" && !loincCodeRE.MatchString(c)) {
			add(ClassOtherUnique) // a SNOMED CT or LOINC coding whose code is none (a name, an MRN)
		}
		if l, ok := x["language"].(string); ok && sixDigitsRE.MatchString(l) {
			add(ClassOtherUnique) // a language tag that holds an identifier's digits
		}
		if u, ok := x["unit"].(string); ok && sixDigitsRE.MatchString(u) {
			add(ClassOtherUnique) // a unit text that holds an identifier's digits
		}
		if c, ok := x["country"].(string); ok && slices.Contains(minimize.SmallAreas(), c) {
			add(ClassGeography) // a country of 20,000 people or fewer (Pitcairn)
		}
		if _, unit := x["unit"]; !unit && x["code"] == nil && bareIdentifier(x["value"]) {
			add(ClassOtherUnique) // a quantity that is only a long whole number
		}
		for k, c := range x {
			switch k {
			case "photo":
				add(ClassPhoto)
			case "id", "meta", "identifier", "modifierExtension":
				if ptr == "" {
					add(ClassOtherUnique) // resource ids and their bookkeeping
				}
			case "reference":
				// A literal reference (a backbone named reference, such as
				// MedicationKnowledge.relatedMedicationKnowledge.reference,
				// is an object or an array, judged by its members).
				if r, ok := c.(string); ok && !strings.HasPrefix(r, "#") && (s.permitted == nil || !s.permitted(r)) {
					add(ClassOtherUnique) // a local reference "#c1" names a contained resource, nothing else
				}
			}
			if ptr == "" && k == "text" {
				add(ClassOtherUnique) // the narrative repeats the resource
			}
			s.walk(ptr+"/"+k, k, c, out)
		}
	case []any:
		for i, c := range x {
			s.walk(ptr+"/"+strconv.Itoa(i), key, c, out)
		}
	case json.Number:
		if numberValueKeyRE.MatchString(key) && bareIdentifier(x) {
			add(ClassOtherUnique) // an Observation's valueInteger 912448123
		}
		if ageKeyRE.MatchString(key) {
			if f, err := x.Float64(); err == nil && f > 89 {
				add(ClassDates)
			}
		}
		s.scalar(ptr, key, string(x), add)
	case string:
		if m := yearRE.FindStringSubmatch(x); m != nil {
			// A date (a year at least) of someone now over 89: a birth
			// year, a questionnaire answer (its question, a date of
			// birth?, is not in the output), and any event of that year,
			// which whoever it happened to lived through, so was born in
			// it or before.
			if y, _ := strconv.Atoi(m[1]); s.nowYear-y-1 > 89 {
				add(ClassDates)
			}
		}
		s.scalar(ptr, key, x, add)
	}
}

var (
	// iso3166SubRE is an ISO 3166-2 subdivision code; firstLevelRE those
	// of the countries whose codes are all states, provinces or Länder
	// (the Netherlands' special municipalities BQ1-BQ3 apart).
	iso3166SubRE = regexp.MustCompile(`^[A-Z]{2}-[A-Z0-9]{1,3}$`)
	firstLevelRE = regexp.MustCompile(`^(AT-[1-9]|AU-[A-Z]{2,3}|BR-[A-Z]{2}|CA-[A-Z]{2}|DE-[A-Z]{2}|IN-[A-Z]{2}|MX-[A-Z]{3}|NL-[A-Z]{2}|US-[A-Z]{2})$`)
	// snomedCodeRE, loincCodeRE: the forms of SNOMED CT identifiers and
	// LOINC codes (LA, LP ... parts and answers included).
	snomedCodeRE = regexp.MustCompile(`^\d+$`)
	loincCodeRE  = regexp.MustCompile(`^(L[A-Z])?\d+(-\d)?$`)
	// sixDigitsRE: six digits in a row, which no unit has.
	sixDigitsRE = regexp.MustCompile(`\d{6}`)
	// numberValueKeyRE: the number alternatives of a value[x].
	numberValueKeyRE = regexp.MustCompile(`^value(Integer|Integer64|Decimal|UnsignedInt|PositiveInt)$`)
)

// wordCodes reports whether system names a code system whose codes are
// words or short numbers: UCUM, BCP-47, ISO 3166 and 4217, HL7's and
// FHIR's own.
func wordCodes(system any) bool {
	sys, _ := system.(string)
	return slices.Contains([]string{"http://unitsofmeasure.org", "urn:ietf:bcp:47", "urn:iso:std:iso:3166", "urn:iso:std:iso:4217"}, sys) ||
		strings.HasPrefix(sys, "http://terminology.hl7.org/CodeSystem/") || fhirCodeSystemRE.MatchString(sys)
}

// bareIdentifier reports whether v is a whole number of seven digits or
// more: without a unit, the shape of an SSN, a phone, a record, account
// or serial number rather than of a measurement (nine digits or more
// until h-scrub3, which released an MRN of seven or eight). (Judged on the
// JSON text, not as a float: an oracle apart from package minimize's
// reading.)
func bareIdentifier(v any) bool {
	n, ok := v.(json.Number)
	return ok && bareDigitsRE.MatchString(string(n))
}

// bareDigitsRE is a JSON number that is a whole number of seven digits or
// more ("7744112", "912448123", "-2088231177", "77441123.0").
var bareDigitsRE = regexp.MustCompile(`^-?[1-9][0-9]{6,}(\.0*)?$`)

// isTerminology reports whether val, the value of a "system" member, names
// a code system.
func isTerminology(key, val string) bool {
	return key == "system" && (slices.Contains(terminologySystems, val) ||
		strings.HasPrefix(val, "http://terminology.hl7.org/CodeSystem/") && !strings.Contains(val[len("http://terminology.hl7.org/CodeSystem/"):], "/") ||
		fhirCodeSystemRE.MatchString(val) && val != "http://hl7.org/fhir/sid")
}

// fhirCodeSystemRE: a code system of the FHIR specification
// (http://hl7.org/fhir/administrative-gender), not an identifier system
// under sid/.
var fhirCodeSystemRE = regexp.MustCompile(`^http://hl7\.org/fhir/[a-z][a-z0-9-]+$`)

// definitionURLs are the extension URLs that may stay: they name HL7
// definitions (why a value is absent, sex assigned at birth, race and
// ethnicity), not people.
var definitionURLs = []string{
	"http://hl7.org/fhir/StructureDefinition/data-absent-reason",
	"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex",
	"http://hl7.org/fhir/us/core/StructureDefinition/us-core-race",
	"http://hl7.org/fhir/us/core/StructureDefinition/us-core-ethnicity",
}

func (s *Scanner) scalar(ptr, key, val string, add func(string)) {
	for _, k := range s.values {
		if strings.Contains(val, k) {
			add(s.known[k])
		}
	}
	if isTerminology(key, val) || key == "url" && slices.Contains(definitionURLs, val) {
		return
	}
	if key == "reference" && s.permitted != nil && s.permitted(val) {
		// A research alias: random hex, whose digit runs match the phone,
		// SSN or MRN patterns by chance (a few per cent of aliases).
		return
	}
	switch {
	case birthKeyRE.MatchString(key):
		y, err := strconv.Atoi(val)
		if val != "90+" && (err != nil || len(val) != 4 || s.nowYear-y-1 > 89) {
			add(ClassDates)
		}
	case key == "postalCode":
		if len(val) != 3 || strings.Trim(val, "0123456789") != "" {
			add(ClassGeography)
		}
	case slices.Contains([]string{"line", "city", "district", "county", "latitude", "longitude"}, key):
		add(ClassGeography)
	case key == "data" || key == "valueBase64Binary":
		add(ClassBiometric) // encoded content: fingerprints, voice prints, images
	}
	if ageKeyRE.MatchString(key) {
		if f, err := strconv.ParseFloat(strings.TrimSuffix(val, "+"), 64); err == nil && f > 89 && val != "90+" {
			add(ClassDates)
		}
	}
	if fullDateRE.MatchString(val) {
		add(ClassDates)
	}
	if (uuidRE.MatchString(val) || referenceRE.MatchString(val)) && !(key == "reference" && s.permitted != nil && s.permitted(val)) {
		add(ClassOtherUnique)
	}
	if ipRE.MatchString(val) {
		add(ClassIP)
	}
	// UUIDs are judged above (uuidRE); inside one, a group such as
	// "e5252988" is not an identifier token of its own (a research
	// alias would otherwise be flagged by chance, about once in ten).
	if idTokenRE.MatchString(uuidRE.ReplaceAllString(val, " ")) {
		add(ClassOtherUnique)
	}
	if urlRE.MatchString(val) {
		add(ClassURL)
	}
	// The scrub patterns of package minimize, as a second opinion.
	for class, fn := range map[string]string{ClassPhone: "phone", ClassEmail: "email", ClassSSN: "ssn", ClassMRN: "mrn", ClassDates: "date"} {
		if out, err := minimize.Text([]byte(val), []minimize.Obligation{{Op: minimize.OpScrub, Fn: fn}}, minimize.Options{}); err != nil || string(out) != val {
			add(class)
		}
	}
}

// Collect registers the identifying strings of one raw FHIR resource.
func (s *Scanner) Collect(v any) {
	switch x := v.(type) {
	case map[string]any:
		if id, ok := x["id"].(string); ok {
			s.Add(ClassOtherUnique, id)
		}
		if r, ok := x["reference"].(string); ok {
			s.Add(ClassOtherUnique, r)
		}
		_, coded := x["code"]
		_, sys := x["system"]
		if disp, ok := x["display"].(string); ok && !coded && !sys {
			s.Add(ClassNames, disp) // a Reference's display: a person or a facility
		}
		if sub, ok := x["subscriberId"].(string); ok {
			s.Add(ClassHealthPlan, sub)
		}
		for _, idf := range asSlice(x["identifier"]) {
			m, _ := idf.(map[string]any)
			val, _ := m["value"].(string)
			switch system, _ := m["system"].(string); {
			case strings.Contains(system, "ssn"):
				s.Add(ClassSSN, val)
			case strings.Contains(system, "mrn"):
				s.Add(ClassMRN, val)
			case strings.Contains(system, "member"):
				s.Add(ClassHealthPlan, val)
			default:
				s.Add(ClassAccount, val)
			}
		}
		for _, c := range asSlice(x["class"]) {
			if m, ok := c.(map[string]any); ok {
				if val, ok := m["value"].(string); ok {
					s.Add(ClassHealthPlan, val) // the plan's group number
				}
			}
		}
		for _, t := range asSlice(x["telecom"]) {
			m, _ := t.(map[string]any)
			val, _ := m["value"].(string)
			switch m["system"] {
			case "email":
				s.Add(ClassEmail, val)
			case "fax":
				s.Add(ClassFax, val)
			default:
				s.Add(ClassPhone, val)
			}
		}
		for _, a := range asSlice(x["address"]) {
			m, _ := a.(map[string]any)
			for _, k := range []string{"city", "postalCode", "district"} {
				if val, ok := m[k].(string); ok {
					s.Add(ClassGeography, val)
				}
			}
			for _, line := range asSlice(m["line"]) {
				if val, ok := line.(string); ok {
					s.Add(ClassGeography, val)
				}
			}
		}
		if bd, ok := x["birthDate"].(string); ok {
			s.Add(ClassDates, bd)
		}
		for _, c := range x {
			s.Collect(c)
		}
	case []any:
		for _, c := range x {
			s.Collect(c)
		}
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// Known is the number of identifying strings registered.
func (s *Scanner) Known() int { return len(s.known) }
