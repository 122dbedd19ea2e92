package fhirin

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"io"
	"maps"
	"mime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gabriel-vasile/mimetype"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/ianaindex"

	"github.com/custos-mcp/custos/store"
)

// liftAttachments replaces every liftable attachment of r (in r.m) by a
// link: inline data becomes an Attachment item of its own, a url to a
// Binary of the import becomes the Binary's link. It returns the new items.
//
// An attachment with both data and a url naming a Binary (R4: "the url
// SHALL point to the same content as the data contains") keeps the url,
// as the Binary's link: the Binary is the source's resource for that
// content, with its own labels and securityContext, and the carrier links
// it when the import or the catalog holds it (index.linkData; else the url
// becomes the Attachment's link, as for data alone: the data is the
// content). The data is lifted all the same, checked and served as an
// Attachment item. Before, the url was always overwritten by the
// Attachment's link: the carrier no longer named its Binary, which then
// had no compartment (ErrCompartment: "no resource of the import links").
func (rd *reader) liftAttachments(r *resource, patient string, labels []string, updated time.Time) ([]Item, error) {
	var out []Item
	err := r.eachAttachment(func(att map[string]any, path string) error {
		binID, isBinary, err := r.binaryURL(att, path)
		if err != nil {
			return err
		}
		_, hasData := att["data"]
		if isBinary && hasData && !rd.idx.linksBinary(binID, patient) {
			isBinary = false // neither in the import nor in the catalog: the data is the content (index.linkData)
		}
		if isBinary {
			att["url"] = rd.opts.Link("Binary", binID, rd.idx.binary(binID).patient)
			r.modified = true
		}
		if hasData {
			data, mt, err := r.attachmentData(att, path, "contentType")
			if err != nil {
				return err
			}
			rel := strings.TrimPrefix(path, r.typ+".")
			id := r.typ + "/" + r.id + "/" + rel
			delete(att, "data")
			if !isBinary {
				att["url"] = rd.opts.Link(TypeAttachment, id, patient)
			}
			r.modified = true
			out = append(out, Item{Type: TypeAttachment, ID: id, Patient: patient, Body: data, MIMEType: mt,
				Sensitivity: slices.Clone(labels), Consent: rd.idx.consent(patient), PatientWide: rd.idx.patientWide(patient), LastUpdated: updated,
				Carrier: Carrier{r.typ, r.id}, Where: r.where})
		}
		return nil
	})
	return out, err
}

// linkedLabels are the labels of the component (index.settle) of every
// Binary r links or mentions (mentionedBinaries: the lifted links are
// urls too), found by the first pass, and those Binaries' ids (Item.Links).
// They label r too: its body names each Binary's URI and describes the
// document (type, title, contentType), so a caller kept from an
// HIV-labelled Binary must not read the unlabelled DocumentReference that
// points at it. A Binary the first pass did not see named here (it
// should have) is looked up as before components (mentionedLabels). The
// error is Options.StoredBinary's.
func (rd *reader) linkedLabels(r *resource, patient string) ([]string, []string, error) {
	var out []string
	ids := r.mentionedBinaries()
	for _, id := range ids {
		labels, ok := rd.idx.comp(patient, id)
		if !ok {
			var err error
			if labels, err = rd.mentionedLabels(id, patient); err != nil {
				return nil, nil, err
			}
		}
		out = union(out, labels)
	}
	return out, ids, nil
}

// mentionedLabels are the labels of a Binary a resource of patient's
// compartment names that the first pass did not see named there: those
// of the Binary of the import (present or stored), or else, with
// Options.StoredBinary, those of its live version in the catalog in the
// resource's compartment. Each (id, patient) is asked once.
func (rd *reader) mentionedLabels(id, patient string) ([]string, error) {
	if b := rd.idx.binaries[id]; b != nil && (b.present || b.stored) {
		labels, _ := rd.idx.comp(b.patient, id)
		return union(b.all(), labels), nil
	}
	if rd.opts.StoredBinary == nil {
		return nil, nil
	}
	key := patient + "\x00" + id
	if labels, ok := rd.mentioned[key]; ok {
		return labels, nil
	}
	labels, live, err := rd.opts.StoredBinary(id, patient)
	if err != nil {
		return nil, err
	}
	if !live {
		labels = nil
	}
	if rd.mentioned == nil {
		rd.mentioned = map[string][]string{}
	}
	rd.mentioned[key] = normalize(labels)
	return rd.mentioned[key], nil
}

// emitBinary yields a Binary as its decoded bytes, in the compartment and
// with the labels the first pass found for it: its own, those of every
// resource of the import linking it and, when none links it or the input
// is not Complete, those of its live version in the catalog
// (Options.StoredBinary). noOverwrite is Item.NoOverwrite.
func (rd *reader) emitBinary(r *resource, labels []string, updated time.Time, noOverwrite string) error {
	data, mt, err := r.attachmentData(r.m, "Binary", "contentType")
	if err != nil {
		return err
	}
	b := rd.idx.binary(r.id)
	comp, _ := rd.idx.comp(b.patient, r.id)
	return rd.emitItem(Item{Type: "Binary", ID: r.id, Patient: b.patient, Body: data, MIMEType: mt,
		Sensitivity: union(union(union(labels, b.labels), b.storedLabels), comp), Consent: rd.idx.consent(b.patient), PatientWide: rd.idx.patientWide(b.patient), LastUpdated: updated,
		Carrier: b.carrier, Where: r.where, NoOverwrite: noOverwrite})
}

// attachmentData decodes obj.data (base64) and checks it against
// obj[ctField] (a MIME type, required with data). It returns the bytes and
// the normalized MIME type. An Attachment's size and hash are kept as
// written and not checked: sources fill them carelessly (a placeholder
// hash, a size off by a newline), and neither decides how the bytes are
// served, which the contentType does.
func (r *resource) attachmentData(obj map[string]any, path, ctField string) ([]byte, string, error) {
	s, ok := obj["data"].(string)
	if !ok {
		return nil, "", r.errf(path+".data", ErrAttachment, "missing or not a string")
	}
	data, err := decodeBase64(s)
	if err != nil {
		return nil, "", r.errf(path+".data", ErrAttachment, "not valid base64")
	}
	ct, _ := obj[ctField].(string)
	if ct == "" {
		return nil, "", r.errf(path+"."+ctField, ErrAttachment, "required when data is present")
	}
	data, mt, err := attachmentBytes(ct, data)
	if err != nil {
		return nil, "", r.errf(path+"."+ctField, ErrAttachment, "%v", err)
	}
	return data, mt, nil
}

// attachmentBytes checks attachment bytes against their declared
// contentType and returns the bytes and media type to store: text in
// ISO-8859-1 or windows-1252 transcoded to UTF-8 (textToUTF8), an RTF
// that would be rewritten or refused so kept as it is under
// application/rtf (keptRTF), then checked by checkMIME. What it accepts,
// the store accepts (store.CheckAttachment; TestAttachmentAgreesWithStore).
func attachmentBytes(declared string, data []byte) ([]byte, string, error) {
	text, out, err := textToUTF8(declared, data)
	if (err != nil || !bytes.Equal(out, data)) && keptRTF(declared, data) {
		text, out, err = "application/rtf", data, nil
	}
	if err != nil {
		return nil, "", err
	}
	mt, err := checkMIME(text, out)
	if err != nil {
		return nil, "", err
	}
	return out, mt, nil
}

// keptRTF reports whether an attachment declared declared, whose bytes
// textToUTF8 refuses or would rewrite, is an RTF document stored with its
// bytes as they are, under application/rtf: text/rtf whose bytes are RTF
// (isRTF). RTF is 7-bit text whose 8-bit bytes are characters of the
// code page the document declares in-band (RTF 1.9.1, "Character Set":
// \ansicpgN; a byte >= 0x80 means the same as its escape \'hh), not of
// a MIME charset: transcoding it would make an RTF reader render each
// byte of a UTF-8 sequence as a character of that code page ("M\xfcller"
// under \ansicpg1252 is Müller; transcoded, MÃ¼ller), and the store
// keeps text/* as UTF-8 (store.CheckAttachment). application/rtf is the
// same registered type (mimetype's alias of text/rtf), and a type that is
// not text/* is stored and served as its bytes: the content digest is the
// source's bytes' digest, an RTF reader renders the served bytes as it
// renders the source, and minimization treats it as binary (released
// whole or withheld, minimize.IsBinary), never as text.
func keptRTF(declared string, data []byte) bool {
	mt, _, err := mime.ParseMediaType(declared)
	return err == nil && mt == "text/rtf" && isRTF(data)
}

// rtfMediaType reports whether mt names RTF (text/rtf, or its alias
// application/rtf).
func rtfMediaType(mt string) bool { return mt == "text/rtf" || mt == "application/rtf" }

// utf8BOM is the UTF-8 byte order mark.
var utf8BOM = []byte("\xef\xbb\xbf")

// isRTF reports whether data is an RTF document: after an optional UTF-8
// byte order mark and whitespace, it opens with "{\rtf" (RTF 1.9.1: a
// document is the group "{\rtf1 ...}"). github.com/gabriel-vasile/mimetype
// recognizes RTF by the same signature (magic.Rtf), but only at offset 0:
// it read a note after a byte order mark or a line break, as Epic's and
// Oracle Health's exports hold them, as text/plain.
func isRTF(data []byte) bool {
	rest := bytes.TrimLeft(bytes.TrimPrefix(data, utf8BOM), " \t\r\n")
	return bytes.HasPrefix(rest, []byte("{\\rtf"))
}

// textCharsets are the charsets of text attachments textToUTF8 takes, by
// lowercase IANA name and alias; nil means UTF-8 (US-ASCII is a subset).
var textCharsets = map[string]*charmap.Charmap{
	"utf-8":    nil,
	"us-ascii": nil,
	// ISO-8859-1 and its IANA aliases, read as windows-1252: the WHATWG
	// Encoding Standard maps these labels to windows-1252, as every
	// browser (and an HTML note's own <meta>, htmlEncoding) reads them,
	// and text so labelled by EHRs is windows-1252 in practice: 0x80-0x9F
	// are its curly quotes, dashes and euro sign, which ISO-8859-1 would
	// keep as C1 control characters (0x9D is a terminal's OSC). Both agree
	// on every other byte; the five bytes windows-1252 leaves undefined
	// are refused, as under that label.
	"iso-8859-1":      charmap.Windows1252,
	"iso_8859-1":      charmap.Windows1252,
	"iso_8859-1:1987": charmap.Windows1252,
	"iso-ir-100":      charmap.Windows1252,
	"latin1":          charmap.Windows1252,
	"l1":              charmap.Windows1252,
	"ibm819":          charmap.Windows1252,
	"cp819":           charmap.Windows1252,
	"csisolatin1":     charmap.Windows1252,
	// windows-1252, its IANA alias and its common name.
	"windows-1252":  charmap.Windows1252,
	"cswindows1252": charmap.Windows1252,
	"cp1252":        charmap.Windows1252,
}

// textToUTF8 makes a text/* attachment UTF-8, as the store keeps text: a
// declared charset of ISO-8859-1 or windows-1252 (textCharsets: both read as windows-1252) is
// transcoded with golang.org/x/text/encoding/charmap and the charset
// parameter becomes utf-8; UTF-8 and US-ASCII text (or text without a
// charset) must be valid UTF-8. Any other charset is refused, as are bytes
// that are not in the declared charset; nothing is guessed. HTML without a
// charset parameter whose bytes are not UTF-8 is read in the encoding the
// document itself declares (htmlEncoding), as a browser reads it. Other
// types pass unchanged (a parse error is checkMIME's to report).
func textToUTF8(declared string, data []byte) (string, []byte, error) {
	mt, params, err := mime.ParseMediaType(declared)
	if err != nil || !strings.HasPrefix(mt, "text/") {
		return declared, data, nil
	}
	cs, named := params["charset"]
	cm, known := textCharsets[strings.ToLower(cs)]
	switch {
	case named && !known:
		return "", nil, errCharset
	case cm == nil && !utf8.Valid(data) && !named && mt == "text/html":
		if cm, err = htmlEncoding(data); err != nil {
			return "", nil, err
		}
	case cm == nil:
		if !utf8.Valid(data) {
			if !named {
				return "", nil, errNotUTF8Undeclared
			}
			return "", nil, errNotUTF8
		}
		return declared, data, nil
	}
	out, err := cm.NewDecoder().Bytes(data)
	// A byte the charset leaves undefined (windows-1252's 0x81, 0x8D,
	// 0x8F, 0x90, 0x9D) decodes to U+FFFD, which neither charset can
	// encode: the text is not in the declared charset.
	if err != nil || bytes.ContainsRune(out, utf8.RuneError) {
		return "", nil, errNotInCharset
	}
	params = maps.Clone(params)
	params["charset"] = "utf-8"
	return mime.FormatMediaType(mt, params), out, nil
}

// htmlEncoding is the encoding an HTML document that is not UTF-8 declares
// for itself, determined as a browser determines it when the transport
// names none (WHATWG HTML, "Determining the character encoding": a byte
// order mark, then the <meta charset> or <meta http-equiv="Content-Type">
// prescan of the first 1024 bytes), with golang.org/x/net/html/charset,
// whose labels are WHATWG's (ISO-8859-1, latin1 and US-ASCII all name
// windows-1252, as browsers read them). It is windows-1252 or an error:
//   - errNotUTF8Undeclared when the document declares nothing (or a label
//     WHATWG does not know): DetermineEncoding then guesses (UTF-8 or
//     windows-1252, returned as encoding.Nop and charmap.Windows1252
//     themselves, where a declaration is looked up and wrapped), and
//     custos does not guess;
//   - errNotUTF8 when it declares UTF-8 (its bytes are not);
//   - an encodingError naming the encoding (WHATWG's name for it, never the
//     document's words) for any other (UTF-16 by its byte order mark,
//     Shift_JIS, ISO-8859-15, ...).
func htmlEncoding(data []byte) (*charmap.Charmap, error) {
	enc, name, certain := charset.DetermineEncoding(data, "text/html")
	switch {
	case !certain && (enc == encoding.Nop || enc == charmap.Windows1252):
		return nil, errNotUTF8Undeclared
	case name == "utf-8":
		return nil, errNotUTF8
	case name == "windows-1252":
		return charmap.Windows1252, nil
	}
	return nil, encodingError(name)
}

// encodingError is an HTML document's declared encoding that custos does
// not take; it holds WHATWG's name of the encoding (htmlindex), never the
// document's own label.
type encodingError string

func (e encodingError) Error() string {
	return "the HTML declares the encoding " + string(e) + ", which is none of utf-8, windows-1252 (or iso-8859-1, us-ascii, which name it)"
}

// decodeBase64 decodes FHIR base64Binary, which may hold whitespace.
func decodeBase64(s string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(base64Text(s))
}

// ValidBase64 reports whether s is FHIR base64Binary as the reader decodes
// it (decodeBase64), without holding the decoded bytes: what a caller
// that stages attachments for the reader (custos sync) checks them by.
func ValidBase64(s string) bool {
	_, err := io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, strings.NewReader(base64Text(s))))
	return err == nil
}

// base64Text is s without the whitespace FHIR base64Binary may hold.
func base64Text(s string) string {
	if !strings.ContainsAny(s, " \t\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, s)
}

// mimeError is a contradiction between declared and detected types; both
// are media type names, never content: the declared one is named only when
// it is a type the detection library knows (knownMediaType), since any
// token pair parses as a media type ("mrn/12345" is the input's).
type mimeError struct{ declared, detected string }

func (e *mimeError) Error() string {
	return "the bytes are " + e.detected + ", not " + knownMediaType(e.declared)
}

// knownMediaType is mt when github.com/gabriel-vasile/mimetype knows it (a
// registered media type name), and otherwise words that quote nothing of
// the input: a declared contentType is the input's, and was quoted whatever
// it said.
func knownMediaType(mt string) string {
	if mimetype.Lookup(mt) != nil {
		return mt
	}
	return "the declared contentType (a media type custos does not know)"
}

// mediaTypeAliases maps common misspellings of media types to the
// registered type they mean: image/jpg is image/jpeg, which mimetype
// detects by its signature.
var mediaTypeAliases = map[string]string{"image/jpg": "image/jpeg"}

// unlistedMediaTypes are the clinical media types that
// github.com/gabriel-vasile/mimetype does not know and that checkMIME lists
// as declared all the same: FHIR's own (and DSTU2's), HL7 v3 (C-CDA: its
// IANA-registered application/cda+xml among them) and v2 content (ER7 and
// XML), DICOMweb metadata and Markdown. Any other type the library does
// not know is listed as listedMediaType says.
var unlistedMediaTypes = map[string]bool{
	"application/fhir+json": true, "application/fhir+xml": true,
	"application/json+fhir": true, "application/xml+fhir": true,
	"application/cda+xml": true, "application/hl7-v3+xml": true, "application/hl7-cda+xml": true,
	"application/hl7-v2": true, "application/hl7-v2+er7": true, "x-application/hl7-v2+er7": true,
	"application/hl7-v2+xml": true,
	"text/x-hl7-ft":          true,
	"application/dicom+json": true, "application/dicom+xml": true,
	"text/markdown": true,
}

// listedMediaType is the media type the item is listed and served as, for
// a declared type mt (normalized, checked against the bytes) whose
// parameters are params: mt itself when github.com/gabriel-vasile/mimetype
// knows it (a maintained table of registered types) or unlistedMediaTypes
// holds it. Any other type is the input's own words, which a resources/list
// shows before any read is decided (contentType "application/x-evelyn-marsh"
// listed the patient's name): it becomes the type of its kind that the
// bytes agree with, so that minimization treats it as before (minimize
// reads text/* as text and +json as JSON): text/plain for text/*,
// application/json for a +json suffix (RFC 6839), and
// application/octet-stream for anything else or when the bytes do not
// agree with that type.
func listedMediaType(mt string, params map[string]string, data []byte) string {
	if mimetype.Lookup(mt) != nil || unlistedMediaTypes[mt] {
		return store.ServedMediaType(mt, params)
	}
	kind := ""
	switch {
	case strings.HasPrefix(mt, "text/"):
		kind = "text/plain"
	case strings.HasSuffix(mt, "+json"):
		kind = "application/json"
	}
	if kind != "" {
		if norm, err := checkMIME(store.ServedMediaType(kind, params), data); err == nil {
			return norm
		}
	}
	return "application/octet-stream"
}

// checkMIME checks the bytes against a declared contentType with
// github.com/gabriel-vasile/mimetype's detection, and returns the type
// the item is listed as: the declared type normalized (lowercase, an
// alias of mediaTypeAliases replaced, no parameter but a registered
// charset: store.ServedMediaType, so that a file name in a name or
// filename parameter is never listed) when it is a type custos knows,
// else a type of its kind (listedMediaType). The bytes contradict it when:
//   - the declared type is XML (xmlMediaType), the library does not detect
//     the bytes as XML (it needs a leading "<?xml"), and they are not one
//     well-formed XML document (wellFormedXML): until h-outside2 a C-CDA
//     without an XML declaration was refused under application/xml and
//     text/xml, and any text accepted under application/cda+xml;
//   - the declared type is application/json or ends in +json and the
//     bytes are not valid JSON;
//   - the declared type is RTF (text/rtf, application/rtf) and the bytes,
//     after an optional byte order mark and whitespace, do not open with
//     "{\rtf" (isRTF; the library looks only at offset 0);
//   - the declared type is one the library knows, and the detected type is
//     neither it nor a descendant of it (text/html and text/csv descend from
//     text/plain; everything descends from application/octet-stream), except
//     that text/html holds any text (a plain sentence is an HTML body);
//   - the declared type is unknown to the library and text/*, and the bytes
//     are not text;
//   - the declared type is unknown to the library and not text, and the
//     bytes are recognized as some specific type (not octet-stream, not
//     plain text).
func checkMIME(declared string, data []byte) (string, error) {
	mt, params, err := mime.ParseMediaType(declared)
	if err != nil {
		return "", errBadMediaType
	}
	if alias, ok := mediaTypeAliases[mt]; ok {
		mt = alias
	}
	if (mt == "application/json" || strings.HasSuffix(mt, "+json")) && !json.Valid(data) {
		return "", errNotJSON
	}
	got := mimetype.Detect(data)
	if xmlMediaType(mt) && !detectedXML(got) {
		if !wellFormedXML(data) {
			return "", errNotXML
		}
		return listedMediaType(mt, params, data), nil
	}
	isText := false
	for m := got; m != nil; m = m.Parent() {
		if m.Is(mt) {
			return listedMediaType(mt, params, data), nil
		}
		isText = isText || m.Is("text/plain")
	}
	switch {
	case mt == "text/html" && isText:
		// Text without a tag is an HTML document all the same (WHATWG
		// HTML: the parser puts it in the body, as a text node): notes
		// hold a plain sentence under text/html, which the library
		// detects as text/plain (or, with commas on every line, text/csv).
		// Bytes that are not text (a PDF, an executable) are still
		// refused below.
		return listedMediaType(mt, params, data), nil
	case rtfMediaType(mt):
		if isRTF(data) {
			return listedMediaType(mt, params, data), nil
		}
	}
	if mimetype.Lookup(mt) == nil {
		switch {
		case strings.HasPrefix(mt, "text/") && isText:
			return listedMediaType(mt, params, data), nil
		case !strings.HasPrefix(mt, "text/") && (got.Is("application/octet-stream") || isText):
			return listedMediaType(mt, params, data), nil
		}
	}
	detected, _, _ := strings.Cut(got.String(), ";")
	return "", &mimeError{declared: mt, detected: detected}
}

// xmlMediaType reports whether mt names XML: application/xml, text/xml,
// or a type with the +xml suffix (RFC 7303 section 4.2): C-CDA's
// application/cda+xml, application/hl7-v3+xml.
func xmlMediaType(mt string) bool {
	return mt == "application/xml" || mt == "text/xml" || strings.HasSuffix(mt, "+xml")
}

// detectedXML reports whether mimetype detected the bytes as XML (or a
// type descending from it), which it does only by a leading "<?xml".
func detectedXML(got *mimetype.MIME) bool {
	for m := got; m != nil; m = m.Parent() {
		if m.Is("text/xml") {
			return true
		}
	}
	return false
}

// wellFormedXML reports whether data is one well-formed XML document
// (encoding/xml, strict): exactly one root element, nothing but
// whitespace, comments and processing instructions outside it. An XML
// declaration is optional (XML 1.0 section 2.8), and a C-CDA is often
// sent without one, which mimetype then does not detect as XML. A
// declared encoding is read through its IANA name
// (golang.org/x/text/encoding/ianaindex).
func wellFormedXML(data []byte) bool {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.CharsetReader = func(label string, r io.Reader) (io.Reader, error) {
		enc, err := ianaindex.IANA.Encoding(label)
		if err != nil || enc == nil {
			return nil, errNotXML
		}
		return enc.NewDecoder().Reader(r), nil
	}
	roots, depth := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return roots == 1 && depth == 0
		}
		if err != nil {
			return false
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(tok)) > 0 {
				return false
			}
		}
		if roots > 1 {
			return false
		}
	}
}

type constError string

func (e constError) Error() string { return string(e) }

const (
	errBadMediaType      = constError("not a media type")
	errNotJSON           = constError("the bytes are not valid JSON")
	errNotXML            = constError("the bytes are not one well-formed XML document")
	errCharset           = constError("the charset is none of utf-8, us-ascii, iso-8859-1, windows-1252")
	errNotUTF8           = constError("the text is not valid utf-8")
	errNotUTF8Undeclared = constError("the text is not utf-8 and declares no charset (add charset=iso-8859-1 or windows-1252 if it is in one)")
	errNotInCharset      = constError("the text holds bytes its charset does not define")
)
