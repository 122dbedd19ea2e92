package fhirin

import (
	"errors"
	"fmt"
	"strconv"
)

// The error vocabulary of Read and Detect. Every problem Read reports about
// the input (it joins up to MaxProblems of them) is an *Error that wraps
// exactly one of these, names the place
// (file:line) and, where there is one, the FHIR path, and never quotes the
// input's content: no value, id, reference or name from a record appears
// in it. A caller branches with errors.Is; none of them is retryable: the
// input must be corrected, and nothing it holds may be imported.
var (
	// ErrCustosManifest: the path is a custos import manifest
	// (manifest.jsonl), not FHIR; give it to the manifest importer.
	ErrCustosManifest = errors.New("a custos import manifest, not FHIR input")
	// ErrFormat: a file or directory entry is none of the formats Read
	// takes, or a Bundle is of a type it does not import.
	ErrFormat = errors.New("not a FHIR input format this reader takes")
	// ErrManifest: an $export manifest is malformed, lists errors, or names
	// a file that is not local or does not exist.
	ErrManifest = errors.New("bad $export manifest")
	// ErrJSON: a line or file is not well-formed JSON or not UTF-8, or an
	// element has the wrong JSON type.
	ErrJSON = errors.New("malformed JSON")
	// ErrValue: an element's value is not valid for its FHIR type (an
	// instant that is not one, a primitive that breaks its R4 format, a
	// narrative that is not R4's XHTML (a script, an event handler) or a
	// date not in the calendar: fhirr4.Check; a Bundle entry without a resource, a RESTful
	// fullUrl that does not end with its resource's type and id, a
	// searchset whose outcome reports an error, a contained resource that
	// contains resources, a conditional update or create that matches
	// several resources of the catalog or another entry of its Bundle).
	ErrValue = errors.New("invalid value")
	// ErrStructure: a resource is not valid FHIR R4 by the structure its
	// StructureDefinitions give (fhirr4.Check, docs/import.md
	// "Structure"): an element its type does not define, or a required one
	// (minimum cardinality 1) missing. (An element of
	// the wrong JSON kind is an ErrJSON, a primitive value that breaks its
	// type's format an ErrValue.) The path names the element.
	ErrStructure = errors.New("not valid FHIR R4")
	// ErrTruncated: a line or file ends in the middle of a JSON value.
	ErrTruncated = errors.New("truncated JSON")
	// ErrLineTooLong: an NDJSON line is longer than Options.MaxLine. A
	// JSON value longer than that is an ErrValueTooLong, which errors.Is
	// also finds as ErrLineTooLong.
	ErrLineTooLong = errors.New("NDJSON line too long")
	// ErrValueTooLong: a JSON value of a JSON file or stream (a Bundle, a
	// resource, an array of them) is longer than Options.MaxLine, which
	// bounds what the reader holds whole. errors.Is(err, ErrLineTooLong)
	// holds too: until 2026-12-07 such a value was an ErrLineTooLong, and
	// its text said "NDJSON line too long" of a Bundle in a .json file.
	// The caller splits the Bundle or exports NDJSON.
	ErrValueTooLong error = valueTooLong{}
	// ErrGzip: a .gz file is not valid gzip (bad header, checksum, or cut short).
	ErrGzip = errors.New("bad gzip stream")
	// ErrResourceType: resourceType is missing, not an R4 resource type,
	// or not the type the file is named or listed for.
	ErrResourceType = errors.New("bad resourceType")
	// ErrID: a resource has no id (and no urn:uuid fullUrl to take one
	// from), or its id is not a FHIR id.
	ErrID = errors.New("missing or invalid id")
	// ErrConflict: the input gives one resource twice, differently where
	// the reader tells: a second Binary of an id with other labels or
	// another securityContext than the first (which decide its compartment
	// and labels). The error names both places. Other content of one
	// resource given twice is the store's to refuse (store.ErrBadEntry).
	// Until 2026-12-06 this was an ErrID ("missing or invalid id"), of an
	// id present and valid.
	ErrConflict = errors.New("the same resource given twice, differently")
	// ErrDangling: a urn:uuid reference names no entry of its Bundle, or an
	// attachment url names a Binary that is not in the import (nor, with
	// Options.StoredBinary, live in the catalog in the linking resource's
	// compartment).
	ErrDangling = errors.New("dangling reference")
	// ErrCompartment: a resource cannot be placed in exactly one patient
	// compartment (two patients, a contained or unresolved Patient, a
	// malformed or unresolvable reference at a compartment path, an element
	// typed Reference(Patient) that names no Patient), or a Binary is
	// linked to no resource and names no patient.
	ErrCompartment = errors.New("patient compartment undetermined")
	// ErrAttachment: attachment data is not valid base64, has no
	// contentType, or its bytes contradict the contentType.
	ErrAttachment = errors.New("bad attachment")
	// ErrUnsupported: valid FHIR this reader deliberately does not import
	// (a nested Bundle, a Parameters, a conditional delete, a PATCH entry,
	// a conditional update or create by a query other than one identifier
	// or _id).
	ErrUnsupported = errors.New("unsupported FHIR construct")
	// ErrChanged: a file of the input changed while Read read it (Read
	// reads a file more than once, and each read depends on the earlier
	// ones). Nothing it held may be imported; import again once it is
	// complete.
	ErrChanged = errors.New("input file changed during the import")
)

// Error is a problem with the input at one place.
type Error struct {
	Where string // "file:line" (line 0: the file as a whole)
	Path  string // FHIR path, e.g. "Observation.subject"; "" if none
	Err   error  // one of the sentinels above
	// Detail is fixed wording with counts and names from the FHIR
	// specification, never input content.
	Detail string
	// Entry is the Bundle entry ("Bundle.entry[17]") when Where's line does
	// not name it alone: another entry of the Bundle starts on that line
	// (a minified Bundle, every entry at line 1). "" otherwise.
	Entry string
}

func (e *Error) Error() string {
	s := "fhirin: " + e.Where + ": "
	if e.Path != "" {
		s += e.Path + ": "
	}
	s += e.Err.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Entry != "" {
		s += " (" + e.Entry + ")"
	}
	return s
}

// Unwrap returns the sentinel, for errors.Is.
func (e *Error) Unwrap() error { return e.Err }

// newError builds an *Error; detail is formatted from args that the caller
// guarantees carry no input content.
func newError(where, path string, sentinel error, format string, args ...any) *Error {
	return &Error{Where: where, Path: path, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// valueTooLong is ErrValueTooLong: its own text, and an ErrLineTooLong
// for errors.Is.
type valueTooLong struct{}

func (valueTooLong) Error() string { return "JSON value too long" }

// Is reports target == ErrLineTooLong.
func (valueTooLong) Is(target error) bool { return target == ErrLineTooLong }

// Causes inside compartment errors (wrapped in an *Error by the caller).
var (
	errReferenceNotString = errors.New("Reference.reference is not a string")
	errLogicalPatient     = errors.New("a Patient named by identifier only cannot be placed")
	errContainedPatient   = errors.New("a contained Patient cannot be placed in a compartment")
	errUnresolvedPatient  = errors.New("a conditional Patient reference is not resolved by this import")
	errTypeMismatch       = errors.New("Reference.type contradicts the type the reference names")
	errMalformedReference = errors.New("a malformed reference: neither Type/id with an R4 type (case-sensitive), an absolute URL, #id, nor Type?query")
	errUnresolvedAbsolute = errors.New("an absolute reference that no entry of the Bundle resolves and that does not end in Type/id cannot be placed (give it the Patient's Type/id, or the entry's fullUrl)")
	errForeignPatient     = errors.New("an absolute reference to a Patient on another server than the one the resource came from (its entry's RESTful fullUrl, or its $export manifest's request), or when that server is unknown, names that server's Patient, whom the same id here may not name (make the reference relative)")
	errLogicalUntyped     = errors.New("names no Patient at the compartment elements, and this one names something by identifier or display alone, with no type: it may be a patient, and the resource would be tenant-level (give the Reference a reference, or a type other than Patient)")
	errNotPatient         = errors.New("an element typed Reference(Patient) must name its Patient: Patient/id, an absolute URL ending so on its own server, or a Patient entry's fullUrl (an identifier or display alone cannot be placed)")
)

// elementName is k as a FHIR path step when it is shaped like a FHIR
// element name ([A-Za-z_][A-Za-z0-9_]*, at most 64 bytes), else "?": a
// member name is the input's too, and an error must not quote content.
func elementName(k string) string {
	if len(k) == 0 || len(k) > 64 {
		return "?"
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return "?"
		}
	}
	return k
}

// mib writes a size of n bytes for a limit in an error's text: "96 MiB",
// "1.5 MiB", "1 KiB", "100 bytes".
func mib(n int) string {
	switch {
	case n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " bytes"
}
