package fhirr4

import (
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Problem is one way a resource is not valid FHIR R4: the JSON path of the
// element (Observation.component[1].code, the resource's type first) and
// what is wrong with it. Neither holds a value of the resource.
type Problem struct {
	Kind Kind
	Path string
	What string
}

// Kind is the check a Problem failed, in the order Check applies them.
type Kind uint8

const (
	// Unknown: an element its type does not define (a _name companion of
	// no primitive element, a second type of one choice element).
	Unknown Kind = iota + 1
	// JSONKind: an element of the wrong JSON kind (an array where it does
	// not repeat, a string for a number, a fraction for an integer), or
	// an empty string, object or array, or a null outside a _name array.
	JSONKind
	// Format: a primitive value that breaks its type's format (R4
	// datatypes.html#primitive), a date that is no calendar date included.
	Format
	// Required: a required element (minimum cardinality 1) is missing.
	Required
)

func (p Problem) Error() string { return p.Path + ": " + p.What }

// maxProblems bounds the problems Check reports of one resource.
const maxProblems = 20

// Check checks the resource m (decoded with encoding/json, UseNumber)
// against the R4 structure and returns every problem it finds (up to 20),
// in the order of the walk (member names sorted), or none. Contained
// resources and those of Bundle entries and Parameters are checked as
// resources of their own type, and a Bundle entry's response outcome as
// the OperationOutcome R4 types it (an element typed by a resource type
// holds a resource of that type). A resourceType that is missing or no
// concrete R4 type is a problem; the caller may have checked it already.
//
// A resource is walked first without paths and without sorting (quick):
// nearly every resource is valid, and building a path for every element
// and sorting every object's members was most of Check's cost. Only a
// resource that fails is walked again, in full, for its problems; the
// verdicts agree (FuzzCheck, TestQuickWalkAgrees).
func Check(m map[string]any) []Problem {
	q := checker{quick: true}
	q.resource("", m)
	if !q.failed {
		return nil
	}
	c := &checker{}
	c.resource("", m)
	return c.problems
}

// checker walks one resource. A quick one notes only whether there is a
// problem (failed): it builds no path, its paths are "", and it takes an
// object's members in map order.
type checker struct {
	quick    bool
	failed   bool
	problems []Problem
}

// at is the path of the member name of the element at path ("" when quick).
func (c *checker) at(path, name string) string {
	if c.quick {
		return ""
	}
	return join(path, name)
}

// index is the path of the i-th value of the element at path ("" when quick).
func (c *checker) index(path string, i int) string {
	if c.quick {
		return ""
	}
	return path + "[" + strconv.Itoa(i) + "]"
}

func (c *checker) add(kind Kind, path, what string) {
	c.failed = true
	if c.quick {
		return
	}
	if len(c.problems) < maxProblems {
		c.problems = append(c.problems, Problem{Kind: kind, Path: path, What: what})
	}
}

// resource checks m as a resource at path ("" at the root, where the path
// starts with its type).
func (c *checker) resource(path string, m map[string]any) {
	rt, _ := m["resourceType"].(string)
	if !Resources[rt] {
		c.add(Unknown, join(path, "resourceType"), "missing, or not a concrete R4 resource type")
		return
	}
	if v, ok := NotR4[rt]; ok {
		// Medplum's R4 definitions carry it (R4B's SubscriptionStatus);
		// R4 has no such type, at the root or contained.
		c.add(Unknown, join(path, "resourceType"), "not an R4 resource type: "+rt+" is FHIR "+v+"'s")
		return
	}
	if path == "" {
		path = rt
	}
	c.object(rt, path, m, true)
}

// elementDefs are the elements every element has (R4 Element), for the
// _name companion of a primitive element.
var elementDefs = map[string]Element{
	"id":        {Type: "string"},
	"extension": {Type: "Extension", Many: true},
}

// object checks m as an instance of the type or backbone element key.
func (c *checker) object(key, path string, m map[string]any, root bool) {
	defs := Elements[key]
	if defs == nil {
		defs = elementDefs
	}
	var seen [4]string
	choices := seen[:0] // the choice elements met, most often none or one
	if c.quick {
		for name, v := range m {
			if ch := c.member(key, path, name, v, m, defs, root, choices); ch != "" {
				choices = append(choices, ch)
			}
		}
	} else {
		for _, name := range sortedKeys(m) {
			if ch := c.member(key, path, name, m[name], m, defs, root, choices); ch != "" {
				choices = append(choices, ch)
			}
		}
	}
	c.required(path, key, m)
}

// member checks the member name, v, of m, an instance of key whose
// elements are defs, where the choice elements met so far are choices, and
// returns the choice element name is a type of, or "".
func (c *checker) member(key, path, name string, v any, m map[string]any, defs map[string]Element, root bool, choices []string) string {
	if name == "resourceType" && root {
		return ""
	}
	p := c.at(path, name)
	if base, ok := cutUnderscore(name); ok {
		e, known := defs[base]
		if !known || !primitive(e.Type) {
			c.add(Unknown, p, "unknown element: no primitive element "+safeName(base)+" for it to extend")
			return ""
		}
		c.companion(p, e, v, m[base])
		return ""
	}
	e, ok := defs[name]
	if !ok {
		c.add(Unknown, p, "unknown element: "+key+" defines no element of this name")
		return ""
	}
	if e.Choice != "" && slices.Contains(choices, e.Choice) {
		c.add(Unknown, p, "a second type of the choice element "+e.Choice+"[x]: it takes one")
	}
	_, ext := m["_"+name]
	c.value(p, e, v, ext)
	return e.Choice
}

// required reports each required element of key (minimum cardinality 1)
// that m lacks: a primitive given by its _name companion alone (an
// extension, data-absent-reason say) is there, and a choice element is
// there when one of its types is.
func (c *checker) required(path, key string, m map[string]any) {
	for _, r := range requirements[key] {
		if !present(m, r.names) {
			c.add(Required, path+"."+r.name, "missing: R4 requires it (minimum cardinality 1)")
		}
	}
}

// requirement is one required element of a type: its name (value[x] for
// a choice element) and the names that give it (each type of a choice).
type requirement struct {
	name  string
	names []string
}

// requirements are the required elements of each key of Elements, sorted
// by name: derived once from the table, where required once went through
// every element of a type for every object (TestRequirementsAgree keeps
// that walk, requiredPlain, as the reference).
var requirements = func() map[string][]requirement {
	out := map[string][]requirement{}
	for key, defs := range Elements {
		var rs []requirement
		for name, e := range defs {
			if !e.Required {
				continue
			}
			r := requirement{name: name, names: []string{name}}
			if e.Choice != "" {
				r = requirement{name: e.Choice + "[x]"}
				for n, o := range defs {
					if o.Choice == e.Choice {
						r.names = append(r.names, n)
					}
				}
				slices.Sort(r.names)
			}
			if !slices.ContainsFunc(rs, func(x requirement) bool { return x.name == r.name }) {
				rs = append(rs, r)
			}
		}
		slices.SortFunc(rs, func(a, b requirement) int { return strings.Compare(a.name, b.name) })
		if len(rs) > 0 {
			out[key] = rs
		}
	}
	return out
}()

// present reports whether m holds one of names, or its _name companion.
func present(m map[string]any, names []string) bool {
	for _, n := range names {
		if _, ok := m[n]; ok {
			return true
		}
		if _, ok := m["_"+n]; ok {
			return true
		}
	}
	return false
}

// value checks v, the value of element e at path; ext reports whether its
// _name companion is there.
func (c *checker) value(path string, e Element, v any, ext bool) {
	if e.Many {
		a, ok := v.([]any)
		if !ok {
			c.add(JSONKind, path, "not an array: the element repeats, and R4 JSON writes it as an array")
			return
		}
		if len(a) == 0 {
			c.add(JSONKind, path, "an empty array: R4 JSON leaves an element without values out")
			return
		}
		for i, x := range a {
			if x == nil && primitive(e.Type) && ext {
				continue // its value is in the companion (checked there)
			}
			c.one(c.index(path, i), e.Type, x)
		}
		return
	}
	if _, ok := v.([]any); ok {
		c.add(JSONKind, path, "an array: the element does not repeat")
		return
	}
	c.one(path, e.Type, v)
}

// one checks v as one value of type typ.
func (c *checker) one(path, typ string, v any) {
	if v == nil {
		c.add(JSONKind, path, "null: R4 JSON leaves an element without a value out")
		return
	}
	if primitive(typ) {
		c.primitive(path, typ, v)
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		c.add(JSONKind, path, "not an object: "+typ+" is a complex type")
		return
	}
	if len(m) == 0 {
		c.add(JSONKind, path, "an empty object: R4 JSON leaves an element without content out")
		return
	}
	if typ == "Resource" {
		c.resource(path, m)
		return
	}
	if Resources[typ] {
		// An element typed by one resource type (R4's one:
		// Bundle.entry.response.outcome, an OperationOutcome) holds a
		// resource of that type, resourceType and all.
		if rt, _ := m["resourceType"].(string); rt != typ {
			c.add(Unknown, c.at(path, "resourceType"), "missing, or not "+typ+", the one resource type R4 takes here")
			return
		}
		c.resource(path, m)
		return
	}
	c.object(typ, path, m, false)
}

// companion checks v, the _name companion at path of primitive element e
// whose value is prim (nil when absent): an Element (id, extension) for a
// single value, an array of them or null aligned with the values for a
// repeating one.
func (c *checker) companion(path string, e Element, v, prim any) {
	if !e.Many {
		c.one(path, "Element", v)
		return
	}
	a, ok := v.([]any)
	if !ok {
		c.add(JSONKind, path, "not an array: its element repeats")
		return
	}
	if pa, ok := prim.([]any); ok && len(pa) != len(a) {
		c.add(JSONKind, path, "not as long as the array of values it extends")
	}
	for i, x := range a {
		if x == nil {
			if pa, ok := prim.([]any); !ok || i >= len(pa) || pa[i] == nil {
				c.add(JSONKind, c.index(path, i), "null, and so is the value it extends")
			}
			continue
		}
		c.one(c.index(path, i), "Element", x)
	}
}

// primitives are the R4 primitive types, by the JSON kind R4 writes them
// in (json.html#primitive).
var primitives = map[string]string{
	"boolean": "boolean", "integer": "number", "positiveInt": "number", "unsignedInt": "number", "decimal": "number",
	"string": "string", "markdown": "string", "code": "string", "id": "string", "oid": "string", "uuid": "string",
	"uri": "string", "url": "string", "canonical": "string", "base64Binary": "string", "xhtml": "string",
	"instant": "string", "date": "string", "dateTime": "string", "time": "string",
}

func primitive(typ string) bool { return primitives[typ] != "" }

// primitive checks v as a value of the primitive type typ: its JSON kind
// (a JSON boolean, number or string, as R4 JSON writes the type), then its
// format (checkFormat).
func (c *checker) primitive(path, typ string, v any) {
	kind := primitives[typ]
	switch x := v.(type) {
	case bool:
		if kind == "boolean" {
			return
		}
	case json.Number:
		if kind == "number" {
			if kind, what := checkNumber(typ, string(x)); what != "" {
				c.add(kind, path, what)
			}
			return
		}
	case string:
		if kind == "string" {
			if x == "" {
				c.add(JSONKind, path, "an empty string: R4 JSON leaves an element without a value out")
			} else if what := checkFormat(typ, x); what != "" {
				c.add(Format, path, what)
			}
			return
		}
	}
	c.add(JSONKind, path, "not a JSON "+kind+": R4 JSON writes a "+typ+" as one")
}

// checkNumber checks n, a JSON number, as a value of typ: the integer
// types whole and in their range (a JSONKind problem), positiveInt above
// 0 and unsignedInt not below (a Format problem; datatypes.html#primitive).
func checkNumber(typ, n string) (Kind, string) {
	if typ == "decimal" {
		return 0, ""
	}
	// A whole number in exponent form (1e2) is the same JSON number, and
	// JSON parsers do not tell it from 100: taken.
	f, err := strconv.ParseFloat(n, 64)
	i := int64(f)
	switch {
	case err != nil || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32:
		return JSONKind, "not a whole number in the 32-bit range of an R4 " + typ
	case typ == "positiveInt" && i < 1:
		return Format, "not positive: a positiveInt is 1 or more"
	case typ == "unsignedInt" && i < 0:
		return Format, "negative: an unsignedInt is 0 or more"
	}
	return 0, ""
}

// formatSources are the regular expressions of R4's primitive types, as
// the StructureDefinitions give them (profiles-types.json, the value's
// regex extension; TestFormatsAreR4s compares them), for the types whose
// format Check checks. A value matches it whole.
var formatSources = map[string]string{
	"base64Binary": `(\s*([0-9a-zA-Z\+/=]){4}\s*)+`,
	"code":         `[^\s]+(\s[^\s]+)*`,
	"date":         `([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2][0-9]|3[0-1]))?)?`,
	"dateTime":     `([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2][0-9]|3[0-1])(T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00)))?)?)?`,
	"id":           `[A-Za-z0-9\-\.]{1,64}`,
	"instant":      `([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)-(0[1-9]|1[0-2])-(0[1-9]|[1-2][0-9]|3[0-1])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))`,
	"markdown":     `[ \r\n\t\S]+`,
	"oid":          `urn:oid:[0-2](\.(0|[1-9][0-9]*))+`,
	"string":       `[ \r\n\t\S]+`,
	"uuid":         `urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`,
	"time":         `([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?`,
	"uri":          `\S*`,
	"url":          `\S*`,
	"canonical":    `\S*`,
}

// formats are formatSources compiled, anchored.
var formats = func() map[string]*regexp.Regexp {
	m := make(map[string]*regexp.Regexp, len(formatSources))
	for typ, src := range formatSources {
		m[typ] = regexp.MustCompile(`^(?:` + src + `)$`)
	}
	return m
}()

// checkFormat checks s, a non-empty string, as a value of typ: its
// format, and for a date, dateTime or instant with a day, that the day
// is in the calendar (no 30 February; 29 February of leap years only).
func checkFormat(typ, s string) string {
	if typ == "xhtml" {
		if what := checkNarrative(s); what != "" {
			return "not R4 narrative: " + what
		}
		return ""
	}
	re := formats[typ]
	if re == nil {
		return ""
	}
	if !matchFormat(typ, re, s) {
		return "not an R4 " + typ + " (" + formatHints[typ] + ")"
	}
	if (typ == "string" || typ == "markdown") && len(s) > maxString && utf8.RuneCountInString(s) > maxString {
		return "longer than R4's 1 MB (1,048,576 characters) for a " + typ
	}
	if (typ == "date" || typ == "dateTime" || typ == "instant") && len(s) >= 10 {
		y, _ := strconv.Atoi(s[0:4])
		mo, _ := strconv.Atoi(s[5:7])
		d, _ := strconv.Atoi(s[8:10])
		if d > daysIn(y, mo) {
			return "not a calendar date: the month has " + strconv.Itoa(daysIn(y, mo)) + " days"
		}
	}
	return ""
}

// maxString is the most characters of an R4 string, and so of a
// markdown (datatypes.html#string: "SHALL NOT exceed 1MB (1024*1024
// characters)"; the StructureDefinition's maxLength).
const maxString = 1 << 20

// stringChars is R4's rule for the characters of a string (and so of a
// markdown) in datatypes.html's words: no code point below 32 but tab, CR
// and LF. Its regex, [ \r\n\t\S]+, does not say it (\S takes every
// control character but \f in RE2, every one in XML Schema). With
// formats it is the reference of the fast path (TestFormatFastPathsAgree).
var stringChars = regexp.MustCompile(`^[^\x00-\x08\x0B\x0C\x0E-\x1F]*$`)

// matchFormat reports whether s matches re, typ's format: by hand for the
// formats that are a character class (uri, url, canonical, id, code,
// string, markdown: for these two with stringChars) or a run of groups
// (base64Binary, where the regexp backtracked over a whole attachment), by
// re for the others. The regexps stay the reference
// (TestFormatFastPathsAgree).
func matchFormat(typ string, re *regexp.Regexp, s string) bool {
	switch typ {
	case "string", "markdown":
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return false
			}
		}
		return len(s) > 0
	case "uri", "url", "canonical":
		for i := 0; i < len(s); i++ {
			if isSpace(s[i]) {
				return false
			}
		}
		return true
	case "id":
		if len(s) == 0 || len(s) > 64 {
			return false
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
				return false
			}
		}
		return true
	case "code":
		if len(s) == 0 || isSpace(s[0]) || isSpace(s[len(s)-1]) {
			return false
		}
		for i := 1; i < len(s); i++ {
			if isSpace(s[i]) && isSpace(s[i-1]) {
				return false
			}
		}
		return true
	case "base64Binary":
		// (\s*[0-9a-zA-Z+/=]{4}\s*)+: at least one group of four, and
		// whitespace only between groups.
		n := 0
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case isSpace(c):
				if n%4 != 0 {
					return false
				}
			case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=':
				n++
			default:
				return false
			}
		}
		return n > 0 && n%4 == 0
	}
	return re.MatchString(s)
}

// isSpace reports whether c is in RE2's \s: tab, newline, form feed,
// carriage return, space.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// formatHints say in words what formatSources require.
var formatHints = map[string]string{
	"base64Binary": "base64",
	"code":         "no leading, trailing or double whitespace",
	"date":         "YYYY, YYYY-MM or YYYY-MM-DD",
	"dateTime":     "YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm:ss[.f] with a time zone",
	"id":           "1 to 64 of A-Z a-z 0-9 - .",
	"instant":      "YYYY-MM-DDThh:mm:ss[.f] with a time zone",
	"markdown":     "no control characters but tab, CR and LF",
	"oid":          "a URN of the oid namespace: dotted numbers, none with a leading 0",
	"string":       "no control characters but tab, CR and LF",
	"uuid":         "a URN of the uuid namespace: a UUID in lowercase hex",
	"time":         "hh:mm:ss[.f]",
	"uri":          "no whitespace",
	"url":          "no whitespace",
	"canonical":    "no whitespace",
}

// daysIn is the number of days of month mo (1-12) of year y (Gregorian).
func daysIn(y, mo int) int {
	return time.Date(y, time.Month(mo)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// elementName is the shape of an R4 element name; another member name is
// written "?" in a path, since it may be content.
var elementName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

func safeName(name string) string {
	if isElementName(name) {
		return name
	}
	return "?"
}

// isElementName reports whether elementName matches name, without the
// regexp: every element of every resource is named on its path, and the
// regexp took a third of Check's time (TestIsElementNameAgreesWithRegexp
// keeps elementName as the reference).
func isElementName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func join(path, name string) string {
	if path == "" {
		return safeName(name)
	}
	return path + "." + safeName(name)
}

func cutUnderscore(name string) (string, bool) {
	if len(name) > 1 && name[0] == '_' {
		return name[1:], true
	}
	return "", false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
