package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gabriel-vasile/mimetype"
	"golang.org/x/text/encoding/ianaindex"
)

// Entry is one source resource of a streaming import (ImportEntries): the
// store's mirror of what a FHIR reader yields per item (fhirin). Ids are
// SOURCE ids (as the EHR knows them); the store names the resource by
// keyed ids (Namer) and never puts a source id in a URI, name, title or
// description.
type Entry struct {
	// Type is the FHIR resourceType ("Observation"), or "Attachment" for an
	// attachment lifted out of the resource that carried it.
	Type string
	// ID is the source logical id (for a lifted attachment, a stable id
	// derived from its carrier and element path).
	ID string
	// Patient is the source id of the Patient whose compartment holds the
	// resource; "" for tenant-level reference data. A Patient's own is its ID.
	Patient string
	// Deleted marks a deletion (a Bulk Data "deleted" entry): the resource
	// is retired. Body and the other fields are ignored.
	Deleted bool
	// Body is the FHIR JSON (with lifted attachments replaced by a link to
	// their URI), or the attachment's bytes.
	Body []byte
	// MIMEType is the attachment's media type, checked against Body; for a
	// FHIR resource it is "" or application/fhir+json.
	MIMEType string
	// Sensitivity and Consent are label values (knownSensitivity,
	// knownConsent), e.g. from meta.security. The consent label "opt-out"
	// is the caller's first approximation only: ImportEntries decides it
	// from the opt-out Consents of the catalog (OptOut).
	Sensitivity []string
	Consent     []string
	// OptOut, for a Consent in a patient compartment, says that it records
	// the patient's opt-out (fhirin: status active and a base provision of
	// type deny). ImportEntries keeps the live opt-out Consents in an index
	// and labels every live item of their patients "opt-out". Ignored for
	// any other type.
	OptOut bool
	// PatientWide holds "vip" when the caller saw its patient's Patient
	// labelled vip (fhirin.Item.PatientWide): like "opt-out" in Consent, a
	// first approximation only, which spares the item a second version
	// when the Patient comes later in the stream; ImportEntries decides
	// the patient-wide "vip" from the live Patients of the catalog
	// (docs/import.md, "Patient-wide labels"). Other values are ignored.
	// It is never the item's own label: put that in Sensitivity.
	PatientWide []string
	// LastUpdated is meta.lastUpdated (the resource annotation lastModified).
	LastUpdated time.Time
	// Carrier is the resource an attachment came from (Type and source ID);
	// its type goes into the attachment's title, its id nowhere.
	Carrier Carrier
	// Where locates the entry in the input ("Observation.ndjson:17"), for
	// errors. It must not hold PHI.
	Where string
	// Links are the source ids of the Binaries a FHIR resource links or
	// mentions (fhirin.Item.Links), in its compartment or not: the import
	// keeps them in the link index (links.go) and gives every live item of
	// a Binary's compartment that names it, and the Binary, the union of
	// their labels. Ignored for a Binary, an attachment or a deletion.
	Links []string
	// Stored marks an entry naming a Binary the stream links but does not
	// hold, live in the catalog from an earlier import (fhirin.Item.Stored).
	// Only Type ("Binary"), ID, Patient, Sensitivity (every label the
	// Binary must have) and Where count. The Binary keeps its content and
	// metadata; it gets a new version with the union of its labels and
	// Sensitivity if it lacks one (Relabelled), else it is Unchanged. It
	// counts as mentioned (a full import does not retire it). It is a
	// problem, naming Where, if the Binary is not live under the URI of
	// Patient: retired, another patient's, or never imported.
	Stored bool
	// Kept marks an entry naming a live FHIR resource of the catalog that
	// the stream keeps as it is (fhirin.Item.Kept: a conditional create
	// whose search found it; kept.go). Only Type, ID, Patient and Where
	// count. Nothing of it is written (same content, labels, version); it
	// counts as mentioned, and so do the attachments it carries and the
	// Binaries its lifted attachments link in its compartment (a full
	// import retires none of them; a Binary it only mentions it does,
	// kept.go). Unless the
	// input writes it too, it is counted Unchanged. It is a problem, naming
	// Where, if once the stream is written the resource is not live under
	// the URI of Patient (the input deletes or moves it) or is another
	// source's.
	Kept bool
	// NoOverwrite, if not "", is the FHIR path of the query of a
	// conditional update or create that matched nothing
	// (fhirin.Item.NoOverwrite: "Bundle.entry[3].request.url"; it must
	// hold no source id): the entry creates its resource under its own
	// id, and it is a problem, naming Where and this path, where the
	// resource of that id is live in the catalog and is not this content
	// (media type, and the bytes or, for FHIR JSON, the canonical form as
	// for Unchanged: a server's re-export reorders members) of this
	// import's source under the URI of
	// Patient (R5 http.html#cond-update, "No matches, id provided and
	// already exist": 409 Conflict). It would overwrite a resource its
	// search did not find: another patient's (moved into this one's
	// compartment), one without a source (taken over), or other content.
	// The same content again is Unchanged, so a re-import of the same
	// input is. Ignored for a deletion, a Kept or a Stored entry.
	NoOverwrite string

	// prepared is what ImportEntries makes of the entry alone, made ahead
	// (EntryOptions.Preparer); nil: made when the import takes it.
	prepared *preparedEntry
}

// Carrier names the resource an attachment was lifted out of.
type Carrier struct {
	Type string
	ID   string
}

// EntryError locates a problem with one Entry of a streaming import. Its
// message is "Where: reason", or "Where: Path: reason", and never quotes
// the entry's content or ids. It unwraps to ErrBadEntry and, if set, Err.
type EntryError struct {
	Where string // Entry.Where; "entry N" (1-based) when the entry has none
	// Path is the FHIR path of the element at fault, when the store can
	// tell it without a source id: for an attachment, that of its
	// contentType ("DocumentReference.content[1].attachment.contentType",
	// "Binary.contentType"); else "".
	Path   string
	Reason string
	// Err is a more specific sentinel of the problem (ErrAttachment), or
	// nil.
	Err error
}

func (e *EntryError) Error() string {
	if e.Path != "" {
		return e.Where + ": " + e.Path + ": " + e.Reason
	}
	return e.Where + ": " + e.Reason
}

// Unwrap returns ErrBadEntry and Err, if set.
func (e *EntryError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBadEntry, e.Err}
	}
	return []error{ErrBadEntry}
}

// attachmentPath is the FHIR path of the contentType of the attachment
// entry e, "" if it cannot be told: a Binary's is "Binary.contentType"; a
// lifted attachment's id is "<carrier type>/<carrier id>/<element path>"
// (fhirin.Item.ID), and its path is "<carrier type>.<element path>"
// unless the element path holds anything but element names and indexes
// (then it could hold a source id).
func attachmentPath(e *Entry) string {
	if e.Type == "Binary" {
		return "Binary.contentType"
	}
	prefix := e.Carrier.Type + "/" + e.Carrier.ID + "/"
	rel, ok := strings.CutPrefix(e.ID, prefix)
	if !ok || e.Carrier.ID == "" || fhirTypes[strings.ToLower(e.Carrier.Type)] != e.Carrier.Type || rel == "" {
		return ""
	}
	for _, c := range rel {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '[' || c == ']') {
			return ""
		}
	}
	return e.Carrier.Type + "." + rel + ".contentType"
}

// entryRecord is a validated Entry: its URI, catalog record (without
// Version) and content digest.
type entryRecord struct {
	uri URI
	id  [16]byte // the keyed resource id, for the id index and seen set
	// carrier is the keyed id of the resource a lifted attachment came
	// from (Entry.Carrier), for the carried index; zero for anything else.
	carrier [16]byte
	occ     occurrence // digests, patient and Where (or "entry N"), for the seen set
	// optOut is Entry.OptOut of a Consent in a patient compartment.
	optOut bool
	// vipHint is Entry.PatientWide holding "vip", for an item in a patient
	// compartment.
	vipHint bool
	// links are the keyed ids of the Binaries a FHIR resource names
	// (Entry.Links); binary marks a Binary.
	links  [][16]byte
	binary bool
	// noOverwrite is Entry.NoOverwrite; sameContentAs, for such an entry,
	// the digest of the live version under its URI whose content keepStored
	// found the same JSON in canonical form (where the records differ
	// otherwise, and so keep their own bytes): that content is this entry's.
	noOverwrite   string
	sameContentAs string
	res           Resource
	body          []byte
	digest        [32]byte
}

// category is the part of a FHIR resource a title is built from.
type fhirHead struct {
	ResourceType string          `json:"resourceType"`
	Category     json.RawMessage `json:"category"`
}

type codeableConcept struct {
	Coding []struct {
		System string `json:"system"`
		Code   string `json:"code"`
	} `json:"coding"`
}

// categorySystem reports whether a category coding's system is a public
// terminology whose codes name kinds of data, never people: HL7's code
// systems (observation-category, condition-category, ...), FHIR's own,
// LOINC and SNOMED CT. A local system's code may be anything (an MRN fits
// the code syntax), and a title is shown to every caller who may list.
func categorySystem(sys string) bool {
	return strings.HasPrefix(sys, "http://terminology.hl7.org/CodeSystem/") ||
		strings.HasPrefix(sys, "http://hl7.org/fhir/") && !strings.HasPrefix(sys, "http://hl7.org/fhir/sid/") ||
		sys == "http://loinc.org" || sys == "http://snomed.info/sct"
}

// categoryCodes are the codes a category given as a list of codes may
// have (AllergyIntolerance.category, a required binding).
var categoryCodes = map[string]bool{"food": true, "medication": true, "environment": true, "biologic": true}

// categoryCode returns the code of the first coding of a public
// terminology (categorySystem) of a FHIR category element (a
// CodeableConcept or a list of them), or the first of a list of codes when
// it is one of categoryCodes, if it looks like a terminology code
// ([A-Za-z0-9._-], at most 64 bytes). It never returns display text, which
// may carry anything, nor a local system's code.
func categoryCode(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var code string
	var many []codeableConcept
	var one codeableConcept
	var codes []string
	first := func(cc codeableConcept) string {
		for _, c := range cc.Coding {
			if categorySystem(c.System) {
				return c.Code
			}
		}
		return ""
	}
	switch {
	case json.Unmarshal(raw, &many) == nil && len(many) > 0:
		for _, cc := range many {
			if code = first(cc); code != "" {
				break
			}
		}
	case json.Unmarshal(raw, &one) == nil:
		code = first(one)
	case json.Unmarshal(raw, &codes) == nil && len(codes) > 0 && categoryCodes[codes[0]]:
		code = codes[0]
	}
	if len(code) == 0 || len(code) > 64 {
		return ""
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return ""
		}
	}
	return code
}

// entryTexts returns the name, title and description of a resource from
// its type, its category code, its carrier's type and its opaque id only:
// never from display text, names or source ids.
func entryTexts(u URI, resourceType, category, carrierType, mimeType string) (name, title, description string) {
	name = u.Type + "-" + u.ID[:8]
	whose := "of one patient"
	if u.Patient == "" {
		whose = "of the tenant (reference data)"
	}
	if u.Scheme == SchemeAttachment {
		title = "Attachment"
		if fhirTypes[strings.ToLower(carrierType)] == carrierType && carrierType != "" {
			title += " of a " + carrierType
		}
		title += " (" + mimeType + ")"
		return name, title, "A " + mimeType + " attachment " + whose + "."
	}
	title = resourceType
	if category != "" {
		title += " (" + category + ")"
	}
	return name, title, "A FHIR R4 " + resourceType + " resource " + whose + "."
}

// checkEntry validates e (not Deleted) for URI u and builds its record,
// or returns the problem (Where unset). Reasons never quote content or ids.
func checkEntry(e *Entry, u URI, source string) (entryRecord, *EntryError) {
	rec := entryRecord{uri: u, body: e.Body}
	if len(e.Body) > MaxBlobSize {
		return rec, &EntryError{Reason: fmt.Sprintf("content larger than %d bytes", MaxBlobSize)}
	}
	var resourceType, category, mt string
	if u.Scheme == SchemeFHIR {
		if e.MIMEType != "" && e.MIMEType != MIMEFHIR {
			return rec, &EntryError{Reason: "mime type of a FHIR resource must be " + MIMEFHIR}
		}
		if !utf8.Valid(e.Body) {
			return rec, &EntryError{Reason: "FHIR JSON is not valid utf-8"}
		}
		var h fhirHead
		if err := json.Unmarshal(e.Body, &h); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return rec, &EntryError{Reason: fmt.Sprintf("FHIR JSON is not valid json (byte %d)", se.Offset)}
			}
			return rec, &EntryError{Reason: "FHIR JSON is not a resource object"}
		}
		if h.ResourceType != e.Type {
			return rec, &EntryError{Reason: "resourceType does not match the entry's type"}
		}
		resourceType, category, mt = h.ResourceType, categoryCode(h.Category), MIMEFHIR
	} else {
		var reason string
		if mt, reason = checkAttachment(e.MIMEType, e.Body); reason != "" {
			return rec, &EntryError{Path: attachmentPath(e), Reason: reason, Err: ErrAttachment}
		}
	}
	sens, err := normalizeSet(e.Sensitivity, knownSensitivity)
	if err != nil {
		return rec, &EntryError{Reason: "sensitivity: " + err.Error()}
	}
	cons, err := normalizeSet(e.Consent, knownConsent)
	if err != nil {
		return rec, &EntryError{Reason: "consent: " + err.Error()}
	}
	patient := e.Patient
	if e.Type == "Patient" {
		patient = e.ID
	}
	name, title, desc := entryTexts(u, resourceType, category, e.Carrier.Type, mt)
	rec.res = Resource{
		URI: u.String(), Name: name, Title: title, Description: desc, MIMEType: mt,
		Size:        int64(len(e.Body)),
		Annotations: Annotations{LastModified: e.LastUpdated.UTC()},
		Labels:      Labels{Tenant: u.Tenant, Patient: patient, Type: u.Type, Sensitivity: sens, Consent: cons},
		Source:      source,
	}
	return rec, nil
}

// CheckAttachment checks an attachment's declared media type against its
// bytes and returns the type to store, normalized by mime.FormatMediaType.
// A refusal wraps ErrAttachment and says what is wrong without quoting the
// bytes. Pure: no I/O. The rules, with detection by
// github.com/gabriel-vasile/mimetype (the library fhirin checks attachments
// with, so that what the FHIR reader accepts the store accepts):
//   - application/octet-stream holds any bytes (it is served as such);
//   - bytes detected as a signed type (PDF, PNG, JPEG, GIF, or a type
//     descending from one) must be declared as the detected type or one it
//     descends from; a declared signed type must be detected;
//   - text/* must be UTF-8: a charset of utf-8 or us-ascii, or none, and
//     valid UTF-8 bytes (fhirin transcodes ISO-8859-1 and windows-1252);
//   - application/json and types ending in +json must be valid JSON.
func CheckAttachment(declared string, data []byte) (string, error) {
	mt, reason := checkAttachment(declared, data)
	if reason != "" {
		return "", fmt.Errorf("%w: %s", ErrAttachment, reason)
	}
	return mt, nil
}

// ServedMediaType is the media type an attachment is stored and served
// under, from the declared type's parsed form (mime.ParseMediaType): mt
// with a charset parameter only, and only when its value is a registered
// charset name (golang.org/x/text/encoding/ianaindex). Every other
// parameter is dropped: its value is the input's, and the type is shown
// in every list's title, description and mimeType, where custos puts no
// content; MIME's name and filename parameters hold a file name, often the
// patient's ("application/pdf; name=Evelyn_Marsh_HIV_result.pdf" was
// listed so until probe-import3). The fhirin reader gives its items the
// same type. Pure.
func ServedMediaType(mt string, params map[string]string) string {
	var keep map[string]string
	if cs, ok := params["charset"]; ok {
		if _, err := ianaindex.IANA.Encoding(cs); err == nil {
			keep = map[string]string{"charset": cs}
		}
	}
	if norm := mime.FormatMediaType(mt, keep); norm != "" {
		return norm
	}
	return mt
}

// signedTypes are the media types recognized by a signature (checkAttachment).
var signedTypes = []string{MIMEPDF, MIMEPNG, "image/jpeg", "image/gif"}

// checkAttachment is CheckAttachment returning the reason of a refusal
// (starting "attachment ") rather than an error.
func checkAttachment(declared string, data []byte) (string, string) {
	if declared == "" {
		return "", "attachment has no mime type"
	}
	mt, params, err := mime.ParseMediaType(declared)
	if err != nil {
		return "", "attachment mime type is not a media type"
	}
	norm := ServedMediaType(mt, params)
	if mt == "application/octet-stream" {
		return norm, ""
	}
	detected := mimetype.Detect(data)
	signed, declaredIsAncestor := "", false
	for m := detected; m != nil; m = m.Parent() {
		declaredIsAncestor = declaredIsAncestor || m.Is(mt)
		for _, st := range signedTypes {
			if signed == "" && m.Is(st) {
				signed = st
			}
		}
	}
	// The declared type is named only when the library knows it: any token
	// pair parses as a media type, and this one is the input's.
	named := mt
	if mimetype.Lookup(mt) == nil {
		named = "the declared mime type (one custos does not know)"
	}
	switch {
	case slices.Contains(signedTypes, mt) && !declaredIsAncestor:
		return "", "attachment bytes are not " + mt
	case signed != "" && !declaredIsAncestor:
		return "", "attachment bytes are " + signed + ", not " + named
	case strings.HasPrefix(mt, "text/"):
		if cs := strings.ToLower(params["charset"]); cs != "" && cs != "utf-8" && cs != "us-ascii" {
			return "", "attachment text charset is not utf-8"
		}
		if !utf8.Valid(data) {
			return "", "attachment text is not valid utf-8"
		}
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if !json.Valid(data) {
			return "", "attachment is not valid json"
		}
	}
	return norm, ""
}
