package fhirr4

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzCheck: Check never panics, says the same of the same input, its
// quick walk agrees with the full one, and
// quotes no string value of the resource (a member name shaped like an
// element name is a path, and may be quoted).
func FuzzCheck(f *testing.F) {
	for _, s := range validCases {
		f.Add(s)
	}
	for _, tc := range slices.Concat(unknownCases, kindCases, formatCases, requiredCases, narrativeCases) {
		f.Add(tc.body)
	}
	// A value that was the format hint's own words once (urn:oid:).
	f.Add(`{"resourceType":"Observation","extension":[{"valueOid":"urn:oid:"}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) != nil || m == nil {
			return
		}
		ps := Check(m)
		if again := Check(m); !slices.Equal(ps, again) {
			t.Fatalf("two answers: %v, then %v", ps, again)
		}
		// The quick walk Check begins with fails what the full walk,
		// its reference, finds problems in, and no more.
		full := checker{}
		full.resource("", m)
		q := checker{quick: true}
		q.resource("", m)
		if q.failed != (len(full.problems) > 0) {
			t.Fatalf("the quick walk disagrees with the full walk's %v", full.problems)
		}
		var text bytes.Buffer
		for _, p := range ps {
			text.WriteString(p.Error() + "\n")
		}
		keys := strings.Join(memberNames(m, nil), "\n")
		for _, v := range stringValues(m, nil) {
			if len(v) >= 8 && !elementName.MatchString(v) && !strings.Contains(keys, v) && strings.Contains(text.String(), v) {
				t.Fatalf("a problem quotes the value %q: %s", v, text.String())
			}
		}
	})
}

// stringValues appends the string values under v to out.
func stringValues(v any, out []string) []string {
	switch x := v.(type) {
	case string:
		out = append(out, x)
	case []any:
		for _, e := range x {
			out = stringValues(e, out)
		}
	case map[string]any:
		for _, e := range x {
			out = stringValues(e, out)
		}
	}
	return out
}

// memberNames appends the member names under v to out: a value that is
// part of one may be quoted as part of a path.
func memberNames(v any, out []string) []string {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			out = memberNames(e, out)
		}
	case map[string]any:
		for k, e := range x {
			out = memberNames(e, append(out, k))
		}
	}
	return out
}
