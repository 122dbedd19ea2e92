package audit

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestPrintable pins how Printable shows what a terminal would act on.
func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"dr-ada", "dr-ada"}, {"José 日本語 🩺", "José 日本語 🩺"}, {`a\b "q"`, `a\b "q"`}, {"", ""},
		{"a\nb", `a\nb`}, {"a\tb", `a\tb`}, {"\r", `\r`}, {"\x1b[2J", `\x1b[2J`}, {"\x00\x7f", `\x00\x7f`},
		{"\u0085", `\u0085`}, {"a\u202eb", `a\u202eb`}, {"\u2028\u2029", `\u2028\u2029`}, {"\ufeff", `\ufeff`},
		{"nb\u00a0sp", `nb\u00a0sp`}, {"\u3000", `\u3000`}, {"\u200b", `\u200b`}, {"bad\xffutf8", `bad\xffutf8`},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzPrintable: the result is only printable characters and U+0020, and
// printable text is left as it is.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"dr-ada", "a\nb", "\x1b]52;c;x\x07", "a\u202eb", "\xff", "\ufffd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Printable(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Printable(%q) = %q is not UTF-8", s, got)
		}
		for _, r := range got {
			if !unicode.IsPrint(r) {
				t.Fatalf("Printable(%q) = %q holds %U", s, got, r)
			}
		}
		if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) && got != s {
			t.Fatalf("Printable changed printable %q to %q", s, got)
		}
	})
}
