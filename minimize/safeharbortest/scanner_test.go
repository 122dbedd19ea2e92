package safeharbortest

import (
	"regexp"
	"testing"
)

// TestAliasIsNotAnIDToken: a research alias (a UUID) whose first group is
// a letter and digits, "e5252988-...", is shown to the caller by design
// and must not be flagged as an identifier token; an MRN-like token next
// to it still is. Before the fix, about one alias in ten was flagged.
func TestAliasIsNotAnIDToken(t *testing.T) {
	s := NewScanner(2026)
	alias := regexp.MustCompile(`^Patient/[0-9a-f-]{36}$`)
	s.PermitReferences(alias.MatchString)
	clean := []byte(`{"resourceType":"Observation","subject":{"reference":"Patient/e5252988-4b1c-8d2e-9f00-123456789abc"}}`)
	if f := s.Scan(clean); len(f) != 0 {
		t.Fatalf("a permitted alias is flagged: %v", f)
	}
	dirty := []byte(`{"resourceType":"Observation","subject":{"reference":"Patient/e5252988-4b1c-8d2e-9f00-123456789abc"},"note":[{"text":"seen as W123456789"}]}`)
	found := false
	for _, f := range s.Scan(dirty) {
		found = found || f.Class == ClassOtherUnique
	}
	if !found {
		t.Fatal("an identifier token next to an alias is no longer found")
	}
}
