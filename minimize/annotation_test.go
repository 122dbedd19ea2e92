package minimize_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/minimize"
)

// TestDeidentifyAnnotationHoldsNoPlate: unitSymbol drops a plate or serial
// typed as a unit text (39f9549), but the same string in UCUM's braces
// ("{7XKR319}", "mg{SN4C7Q2Z9}") has UCUM's form and was released as the
// unit, the quantity's code and a UCUM coding's code; so was an old year
// ("{1931}", "{yob1931}"). Found by this review probing the forms next to
// probe-deid's planted ones. A run in an annotation reads as a word (with
// one digit inside, or up to two after it, as "{HbA1c}", "{1.73_m2}") or a
// number of up to three digits; the annotations researchers see in units
// are kept.
func TestDeidentifyAnnotationHoldsNoPlate(t *testing.T) {
	obs := func(q string) []byte {
		return []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},` + q + `}`)
	}
	for _, bad := range []string{"{7XKR319}", "mg{SN4C7Q2Z9}", "{ABC1234}/min", "{1931}", "{yob1931}", "{1931yob}"} {
		for _, q := range []string{
			fmt.Sprintf(`"valueQuantity":{"value":61.4,"unit":%q}`, bad),
			fmt.Sprintf(`"valueQuantity":{"value":61.4,"system":"http://unitsofmeasure.org","code":%q}`, bad),
			fmt.Sprintf(`"valueCodeableConcept":{"coding":[{"system":"http://unitsofmeasure.org","code":%q}]}`, bad),
		} {
			out := string(deidentifyAbout(t, obs(q), nil, ""))
			if strings.Contains(out, strings.Trim(bad, "{}/mgin")) {
				t.Errorf("%s: released: %s", q, out)
			}
		}
	}
	for _, good := range []string{"{beats}/min", "{cells}/uL", "mL/min/{1.73_m2}", "{pack-years}", "{score}", "%{Hb}", "ng/mL{FEU}", "{HbA1c}", "/100{WBCs}", "{#}",
		"{RBC}/uL", "%{HemoglobinSaturation}", "{CH100'U}", "{CAG_repeats}", "{Log_copies}/mL", "{s_co_ratio}", "{M.o.M}", "{EIA_index}", "{CD4_cells}/uL", "{Ehrlich'U}/dL", "%{at_60_min}"} {
		q := fmt.Sprintf(`"valueQuantity":{"value":61.4,"unit":%q,"system":"http://unitsofmeasure.org","code":%q}`, good, good)
		out := string(deidentifyAbout(t, obs(q), nil, ""))
		if !strings.Contains(out, fmt.Sprintf(`"unit":%q`, good)) || !strings.Contains(out, fmt.Sprintf(`"code":%q`, good)) {
			t.Errorf("unit %s dropped: %s", good, out)
		}
	}
}

// TestDeidentifyAnnotationPlateWithSeparators: the annotation rule judged
// each run of letters and digits alone, so a plate, a serial or a year
// written with its usual separator ("{7XK-R319}", "{AB12-CDE}",
// "{SN4.C7Q.2Z9}", "{19.31}") was a run of short words and numbers, and
// released. Found by review (h-review16). The letters and digits joined
// across '-' and '.' are judged too; the annotations of units
// ("{1.73_m2}", "{CAG_repeats}", "{pack-years}", R4's "%{at_60_min}")
// keep their form.
func TestDeidentifyAnnotationPlateWithSeparators(t *testing.T) {
	obs := func(q string) []byte {
		return []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},` + q + `}`)
	}
	for _, bad := range []string{"{7XK-R319}", "{AB12-CDE}", "mg{SN4.C7Q.2Z9}", "{19.31}", "{ABC-1234}/min"} {
		for _, q := range []string{
			fmt.Sprintf(`"valueQuantity":{"value":61.4,"unit":%q}`, bad),
			fmt.Sprintf(`"valueQuantity":{"value":61.4,"system":"http://unitsofmeasure.org","code":%q}`, bad),
			fmt.Sprintf(`"valueCodeableConcept":{"coding":[{"system":"http://unitsofmeasure.org","code":%q}]}`, bad),
		} {
			out := string(deidentifyAbout(t, obs(q), nil, ""))
			inner := bad[strings.Index(bad, "{")+1 : strings.Index(bad, "}")]
			if strings.Contains(out, inner) {
				t.Errorf("%s: released: %s", q, out)
			}
		}
	}
}

// TestDeidentifyNamesInAnnotationsAreNoUnits: an annotation is free text
// in UCUM, and a name in braces in small letters, in capitals or run
// together ("{smith}", "mg{SMITH}", "{JaneDoe}/min") was released as a
// unit with its number, as a quantity's unit, as its code and as a UCUM
// coding's code, until h-deid11 (h-deid10's rule read only a capital and
// small letters as a name's form). An annotation must now be a known one,
// whole and as written (knownAnnotation): a unit or code that holds
// another is dropped, and a quantity left without unit is dropped whole.
// No common name, in any of the four writings, is a known annotation (the
// names that were words of one, "{stone}", "{min}", were released until
// h-deid12: TestDeidentifyNamesThatAreAnnotationWords); a unit beside a
// dropped one keeps its value, never the name.
func TestDeidentifyNamesInAnnotationsAreNoUnits(t *testing.T) {
	obs := func(v string) []byte {
		return []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},` + v + `}`)
	}
	for _, name := range commonNames {
		for _, written := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			if minimize.KnownAnnotation("{" + written + "}") {
				t.Errorf("{%s} is a known annotation: a name released with its number", written)
			}
		}
	}
	tried := 0
	for i, name := range commonNames {
		next := commonNames[(i+1)%len(commonNames)]
		for _, written := range []string{strings.ToLower(name), strings.ToUpper(name), name, name + next} {
			for _, unit := range []string{"{" + written + "}", "mg{" + written + "}", "{" + written + "}/min"} {
				tried++
				for _, v := range []string{
					`"valueQuantity":{"value":77441124,"unit":` + strconvQuote(unit) + `}`,
					`"valueQuantity":{"value":77441124,"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}`,
					`"valueQuantity":{"value":77441124,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}`,
					`"valueCodeableConcept":{"coding":[{"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}]}`,
				} {
					if got := string(deidentify(t, obs(v), nil)); strings.Contains(got, "77441124") || strings.Contains(got, "{"+written+"}") {
						t.Errorf("%s:\n got %s", v, got)
					}
				}
			}
		}
	}
	if tried < 1000 {
		t.Fatalf("%d names in annotations tried: the test tests less than it says", tried)
	}
	// A UCUM code beside a unit text with a name keeps the value, and the
	// name is dropped with the unit text that held it.
	got := string(deidentify(t, obs(`"valueQuantity":{"value":5.4,"unit":"mmol/L{smith}","system":"http://unitsofmeasure.org","code":"mmol/L"}`), nil))
	if !strings.Contains(got, `"valueQuantity":{"code":"mmol/L","system":"http://unitsofmeasure.org","value":5.4}`) {
		t.Errorf("mmol/L beside mmol/L{smith}:\n got %s", got)
	}
	for _, good := range []string{"{beats}/min", "{Beats}/min", "{cells}/uL", "{CD4_cells}/uL", "{HbA1c}", "{steps}", "{pack-years}", "{years}", "{RBCs}", "mg/g{creat}", "{INR}"} {
		got := string(deidentify(t, obs(`"valueQuantity":{"value":61.4,"unit":`+strconvQuote(good)+`}`), nil))
		if !strings.Contains(got, `"unit":`+strconvQuote(good)) || !strings.Contains(got, "61.4") {
			t.Errorf("unit %s dropped: %s", good, got)
		}
	}
}

// TestDeidentifyNamesThatAreAnnotationWords: from h-deid11 until h-deid12
// each run of letters of an annotation was judged alone and case aside
// against the words of R4's annotations, the common clinical unit words and
// the units of time spelled out, so a name that is such a word was
// released, with its number, as a quantity's unit, its code and a UCUM
// coding's code: "{stone}", "{DAY}", "{box}", "{FIELDS}", "{min}",
// "{cal}", and "{val}" (of R4's "{Index_val}"), "{pan}" (of
// "{Pan_Bio'U}"), "{can}" (of "{Can}"), "{tine}" (of "{Tine'U}"). An
// annotation is now kept only whole and as written, as R4's UCUM codes
// or clinicalAnnotations write it; R4's own in another case ("{BEATS}",
// "{CAN}") are dropped too, the cost of the rule.
func TestDeidentifyNamesThatAreAnnotationWords(t *testing.T) {
	obs := func(v string) []byte {
		return []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},` + v + `}`)
	}
	for _, name := range []string{"stone", "STONE", "Stone", "DAY", "day", "box", "FIELDS", "weeks", "min", "MO", "ms", "cal",
		"val", "Val", "pan", "Pan", "can", "CAN", "tine", "Tine", "dalton", "BEATS"} {
		for _, unit := range []string{"{" + name + "}", "mg{" + name + "}", "{" + name + "}/d"} {
			for _, v := range []string{
				`"valueQuantity":{"value":61.4,"unit":` + strconvQuote(unit) + `}`,
				`"valueQuantity":{"value":61.4,"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}`,
				`"valueQuantity":{"value":61.4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}`,
				`"valueCodeableConcept":{"coding":[{"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}]}`,
			} {
				if got := string(deidentify(t, obs(v), nil)); strings.Contains(got, "{"+name+"}") || strings.Contains(got, "61.4") {
					t.Errorf("%s:\n got %s", v, got)
				}
			}
		}
	}
	// A UCUM code beside keeps the value; R4's annotations as R4 writes
	// them, and clinicalAnnotations, are kept.
	got := string(deidentify(t, obs(`"valueQuantity":{"value":61.4,"unit":"mg{stone}","system":"http://unitsofmeasure.org","code":"mg"}`), nil))
	if !strings.Contains(got, `"valueQuantity":{"code":"mg","system":"http://unitsofmeasure.org","value":61.4}`) {
		t.Errorf("mg beside mg{stone}:\n got %s", got)
	}
	for _, good := range []string{"{Can}", "{Index_val}", "{Pan_Bio'U}", "{Tine'U}/mL", "{Beats}/min", "{beats}/min", "{score}", "{HbA1c}", "mL/min/{1.73_m2}"} {
		q := `"valueQuantity":{"value":61.4,"unit":` + strconvQuote(good) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(good) + `}`
		if got := string(deidentify(t, obs(q), nil)); !strings.Contains(got, `"unit":`+strconvQuote(good)) || !strings.Contains(got, "61.4") {
			t.Errorf("%s dropped:\n got %s", good, got)
		}
	}
}

// TestDeidentifyNamesThatAreR4AnnotationsNeedACode: R4's UCUM codes hold
// names as written, in braces ("{Can}", "{Dalton}", "{Bead}", "{Normal}",
// "{Patch}", "{Pill}") and in brackets ("[Cal]"), which knownAnnotation
// and ucumBrackets keep; alone as a unit text, a name with nothing of a
// unit beside it, each was released with its number until h-deid13. Such
// a text is now kept only beside a UCUM code that says it (countNameWord,
// nameCaseText); beside another code the code keeps the value. A count
// word no name is ("{Beats}", "{Cells}"), a symbol ("{Ct}"), a word of
// capitals ("{RBC}") and a text with a unit or a number outside its
// braces ("{Beats}/min", "mg/g{Cre}", "%{Normal}", "10*6/{Specimen}")
// are kept alone.
func TestDeidentifyNamesThatAreR4AnnotationsNeedACode(t *testing.T) {
	obs := func(q string) string {
		return string(deidentify(t, []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":`+q+`}`), nil))
	}
	for _, unit := range []string{"{Can}", "{Dalton}", "{Bead}", "{Normal}", "{Patch}", "{Pill}", "{Markers}", "/{Can}", "[Cal]", "{Tine'U}", "{Pan_Bio'U}"} {
		if !minimize.KnownUnitText(unit) {
			t.Errorf("%s is no unit text the unit rule reads: the test tests less than it says", unit)
		}
		for _, v := range []string{"77441124", "61.4"} { // a count of an identifier's size is withheld anyway: bareIdentifier
			if got := obs(`{"value":` + v + `,"unit":` + strconvQuote(unit) + `}`); strings.Contains(got, v) || strings.Contains(got, strconvQuote(unit)) {
				t.Errorf("%s %s alone:\n got %s", v, unit, got)
			}
		}
		want := `"valueQuantity":{"code":"g","system":"http://unitsofmeasure.org","value":4}`
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":"g"}`); !strings.Contains(got, want) {
			t.Errorf("%s beside g:\n got %s\nwant %s", unit, got, want)
		}
		want = `"valueQuantity":{"code":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","unit":` + strconvQuote(unit) + `,"value":4}`
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `,"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}`); !strings.Contains(got, want) {
			t.Errorf("%s beside its code:\n got %s\nwant %s", unit, got, want)
		}
	}
	for _, unit := range []string{"{Beats}", "{Cells}", "{Ct}", "{RBC}", "{ElisaIndex}", "{cells}", "{score}", "{#}", "{Beats}/min",
		"mg/g{Cre}", "%{Normal}", "10*6/{Specimen}", "[IU]", "[in_i]"} {
		if got := obs(`{"value":4,"unit":` + strconvQuote(unit) + `}`); !strings.Contains(got, `"valueQuantity":{"unit":`+strconvQuote(unit)+`,"value":4}`) {
			t.Errorf("%s alone dropped:\n got %s", unit, got)
		}
	}
}
