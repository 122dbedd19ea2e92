package e2e

import "testing"

// TestLeakAt pins what the log scan of checkNoPHIInLogs counts as an
// identifier: a word anywhere; all-digit identifiers only outside longer
// hexadecimal runs (numbers, random ids, digests).
func TestLeakAt(t *testing.T) {
	for _, c := range []struct {
		logs, needle string
		leak         bool
	}{
		{`"city":"Springfield IL 62720"`, "62720", true},
		{`zip=62720-1234`, "62720", true},
		{`"id":"2e62720d" then 62720.`, "62720", true}, // the second one
		{`"decision_id":"7f83df63-ee1c-4917-b3ae-2e62720d87a5"`, "62720", false},
		{`"revision":"sha256:ab62720"`, "62720", false},
		{`took 1627201ms`, "62720", false},
		{`"name":"Evelyn Marsh"`, "Marsh", true},
		{`"name":"Evelyn Marshall"`, "Marsh", true}, // a word counts even inside another
		{`nothing here`, "62720", false},
	} {
		at := leakAt(c.logs, c.needle)
		if (at >= 0) != c.leak || (at >= 0 && c.logs[at:at+len(c.needle)] != c.needle) {
			t.Errorf("leakAt(%q, %q) = %d, want a leak: %v", c.logs, c.needle, at, c.leak)
		}
		if c.needle == "62720" && c.leak && c.logs[at-1] == 'e' {
			t.Errorf("leakAt(%q) found the digits inside a hex run at %d", c.logs, at)
		}
	}
}
