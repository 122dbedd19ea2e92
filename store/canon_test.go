package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReimportCanonicallyEqual: a re-import of a FHIR resource whose bytes
// differ from the live version's but whose JSON is the same in canonical
// form (key order, whitespace, string escapes) is Unchanged and keeps the
// stored version and bytes (issue 14: "A re-import creates new versions
// only for what changed"); a real change of content, labels, lastUpdated
// or patient is a new version; an attachment, JSON or not, is compared
// byte for byte. In a plaintext and an encrypted catalog, in batches of
// one and of many. Before the fix every variant was Updated.
func TestReimportCanonicallyEqual(t *testing.T) {
	obs := `{"resourceType":"Observation","id":"obs-1","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8867-4","display":"Heart rate"}],"text":"Café"},"subject":{"reference":"Patient/p1"},"valueQuantity":{"value":6.10,"unit":"/min"}}`
	doc := `{"resourceType":"DocumentReference","id":"d1","status":"current","subject":{"reference":"Patient/p1"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/b1"}}]}`
	jsonAtt := `{"b":1,"a":2}`
	base := func() []Entry {
		docE := fhirEntry("DocumentReference", "d1", "p1", doc)
		docE.Links = []string{"b1"}
		docE.Sensitivity = []string{"hiv"}
		return []Entry{
			fhirEntry("Patient", "p1", "p1", `{"resourceType":"Patient","id":"p1"}`),
			fhirEntry("Observation", "obs-1", "p1", obs),
			docE,
			{Type: "Binary", ID: "b1", Patient: "p1", Body: []byte("note text"), MIMEType: "text/plain", Sensitivity: []string{"hiv"}, Where: "Binary.ndjson:1"},
			{Type: "Attachment", ID: "DocumentReference/d2/content/0", Patient: "p1", Body: []byte(jsonAtt), MIMEType: "application/json",
				Carrier: Carrier{Type: "DocumentReference", ID: "d2"}, Where: "DocumentReference.ndjson:2"},
		}
	}
	// with replaces the body of the entry of type typ.
	with := func(es []Entry, typ, body string) []Entry {
		for i := range es {
			if es[i].Type == typ {
				es[i].Body = []byte(body)
			}
		}
		return es
	}
	n := testNamer(t, "gh")
	obsURI := n.Link("Observation", "obs-1", "p1")
	docURI := n.Link("DocumentReference", "d1", "p1")

	for _, c := range []struct {
		batch     int
		encrypted bool
	}{{1, false}, {96, false}, {1, true}, {96, true}} {
		t.Run(fmt.Sprintf("batch=%d,encrypted=%v", c.batch, c.encrypted), func(t *testing.T) {
			var sopts Options
			var dk *fakeKeys
			if c.encrypted {
				dk = newFakeKeys(testKEK)
				sopts.DataKeys = dk
			}
			opts := EntryOptions{Namer: n, BatchEntries: c.batch}
			imp := func(t *testing.T, path string, es []Entry) ImportReport {
				t.Helper()
				rep, err := ImportEntriesStaged(context.Background(), path, entries(es...), opts, Options{Timeout: time.Second, DataKeys: sopts.DataKeys})
				if err != nil {
					t.Fatal(err)
				}
				return rep
			}
			fresh := func(t *testing.T) string {
				t.Helper()
				path := filepath.Join(t.TempDir(), "catalog.db")
				if rep := imp(t, path, base()); rep.Created != 5 {
					t.Fatalf("first import: %+v", rep)
				}
				return path
			}
			get := func(t *testing.T, path, uri string) (Resource, string) {
				t.Helper()
				s, err := Open(path, Options{ReadOnly: true, DataKeys: sopts.DataKeys, Timeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				r, err := s.Get(uri)
				if err != nil {
					t.Fatal(err)
				}
				b, err := s.Blob(context.Background(), r.Digest)
				if err != nil {
					t.Fatal(err)
				}
				return r, string(b)
			}

			// The same resources, serialized otherwise: Unchanged, the
			// stored version and bytes kept, no blob added or sealed.
			for _, v := range []struct {
				name     string
				es       []Entry
				unchange int
			}{
				{"key order", with(base(), "Observation", `{"id":"obs-1","resourceType":"Observation","code":{"text":"Café","coding":[{"code":"8867-4","display":"Heart rate","system":"http://loinc.org"}]},"status":"final","valueQuantity":{"unit":"/min","value":6.10},"subject":{"reference":"Patient/p1"}}`), 5},
				{"whitespace", with(base(), "Observation", "{\n  \"resourceType\": \"Observation\",\n  \"id\": \"obs-1\",\n  \"status\": \"final\",\n  \"code\": {\"coding\": [{\"system\": \"http://loinc.org\", \"code\": \"8867-4\", \"display\": \"Heart rate\"}], \"text\": \"Café\"},\n  \"subject\": {\"reference\": \"Patient/p1\"},\n  \"valueQuantity\": {\"value\": 6.10, \"unit\": \"/min\"}\n}\n"), 5},
				{"escapes", with(base(), "Observation", strings.NewReplacer("/", `\/`, "é", `\u00e9`).Replace(obs)), 5},
				{"escaped link", with(base(), "DocumentReference", strings.Replace(doc, "Binary/b1", `Binary\/b1`, 1)), 5},
			} {
				t.Run(v.name, func(t *testing.T) {
					path := fresh(t)
					blobsBefore := func() int { s := openKeyed(t, path, sopts); defer s.Close(); return blobCount(t, s) }()
					var sealed int64
					if dk != nil {
						sealed = dk.newCalls.Load()
					}
					rep := imp(t, path, v.es)
					if rep.Unchanged != v.unchange || rep.Updated != 0 || rep.Created != 0 || rep.Relabelled != 0 || rep.Retired != 0 {
						t.Errorf("report %+v, want %d unchanged and nothing else", rep, v.unchange)
					}
					for uri, want := range map[string]string{obsURI: obs, docURI: doc} {
						if r, b := get(t, path, uri); r.Version != 1 || b != want {
							t.Errorf("%s: version %d, bytes %q; want version 1 with the stored bytes", uri, r.Version, b)
						}
					}
					s := openKeyed(t, path, sopts)
					if got := blobCount(t, s); got != blobsBefore {
						t.Errorf("%d blobs, want %d (none added)", got, blobsBefore)
					}
					s.Close()
					if dk != nil && dk.newCalls.Load() != sealed {
						t.Errorf("%d data keys made, want none", dk.newCalls.Load()-sealed)
					}
					checkDB(t, path)
				})
			}

			// The same bytes: nothing read back (no data key unwrapped).
			t.Run("same bytes", func(t *testing.T) {
				path := fresh(t)
				var unwrapped int64
				if dk != nil {
					unwrapped = dk.unwrapCalls.Load()
				}
				if rep := imp(t, path, base()); rep.Unchanged != 5 {
					t.Errorf("report %+v, want 5 unchanged", rep)
				}
				if dk != nil && dk.unwrapCalls.Load() != unwrapped {
					t.Errorf("%d data keys unwrapped, want none", dk.unwrapCalls.Load()-unwrapped)
				}
			})

			// A second import of the canonical twin, in the same input as
			// a repeat of it: imported once, Unchanged, and the repeat
			// recognized (its first occurrence's content is the stored one).
			t.Run("twin repeated", func(t *testing.T) {
				path := fresh(t)
				twin := fhirEntry("Observation", "obs-1", "p1", strings.Replace(obs, "/", `\/`, -1))
				twin.Where = "b.ndjson:1"
				rep := imp(t, path, append(with(base(), "Observation", strings.Replace(obs, `"id"`, ` "id"`, 1)), twin))
				if rep.Unchanged != 5 || rep.Repeated != 1 || rep.Updated != 0 {
					t.Errorf("report %+v, want 5 unchanged, 1 repeated", rep)
				}
			})

			// Real changes: a new version each.
			for _, v := range []struct {
				name string
				es   []Entry
				uri  string
				body string
			}{
				{"content", with(base(), "Observation", strings.Replace(obs, "final", "amended", 1)), obsURI, strings.Replace(obs, "final", "amended", 1)},
				{"number as written", with(base(), "Observation", strings.Replace(obs, "6.10", "6.1", 1)), obsURI, strings.Replace(obs, "6.10", "6.1", 1)},
				{"number with an exponent", with(base(), "Observation", strings.Replace(obs, "6.10", "0.610e1", 1)), obsURI, strings.Replace(obs, "6.10", "0.610e1", 1)},
				{"a surrogate escape", with(base(), "Observation", strings.Replace(obs, "Café", `Caf\ud800`, 1)), obsURI, strings.Replace(obs, "Café", `Caf\ud800`, 1)},
				{"labels", func() []Entry {
					es := with(base(), "Observation", strings.Replace(obs, "/", `\/`, -1))
					es[1].Sensitivity = []string{"psy"}
					return es
				}(), obsURI, strings.Replace(obs, "/", `\/`, -1)},
				{"lastUpdated", func() []Entry {
					es := with(base(), "Observation", strings.Replace(obs, "/", `\/`, -1))
					es[1].LastUpdated = time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
					return es
				}(), obsURI, strings.Replace(obs, "/", `\/`, -1)},
			} {
				t.Run(v.name, func(t *testing.T) {
					path := fresh(t)
					rep := imp(t, path, v.es)
					if rep.Updated != 1 || rep.Unchanged != 4 {
						t.Errorf("report %+v, want 1 updated, 4 unchanged", rep)
					}
					if r, b := get(t, path, v.uri); r.Version != 2 || b != v.body {
						t.Errorf("version %d, bytes %q; want version 2 with the new bytes", r.Version, b)
					}
					checkDB(t, path)
				})
			}
			t.Run("patient", func(t *testing.T) {
				path := fresh(t)
				es := with(base(), "Observation", strings.Replace(obs, "/", `\/`, -1))
				es[1].Patient = "p2"
				es = append(es, fhirEntry("Patient", "p2", "p2", `{"resourceType":"Patient","id":"p2"}`))
				rep := imp(t, path, es)
				if rep.Created != 2 || rep.Retired != 1 || rep.Unchanged != 4 {
					t.Errorf("report %+v, want 2 created (the patient and the moved observation), 1 retired, 4 unchanged", rep)
				}
			})
			// Attachments are bytes: a JSON attachment with its keys
			// reordered is a change.
			t.Run("json attachment", func(t *testing.T) {
				path := fresh(t)
				rep := imp(t, path, with(base(), "Attachment", `{"a":2,"b":1}`))
				if rep.Updated != 1 || rep.Unchanged != 4 {
					t.Errorf("report %+v, want 1 updated, 4 unchanged", rep)
				}
			})
			t.Run("text Binary", func(t *testing.T) {
				path := fresh(t)
				rep := imp(t, path, with(base(), "Binary", "note text\n"))
				if rep.Updated != 1 || rep.Unchanged != 4 {
					t.Errorf("report %+v, want 1 updated, 4 unchanged", rep)
				}
			})
		})
	}
}

// TestEtagMember: keepStored's shortcut finds a record's digest as
// encoding/json writes it (were the member renamed, every entry's record
// would be decoded, and this fails).
func TestEtagMember(t *testing.T) {
	d := Digest([]byte("x"))
	b, err := json.Marshal(Resource{URI: "fhir://t/organization/" + goldenPatient, Digest: d, Size: 1})
	if err != nil || !bytes.Contains(b, etagMember(d)) {
		t.Fatalf("%s does not hold %s (%v)", b, etagMember(d), err)
	}
}

// TestReimportCanonicallyEqualKeepsLinks: a resource re-imported as its
// canonical twin keeps its link index pairs (TestLinkIndexAgreesWithScan's
// invariant) and, with labels its Binary gave it, is not relabelled.
func TestReimportCanonicallyEqualKeepsLinks(t *testing.T) {
	n := testNamer(t, "gh")
	path := filepath.Join(t.TempDir(), "catalog.db")
	doc := `{"resourceType":"DocumentReference","id":"d1","subject":{"reference":"Patient/p1"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/b1"}}]}`
	docE := fhirEntry("DocumentReference", "d1", "p1", doc)
	docE.Links = []string{"b1"}
	bin := Entry{Type: "Binary", ID: "b1", Patient: "p1", Body: []byte("x"), MIMEType: "text/plain", Sensitivity: []string{"hiv"}, Where: "Binary.ndjson:1"}
	if rep, err := stagedImport(t, path, EntryOptions{Namer: n}, docE, bin); err != nil || rep.Created != 2 || rep.Relabelled != 1 {
		t.Fatalf("first import: %+v %v (want the DocumentReference relabelled hiv)", rep, err)
	}
	// The reader now labels the DocumentReference as its Binary is
	// (fhirin's StoredBinary): the entry carries hiv.
	twin := fhirEntry("DocumentReference", "d1", "p1", strings.Replace(doc, "Binary/b1", `Binary\/b1`, 1))
	twin.Links, twin.Sensitivity = []string{"b1"}, []string{"hiv"}
	rep, err := stagedImport(t, path, EntryOptions{Namer: n}, twin)
	if err != nil || rep.Unchanged != 1 || rep.Updated+rep.Relabelled != 0 {
		t.Fatalf("re-import: %+v %v, want 1 unchanged", rep, err)
	}
	s := openRead(t, path)
	r, err := s.Get(n.Link("DocumentReference", "d1", "p1"))
	if err != nil || r.Version != 2 || !slices.Equal(r.Labels.Sensitivity, []string{"hiv"}) {
		t.Fatalf("%+v %v", r, err)
	}
	s.Close()
	checkLinkIndex(t, path, Options{}, n)
}

// TestReimportCanonicallyEqualOptedOut: the live version of an opted-out
// patient's resource carries the consent label "opt-out" (the catalog's,
// not the entry's); its canonical twin, whose entry lacks it, is
// Unchanged, as write labels it before it compares.
func TestReimportCanonicallyEqualOptedOut(t *testing.T) {
	n := testNamer(t, "gh")
	path := filepath.Join(t.TempDir(), "catalog.db")
	consent := fhirEntry("Consent", "c1", "p1", `{"resourceType":"Consent","id":"c1","status":"active","provision":{"type":"deny"}}`)
	consent.OptOut = true
	obs := `{"resourceType":"Observation","id":"o1","subject":{"reference":"Patient/p1"}}`
	if rep, err := stagedImport(t, path, EntryOptions{Namer: n}, consent, fhirEntry("Observation", "o1", "p1", obs)); err != nil || rep.Created != 2 {
		t.Fatalf("first import: %+v %v", rep, err)
	}
	rep, err := stagedImport(t, path, EntryOptions{Namer: n}, fhirEntry("Observation", "o1", "p1", strings.Replace(obs, "/", `\/`, 1)))
	if err != nil || rep.Unchanged != 1 || rep.Updated+rep.Relabelled != 0 {
		t.Fatalf("re-import: %+v %v, want 1 unchanged", rep, err)
	}
	s := openRead(t, path)
	r, err := s.Get(n.Link("Observation", "o1", "p1"))
	if err != nil || r.Version != 1 || !slices.Equal(r.Labels.Consent, []string{ConsentOptOut}) {
		t.Fatalf("%+v %v", r, err)
	}
}

// TestReimportLoneSurrogateIsAChange: encoding/json decodes every \u
// escape of a lone UTF-16 surrogate to U+FFFD, so "\ud800", "\udbff" and
// "\ufffd" were one canonical form and a re-import that changed one into
// another was Unchanged, the old bytes kept and served (a JavaScript
// reader tells the three strings apart). A surrogate escape makes the
// content compare by bytes: a new version.
func TestReimportLoneSurrogateIsAChange(t *testing.T) {
	n := testNamer(t, "gh")
	path := filepath.Join(t.TempDir(), "catalog.db")
	obs := `{"resourceType":"Observation","id":"o1","status":"final","subject":{"reference":"Patient/p1"},"note":[{"text":"a\ud800b"}]}`
	if rep, err := stagedImport(t, path, EntryOptions{Namer: n}, fhirEntry("Observation", "o1", "p1", obs)); err != nil || rep.Created != 1 {
		t.Fatalf("first import: %+v %v", rep, err)
	}
	// Each body is compared with the one before it, the live version.
	for _, next := range []string{`a\udbffb`, `a\ufffdb`, `a\ud83d\ude00b`} {
		body := strings.Replace(obs, `a\ud800b`, next, 1)
		rep, err := stagedImport(t, path, EntryOptions{Namer: n}, fhirEntry("Observation", "o1", "p1", body))
		if err != nil || rep.Updated != 1 {
			t.Errorf("re-import with %s: %+v %v, want 1 updated", next, rep, err)
		}
	}
	s := openRead(t, path)
	defer s.Close()
	r, err := s.Get(n.Link("Observation", "o1", "p1"))
	if err != nil || r.Version != 4 {
		t.Fatalf("%+v %v, want version 4", r, err)
	}
}

// TestReimportCanonicalTwinKeyErrorFailsClosed: keepStored reads the
// stored content back (decrypted) to compare it; when the key provider
// fails, the import fails with ErrDataKey, naming no content, and the
// catalog keeps its version (neither Unchanged counted on trust nor a new
// version written). A keepStored that skipped a candidate it could not
// read would import the twin as Updated, and this fails.
func TestReimportCanonicalTwinKeyErrorFailsClosed(t *testing.T) {
	n := testNamer(t, "gh")
	path := filepath.Join(t.TempDir(), "catalog.db")
	dk := newFakeKeys(testKEK)
	opts := Options{Timeout: time.Second, DataKeys: dk}
	obs := `{"resourceType":"Observation","id":"o1","status":"final","subject":{"reference":"Patient/p1"},"note":[{"text":"Evelyn Marsh"}]}`
	imp := func(body string) (ImportReport, error) {
		return ImportEntriesStaged(context.Background(), path, entries(fhirEntry("Observation", "o1", "p1", body)), EntryOptions{Namer: n}, opts)
	}
	if rep, err := imp(obs); err != nil || rep.Created != 1 {
		t.Fatalf("first import: %+v %v", rep, err)
	}
	down := errFakeUnavailable
	dk.unwrapErr.Store(&down)
	rep, err := imp(strings.Replace(obs, "/", `\/`, 1))
	if !errors.Is(err, ErrDataKey) || rep.Unchanged+rep.Updated != 0 {
		t.Fatalf("re-import with the key provider down: %+v %v, want ErrDataKey", rep, err)
	}
	if strings.Contains(err.Error(), "Evelyn") {
		t.Fatalf("error names content: %v", err)
	}
	dk.unwrapErr.Store(nil)
	s := openKeyed(t, path, Options{DataKeys: dk})
	defer s.Close()
	r, err := s.Get(n.Link("Observation", "o1", "p1"))
	if err != nil || r.Version != 1 {
		t.Fatalf("%+v %v, want version 1", r, err)
	}
	if b, err := s.Blob(context.Background(), r.Digest); err != nil || string(b) != obs {
		t.Fatalf("stored %q %v, want the first bytes", b, err)
	}
}

// TestFreshImportSkipsKeepStoredAlike: an import into a catalog that holds
// no resource skips keepStored's lookups (entryImport.fresh); with them
// (the plain path) the same input, canonical twins repeated across batches
// included, gives the same report and the same catalog, byte for byte in
// every resource record, plaintext and encrypted, in batches of one and
// of many.
func TestFreshImportSkipsKeepStoredAlike(t *testing.T) {
	obs := `{"resourceType":"Observation","id":"obs-1","status":"final","subject":{"reference":"Patient/p1"},"code":{"text":"x\/y"}}`
	input := func() []Entry {
		twin := fhirEntry("Observation", "obs-1", "p1", strings.Replace(obs, `\/`, "/", 1))
		twin.Where = "b.ndjson:1"
		doc := fhirEntry("DocumentReference", "d1", "p1", `{"resourceType":"DocumentReference","id":"d1","status":"current","subject":{"reference":"Patient/p1"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/b1"}}]}`)
		doc.Links = []string{"b1"}
		return []Entry{
			fhirEntry("Patient", "p1", "p1", `{"resourceType":"Patient","id":"p1"}`),
			fhirEntry("Observation", "obs-1", "p1", obs),
			doc,
			{Type: "Binary", ID: "b1", Patient: "p1", Body: []byte("note"), MIMEType: "text/plain", Sensitivity: []string{"psy"}, Where: "Binary.ndjson:1"},
			fhirEntry("Patient", "p2", "p2", `{"resourceType":"Patient","id":"p2"}`),
			twin,
		}
	}
	n := testNamer(t, "gh")
	eachFastAndPlain(t, &keepStoredSkipsFresh, input, EntryOptions{Namer: n},
		func(t *testing.T, encrypted bool, fastRep, plainRep ImportReport, fastPath, plainPath string) {
			records := func(path string) map[string]string {
				t.Helper()
				var dk DataKeys
				if encrypted {
					dk = newFakeKeys(testKEK)
				}
				s, err := Open(path, Options{Timeout: time.Second, DataKeys: dk})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				recs := map[string]string{}
				rs, err := s.Page("", 1000)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rs {
					b, err := json.Marshal(r)
					if err != nil {
						t.Fatal(err)
					}
					recs[r.URI] = string(b)
				}
				return recs
			}
			fast, plain := records(fastPath), records(plainPath)
			if fastRep != plainRep {
				t.Errorf("report skipping keepStored %+v, with it %+v", fastRep, plainRep)
			}
			if fastRep.Repeated != 1 || len(fast) == 0 {
				t.Errorf("report %+v, %d records: want the twin repeated once", fastRep, len(fast))
			}
			for uri, r := range plain {
				if fast[uri] != r {
					t.Errorf("%s: skipping keepStored %s, with it %s", uri, fast[uri], r)
				}
			}
			if len(fast) != len(plain) {
				t.Errorf("%d records skipping keepStored, %d with it", len(fast), len(plain))
			}
		})
}
