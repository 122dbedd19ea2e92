package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// phiMarker is planted in every fixture file; it must never appear in an
// error message.
const phiMarker = "Jane Q. Testpatient SSN 999-12-3456"

// fixture is a seed directory built by a test: content files plus a
// manifest.jsonl listing them.
type fixture struct {
	t       testing.TB
	dir     string
	entries []ManifestEntry
	n       int
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return &fixture{t: t, dir: t.TempDir()}
}

// testUUID returns a deterministic canonical UUID for (kind, i).
func testUUID(kind, i int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", kind, i>>16&0xffff, i>>8&0xfff, i&0xfff, i)
}

var typeCycle = []string{"patient", "observation", "condition", "medicationrequest", "encounter", "coverage", "note", "report", "image"}

// content returns a valid file for u's family, unique per seed.
func content(u URI, seed string) []byte {
	switch u.Scheme {
	case SchemeFHIR:
		rt := fhirTypes[u.Type]
		return []byte(fmt.Sprintf(`{"resourceType":%q,"id":%q,"text":{"div":%q},"seed":%q}`, rt, u.ID, phiMarker, seed))
	case SchemeNote:
		return []byte("# Note\n\nPatient " + phiMarker + " seen today. " + seed + "\n")
	case SchemeReport:
		return []byte("%PDF-1.4\n% " + phiMarker + " " + seed + "\n%%EOF\n")
	case SchemeImage:
		return append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), []byte(phiMarker+seed)...)
	}
	panic("unknown scheme")
}

// add creates one entry of the given type with a file and returns its index.
func (f *fixture) add(typ string) int {
	f.t.Helper()
	f.n++
	i := f.n
	u := URI{Tenant: "general-hospital", Patient: testUUID(1, i%7), Type: typ, ID: testUUID(2, i)}
	u.Scheme = SchemeFHIR
	if _, ok := fhirTypes[typ]; !ok {
		u.Scheme = typ
	}
	file := filepath.ToSlash(filepath.Join(u.Scheme, u.ID+ext(u.Scheme)))
	f.writeFile(file, content(u, fmt.Sprint(i)))
	e := ManifestEntry{
		URI:         u.String(),
		Name:        fmt.Sprintf("%s-%s", typ, u.ID[:8]),
		Title:       "A " + typ,
		Description: "Synthetic " + typ,
		MIMEType:    u.MIMEType(),
		Annotations: Annotations{Audience: []string{"assistant", "user"}, Priority: 0.5, LastModified: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)},
		Labels:      Labels{Tenant: u.Tenant, Patient: u.Patient, Type: u.Type},
		File:        file,
	}
	if i%5 == 0 {
		e.Labels.Sensitivity = []string{"hiv", "sud"}
	}
	if i%11 == 0 {
		e.Labels.Consent = []string{"opt-out"}
	}
	f.entries = append(f.entries, e)
	return len(f.entries) - 1
}

func ext(scheme string) string {
	switch scheme {
	case SchemeFHIR:
		return ".json"
	case SchemeNote:
		return ".md"
	case SchemeReport:
		return ".pdf"
	}
	return ".png"
}

// addN adds n entries cycling through all types.
func (f *fixture) addN(n int) {
	for i := 0; i < n; i++ {
		f.add(typeCycle[i%len(typeCycle)])
	}
}

func (f *fixture) writeFile(rel string, data []byte) {
	f.t.Helper()
	p := filepath.Join(f.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) readFile(rel string) []byte {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(rel)))
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// lines renders the manifest lines.
func (f *fixture) lines() []string {
	f.t.Helper()
	out := make([]string, len(f.entries))
	for i, e := range f.entries {
		b, err := json.Marshal(e)
		if err != nil {
			f.t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

// writeManifest writes the given lines (default: the entries) as manifest.jsonl.
func (f *fixture) writeManifest(lines ...string) {
	f.t.Helper()
	if lines == nil {
		lines = f.lines()
	}
	if err := os.WriteFile(filepath.Join(f.dir, ManifestName), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// openTestStore opens a fresh store in a temp dir and checks the bbolt file's
// consistency when the test ends.
func openTestStore(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		checkDB(t, path)
	})
	return s, path
}

// checkDB runs bbolt's consistency check and the store's own invariants.
func checkDB(t testing.TB, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Errorf("reopen for check: %v", err)
		return
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		vers := tx.Bucket(bucketVersions)
		return tx.Bucket(bucketResources).ForEach(func(k, v []byte) error {
			var r Resource
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if string(k) != r.URI {
				t.Errorf("resource key %q holds uri %q", k, r.URI)
			}
			for ver := 1; ver <= r.Version; ver++ {
				if vers.Get(versionKey(r.URI, ver)) == nil {
					t.Errorf("%s: version %d missing from history", r.URI, ver)
				}
			}
			if got := vers.Get(versionKey(r.URI, r.Version)); string(got) != string(v) {
				t.Errorf("%s: current resource differs from its history entry", r.URI)
			}
			if tx.Bucket(bucketBlobs).Get(mustDigestKey(t, r.Digest)) == nil {
				t.Errorf("%s: blob missing", r.URI)
			}
			return nil
		})
	})
	if err != nil {
		t.Errorf("check: %v", err)
	}
}

func mustDigestKey(t testing.TB, d string) []byte {
	k, ok := parseDigest(d)
	if !ok {
		t.Fatalf("bad digest %q", d)
	}
	return k
}

func mustImport(t testing.TB, s *Store, path string) ImportReport {
	t.Helper()
	rep, err := s.Import(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	return rep
}

// blobCount counts the blobs bucket.
func blobCount(t testing.TB, s *Store) int {
	t.Helper()
	var n int
	s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketBlobs).Stats().KeyN
		return nil
	})
	return n
}
