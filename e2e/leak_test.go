package e2e

import (
	"strings"
	"testing"
)

// TestLeakAt pins what the log scan of checkNoPHIInLogs counts as an
// identifier: a word anywhere; all-digit identifiers only outside longer
// hexadecimal runs (numbers, random ids, digests).
func TestLeakAt(t *testing.T) {
	for _, c := range []struct {
		logs, needle string
		want         int // where the leak is, -1 for none
	}{
		{`"city":"Springfield IL 62720"`, "62720", strings.Index(`"city":"Springfield IL 62720"`, "62720")},
		{`zip=62720-1234`, "62720", 4},
		{`"id":"2e62720d" then 62720.`, "62720", strings.LastIndex(`"id":"2e62720d" then 62720.`, "62720")}, // not the one in the id
		{`"decision_id":"7f83df63-ee1c-4917-b3ae-2e62720d87a5"`, "62720", -1},
		{`"revision":"sha256:ab62720"`, "62720", -1},
		{`took 1627201ms`, "62720", -1},
		{`"name":"Evelyn Marsh"`, "Marsh", 15},
		{`"name":"Evelyn Marshall"`, "Marsh", 15}, // a word counts even inside another
		{`nothing here`, "62720", -1},
	} {
		if got := leakAt(c.logs, c.needle); got != c.want {
			t.Errorf("leakAt(%q, %q) = %d, want %d", c.logs, c.needle, got, c.want)
		}
	}
}
