package minimize

import (
	"encoding/json"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/custos-mcp/custos/internal/fhirr4"
)

// The deidentify obligation (OpDeidentify, Fn DeidentifySafeHarbor) is HIPAA
// Safe Harbor (45 CFR 164.514(b)(2)) for any FHIR R4 resource. Instead of
// naming the elements to keep, it walks every element and decides by the
// element's FHIR data type (fhirr4.Elements, generated from the R4
// StructureDefinitions by tools/fhirtypes), so that an identifier in an
// element the policy author did not foresee — CodeableConcept.text, a
// Coding.display, an extension under code, a date nested in a component —
// is withheld like any other. Where the type of an element is not known,
// the element is dropped (fail closed).
//
// What each type becomes (docs/policy.md, "Research view"):
//
//	boolean, integer, positiveInt,       kept when well formed (integers in
//	unsignedInt, decimal                 FHIR R4's 32 bits); an age over 89
//	                                     dropped (ageCtx); a bare whole
//	                                     number of nine digits or more, or
//	                                     a date (dateDigits), dropped
//	                                     (identifierNumber; in a
//	                                     quantity, when it has no unit);
//	                                     a value[x] or a quantity without
//	                                     unit, of seven (bareIdentifier);
//	                                     bare, a year 90 years or more
//	                                     before now too (oldYearNumber)
//	code                                 kept when a code of the element's
//	                                     required value set (elementCode,
//	                                     fhircodes_gen.go) or of its grammar
//	                                     (language, known MIME type,
//	                                     currency), a
//	                                     token without spaces (codeText) nor
//	                                     URL, e-mail, IP (addressText),
//	                                     nor anything ScrubString changes
//	date, dateTime                       the year ("YYYY", valid for both),
//	                                     dropped when 90 years or more
//	                                     before now (oldYear);
//	                                     a date of birth (birthDate, born[x],
//	                                     a birth-date Observation's value):
//	                                     the year, or withheld
//	                                     (data-absent-reason "masked") when
//	                                     the age is over 89 at Options.Now
//	instant, time                        dropped
//	string, markdown                     dropped, except Quantity.unit when
//	                                     a unit symbol (unitText,
//	                                     unitSymbol) that
//	                                     ScrubString leaves as it is, and
//	                                     Address.state/country (see Address)
//	uri, url, canonical, oid, uuid, id,  dropped (Coding.system: kept when it
//	base64Binary, xhtml                  is a public terminology; see below)
//	Identifier, HumanName, ContactPoint, dropped
//	Annotation, Signature, Narrative,
//	Meta, Attachment (data, url, title,
//	hash: photos, documents)
//	Reference                            "Patient/<id>" of the resource's own
//	                                     patient (ownPatients) becomes
//	                                     "Patient/<Options.Alias(id)>";
//	                                     "#local" is kept (renumbered); all
//	                                     else (display, identifier, other
//	                                     targets, absolute URLs) dropped
//	Coding                               dropped unless its system is a public
//	                                     terminology (terminologySystem)
//	                                     and its code of the terminology's
//	                                     form (codeSyntax) or, for HL7's and
//	                                     FHIR's code systems, one of its
//	                                     codes (fhirSystemCodes); LOINC,
//	                                     SNOMED CT, ISO 3166, CDC Race &
//	                                     Ethnicity, genomics reporting's
//	                                     TBD codes: codeChecks;
//	                                     display and version dropped
//	Quantity and its kinds               value, comparator, unit kept; system
//	                                     and code only for UCUM and ISO 4217
//	                                     and, in a Quantity, a code of HL7's
//	                                     code systems (fhirQuantityCode);
//	                                     an age over 89 is dropped: an Age, a
//	                                     quantity in a unit of time, a value
//	                                     in an age element or age Observation;
//	                                     a unit must name one (ucumUnit,
//	                                     knownUnitText: "MRN" does not), and
//	                                     a quantity whose unit and code are
//	                                     dropped is dropped whole
//	Address                              state (a US state, a first-level
//	                                     ISO 3166-2 code) and country (not
//	                                     one of 20,000 people or fewer) when
//	                                     codes (or a US state's name), ZIP3
//	                                     of a US postalCode ("000" for the
//	                                     restricted ZIP3s and those of no
//	                                     resident population,
//	                                     populatedZIP3); other postal
//	                                     codes dropped
//	Location.position                    dropped (geocodes)
//	Extension, modifierExtension         url and valueCode when the url is in
//	                                     allowedExtensions and the code one of
//	                                     its codes; US Core race and
//	                                     ethnicity: url and their ombCategory
//	                                     and detailed CDC Race & Ethnicity
//	                                     codings (complexExtensions); else
//	                                     dropped; an element
//	                                     with an unknown modifierExtension is
//	                                     dropped whole, a resource with one
//	                                     withheld
//	QuestionnaireResponse answers,       judged as a date of birth: a date
//	open value[x] (Parameters, Task)     the year or withheld, a number
//	                                     dropped; an open valueCode dropped
//	                                     (opaqueValue)
//	a value whose code is withheld       judged as an answer: the value[x] of
//	(valueMeanings)                      an Observation or component whose
//	                                     code keeps no coding, of a device
//	                                     property whose type keeps none, ...
//	Resource (contained, Bundle entries) de-identified recursively; contained
//	                                     ids renumbered "c1", "c2", ...
//	other complex types, backbones       walked element by element
//
// An age at an event and a year of the same resource that together tell
// the birth year of someone now over 89 make the walk withhold the age
// (topResource).
//
// An object left empty is dropped. A required element (minimum cardinality
// 1) that the walk dropped is replaced by a data-absent-reason extension
// with code "masked", so the output stays valid FHIR R4: a complex element
// becomes {"extension":[DAR]} (its own required elements marked in turn,
// absentOf), a primitive keeps only its "_name" companion
// {"extension":[DAR]}.

// dataAbsentReason is the URL of the core extension that says why a value
// is missing; custos writes it with code "masked" ("the information is not
// available due to security, privacy or related reasons").
const dataAbsentReason = "http://hl7.org/fhir/StructureDefinition/data-absent-reason"

// allowedExtensions are the extensions (and modifier extensions) the
// deidentify walk keeps, by URL, each with the codes its valueCode may
// hold: an allowed extension is released as its url and valueCode only,
// and only when that code is one of its codes (any other value type, a
// nested extension or a code outside the list drops it). Every other
// extension is dropped. An extension belongs here only if no value it can
// carry identifies anyone.
var allowedExtensions = map[string]map[string]bool{
	// Why a value is missing (the DataAbsentReason value set of R4).
	dataAbsentReason: setOf("unknown", "asked-unknown", "temp-unknown", "not-asked", "asked-declined",
		"masked", "not-applicable", "unsupported", "as-text", "error", "not-a-number",
		"negative-infinity", "positive-infinity", "not-performed", "not-permitted"),
	// Sex assigned at birth (US Core's birth sex value sets, all versions).
	"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex": setOf("F", "M", "UNK", "ASKU", "OTH"),
}

// US Core's race and ethnicity extensions (complexExtensions).
const (
	usCoreRace      = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-race"
	usCoreEthnicity = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-ethnicity"
)

// complexExtensions are the complex extensions the deidentify walk keeps,
// by URL, each with the sub-extensions it keeps, by url, and the code
// system their valueCoding must be of: US Core's race and ethnicity
// (parts ombCategory, detailed and text), released as their
// ombCategory and detailed codings of CDC's Race & Ethnicity code set,
// which the walk keeps as it keeps a coding anywhere (coding: one of its
// codes, system and code, display dropped). Race and ethnicity are none
// of Safe Harbor's 18 identifiers, and health-equity research needs them.
// Their text sub-extension is free text ("White, per Evelyn Marsh"), so
// it is dropped, as is any other sub-extension, a value of another type
// and an extension on a sub-extension; an extension left with no
// sub-extension is dropped whole (R4 ext-1: a value or extensions). The
// view does not claim US Core's profile, which requires text (1..1): the
// walk withholds Meta, meta.profile with it.
var complexExtensions = map[string]map[string]string{
	usCoreRace:      {"ombCategory": cdcRaceSystem, "detailed": cdcRaceSystem},
	usCoreEthnicity: {"ombCategory": cdcRaceSystem, "detailed": cdcRaceSystem},
}

func setOf(vals ...string) map[string]bool {
	m := make(map[string]bool, len(vals))
	for _, v := range vals {
		m[v] = true
	}
	return m
}

// AllowedExtensions returns, sorted, the extension URLs the deidentify
// obligation keeps (a fresh copy): those of allowedExtensions and of
// complexExtensions.
func AllowedExtensions() []string {
	out := slices.AppendSeq(slices.Collect(maps.Keys(allowedExtensions)), maps.Keys(complexExtensions))
	slices.Sort(out)
	return out
}

// terminologySystems are the code systems whose codings the deidentify
// walk keeps: public vocabularies, whose codes name concepts, not people.
// A Coding of any other system (a local code system, or an identifier
// system misused as one) is dropped: its code may be a local identifier.
var terminologySystems = map[string]bool{
	"http://loinc.org":                             true,
	"http://snomed.info/sct":                       true,
	"http://hl7.org/fhir/sid/icd-10":               true,
	"http://hl7.org/fhir/sid/icd-10-cm":            true,
	"http://hl7.org/fhir/sid/icd-9-cm":             true,
	"http://hl7.org/fhir/sid/cvx":                  true,
	"http://hl7.org/fhir/sid/ndc":                  true,
	"http://www.nlm.nih.gov/research/umls/rxnorm":  true,
	"http://www.ama-assn.org/go/cpt":               true,
	"http://nucc.org/provider-taxonomy":            true,
	"http://unitsofmeasure.org":                    true,
	"urn:ietf:bcp:47":                              true,
	"urn:iso:std:iso:3166":                         true,
	"urn:iso:std:iso:4217":                         true,
	"http://dicom.nema.org/resources/ontology/DCM": true, // DICOM: modalities, SOP classes
	"http://www.radlex.org":                        true, // RadLex
	// Oncology, genomics and pharmacy research (R4 terminologies-systems
	// and THO's NamingSystems name these URIs): NCI Thesaurus, HGNC, the
	// Sequence Ontology, WHO's ATC, CDC Race & Ethnicity, and the TBD
	// codes of HL7's genomics reporting guide (which mCODE uses). ICD-O-3
	// is THO's (http://terminology.hl7.org/CodeSystem/icd-o-3), judged by
	// its form (codeSyntax) where THO's other code systems are judged by
	// their codes (fhirSystemCodes).
	ncitSystem:                        true,
	"http://www.genenames.org":        true,
	"http://www.sequenceontology.org": true,
	"http://www.whocc.no/atc":         true,
	cdcRaceSystem:                     true,
	genomicsTBDSystem:                 true,
}

// TerminologySystems returns the code systems whose codings the deidentify
// walk keeps by name (terminologySystems), sorted. A checker of the walk's
// output takes its list of terminologies from here (the Safe Harbor
// scanner of minimize/safeharbortest), so that the two cannot drift apart:
// the scanner flagged the research terminologies the walk had come to keep
// as URLs (a leak class) until h-tidy.
func TerminologySystems() []string {
	return slices.Sorted(maps.Keys(terminologySystems))
}

// The URIs of the research terminologies checked by name (codeChecks).
const (
	ncitSystem        = "http://ncicb.nci.nih.gov/xml/owl/EVS/Thesaurus.owl"
	cdcRaceSystem     = "urn:oid:2.16.840.1.113883.6.238"
	genomicsTBDSystem = "http://hl7.org/fhir/uv/genomics-reporting/CodeSystem/tbd-codes-cs"
	icdO3System       = "http://terminology.hl7.org/CodeSystem/icd-o-3"
)

// codeSyntax is the form of the codes of the public terminologies whose
// codes have one (lenient: a short number passes where the terminology's
// codes are numbers). A coding of such a system whose code has another
// form — a name, an MRN, free text typed as a SNOMED CT code — is dropped:
// it is not that terminology's code, and says what the source typed.
var codeSyntax = map[string]*regexp.Regexp{
	"http://loinc.org":                             regexp.MustCompile(`^(?:L[A-Z])?[0-9]{1,7}(?:-[0-9])?$`),
	"http://snomed.info/sct":                       regexp.MustCompile(`^[0-9]{1,18}$`),
	"http://hl7.org/fhir/sid/icd-10":               regexp.MustCompile(`^[A-Z][0-9][0-9A-Z](?:\.?[0-9A-Z]{1,4})?$`),
	"http://hl7.org/fhir/sid/icd-10-cm":            regexp.MustCompile(`^[A-Z][0-9][0-9A-Z](?:\.?[0-9A-Z]{1,4})?$`),
	"http://hl7.org/fhir/sid/icd-9-cm":             regexp.MustCompile(`^(?:[0-9]{3}|V[0-9]{2}|E[0-9]{3}|[0-9]{2})(?:\.[0-9]{1,2})?$`),
	"http://hl7.org/fhir/sid/cvx":                  regexp.MustCompile(`^[0-9]{1,3}$`),
	"http://hl7.org/fhir/sid/ndc":                  regexp.MustCompile(`^(?:[0-9]{4,5}-[0-9]{3,4}-[0-9]{1,2}|[0-9]{10,11})$`),
	"http://www.nlm.nih.gov/research/umls/rxnorm":  regexp.MustCompile(`^[0-9]{1,7}$`), // RXCUIs are below 3,000,000: never an SSN's nine digits nor an MRN's eight
	"http://www.ama-assn.org/go/cpt":               regexp.MustCompile(`^[0-9]{4}[0-9A-Z]$`),
	"http://nucc.org/provider-taxonomy":            regexp.MustCompile(`^[0-9]{3}[0-9A-Z]{6}X$`),
	"http://dicom.nema.org/resources/ontology/DCM": regexp.MustCompile(`^(?:[0-9]{1,6}|[A-Z][A-Z_]{0,15}|[A-Z]{1,3}[0-9][A-Z]{0,3}|[A-Z]-[0-9A-Z]{4,5})$`),
	"http://unitsofmeasure.org":                    ucumSyntax,
	"http://www.radlex.org":                        regexp.MustCompile(`^RP?ID[0-9]{1,6}$`), // RadLex ids are below 1,000,000: never an SSN's nine digits nor an MRN's eight
	"urn:ietf:bcp:47":                              languageTag,
	"urn:iso:std:iso:3166":                         regexp.MustCompile(`^(?:[A-Z]{2,3}|[0-9]{3}|[A-Z]{2}-[A-Z0-9]{1,3})$`),
	"urn:iso:std:iso:4217":                         regexp.MustCompile(`^(?:[A-Z]{3}|[0-9]{3})$`),
	// NCI Thesaurus: "C" and a concept number without leading zero
	// ("C2991", a Binet stage "C141207"); NCIt's numbers are below
	// 1,000,000, so at most six digits: never an SSN's nine nor an MRN's
	// eight.
	ncitSystem: regexp.MustCompile(`^C[1-9][0-9]{0,5}$`),
	// HGNC: the HGNC ID, "HGNC:" and a number ("HGNC:1100", BRCA1); HGNC's
	// numbers are below 100,000. A bare number ("1100", which mCODE's
	// examples write too) is not HGNC's form: a ZIP code or an MRN is one.
	"http://www.genenames.org": regexp.MustCompile(`^HGNC:[1-9][0-9]{0,4}$`),
	// The Sequence Ontology: OBO's "SO:" and seven digits ("SO:0001583",
	// missense_variant; "SO:1000044"); SO's ids are numbered from
	// 0000000, 1000000, 2000000 and 3000000 and stay below 10,000 in each
	// series, so "SO:5550145", a local telephone number, is not one.
	"http://www.sequenceontology.org": regexp.MustCompile(`^SO:[0-3]00[0-9]{4}$`),
	// WHO's ATC: an anatomical main group (one of its 14 letters), then a
	// therapeutic subgroup of two digits, two subgroups of one letter
	// each and a substance of two digits, each level the one before it
	// and more ("L", "L01", "L01X", "L01XC", "L01XC03"): no run of more
	// than two digits, no word.
	"http://www.whocc.no/atc": regexp.MustCompile(`^[ABCDGHJLMNPRSV](?:[0-9]{2}(?:[A-Z](?:[A-Z](?:[0-9]{2})?)?)?)?$`),
	// ICD-O-3: a morphology code of four digits from 8000 and its
	// behaviour (0, 1, 2, 3, 6, 9: "8140/3", adenocarcinoma), or a
	// topography code C00-C80 with its subsite ("C50.9", "C509").
	icdO3System: regexp.MustCompile(`^(?:[89][0-9]{3}/[012369]|C(?:[0-7][0-9]|80)\.?[0-9]?)$`),
	// CDC Race & Ethnicity: four digits, a dash, LOINC's mod-10 check
	// digit ("2106-3"); codeChecks keeps only CDC's codes.
	cdcRaceSystem: regexp.MustCompile(`^[12][0-9]{3}-[0-9]$`),
}

// codeChecks are the checks beyond codeSyntax that a code of these
// terminologies passes, by system:
//
//   - LOINC: a code ends in its mod-10 check digit ("8480-6"), so a
//     number of up to seven digits (an MRN "7744112", a telephone number
//     without its area code) is not taken for one; an answer or part
//     code ("LA6751-7", "LP14082-9") ends in its own (loincPartCheck), so
//     "LA7744112" is not one either; a LOINC number has at most six
//     digits, so a local telephone number with its check digit appended
//     ("5550145-6") is not one.
//   - SNOMED CT: a concept id (SCTID) ends in a partition identifier of a
//     concept ("00", or "10" in an extension's namespace) and a Verhoeff
//     check digit, so a number that is not one (an SSN "219099999", an
//     MRN "77441123", nine SSN digits "912448123") is not taken for a
//     concept: about one number in 500 of SNOMED CT's form passes.
//   - UCUM: no date written with dots, slashes or dashes, nor with its
//     month as a name (datedText): "1931.03.14" and "14/Jan/1931" have
//     UCUM's form.
//   - BCP-47: no region of 20,000 people or fewer (smallRegion), as an
//     ISO 3166 code is judged: "pih-NF", "en-PN".
//   - ISO 3166: the codes an address keeps (stateCode, countryCode): a
//     country or territory of more than 20,000 people, a first-level
//     subdivision; a coding of Pitcairn ("PN") or of the City of London
//     ("GB-LND") as a country of residence or a place travelled to names
//     an area smaller than a state, as its address would.
//   - CDC Race & Ethnicity: one of its codes (cdcRaceCodes), so that a
//     year and month ("1931-5") is not taken for one.
//   - The genomics reporting guide's TBD codes: one of its codes
//     (genomicsTBDCodes); they are words, and a name fits a word.
var codeChecks = map[string]func(string) bool{
	"http://loinc.org":          loincCode,
	cdcRaceSystem:               func(c string) bool { return cdcRaceCodes[c] },
	genomicsTBDSystem:           func(c string) bool { return genomicsTBDCodes[c] },
	"http://snomed.info/sct":    snomedConceptID,
	"http://unitsofmeasure.org": func(c string) bool { return !datedText(c) && !unitIdentifier(c) && plainAnnotations(c) && ucumUnit(c) },
	"urn:ietf:bcp:47":           func(c string) bool { return !smallRegion(c) },
	"urn:iso:std:iso:4217":      func(c string) bool { return !smallCurrencies[c] },
	"urn:iso:std:iso:3166": func(c string) bool {
		if strings.Contains(c, "-") {
			return stateCode(c)
		}
		return countryCode(c)
	},
}

// cdcRaceCodes are the codes of CDC's Race & Ethnicity Code Set
// (urn:oid:2.16.840.1.113883.6.238): R4 lists them as HL7's v3-Race and
// v3-Ethnicity, which are that code set under THO's URIs
// (fhircodes_gen.go).
var cdcRaceCodes = func() map[string]bool {
	m := setOf(fhirCodeSystemCodes["http://terminology.hl7.org/CodeSystem/v3-Race"]...)
	maps.Copy(m, setOf(fhirCodeSystemCodes["http://terminology.hl7.org/CodeSystem/v3-Ethnicity"]...))
	return m
}()

// genomicsTBDCodes are the codes of the "To Be Determined Codes" of HL7's
// genomics reporting guide (genomics-reporting input/fsh/CGCodeSystem.fsh,
// TbdCodesCS, the versions mCODE 4.0.0's examples use), which mCODE codes
// its genomic observations' kinds with until LOINC has codes for them.
var genomicsTBDCodes = setOf("grouper", "predicted-therapeutic-implication", "prognostic-implication",
	"associated-therapy", "region-coverage", "molecular-consequence", "feature-consequence",
	"exact-start-end", "inner-start-end", "outer-start-end", "variant-inheritance",
	"diagnostic-implication", "therapeutic-implication", "uncallable-regions", "functional-effect",
	"conclusion-string", "condition-inheritance")

// loincCode reports whether s, of LOINC's form (codeSyntax), is a LOINC
// code with its check digit (LOINC's mod 10: every other digit from the
// right doubled, the digits summed), or an answer or part code with its
// own (loincPartCheck).
func loincCode(s string) bool {
	num, check, ok := strings.Cut(s, "-")
	if !ok || len(check) != 1 {
		return false
	}
	if strings.HasPrefix(s, "L") {
		return loincPartCheck(num) == int(check[0]-'0')
	}
	if len(num) > 6 {
		return false // LOINC numbers are below 1,000,000 (100081-9); seven digits are a local telephone number's
	}
	sum := 0
	for i := range len(num) {
		d := int(num[len(num)-1-i] - '0')
		if i%2 == 0 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return int(check[0]-'0') == (10-sum%10)%10
}

// loincPartCheck is the check digit of a LOINC answer, part or answer list
// code ("LA6751-7", "LP14082-9", "LL1000-0": the part before the dash),
// LOINC's variant of the mod-10 algorithm for identifiers with letters
// (OpenMRS's check digit algorithm, which LOINC's Users' Guide 12 C
// cites): each character's code point less 48, every other one from the
// right doubled and folded (2d - 9*(d/5)), the sum plus 10 rounded up to
// a multiple of ten.
func loincPartCheck(s string) int {
	sum := 0
	for i := range len(s) {
		d := int(s[len(s)-1-i]) - '0'
		if i%2 == 0 {
			d = 2*d - d/5*9
		}
		sum += d
	}
	return (10 - (sum+10)%10) % 10
}

// snomedConceptID reports whether s, digits, is a SNOMED CT concept id: its
// partition identifier (the two digits before the last) is a concept's
// (00; or 10, the long format, after a namespace of seven digits and an
// item id, so of eleven digits or more), and its last digit the Verhoeff
// check digit of the others.
func snomedConceptID(s string) bool {
	if len(s) < 6 || len(s) > 18 {
		return false
	}
	switch s[len(s)-3 : len(s)-1] {
	case "00": // short format: item id, partition, check digit
	case "10": // long format: item id, a namespace of 7 digits, partition, check digit
		if len(s) < 11 {
			return false
		}
	default:
		return false
	}
	c := 0
	for i := 0; i < len(s); i++ {
		r := s[len(s)-1-i]
		if r < '0' || r > '9' {
			return false
		}
		c = verhoeffD[c][verhoeffP[i%8][r-'0']]
	}
	return c == 0
}

// snomedCoreTenDigits reports whether s, a SNOMED CT concept id
// (snomedConceptID), is one of ten digits in the short format of the
// international release: an item id of seven digits from 1,000,000, the
// partition 00, the check digit. A North American telephone number of ten
// digits never begins with 1 (no area code does), so such a concept id,
// which has a telephone number's form, is not one.
func snomedCoreTenDigits(s string) bool {
	return len(s) == 10 && s[0] == '1' && s[7:9] == "00"
}

// The Verhoeff tables: the dihedral group D5's multiplication (d) and the
// permutation (p) applied to a digit by its position from the right.
var (
	verhoeffD = [10][10]int{
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 4, 0, 6, 7, 8, 9, 5},
		{2, 3, 4, 0, 1, 7, 8, 9, 5, 6}, {3, 4, 0, 1, 2, 8, 9, 5, 6, 7},
		{4, 0, 1, 2, 3, 9, 5, 6, 7, 8}, {5, 9, 8, 7, 6, 0, 4, 3, 2, 1},
		{6, 5, 9, 8, 7, 1, 0, 4, 3, 2}, {7, 6, 5, 9, 8, 2, 1, 0, 4, 3},
		{8, 7, 6, 5, 9, 3, 2, 1, 0, 4}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
	}
	verhoeffP = func() (p [8][10]int) {
		p1 := [10]int{1, 5, 7, 6, 2, 8, 3, 0, 9, 4} // p[i] is p1 applied i times
		for x := range 10 {
			p[0][x] = x
		}
		for i := 1; i < 8; i++ {
			for x := range 10 {
				p[i][x] = p1[p[i-1][x]]
			}
		}
		return p
	}()
)

// languageTag is the form of a BCP-47 language tag that is kept: a
// language of two or three letters, then optionally a script of four
// letters and a region of two letters or three digits ("en", "en-US",
// "zh-Hant-TW", "es-419"), as are all 56 tags of R4's value sets. The
// other subtags BCP 47 allows are variants of five to eight letters, and
// extensions and private use ("x-" and what follows) of up to eight
// each: a name fits them ("en-Marsh", "en-x-Evelyn-Marsh"), and they are
// rare in health data, so a tag with one is dropped.
//
// A script is one of the ISO 15924 codes of scripts in use for living
// languages (scriptCodes), not any four letters: a four-letter name fits
// the script subtag ("en-Anna", "de-Mark-DE"). ("Hans", Simplified Han,
// is a name too; it stays.)
var languageTag = regexp.MustCompile(`^[A-Za-z]{2,3}(?:-(?i:` + scriptCodes + `))?(?:-(?:[A-Za-z]{2}|[0-9]{3}))?$`)

// scriptCodes are the ISO 15924 codes of the scripts of living languages,
// a subset of ISO 15924 chosen by hand, as an alternation; a tag with
// another script (a historic one, "Copt") is dropped.
const scriptCodes = `Adlm|Arab|Aran|Armn|Beng|Bopo|Brai|Cakm|Cans|Cher|Cyrl|Deva|Ethi|Geor|Grek|Gujr|Guru|Hanb|Hang|Hani|Hans|Hant|Hebr|Hira|Hrkt|Jamo|Jpan|Kana|Khmr|Knda|Kore|Laoo|Latn|Mlym|Mong|Mtei|Mymr|Nkoo|Olck|Orya|Rohg|Sinh|Sund|Syrc|Taml|Telu|Tfng|Thaa|Thai|Tibt|Vaii|Yiii|Zmth|Zsye|Zsym|Zxxx|Zyyy`

// ucumSyntax is the form of a UCUM code (lenient): components — an atom
// with an optional exponent of one or two digits ("m2", "s-1"), a
// bracketed atom ("[in_i]", "mm[Hg]"), an atom with an underscore
// ("a_j", "mo_s", "cal_IT"), a factor ("10*3", "24", "10*"), an
// annotation ("{beats}", also after a parenthesis: "g/(8.h){shift}") —
// joined by "." and "/", with parentheses. A
// plate, a serial or a licence number typed as a UCUM code ("7XKR319",
// "SN4C7Q2Z9", "D4419021": letters and digits mixed) has not this form; a
// one-word name has, and is told from a unit by ucumUnit (UCUM's atoms).
var ucumSyntax = func() *regexp.Regexp {
	const ann = `\{[^{}]{0,40}\}`
	const comp = `(?:[0-9]{1,5}|10[*^](?:[+-]?[0-9]+)?|(?:\[[^\[\]{}]{1,24}\]|[A-Za-z%'°][A-Za-z%'°_]*)(?:\[[^\[\]{}]{1,24}\])?[+-]?[0-9]{0,2})(?:` + ann + `)?|` + ann
	return regexp.MustCompile(`^[(/]*(?:` + comp + `)(?:\)*(?:` + ann + `)?[./]+\(*(?:` + comp + `))*\)*(?:` + ann + `)?$`)
}()

// systemAliases are other names of terminologySystems' vocabularies that
// outside data uses: their HL7 OIDs (urn:oid:..., and bare, as converters
// from C-CDA and HL7 v2 write them) and https for http. A coding under an
// alias is judged, and released, as one under the canonical URI (R4
// terminologies-systems; NamingSystem registry: HL7 Terminology's
// NamingSystem ICD-9CM-procedurecodes, 3.0.0 of 2023-08-22, gives
// ICD-9-CM's procedure codes, OID 2.16.840.1.113883.6.104, the URI
// http://hl7.org/fhir/sid/icd-9-cm of its diagnoses, whose code form,
// codeSyntax, has their "NN.NN"): until 2026-12-06 such
// codings were dropped as local ones, and with them the values an
// Observation coded in LOINC by its OID carried.
var systemAliases = func() map[string]string {
	m := map[string]string{}
	for oid, uri := range map[string]string{
		"2.16.840.1.113883.6.1":    "http://loinc.org",
		"2.16.840.1.113883.6.96":   "http://snomed.info/sct",
		"2.16.840.1.113883.6.88":   "http://www.nlm.nih.gov/research/umls/rxnorm",
		"2.16.840.1.113883.6.8":    "http://unitsofmeasure.org",
		"2.16.840.1.113883.6.3":    "http://hl7.org/fhir/sid/icd-10",
		"2.16.840.1.113883.6.90":   "http://hl7.org/fhir/sid/icd-10-cm",
		"2.16.840.1.113883.6.103":  "http://hl7.org/fhir/sid/icd-9-cm",
		"2.16.840.1.113883.6.104":  "http://hl7.org/fhir/sid/icd-9-cm", // procedures (volume 3): THO's ICD-9CM-procedurecodes names this URI
		"2.16.840.1.113883.12.292": "http://hl7.org/fhir/sid/cvx",
		"2.16.840.1.113883.6.69":   "http://hl7.org/fhir/sid/ndc",
		"2.16.840.1.113883.6.12":   "http://www.ama-assn.org/go/cpt",
		"2.16.840.1.113883.6.101":  "http://nucc.org/provider-taxonomy",
	} {
		m["urn:oid:"+oid], m[oid] = uri, uri
	}
	for _, uri := range []string{"http://loinc.org", "http://snomed.info/sct", "http://unitsofmeasure.org"} {
		m["https"+strings.TrimPrefix(uri, "http")] = uri
	}
	m["http://www.sequenceontology.org/"] = "http://www.sequenceontology.org" // as mCODE's examples write it
	return m
}()

// canonicalSystem is the canonical URI of a terminology named by an alias
// (systemAliases), or sys as it is.
func canonicalSystem(sys string) string {
	if c, ok := systemAliases[sys]; ok {
		return c
	}
	return sys
}

// terminologyPrefix: HL7's own code systems (v2 tables, v3 code systems,
// FHIR terminology), e.g. http://terminology.hl7.org/CodeSystem/v3-ActCode.
const terminologyPrefix = "http://terminology.hl7.org/CodeSystem/"

func terminologySystem(s string) bool {
	return terminologySystems[s] || hl7CodeSystem.MatchString(s) || fhirCodeSystem.MatchString(s) && s != fhirIdentifierRoot
}

// fhirCodeSystem is a code system of the FHIR specification itself
// (http://hl7.org/fhir/device-action): one name, nothing under sid/ (the
// identifier systems, such as http://hl7.org/fhir/sid/us-ssn).
var fhirCodeSystem = regexp.MustCompile(`^http://hl7\.org/fhir/[a-z][a-z0-9\-]{1,63}$`)

// fhirIdentifierRoot is the root of FHIR's identifier systems: the one
// name fhirCodeSystem matches that is no code system.
const fhirIdentifierRoot = "http://hl7.org/fhir/sid"

// hl7CodeSystem is a code system of HL7's terminology: one name after the
// prefix (v3-ActCode, v2-0203, condition-clinical), nothing that could
// carry a path of values.
var hl7CodeSystem = regexp.MustCompile(`^` + regexp.QuoteMeta(terminologyPrefix) + `[A-Za-z0-9][A-Za-z0-9\-.]{0,63}$`)

// quantitySystems are the Quantity.system values kept (with the code),
// beside HL7's and FHIR's own code systems (fhirQuantityCode).
var quantitySystems = map[string]bool{"http://unitsofmeasure.org": true, "urn:iso:std:iso:4217": true}

// keptStrings are the string elements the walk keeps (scrubbed), by
// "<type>.<element>": units, nothing that names. (Address keeps state and
// country: see address.)
var keptStrings = map[string]bool{
	"Quantity.unit": true, "Age.unit": true, "Count.unit": true, "Distance.unit": true,
	"Duration.unit": true, "MoneyQuantity.unit": true, "SimpleQuantity.unit": true,
}

// droppedTypes are the types the walk drops whole.
var droppedTypes = map[string]bool{
	"instant": true, "time": true, "uri": true, "url": true, "canonical": true, "oid": true,
	"uuid": true, "id": true, "base64Binary": true, "xhtml": true, "string": true, "markdown": true,
	"Identifier": true, "HumanName": true, "ContactPoint": true, "Annotation": true,
	"Signature": true, "Narrative": true, "Meta": true, "Attachment": true,
}

// primitiveTypes are the FHIR primitive types (JSON scalars, with a "_name"
// companion for their id and extensions).
var primitiveTypes = map[string]bool{
	"boolean": true, "integer": true, "integer64": true, "positiveInt": true, "unsignedInt": true,
	"decimal": true, "code": true, "date": true, "dateTime": true, "instant": true, "time": true,
	"string": true, "markdown": true, "uri": true, "url": true, "canonical": true, "oid": true,
	"uuid": true, "id": true, "base64Binary": true, "xhtml": true,
}

// fhirID is the syntax of a FHIR logical id.
var fhirID = regexp.MustCompile(`^[A-Za-z0-9\-.]{1,64}$`)

// fhirInteger is the JSON form of a FHIR integer (no fraction, no exponent).
var fhirInteger = regexp.MustCompile(`^-?[0-9]{1,19}$`)

// codeText is what a released code may look like: a token without spaces
// (ASCII or Unicode: no-break, ideographic, zero-width) or control and
// format characters,
// as the codes of value sets and public terminologies are ("final",
// "en-US", "8480-6", "E11.9"). FHIR's code syntax allows inner spaces, so
// free text typed into a code ("Jane Roe's preferred: en") is valid FHIR;
// it is dropped here rather than trusted to the scrub patterns.
var codeText = regexp.MustCompile(`^[^\s\p{Z}\p{C}]{1,64}$`)

// unitText is what a released unit text may look like: a unit symbol
// ("mg/dL", "mm[Hg]", "{beats}/min", "10*3/uL", "°C", "years"), not a
// phrase. A unit that is prose ("mg/dL (per Dr. Alvarez)") is dropped; the
// UCUM code, kept beside it, still says the unit.
var unitText = regexp.MustCompile(`^[\p{L}\p{N}%/.*^\[\]{}()'_+\-:°#]{1,32}$`)

// unitSymbol reports whether unit text s (of unitText's form) reads as a
// unit symbol: it has UCUM's form (ucumSyntax), or each run of letters and
// digits in it, once a power-of-ten factor ("x10E3", "10^9") is taken out,
// is a number, a word, or a word after a number or before an exponent of
// one or two digits ("mL/min/1.73m2", "x10E3/uL", "24h", "cm3", "m²",
// "10⁹/L"), or with one digit between letters ("cmH2O"). A licence
// plate, a device serial or a licence number typed as a unit ("7XKR319",
// "SN4C7Q2Z9", "ABC1234": letters between digits, or three digits or more
// after letters) has neither form, and is dropped (fail closed: the UCUM
// code beside it still says the unit).
func unitSymbol(s string) bool {
	if datedText(s) || !plainAnnotations(s) {
		return false
	}
	if ucumSyntax.MatchString(s) {
		return true
	}
	for _, w := range unitRun.FindAllString(superscripts.Replace(unitFactor.ReplaceAllString(s, "$1")), -1) {
		if !unitWord.MatchString(w) {
			return false
		}
	}
	return true
}

// datedText reports whether a unit text or a unit code holds a date:
// written with digits and dots, slashes or dashes (datedUnit), or with
// its month as a name or its parts marked as CJK write them (namedDate).
func datedText(s string) bool {
	return datedUnit.MatchString(s) || namedDate(s) || unitYear.MatchString(s)
}

// unitYear is a number of four digits from 1800 to 2199 standing alone
// in a unit text or code, not in a decimal or after a power's sign: a
// year ("1931", "1931a"), which UCUM's form takes for a factor. No unit
// has one ("10*3/uL", "mL/min/1.73m2"); "1931" was released as a unit
// and a UCUM code until 2026-12-06.
var unitYear = regexp.MustCompile(`(?:^|[^0-9.*^+\-])(?:1[89]|2[01])[0-9]{2}(?:$|[^0-9.])`)

// namedDate reports whether s holds a date whose month is a name: a
// month's name or abbreviation in one of the languages of monthNames
// next to a day or a year ("14-Mar-1931", "Mar-1931", "14.Mär.1931",
// "14-MRT-1931", "31déc", "Jan14"), directly or across one of
// "-./_ "; or a number marked as a year, month or day in Chinese,
// Japanese or Korean ("1931年", "3月", "14日", "昭和6年", "1931년").
// Digits alone make no such date, and datedUnit reads those; the
// letters of a unit symbol are never a month's name, so no unit is
// taken for one. Such dates in a unit text, a quantity's code and a
// UCUM coding's code were released until 2026-12-06.
func namedDate(s string) bool {
	type run struct {
		text   string
		digits bool
	}
	var runs []run
	var seps []bool // seps[i]: runs[i] and runs[i+1] are joined by nothing or one separator
	gap := 0
	rs := []rune(s)
	for i := 0; i < len(rs); {
		r := rs[i]
		isD, isL := r >= '0' && r <= '9', unicode.IsLetter(r)
		if !isD && !isL {
			if !strings.ContainsRune("-./_ ", r) {
				gap += 2
			}
			gap++
			i++
			continue
		}
		j := i
		for j < len(rs) && ((rs[j] >= '0' && rs[j] <= '9') == isD) && (isD || unicode.IsLetter(rs[j])) {
			j++
		}
		if len(runs) > 0 {
			seps = append(seps, gap <= 1)
		}
		runs = append(runs, run{strings.ToLower(string(rs[i:j])), isD})
		gap, i = 0, j
	}
	datePart := func(r run) bool { return r.digits && (len(r.text) <= 2 || len(r.text) == 4) }
	for i, r := range runs {
		if r.digits {
			continue
		}
		for _, m := range cjkDateMarks {
			if i > 0 && runs[i-1].digits && seps[i-1] && strings.HasPrefix(r.text, m) {
				return true
			}
		}
		if !monthNames[r.text] {
			continue
		}
		if i > 0 && seps[i-1] && datePart(runs[i-1]) || i+1 < len(runs) && seps[i] && datePart(runs[i+1]) {
			return true
		}
	}
	return false
}

// cjkDateMarks are the characters Chinese and Japanese (年, 月, 日) and
// Korean (년, 월, 일) write after a year, a month and a day.
var cjkDateMarks = []string{"年", "月", "日", "년", "월", "일"}

// monthNames are the names and usual abbreviations of the months, in
// lower case, in English and the languages of the EU and of IPS's
// national editions written in the Latin alphabet (French, German,
// Spanish, Italian, Portuguese, Dutch, Scandinavian, Polish, Czech), as
// dates are written with them ("14-Mar-1931", "14 janv. 1931"). None is
// a unit symbol.
var monthNames = setOf(
	"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
	"january", "february", "march", "april", "june", "july", "august", "september", "october", "november", "december",
	"janv", "févr", "fevr", "mars", "avr", "mai", "juin", "juil", "août", "aout", "déc",
	"janvier", "février", "fevrier", "avril", "juillet", "septembre", "octobre", "novembre", "décembre", "decembre",
	"mär", "märz", "maerz", "okt", "dez", "januar", "februar", "juni", "juli", "oktober", "dezember",
	"ene", "abr", "ago", "dic", "enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
	"septiembre", "setiembre", "octubre", "noviembre", "diciembre",
	"gen", "mag", "giu", "lug", "set", "ott", "gennaio", "febbraio", "aprile", "maggio", "giugno", "luglio",
	"settembre", "ottobre", "dicembre",
	"fev", "out", "janeiro", "fevereiro", "março", "marco", "maio", "junho", "julho", "setembro", "outubro", "novembro", "dezembro",
	"mrt", "mei", "januari", "februari", "maart", "augustus",
	"maj", "juni", "augusti", "sty", "lut", "kwi", "cze", "lip", "sie", "wrz", "paź", "lis", "gru",
	"led", "úno", "bře", "dub", "kvě", "čvn", "čvc", "srp", "zář", "říj", "lis", "pro",
)

var (
	// datedUnit is a date written with dots, slashes or dashes inside a
	// unit text or a UCUM code: three numbers ("1931.03.14", "14.3.31"),
	// or a month and a year of four digits ("03.1931", "1931-03"). Digits
	// joined by "." have UCUM's form (a product of factors), and the scrub
	// patterns do not read dots as a date: "1931.03.14" was released as a
	// unit, a quantity's code and a UCUM coding's code.
	datedUnit = regexp.MustCompile(`(?:^|[^0-9])(?:[0-9]{1,4}[./\-][0-9]{1,2}[./\-][0-9]{1,4}|(?:0?[1-9]|1[0-2])[./\-](?:1[89]|2[01])[0-9]{2}|(?:1[89]|2[01])[0-9]{2}[./\-](?:0?[1-9]|1[0-2]))(?:$|[^0-9])`)
	// unitRun is a run of letters and digits of a unit text.
	unitRun = regexp.MustCompile(`[\pL\pN]+`)
	// unitFactor is a power-of-ten factor as laboratories write it
	// ("x10E3", "10^9", "10*6", Cerner's "x10(3)"), not inside a word.
	unitFactor = regexp.MustCompile(`(^|[^\pL\pN])(?i:x?10(?:[*^e][+-]?[0-9]{1,2}|\([+-]?[0-9]{1,2}\)|[⁺⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]{1,2}))`)
	// superscripts are the superscript digits of exponents ("m²",
	// "mm³"), read as digits.
	superscripts = strings.NewReplacer("⁰", "0", "¹", "1", "²", "2", "³", "3", "⁴", "4", "⁵", "5", "⁶", "6", "⁷", "7", "⁸", "8", "⁹", "9", "⁻", "-", "⁺", "+")
	// unitWord is the form of a unitRun: a number, or a word after an
	// optional number and before an optional exponent of one or two
	// digits; the word may hold one digit between letters, as a chemical
	// formula does ("cmH2O", "mmH2O").
	unitWord = regexp.MustCompile(`^(?:[0-9]+|[0-9]*\pL+(?:[0-9]\pL+)?[0-9]{0,2})$`)
)

// identifierDigits is a run of six digits or more: the digits of an MRN,
// an SSN, a phone or a serial number. No unit symbol has one ("10*12/L",
// "mm[Hg]"), nor a code of a wordCodeSystem, so a unit text or such a code
// with one is dropped (a code of another terminology may: SNOMED CT's are
// long numbers, LOINC's reach six digits).
var identifierDigits = regexp.MustCompile(`[0-9]{6,}`)

// unitIdentifier reports whether unit text or unit code s holds the
// digits of an identifier (identifierDigits) once the separators between
// digits are taken out: UCUM joins factors with "." and "/" and groups
// terms in parentheses, so an MRN, a telephone number or an SSN split by
// them ("7744.112", "867.5309", "219.099.999", "7744/112", "(7744).(112)",
// "(867)5309") has UCUM's form, and one split by a dash, a colon, an
// underscore, an apostrophe, a plus or a power sign ("867-5309",
// "219_09_9999", "7744*112") a unit text's; none has six digits in a row,
// and all were released until 2026-12-05 (the parenthesized, underscored,
// apostrophized and powered ones until 2026-12-06). A run of separators
// between two digits is taken out if it is made of ".", "/", ":", "-",
// "_", "'", "+", "(" and ")" only, or is a lone "*" or "^": a power with
// a sign ("10*-2") stays apart, so that R4's "mL/min/(173.10*-2.m2)"
// joins no more than five digits. No unit has six digits joined so:
// "mL/min/1.73m2" has three, "10*6/(24.h)" five, "1:64" three.
func unitIdentifier(s string) bool {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && strings.IndexByte("./:-_'+()*^", s[j]) >= 0 {
			j++
		}
		if j == i {
			b.WriteByte(s[i])
			i++
			continue
		}
		run := s[i:j]
		joined := i > 0 && j < len(s) && isDigit(s[i-1]) && isDigit(s[j]) &&
			(run == "*" || run == "^" || strings.Trim(run, "./:-_'+()") == "")
		if !joined {
			b.WriteString(run)
		}
		i = j
	}
	return identifierDigits.MatchString(b.String())
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// wordCodeSystem reports whether the codes of system sys are words or
// short numbers, never six digits in a row: UCUM, BCP-47, ISO 3166 and
// 4217, HL7's code systems (v2 tables, v3, FHIR terminology) and FHIR's
// own. A local identifier put into one (nine digits in a v2-0203 code, a
// BCP-47 private-use tag "en-x-7744112") is dropped with its coding. The
// code elements of FHIR (gender, status, language, ...) are bound to such
// value sets too, and are judged alike (value).
func wordCodeSystem(sys string) bool {
	return wordCodeSystems[sys] || hl7CodeSystem.MatchString(sys) || fhirCodeSystem.MatchString(sys)
}

var wordCodeSystems = setOf("http://unitsofmeasure.org", "urn:ietf:bcp:47", "urn:iso:std:iso:3166", "urn:iso:std:iso:4217")

// elementCode reports whether s may be released as the value of code
// element name of type (or backbone) parent, not Coding.code: the code of
// a quantity's unit when it has the form of a unit symbol; a code of
// the value set R4 binds the element to (required binding,
// fhirCodeBindings, generated from the R4 definitions into
// fhircodes_gen.go); where that value set is a grammar rather than a
// list, a code of its form (a MIME type, a language tag, a currency);
// where the element is bound to no value set whose codes are known (the
// codes of a CodeSystem resource, a ConceptMap, an open value[x]), never.
// A code element's syntax lets any token through ("EvelynMarsh",
// "7XKR319", "203.0.113.77"); only its value set tells a code from free
// text, and a token that is not one of its codes says what the source
// typed, not a concept.
func elementCode(parent, name, s string) bool {
	if quantityTypes[parent] && name == "code" {
		// A unit's code, kept with a unit system only (quantity).
		return unitText.MatchString(s) && !unitIdentifier(s) && !datedText(s) && plainAnnotations(s)
	}
	key := parent + "." + name
	if url, ok := fhirCodeBindings[key]; ok {
		return fhirCodeSets[url][s]
	}
	if form := fhirCodeForms[key]; codeForms[form] != nil {
		if form == "mime" && !knownMediaType(s) || form == "language" && smallRegion(s) || form == "currency" && smallCurrencies[s] {
			return false
		}
		return codeForms[form].MatchString(s) && !identifierDigits.MatchString(s)
	}
	return false
}

// fhirSystemCodes are fhirCodeSystemCodes as sets: the codes of HL7's and
// FHIR's own code systems (v2 tables, v3 code systems, FHIR terminology)
// that R4 lists whole. A coding of one of these systems keeps only one of
// its codes: their codes are words ("MTH", "laboratory", "female"), and a
// name, a plate or a serial typed as one ("EvelynMarsh", "7XKR319") is
// valid FHIR; a coding of an HL7 or FHIR code system R4 does not list is
// dropped, its codes unknown.
var fhirSystemCodes = func() map[string]map[string]bool {
	m := make(map[string]map[string]bool, len(fhirCodeSystemCodes))
	for url, codes := range fhirCodeSystemCodes {
		m[url] = setOf(codes...)
	}
	return m
}()

// fhirCodeSets are fhirValueSets as sets.
var fhirCodeSets = func() map[string]map[string]bool {
	m := make(map[string]map[string]bool, len(fhirValueSets))
	for url, codes := range fhirValueSets {
		m[url] = setOf(codes...)
	}
	return m
}()

// smallRegion reports whether language tag s (of languageTag's form) ends
// in a region subtag that names a country or territory of 20,000 people
// or fewer (smallAreas, as an ISO 3166 code is judged): "pih-NF" (Norfolk
// Island's language), "en-PN" (Pitcairn), "it-VA" (the Holy See) say
// where the patient lives as the address's country would, and were
// released until 2026-12-06.
func smallRegion(s string) bool {
	i := strings.LastIndexByte(s, '-')
	if i < 0 {
		return false
	}
	r := strings.ToUpper(s[i+1:])
	return (len(r) == 2 || len(r) == 3 && isDigit(r[0])) && smallAreas[r]
}

// smallCurrencies are the ISO 4217 currencies (alphabetic and numeric
// codes) used only in a territory of 20,000 people or fewer (smallAreas):
// the Falkland Islands pound (FKP, some 3,600 people) and the Saint Helena
// pound (SHP, Saint Helena, Ascension and Tristan da Cunha). A claim's
// amount in one says where it was paid as its country would; it was
// released until 2026-12-06. (NZD, AUD and the like are also used by small
// territories, but not only.)
var smallCurrencies = setOf("FKP", "238", "SHP", "654")

// codeForms are the forms of the codes of the value sets that are
// grammars (fhirCodeForms): a MIME type (BCP 13) of a registered top-level
// type, with no parameter but charset and fhirVersion (a name parameter
// holds a file name: "application/pdf;name=EvelynMarsh.pdf"); a language
// tag (BCP 47) of a language, script and region (languageTag); an ISO 4217
// currency.
var codeForms = map[string]*regexp.Regexp{
	// A MIME type's parameters: a character set's name, a FHIR version
	// number; any token there could be a name ("charset=EvelynMarsh",
	// released until 2026-12-05).
	"mime": regexp.MustCompile(`^(?:application|audio|font|image|message|model|multipart|text|video)/[A-Za-z0-9][A-Za-z0-9.+\-]{0,126}` +
		`(?:;(?i:charset=(?:utf-?8|utf-?(?:16|32)(?:le|be)?|us-ascii|ascii|iso-8859-(?:[1-9]|1[0-6])|windows-125[0-8]|cp125[0-8]|koi8-[ru]|gb2312|gbk|gb18030|big5|euc-(?:jp|kr)|iso-2022-jp)|fhirVersion=[0-9](?:\.[0-9]{1,2}){0,2}))*$`),
	"language": languageTag,
	"currency": regexp.MustCompile(`^[A-Z]{3}$`),
}

// knownMediaType reports whether MIME type s (of codeForms' "mime" form)
// names one of mediaTypes, case aside and parameters apart. A subtype is
// any token: a name ("application/x-evelyn-marsh", "application/vnd.evelyn-
// marsh"), a plate or a serial typed as one is of MIME's form, so only a
// media type known to be one is released (fail closed).
func knownMediaType(s string) bool {
	t, _, _ := strings.Cut(s, ";")
	return mediaTypes[strings.ToLower(strings.TrimSpace(t))]
}

// mediaTypes are the media types a MIME type code element (Binary's and
// Attachment's contentType, Endpoint.payloadMimeType,
// CapabilityStatement.format, Signature's formats, Subscription's payload)
// may keep: the IANA-registered types of health records and documents,
// FHIR's own and the formats its specification names (R4's mimetypes
// value set is BCP 13 whole, which no list holds).
var mediaTypes = setOf(
	// FHIR, HL7 and their formats
	"application/fhir+json", "application/fhir+xml", "application/fhir+turtle", "application/fhir+ndjson",
	"application/json+fhir", "application/xml+fhir", "application/ndjson", "application/x-ndjson",
	"application/hl7-v2", "application/hl7-v2+xml", "application/edi-x12", "application/edifact",
	"application/hl7-cda+xml", "application/cda+xml", "application/elm+json", "application/elm+xml",
	"text/cql", "text/cql-identifier", "text/cql-expression", "text/fhirpath", "application/x-fhir-query",
	"application/json-patch+json", "application/xml-patch+xml", "application/jose", "application/jwt",
	"application/dicom", "application/dicom+json", "application/dicom+xml", "application/signature+xml",
	"application/pkcs7-signature", "application/pkcs7-mime", "application/pdf", "application/octet-stream",
	"application/json", "application/xml", "application/ld+json", "application/javascript", "application/ecmascript",
	"application/x-www-form-urlencoded", "application/zip", "application/gzip", "application/rtf",
	"application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	"application/vnd.openxmlformats-officedocument.presentationml.presentation",
	"application/vnd.oasis.opendocument.text", "application/vnd.oasis.opendocument.spreadsheet",
	"application/xhtml+xml", "application/sparql-results+json", "application/n-triples", "application/rdf+xml",
	"application/sql", "application/yaml",
	// text
	"text/plain", "text/html", "text/xml", "text/csv", "text/tab-separated-values", "text/rtf", "text/markdown",
	"text/css", "text/javascript", "text/turtle", "text/calendar", "text/vcard", "text/uri-list", "text/x-markdown",
	// images, sound, video
	"image/jpeg", "image/png", "image/gif", "image/tiff", "image/bmp", "image/webp", "image/svg+xml", "image/heic",
	"image/heif", "image/jp2", "image/dicom-rle", "image/jls", "image/x-dicom",
	"audio/mpeg", "audio/mp4", "audio/wav", "audio/x-wav", "audio/ogg", "audio/webm", "audio/aac", "audio/basic",
	"video/mp4", "video/mpeg", "video/quicktime", "video/webm", "video/ogg", "video/x-msvideo",
	// other
	"model/stl", "font/ttf", "font/woff", "font/woff2", "message/rfc822",
	"multipart/form-data", "multipart/mixed", "multipart/related", "multipart/alternative",
)

// addressText is a URL, an e-mail address or an IP address inside a
// token: no code or unit symbol holds one, so a code or unit text that
// does is an identifier (Safe Harbor F, N, O), and is dropped.
var addressText = regexp.MustCompile(`(?i)://|^(?:https?|ftp|urn|mailto|tel|file|data):|www\.|@|\b[0-9]{1,3}(?:\.[0-9]{1,3}){3}\b|\b[0-9a-f]{1,4}(?::[0-9a-f]{0,4}){3,7}\b`)

// deid is the state of one resource's walk.
type deid struct {
	now     time.Time
	alias   func(string) string
	subject string // Options.Subject
	// own are the ids of the patient the resource is about (ownPatients):
	// references to them are aliased, to any other patient dropped.
	own map[string]bool
	// contained maps the id of each contained resource that is released to
	// its new id.
	contained map[string]string

	// ageLimit is the greatest age, in years, released: 89 (Safe Harbor),
	// lower when an age and a year of the same resource would tell a birth
	// year of someone now over 89 (see topResource).
	ageLimit float64
	// ageCtx: the walk is inside a value that is an age whatever its unit
	// says (an age Range, the value of an age Observation); birthCtx:
	// inside a date of birth (FamilyMemberHistory.bornPeriod, the value of
	// a birth-date Observation). opaqueCtx: inside a value whose meaning
	// is withheld (opaqueValue, valueMeanings), judged as a date of birth
	// (birthCtx) that may as well be the date of an event.
	ageCtx, birthCtx, opaqueCtx bool
	// oldestYear is the earliest year of an event date released (0: none);
	// oldestAge the greatest age released (-1: none).
	oldestYear int
	oldestAge  float64
}

// maxAge is the greatest age Safe Harbor releases: ages over 89 are
// aggregated, here withheld.
const maxAge = 89

// deidentify applies the deidentify obligation to a decoded document. The
// document must be a FHIR resource of a known type; anything else, and a
// resource carrying a modifier extension custos does not know, is withheld
// (ErrWithheld).
func deidentify(root any, opts Options) (any, error) {
	m, ok := root.(map[string]any)
	if !ok {
		return nil, ErrWithheld
	}
	d := &deid{now: opts.Now, alias: opts.Alias, subject: opts.Subject}
	out, ok := d.topResource(m, maxAge)
	if !ok {
		return nil, ErrWithheld
	}
	return out, nil
}

// topResource de-identifies a resource that is not contained: it numbers
// the contained resources that will be released, walks everything, and
// then drops contained resources no released reference names (FHIR
// invariant dom-3; namedContained).
//
// An age at an event and the event's year together tell the birth year,
// which Safe Harbor withholds for everyone now over 89 (164.514(b)(2)(i)(C):
// "all elements of dates (including year) indicative of such age"). So the
// walk notes the earliest event year and the greatest age it releases; if
// that age, carried from that year to Options.Now, is over 89, the resource
// is walked again with the ages that could be such an age withheld (at most
// limit, the limit of the document it is part of). A resource inside
// another (a Bundle's entry) is one document with it: its ages and years
// count in the outer resource's, and the outer's limit bounds its ages.
func (d *deid) topResource(m map[string]any, limit float64) (map[string]any, bool) {
	d.own = ownPatients(m, d.subject)
	d.ageLimit = limit
	out, ok := d.walkTop(m)
	if !ok || d.oldestAge < 0 || d.oldestYear == 0 {
		return out, ok
	}
	// An age A in year Y puts the birth in Y-A-1 or Y-A, so the person may
	// now be (now's year - Y) + A + 1: over 89 when A > 88 - (now - Y).
	if l := float64(maxAge - 1 - (d.now.Year() - d.oldestYear)); d.oldestAge > l {
		d.ageLimit = min(limit, l)
		out, ok = d.walkTop(m)
	}
	return out, ok
}

// walkTop is one walk of topResource.
func (d *deid) walkTop(m map[string]any) (map[string]any, bool) {
	d.contained = map[string]string{}
	d.ageCtx, d.birthCtx, d.opaqueCtx, d.oldestYear, d.oldestAge = false, false, false, 0, -1
	n := 0
	for _, c := range asArray(m["contained"]) {
		cm, _ := c.(map[string]any)
		id, _ := cm["id"].(string)
		rt, _ := cm["resourceType"].(string)
		if id != "" && fhirr4.Resources[rt] && !unknownModifier(cm) {
			n++
			d.contained[id] = "c" + strconv.Itoa(n)
		}
	}
	out, ok := d.resource(m, false)
	if !ok {
		return nil, false
	}
	if cs, ok := out["contained"].([]any); ok {
		named := namedContained(out, cs)
		kept := cs[:0]
		for _, c := range cs {
			if id, _ := c.(map[string]any)["id"].(string); named[id] {
				kept = append(kept, c)
			}
		}
		if len(kept) == 0 {
			delete(out, "contained")
		} else {
			out["contained"] = kept
		}
	}
	return out, true
}

// namedContained returns the ids of the walked contained resources cs of
// walked resource out that a released reference names: a local reference
// of out itself, or of a contained resource so named, in turn. A contained
// resource named only by one that nothing released names (a note's
// author, withheld with the note, whose qualification names an
// Organization) is not: it was released until 2026-12-05, named by
// nothing in the output (dom-3 broken), with its state and ZIP3.
func namedContained(out map[string]any, cs []any) map[string]bool {
	byID := make(map[string]map[string]any, len(cs))
	for _, c := range cs {
		cm, _ := c.(map[string]any)
		if id, _ := cm["id"].(string); id != "" {
			byID[id] = cm
		}
	}
	named, walked := map[string]bool{}, map[string]bool{}
	localReferences(out, named, true)
	for more := true; more; {
		more = false
		for id := range byID {
			if named[id] && !walked[id] {
				walked[id] = true
				localReferences(byID[id], named, true)
				more = true
			}
		}
	}
	return named
}

// localReferences adds to named the ids the local references ("#id") of
// walked value v name, not those of a resource inside it (a contained
// resource, a Bundle's entry: each is judged on its own); root: v is the
// resource itself.
func localReferences(v any, named map[string]bool, root bool) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["resourceType"]; ok && !root {
			return
		}
		if r, _ := v["reference"].(string); len(r) > 1 && r[0] == '#' {
			named[r[1:]] = true
		}
		for _, x := range v {
			localReferences(x, named, false)
		}
	case []any:
		for _, x := range v {
			localReferences(x, named, false)
		}
	}
}

// resource de-identifies one resource; a contained one keeps its new id.
func (d *deid) resource(m map[string]any, contained bool) (map[string]any, bool) {
	rt, _ := m["resourceType"].(string)
	if !fhirr4.Resources[rt] {
		return nil, false
	}
	out, ok := d.object(m, rt)
	if !ok {
		return nil, false
	}
	out["resourceType"] = rt
	if contained {
		id, _ := m["id"].(string)
		nid, ok := d.contained[id]
		if !ok {
			return nil, false
		}
		out["id"] = nid
	}
	return out, true
}

// unknownModifier reports whether m carries a modifier extension that is
// not allowed: FHIR forbids processing such an element as if it were not
// there, so the walk drops the element (or withholds the resource).
func unknownModifier(m map[string]any) bool {
	for _, x := range asArray(m["modifierExtension"]) {
		xm, _ := x.(map[string]any)
		if u, _ := xm["url"].(string); allowedExtensions[u] == nil {
			return true
		}
	}
	return false
}

// object walks the elements of an object of type (or backbone path) key.
// It reports false when the object must be dropped whole: its type is
// unknown, or it carries an unknown modifier extension. The result may be
// empty.
func (d *deid) object(m map[string]any, key string) (map[string]any, bool) {
	defs := fhirr4.Elements[key]
	if defs == nil || unknownModifier(m) {
		return nil, false
	}
	out := make(map[string]any, len(m))
	var dropped []string // required elements the walk dropped
	valueCtx := observationValue(key, m)
	withheld := d.meaningWithheld(key, m)
	for k, v := range m {
		e, ok := defs[k]
		if !ok {
			continue // resourceType, "_name" companions, unknown elements: fail closed
		}
		if birthElement(k) && (e.Type == "date" || e.Type == "dateTime") {
			if y, ok := d.birthYear(v); ok {
				out[k] = y
			} else {
				out["_"+k] = absent()
			}
			continue
		}
		if y, ok := yearNumber(v, d.now); ok && e.Choice != "" && numericTypes[e.Type] {
			d.noteYear(y) // see yearNumber
		}
		if e.Choice != "" && numericTypes[e.Type] && d.bareNumber(v) {
			if e.Required {
				dropped = append(dropped, k)
			}
			continue // see identifierNumber
		}
		opaque := opaqueValue(key, e) || withheld && meaningValue(key, k, e)
		if opaque && e.Type == "code" {
			// A code of no value set: free text without spaces (an MRN, a
			// user name), which codeText and the scrub patterns let pass.
			if e.Required {
				dropped = append(dropped, k)
			}
			continue
		}
		age, birth, opq := d.ageCtx, d.birthCtx, d.opaqueCtx
		switch {
		case opaque:
			d.birthCtx, d.opaqueCtx = true, true // see opaqueValue
		case e.Choice == "value" && (valueCtx == "age" || valueCtx == "birth"):
			d.ageCtx, d.birthCtx = d.ageCtx || valueCtx == "age", d.birthCtx || valueCtx == "birth"
		case e.Choice == "effective" && valueCtx == "at-birth":
			d.birthCtx = true // measured at birth: its date is the birth date
		case birthElement(k):
			d.birthCtx = true
		case ageElement(key, k, e):
			d.ageCtx = true
		}
		nv, keep := d.element(key, k, e, v)
		d.ageCtx, d.birthCtx, d.opaqueCtx = age, birth, opq
		if keep {
			out[k] = nv
		} else if e.Required {
			dropped = append(dropped, k)
		}
	}
	for k, e := range defs {
		// A required primitive given only by its "_name" companion (its
		// value absent, say why: FHIR-Converter writes data-absent-reason
		// "unknown" so) is still required: it keeps a data-absent-reason.
		if _, ok := m["_"+k]; ok && e.Required && primitiveTypes[e.Type] && m[k] == nil {
			dropped = append(dropped, k)
		}
	}
	for _, k := range dropped {
		markAbsent(out, k, defs)
	}
	if key == "FamilyMemberHistory" && out["estimatedAge"] != nil && out["ageAge"] == nil && out["ageRange"] == nil && out["ageString"] == nil {
		delete(out, "estimatedAge") // fhs-2: only with an age (one withheld here)
	}
	if key == "Parameters.parameter" && !hasParameterContent(out, defs) {
		return nil, false // inv-1: a parameter has a value, a resource or parts; its value was dropped
	}
	repairInvariants(key, m, out, defs)
	return out, true
}

// An atLeastOne is an invariant of FHIR R4 that an element (key) holds at
// least one of some elements (any: names, a choice by its name without
// [x]), when it holds one of others (when; nil: always). The walk can drop
// them all (text, references, strings, instants); repairInvariants then
// stands in for the elements mark with a data-absent-reason, as for a required element, so the
// output stays valid FHIR R4. It does so only when the input held one of
// any: the data was there, and is withheld.
type atLeastOne struct {
	when, any, mark []string
}

// atLeastOnes are the invariants of that form the walk can break, by key.
var atLeastOnes = map[string]atLeastOne{
	"Patient.contact":                           {any: []string{"name", "telecom", "address", "organization"}, mark: []string{"name"}},    // pat-1
	"Composition.section":                       {any: []string{"text", "entry", "section"}, mark: []string{"entry"}},                     // cmp-1
	"Observation.referenceRange":                {any: []string{"low", "high", "text"}, mark: []string{"low"}},                            // obs-3
	"MedicationAdministration.dosage":           {any: []string{"dose", "rate"}, mark: []string{"dose"}},                                  // mad-1
	"Immunization.education":                    {any: []string{"documentType", "reference"}, mark: []string{"documentType"}},             // imm-1
	"ServiceRequest":                            {when: []string{"orderDetail"}, any: []string{"code"}, mark: []string{"code"}},           // prr-1
	"Goal.target":                               {when: []string{"detail"}, any: []string{"measure"}, mark: []string{"measure"}},          // gol-1
	"Appointment.participant":                   {any: []string{"type", "actor"}, mark: []string{"actor"}},                                // app-1
	"AppointmentResponse":                       {any: []string{"participantType", "actor"}, mark: []string{"actor"}},                     // apr-1
	"Condition.stage":                           {any: []string{"summary", "assessment"}, mark: []string{"summary"}},                      // con-1
	"Condition.evidence":                        {any: []string{"code", "detail"}, mark: []string{"detail"}},                              // con-2
	"Consent":                                   {any: []string{"policy", "policyRule"}, mark: []string{"policyRule"}},                    // ppc-1
	"ImmunizationRecommendation.recommendation": {any: []string{"vaccineCode", "targetDisease"}, mark: []string{"targetDisease"}},         // imr-1
	"NutritionOrder":                            {any: []string{"oralDiet", "supplement", "enteralFormula"}, mark: []string{"oralDiet"}},  // nor-1
	"Appointment":                               {any: []string{"start"}, mark: []string{"start", "end"}},                                 // app-3 (instants), app-2
	"Ratio":                                     {when: []string{"denominator"}, any: []string{"numerator"}, mark: []string{"numerator"}}, // rat-1 (a bare numerator dropped)
	"Organization":                              {any: []string{"identifier", "name"}, mark: []string{"name"}},                            // org-1
	"InsurancePlan":                             {any: []string{"identifier", "name"}, mark: []string{"name"}},                            // ipn-1
}

// repairInvariants keeps the invariants of atLeastOnes for the walked
// object out of key (m the input), unless the walk left it empty (it is
// then dropped whole, and breaks nothing; a resource is never dropped, and
// is repaired however empty), and three more: a Composition.section
// given an entry for cmp-1 loses its emptyReason (cmp-2: only an empty
// section has one), a document Bundle becomes a collection (bdl-9 and
// bdl-10 want the document's identifier and timestamp, which are
// withheld: a de-identified document is no longer one), and a Ratio that
// keeps its numerator and lost its denominator gets a data-absent-reason
// for it (rat-1: both or neither; a denominator coded outside UCUM, a
// tablet in v3-orderableDrugForm as HL7's Medication examples write it,
// is dropped).
func repairInvariants(key string, m, out map[string]any, defs map[string]fhirr4.Element) {
	if key == "Bundle" && out["type"] == "document" {
		out["type"] = "collection"
	}
	if key == "Ratio" && out["numerator"] != nil && out["denominator"] == nil && m["denominator"] != nil {
		markAbsent(out, "denominator", defs)
	}
	inv, ok := atLeastOnes[key]
	if !ok || len(out) == 0 && !fhirr4.Resources[key] || inv.when != nil && !holdsAny(out, defs, inv.when) || holdsAny(out, defs, inv.any) || !holdsAny(m, defs, inv.any) {
		return
	}
	for _, n := range inv.mark {
		markAbsent(out, n, defs)
	}
	if key == "Composition.section" {
		delete(out, "emptyReason")
	}
}

// holdsAny reports whether o holds one of the elements names (a choice by
// its name without [x]) of the type whose elements are defs.
func holdsAny(o map[string]any, defs map[string]fhirr4.Element, names []string) bool {
	for k := range o {
		for _, n := range names {
			if k == n || defs[k].Choice == n && defs[k].Choice != "" {
				return true
			}
		}
	}
	return false
}

// hasParameterContent reports whether a walked Parameters.parameter still
// has a value[x], a resource or parts (FHIR inv-1).
func hasParameterContent(out map[string]any, defs map[string]fhirr4.Element) bool {
	for k := range out {
		if k == "resource" || k == "part" || defs[k].Choice == "value" {
			return true
		}
	}
	return false
}

// element walks the value of one element, an array if the element repeats.
func (d *deid) element(parent, name string, e fhirr4.Element, v any) (any, bool) {
	if !e.Many {
		return d.value(parent, name, e.Type, v)
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]any, 0, len(arr))
	for _, x := range arr {
		if nv, ok := d.value(parent, name, e.Type, x); ok {
			out = append(out, nv)
		}
	}
	return out, len(out) > 0
}

// value walks one value of FHIR type typ (element name of type parent).
func (d *deid) value(parent, name, typ string, v any) (any, bool) {
	if droppedTypes[typ] {
		if (typ == "string" || typ == "markdown") && keptStrings[parent+"."+name] {
			// A unit the scrub would change (a telephone number, a date)
			// is dropped, not released as "[PHONE]".
			s, ok := v.(string)
			return s, ok && unitTextForm(s) && !unitIdentifier(s) && !addressText.MatchString(s) && ScrubString(s) == s && unitSymbol(s) && knownUnitText(s) && !nameFormUnit(s)
		}
		return nil, false
	}
	switch typ {
	case "boolean":
		_, ok := v.(bool)
		return v, ok
	case "integer", "integer64", "positiveInt", "unsignedInt", "decimal":
		n, ok := v.(json.Number)
		if !ok || typ != "decimal" && !fhirInteger.MatchString(string(n)) {
			return nil, false
		}
		if !quantityTypes[parent] && identifierNumber(v) {
			return nil, false // see identifierNumber (a quantity's value: see quantity)
		}
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || !integerInRange(typ, f) {
			return nil, false
		}
		if d.birthCtx || d.ageCtx && !d.releaseAge(f) {
			return nil, false // a number in a birth date may be its year
		}
		return v, true
	case "code":
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		if parent != "Coding" && (!elementCode(parent, name, s) || ScrubString(s) != s) {
			return nil, false // see elementCode; a code the scrub would change is dropped (Coding: see coding)
		}
		return ScrubString(s), codeText.MatchString(s) && !addressText.MatchString(s)
	case "date", "dateTime":
		if d.birthCtx {
			y, ok := d.birthYear(v)
			if n, _ := strconv.Atoi(y); ok && d.opaqueCtx {
				// A date whose meaning is withheld may be an event's: its
				// year with an age released beside it tells a birth year
				// as an event year does (topResource). Until 2026-12-06
				// an answer's valueDate 2000 and an answer's age of 70
				// years were both released (born in 1929 or 1930).
				d.noteYear(n)
			}
			return y, ok
		}
		s, _ := v.(string)
		m := fhirDate.FindStringSubmatch(s)
		if m == nil {
			return nil, false
		}
		y, _ := strconv.Atoi(m[1])
		if oldYear(y, d.now) {
			return nil, false // see oldYear
		}
		d.noteYear(y)
		return m[1], true
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	var out map[string]any
	switch typ {
	case "Resource":
		if name == "contained" {
			out, ok = d.resource(m, true)
		} else { // a resource of its own (Bundle.entry.resource, Parameters)
			inner := &deid{now: d.now, alias: d.alias, subject: d.subject}
			out, ok = inner.topResource(m, d.ageLimit)
			if inner.oldestYear != 0 && (d.oldestYear == 0 || inner.oldestYear < d.oldestYear) {
				d.oldestYear = inner.oldestYear
			}
			d.oldestAge = max(d.oldestAge, inner.oldestAge)
		}
	case "Reference":
		out, ok = d.reference(m), true
	case "Coding":
		out, ok = d.coding(m)
	case "Quantity", "Age", "Count", "Distance", "Duration", "SimpleQuantity", "MoneyQuantity":
		out, ok = d.quantity(m, typ)
	case "Money":
		out, ok = d.money(m)
	case "Location.position":
		return nil, false // a geocode (Safe Harbor class B)
	case "Address":
		out, ok = d.address(m)
	case "Extension":
		out, ok = d.extension(m)
	default:
		out, ok = d.object(m, typ)
	}
	return out, ok && len(out) > 0
}

// reference keeps only a reference custos can say without identifying
// anyone: the caller's alias of the resource's own patient (ownPatients;
// a reference to another patient is dropped), or a local reference to a
// released contained resource.
func (d *deid) reference(m map[string]any) map[string]any {
	ref, _ := m["reference"].(string)
	switch {
	case ref == "#": // the containing resource
		return map[string]any{"reference": ref}
	case strings.HasPrefix(ref, "#"):
		if n, ok := d.contained[ref[1:]]; ok {
			return map[string]any{"reference": "#" + n}
		}
	case d.alias != nil:
		if id, ok := strings.CutPrefix(ref, "Patient/"); ok && d.own[id] && fhirID.MatchString(id) {
			if a := d.alias(id); fhirID.MatchString(a) {
				return map[string]any{"reference": "Patient/" + a}
			}
		}
	}
	return nil
}

// coding keeps a coding of a public terminology: system, code,
// userSelected.
func (d *deid) coding(m map[string]any) (map[string]any, bool) {
	sys, _ := m["system"].(string)
	sys = canonicalSystem(sys)
	if !terminologySystem(sys) {
		return nil, false
	}
	c, _ := m["code"].(string)
	if identifierDigits.MatchString(c) && wordCodeSystem(sys) {
		return nil, false
	}
	if re, ok := codeSyntax[sys]; ok && !re.MatchString(c) {
		return nil, false // not a code of that terminology: free text, a name
	}
	if check := codeChecks[sys]; check != nil && !check(c) {
		return nil, false // see codeChecks
	}
	if (hl7CodeSystem.MatchString(sys) || fhirCodeSystem.MatchString(sys)) && codeSyntax[sys] == nil && !fhirSystemCodes[sys][c] {
		return nil, false // see fhirSystemCodes; ICD-O-3, THO's, by its form (codeSyntax)
	}
	out, ok := d.object(m, "Coding")
	if !ok || out["code"] == nil {
		return nil, false
	}
	if out["code"] != c {
		// The scrub found an identifier's pattern in the code (a
		// telephone number's ten digits): a code is released as it is or
		// not at all, never as a token such as "[PHONE]" under the
		// terminology's system. A SNOMED CT concept id passed its check
		// digit (codeChecks), but one telephone number in 500 does too
		// (212-555-1001): only a core concept id of ten digits, which
		// begins with 1 as no North American telephone number does, is
		// kept whole (1119349007, the SARS-CoV-2 mRNA vaccine); any
		// other is dropped.
		if sys != "http://snomed.info/sct" || !snomedCoreTenDigits(c) {
			return nil, false
		}
		out["code"] = c
	}
	out["system"] = sys
	return out, true
}

// quantity keeps value, comparator and unit, and system and code only for
// UCUM and ISO 4217, or a code of HL7's and FHIR's code systems
// (fhirQuantityCode) (FHIR qty-3: a code needs its system). An age over 89
// is dropped (Safe Harbor aggregates ages over 89): an Age, any quantity
// in a unit of time (UCUM's, or a unit text such as "years"), and any
// quantity where the walk is inside an age (ageCtx: taken in years when
// its unit says nothing).
func (d *deid) quantity(m map[string]any, typ string) (map[string]any, bool) {
	age, birth := d.ageCtx, d.birthCtx
	d.ageCtx, d.birthCtx = false, false // the value is judged here, with its unit
	out, ok := d.object(m, typ)
	d.ageCtx, d.birthCtx = age, birth
	if !ok {
		return nil, false
	}
	if u, _ := m["unit"].(string); identifierAnnotation(u) {
		return nil, false // "{MRN}": the number is an identifier
	}
	if c, _ := m["code"].(string); identifierAnnotation(c) {
		return nil, false
	}
	if c, _ := out["code"].(string); unitIdentifier(c) {
		delete(out, "code")
	}
	sys, _ := m["system"].(string)
	sys = canonicalSystem(sys)
	if c, _ := out["code"].(string); c != "" {
		if re, ok := codeSyntax[sys]; ok && !re.MatchString(c) {
			delete(out, "code") // not a code of its system (UCUM, ISO 4217)
		} else if check := codeChecks[sys]; check != nil && !check(c) {
			delete(out, "code") // a dated UCUM code, a small territory's currency
		}
	}
	if c, _ := out["code"].(string); nameFormUnit(c) || beforeCommonEra(c) {
		delete(out, "code") // "Pa", "Gal", "{Smith}", "a.C": see nameFormUnit, beforeCommonEra
	}
	if c, _ := out["code"].(string); initials.MatchString(bracketedAtom.ReplaceAllString(annotation.ReplaceAllString(c, " "), " ")) || capitalInitials.MatchString(withoutUnity(c)) {
		// A name's initials typed as a UCUM code ("J.S", a
		// joule-siemens: UCUM's form) were released with their number
		// until h-deid13, two capitals alone ("MJ", a megajoule;
		// "MA", a megaampere; "AU") until h-deid14, and three ("RAD",
		// "REM", UCUM's own in capitals) until h-deid15; no UCUM code
		// of R4's has their form outside its annotations ("g.m/{H.B.}"
		// is kept) but "AU". Such a code is kept only beside a unit
		// text that says it ("V.A", the volt-ampere, beside "V.A"; "AU"
		// beside "AU": unitAgrees).
		if u, _ := out["unit"].(string); !unitAgrees(u, c) {
			delete(out, "code")
		}
	}
	if u, _ := out["unit"].(string); smallCurrencies[strings.ToUpper(u)] {
		delete(out, "unit")
	}
	if c, _ := m["code"].(string); fhirQuantityCode(typ, sys, c) {
		out["code"], out["system"] = c, sys // see fhirQuantityCode
	} else if quantitySystems[sys] && out["code"] != nil {
		out["system"] = sys
	} else {
		delete(out, "code")
	}
	// A Duration's and an Age's unit is one of time (FHIR R4 drt-1,
	// age-1), and so is that of a quantity an age code makes an age
	// (ageCtx): there a unit of time written as a name is ("Days",
	// "Years", "HR"; timeUnitWord) says that unit, not a surname, and
	// needs no code; beside a code it must agree with it.
	c, _ := out["code"].(string)
	time := (typ == "Age" || typ == "Duration" || age) && c == ""
	_, year := calendarYear(m) // an era ("AD") is a unit beside a year only
	if u, _ := out["unit"].(string); nameCaseText(u, time, year) && (sys != "http://unitsofmeasure.org" || !unitAgrees(u, c)) && !doseFormCode(u, sys, m["code"]) {
		delete(out, "unit") // "Day", "STONE", "Box/day" without the unit's code: see nameCaseText
	}
	if dimensionless(out) && !dimensionless(m) || out["unit"] == nil && out["code"] == nil && (m["unit"] != nil || m["code"] != nil) {
		// The input gave a unit (or a code) that the walk dropped: it
		// names no unit (knownUnitText, ucumUnit: "MRN", "acct", a
		// surname) or is prose, so the number is not known to be a
		// measurement, and is dropped with it (fail closed). Until
		// 2026-12-06 the unit's form was judged only, and 77441124
		// "MRN" was released; a number whose unit was dropped came out
		// bare, judged as a bare number (eight digits kept). A unit of
		// annotations alone counts ("{Smith}", dropped by nameFormUnit:
		// until h-deid10 its number came out bare).
		return nil, false
	}
	if birth && dimensionless(out) {
		// Inside a value whose meaning is withheld or a date of birth
		// (birthCtx), a quantity is a measurement only by the unit it is
		// released with: one whose unit and code the walk dropped
		// ("5558675 tel no.": prose; "90211 7XKR319": no unit symbol), or
		// that are annotations alone ("{#}", "1"), says nothing of what
		// its number is. Until 2026-12-06 the unit of the input was
		// judged, and such a number was released bare.
		return nil, false
	}
	if years, ok := ageYears(m, typ == "Age" || age); ok && !d.releaseAge(years) {
		return nil, false
	}
	if dimensionless(out) && d.bareNumber(out["value"]) {
		return nil, false // see bareNumber
	}
	if out["unit"] == nil && out["code"] != nil && !quantitySystems[sys] && d.bareNumber(out["value"]) {
		// A code of HL7's (fhirQuantityCode) names what is counted, not a
		// unit of measure: alone it leaves the number bare (219099999
		// coded v2-0203's "SS", a social security number).
		return nil, false
	}
	if y, ok := calendarYear(m); ok {
		if oldYear(y, d.now) || laterEraYear(m, y, d.now) {
			return nil, false
		}
		d.noteYear(y) // see yearNumber
	} else if y, ok := yearNumber(out["value"], d.now); ok && dimensionless(out) {
		d.noteYear(y)
	}
	return out, true
}

// doseFormCode reports whether code, of system sys, is a code HL7's
// orderableDrugForm code system lists that says unit text u, the same
// letters case aside ("Cap" beside "CAP", "TAB" beside "TAB"): HL7's own
// examples give a dose or a dispensed quantity so (MedicationRequest
// medrx0303's 4 "TAB", code TAB), and nameCaseText's unit written as a
// name is beside it the dose form it says, as beside a UCUM code that says
// it (unitAgrees). Until h-deid15 only a UCUM code counted, and 4 "Cap"
// beside the code CAP was dropped with its number. The code itself is
// released with its system since h-terms (fhirQuantityCode). A code the
// code system does not list (MedicationDispense meddisp0301's "Vial")
// says nothing.
func doseFormCode(u, sys string, code any) bool {
	c, _ := code.(string)
	return sys == orderableDrugForm && fhirSystemCodes[sys][c] && strings.EqualFold(u, c)
}

// fhirQuantityCode reports whether code c of system sys, in a quantity of
// type typ, is kept with its system: a code of HL7's or FHIR's own code
// systems that R4 lists (fhirSystemCodes), as a coding of those systems
// is kept, in a Quantity or SimpleQuantity (R4 gives the other kinds,
// Age, Count, Distance, Duration, UCUM alone: age-1, cnt-3, dis-1,
// drt-1). HL7's examples give doses and dispensed quantities so
// (MedicationRequest medrx0303's 4 TAB of v3-orderableDrugForm); the unit
// checks before it (unitSymbol, capitalInitials, ...) tell a UCUM code
// from a name, and a closed list of words needs none of them. Until
// h-terms such a code was dropped, and the quantity with it when it had
// no unit text (a tablet's strength coded TAB: "2 mg per [masked]"). A
// code the list lacks stays dropped: Medication med0304's "Tab" (the
// code system is case-sensitive, its code is TAB).
func fhirQuantityCode(typ, sys, c string) bool {
	return (typ == "Quantity" || typ == "SimpleQuantity") &&
		(hl7CodeSystem.MatchString(sys) || fhirCodeSystem.MatchString(sys)) && fhirSystemCodes[sys][c] && !identifierDigits.MatchString(c)
}

// orderableDrugForm is HL7's code system of dose forms (doseFormCode).
const orderableDrugForm = "http://terminology.hl7.org/CodeSystem/v3-orderableDrugForm"

// money walks a Money. Inside a value whose meaning is withheld
// (birthCtx: an answer, an open value[x], a value under a withheld code,
// valueMeanings), an amount is judged as a quantity is (quantity): a
// measurement by the unit it is released with, here its currency; one
// whose currency the walk drops, or that has none, is a bare number, and
// is dropped; so is one of an identifier's size (identifierAmount). Elsewhere a Money is walked as any object (its value judged
// as a number: identifierNumber).
func (d *deid) money(m map[string]any) (map[string]any, bool) {
	birth := d.birthCtx
	d.birthCtx = false // the value is judged here, with its currency
	out, ok := d.object(m, "Money")
	d.birthCtx = birth
	if ok && birth && (out["currency"] == nil || identifierAmount(out["value"])) {
		delete(out, "value")
	}
	return out, ok
}

// identifierAmount reports whether amount v, in a value whose meaning is
// withheld, has an identifier's size: 100,000 or more, six digits before
// its decimal point, as identifierDigits reads a unit. A currency is no
// unit chosen for the number: systems add their own to every amount, so a
// member or account number typed into a local type's Money (77441123 USD
// under "member-no") was released until h-review25: a cost's always, an
// open value's (Task.input) from 2026-12-06 (money). A copay, a deductible or a fee under a local type is below
// that size; a claim's totals are not judged here.
func identifierAmount(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	f, err := n.Float64()
	return err != nil || math.Abs(f) >= 100000
}

// calendarYear returns the Gregorian year a quantity's value is, when its
// unit text or code says the value is a year of a calendar (yearUnits):
// "1931 AD", "1931 yyyy", "2474 พ.ศ." (the Thai Buddhist Era, 1931),
// "6 昭和" (Shōwa 6, 1931), "20 民國" (the Republic of China's year 20,
// 1931), "1350 AH" (the Hijri year of 1931). Such a year 90 years or more
// before now is dropped as a bare one is (oldYearNumber): a unit made it a
// measurement, and it was released until 2026-12-06.
func calendarYear(q map[string]any) (int, bool) {
	n, ok := q["value"].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || f < 1 || f > 9999 {
		return 0, false
	}
	for _, k := range []string{"unit", "code"} {
		u, _ := q[k].(string)
		if u == "AH" || u == "هـ" || u == "ه" {
			// The Hijri year, lunar: about 0.97 of a solar one.
			return int(f*0.970229 + 621.5643), true
		}
		if off, ok := yearUnit(u); ok {
			return int(f) + off, true
		}
	}
	return 0, false
}

// laterEraYear reports whether y, the Gregorian year calendarYear reads in
// quantity q, is after now's year under an era that counts from another
// year than the common era's (Reiwa, 令和, 民國, ه.ش, AH): such a value is
// no year of that era ("1931 Reiwa" would be 3949, "314 Reiwa" 2332), and
// its number, released as it is, may be a year of birth 90 years ago or
// more or a day's month and day (3/14); oldYear judges only the era's
// year. "1931 令和", "1931 民國", "1931 ه.ش" were released so until
// h-review53, and "1931 Reiwa", "314 Reiwa" from h-deid15. A year of the
// common era's count ("2030 yyyy") says its number: it is not judged here.
func laterEraYear(q map[string]any, y int, now time.Time) bool {
	n, _ := q["value"].(json.Number)
	f, err := n.Float64()
	return y > now.Year() && (err != nil || float64(y) != f)
}

// yearUnit returns what yearUnits adds to a year in unit text u, if u is
// one of them ("AD", "n. Chr.", "N.E.", "yyyy").
func yearUnit(u string) (int, bool) {
	off, ok := yearUnits[strings.NewReplacer("-", "", "_", "").Replace(unitKey(u))]
	return off, ok
}

// beforeCommonEra reports whether unit text or code u is an era of the years
// before the common era (erasBefore: "a.C.", "BC", "v. Chr."), which
// nameCaseText drops with its number: the Romance languages' "a.C." (antes
// de Cristo, avanti Cristo; UCUM reads it as an annum times a coulomb,
// "a.C") was released with any number as a unit until h-deid15, where its
// common-era twin "d.C." is a calendar year (yearUnits). No patient's datum
// is a year before the common era, and custos cannot judge one as a date.
func beforeCommonEra(u string) bool {
	return erasBefore[strings.NewReplacer("-", "", "_", "").Replace(unitKey(u))]
}

// erasBefore are the eras before the common era, as unitKey writes them
// without hyphens and underscores (beforeCommonEra): English (BC, BCE), the
// Romance languages (a.C., av. J.-C., a.e.c.), German (v. Chr.), the
// Scandinavian languages (f.Kr.), Polish and Russian (p.n.e., до н. э.),
// Chinese, Japanese and Korean (公元前, 紀元前, 기원전). "aC", the
// attocoulomb, has the key of "a.C." and goes with it: no clinical datum
// is in attocoulombs.
var erasBefore = setOf("ac", "bc", "bce", "avjc", "aec", "vchr", "fkr", "pne", "донэ", "公元前", "紀元前", "기원전")

// yearUnits are the unit texts that say a quantity's value is a calendar
// year, as unitKey writes them without hyphens and underscores, with what
// to add to it for the Gregorian year: the Common Era in English, German
// (n. Chr.), the Romance languages (d.C., apr. J.-C.), Polish and Russian
// (n.e., н. э.), Chinese, Japanese and Korean (公元, 西暦, 서기), a year's
// format (yyyy); the Thai Buddhist Era (BE, พ.ศ.), the Solar Hijri year
// (ه.ش), the Republic of China's (民國) and Japan's eras (Meiji to Reiwa).
var yearUnits = map[string]int{
	"yyyy": 0, "ad": 0, "ce": 0, "nchr": 0, "adchr": 0, "dc": 0, "aprjc": 0, "ne": 0, "нэ": 0, "ncl": 0,
	"公元": 0, "西暦": 0, "西元": 0, "서기": 0,
	"be": -543, "พศ": -543, "هش": 621, "هـش": 621,
	"民國": 1911, "民国": 1911,
	"明治": 1867, "meiji": 1867, "大正": 1911, "taisho": 1911, "taishō": 1911, "昭和": 1925, "showa": 1925, "shōwa": 1925,
	"平成": 1988, "heisei": 1988, "令和": 2018, "reiwa": 2018,
}

// dimensionless reports whether a walked quantity q says no unit: it has
// neither unit nor code, or they are UCUM's unity "1" or annotations alone
// ("{#}", "{yyyy}", "{YOB}"), which UCUM reads as "1". Its value is then
// as bare as a number without unit (bareNumber): a year of birth or an
// identifier with a comment for unit is still one.
func dimensionless(q map[string]any) bool {
	for _, k := range []string{"unit", "code"} {
		u, _ := q[k].(string)
		if strings.TrimSpace(annotation.ReplaceAllString(u, "")) != "" && strings.TrimSpace(annotation.ReplaceAllString(u, "")) != "1" {
			return false
		}
	}
	return true
}

// annotation is a UCUM annotation ("{beats}").
var annotation = regexp.MustCompile(`\{[^{}]*\}`)

// bracketedAtom is a UCUM atom in square brackets ("[in_i]", "mm[Hg]",
// "[Amb'a'1'U]"): ucumSyntax takes any characters but brackets and
// braces inside.
var bracketedAtom = regexp.MustCompile(`\[[^\[\]]*\]`)

// plainAnnotations reports whether every UCUM annotation and every
// bracketed atom in unit text or code s holds only words and short
// numbers (annotationWord). An annotation is free text by UCUM's
// definition and gives any string UCUM's form: a plate, a serial or a
// year in braces ("{7XKR319}", "mg{SN4C7Q2Z9}", "{1931}") was released
// where the same string without braces is dropped (unitSymbol). So was
// one in square brackets ("[7XKR319]", "mm[SN4C7Q2Z9]", "[1931]"), which
// UCUM's form takes as a bracketed atom whatever it holds, until
// 2026-12-05; UCUM's own bracketed atoms are words and short numbers
// ("[in_i]", "[EID_50]", "[Amb'a'1'U]", "[in_i'H2O]"). A name in braces
// passed too, in small letters, in capitals or run together ("{smith}",
// "mg{SMITH}", "{JaneDoe}"), until h-deid11, and a name that is a word of a
// unit's annotation ("{stone}", "{val}") until h-deid12: now an annotation
// must be a known one, whole and as written (knownAnnotation); a name in
// brackets is no UCUM atom (ucumUnit).
//
// The runs are judged also joined across the separators a plate, a serial
// or a date is written with ('-', '.'): "{7XK-R319}", "{SN4.C7Q.2Z9}" and
// "{19.31}" are runs of short words and numbers, and were released;
// "{1.73_m2}" and "{pack-years}" joined are words still. UCUM's
// annotations join words with '_' ("{at_60_min}", "{CAG_repeats}"): runs
// across it stay apart.
func plainAnnotations(s string) bool {
	for _, a := range annotation.FindAllString(s, -1) {
		if !knownAnnotation(a) {
			return false
		}
	}
	for _, a := range append(annotation.FindAllString(s, -1), bracketedAtom.FindAllString(s, -1)...) {
		for _, runs := range []string{a, annotationSeparators.Replace(a)} {
			for _, w := range unitRun.FindAllString(runs, -1) {
				if !annotationWord.MatchString(w) {
					return false
				}
			}
		}
	}
	return true
}

// knownAnnotation reports whether annotation a is, whole and as written,
// an annotation of R4's UCUM codes or of clinicalAnnotations
// (knownAnnotations): "{beats}", "{Beats}", "{CAG_repeats}", "{HbA1c}",
// "{1.73_m2}", "{#}", "{score}" are; "{smith}", "{SMITH}", "{JaneDoe}",
// "{Anna}", and the names that are words of those ("{stone}", "{val}",
// "{pan}", "{DAY}", "{BEATS}") are not. A unit text or code that holds
// another is dropped (unitSymbol, codeChecks, elementCode), and a quantity
// left with no unit with it (quantity). From h-deid11 until h-deid12 each
// run of letters of an annotation was judged alone, case aside, against
// the words of those annotations, the common clinical unit words and the
// units of time spelled out, and a name that is such a word was released
// with its number ("{stone}", "mg{stone}", "{DAY}").
func knownAnnotation(a string) bool { return knownAnnotations[a] }

// annotationSeparators removes the separators plainAnnotations joins runs
// across.
var annotationSeparators = strings.NewReplacer("-", "", ".", "")

// annotationWord is the form of a run of letters and digits inside an
// annotation: a number of up to three digits, or a word with at most one
// digit between its letters and, after them, up to three digits, or up to
// two after a number ("{HbA1c}", "{1.73_m2}", "{RBCs}", R4's
// "{CH100'U}"). "7XKR319", "SN4C7Q2Z9", "ABC1234" and "1931" have none of
// these forms.
var annotationWord = regexp.MustCompile(`^(?:[0-9]{1,3}|[0-9]{1,3}\pL+(?:[0-9]\pL+)?[0-9]{0,2}|\pL+(?:[0-9]\pL+)?[0-9]{0,3})$`)

// quantityTypes are Quantity and its kinds: a whole number of nine digits
// or more as their value is judged with the unit (quantity).
var quantityTypes = setOf("Quantity", "Age", "Count", "Distance", "Duration", "SimpleQuantity", "MoneyQuantity")

// numericTypes are the FHIR types of JSON numbers.
var numericTypes = setOf("integer", "integer64", "positiveInt", "unsignedInt", "decimal")

// identifierNumber reports whether v, a bare number (the value[x] of an
// Observation or a claim's supportingInfo, a Quantity without unit or
// code), is more likely an identifier than a measurement: a whole number
// of nine digits or more, the length of a social security number, a
// telephone number and most record, account and serial numbers. A
// measurement of that size has a unit ("10*9/L", "[iU]"); a count or a
// score that large is rare, and is dropped rather than an identifier
// released (Safe Harbor (R): any other unique identifying number).
//
// A whole number of six to eight digits that reads as a date (dateDigits:
// HL7 v2's DT and DTM form YYYYMMDD, 19310314; MMDDYYYY, DDMMYYYY, also
// of seven digits, 3141931; YYMMDD, MMDDYY, DDMMYY) is a date, not a
// count, and is dropped too (Safe Harbor (C)): a date of birth from a v2
// message or a spreadsheet mapped to a bare number would be released
// whole.
func identifierNumber(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) {
		return false
	}
	return math.Abs(f) >= 1e8 || f >= 1e5 && dateDigits(int(f))
}

// bareNumber reports whether v, a bare number (a value[x], or a quantity
// whose unit and code are absent, UCUM's unity "1" or annotations alone:
// dimensionless), is withheld: an identifier (identifierNumber), a whole
// number of seven digits or more (bareIdentifier), or an old year
// (oldYearNumber).
func (d *deid) bareNumber(v any) bool {
	return identifierNumber(v) || bareIdentifier(v) || oldYearNumber(v, d.now)
}

// bareIdentifier reports whether v is a whole number of seven digits or
// more: without a unit, a local telephone number, a record, member or
// account number (Safe Harbor (R), "any other unique identifying number")
// rather than a measurement, which of that size has a unit ("10*9/L",
// "[iU]", "{copies}/mL"). A bare count of a million or more is rare
// enough to withhold: in the repository's corpora and the synthetic data
// set (custos seed) every unitless whole number of seven digits or more
// was a planted identifier (10 of 10 numbers, none a clinical value; of
// 4,650 numbers, 41 are unitless), where 77441123 in a ServiceRequest's
// quantityRatio.numerator under a kept code was released until h-scrub3
// (a bare number was withheld from nine digits, identifierNumber; one
// with annotations for unit from seven, h-deid10).
//
// Only a bare number is judged so: a number element of its own (a size,
// a count of instances, an amount of money) is judged by
// identifierNumber.
func bareIdentifier(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	f, err := n.Float64()
	return err == nil && f == math.Trunc(f) && math.Abs(f) >= 1e6
}

// oldYearNumber reports whether v is a whole number that reads as a year
// 90 years or more before now, from 1800 (1800 to 1936 in 2026): a year
// given as a number (a valueInteger 1931 under a local code "year of
// birth", "year of arrival") tells what the same year as a date would,
// and oldYear withholds that. A bare count of that size is rare, and is
// dropped rather than a birth year of someone over 89 released.
func oldYearNumber(v any, now time.Time) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || f < 1800 || f > 9999 {
		return false
	}
	return oldYear(int(f), now)
}

// noteYear notes y, the year of an event released, for topResource's
// age-and-year rule.
func (d *deid) noteYear(y int) {
	if d.oldestYear == 0 || y < d.oldestYear {
		d.oldestYear = y
	}
}

// yearNumber returns the year a bare whole number v reads as (a value[x],
// a quantity without unit or with annotations alone), from 1800 to now's
// year. Such a number is released when recent (oldYearNumber drops an old
// one), and counts as an event year for topResource's age-and-year rule, as
// a year given with a unit that says it is one does (calendarYear): an age
// at diagnosis of 70 beside a year of diagnosis 2000, as a valueInteger or
// as "2000 AD", tells a birth in 1929 or 1930, and both were released until
// 2026-12-06. A count of that size beside an age is taken for a year too:
// the age is withheld, the count kept.
func yearNumber(v any, now time.Time) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || f < 1800 || f > float64(now.Year()) {
		return 0, false
	}
	return int(f), true
}

// dateDigits reports whether n, a whole number of six to eight digits,
// reads as a date in an order dates are written in: YYYYMMDD (HL7 v2),
// MMDDYYYY, DDMMYYYY (years 1800 to 2199), the last two also of seven
// digits, whose leading zero a number loses (3141931 is 03/14/1931), and
// YYMMDD, MMDDYY, DDMMYY of six. A number of five digits or fewer is not
// taken for a date (31431 as 3/14/31): most small counts would be.
func dateDigits(n int) bool {
	md := func(m, d int) bool { return m >= 1 && m <= 12 && d >= 1 && d <= 31 }
	year := func(y int) bool { return y >= 1800 && y <= 2199 }
	switch {
	case n >= 1e5 && n < 1e6: // YYMMDD, MMDDYY, DDMMYY
		hi, mid, lo := n/10000, n/100%100, n%100
		return md(mid, lo) || md(hi, mid) || md(mid, hi)
	case n >= 1e6 && n < 1e8: // YYYYMMDD; MMDDYYYY, DDMMYYYY (M or D of one digit: seven)
		if n >= 1e7 && year(n/10000) && md(n/100%100, n%100) {
			return true
		}
		a, b := n/1000000, n/10000%100
		return year(n%10000) && (md(a, b) || md(b, a))
	}
	return false
}

// birthYear is the year of date of birth v, if it may be released: the
// person is not over 89 (generalizeBirthYear), and nobody born in that
// year is (oldYear). The second rule withholds 1936 in November 2026 for
// one born on 1936-12-31, who is 89: were it released for those who are 89
// and withheld for those who are 90, a released 1936 would say the
// birthday is after November 1st, an element of a date finer than the
// year.
func (d *deid) birthYear(v any) (string, bool) {
	y, ok := generalizeBirthYear(v, d.now).(string)
	if !ok || len(y) != 4 || y == masked {
		return "", false
	}
	n, err := strconv.Atoi(y)
	return y, err == nil && !oldYear(n, d.now)
}

// oldYear reports whether an event year is 90 years or more before now:
// whoever the event happened to (the patient, a relative) was alive then,
// so was born in that year or earlier and is now at least 89, most likely
// over 89, and Safe Harbor withholds "all elements of dates (including
// year) indicative of such age" (164.514(b)(2)(i)(C)). It is the cut-off
// of a birth year (generalizeBirthYear: one 90 years before now's year is
// taken at its first day, an age of 90): a Condition's onset in 1931 says
// what a birth date in 1931 would.
func oldYear(y int, now time.Time) bool { return now.Year()-y >= maxAge+1 }

// releaseAge reports whether an age of years may be released, and notes
// it (topResource).
func (d *deid) releaseAge(years float64) bool {
	if !(years >= 0 && years <= d.ageLimit) { // NaN, negative, over the limit
		return false
	}
	d.oldestAge = max(d.oldestAge, years)
	return true
}

// timeUnits are the units of time a quantity's code (UCUM) or unit text
// may name, in years per unit.
var timeUnits = func() map[string]float64 {
	const year, month, week, day, hour, minute = 1.0, 1.0 / 12, 7 / 365.25, 1 / 365.25, 1 / 8766.0, 1 / 525960.0
	m := map[string]float64{}
	for u, f := range map[string]float64{
		"a": year, "a_j": year, "a_g": year, "a_t": year, "y": year, "yr": year, "yrs": year, "year": year, "years": year, "year(s)": year,
		"yo": year, "yoa": year, "age": year, "y/o": year, "yearsold": year, "yearold": year, "yrsold": year, "ann": year, "annum": year, "jr": year, "jahr": year, "jahre": year,
		// The languages of IPS and national base IGs (a unit text is
		// written in the source's language): Spanish, Portuguese, French,
		// Italian, Dutch, Scandinavian, Polish and Czech, Finnish, Greek,
		// Russian, Japanese, Chinese, Korean.
		"año": year, "años": year, "ano": year, "anos": year, "an": year, "ans": year, "année": year, "années": year,
		"anno": year, "anni": year, "jaar": year, "jaren": year, "år": year, "aar": year, "lat": year, "rok": year, "roky": year, "let": year,
		"vuosi": year, "vuotta": year, "έτη": year, "ετών": year, "год": year, "года": year, "лет": year,
		"歳": year, "才": year, "岁": year, "年": year, "세": year, "살": year, "년": year,
		"mes": month, "meses": month, "mois": month, "mese": month, "mesi": month, "maand": month, "maanden": month,
		"monat": month, "monate": month, "måned": month, "måneder": month, "månad": month, "månader": month,
		// The other official languages of the EU (IPS is written in
		// them), accents dropped as upper case drops them (ΕΤΩΝ, ANOS),
		// traditional Chinese, and the languages of large national
		// bases (Turkish, Arabic, Hebrew, Hindi, Indonesian, Vietnamese,
		// Thai): a 93 written "93 ani" or "93 歲" was released.
		"ani": year, "év": year, "éves": year, "godina": year, "godine": year, "god": year, "leta": year, "lata": year,
		"rokov": year, "roka": year, "roků": year, "aastat": year, "aasta": year, "gadi": year, "gadu": year, "gads": year,
		"metai": year, "metų": year, "metu": year, "ετη": year, "ετων": year, "χρόνια": year, "χρονια": year, "χρονών": year, "χρονων": year,
		"години": year, "година": year, "років": year, "роки": year, "рік": year, "anys": year, "bliain": year, "bliana": year,
		"snin": year, "sena": year, "ára": year, "annee": year, "annees": year, "anio": year, "anios": year, "lebensjahre": year,
		"歲": year, "yaş": year, "yas": year, "yaşında": year, "yıl": year, "yil": year, "سنة": year, "سنوات": year, "عام": year, "أعوام": year,
		"שנים": year, "שנה": year, "वर्ष": year, "साल": year, "tahun": year, "tuổi": year, "năm": year, "ปี": year,
		// Chinese records give an age in full years as 周岁 (and the
		// traditional count as 虚岁), German ones as the year of life
		// (im 93. Lj., Lebensjahr); and the years of more languages of
		// national records (Persian and Urdu, Bengali, Georgian,
		// Armenian, Albanian, Belarusian, Icelandic, Luxembourgish,
		// Swahili, Filipino): "93 周岁", "93 Lj.", "93 سال" were released
		// until 2026-12-06.
		"周岁": year, "周歲": year, "週歲": year, "虚岁": year, "虛歲": year, "足岁": year, "足歲": year,
		"lj": year, "lebensjahr": year, "lebensjahres": year,
		"سال": year, "ساله": year, "বছর": year, "წლის": year, "წელი": year, "წელიწადი": year, "տարեկան": year, "տարի": year,
		"vjeç": year, "vjec": year, "vjet": year, "vite": year, "гадоў": year, "гады": year, "ár": year,
		"joer": year, "miaka": year, "mwaka": year, "taon": year, "taong": year,
		"luni": month, "lună": month, "hónap": month, "mjeseci": month, "mesiacov": month, "měsíců": month, "měsíce": month, "miesięcy": month,
		"miesiące": month, "mies": month, "kuud": month, "mēneši": month, "mēnešu": month, "mėnesiai": month, "mėnesių": month, "mėn": month,
		"kuukautta": month, "μήνες": month, "μηνες": month, "μηνών": month, "μηνων": month, "месеца": month, "месяцев": month, "месяца": month,
		"мес": month, "місяців": month, "mesos": month, "mês": month, "monaten": month, "mån": month,
		"个月": month, "個月": month, "ヶ月": month, "か月": month, "カ月": month, "ケ月": month, "개월": month,
		"ay": month, "شهر": month, "أشهر": month, "חודשים": month, "महीने": month, "bulan": month, "tháng": month, "เดือน": month,
		"mo": month, "mo_j": month, "mo_g": month, "mo_s": month, "mos": month, "month": month, "months": month, "month(s)": month,
		"wk": week, "wks": week, "week": week, "weeks": week, "week(s)": week,
		"d": day, "day": day, "days": day, "day(s)": day,
		"h": hour, "hr": hour, "hrs": hour, "hour": hour, "hours": hour, "hour(s)": hour,
		"min": minute, "mins": minute, "minute": minute, "minutes": minute, "minute(s)": minute,
		"s": minute / 60, "sec": minute / 60, "second": minute / 60, "seconds": minute / 60,
	} {
		m[u] = f
	}
	return m
}()

// ageYears returns a quantity's value in years, and whether the quantity
// is an age: its code or unit is a unit of time, or anyAge says it is an
// age whatever its unit (then a unit that is not one of time counts as
// years). A value that is not a finite number is an age of NaN years when
// the quantity is an age (never released).
func ageYears(q map[string]any, anyAge bool) (float64, bool) {
	code, _ := q["code"].(string) // UCUM is case-sensitive: "a" is a year, "A" an ampere
	unit, _ := q["unit"].(string)
	per, timed := timeUnits[code]
	if !timed && code != "A" {
		// A code read as a unit text is (timeUnit): UCUM's case-insensitive
		// form ("ANN", "MO"), an annotation ("{years}"), a unit text typed
		// as a code ("YR", "Years"). Such an age with no unit text was
		// released until 2026-12-05. The ampere apart, no case-sensitive
		// UCUM code folds to a longer time than an hour ("S", the
		// siemens, and "H", the henry, read as a second and an hour).
		per, timed = timeUnit(code)
	}
	if !timed {
		per, timed = timeUnit(unit)
	}
	if !timed && !anyAge {
		return 0, false
	}
	if !timed {
		per = 1
	}
	n, ok := q["value"].(json.Number)
	if !ok {
		if _, has := q["value"]; !has && !anyAge {
			return 0, false // a unit without a value tells no age
		}
		return math.NaN(), true
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) {
		return math.NaN(), true
	}
	return f * per, true
}

// integerInRange reports whether f is within the range of FHIR R4 type
// typ: integer, positiveInt and unsignedInt are 32-bit (a value beyond it,
// such as a ten-digit telephone or record number typed as an integer, is
// no valid FHIR R4 and is dropped); integer64 and decimal have no range
// here.
func integerInRange(typ string, f float64) bool {
	switch typ {
	case "integer":
		return f >= math.MinInt32 && f <= math.MaxInt32
	case "positiveInt":
		return f >= 1 && f <= math.MaxInt32
	case "unsignedInt":
		return f >= 0 && f <= math.MaxInt32
	}
	return true
}

// opaqueValue reports whether element e of key is a value whose meaning the
// walk withholds, so that what it is cannot be judged: an answer (of a
// QuestionnaireResponse item, its question in linkId, text and definition,
// which are dropped; of a Contract's offer, its question in the offer's
// text) and an alternative of an open choice
// (value[x] of type "*": Parameters.parameter, Task.input and Task.output;
// Extension is judged by allowedExtensions). Such a value may be a date of
// birth, a year of birth, a social security, telephone or record number
// or a ZIP code, so it is judged as a date of birth (birthCtx): a date
// gives its year only when nobody over 89 was born in it (and, as it may
// be an event's, that year counts with the ages of the resource:
// opaqueCtx), a number is dropped; and a code of an open choice, bound to no value set, is dropped.
// Codings, quantities with the units they are released with (a quantity
// whose unit the walk drops is a bare number: quantity) and references are
// judged as anywhere else.
func opaqueValue(key string, e fhirr4.Element) bool {
	return e.Choice == "value" && (strings.HasSuffix(key, ".answer") || openChoices[key])
}

// valueMeanings are the elements whose value says what it is only through
// a code beside it (by key): the elements that give that code (meaning, the
// first present deciding: meaningWithheld),
// and the values they give it to (a choice by its name without [x], or an
// element by its name). An Observation's valueInteger is a measurement of
// what its code names; when the walk keeps no coding of that code (a local
// code system, a code given as text alone: both dropped), the value says
// nothing of what it is, as a questionnaire answer whose question is
// withheld does not, and may be a member number, a ZIP code, a telephone,
// account, serial or lot number (meaningWithheld). Such a value is judged
// as an answer is (opaqueValue): a number is dropped, a date gives its
// year only when nobody over 89 was born in it; a quantity with its unit,
// a coding and a reference are judged as anywhere else. Until 2026-12-06
// an Observation coded "member-number" or "zip" in a local code system
// had its valueInteger 77441123 or 90210 released under a masked code.
var valueMeanings = map[string]struct{ meaning, values []string }{
	"Observation":                         {[]string{"code"}, []string{"value"}},
	"Observation.component":               {[]string{"code"}, []string{"value"}},
	"Claim.supportingInfo":                {[]string{"code", "category"}, []string{"value"}},
	"ExplanationOfBenefit.supportingInfo": {[]string{"code", "category"}, []string{"value"}},
	"Device.property":                     {[]string{"type"}, []string{"valueQuantity", "valueCode"}},
	"DeviceDefinition.property":           {[]string{"type"}, []string{"valueQuantity", "valueCode"}},
	"DeviceRequest.parameter":             {[]string{"code"}, []string{"value"}},
	"SupplyRequest.parameter":             {[]string{"code"}, []string{"value"}},
	"Group.characteristic":                {[]string{"code"}, []string{"value"}},
	// A goal's target detail is a value of its measure (77441123 under a
	// local measure was released until h-review21).
	"Goal.target": {[]string{"measure"}, []string{"detail"}},
	// A cost to the beneficiary is a value of its type (a copay, a
	// deductible): under a local type, or none, a bare number was
	// released until 2026-12-06 (77441123 as a valueQuantity, or as a
	// valueMoney without currency). An amount with its currency is judged
	// as a quantity with its unit (money).
	"Coverage.costToBeneficiary": {[]string{"type"}, []string{"value"}},
	// The same shape in claims and plans: a benefit's allowed and used
	// amounts by its type, an adjudication's value by its category
	// (also of a detail's and an added item's, which share the
	// backbone), a plan's cost by its type (77441123 as the
	// allowedUnsignedInt of a local type "member-no", or as the value of
	// an adjudication of a local category, was released until
	// 2026-12-06).
	"ExplanationOfBenefit.benefitBalance.financial": {[]string{"type"}, []string{"allowed", "used"}},
	// An adjudication's amount and a claim's total are Money of their
	// category (77441124 USD under a local category was released until
	// h-deid10): judged as money under a withheld type is (money).
	"ExplanationOfBenefit.item.adjudication": {[]string{"category"}, []string{"value", "amount"}},
	"ClaimResponse.item.adjudication":        {[]string{"category"}, []string{"value", "amount"}},
	"ExplanationOfBenefit.total":             {[]string{"category"}, []string{"amount"}},
	"ClaimResponse.total":                    {[]string{"category"}, []string{"amount"}},
	// A payment's amount and adjustment are Money of its type (77441124
	// USD under a local payment type was released until 2026-12-06), as
	// a reconciliation's detail is.
	"ExplanationOfBenefit.payment":                 {[]string{"type"}, []string{"amount", "adjustment"}},
	"ClaimResponse.payment":                        {[]string{"type"}, []string{"amount", "adjustment"}},
	"PaymentReconciliation.detail":                 {[]string{"type"}, []string{"amount"}},
	"InsurancePlan.plan.specificCost.benefit.cost": {[]string{"type"}, []string{"value"}},
}

// meaningWithheld reports whether object m of key has values whose meaning
// the walk withholds (valueMeanings): the first of the elements that say
// what they are that m has (none: withheld) has no coding the walk keeps
// (coding). The first decides: a supportingInfo's code, when it has one,
// says what its value is, and its category ("info") only what kind of
// information it is; until h-review21 a kept category let a number under
// a withheld code through (77441123 under a local code "member-no" and
// category info was released).
func (d *deid) meaningWithheld(key string, m map[string]any) bool {
	vm, ok := valueMeanings[key]
	if !ok {
		return false
	}
	for _, n := range vm.meaning {
		v, present := m[n]
		if !present {
			continue
		}
		cc, _ := v.(map[string]any)
		for _, c := range asArray(cc["coding"]) {
			if cm, ok := c.(map[string]any); ok {
				if _, kept := d.coding(cm); kept {
					return false
				}
			}
		}
		return true
	}
	return true
}

// meaningValue reports whether element name (e) of key is one of the values
// valueMeanings gives a meaning to.
func meaningValue(key, name string, e fhirr4.Element) bool {
	for _, v := range valueMeanings[key].values {
		if v == name || e.Choice != "" && v == e.Choice {
			return true
		}
	}
	return false
}

// openChoices are the backbones whose value[x] is of the open type "*" (it
// has dozens of alternatives; a closed choice has a handful).
var openChoices = func() map[string]bool {
	m := map[string]bool{}
	for key, defs := range fhirr4.Elements {
		n := 0
		for _, e := range defs {
			if e.Choice == "value" {
				n++
			}
		}
		if n >= 30 && key != "Extension" {
			m[key] = true
		}
	}
	return m
}()

// ageElement reports whether element name of key holds an age whatever its
// type: it is named for one (age, onsetAge, the age[x] choice's ageRange
// of FamilyMemberHistory and of a medicinal product's Population ...), or
// it is an
// alternative of a choice one of whose types is Age (Condition.onsetRange,
// FamilyMemberHistory.deceasedRange, Procedure.performedRange ...).
func ageElement(key, name string, e fhirr4.Element) bool {
	if name == "age" || e.Choice == "age" || e.Type == "Age" {
		return true
	}
	if e.Choice == "" {
		return false
	}
	for _, o := range fhirr4.Elements[key] {
		if o.Choice == e.Choice && o.Type == "Age" {
			return true
		}
	}
	return false
}

// birthElement reports whether an element is a date of birth
// (Patient.birthDate and the like, FamilyMemberHistory.born[x]).
func birthElement(name string) bool {
	return name == "birthDate" || strings.HasPrefix(name, "born")
}

// Observation codes (LOINC) whose value is an age, or a date or year of
// birth: the value of such an Observation, or of such a component, is
// judged as one.
var (
	ageObservations = setOf(
		"30525-0", // Age
		"21611-9", // Age - estimated
		"21612-7", // Age - reported
		"29553-5", // Age calculated
		"30972-4", // Age at diagnosis
		"39016-1", // Age at death
		"63900-5", // Current age or age at death
		"35659-2", // Age at specimen collection
	)
	// SNOMED CT concepts of the same kinds.
	ageConcepts = setOf(
		"397659008", // Age
		"424144002", // Current chronological age
		"445518008", // Age at onset of clinical finding
		"423493009", // Age at diagnosis
	)
	birthConcepts = setOf(
		"184099003", // Date of birth
	)
	// LOINC codes of measurements taken at birth, whose effective date is
	// the birth date.
	atBirthObservations = setOf(
		"8339-4", // Birth weight Measured
		"9272-6", // 1 minute Apgar Score
		"9274-2", // 5 minute Apgar Score
		"9271-8", // 10 minute Apgar Score
	)
	birthObservations = setOf(
		"21112-8", // Birth date
		"80904-6", // Birth year
	)
)

// observationValue says what the value[x] of an Observation or of one of
// its components is by the Observation's code: "age", "birth" or ""; or
// "at-birth" for a measurement taken at birth (its effective[x] is then a
// birth date).
func observationValue(key string, m map[string]any) string {
	if key != "Observation" && key != "Observation.component" {
		return ""
	}
	code, _ := m["code"].(map[string]any)
	for _, c := range asArray(code["coding"]) {
		cm, _ := c.(map[string]any)
		sys, _ := cm["system"].(string)
		sys = canonicalSystem(sys)
		c, _ := cm["code"].(string)
		switch {
		case sys == "http://loinc.org" && ageObservations[c], sys == "http://snomed.info/sct" && ageConcepts[c]:
			return "age"
		case sys == "http://loinc.org" && birthObservations[c], sys == "http://snomed.info/sct" && birthConcepts[c]:
			return "birth"
		case sys == "http://loinc.org" && atBirthObservations[c]:
			return "at-birth"
		}
	}
	return ""
}

// address keeps the state (a US state by code or name, or an ISO 3166-2
// subdivision code), the country (an ISO 3166 code, or the United States
// by name) and the ZIP3 of a US ZIP code ("000" for the restricted
// prefixes), nothing else: a state or country that is free text ("Cook
// County", "Springfield IL 62704", "Co. Dublin") is dropped. A postal code of
// another form, or of an address that is not in the United States, is
// dropped: Safe Harbor's three-digit rule is the US ZIP code's, and the
// first digits of another country's postal code are a subdivision smaller
// than a state like any other.
func (d *deid) address(m map[string]any) (map[string]any, bool) {
	if unknownModifier(m) {
		return nil, false
	}
	out := map[string]any{}
	if s, ok := m["state"].(string); ok && stateCode(s) {
		out["state"] = s
	}
	if s, ok := m["country"].(string); ok && countryCode(s) {
		out["country"] = s
	}
	switch us, state := usAddress(m); {
	case !us:
		// Not in the United States: a state is kept only as an ISO
		// 3166-2 code of a first-level subdivision. A USPS code or a
		// state's name is another country's unit there: Italy writes
		// its provinces' two letters ("MI" Milan, "PA" Palermo, "CA"
		// Cagliari), released as US states until 2026-12-06.
		if s, ok := out["state"].(string); ok && (usStateCode(s) != "" || !firstLevelSubdivision.MatchString(s)) {
			delete(out, "state")
		}
		return out, true
	case state != "" && m["postalCode"] != nil && !zip3InState(m["postalCode"], state):
		// No country, and a postal code that is not a ZIP code of the
		// state named: the address is not known to be in the United
		// States ("MI" and "20121" are Milan's province and postal code,
		// came out as Michigan and ZIP3 "201" until 2026-12-06), so
		// neither its state nor its postal code is released.
		delete(out, "state")
		return out, true
	}
	if z, ok := generalize(GeneralizeZIP3, m["postalCode"], d.now).(string); ok && z != masked {
		out["postalCode"] = z
	}
	return out, true
}

// extension keeps an allowed extension as its url and valueCode, when the
// code is one the extension allows; anything else it carries is dropped,
// and so is the extension if it has no such code (FHIR ext-1: a value or
// extensions). A complex extension is complexExtension's.
func (d *deid) extension(m map[string]any) (map[string]any, bool) {
	u, _ := m["url"].(string)
	if parts := complexExtensions[u]; parts != nil {
		return d.complexExtension(u, parts, m)
	}
	codes := allowedExtensions[u]
	code, _ := m["valueCode"].(string)
	if !codes[code] {
		return nil, false
	}
	return map[string]any{"url": u, "valueCode": code}, true
}

// complexExtension keeps a complex extension of url u (complexExtensions)
// as its url and the sub-extensions of parts, each as its url and a
// valueCoding the walk keeps (coding) of the system parts names; its own
// value, any other sub-extension, a sub-extension's other values, id and
// extensions are dropped, and so is the extension when no sub-extension
// is left (FHIR ext-1).
func (d *deid) complexExtension(u string, parts map[string]string, m map[string]any) (map[string]any, bool) {
	var kept []any
	for _, x := range asArray(m["extension"]) {
		sub, _ := x.(map[string]any)
		su, _ := sub["url"].(string)
		sys, ok := parts[su]
		if !ok {
			continue // text, free text; an unknown part
		}
		c, _ := sub["valueCoding"].(map[string]any)
		if c == nil {
			continue
		}
		if out, ok := d.coding(c); ok && out["system"] == sys {
			kept = append(kept, map[string]any{"url": su, "valueCoding": out})
		}
	}
	if len(kept) == 0 {
		return nil, false
	}
	return map[string]any{"url": u, "extension": kept}, true
}

// absent is a data-absent-reason extension "masked", as an element.
func absent() map[string]any {
	return map[string]any{"extension": []any{map[string]any{"url": dataAbsentReason, "valueCode": "masked"}}}
}

// absentOf is a data-absent-reason standing in for a value of complex type
// (or backbone) typ: absent(), with the required elements of typ marked
// absent in turn (markAbsent), to depth, so that it is a valid value of
// typ: a Signature needs its type, when and who, an Annotation its text.
// A required choice is marked by one of its alternatives, a primitive one
// if it has one.
func absentOf(typ string, depth int) map[string]any {
	out := absent()
	if depth <= 0 {
		return out
	}
	defs := fhirr4.Elements[typ]
	for _, k := range requiredMarks[typ] {
		markAbsentTo(out, k, defs, depth-1)
	}
	return out
}

// choiceHasPrimitive reports whether choice element choice of defs has a
// primitive alternative.
func choiceHasPrimitive(defs map[string]fhirr4.Element, choice string) bool {
	for _, e := range defs {
		if e.Choice == choice && primitiveTypes[e.Type] {
			return true
		}
	}
	return false
}

// markAbsent stands in for required element name, which the walk dropped:
// {"extension":[DAR]} for a complex element, the "_name" companion for a
// primitive. A choice element already present under another type needs
// nothing.
func markAbsent(out map[string]any, name string, defs map[string]fhirr4.Element) {
	markAbsentTo(out, name, defs, 3)
}

// markAbsentTo is markAbsent with a complex value's own required elements
// marked to depth (absentOf).
func markAbsentTo(out map[string]any, name string, defs map[string]fhirr4.Element, depth int) {
	e := defs[name]
	if e.Choice != "" {
		for k, o := range defs {
			if _, ok := out[k]; ok && o.Choice == e.Choice {
				return
			}
		}
	}
	var v any = absentOf(e.Type, depth)
	if e.Many {
		v = []any{v}
	}
	if !primitiveTypes[e.Type] {
		out[name] = v
		return
	}
	if e.Many {
		out[name] = []any{nil}
	}
	out["_"+name] = v
}

func asArray(v any) []any {
	a, _ := v.([]any)
	return a
}

// usAddress reports whether an address is in the United States, as far as
// it says: its country is the United States, or it names no country and
// its state is a US state, district or territory. Everything else keeps
// no postal code: an address that names neither (a city and a postal
// code, "Paris 75004", "Berlin 10117") is not known to be in the United
// States, and the first digits of another country's postal code are a
// unit smaller than a state (until 2026-12-05 such an address was taken
// for a US one, and Paris came out "750"). When the address names no
// country, state is the USPS code of the state it names, which the
// caller checks its postal code against (zip3InState): other countries
// write their provinces' codes in the state too.
func usAddress(m map[string]any) (us bool, state string) {
	if c, _ := m["country"].(string); c != "" {
		return usCountries[usNorm(c)], ""
	}
	s, _ := m["state"].(string)
	state = usStateCode(s)
	return state != "", state
}

// usNorm is an address's state or country without spaces, dots, hyphens
// and underscores, in capitals, as usCountries and usStates hold them.
func usNorm(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '.' || r == '-' || r == '_' {
			return -1
		}
		return unicode.ToUpper(r)
	}, s)
}

// usStateCode is the USPS code of the US state, district, territory or
// armed forces "state" s names, by code, by name or as an ISO 3166-2
// code ("MI", "Michigan", "US-MI": "MI"), or "" when it names none.
func usStateCode(s string) string {
	if us, ok := strings.CutPrefix(s, "US-"); ok {
		s = us
	}
	return usStates[usNorm(s)]
}

// usCountries are the ways an address says "United States" (ISO 3166
// alpha-2, alpha-3, numeric, and the name), normalized by usNorm.
var usCountries = setOf("US", "USA", "840", "UNITEDSTATES", "UNITEDSTATESOFAMERICA")

// usStates are the US states, the District of Columbia, the territories
// and the armed forces' postal "states", by USPS code and by name,
// normalized by usNorm, each to its USPS code.
var usStates = func() map[string]string {
	m := map[string]string{}
	for code, name := range map[string]string{
		"AL": "Alabama", "AK": "Alaska", "AZ": "Arizona", "AR": "Arkansas", "CA": "California",
		"CO": "Colorado", "CT": "Connecticut", "DE": "Delaware", "FL": "Florida", "GA": "Georgia",
		"HI": "Hawaii", "ID": "Idaho", "IL": "Illinois", "IN": "Indiana", "IA": "Iowa", "KS": "Kansas",
		"KY": "Kentucky", "LA": "Louisiana", "ME": "Maine", "MD": "Maryland", "MA": "Massachusetts",
		"MI": "Michigan", "MN": "Minnesota", "MS": "Mississippi", "MO": "Missouri", "MT": "Montana",
		"NE": "Nebraska", "NV": "Nevada", "NH": "New Hampshire", "NJ": "New Jersey", "NM": "New Mexico",
		"NY": "New York", "NC": "North Carolina", "ND": "North Dakota", "OH": "Ohio", "OK": "Oklahoma",
		"OR": "Oregon", "PA": "Pennsylvania", "RI": "Rhode Island", "SC": "South Carolina",
		"SD": "South Dakota", "TN": "Tennessee", "TX": "Texas", "UT": "Utah", "VT": "Vermont",
		"VA": "Virginia", "WA": "Washington", "WV": "West Virginia", "WI": "Wisconsin", "WY": "Wyoming",
		"DC": "District of Columbia", "PR": "Puerto Rico", "GU": "Guam", "VI": "Virgin Islands",
		"AS": "American Samoa", "MP": "Northern Mariana Islands", "UM": "United States Minor Outlying Islands",
		"AA": "Armed Forces Americas", "AE": "Armed Forces Europe", "AP": "Armed Forces Pacific",
	} {
		m[code] = code
		m[usNorm(name)] = code
	}
	return m
}()

// zip3Ranges are the ZIP3 prefixes of each state, district, territory and
// armed forces "state", as USPS assigns them (its list of three-digit ZIP
// code prefixes, L002), as inclusive ranges; a prefix that serves two (055,
// 201, 967, 969) is given to each. A state is also given the prefix of a
// neighbour's ZIP3 that USPS's ZIP Locale Detail puts some of its ZIP codes
// in (Fishers Island NY 06390, Alta WY 83414, Rossville GA 37316, Dulles VA
// 20041, Bristol VA 37620, Texarkana AR 75504, Lemmon ND 57640, …): until
// 2026-12-06 such an address without country lost its state and ZIP3.
var zip3Ranges = map[string][][2]int{
	"AL": {{350, 369}}, "AK": {{995, 999}}, "AZ": {{847, 847}, {850, 865}}, "AR": {{716, 729}, {755, 755}},
	"CA": {{900, 961}}, "CO": {{800, 816}}, "CT": {{60, 69}}, "DE": {{197, 199}, {218, 218}},
	"DC": {{200, 205}, {569, 569}}, "FL": {{320, 349}}, "GA": {{300, 319}, {373, 373}, {398, 399}},
	"HI": {{967, 968}}, "ID": {{832, 838}, {979, 979}, {994, 994}}, "IL": {{600, 629}}, "IN": {{453, 453}, {460, 479}},
	"IA": {{500, 528}, {612, 612}}, "KS": {{660, 679}}, "KY": {{382, 382}, {400, 427}, {452, 452}, {471, 471}}, "LA": {{700, 714}},
	"ME": {{39, 49}}, "MD": {{199, 200}, {205, 219}}, "MA": {{10, 27}, {29, 29}, {55, 55}}, "MI": {{480, 499}},
	"MN": {{550, 567}}, "MS": {{386, 397}}, "MO": {{630, 658}, {666, 666}, {726, 726}}, "MT": {{590, 599}},
	"NE": {{515, 515}, {680, 693}}, "NV": {{889, 898}}, "NH": {{30, 39}}, "NJ": {{70, 89}},
	"NM": {{798, 798}, {870, 884}}, "NY": {{5, 5}, {63, 63}, {100, 149}}, "NC": {{270, 289}}, "ND": {{565, 565}, {567, 567}, {576, 576}, {580, 588}},
	"OH": {{410, 410}, {430, 459}, {470, 470}}, "OK": {{730, 749}}, "OR": {{970, 979}}, "PA": {{150, 196}},
	"RI": {{28, 29}}, "SC": {{290, 299}}, "SD": {{570, 577}, {585, 585}, {593, 593}}, "TN": {{307, 307}, {357, 357}, {370, 385}},
	"TX": {{718, 718}, {733, 733}, {739, 739}, {750, 799}, {885, 885}}, "UT": {{840, 847}, {860, 860}}, "VT": {{36, 36}, {50, 59}},
	"VA": {{200, 201}, {205, 205}, {220, 246}, {376, 376}}, "WA": {{838, 838}, {980, 994}}, "WV": {{241, 241}, {246, 268}, {411, 411}, {415, 415}},
	"WI": {{530, 549}}, "WY": {{820, 831}, {834, 834}},
	"PR": {{6, 7}, {9, 9}}, "VI": {{8, 8}}, "GU": {{969, 969}}, "MP": {{969, 969}},
	"AS": {{967, 967}}, "UM": {{968, 968}},
	"AA": {{340, 340}}, "AE": {{90, 98}}, "AP": {{962, 966}},
}

// zip3InState reports whether postal code v is a US ZIP code (usZIP)
// whose ZIP3 USPS assigns to state (a USPS code; zip3Ranges).
func zip3InState(v any, state string) bool {
	s, _ := v.(string)
	m := usZIP.FindStringSubmatch(s)
	if m == nil {
		return false
	}
	z, _ := strconv.Atoi(m[1])
	for _, r := range zip3Ranges[state] {
		if r[0] <= z && z <= r[1] {
			return true
		}
	}
	return false
}

// unitKey is a unit text as timeUnits knows it: lower case, without
// braces, spaces, dots and parentheses ("Yrs." and "years old" are "yrs"
// and "yearsold", "y.o." is "yo", "yr(s)" is "yrs").
func unitKey(unit string) string {
	u := strings.ToLower(strings.Trim(unit, "{}"))
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '.' || r == '(' || r == ')' {
			return -1
		}
		return r
	}, u)
}

// timeUnit returns the years per unit of a unit text, if it is a unit of
// time (timeUnits) as unitKey writes it, alone or followed by "old" or
// "of age" ("yr old", "years of age", "mos. old"), also with its hyphens
// and underscores taken out ("years-old", "y-o", "yrs_old", German's
// "Jahre-alt": unit symbols by their form, released as such until
// 2026-12-05); UCUM's own underscores ("a_j", "mo_s") are read first.
func timeUnit(unit string) (float64, bool) {
	k := unitKey(unit)
	for _, k := range []string{k, strings.NewReplacer("-", "", "_", "").Replace(k)} {
		if per, ok := timeUnits[k]; ok {
			return per, true
		}
		for _, suffix := range ageSuffixes {
			if base, ok := strings.CutSuffix(k, suffix); ok && base != "" {
				if per, ok := timeUnits[base]; ok {
					return per, true
				}
			}
		}
	}
	return 0, false
}

// ageSuffixes are the words after a unit of time that make it an age, as
// unitKey writes them: English's "old" and "of age", German's "alt", and
// those of the languages of timeUnits ("jaar oud", "år gammel", "años de
// edad", "anos de idade", "anni di età", "ans révolus"): an age of 93 in
// these was released until 2026-12-06 as a bare 93, the unit text
// dropped for its spaces and the number no longer an age.
var ageSuffixes = []string{"old", "ofage", "alt", "oud", "gammel", "gammal", "deedad", "deidade", "dietà", "dieta",
	"révolus", "revolus", "révolu", "revolu", "vana", "star", "starý", "stary"}

// stateCode reports whether s may be released as an address's state: a US
// state, district or territory by USPS code or name, or the ISO 3166-2 code
// of a first-level subdivision of a country whose ISO 3166-2 codes are all
// first-level, comparable to a US state ("DE-BE", "NL-OV", "AU-NSW"; see
// firstLevelSubdivision). ISO 3166-2 also codes smaller units: "GB-LND" is
// the City of London (some 10,000 people), "GB-CMD" a London borough,
// "FR-75" Paris (a département), "NL-BQ2" Saba (some 2,000 people); a code
// that is not known to be a first-level subdivision is dropped, since
// Safe Harbor withholds every geographic subdivision smaller than a state.
//
// A US code ("US-MA") must name a state, district or territory usStates
// knows: "US-PW", USPS's code of Palau (some 18,000 people, no state)
// with "US-" in front, has the form of one and was released until
// 2026-12-05.
func stateCode(s string) bool {
	n := strings.ToUpper(strings.ReplaceAll(s, " ", ""))
	if us, ok := strings.CutPrefix(s, "US-"); ok && usStates[us] == "" {
		return false
	}
	return (usStates[n] != "" || firstLevelSubdivision.MatchString(s)) && !smallStates[strings.ReplaceAll(n, "-", "")]
}

// smallStates are the US Minor Outlying Islands as a state ("UM", "US-UM",
// by name, as stateCode normalizes them): a few hundred people, no state
// (see smallAreas).
var smallStates = setOf("UM", "USUM", "UNITEDSTATESMINOROUTLYINGISLANDS")

// firstLevelSubdivision matches the ISO 3166-2 codes of the first-level
// subdivisions (states, provinces, territories, Länder) of countries
// whose ISO 3166-2 lists no smaller units: Australia, Austria, Brazil,
// Canada, Germany, India, Mexico, the Netherlands (provinces and its
// constituent countries, not the special municipalities BQ1-BQ3) and the
// United States. Every subdivision it matches outside the United States
// has more than 20,000 people (Safe Harbor's threshold for a ZIP3). The
// codes are listed, not any letters after the country's: "BR-FN",
// Fernando de Noronha (some 3,000 people), was a code of ISO 3166-2:BR
// until 2007 and was released as a state until 2026-12-06. India's codes
// renamed since 2019 (CT, OR, TG, UT) and merged (DD, DN) are kept in
// their old form too.
var firstLevelSubdivision = regexp.MustCompile(`^(?:AT-[1-9]|AU-(?:ACT|NSW|NT|QLD|SA|TAS|VIC|WA)|` +
	`BR-(?:AC|AL|AM|AP|BA|CE|DF|ES|GO|MA|MG|MS|MT|PA|PB|PE|PI|PR|RJ|RN|RO|RR|RS|SC|SE|SP|TO)|` +
	`CA-(?:AB|BC|MB|NB|NL|NS|NT|NU|ON|PE|QC|SK|YT)|` +
	`DE-(?:BB|BE|BW|BY|HB|HE|HH|MV|NI|NW|RP|SH|SL|SN|ST|TH)|` +
	`IN-(?:AN|AP|AR|AS|BR|CG|CH|CT|DD|DH|DL|DN|GA|GJ|HP|HR|JH|JK|KA|KL|LA|LD|MH|ML|MN|MP|MZ|NL|OD|OR|PB|PY|RJ|SK|TG|TN|TR|TS|UK|UP|UT|WB)|` +
	`MX-(?:AGU|BCN|BCS|CAM|CHH|CHP|CMX|COA|COL|DIF|DUR|GRO|GUA|HID|JAL|MEX|MIC|MOR|NAY|NLE|OAX|PUE|QUE|ROO|SIN|SLP|SON|TAB|TAM|TLA|VER|YUC|ZAC)|` +
	`NL-(?:AW|CW|DR|FL|FR|GE|GR|LI|NB|NH|OV|SX|UT|ZE|ZH)|US-[A-Z]{2})$`)

// countryCode reports whether s may be released as an address's country:
// an ISO 3166 alpha-2, alpha-3 or numeric code, or the United States by
// name; not the code of a country or territory of 20,000 people or fewer
// (smallAreas).
func countryCode(s string) bool {
	return (iso3166.MatchString(s) || usCountries[strings.ToUpper(strings.ReplaceAll(s, " ", ""))]) && !smallAreas[s]
}

// smallAreas are the ISO 3166 countries and territories of 20,000 people
// or fewer, by alpha-2, alpha-3 and numeric code: the Safe Harbor threshold
// below which a ZIP3 is replaced by "000" (restrictedZIP3). A country of
// 50 people (Pitcairn) names a geographic unit far smaller than a state;
// it is dropped like a restricted ZIP3. (A code here may also be a US
// state's: "MS", "VA" are Mississippi and Virginia as a state; only the
// country is judged by this list, a state by smallStates.)
var smallAreas = setOf(
	"AQ", "ATA", "010", // Antarctica
	"BV", "BVT", "074", // Bouvet Island
	"IO", "IOT", "086", // British Indian Ocean Territory
	"CX", "CXR", "162", // Christmas Island
	"CC", "CCK", "166", // Cocos (Keeling) Islands
	"CK", "COK", "184", // Cook Islands
	"FK", "FLK", "238", // Falkland Islands
	"GS", "SGS", "239", // South Georgia and the South Sandwich Islands
	"TF", "ATF", "260", // French Southern Territories
	"HM", "HMD", "334", // Heard Island and McDonald Islands
	"VA", "VAT", "336", // Holy See
	"MS", "MSR", "500", // Montserrat
	"NR", "NRU", "520", // Nauru
	"NU", "NIU", "570", // Niue
	"NF", "NFK", "574", // Norfolk Island
	"UM", "UMI", "581", // United States Minor Outlying Islands
	"PW", "PLW", "585", // Palau
	"PN", "PCN", "612", // Pitcairn
	"BL", "BLM", "652", // Saint Barthélemy
	"SH", "SHN", "654", // Saint Helena, Ascension and Tristan da Cunha
	"AI", "AIA", "660", // Anguilla
	"PM", "SPM", "666", // Saint Pierre and Miquelon
	"SJ", "SJM", "744", // Svalbard and Jan Mayen
	"TK", "TKL", "772", // Tokelau
	"TV", "TUV", "798", // Tuvalu
	"WF", "WLF", "876", // Wallis and Futuna
)

// SmallAreas returns, sorted, the ISO 3166 codes of the countries and
// territories the deidentify obligation withholds as an address's country:
// 20,000 people or fewer (a fresh copy).
func SmallAreas() []string { return slices.Sorted(maps.Keys(smallAreas)) }

var iso3166 = regexp.MustCompile(`^(?:[A-Z]{2,3}|[0-9]{3})$`)

// subjectElements are the top-level elements by which a resource names
// the patient it is about (Observation.subject, Immunization.patient,
// Coverage.beneficiary, ResearchSubject.individual,
// EnrollmentRequest.candidate).
var subjectElements = []string{"subject", "patient", "beneficiary", "individual", "candidate"}

// ownPatients are the ids of the patient a resource is about: subject
// (Options.Subject, the compartment the catalog placed it in), the
// Patient its subject element names, and a Patient resource's own id.
// References to these are the patient's own; any other Patient reference
// (a spouse as a Coverage's subscriber, another record in Patient.link, a
// relative) names someone else.
func ownPatients(m map[string]any, subject string) map[string]bool {
	own := map[string]bool{}
	if subject != "" {
		own[subject] = true
	}
	if rt, _ := m["resourceType"].(string); rt == "Patient" {
		if id, _ := m["id"].(string); id != "" {
			own[id] = true
		}
	}
	for _, k := range subjectElements {
		ref, _ := m[k].(map[string]any)
		if r, _ := ref["reference"].(string); strings.HasPrefix(r, "Patient/") {
			own[strings.TrimPrefix(r, "Patient/")] = true
		}
	}
	return own
}
