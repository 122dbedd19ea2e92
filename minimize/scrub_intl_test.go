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

type scrubCase struct{ in, want string }

// checkScrubSpaced fails t where ScrubString of a case's in is not its
// want, as written and with each of unicodeSpaces for its spaces.
func checkScrubSpaced(t *testing.T, cases []scrubCase) {
	t.Helper()
	for _, c := range cases {
		for _, sp := range append([]string{" "}, unicodeSpaces...) {
			in, want := strings.ReplaceAll(c.in, " ", sp), strings.ReplaceAll(c.want, " ", sp)
			if got := ScrubString(in); got != want {
				t.Errorf("ScrubString(%q) = %q, want %q", in, got, want)
			}
		}
	}
}

// TestScrubInternationalNumbers: telephone numbers written with "00"
// before the country code, with the trunk prefix shown as optional
// ("(0)20", "0 20"), or with a no-break, figure, thin or narrow
// no-break space between their groups: every scrub released them until
// h-intl. Each case is tried with ASCII spaces and with each of
// unicodeSpaces in their place.
func TestScrubInternationalNumbers(t *testing.T) {
	checkScrubSpaced(t, []scrubCase{
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
	})
}

// TestScrubNationalIdentifiers: national health and citizen numbers in
// free text, each with a check digit that agrees, are replaced; every
// scrub released them until h-intl (NHS numbers apart: a North American
// telephone number's form, they were replaced as [PHONE] before and
// are). Spaced forms are tried with each of unicodeSpaces too. The
// sources of each format are cited at kvnr, nir, medicare, ohip and bsn
// in scrub.go.
func TestScrubNationalIdentifiers(t *testing.T) {
	checkScrubSpaced(t, []scrubCase{
		// Germany, KVNR: § 290 SGB V Anlage 1's worked examples, and one
		// computed by its rule.
		{"KVNR A000500015", "KVNR [ID]"},
		{"C000500021,", "[ID],"},
		{"Versichertennr. A123456780.", "Versichertennr. [ID]."},
		// France, NIR: spaced as the carte Vitale prints it, compact, and
		// Corsica's 2A (python-stdnum's test vector).
		{"NIR 1 84 12 76 451 089 46", "NIR [ID]"},
		{"n° SS 2 55 08 14 168 025 38", "n° SS [ID]"},
		{"255081416802538", "[ID]"},
		{"186022A21532523", "[ID]"},
		{"1.84.12.76.451.089.46", "[ID]"},
		// Australia, Medicare: the NEHTA example 2123 45670 1, with an
		// individual reference number, hyphenated, compact with IRN.
		{"Medicare 2123 45670 1", "Medicare [ID]"},
		{"Medicare 2123 45670 1 2", "Medicare [ID]"},
		{"2123-45670-1", "[ID]"},
		{"21234567012", "[ID]"},
		// Ontario, OHIP: Luhn-valid, with and without the version code.
		{"OHIP 1234 567 897", "OHIP [ID]"},
		{"HCN 1234-567-897-AB", "HCN [ID]"},
		{"1234 567 897 AB", "[ID]"},
		// Ten digits in a run are a telephone number's form, taken first.
		{"1234567897AB", "[PHONE]AB"},
		// The Netherlands, BSN: the 11-proef's usual examples, and as
		// Dutch forms print it, 4.2.3.
		{"BSN 111222333", "BSN [ID]"},
		{"BSN: 123456782.", "BSN: [ID]."},
		{"1112.22.333", "[ID]"},
		// The UK, NHS number (the NHS Data Dictionary's example
		// 943 476 5919): a North American telephone number's form.
		{"NHS 943 476 5919", "NHS [PHONE]"},
		{"NHS 943-476-5919", "NHS [PHONE]"},
		{"NHS 9434765919", "NHS [PHONE]"},
	})
}

// TestScrubNationalIdentifiersNeedTheirCheck: a number of a national
// identifier's form whose check digit does not agree is kept (the
// forms above, one digit changed), and so is one the `ssn` class is not
// asked for.
func TestScrubNationalIdentifiersNeedTheirCheck(t *testing.T) {
	for _, s := range []string{
		"lot A123456789", "A000500016", "1 84 12 76 451 089 47", "255081416802539", "186022A21532524",
		"2123 45671 1", "2123 45670 0", "1234 567 890", "1234-567-898-AB", "111222334", "1112.22.334",
	} {
		if got := ScrubString(s); got != s {
			t.Errorf("ScrubString(%q) = %q, want it unchanged", s, got)
		}
	}
	out, err := Text([]byte("BSN 111222333, NIR 255081416802538"), []Obligation{{Op: OpScrub, Fn: "phone,date"}}, Options{})
	if want := "BSN 111222333, NIR 255081416802538"; err != nil || string(out) != want {
		t.Errorf("scrub phone,date = %q, %v; want %q", out, err, want)
	}
	out, err = Text([]byte("BSN 111222333, NIR 255081416802538"), []Obligation{{Op: OpScrub, Fn: "ssn"}}, Options{})
	if want := "BSN [ID], NIR [ID]"; err != nil || string(out) != want {
		t.Errorf("scrub ssn = %q, %v; want %q", out, err, want)
	}
}

// Full-width digits, as Japanese, Chinese and Korean text writes numbers,
// are read after folding to their canonical width; a string without an
// identifier comes out as it was, full width kept. Until 2026-12-07 every
// pattern missed them (h-review59, h-outside4: 電話 ０３－１２３４－５６７８
// came out whole in a biller's class name).
func TestScrubFullWidthDigits(t *testing.T) {
	for in, want := range map[string]string{
		"電話 ０３－１２３４－５６７８":      "電話 [PHONE]",
		"連絡先：０９０－１２３４－５６７８ まで": "連絡先:[PHONE] まで",
		"ＭＲＮ １２３４５６７":          "[MRN]",
		"ｍａｉｌ ｔａｒｏ＠ｅｘａｍｐｌｅ．ｊｐ": "mail [EMAIL]",
		"生年月日 １９３１－０３－１４":      "生年月日 [DATE]",
		"第２病棟 ３階":              "第２病棟 ３階",
		"ＡＢＣ健康保険組合 ２０２４年度":     "ＡＢＣ健康保険組合 ２０２４年度",
	} {
		got := ScrubString(in)
		if got != want {
			t.Errorf("ScrubString(%q) = %q, want %q", in, got, want)
		}
		if again := ScrubString(got); again != got {
			t.Errorf("ScrubString(%q) is no fixpoint: %q", got, again)
		}
	}
}
