package minimize_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/minimize/safeharbortest"
)

// TestDeidentifyOutsideExamples runs the research view over FHIR R4
// resources from outside custos (testdata/outside, README.md there names
// each source and the identifier planted in it) and checks that what each
// example showed leaking no longer does: every gone string is absent from
// the output (and present in the input: the positive control), every kept
// string is still there (the rule did not drop the ordinary values beside
// the identifier), and the Safe Harbor scanner finds nothing.
func TestDeidentifyOutsideExamples(t *testing.T) {
	for _, c := range []struct {
		file       string
		gone, kept []string
	}{
		// A licence plate, a device serial and a plate of US form typed as
		// a quantity's unit text were released as the unit.
		{"synthea-observation-unit-plate.json", []string{"7XKR319", "SN4C7Q2Z9", "ABC1234"},
			[]string{`"unit":"mL/min/1.73m2"`, `"unit":"x10E3/uL"`, `"unit":"/min"`, `"unit":"kg/m²"`, `"unit":"10⁹/L"`, `"unit":"cmH2O"`}},
		// A year of 90 years ago or more as a bare number (a valueInteger,
		// a decimal, a quantity without unit) was released: an element of
		// a date indicative of an age over 89.
		{"synthea-observation-year-integer.json", []string{"1931", "1928"}, []string{`"value":3`}},
		{"hl7-eob-supportinginfo-year.json", []string{"1931"}, []string{`"value":2`}},
		{"hl7-device-property-year.json", []string{"1931"}, []string{`"value":4`}},
		// A name as a MIME subtype was released as the content type.
		{"medplum-binary-mime-name.json", []string{"evelyn", "marsh"}, nil},
		// A postal code of an address that names neither a country nor
		// a state was taken for a US ZIP: Paris's 75004 came out "750",
		// Berlin's 10117 "101", units smaller than a state.
		{"hl7-relatedperson-postal-no-country.json", []string{`"postalCode":"75`, `"postalCode":"10`}, []string{`"postalCode":"021"`}},
		// A date written with dots as a UCUM code or unit (digits joined
		// by "." have UCUM's form) was released.
		{"synthea-observation-dotted-date-unit.json", []string{"1931"}, []string{`"code":"mg/dL"`}},
		// An age over 89 in a unit that says age ({age}, yoa), and an old
		// year or a nine-digit identifier in a dimensionless quantity
		// ({yyyy}, 1, {#}), were released.
		{"synthea-observation-age-units.json", []string{`"value":93`, `"value":94`, "1931", "1929", "219099999"}, []string{`"unit":"{pack-years}"`}},
		// A questionnaire answer's number is dropped whatever it is (its
		// question is withheld), but one with an annotation for unit
		// ({#}, 1) passed as a measurement: a telephone number or an MRN
		// typed as an answer was released.
		{"hl7-questionnaireresponse-answer-annotation.json", []string{"5558675", "77441123"}, []string{`"value":3.75`}},
		{"hl7-endpoint-mime-name.json", []string{"evelyn", "marsh", "7xkr319"}, []string{`"application/fhir+json"`, `"text/plain"`}},
		// A plate, a serial or a year as a UCUM bracketed atom ([7XKR319],
		// mm[7XKR319], [SN4C7Q2Z9], [1931]) has UCUM's form, whatever the
		// brackets hold, and was released as a unit text, a quantity's
		// code and a UCUM coding's code.
		{"hl7-observation-bracketed-unit.json", []string{"7XKR319", "SN4C7Q2Z9", "1931", "ABC1234"},
			[]string{`"code":"mm[Hg]"`, `"code":"[in_i]"`, `"code":"[iU]/mL"`}}, // "value":60, whose unit and code both were identifiers, is dropped with its quantity since 2026-12-06 (knownUnitText)
		// An MRN, a telephone number or an SSN split by UCUM's operators
		// or a dash (7744.112, 867.5309, 219.099.999, 7744/112, 867-5309)
		// has no six digits in a row, and was released as a unit text or
		// a quantity's code.
		{"hl7-observation-unit-split-number.json", []string{"7744.112", "867.5309", "219.099.999", "7744/112", "867-5309"},
			[]string{`"unit":"mmol/l"`, `"code":"mmol/L"`, `"unit":"mL/min/1.73m2"`, `"code":"mL/min/{1.73_m2}"`}}, // "value":3.1, whose unit and code both were identifiers, is dropped with its quantity since 2026-12-06 (knownUnitText)
		// The same split by UCUM's parentheses, an underscore, an
		// apostrophe or a power sign ((7744).(112), (867)5309,
		// 219_09_9999, 7745*113) was still released after that rule.
		{"hl7-observation-unit-grouped-number.json", []string{"7744", "5309", "7741", "5558", "219_09", "7745", "7746"},
			[]string{`"unit":"mmol/l"`, `"unit":"mL/min/1.73m2"`, `"code":"mL/min/(173.10*-2.m2)"`, `"unit":"10*3/uL"`, `"code":"10*6/(24.h)"`}}, // "value":6.2, whose unit and code both were identifiers, is dropped with its quantity since 2026-12-06 (knownUnitText)
		// A contained resource named only by another contained resource
		// that nothing released names (a note's author, withheld with the
		// note, whose qualification names an Organization) was released:
		// nothing in the output referred to it (FHIR dom-3 broken), and its
		// state and ZIP3 came out.
		{"hl7-allergyintolerance-contained-chain.json", []string{`"contained"`, `"resourceType":"Organization"`},
			[]string{`"code":"227493005"`, `"onsetDateTime":"2004"`}},
		// An age over 89 whose unit is given by its code alone, in UCUM's
		// case-insensitive form (ANN, MO), as an annotation ({years}) or
		// as a unit text typed as a code (YR, Years), was released: only
		// a unit text was read so.
		{"synthea-observation-age-unit-codes.json", []string{`"value":93`, `"value":1128`, `"value":95`, `"value":96`, `"value":97`},
			[]string{`"value":3`}},
		// A US state written as an ISO 3166-2 code took any two letters
		// after "US-": "US-PW", USPS's Palau (some 18,000 people) with
		// "US-" in front, was released as a state and as an ISO 3166 code.
		{"uscore-patient-iso-state-small.json", []string{"US-PW"}, []string{`"state":"US-OK"`, `"postalCode":"740"`}},
		// An age over 89 in a unit of time written with a hyphen or an
		// underscore (years-old, y-o, yrs_old; German's Jahre-alt) is a
		// unit symbol's form, and was released as one, not an age.
		{"hl7-observation-age-hyphen-units.json", []string{`"value":93`, `"value":94`, `"value":95`, `"value":96`}, []string{`"unit":"kg/m2"`}},
		// An Italian address writes its province's two letters in the
		// state (HL7 Italia), and many are USPS codes: "MI" (Milan), "PA"
		// (Palermo), "CA" (Cagliari) were released as US states, and with
		// no country Milan's postal code 20121 as ZIP3 "201". A US address
		// without country whose ZIP is its state's keeps both.
		{"hl7it-patient-province-state.json", []string{`"state":"PA"`, `"state":"CA"`, `"postalCode":"201`, `"postalCode":"091`},
			[]string{`"country":"IT"`, `{"postalCode":"481","state":"MI"}`}},
		// A date whose month is a name (14-Mar-1931, 14.Mär.1931, 31déc,
		// 14-MRT-1931, 14/Jan/1931) or marked in Chinese and Japanese
		// (1931年3月) has each part a unit's word or number, and UCUM's
		// form with slashes: it was released as a unit text, a quantity's
		// code and a UCUM coding's code.
		// An age over 89 in the unit Chinese records give it in (周岁,
		// 虚岁), as German ones write the year of life (Lj., Lebensjahr),
		// or in the years of Persian and Urdu, Bengali, Albanian,
		// Georgian, Armenian or Icelandic was released: timeUnits did not
		// know them.
		{"hl7-observation-age-units-more-languages.json", []string{`"value":91`, `"value":92`, `"value":93`, `"value":94`, `"value":95`, `"value":96`, `"value":97`, `"value":98`, `"value":99`, `"value":100`},
			[]string{`"unit":"kg/m2"`, `"value":16.2`}},
		// A year given with a unit that says it is one (AD, yyyy, n. Chr.;
		// the Thai Buddhist Era's พ.ศ., Japan's Shōwa era 昭和, the Hijri
		// AH) is a measurement to the bare-year rule, and was released;
		// so was a year as the unit itself (1929), which UCUM's form takes
		// for a factor.
		// (Its recent year, 2016 AD, kept until h-deid14, is dropped since:
		// an era of a name's initials' form, "AD", needs a UCUM code, and
		// UCUM has none; TestDeidentifyTwoCapitalsAloneNeedACode.)
		{"synthea-observation-calendar-year-units.json", []string{`"value":1931`, `"value":1932`, `"value":2474`, `"value":1934`, `"value":6`, `"value":1350`, "1929", `"value":2016`},
			[]string{`"value":3`}},
		// A language tag whose region is a country or territory of
		// 20,000 people or fewer (pih-NF, Norfolk Island's language;
		// en-PN, Pitcairn; it-VA, the Holy See) was released as a coding
		// and as Resource.language, though the same region as an ISO 3166
		// code is withheld.
		{"hl7-patient-language-small-region.json", []string{"pih-NF", "en-PN", "it-VA"}, []string{`"code":"nl-NL"`}},
		// An amount in the currency of a territory of 20,000 people or
		// fewer (the Falkland Islands pound, the Saint Helena pound) was
		// released as Money.currency, a quantity's ISO 4217 code and its
		// unit text.
		{"carinbb-eob-small-currency.json", []string{"FKP", "SHP"}, []string{`"currency":"USD"`}},
		// An age over 89 whose unit says "years old" in Dutch, Danish,
		// Swedish, Spanish, Portuguese, Italian or French (jaar oud, år
		// gammel, años de edad, anos de idade, anni di età, ans révolus)
		// lost its unit text to the spaces in it and was released as a
		// bare number: only English's "old", "of age" and German's "alt"
		// made a unit of time an age.
		{"hl7-observation-age-phrase-units.json", []string{`"value":91`, `"value":92`, `"value":93`, `"value":94`, `"value":95`, `"value":96`, `"value":97`},
			[]string{`"unit":"kg/m2"`, `"value":16.2`}},
		// A number whose meaning the walk withholds (an Observation or a
		// component whose code is a local coding or text alone, a device
		// property of a local type) says nothing of what it is, as a
		// questionnaire answer does not: a member number, a ZIP code, a
		// telephone number, an account number, a serial number or a lot
		// number typed as one was released. One with a unit is kept.
		{"hl7-observation-local-code-number.json", []string{"77441123", "90210", "5558675", "4471123"},
			[]string{`"value":185`, `"value":84`, `"valueInteger":72`, `"code":"3141-9"`}},
		{"hl7-device-property-local-type.json", []string{"7654321", "4455667"}, []string{`"value":4}`, `"value":12`}},
		// A number whose meaning is withheld (an answer, a value under a
		// withheld code) is judged by the unit it is released with: one
		// whose unit the walk drops (prose, a plate) was taken for a
		// measurement by the unit it came with, and released bare.
		{"hl7-questionnaireresponse-answer-dropped-unit.json", []string{"5558676", "90211"}, []string{`"value":3.75`}},
		{"hl7-observation-local-code-dropped-unit.json", []string{"5558677", "90212", "4471124"}, []string{`"value":185`, `"valueInteger":72`}},
		// A date whose meaning is withheld (an answer, a value under a
		// withheld code) may be an event's: its year beside an age of 70
		// years tells a birth in 1929 or 1930, but it was judged as a
		// date of birth only, and both were released.
		{"hl7-questionnaireresponse-answer-date-age.json", []string{`"value":70`}, []string{`"valueDate":"2000"`, `"value":3.75`}},
		{"hl7-observation-local-code-date-age.json", []string{`"value":70`}, []string{`"valueDateTime":"2000"`, `"value":84`}},
		// A recent year given with a unit that says it is one (2000 AD)
		// did not count with an age beside it: a year of arrival 2000
		// and an age at arrival of 70 tell a birth in 1929 or 1930.
		// Since h-deid14 the year's era, "AD", of a name's initials' form,
		// is dropped with the year, and the age of 70 beside no year is
		// released (TestDeidentifyTwoCapitalsAloneNeedACode keeps the age
		// withheld beside a year whose era is kept, "yyyy").
		{"synthea-observation-year-and-age.json", []string{`"value":2000`}, []string{`"value":70`, `"value":3`}},
		{"ips-observation-named-month-unit.json", []string{"Mar-1931", "Mär", "déc", "Jan/1931", "1931年", "MRT"},
			[]string{`"code":"mmol/L"`, `"code":"mm[Hg]"`, `"unit":"mm[Hg]"`, `"unit":"mL/min/1.73m2"`, `"code":"mL/min/{1.73_m2}"`, `"value":5.4`}},
	} {
		raw, err := os.ReadFile(filepath.Join("testdata", "outside", c.file))
		if err != nil {
			t.Fatal(err)
		}
		out := deidentifyAbout(t, raw, nil, "")
		for _, g := range c.gone {
			if !strings.Contains(strings.ToLower(string(raw)), strings.ToLower(g)) {
				t.Errorf("%s: positive control: %q not in the input", c.file, g)
			}
			if strings.Contains(strings.ToLower(string(out)), strings.ToLower(g)) {
				t.Errorf("%s: %q released: %s", c.file, g, out)
			}
		}
		for _, k := range c.kept {
			if !strings.Contains(string(out), k) {
				t.Errorf("%s: %s dropped: %s", c.file, k, out)
			}
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		s := safeharbortest.NewScanner(deidNow.Year())
		s.Collect(v)
		for _, f := range s.Scan(out) {
			t.Errorf("%s: class %s at %s", c.file, f.Class, f.Where)
		}
	}
}
