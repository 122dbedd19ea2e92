package minimize

import "testing"

// Golden vectors of the check algorithms, each from the source cited at
// its code, and the same code with one character changed.
func TestScrubCheckAlgorithms(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func(string) bool
		core  string
		want  bool
	}{
		{"vin", vinCheck, "1G4AH59H45G118341", true}, // 49 CFR 565.15(c), Table V
		{"vin", vinCheck, "1G4AH59H55G118341", false},
		{"vin", vinCheck, "1M8GDM9AXKP042788", true},  // check digit X
		{"vin", vinCheck, "11111111111111111", false}, // digits alone: none
		{"dni", dniCheck, "54362315K", true},          // python-stdnum es/dni.py
		{"dni", dniCheck, "54362315-K", true},
		{"dni", dniCheck, "54362315Z", false},
		{"nie", dniCheck, "X1234567L", true},
		{"nie", dniCheck, "Y1234567X", true},
		{"nie", dniCheck, "X1234567M", false},
		{"dni", dniCheck, "1234567L", false},      // seven digits: no DNI
		{"cf", cfCheck, "CCCFBA85D03L219P", true}, // python-codicefiscale README
		{"cf", cfCheck, "RSSMRA85T10A562S", true},
		{"cf", cfCheck, "RSSMRA85T10A562T", false},
		{"cf", cfCheck, "RSSMRAURTMLARSNL", false}, // letters alone: not taken
	} {
		if got := c.check(c.core); got != c.want {
			t.Errorf("%s check(%q) = %v, want %v", c.name, c.core, got, c.want)
		}
	}
}

// safeHarborPrefilterCases are strings of the url and id classes, near
// misses included, for the prefilter agreement (checkPrefilters) and the
// fuzz seeds.
var safeHarborPrefilterCases = []string{
	"see https://portal.example.org/patient/12345?id=abc.", "www.janedoe.com", "WWW.EXAMPLE.COM/p/88", "wWw.example.com",
	"HTTP://EXAMPLE.ORG/X", "ftp:/x", "http:/www", "2001:db8::1", "fe80::1ff:fe23:4567:890a", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7",
	"::", ":::", "a::1", "(01)00844588003288(21)AB12", "(01)0084458800328", "(0l)00844588003288", "10.0.0.7:53122",
	"\u017ferial no. 12345ABC", "\u212aontonummer 12345", "ACCT 12345", "xacct 12345", "_acct 12345", "1acct 12345", "health\tplan id 12345",
	"health  plan 1234", "Plan\tNo 1234", "plan#1234", "SSN 1234", "SN : 1234", "DL\nNo 1234", "mg/dL 1234", "INSURANCE 1234", "INS 1234",
	"Kennzeichen M-XY 123", "number plate AB12", "plate B 1", "VIN 1G4AH59H45G118341x", "54362315K", "X1234567-L", "1.2.3.4", "1.2.3 .4",
	"1:2:3:4:5:6:7:8", "a:b::c", "12:30:45 1:2:3:4", "電話 〇三‐三六五七‐四四一八", "〇一二", "tel 555\u2013123\u20134567", "BSN 111 222 333", "Acct 12345678", "VIN 1G4AH59H45G118341",
}

// TestScrubSafeHarborPrefiltersAgree: the prefilters of the url and id
// classes' patterns (mayHoldURL, mayHoldIPv6, mayHoldUDI) are false only
// where their plain regexps find nothing.
func TestScrubSafeHarborPrefiltersAgree(t *testing.T) {
	for _, s := range safeHarborPrefilterCases {
		checkPrefilters(t, s)
	}
}
