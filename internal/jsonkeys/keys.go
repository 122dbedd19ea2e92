package jsonkeys

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
)

// Duplicate returns the byte offset in raw of the opening quote of the
// first object member whose name repeats, under Unicode case folding, the
// name of an earlier member of the same object; -1 if there is none.
//
// Why (first found in FHIR input): FHIR JSON names every element once (R4 "JSON Representation of
// Resources"), and a value with a repeated name reads differently to
// different parsers. Go's map decode keeps the last member, its struct
// decode matches names case-insensitively and keeps the last too, and the
// stored body keeps both: `"resourceType":"Observation",...,
// "resourceType":"Organization"` was filed tenant-level as an Organization
// while its subject named a Patient, and a second `meta` dropped the
// security labels of the first. Names that differ only in case are no two
// FHIR elements, and Go's struct decode takes one for the other, so they
// count as repeats.
//
// raw need not be valid JSON: the scan is lenient and whatever it cannot
// follow the JSON decoder reports. It allocates only for a name with an
// escape and for an object of many members.
func Duplicate(raw []byte) int {
	type frame struct {
		obj   bool
		start int                 // index into names of the object's first member
		set   map[string]struct{} // the folded names, once the object has many members
	}
	var (
		stack []frame
		names [][]byte // the member names of the open objects, innermost last
	)
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '{', '[':
			stack = append(stack, frame{obj: raw[i] == '{', start: len(names)})
		case '}', ']':
			if len(stack) == 0 {
				return -1
			}
			names = names[:stack[len(stack)-1].start]
			stack = stack[:len(stack)-1]
		case '"':
			start, escaped := i, false
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
					escaped = true
				}
			}
			if i >= len(raw) {
				return -1
			}
			k := i + 1
			for k < len(raw) && (raw[k] == ' ' || raw[k] == '\t' || raw[k] == '\n' || raw[k] == '\r') {
				k++
			}
			if k >= len(raw) || raw[k] != ':' || len(stack) == 0 || !stack[len(stack)-1].obj {
				continue
			}
			name := raw[start+1 : i]
			if escaped {
				var s string
				if json.Unmarshal(raw[start:i+1], &s) != nil {
					return -1
				}
				name = []byte(s)
			}
			top := &stack[len(stack)-1]
			if top.set == nil && len(names)-top.start < manyMembers {
				for _, n := range names[top.start:] {
					if bytes.EqualFold(n, name) {
						return start
					}
				}
				names = append(names, name)
				continue
			}
			if top.set == nil { // a large object: a set keeps the scan linear
				top.set = make(map[string]struct{}, 2*manyMembers)
				for _, n := range names[top.start:] {
					top.set[foldName(n)] = struct{}{}
				}
			}
			f := foldName(name)
			if _, dup := top.set[f]; dup {
				return start
			}
			top.set[f] = struct{}{}
		}
	}
	return -1
}

// manyMembers is the size from which Duplicate keeps an object's names
// in a set rather than comparing each with every other.
const manyMembers = 32

// foldName maps a name to one representative of its case-folding class:
// each rune becomes the smallest rune of its unicode.SimpleFold orbit, so
// two names are bytes.EqualFold exactly when their foldNames are equal.
func foldName(name []byte) string {
	var b strings.Builder
	for _, r := range string(name) {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}
