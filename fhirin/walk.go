package fhirin

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// A Bundle's bytes were scanned by encoding/json about six times a pass
// (the top-level value's resourceType read twice, by json.Unmarshal, which
// checks the whole value first; the Bundle taken apart by a json.Decoder,
// which scans each entry's resource twice and copies it; each entry's
// head read by json.Unmarshal again), and a Bundle's read took about
// 3 × an NDJSON read of the same resources (docs/benchmarks.md, "Bundles
// read by walking their JSON"). What follows reads the same things by
// walking the members of JSON that encoding/json has already checked
// once: its bytes are skipped, not scanned state by state, and an entry's
// resource is a slice of the Bundle's bytes. What it reads is what the
// plain encoding/json reading gave, member for member, duplicate and
// case-folded names, escapes and invalid UTF-8 included: that reading is
// kept in the tests as the reference it must agree with (plainReading,
// TestBundleReadingAgreesWithPlain, FuzzBundleReading), and a head it
// cannot read exactly (a member of the wrong JSON type) it leaves to
// json.Unmarshal, whose error the reader reports.

// bundleReading reads a top-level value's head (headOf) and takes a Bundle
// apart (splitBundle). The tests put the plain encoding/json reading in
// its place to compare the two through Read.
var bundleReading = struct {
	head  func(raw []byte, checked, full bool) (head, error)
	split func(raw []byte, line int) (map[string]any, []*entry, error)
}{headOf, splitBundle}

// head is what the reader reads of a resource before the rest: its
// resourceType, and of a Bundle entry's resource its id and identifier.
type head struct {
	typ, id    string
	identifier json.RawMessage
}

// headOf is json.Unmarshal(raw, &h) into a struct of resourceType (and,
// when full, id and identifier: an entry's head, bundle.index), read by
// walking raw's members: raw is one JSON value that a json.Decoder decoded
// (checked), or any bytes (an NDJSON line), which json.Valid checks first.
// Its members match the fields as encoding/json matches them (exactly,
// or else under Unicode case folding; the last one counts), and a null
// leaves a field as it is. Anything else, raw not an object or not JSON,
// or a field's value neither a string nor null, is json.Unmarshal's, error
// and all (plainHead).
func headOf(raw []byte, checked, full bool) (head, error) {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' || !checked && !json.Valid(raw) {
		return plainHead(raw, full)
	}
	var h head
	plain := false
	members(raw, i, func(name []byte, vs, ve int) bool {
		var field *string
		switch {
		case nameIs(name, "resourceType"):
			field = &h.typ
		case full && nameIs(name, "id"):
			field = &h.id
		case full && nameIs(name, "identifier"):
			h.identifier = raw[vs:ve]
			return true
		default:
			return true
		}
		switch raw[vs] {
		case 'n': // null: the field keeps its value
		case '"':
			*field = jsonString(raw[vs:ve])
		default: // an UnmarshalTypeError: json.Unmarshal says which
			plain = true
			return false
		}
		return true
	})
	if plain {
		return plainHead(raw, full)
	}
	return h, nil
}

// plainHead is headOf by json.Unmarshal.
func plainHead(raw []byte, full bool) (head, error) {
	if !full {
		var h struct {
			ResourceType string `json:"resourceType"`
		}
		err := json.Unmarshal(raw, &h)
		return head{typ: h.ResourceType}, err
	}
	var h struct {
		ResourceType string          `json:"resourceType"`
		ID           string          `json:"id"`
		Identifier   json.RawMessage `json:"identifier"`
	}
	err := json.Unmarshal(raw, &h)
	return head{typ: h.ResourceType, id: h.ID, identifier: h.Identifier}, err
}

// splitBundle takes the Bundle raw, a JSON object that starts at line of
// its file and that a json.Decoder decoded, apart: its envelope for
// fhirr4.Check (its members, numbers as json.Number; entry the entries'
// envelopes, readEntry) and its entries, each at the line its first byte
// is on. Each entry's resource is a slice of raw.
func splitBundle(raw []byte, line int) (map[string]any, []*entry, error) {
	envelope := map[string]any{}
	var entries []*entry
	var envEntries []any
	lineAt, counted := line, 0
	var err error
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return nil, nil, errNotObject
	}
	members(raw, i, func(name []byte, vs, ve int) bool {
		key := jsonString(name)
		if key != "entry" {
			envelope[key], err = decodeNumbered(raw[vs:ve])
			return err == nil
		}
		if vs == ve || raw[vs] != '[' {
			// What json.Decoder.Token gives: not an array, Check says so.
			envelope[key], err = tokenOf(raw[vs:ve])
			return err == nil
		}
		elements(raw, vs, func(es, ee int) bool {
			var e *entry
			var env any
			if e, env, err = readEntry(raw[es:ee]); err != nil {
				return false
			}
			lineAt += bytes.Count(raw[counted:es], []byte{'\n'})
			counted = es
			e.line = lineAt
			entries = append(entries, e)
			envEntries = append(envEntries, env)
			return true
		})
		envelope[key] = envEntries
		return err == nil
	})
	if err != nil {
		return nil, nil, err
	}
	return envelope, entries, nil
}

// errNoValue: the walk found no value where JSON holds one. The walk reads
// only JSON encoding/json has checked, where it cannot happen; on other
// bytes it fails with this rather than indexing past the end.
var errNoValue = errors.New("fhirin: no JSON value where the walk expected one")

// errNotObject: splitBundle was given something other than a JSON object.
var errNotObject = &json.UnmarshalTypeError{Value: "non-object"}

// readEntry reads one Bundle.entry, raw: the entry, and its envelope for
// fhirr4.Check (its members with placeholder for a resource that is an
// object; anything but an object as json.Decoder.Token gives it, for Check
// to refuse).
func readEntry(raw []byte) (*entry, any, error) {
	e := &entry{}
	if len(raw) == 0 {
		return nil, nil, errNoValue
	}
	if raw[0] != '{' {
		tok, err := tokenOf(raw)
		return e, tok, err
	}
	env := map[string]any{}
	var err error
	members(raw, 0, func(name []byte, vs, ve int) bool {
		key := jsonString(name)
		v := raw[vs:ve]
		if len(v) == 0 {
			err = errNoValue
			return false
		}
		if key == "resource" {
			if v[0] == '{' {
				e.Resource, env[key] = v, placeholder
				return true
			}
			var x any // not a resource: Check says so
			_ = json.Unmarshal(v, &x)
			env[key] = x
			return true
		}
		env[key], err = decodeNumbered(v)
		return err == nil
	})
	if err != nil {
		return nil, nil, err
	}
	e.fromEnvelope(env)
	return e, env, nil
}

// fromEnvelope sets what the reader reads of the entry from its envelope,
// once Check has found each of the JSON kind R4 gives it.
func (e *entry) fromEnvelope(env map[string]any) {
	e.FullURL, _ = env["fullUrl"].(string)
	if req, ok := env["request"].(map[string]any); ok {
		e.Request = &entryRequest{}
		e.Request.Method, _ = req["method"].(string)
		e.Request.URL, _ = req["url"].(string)
		e.Request.IfNoneExist, _ = req["ifNoneExist"].(string)
	}
	if search, ok := env["search"].(map[string]any); ok {
		e.Search = &entrySearch{}
		e.Search.Mode, _ = search["mode"].(string)
	}
}

// decodeNumbered decodes v, one JSON value, as a json.Decoder with
// UseNumber does (fhirr4.Check reads numbers so).
// An object of strings alone (an entry's request, its search) is decoded
// by the walk: its members in order, the last of a repeated name counting.
func decodeNumbered(v []byte) (any, error) {
	if len(v) == 0 {
		return nil, errNoValue
	}
	switch v[0] {
	case '"':
		return jsonString(v), nil
	case '{':
		m := map[string]any{}
		flat := true
		members(v, 0, func(name []byte, vs, ve int) bool {
			if flat = vs < ve && v[vs] == '"'; flat {
				m[jsonString(name)] = jsonString(v[vs:ve])
			}
			return flat
		})
		if flat {
			return m, nil
		}
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	err := dec.Decode(&x)
	return x, err
}

// tokenOf is the token json.Decoder.Token (with UseNumber) reads first of
// v, one JSON value: the delimiter of an object or array, else the value.
func tokenOf(v []byte) (any, error) {
	if len(v) > 0 && (v[0] == '{' || v[0] == '[') {
		return json.Delim(v[0]), nil
	}
	return decodeNumbered(v)
}

// jsonString is the string the JSON string tok (quotes included) holds, as
// encoding/json decodes it: its escapes decoded and each byte that is not
// UTF-8 made U+FFFD.
func jsonString(tok []byte) string {
	if len(tok) < 2 {
		return ""
	}
	s := tok[1 : len(tok)-1]
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return string(s)
	}
	var out string
	_ = json.Unmarshal(tok, &out)
	return out
}

// nameIs reports whether the member name tok (quotes included) is field's
// to encoding/json's struct decode: equal under Unicode case folding
// (encoding/json's foldName is bytes.EqualFold's), once decoded.
func nameIs(tok []byte, field string) bool {
	if len(tok) < 2 {
		return false
	}
	s := tok[1 : len(tok)-1]
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return bytes.EqualFold(s, []byte(field))
	}
	return bytes.EqualFold([]byte(jsonString(tok)), []byte(field))
}

// The walk below reads JSON that encoding/json has checked: it follows
// strings, objects and arrays and nothing else, and on bytes that are not
// JSON it reads something, without failing.

// members calls fn with each member of the object whose '{' is b[i]: its
// name (quotes included) and the bounds of its value, in order, until fn
// returns false.
func members(b []byte, i int, fn func(name []byte, vs, ve int) bool) {
	for i = skipSpace(b, i+1); i < len(b) && b[i] == '"'; {
		ne := stringEnd(b, i)
		c := skipSpace(b, ne)
		if c >= len(b) || b[c] != ':' {
			return // not JSON: no value follows the name
		}
		vs := skipSpace(b, c+1)
		ve := valueEnd(b, vs)
		if !fn(b[i:ne], vs, ve) {
			return
		}
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
}

// elements calls fn with the bounds of each element of the array whose '['
// is b[i], in order, until fn returns false.
func elements(b []byte, i int, fn func(vs, ve int) bool) {
	for i = skipSpace(b, i+1); i < len(b) && b[i] != ']'; {
		ve := valueEnd(b, i)
		if !fn(i, ve) {
			return
		}
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
}

// valueEnd is the offset just past the JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ { // a number, true, false or null
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}

// stringEnd is the offset just past the JSON string whose opening quote is
// b[i]: past the first quote after it that an odd run of backslashes does
// not escape.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			break
		}
		j += k
		n := 0
		for b[j-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
	}
	return len(b)
}

// skipSpace is the offset of the first byte at or after b[i] that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
