package minimize

import (
	"strings"
	"testing"
)

// unicodeSpaces are the spaces other than U+0020 that word processors and
// European typography put between a number's groups: the no-break space
// (U+00A0), the figure space (U+2007), the thin space (U+2009) and the
// narrow no-break space (U+202F, French typography's).
var unicodeSpaces = []string{"\u00a0", "\u2007", "\u2009", "\u202f"}

// TestScrubInternationalNumbers: telephone numbers written with "00"
// before the country code, with the trunk prefix shown as optional
// ("(0)20", "0 20"), or with a no-break, figure, thin or narrow
// no-break space between their groups: every scrub released them until
// h-intl. Each case is tried with ASCII spaces and with each of
// unicodeSpaces in their place.
func TestScrubInternationalNumbers(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"Tel. 0049 30 1234567", "Tel. [PHONE]"},
		{"call 0044 20 7946 0958.", "call [PHONE]."},
		{"0033 1 23 45 67 89", "[PHONE]"},
		{"0041 44 123 45 67", "[PHONE]"},
		{"0049 (0)30 1234567", "[PHONE]"},
		{"0044 7700 900123", "[PHONE]"},
		{"0049 3838 12345", "[PHONE]"},
		{"001 212 555 0100", "[PHONE]"},
		{"0039 06 1234 5678", "[PHONE]"},
		{"0031-20-123-4567", "[PHONE]"},
		{"(0)20 7946 0958", "[PHONE]"},
		{"Tel (0)30 1234567", "Tel [PHONE]"},
		{"0 20 7946 0958", "[PHONE]"},
		{"+44 (0)20 7946 0958", "[PHONE]"},
		{"+33 (0)1 23 45 67 89", "[PHONE]"},
		{"+49 30 1234567", "[PHONE]"},
		{"020 7946 0958", "[PHONE]"},
		{"01 23 45 67 89", "[PHONE]"},
		{"(030) 123 456 78", "[PHONE]"},
		{"089 / 123 45 67", "[PHONE]"},
		{"+1 555 123 4567", "[PHONE]"},
		{"(555) 123 4567", "[PHONE]"},
		{"NHS 943 476 5919", "NHS [PHONE]"},
	} {
		for _, sp := range append([]string{" "}, unicodeSpaces...) {
			in, want := strings.ReplaceAll(tt.in, " ", sp), strings.ReplaceAll(tt.want, " ", sp)
			if got := ScrubString(in); got != want {
				t.Errorf("ScrubString(%q) = %q, want %q", in, got, want)
			}
		}
	}
}
