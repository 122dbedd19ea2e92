package fhirin

import (
	"encoding/base64"
	"mime"
	"slices"
	"strings"
	"time"

	"github.com/gabriel-vasile/mimetype"
)

// liftAttachments replaces every liftable attachment of r (in r.m) by a
// link: inline data becomes an Attachment item of its own, a url to a
// Binary of the import becomes the Binary's link. It returns the new items.
func (rd *reader) liftAttachments(r *resource, patient string, labels []string, updated time.Time) ([]Item, error) {
	var out []Item
	err := r.eachAttachment(func(att map[string]any, path string) error {
		if _, hasData := att["data"]; hasData {
			data, mt, err := r.attachmentData(att, path, "contentType")
			if err != nil {
				return err
			}
			rel := strings.TrimPrefix(path, r.typ+".")
			id := r.typ + "/" + r.id + "/" + rel
			delete(att, "data")
			att["url"] = rd.opts.Link(TypeAttachment, id, patient)
			r.modified = true
			out = append(out, Item{Type: TypeAttachment, ID: id, Patient: patient, Body: data, MIMEType: mt,
				Sensitivity: slices.Clone(labels), Consent: rd.idx.consent(patient), LastUpdated: updated,
				Carrier: Carrier{r.typ, r.id}, Where: r.where})
			return nil
		}
		binID, ok, err := r.binaryURL(att, path)
		if err != nil || !ok {
			return err
		}
		att["url"] = rd.opts.Link("Binary", binID, rd.idx.binary(binID).patient)
		r.modified = true
		return nil
	})
	return out, err
}

// emitBinary yields a Binary as its decoded bytes, in the compartment and
// with the labels the first pass found for it.
func (rd *reader) emitBinary(r *resource, labels []string, updated time.Time) error {
	data, mt, err := r.attachmentData(r.m, "Binary", "contentType")
	if err != nil {
		return err
	}
	b := rd.idx.binary(r.id)
	return rd.emitItem(Item{Type: "Binary", ID: r.id, Patient: b.patient, Body: data, MIMEType: mt,
		Sensitivity: union(labels, b.labels), Consent: rd.idx.consent(b.patient), LastUpdated: updated,
		Carrier: b.carrier, Where: r.where})
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
	mt, err := checkMIME(ct, data)
	if err != nil {
		return nil, "", r.errf(path+"."+ctField, ErrAttachment, "%v", err)
	}
	return data, mt, nil
}

// decodeBase64 decodes FHIR base64Binary, which may hold whitespace.
func decodeBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, " \t\r\n") {
		s = strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
				return -1
			}
			return r
		}, s)
	}
	return base64.StdEncoding.DecodeString(s)
}

// mimeError is a contradiction between declared and detected types; both
// are media type names (the declared one parsed, so it is a token pair),
// never content.
type mimeError struct{ declared, detected string }

func (e *mimeError) Error() string {
	return "the bytes are " + e.detected + ", not " + e.declared
}

// checkMIME checks the bytes against a declared contentType with
// github.com/gabriel-vasile/mimetype's detection, and returns the declared
// type normalized (lowercase, parameters kept). The bytes contradict it
// when:
//   - the declared type is one the library knows, and the detected type is
//     neither it nor a descendant of it (text/html and text/csv descend from
//     text/plain; everything descends from application/octet-stream);
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
	norm := mime.FormatMediaType(mt, params)
	if norm == "" {
		norm = mt
	}
	got := mimetype.Detect(data)
	isText := false
	for m := got; m != nil; m = m.Parent() {
		if m.Is(mt) {
			return norm, nil
		}
		isText = isText || m.Is("text/plain")
	}
	if mimetype.Lookup(mt) == nil {
		switch {
		case strings.HasPrefix(mt, "text/") && isText:
			return norm, nil
		case !strings.HasPrefix(mt, "text/") && (got.Is("application/octet-stream") || isText):
			return norm, nil
		}
	}
	detected, _, _ := strings.Cut(got.String(), ";")
	return "", &mimeError{declared: mt, detected: detected}
}

type constError string

func (e constError) Error() string { return string(e) }

const errBadMediaType = constError("not a media type")
