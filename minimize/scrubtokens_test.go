package minimize

import (
	"regexp"
	"strings"
	"testing"
)

// TestScrubTokensAreEveryToken: ScrubTokens holds every token ScrubString
// writes, of every class and of the HL7 v2 fields (policy/btg counts a
// grant's reason without them), and nothing that is not one.
func TestScrubTokensAreEveryToken(t *testing.T) {
	tokens := ScrubTokens()
	known := map[string]bool{}
	for _, tok := range tokens {
		known[tok] = true
	}
	bracket := regexp.MustCompile(`\[[A-Z]+\]`)
	seen := map[string]bool{}
	for _, in := range []string{
		"call 555-123-4567", "jane.doe@example.org", "j dot doe at example dot com", "SSN 123-45-6789",
		"KVNR A000500015", "MRN: E4417206", "FIN 12345678", "born 2024-03-05", "https://portal.example.org/patient/12345",
		"host 192.168.14.27", "member ID: XYZ123",
		"PID|1||58203391^^^SMH^MR||Doe^Jane||19480229|F|||1 Main St^^Town||^PRN^PH^^^715^5550162|||||123456789",
	} {
		out := ScrubString(in)
		if out == in {
			t.Errorf("ScrubString(%q) replaced nothing: the case shows no token", in)
		}
		for _, tok := range bracket.FindAllString(out, -1) {
			seen[tok] = true
			if !known[tok] {
				t.Errorf("ScrubString(%q) = %q: token %s is not in ScrubTokens %v", in, out, tok, tokens)
			}
		}
		for _, tok := range tokens {
			out = strings.ReplaceAll(out, tok, "")
		}
		if bracket.MatchString(out) {
			t.Errorf("ScrubString(%q) without ScrubTokens still holds a token: %q", in, out)
		}
	}
	for _, want := range []string{"[PHONE]", "[EMAIL]", "[SSN]", "[ID]", "[MRN]", "[DATE]", "[URL]", "[IP]", "[NAME]", "[ADDRESS]"} {
		if !known[want] {
			t.Errorf("ScrubTokens %v lacks %s", tokens, want)
		}
		if !seen[want] {
			t.Errorf("no case here made %s", want)
		}
	}
	for _, tok := range tokens {
		if !bracket.MatchString(tok) || bracket.FindString(tok) != tok {
			t.Errorf("ScrubTokens holds %q, no token", tok)
		}
	}
}
