package minimize_test

import (
	"fmt"
	"strings"
	"testing"
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
