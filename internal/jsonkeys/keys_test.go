package jsonkeys

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestDuplicate(t *testing.T) {
	many := func(last string) string {
		var b strings.Builder
		b.WriteString(`{"resourceType":"Basic"`)
		for i := range 2 * manyMembers {
			b.WriteString(`,"extension` + strconv.Itoa(i) + `":1`)
		}
		return b.String() + `,"` + last + `":2}`
	}
	for _, tc := range []struct {
		raw  string
		want int // -1: none; else the offset of the repeated name's opening quote
	}{
		{`{"resourceType":"Patient","id":"a","name":[{"given":["x"]},{"given":["y"]}],"meta":{"id":"m"}}`, -1},
		{`{"a":{"b":1},"b":{"a":1},"c":[{"a":1,"b":2},{"a":1,"b":2}]}`, -1},
		{`{"a":"\"b\": 1","b":"{\"a\":1}"}`, -1}, // names inside strings are no members
		{`{"status":"x","_status":{"id":"y"}}`, -1},
		{`{"a":1,"a":2}`, 7},
		{`{"a":1,"A":2}`, 7},
		{`{"id":1,"\u0069d":2}`, 8},
		{`{"link":1,"lin\u212a":2}`, 10}, // the Kelvin sign folds to k, and Go's decoder takes one for the other
		{`{"a":{"b":1,"c":{},"b":2}}`, 19},
		{`[{"a":1},{"a":2,"a":3}]`, 16},
		{many("extension5"), len(many("extension5")) - len(`"extension5":2}`)},
		{many("EXTENSION5"), len(many("EXTENSION5")) - len(`"EXTENSION5":2}`)},
		{many("extension"), -1},
		{`{"a":1,"a`, -1}, // not JSON: left to the decoder
		{`}{"a":1}`, -1},
	} {
		if got := Duplicate([]byte(tc.raw)); got != tc.want {
			t.Errorf("Duplicate(%.60s) = %d, want %d", tc.raw, got, tc.want)
		}
	}
}

// FuzzDuplicate checks Duplicate against the JSON decoder's tokens:
// for valid JSON it finds a repeat exactly when one object has two names
// that are equal under case folding.
func FuzzDuplicate(f *testing.F) {
	for _, s := range []string{`{"a":1,"A":{"b":[{"c":1,"c":2}]}}`, `{"id":"x","\u0069D":1}`, `[{"a":"\"a\":"},{"a":1}]`, `{"lin\u212a":1,"link":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		want := false
		dec := json.NewDecoder(strings.NewReader(s))
		var stack []([]string) // the names of the open objects; nil for an array
		expectName := []bool{}
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			switch v := tok.(type) {
			case json.Delim:
				switch v {
				case '{':
					stack, expectName = append(stack, []string{}), append(expectName, true)
					continue
				case '[':
					stack, expectName = append(stack, nil), append(expectName, false)
					continue
				default:
					stack, expectName = stack[:len(stack)-1], expectName[:len(expectName)-1]
				}
			case string:
				if n := len(stack); n > 0 && stack[n-1] != nil && expectName[n-1] {
					for _, k := range stack[n-1] {
						if strings.EqualFold(k, v) {
							want = true
						}
					}
					stack[n-1] = append(stack[n-1], v)
					expectName[n-1] = false
					continue
				}
			}
			if n := len(stack); n > 0 && stack[n-1] != nil {
				expectName[n-1] = true // a value ended: a name comes next
			}
		}
		if got := Duplicate([]byte(s)) >= 0; got != want {
			t.Errorf("Duplicate(%q) found a repeat: %v, want %v", s, got, want)
		}
	})
}
