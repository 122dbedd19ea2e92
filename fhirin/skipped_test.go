package fhirin

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadCountsSkippedEntries: the Bundle entries Read leaves out on
// purpose, beside importable ones, are counted by kind (Options.Skipped):
// GET and HEAD requests without a resource as reads; a searchset's
// OperationOutcome without search.mode or with mode outcome, and one with
// mode outcome in a collection, as search outcomes. A searchset's include
// is imported, as it was. Before, they were dropped and nothing said how
// many.
func TestReadCountsSkippedEntries(t *testing.T) {
	const path = "testdata/skipped-entries.json"
	var got Skipped
	var ids []string
	err := Read(context.Background(), path, Options{Link: testLink, Skipped: &got}, func(it Item) error {
		ids = append(ids, it.Type+"/"+it.ID)
		return nil
	})
	if err != nil {
		t.Fatalf("Read(%s): %v", path, err)
	}
	if want := (Skipped{Reads: 3, Outcomes: 3}); got != want {
		t.Errorf("Read(%s) skipped %+v, want %+v", path, got, want)
	}
	slices.Sort(ids)
	if want := []string{"Observation/sk-o1", "Organization/sk-org1", "Patient/sk-p1", "Patient/sk-p2", "Practitioner/sk-pr1"}; !slices.Equal(ids, want) {
		t.Errorf("Read(%s) yielded %v, want %v", path, ids, want)
	}
	// The three readings of a Bundle count the same (readBothAgree).
	if r := readBothAgree(t, path); r.skipped != got {
		t.Errorf("readBothAgree(%s) skipped %+v, Read %+v", path, r.skipped, got)
	}
}

// TestReadFailedLeavesSkipped: a Read that fails does not set
// Options.Skipped: what it counted is no account of an import.
func TestReadFailedLeavesSkipped(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "b.json")
	if err := os.WriteFile(bad, []byte(`{"resourceType":"Bundle","type":"batch","entry":[{"request":{"method":"GET","url":"Patient/1"}},{"request":{"method":"MERGE","url":"Patient/1"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sentinel := Skipped{Reads: -1, Outcomes: -1}
	got := sentinel
	if err := Read(context.Background(), bad, Options{Link: testLink, Skipped: &got}, func(Item) error { return nil }); err == nil {
		t.Fatal("Read of a Bundle with an unknown request method succeeded")
	}
	if got != sentinel {
		t.Errorf("a failed Read set Skipped to %+v", got)
	}
}
