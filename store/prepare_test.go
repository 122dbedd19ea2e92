package store

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestPreparedEntriesImportAlike: entries made ahead by
// EntryOptions.Preparer (as app.ImportFHIR's read-ahead makes them, in
// the reader's goroutine) import exactly as entries the import makes
// itself (the plain path): the same reports, the same problems, and
// every key and value of every bucket alike, plaintext and encrypted
// (there the blobs' keys), in batches of one and of many, over two
// imports (the second updates, repeats and deletes). Entries prepared
// under another source are made again by the import (its own source
// wins). The inputs hold a lifted attachment before and after its
// carrier, a Binary and a resource linking it, an opt-out Consent, a VIP
// Patient, a repeat and a canonical twin, a deletion, a Kept entry; and,
// refused, every problem prepareEntry finds.
func TestPreparedEntriesImportAlike(t *testing.T) {
	obs := func(text string) Entry {
		return fhirEntry("Observation", "o1", "p1", `{"resourceType":"Observation","id":"o1","status":"final","subject":{"reference":"Patient/p1"},"code":{"text":"`+text+`"}}`)
	}
	doc := fhirEntry("DocumentReference", "d1", "p1", `{"resourceType":"DocumentReference","id":"d1","status":"current","subject":{"reference":"Patient/p1"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/b1"}}]}`)
	doc.Links = []string{"b1"}
	att := Entry{Type: "Attachment", ID: "DocumentReference/d2/content/0", Patient: "p1", Body: []byte("note"),
		MIMEType: "text/plain", Carrier: Carrier{Type: "DocumentReference", ID: "d2"}, Where: "DocumentReference.ndjson:d2"}
	carrier := fhirEntry("DocumentReference", "d2", "p1", `{"resourceType":"DocumentReference","id":"d2","status":"current","subject":{"reference":"Patient/p1"}}`)
	binary := Entry{Type: "Binary", ID: "b1", Patient: "p1", Body: []byte("binary note"), MIMEType: "text/plain", Sensitivity: []string{"psy"}, Where: "Binary.ndjson:1"}
	twin := obs(`x\/y`)
	twin.Where = "b.ndjson:1"
	imports := map[string][]func() []Entry{
		"ok": {
			func() []Entry {
				return []Entry{att, carrier, vipPatient("p1", true), obs("x/y"), doc, binary, consentEntry("c1", "p2", true),
					itemEntry("Patient", "p2", "p2", true), itemEntry("Observation", "o2", "p2", true),
					fhirEntry("Organization", "org1", "", `{"resourceType":"Organization","id":"org1"}`),
					{Type: "Observation", ID: "gone", Deleted: true, Where: "deleted:gone"}, itemEntry("Observation", "o2", "p2", true), twin}
			},
			func() []Entry {
				return []Entry{obs("changed"), {Type: "Observation", ID: "o2", Deleted: true, Where: "deleted:o2"}, carrier,
					{Type: "Organization", ID: "org1", Kept: true, Where: "bundle.json:entry[0]"}, consentEntry("c1", "p2", false), binary}
			},
		},
		"refused": {
			func() []Entry {
				badLink := obs("y")
				badLink.Links = []string{""}
				badCarrier := att
				badCarrier.Carrier = Carrier{Type: "", ID: "d9"} // not named
				return []Entry{
					{Type: "Observation", ID: "", Body: []byte(`{}`), Where: "a.ndjson:1"}, // no id: not named
					fhirEntry("Observation", "o3", "p1", `{"resourceType":"Observation",`), // not JSON
					fhirEntry("Observation", "o4", "p1", `{"resourceType":"Patient","id":"o4"}`),
					badLink, badCarrier, obs("x"), obs("other"),
				}
			},
		},
	}
	n := testNamer(t, "gh")
	for _, name := range slices.Sorted(maps.Keys(imports)) {
		for _, batch := range []int{1, 96} {
			for _, encrypted := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/batch=%d,encrypted=%v", name, batch, encrypted), func(t *testing.T) {
					var dk DataKeys
					if encrypted {
						dk = newFakeKeys(testKEK)
					}
					eopts := EntryOptions{Namer: n, BatchEntries: batch, Now: func() time.Time { return time.Unix(1e9, 0) }}
					paths := map[string]string{}
					for _, way := range []string{"plain", "prepared", "foreign"} {
						paths[way] = filepath.Join(t.TempDir(), "catalog.db")
					}
					for i, input := range imports[name] {
						got := map[string]string{}
						for _, way := range []string{"plain", "prepared", "foreign"} {
							es := input()
							if way != "plain" {
								o := eopts
								if way == "foreign" {
									o.Source = "another"
								}
								prepare, err := o.Preparer()
								if err != nil {
									t.Fatal(err)
								}
								for j := range es {
									prepare(&es[j])
									if es[j].prepared == nil {
										t.Fatalf("entry %d not prepared", j)
									}
								}
							}
							rep, err := ImportEntriesStaged(context.Background(), paths[way], entries(es...), eopts, Options{Timeout: time.Second, DataKeys: dk})
							got[way] = fmt.Sprintf("%+v %v", rep, err)
						}
						if got["prepared"] != got["plain"] || got["foreign"] != got["plain"] {
							t.Errorf("import %d:\nprepared %s\nforeign  %s\nplain    %s", i, got["prepared"], got["foreign"], got["plain"])
						}
						if name == "refused" && len(got["plain"]) < 200 {
							t.Errorf("import %d: %s: want every problem", i, got["plain"])
						}
						if name == "refused" {
							continue // nothing written
						}
						plain := catalogDump(t, paths["plain"], encrypted)
						for _, way := range []string{"prepared", "foreign"} {
							d := catalogDump(t, paths[way], encrypted)
							for _, k := range slices.Sorted(maps.Keys(plain)) {
								if d[k] != plain[k] {
									t.Errorf("import %d: %s: %s %q, plain %q", i, k, way, d[k], plain[k])
								}
							}
							if len(d) != len(plain) {
								t.Errorf("import %d: %d keys %s, %d plain", i, len(d), way, len(plain))
							}
						}
					}
				})
			}
		}
	}
}
