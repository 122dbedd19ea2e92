package store

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// openLiveErr opens path as serve does (OpenLive) and closes it.
func openLiveErr(t *testing.T, path string, opts Options) error {
	t.Helper()
	opts.Timeout = time.Second
	l, err := OpenLive(path, LiveOptions{Options: opts})
	if err == nil {
		l.Close()
	}
	return err
}

// TestSettledMarker: every write this custos makes to a catalog (streaming
// import, manifest import, a full import's retirements, reencrypt and its
// compaction) leaves it opening for serve; one write transaction that does
// not keep the marker (what a custos older than the marker does: here a
// bare bbolt write) makes OpenLive refuse it with ErrUnsettledLabels, as
// does a catalog without the marker (written before it), until a streaming
// import by this custos rebuilds the label indexes and settles every label.
// Before the marker OpenLive opened both.
func TestSettledMarker(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	live := func(step string, opts Options) {
		t.Helper()
		if err := openLiveErr(t, path, opts); err != nil {
			t.Fatalf("after %s: OpenLive = %v, want it to open", step, err)
		}
	}
	refused := func(step string, opts Options) {
		t.Helper()
		err := openLiveErr(t, path, opts)
		if !errors.Is(err, ErrUnsettledLabels) || !strings.Contains(err.Error(), "older than this one") {
			t.Fatalf("after %s: OpenLive = %v, want ErrUnsettledLabels saying a custos older than this one changed the labels", step, err)
		}
	}
	day1 := []Entry{itemEntry("Patient", "p1", "p1", false), consentEntry("c1", "p1", true), itemEntry("Observation", "o1", "p1", false)}
	if _, err := stagedImport(t, path, EntryOptions{}, day1...); err != nil {
		t.Fatal(err)
	}
	live("a streaming import", Options{})

	f := newFixture(t)
	f.addN(2)
	f.writeManifest()
	if _, err := ImportStaged(ctx, path, f.dir, Options{Timeout: time.Second}, nil); err != nil {
		t.Fatal(err)
	}
	live("a manifest import", Options{})

	if rep, err := stagedImport(t, path, EntryOptions{Full: true}, day1[:2]...); err != nil || rep.Retired != 1 {
		t.Fatalf("full import: %+v %v, want o1 retired", rep, err)
	}
	live("a full import's retirement", Options{})

	dk := newFakeKeys(testKEK)
	s := openKeyed(t, path, Options{DataKeys: dk, Migrate: true})
	if st, err := s.Reencrypt(ctx, nil); err != nil || !st.Compacted {
		t.Fatalf("reencrypt: %+v %v", st, err)
	}
	s.Close()
	keyed := Options{DataKeys: dk}
	live("reencrypt and its compaction", keyed)

	settle := func(step string) {
		t.Helper()
		es := append(day1[:2:2], itemEntry("Observation", "o2", "p1", false))
		// Full: the older custos's write leaves the label rules version
		// behind too (labelrules.go), and only an import that derives every
		// live item's labels records it again.
		if _, err := ImportEntriesStaged(ctx, path, entries(es...), EntryOptions{Namer: testNamer(t, "gh"), Full: true}, Options{DataKeys: dk, Timeout: time.Second}); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		live(step, keyed)
		checkDB(t, path)
		rs := openKeyed(t, path, Options{DataKeys: dk, ReadOnly: true})
		for _, r := range allResources(t, rs) {
			if r.Labels.Patient == "p1" && !slices.Contains(r.Labels.Consent, ConsentOptOut) {
				t.Errorf("%s: %s of p1 lacks opt-out", step, r.Labels.Type)
			}
		}
		rs.Close()
	}

	// An older custos's write: the opt-out index emptied and the marker
	// left as it was (it does not know it).
	editDB(t, path, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketOptOut); err != nil {
			return err
		}
		_, err := tx.CreateBucket(bucketOptOut)
		return err
	})
	refused("a write by an older custos", keyed)
	settle("the re-import after the older custos")

	// A catalog written before the marker: refused until re-imported.
	editDB(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(metaSettledKey) })
	refused("the marker removed", keyed)
	settle("the re-import of a catalog from before the marker")
}
