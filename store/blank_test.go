package store

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/custos-mcp/custos/store/storetest"
)

// TestBlankImportSkipsLookupsAlike: an import into a catalog that never
// held a resource skips write's lookups of an entry's earlier URI, last
// version and carried attachments (entryImport.blank); with them (the
// plain path) the same input gives the same report and the same catalog:
// every key and value of every bucket, plaintext and encrypted (there
// the blobs' keys, their values being sealed afresh), in batches of one
// and of many. The input holds what those lookups serve elsewhere: a
// lifted attachment before and after its carrier, a Binary and a
// resource linking it, an opt-out Consent, a VIP Patient, a repeat and
// a canonical twin across batches, the deletion of a resource never
// imported, and tenant-level data. A catalog whose resources were all
// retired is not blank: its import takes the plain path.
func TestBlankImportSkipsLookupsAlike(t *testing.T) {
	input := func() []Entry {
		obs := `{"resourceType":"Observation","id":"o1","status":"final","subject":{"reference":"Patient/p1"},"code":{"text":"x\/y"}}`
		twin := fhirEntry("Observation", "o1", "p1", `{"resourceType":"Observation","id":"o1","status":"final","subject":{"reference":"Patient/p1"},"code":{"text":"x/y"}}`)
		twin.Where = "b.ndjson:1"
		doc := fhirEntry("DocumentReference", "d1", "p1", `{"resourceType":"DocumentReference","id":"d1","status":"current","subject":{"reference":"Patient/p1"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/b1"}}]}`)
		doc.Links = []string{"b1"}
		att := func(carrier string) Entry {
			return Entry{Type: "Attachment", ID: "DocumentReference/" + carrier + "/content/0", Patient: "p1", Body: []byte("note of " + carrier),
				MIMEType: "text/plain", Carrier: Carrier{Type: "DocumentReference", ID: carrier}, Where: "DocumentReference.ndjson:" + carrier}
		}
		carrierDoc := func(id string) Entry {
			return fhirEntry("DocumentReference", id, "p1", `{"resourceType":"DocumentReference","id":"`+id+`","status":"current","subject":{"reference":"Patient/p1"}}`)
		}
		return []Entry{
			att("d2"), carrierDoc("d2"), // the attachment first
			carrierDoc("d3"), att("d3"), // the carrier first
			vipPatient("p1", true),
			fhirEntry("Observation", "o1", "p1", obs),
			doc,
			{Type: "Binary", ID: "b1", Patient: "p1", Body: []byte("binary note"), MIMEType: "text/plain", Sensitivity: []string{"psy"}, Where: "Binary.ndjson:1"},
			consentEntry("c1", "p2", true),
			itemEntry("Patient", "p2", "p2", true),
			itemEntry("Observation", "o2", "p2", true),
			fhirEntry("Organization", "org1", "", `{"resourceType":"Organization","id":"org1"}`),
			{Type: "Observation", ID: "gone", Deleted: true, Where: "deleted:gone"},
			itemEntry("Observation", "o2", "p2", true), // a repeat
			twin,
		}
	}
	n := testNamer(t, "gh")
	eachFastAndPlain(t, &writeSkipsBlank, input, EntryOptions{Namer: n, Now: func() time.Time { return time.Unix(1e9, 0) }},
		func(t *testing.T, encrypted bool, fastRep, plainRep ImportReport, fastPath, plainPath string) {
			if fastRep != plainRep {
				t.Errorf("report skipping the lookups %+v, with them %+v", fastRep, plainRep)
			}
			if fastRep.Repeated != 2 || fastRep.Created != 12 || fastRep.DeletedAbsent != 1 {
				t.Errorf("report %+v: want 12 created, the repeat and the twin repeated, the deletion absent", fastRep)
			}
			fast, plain := catalogDump(t, fastPath, encrypted), catalogDump(t, plainPath, encrypted)
			for _, k := range slices.Sorted(maps.Keys(plain)) {
				if fast[k] != plain[k] {
					t.Errorf("%s: skipping the lookups %q, with them %q", k, fast[k], plain[k])
				}
			}
			if len(fast) != len(plain) {
				t.Errorf("%d keys skipping the lookups, %d with them", len(fast), len(plain))
			}
		})

	// Not blank: every resource retired. The same entry comes back as
	// version 3 (which the skipped lookups find), not as a new version 1.
	path := filepath.Join(t.TempDir(), "catalog.db")
	p := fhirEntry("Patient", "p9", "p9", `{"resourceType":"Patient","id":"p9"}`)
	if _, err := stagedImport(t, path, EntryOptions{}, p); err != nil {
		t.Fatal(err)
	}
	if _, err := stagedImport(t, path, EntryOptions{}, Entry{Type: "Patient", ID: "p9", Deleted: true, Where: "deleted:p9"}); err != nil {
		t.Fatal(err)
	}
	if rep, err := stagedImport(t, path, EntryOptions{}, p); err != nil || rep.Updated != 1 {
		t.Fatalf("re-import after retirement: %+v %v, want updated", rep, err)
	}
	s := openRead(t, path)
	if r, err := s.Get(n.Link("Patient", "p9", "p9")); err != nil || r.Version != 3 {
		t.Fatalf("%+v %v, want version 3", r, err)
	}
}

// catalogDump maps "bucket/hex(key)" to the value of every key of every
// bucket of the catalog at path (of blobs only the keys when sealed, as
// their data keys and nonces are fresh; of meta "label-rules" the version
// and not "settled-txid": they hold bbolt transaction ids, and the plain
// path takes one more transaction, retireUncarried's, for carriers it
// queued and finds nothing to retire for).
func catalogDump(t testing.TB, path string, sealed bool) map[string]string {
	t.Helper()
	return storetest.Dump(t, path, func(name, k, v []byte) ([]byte, bool) {
		switch {
		case sealed && string(name) == string(bucketBlobs):
			return nil, true
		case string(name) == string(bucketMeta) && string(k) == string(metaSettledKey):
			return nil, false
		case string(name) == string(bucketMeta) && string(k) == string(metaLabelRulesKey):
			return v[:min(len(v), 4)], true
		}
		return v, true
	})
}

// eachFastAndPlain imports input with each of eopts into two new catalogs,
// with *fast set (the fast path) and cleared (the plain path), in batches
// of one and of 96, plaintext and encrypted, and hands check both reports
// and catalog paths.
func eachFastAndPlain(t *testing.T, fast *bool, input func() []Entry, eopts EntryOptions,
	check func(t *testing.T, encrypted bool, fastRep, plainRep ImportReport, fastPath, plainPath string)) {
	for _, batch := range []int{1, 96} {
		for _, encrypted := range []bool{false, true} {
			t.Run(fmt.Sprintf("batch=%d,encrypted=%v", batch, encrypted), func(t *testing.T) {
				run := func(on bool) (ImportReport, string) {
					t.Helper()
					defer func(old bool) { *fast = old }(*fast)
					*fast = on
					var dk DataKeys
					if encrypted {
						dk = newFakeKeys(testKEK)
					}
					path := filepath.Join(t.TempDir(), "catalog.db")
					o := eopts
					o.BatchEntries = batch
					rep, err := ImportEntriesStaged(context.Background(), path, entries(input()...), o, Options{Timeout: time.Second, DataKeys: dk})
					if err != nil {
						t.Fatal(err)
					}
					return rep, path
				}
				fastRep, fastPath := run(true)
				plainRep, plainPath := run(false)
				check(t, encrypted, fastRep, plainRep, fastPath, plainPath)
			})
		}
	}
}
