package minimize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/custos-mcp/custos/internal/fhirr4"
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
// the new root. In a FHIR R4 resource the walk knows each element's R4
// type (place), so that mask, generalize and scrub leave a value its type
// can hold (fit).
func applyOne(root any, o Obligation, opts Options) any {
	segs, _ := parsePointer(o.Path) // validated by checkObligations
	f := leafFunc(o, opts)
	at := rootPlace(root)
	if len(segs) == 0 {
		// remove "" is rejected by Validate; an allow-list applied to a
		// document that is not an object or array leaves null.
		v, act := f.apply(root, at)
		if act != keep {
			// A whole resource masked is no resource: the JSON alone.
			v, _ = f.apply(root, place{})
		}
		return v
	}
	return walk(root, segs, f, at)
}

// A verdict says what becomes of the value a leaf was applied to.
type verdict uint8

const (
	keep     verdict = iota // the leaf's result replaces it
	drop                    // it is deleted, with its "_name" companion
	withhold                // a primitive of an R4 resource: it is deleted and its companion marks it withheld (DAR masked)
)

// A leaf transforms the value at the end of a path, at place at.
// eachItem: it transforms values, and in an R4 resource a repeating
// element's array is transformed item by item (a mask of Patient.name
// masks each name), not as one value.
type leaf struct {
	apply    func(v any, at place) (any, verdict)
	eachItem bool
}

func leafFunc(o Obligation, opts Options) leaf {
	switch o.Op {
	case OpRemove:
		return leaf{apply: func(any, place) (any, verdict) { return nil, drop }}
	case OpMask:
		return transform(func(v any) any { return mask(o.Fn, v) })
	case OpGeneralize:
		return transform(func(v any) any { return generalize(o.Fn, v, opts.Now) })
	case OpScrub:
		classes, _ := parseScrubFn(o.Fn)
		return scrubLeaf(classes)
	case OpAllow:
		root, _ := parseAllowFn(o.Fn)
		return leaf{apply: func(v any, _ place) (any, verdict) {
			nv, del := allowValue(v, root)
			if del {
				return nil, drop
			}
			return nv, keep
		}}
	case OpPseudonymize:
		return leaf{apply: func(v any, _ place) (any, verdict) { return pseudonymize(v, opts.KeyID), keep }}
	}
	// Unreachable: ops are validated. Fail closed anyway.
	return leaf{apply: func(any, place) (any, verdict) { return nil, drop }}
}

// transform is the leaf of an op that replaces a value with fn's result
// (mask, generalize): in an R4 resource, as its element's type can hold it
// (fit).
func transform(fn func(v any) any) leaf {
	return leaf{eachItem: true, apply: func(v any, at place) (any, verdict) {
		nv := fn(v)
		if !at.typed {
			return nv, keep
		}
		return fit(at.e, v, nv)
	}}
}

// scrubLeaf is the leaf of a scrub of classes: scrubValue, and in an R4
// resource member by member, each scrubbed value as its element's type
// can hold it (fit: a date scrubbed to "[DATE]" is withheld).
func scrubLeaf(classes scrubClasses) leaf {
	var f leaf
	f = leaf{eachItem: true, apply: func(v any, at place) (any, verdict) {
		if !at.typed {
			return scrubValue(v, classes), keep
		}
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x, []string{k}, f, at)
			}
			return x, keep
		case []any:
			return walk(x, []string{"*"}, f, at), keep
		}
		return fit(at.e, v, scrubValue(v, classes))
	}}
	return f
}

// place is where walk stands in a FHIR R4 resource: the R4 element of the
// value there (typed), or a value R4 does not type (a document that is no
// R4 resource, a member R4 does not define), which obligations treat by
// its JSON alone. The items of a repeating element's array stand where
// the array does.
type place struct {
	e     fhirr4.Element
	typed bool
}

// resourceID is the type place gives a resource's id.
const resourceID = "Resource.id"

// rootPlace is the place of a document's root: a resource when it is an
// R4 resource.
func rootPlace(root any) place {
	m, _ := root.(map[string]any)
	rt, _ := m[resourceTypeMember].(string)
	return place{e: fhirr4.Element{Type: "Resource"}, typed: fhirr4.Resources[rt]}
}

// member is the place of member k of object m, which stands at p: its
// element in R4, a primitive's "_name" companion an Element.
func (p place) member(m map[string]any, k string) place {
	if !p.typed {
		return place{}
	}
	key := p.e.Type
	if key == "Resource" {
		key, _ = m[resourceTypeMember].(string)
	}
	defs := fhirr4.Elements[key]
	if key == "Element" {
		defs = companionDefs
	}
	if k == "id" && p.e.Type == "Resource" {
		// A resource's id: an id that R4 JSON gives no companion (no
		// extensions: json.html#resources), which the R4 table types
		// as the string of FHIRPath.
		return place{e: fhirr4.Element{Type: resourceID}, typed: true}
	}
	if e, ok := defs[k]; ok {
		return place{e: e, typed: true}
	}
	if base, ok := cutCompanion(k); ok {
		if e, ok := defs[base]; ok && primitiveTypes[e.Type] {
			return place{e: fhirr4.Element{Type: "Element", Many: e.Many}, typed: true}
		}
	}
	return place{}
}

// fit is what nv, an obligation's result for the value v of element e of
// an R4 resource, becomes so that the view stays valid R4 (docs/policy.md,
// "Views stay valid R4"): a value left as it was, a string or markdown
// (a mask's "***", "***1234", a scrubbed text), and a date or dateTime
// generalized to its year are kept; a narrative (xhtml) masked becomes
// maskedDiv; any other primitive, which R4 gives a form "***", "90+" or "[DATE]" is not of (a
// date, code, uri, id, boolean, number, ...), is withheld: its value goes
// and its "_name" companion holds a data-absent-reason "masked" alone, as
// a required element the view withholds is marked (prune.go). A resource's
// id and a canonical go instead: R4's JSON schema gives neither a
// companion (a canonical's is missing from HL7's fhir.schema.json; a
// required one is marked by the prune all the same). A complex value
// and a resource (contained, a Bundle entry's) go, a required one marked
// by the prune: a marker in its place (absentOf) would break the
// at-least-one invariants of many (app-1, con-1, obs-3, pat-1, bdl-5).
func fit(e fhirr4.Element, v, nv any) (any, verdict) {
	if unchanged(v, nv) {
		return nv, keep
	}
	switch t := e.Type; {
	case t == "string" || t == "markdown":
		if s, ok := nv.(string); ok && s != "" {
			return nv, keep
		}
		return nil, withhold
	case t == "date" || t == "dateTime":
		if s, ok := nv.(string); ok && isYear(s) {
			return nv, keep
		}
		return nil, withhold
	case t == "xhtml":
		return maskedDiv, keep
	case t == "canonical" || t == resourceID || t == "Resource":
		return nil, drop
	case primitiveTypes[t]:
		return nil, withhold
	}
	return nil, drop
}

// maskedDiv is a masked narrative: R4's xhtml has no extensions to hold a
// data-absent-reason (datatypes.html#xhtml), and Narrative.div is
// required, so the div says "***" itself, as a masked string does; it
// holds text, as txt-2 requires.
const maskedDiv = `<div xmlns="http://www.w3.org/1999/xhtml">***</div>`

// isYear reports whether s is a year as R4's date and dateTime hold one:
// four digits, not 0000.
func isYear(s string) bool {
	return len(s) == 4 && s != "0000" && strings.Trim(s, "0123456789") == ""
}

// unchanged reports whether an obligation's result nv is the value v it
// was made of (a scalar; a container is never taken for unchanged).
func unchanged(v, nv any) bool {
	switch nv.(type) {
	case string, json.Number, bool:
		return v == nv
	}
	return false
}

// walk resolves segs below node, which stands at place at, and applies f
// to every value they select. Containers are modified in place (they
// belong to the decoded document). A segment that does not resolve leaves
// node unchanged.
func walk(node any, segs []string, f leaf, at place) any {
	seg, rest := segs[0], segs[1:]
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[seg]
		if !ok {
			return n
		}
		cat := at.member(n, seg)
		if a, ok := child.([]any); ok && cat.typed && cat.e.Many {
			if len(rest) == 0 && f.eachItem {
				rest = []string{"*"}
			}
			if len(rest) == 1 && primitiveTypes[cat.e.Type] {
				walkItems(n, seg, a, rest[0], f, cat)
				return n
			}
		}
		if len(rest) > 0 {
			n[seg] = walk(child, rest, f, cat)
			return n
		}
		switch nv, act := f.apply(child, cat); act {
		case keep:
			n[seg] = nv
			if cat.typed && primitiveTypes[cat.e.Type] && !samePrimitive(child, nv) {
				// Its companion's extensions describe the value it was
				// (a birth date's patient-birthTime, a name's own-name):
				// a value transformed keeps nothing of them.
				delete(n, "_"+seg)
			}
		case withhold:
			delete(n, seg)
			n["_"+seg] = absent()
		default:
			delete(n, seg)
			// A primitive's "_seg" companion (its id and extensions, R4
			// JSON) goes with it: a value removed leaves nothing of it.
			delete(n, "_"+seg)
		}
		return n
	case []any:
		if seg == "*" {
			out := n[:0]
			for _, child := range n {
				if len(rest) > 0 {
					out = append(out, walk(child, rest, f, at))
					continue
				}
				// withhold cannot come here: a primitive's items are
				// walked by walkItems. Should it, the item goes.
				if nv, act := f.apply(child, at); act == keep {
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
			n[i] = walk(n[i], rest, f, at)
			return n
		}
		nv, act := f.apply(n[i], at)
		if act == keep {
			n[i] = nv
			return n
		}
		return append(n[:i], n[i+1:]...)
	}
	return node
}

// walkItems applies f to the items sel ("*" or an index) selects of
// vals, the values m[name] of a repeating primitive element (at), and
// keeps its companion m["_"+name] aligned (R4 JSON: an array of as many
// entries, null where a value has no id or extension): an item dropped
// goes with its entry; an item withheld becomes null and its entry a
// data-absent-reason "masked".
func walkItems(m map[string]any, name string, vals []any, sel string, f leaf, at place) {
	comp, _ := m["_"+name].([]any)
	if len(comp) != len(vals) {
		comp = nil // none, or not aligned: the prune drops it
	}
	idx := -1
	if sel != "*" {
		i, ok := arrayIndex(sel, len(vals))
		if !ok {
			return
		}
		idx = i
	}
	outV := make([]any, 0, len(vals))
	outC := make([]any, 0, len(vals))
	marked := comp != nil
	for i, x := range vals {
		var c any
		if comp != nil {
			c = comp[i]
		}
		if idx < 0 || i == idx {
			nv, act := f.apply(x, at)
			switch act {
			case drop:
				continue
			case withhold:
				nv, c, marked = nil, absent(), true
			case keep:
				if !samePrimitive(x, nv) {
					c = nil // as walk drops a transformed value's companion
				}
			}
			x = nv
		}
		outV = append(outV, x)
		outC = append(outC, c)
	}
	if !marked || !slices.ContainsFunc(outC, func(c any) bool { return c != nil }) {
		outC = nil
		delete(m, "_"+name) // none left (or none aligned: the prune's to drop)
	}
	setValues(m, name, outV, outC)
}

// samePrimitive reports whether nv, an obligation's result for the
// primitive value v, is v unchanged.
func samePrimitive(v, nv any) bool {
	switch x := v.(type) {
	case string:
		y, ok := nv.(string)
		return ok && x == y
	case json.Number:
		y, ok := nv.(json.Number)
		return ok && x == y
	case bool:
		y, ok := nv.(bool)
		return ok && x == y
	}
	return v == nil && nv == nil
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
