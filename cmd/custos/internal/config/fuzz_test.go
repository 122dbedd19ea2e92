package config

import (
	"strings"
	"testing"
)

// FuzzParse: Parse never panics; it returns either a File or at least one
// Problem, never both; a secret-looking value is never repeated in a
// Problem; and a File's set fields go through Apply's renderings.
func FuzzParse(f *testing.F) {
	f.Add([]byte("dev: true\nhttp:\n  listen: 127.0.0.1:0\n"))
	f.Add([]byte("vault:\n  token: hvs.CAESIJ0123456789abcdefghijklmnop\n"))
	f.Add([]byte("policy:\n  keys:\n    - {id: a, file: b}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("f.yaml", data)
		if (file == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v: want exactly one", file, err)
		}
		if err != nil {
			ps, ok := err.(Problems)
			if !ok || len(ps) == 0 {
				t.Fatalf("error %T %v", err, err)
			}
			for _, tok := range strings.Fields(string(data)) {
				if secretLooking(tok) != "" && len(tok) > 12 && strings.Contains(err.Error(), tok) {
					t.Fatalf("problem repeats a secret-looking value: %v", err)
				}
			}
			return
		}
		_ = file.Validate(Options{})
		for _, fd := range schema() {
			if fd.isSet(file) {
				_, _ = fd.flagStrings(file)
			}
		}
	})
}
