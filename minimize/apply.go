package minimize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode/utf8"
)

// Apply minimizes one payload of the given MIME type according to obs, in
// order. It dispatches on the media type (parameters such as charset are
// ignored, case does not matter):
//
//   - application/json and any */*+json (e.g. application/fhir+json): [JSON];
//   - text/*: [Text];
//   - anything else, including an unparsable type: binary. With no
//     obligations the payload is returned unchanged (as a copy); with any
//     obligation the result is ErrBinaryWithheld, because binary content is
//     released whole or not at all.
//
// Invalid obligations are reported (see [ValidateAll]) before anything else.
// On error the returned payload is always nil.
func Apply(mimeType string, payload []byte, obs []Obligation, opts Options) ([]byte, error) {
	switch kindOf(mimeType) {
	case kindJSON:
		return JSON(payload, obs, opts)
	case kindText:
		return Text(payload, obs, opts)
	}
	if err := ValidateAll(obs); err != nil {
		return nil, err
	}
	if len(obs) > 0 {
		return nil, ErrBinaryWithheld
	}
	return bytes.Clone(payload), nil
}

// IsBinary reports whether Apply treats a payload of this MIME type as
// binary: released whole or not at all, never minimized. It is every type
// that is neither JSON (application/json, */*+json) nor text/*, including
// an unparsable type (fail closed). A server serves such a payload as a
// base64 blob, and a decision that demands any obligation of it is a
// denial.
func IsBinary(mimeType string) bool { return kindOf(mimeType) == kindBinary }

type payloadKind int

const (
	kindBinary payloadKind = iota
	kindJSON
	kindText
)

func kindOf(mimeType string) payloadKind {
	mt, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		return kindBinary // unknown means not minimizable: fail closed
	}
	typ, sub, ok := strings.Cut(mt, "/") // ParseMediaType lower-cases
	switch {
	case !ok:
		return kindBinary
	case mt == "application/json" || strings.HasSuffix(sub, "+json"):
		return kindJSON
	case typ == "text":
		return kindText
	}
	return kindBinary
}

// JSON minimizes a JSON document. The document must be exactly one JSON
// value (ErrMalformed otherwise). Numbers keep their textual precision. The
// result is re-encoded deterministically: object members sorted by name, no
// insignificant whitespace, no HTML escaping, no trailing newline; the input
// is normalized this way even when obs is empty.
//
// A FHIR R4 resource (a root whose resourceType is an R4 type) that any
// obligation but deidentify applies to is then pruned of what the
// obligations emptied, and its required elements they withheld are
// marked with a data-absent-reason (pruneView), so that the view stays
// valid R4; with no obligations, or deidentify's alone, it is not walked
// again.
//
// Obligations are validated first; a generalize:birthyear90 obligation with a
// zero opts.Now fails with ErrNoReferenceTime whether or not its path
// resolves. A path that does not resolve is a no-op. On error the returned
// payload is nil.
func JSON(doc []byte, obs []Obligation, opts Options) ([]byte, error) {
	if err := checkObligations(obs, opts); err != nil {
		return nil, err
	}
	root, err := decodeJSON(doc)
	if err != nil {
		return nil, err
	}
	prune := false
	for _, o := range obs {
		if o.Op == OpDeidentify {
			if root, err = deidentify(root, opts); err != nil {
				return nil, err
			}
			continue
		}
		root = applyOne(root, o, opts)
		prune = true
	}
	if prune {
		// A resource without obligations, or only deidentify's (its walk
		// keeps R4), is not walked again.
		root = pruneView(root)
	}
	return encodeJSON(root)
}

// Text minimizes a plain-text document. Only scrub obligations with Path ""
// apply to text; any other (valid) obligation fails with ErrNotApplicable.
// With no obligations the text is returned unchanged (as a copy). Invalid
// UTF-8 is preserved byte for byte outside the replaced identifiers. On error
// the returned payload is nil.
func Text(text []byte, obs []Obligation, opts Options) ([]byte, error) {
	if err := ValidateAll(obs); err != nil {
		return nil, err
	}
	for _, o := range obs {
		if o.Op != OpScrub || o.Path != "" {
			return nil, o.errorf(ErrNotApplicable)
		}
	}
	s := string(text)
	for _, o := range obs {
		classes, _ := parseScrubFn(o.Fn) // validated above
		s = scrub(s, classes)
	}
	if text == nil {
		return nil, nil
	}
	return []byte(s), nil
}

// checkObligations validates obs and the options they need.
func checkObligations(obs []Obligation, opts Options) error {
	if err := ValidateAll(obs); err != nil {
		return err
	}
	for _, o := range obs {
		if (o.Op == OpGeneralize && o.Fn == GeneralizeBirthYear90 || o.Op == OpDeidentify) && opts.Now.IsZero() {
			return o.errorf(ErrNoReferenceTime)
		}
		if o.Op == OpPseudonymize && opts.KeyID == nil {
			return o.errorf(ErrNoKeyer)
		}
	}
	return nil
}

// decodeJSON decodes exactly one JSON value, keeping numbers as json.Number.
// The error never carries payload bytes or offsets into them.
func decodeJSON(doc []byte) (any, error) {
	if !utf8.Valid(doc) {
		// encoding/json would silently turn invalid bytes into U+FFFD; a
		// document that is not UTF-8 is not valid JSON (RFC 8259 section 8.1).
		return nil, ErrMalformed
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, ErrMalformed
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, ErrMalformed // trailing data after the value
	}
	return v, nil
}

func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Cannot happen for values produced by decodeJSON and this package;
		// the underlying error may quote content, so it is not wrapped.
		return nil, fmt.Errorf("minimize: encoding minimized JSON failed")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// applyOne applies a validated obligation to a decoded document and returns
// the new root.
func applyOne(root any, o Obligation, opts Options) any {
	segs, _ := parsePointer(o.Path) // validated by checkObligations
	leaf := leafFunc(o, opts)
	if len(segs) == 0 {
		// remove "" is rejected by Validate; an allow-list applied to a
		// document that is not an object or array leaves null.
		v, _ := leaf(root)
		return v
	}
	return walk(root, segs, leaf)
}

// A leaf transforms the value at the end of a path; remove reports true to
// delete it.
type leaf func(v any) (nv any, remove bool)

func leafFunc(o Obligation, opts Options) leaf {
	switch o.Op {
	case OpRemove:
		return func(any) (any, bool) { return nil, true }
	case OpMask:
		return func(v any) (any, bool) { return mask(o.Fn, v), false }
	case OpGeneralize:
		return func(v any) (any, bool) { return generalize(o.Fn, v, opts.Now), false }
	case OpScrub:
		classes, _ := parseScrubFn(o.Fn)
		return func(v any) (any, bool) { return scrubValue(v, classes), false }
	case OpAllow:
		root, _ := parseAllowFn(o.Fn)
		return func(v any) (any, bool) { return allowValue(v, root) }
	case OpPseudonymize:
		return func(v any) (any, bool) { return pseudonymize(v, opts.KeyID), false }
	}
	// Unreachable: ops are validated. Fail closed anyway.
	return func(any) (any, bool) { return nil, true }
}

// walk resolves segs below node and applies f to every value they select.
// Containers are modified in place (they belong to the decoded document).
// A segment that does not resolve leaves node unchanged.
func walk(node any, segs []string, f leaf) any {
	seg, rest := segs[0], segs[1:]
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[seg]
		if !ok {
			return n
		}
		if len(rest) > 0 {
			n[seg] = walk(child, rest, f)
			return n
		}
		if nv, del := f(child); del {
			delete(n, seg)
			// A primitive's "_seg" companion (its id and extensions, R4
			// JSON) goes with it: a value removed leaves nothing of it.
			delete(n, "_"+seg)
		} else {
			n[seg] = nv
		}
		return n
	case []any:
		if seg == "*" {
			out := n[:0]
			for _, child := range n {
				if len(rest) > 0 {
					out = append(out, walk(child, rest, f))
					continue
				}
				if nv, del := f(child); !del {
					out = append(out, nv)
				}
			}
			clear(n[len(out):]) // drop references to removed elements
			return out
		}
		i, ok := arrayIndex(seg, len(n))
		if !ok {
			return n
		}
		if len(rest) > 0 {
			n[i] = walk(n[i], rest, f)
			return n
		}
		nv, del := f(n[i])
		if !del {
			n[i] = nv
			return n
		}
		return append(n[:i], n[i+1:]...)
	}
	return node
}

// mask implements the mask op. Non-string values become "***".
func mask(fn string, v any) any {
	s, ok := v.(string)
	if !ok || fn != MaskLast4 {
		return masked
	}
	r := []rune(s)
	if len(r) < 5 {
		return masked
	}
	return masked + string(r[len(r)-4:])
}

// scrubValue scrubs a string, every string inside an object or array
// (recursively; member names are kept), and a number whose text contains an
// identifier (it becomes the scrubbed string). Booleans and null are kept.
func scrubValue(v any, classes scrubClasses) any {
	switch x := v.(type) {
	case string:
		return scrub(x, classes)
	case json.Number:
		if s := scrub(string(x), classes); s != string(x) {
			return s
		}
		return x
	case map[string]any:
		for k, c := range x {
			x[k] = scrubValue(c, classes)
		}
		return x
	case []any:
		for i, c := range x {
			x[i] = scrubValue(c, classes)
		}
		return x
	}
	return v
}
