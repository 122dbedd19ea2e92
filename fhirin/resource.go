package fhirin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-mcp/custos/internal/fhirr4"
	"github.com/custos-mcp/custos/internal/jsonkeys"
	"github.com/custos-mcp/custos/store"
)

// resource is one resource being read.
type resource struct {
	where    string
	entry    string // its Bundle entry's name (entry.name), for Error.Entry
	typ, id  string
	m        map[string]any
	raw      []byte
	modified bool // m differs from raw
	// base is the server base of its Bundle entry's RESTful fullUrl
	// ("https://ehr.example/fhir"), else that of its source (an $export
	// manifest's request); "" when neither is known.
	base string
	// entries holds the absolute RESTful references kept as written that
	// name an entry of its Bundle.
	entries map[string]bool
}

func (r *resource) errf(path string, sentinel error, format string, args ...any) error {
	e := newError(r.where, path, sentinel, format, args...)
	e.Entry = r.entry
	return e
}

// unit reads one top-level JSON value: a resource or a Bundle; checked,
// raw is one a json.Decoder decoded (a JSON file's), else it may be
// anything (an NDJSON line).
func (rd *reader) unit(s *source, line int, raw []byte, checked bool) error {
	var h head
	var headErr error
	if s.wantType == "" || s.wantType == "Bundle" {
		h, headErr = bundleReading.head(raw, checked, false)
	}
	if s.wantType == "" {
		bundle := headErr == nil && h.typ == "Bundle" // a value that does not decode is not: the phase of resources reports it
		if !rd.kindsKnown {
			if rd.kinds == nil {
				rd.kinds = map[string]uint8{}
			}
			rd.kinds[s.path] |= unitKind(bundle)
		}
		if bundle != rd.bundlePhase {
			// The other phase's (reader.pass); for firstPassOfBundles, a
			// resource outside a Bundle: it is collectSearches from here.
			rd.scan = rd.scan || rd.sweep
			return nil
		}
	}
	if rd.scan {
		return rd.scanBundle(s, line, raw)
	}
	w := where(s, line)
	if rd.emit { // once: the first pass reads only some of the input
		if off := invalidUTF8(raw); off >= 0 {
			return newError(where(s, line+bytes.Count(raw[:off], []byte{'\n'})), "", ErrJSON,
				"not UTF-8: FHIR JSON is UTF-8 (RFC 8259 section 8.1; a decoder would turn these bytes into U+FFFD), so transcode the file (from ISO-8859-1 or windows-1252, say) before importing it")
		}
		if off := loneSurrogate(raw); off >= 0 {
			return newError(where(s, line+bytes.Count(raw[:off], []byte{'\n'})), "", ErrJSON,
				"a \\u escape of a lone UTF-16 surrogate (not half of a pair): it is no Unicode character, and a decoder would turn it into U+FFFD; FHIR strings hold Unicode characters")
		}
		if off := jsonkeys.Duplicate(raw); off >= 0 {
			return newError(where(s, line+bytes.Count(raw[:off], []byte{'\n'})), "", ErrJSON,
				"an object names one member twice (or two differing only in case): FHIR JSON names each element once, and parsers disagree on which one counts")
		}
	}
	typ := s.wantType
	if typ == "" || typ == "Bundle" {
		if headErr != nil {
			return jsonErr(w, raw, headErr)
		}
		typ = h.typ
		if typ == "" && sniff(bytes.NewReader(raw)) == FormatExportManifest {
			// Read as a resource in a directory: name it for what it is.
			return newError(w, "", ErrFormat, "an $export manifest, not a resource: import the manifest itself (it lists the export's files and names its server), not its directory")
		}
		if s.wantType == "Bundle" && typ != "Bundle" {
			return newError(w, "", ErrResourceType, "a Bundle file holds only Bundles")
		}
	}
	if typ == "Bundle" {
		return rd.readBundle(s, line, raw)
	}
	if rd.skim() && !indexedTypes[typ] && !mayNameBinary(raw) {
		rd.rememberHead(typ, raw)
		return nil
	}
	return rd.resource(s, w, raw, s.wantType, nil, nil)
}

// structureErrs is the sentinel of each kind of fhirr4.Check's problems:
// a wrong JSON kind is malformed JSON, and a bad primitive an invalid
// value, as the reader's own checks had them before fhirr4.
var structureErrs = map[fhirr4.Kind]error{
	fhirr4.Unknown:  ErrStructure,
	fhirr4.JSONKind: ErrJSON,
	fhirr4.Format:   ErrValue,
	fhirr4.Required: ErrStructure,
}

// structureError is the error of a resource's problems, ps (fhirr4.Check):
// the first, with the count of the others.
func structureError(w, entry string, ps []fhirr4.Problem) *Error {
	more := ""
	if len(ps) > 1 {
		more = " (and " + itoa(len(ps)-1) + " more problems in this resource)"
	}
	e := newError(w, ps[0].Path, structureErrs[ps[0].Kind], "%s%s", ps[0].What, more)
	e.Entry = entry
	return e
}

// unitKind is what reader.kinds notes of a file holding a Bundle
// (bundle) or a resource outside one.
func unitKind(bundle bool) uint8 {
	if bundle {
		return 2
	}
	return 1
}

// maxJSONDepth is encoding/json's nesting limit: a deeper value is a
// SyntaxError of its own (tooDeep), though it is well-formed JSON.
const maxJSONDepth = 10000

// tooDeep reports whether a syntax error is encoding/json's nesting limit
// ("invalid character '[' exceeded max depth"); it was reported as invalid
// JSON. The caller's message quotes none of it.
func tooDeep(se *json.SyntaxError) bool { return strings.HasSuffix(se.Error(), "exceeded max depth") }

// jsonErr classifies a JSON decoding error of one value without quoting it.
func jsonErr(w string, raw []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &se) && se.Offset >= int64(len(raw)):
		return newError(w, "", ErrTruncated, "the line ends inside a JSON value")
	case errors.As(err, &se) && tooDeep(se):
		return newError(w, "", ErrJSON, "nested deeper than %d levels near byte %d (no FHIR resource is)", maxJSONDepth, se.Offset)
	case errors.As(err, &se):
		return newError(w, "", ErrJSON, "invalid JSON near byte %d", se.Offset)
	case errors.As(err, &te):
		if te.Field == "" {
			return newError(w, "", ErrJSON, "not a JSON object")
		}
		return newError(w, te.Field, ErrJSON, "not a %s", te.Type.String())
	}
	return newError(w, "", ErrJSON, "undecodable")
}

// resource reads one resource (outside a Bundle: b and e nil); a Bundle
// entry without resource.id gets e.id (its urn:uuid).
func (rd *reader) resource(s *source, w string, raw []byte, wantType string, b *bundle, e *entry) error {
	r := &resource{where: w, raw: raw, base: s.base}
	idFallback := ""
	if e != nil {
		r.entry = e.name
		idFallback = e.id
		if b := restBase(e.FullURL); b != "" {
			r.base = b
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // decimals keep their written precision
	if err := dec.Decode(&r.m); err != nil {
		return jsonErr(w, raw, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		// A second value after the resource (two on one NDJSON line) would
		// be dropped where the body is re-encoded from the first.
		return newError(w, "", ErrJSON, "more than one JSON value: an NDJSON line holds one resource")
	}
	if r.m == nil {
		return newError(w, "", ErrJSON, "not a JSON object")
	}
	typ, _ := r.m["resourceType"].(string)
	switch {
	case typ == "":
		return r.errf("resourceType", ErrResourceType, "missing")
	case typ == "Parameters":
		// An R4 type all the same: "not an R4 resource type" sent the
		// operator looking for a typo ($member-match's input, an
		// $everything's output wrapped so, are Parameters).
		return r.errf("resourceType", ErrUnsupported, "Parameters is an operation's input or output, which a FHIR server never stores: import the resources it holds on their own")
	case !r4Types[typ]:
		return r.errf("resourceType", ErrResourceType, "not an R4 resource type")
	case wantType != "" && typ != wantType:
		return r.errf("resourceType", ErrResourceType, "a %s file holds only %s resources, not %s", wantType, wantType, typ)
	case typ == "Bundle":
		return r.errf("Bundle", ErrUnsupported, "a Bundle inside a Bundle is not imported")
	}
	r.typ = typ
	id, _ := r.m["id"].(string)
	if e != nil && e.matched && id != e.id {
		if id != "" && !e.kept {
			// R5 http.html#cond-update, "One Match, resource id provided
			// but does not match resource found": 400 Bad Request. It
			// took the match's id without a word before. (A create's
			// body id is the server's to replace.)
			return r.errf(e.condPath, ErrValue, "the conditional update found one resource of the catalog, and the resource's id is another (FHIR 400 Bad Request): give the id found, or none")
		}
		// Its conditional update or create matched the resource of the
		// catalog with this id: the entry is that resource
		// (resolveConditionals).
		id = e.id
		r.m["id"] = id
		r.modified = true
	}
	if id == "" && idFallback != "" {
		id = idFallback
		r.m["id"] = id
		r.modified = true
	}
	if !validID(id) {
		return r.errf(typ+".id", ErrID, "missing or not [A-Za-z0-9.-]{1,64}")
	}
	if rd.emit { // once: the first pass reads only some of the input
		if ps := fhirr4.Check(r.m); len(ps) > 0 {
			return structureError(r.where, r.entry, ps)
		}
	}
	r.id = id
	if err := r.subsetted(); err != nil {
		return err
	}
	if b != nil || bytes.Contains(raw, []byte("urn:uuid:")) {
		if err := r.rewriteRefs(b); err != nil {
			return err
		}
	}
	patient, err := r.compartment()
	if err != nil {
		return err
	}
	if e != nil {
		e.patient, e.placed = patient, true
	} else {
		rd.rememberResource(typ, id, r.m, r.raw, patient, true)
	}
	if e != nil && e.matched && !e.unplaced && patient != e.matchedPatient {
		// Taking the match's id would retire it from its patient's
		// compartment and write this entry's content in another's
		// (store: a resource whose patient changed moves): a search by
		// identifier does not say the two are one record.
		return r.errf(e.condPath, ErrCompartment, "the conditional update or create matched a resource of the catalog in another patient compartment than its resource's (or in none): a conditional match does not move a resource between patients")
	}
	if e != nil && e.kept {
		// A conditional create whose match exists: the catalog's resource
		// stays as it is, and this content counts for nothing (labels,
		// links, attachments). The match is checked above to be in the
		// compartment this content names.
		switch {
		case rd.ctxPass:
			// A Binary's securityContext naming it takes its compartment
			// and its labels in the catalog, as for any live resource
			// the import lacks (ctxStored), whose answer in a full
			// import (retired) does not hold for a kept one.
			rd.idx.ctxKept(typ+"/"+id, patient, normalize(e.matchedLabels))
		case rd.emit:
			return rd.emitItem(Item{Type: typ, ID: id, Patient: patient, Where: w, Kept: true})
		}
		return nil
	}
	labels, err := r.labels(b)
	if err != nil {
		return err
	}
	updated, err := r.lastUpdated()
	if err != nil {
		return err
	}

	if rd.ctxPass {
		rd.ctxDecoded++
		rd.idx.ctxTarget(r, patient, labels)
		return nil
	}
	if !rd.emit {
		return rd.indexResource(r, patient, labels)
	}
	var noOverwrite string
	if e != nil {
		noOverwrite = e.noOverwrite
	}
	if typ == "Binary" {
		return rd.emitBinary(r, labels, updated, noOverwrite)
	}
	linked, links, err := rd.linkedLabels(r, patient)
	if err != nil {
		return err
	}
	if len(linked) > 0 {
		labels = union(labels, linked)
	}
	atts, err := rd.liftAttachments(r, patient, labels, updated)
	if err != nil {
		return err
	}
	body, err := r.body()
	if err != nil {
		return err
	}
	if err := rd.emitItem(Item{Type: typ, ID: id, Patient: patient, Body: body, MIMEType: FHIRJSON,
		Sensitivity: labels, Consent: rd.idx.consent(patient), PatientWide: rd.idx.patientWide(patient), OptOut: typ == "Consent" && patient != "" && store.ConsentOptsOut(r.m),
		LastUpdated: updated, Where: w, Links: links, NoOverwrite: noOverwrite}); err != nil {
		return err
	}
	for _, a := range atts {
		// A lifted attachment is the resource's content too: its
		// carrier's body names it by a link that does not change with
		// it, so the store's 409 must compare it (until 2026-12-06 a
		// conditional create that matched nothing replaced the note of
		// a live DocumentReference of its id).
		a.NoOverwrite = noOverwrite
		if err := rd.emitItem(a); err != nil {
			return err
		}
	}
	return nil
}

// body is the resource's JSON: the input compacted, or m re-encoded (keys
// sorted, no HTML escaping, numbers as written) when it was changed.
func (r *resource) body() ([]byte, error) {
	var buf bytes.Buffer
	if !r.modified {
		buf.Grow(len(r.raw))
		if err := json.Compact(&buf, r.raw); err != nil {
			return nil, r.errf("", ErrJSON, "not compactable")
		}
		return buf.Bytes(), nil
	}
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r.m); err != nil {
		return nil, r.errf("", ErrJSON, "not re-encodable")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// subsetted refuses a resource tagged SUBSETTED (v3 ObservationValue, in
// meta.tag; in any system, or in meta.security, to fail closed): an
// export or search with _elements or _summary left elements out, and R4
// marks it so "that the incomplete resource is not accidentally used to
// overwrite a complete resource" (search, _summary and _elements);
// imported, it replaced the complete version in the catalog.
func (r *resource) subsetted() error {
	meta, _ := r.m["meta"].(map[string]any)
	for _, el := range []string{"tag", "security"} {
		arr, _ := meta[el].([]any)
		for i, v := range arr {
			if c, _ := v.(map[string]any); c["code"] == "SUBSETTED" {
				return r.errf(r.typ+".meta."+el+"["+itoa(i)+"]", ErrValue, "a subsetted resource (exported or searched with _elements or _summary) is not the whole resource, and must not overwrite it: import the complete resource")
			}
		}
	}
	return nil
}

// lastUpdated is meta.lastUpdated, which must be a FHIR instant if present.
func (r *resource) lastUpdated() (time.Time, error) {
	meta, _ := r.m["meta"].(map[string]any)
	v, ok := meta["lastUpdated"]
	if !ok {
		return time.Time{}, nil
	}
	s, _ := v.(string)
	t, err := parseInstant(s)
	if err != nil {
		return time.Time{}, r.errf(r.typ+".meta.lastUpdated", ErrValue, "not a FHIR instant")
	}
	return t.UTC(), nil
}

// parseInstant parses a FHIR instant. R4's regex takes a leap second
// (":60", as in 2016-12-31T23:59:60Z), which time.Parse refuses: it is
// read as the second after it.
func parseInstant(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil && len(s) > 19 && s[16:19] == ":60" {
		if t, err2 := time.Parse(time.RFC3339Nano, s[:17]+"59"+s[19:]); err2 == nil {
			return t.Add(time.Second), nil
		}
	}
	return t, err
}

// labels are the resource's security labels with those of its Bundle: its
// meta.security, and the elements R4 defines as the security labels of the
// resource itself, DocumentReference.securityLabel (CodeableConcepts) and
// Composition.confidentiality (a v3-Confidentiality code). Where they are
// of the wrong JSON type it is an error: a label must not be lost by being
// overlooked. (AuditEvent.entity.securityLabel and
// Consent.provision.securityLabel label other data, not their resource.)
func (r *resource) labels(b *bundle) ([]string, error) {
	var cs []coding
	if err := r.ownLabels(r.m, r.typ, r.typ, &cs); err != nil {
		return nil, err
	}
	// A contained resource is part of its container (R4 "Contained
	// Resources") and is served with it: its labels label the container.
	// (compartment has checked that contained is an array of objects.)
	arr, _ := r.m["contained"].([]any)
	for i, v := range arr {
		o, _ := v.(map[string]any)
		typ, _ := o["resourceType"].(string)
		if err := r.ownLabels(o, typ, r.typ+".contained["+itoa(i)+"]", &cs); err != nil {
			return nil, err
		}
	}
	l := labelsOf(cs)
	if b != nil && len(b.labels) > 0 {
		l = union(l, b.labels)
	}
	return l, nil
}

// ownLabels appends the security label Codings of m, a resource of type
// typ at FHIR path path: its meta.security, DocumentReference.securityLabel,
// Composition.confidentiality, and, for a Location that is a patient's home
// (residenceLocation), LabelSystem's residence.
func (r *resource) ownLabels(m map[string]any, typ, path string, cs *[]coding) error {
	if meta := m["meta"]; meta != nil {
		mm, ok := meta.(map[string]any)
		if !ok {
			return r.errf(path+".meta", ErrJSON, "not a JSON object")
		}
		if err := r.codings(mm["security"], path+".meta.security", cs); err != nil {
			return err
		}
	}
	switch typ {
	case "Location":
		// A patient's home is not reference data, whether it is served
		// alone or inside its container.
		home, err := r.residenceLocation(m, path)
		if err != nil {
			return err
		}
		if home {
			*cs = append(*cs, coding{LabelSystem, ResidenceLabel})
		}
	case "DocumentReference":
		if v, ok := m["securityLabel"]; ok {
			arr, ok := v.([]any)
			if !ok {
				return r.errf(path+".securityLabel", ErrJSON, "not an array")
			}
			for i, cc := range arr {
				p := path + ".securityLabel[" + itoa(i) + "]"
				o, ok := cc.(map[string]any)
				if !ok {
					return r.errf(p, ErrJSON, "not a CodeableConcept")
				}
				if err := r.codings(o["coding"], p+".coding", cs); err != nil {
					return err
				}
			}
		}
	case "Composition":
		if v, ok := m["confidentiality"]; ok {
			code, ok := v.(string)
			if !ok {
				return r.errf(path+".confidentiality", ErrJSON, "not a code")
			}
			*cs = append(*cs, coding{confidentialitySystems[0], code})
		}
	}
	return nil
}

// codings appends the Codings of v, an array found at path (nil: absent).
func (r *resource) codings(v any, path string, cs *[]coding) error {
	if v == nil {
		return nil
	}
	arr, ok := v.([]any)
	if !ok {
		return r.errf(path, ErrJSON, "not an array")
	}
	for i, c := range arr {
		o, ok := c.(map[string]any)
		sys, ok1 := o["system"].(string)
		code, ok2 := o["code"].(string)
		if !ok || (!ok1 && o["system"] != nil) || (!ok2 && o["code"] != nil) {
			return r.errf(path+"["+itoa(i)+"]", ErrJSON, "not a Coding")
		}
		*cs = append(*cs, coding{sys, code})
	}
	return nil
}

// union returns the sorted set union of two sorted sets.
func union(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// emitItem yields an item, unless a problem has been found: then the
// import fails, and the caller gets nothing more to stage.
func (rd *reader) emitItem(it Item) error {
	if len(rd.problems) > 0 {
		return nil
	}
	rd.items++
	return rd.yield(it)
}

// invalidUTF8 returns the offset of the first byte of b that is not part
// of valid UTF-8, or -1.
func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// loneSurrogate returns the offset in raw of the first \u escape of a
// UTF-16 surrogate that is not half of a pair (a high surrogate escape
// followed at once by a low one's), or -1. Such an escape is no Unicode
// character, and encoding/json decodes it to U+FFFD: a body the reader
// re-encodes (a Bundle entry whose references it resolved) lost it
// silently, while the same resource stored as written kept it. raw is a
// JSON value: a backslash occurs only inside a string, where `\\` is an
// escaped backslash. Pure.
func loneSurrogate(raw []byte) int {
	for i := bytes.IndexByte(raw, '\\'); i >= 0 && i < len(raw); {
		if i+1 >= len(raw) {
			return -1
		}
		if raw[i+1] != 'u' {
			i += 2 // \\ \" \n ...: the escaped character is not a backslash that starts an escape
		} else {
			c, ok := hex4(raw[i+2:])
			switch {
			case !ok || c < 0xd800 || c > 0xdfff:
				i += 2
			case c >= 0xdc00: // a low surrogate with no high one before it
				return i
			default: // a high surrogate: a low one's escape must follow
				if len(raw) < i+12 || raw[i+6] != '\\' || raw[i+7] != 'u' {
					return i
				}
				if d, ok := hex4(raw[i+8:]); !ok || d < 0xdc00 || d > 0xdfff {
					return i
				}
				i += 12
			}
		}
		j := bytes.IndexByte(raw[i:], '\\')
		if j < 0 {
			return -1
		}
		i += j
	}
	return -1
}

// hex4 reads four hexadecimal digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
