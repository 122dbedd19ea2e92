package store

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

var testIDKey = bytes.Repeat([]byte{0x42}, 32)

// Golden keyed ids under testIDKey (TestResourceIDVectors).
const (
	goldenPatient     = "cdcc52c3-6174-81ea-a7eb-916734a3d4fb"
	goldenObservation = "d6a7732f-601b-8415-a2eb-2931f7dbc838"
)

// TestResourceIDGolden pins the keyed id derivation: golden vectors, and
// the same value computed independently from HMAC-SHA256 and RFC 9562's
// version 8 layout.
func TestResourceIDGolden(t *testing.T) {
	golden := []struct{ tenant, typ, id string }{
		{"general-hospital", "Patient", "MRN-000123"},
		{"general-hospital", "Observation", "obs-1"},
		{"t", "Attachment", "DocumentReference/d1/content/0"},
	}
	for _, g := range golden {
		got := ResourceID(testIDKey, g.tenant, g.typ, g.id)
		// Independent computation.
		m := hmac.New(sha256.New, testIDKey)
		ns, _ := hex.DecodeString(strings.ReplaceAll(idNamespace.String(), "-", ""))
		m.Write(ns)
		m.Write([]byte(g.tenant + "\x00" + g.typ + "\x00" + g.id))
		b := m.Sum(nil)[:16]
		b[6] = b[6]&0x0f | 0x80
		b[8] = b[8]&0x3f | 0x80
		h := hex.EncodeToString(b)
		want := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		if got != want {
			t.Errorf("ResourceID(%s, %s, %s) = %s, independent computation %s", g.tenant, g.typ, g.id, got, want)
		}
		if !IsCanonicalUUID(got) || got[14] != '8' {
			t.Errorf("%s is not a canonical version 8 uuid", got)
		}
		t.Logf("golden: %s %s %s -> %s", g.tenant, g.typ, g.id, got)
	}
	// Fields are separated: moving bytes between them changes the id.
	if ResourceID(testIDKey, "ab", "c", "d") == ResourceID(testIDKey, "a", "bc", "d") {
		t.Error("tenant and type are not separated")
	}
	if ResourceID(testIDKey, "t", "Patient", "1") == ResourceID(bytes.Repeat([]byte{1}, 32), "t", "Patient", "1") {
		t.Error("the key does not matter")
	}
}

// TestResourceIDVectors are golden vectors of the derivation (computed once
// and pinned): a change of namespace, layout or field order breaks every
// imported catalog's URIs, so it must break this test first.
func TestResourceIDVectors(t *testing.T) {
	for _, v := range []struct{ tenant, typ, id, want string }{
		{"general-hospital", "Patient", "MRN-000123", goldenPatient},
		{"general-hospital", "Observation", "obs-1", goldenObservation},
	} {
		if got := ResourceID(testIDKey, v.tenant, v.typ, v.id); got != v.want {
			t.Errorf("ResourceID(%s, %s, %s) = %s, want %s", v.tenant, v.typ, v.id, got, v.want)
		}
	}
}

// TestHasKeyedIDForm: every ResourceID has the keyed form, and ids of
// other versions, variants or spellings have not (the server skips its
// catalog lookup of a patient segment without it).
func TestHasKeyedIDForm(t *testing.T) {
	for i := range 2000 {
		key := bytes.Repeat([]byte{byte(i)}, 32)
		if id := ResourceID(key, "t", "Patient", fmt.Sprint("p", i)); !HasKeyedIDForm(id) {
			t.Fatalf("ResourceID %s lacks the keyed form", id)
		}
	}
	for _, id := range []string{
		uuid.NewString(), // version 4
		uuid.NewSHA1(uuid.NameSpaceURL, []byte("x")).String(),
		strings.ToUpper(goldenPatient),
		strings.Replace(goldenPatient, "-", "", 1),
		goldenPatient[:14] + "7" + goldenPatient[15:],
		goldenPatient[:19] + "c" + goldenPatient[20:],
		goldenPatient[:19] + "7" + goldenPatient[20:],
		"p1", "",
	} {
		if HasKeyedIDForm(id) {
			t.Errorf("%q has the keyed form", id)
		}
	}
	if !HasKeyedIDForm(goldenPatient) || !HasKeyedIDForm(goldenPatient[:19]+"8"+goldenPatient[20:]) {
		t.Error("a keyed id lacks the keyed form")
	}
}

func testNamer(t testing.TB, tenant string) *Namer {
	t.Helper()
	n, err := NewNamer(tenant, testIDKey, "test:id-key@1")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNamerURIs(t *testing.T) {
	n := testNamer(t, "gh")
	p := ResourceID(testIDKey, "gh", "Patient", "MRN-1")
	for _, c := range []struct{ typ, id, patient, want string }{
		{"Patient", "MRN-1", "", "fhir://gh/patients/" + p + "/patient/" + p},
		{"Patient", "MRN-1", "MRN-1", "fhir://gh/patients/" + p + "/patient/" + p},
		{"Observation", "o1", "MRN-1", "fhir://gh/patients/" + p + "/observation/" + ResourceID(testIDKey, "gh", "Observation", "o1")},
		{"DocumentReference", "d1", "MRN-1", "fhir://gh/patients/" + p + "/documentreference/" + ResourceID(testIDKey, "gh", "DocumentReference", "d1")},
		{"Organization", "org-1", "", "fhir://gh/organization/" + ResourceID(testIDKey, "gh", "Organization", "org-1")},
		{"Attachment", "DocumentReference/d1/content/0", "MRN-1", "attachment://gh/patients/" + p + "/attachments/" + ResourceID(testIDKey, "gh", "Attachment", "DocumentReference/d1/content/0")},
		{"Binary", "b1", "", "attachment://gh/attachments/" + ResourceID(testIDKey, "gh", "Binary", "b1")},
	} {
		u, err := n.URI(c.typ, c.id, c.patient)
		if err != nil {
			t.Fatalf("%s/%s: %v", c.typ, c.id, err)
		}
		if u.String() != c.want || n.Link(c.typ, c.id, c.patient) != c.want {
			t.Errorf("%s/%s = %s, want %s", c.typ, c.id, u, c.want)
		}
		if pu, err := ParseURI(c.want); err != nil || pu != u {
			t.Errorf("%s does not parse back: %v", c.want, err)
		}
	}
	for _, c := range []struct{ typ, id, patient string }{
		{"observation", "o1", "MRN-1"}, // not the resourceType spelling
		{"Widget", "w1", ""},
		{"", "x", ""},
		{"Observation", "", "MRN-1"},
		{"Patient", "MRN-1", "MRN-2"},
	} {
		if _, err := n.URI(c.typ, c.id, c.patient); err == nil {
			t.Errorf("URI(%q, %q, %q) succeeded", c.typ, c.id, c.patient)
		} else if strings.Contains(err.Error(), "MRN") || (c.id != "" && strings.Contains(err.Error(), c.id)) {
			t.Errorf("error %q echoes an id", err)
		}
		if n.Link(c.typ, c.id, c.patient) != "" {
			t.Errorf("Link(%q, %q, %q) is not empty", c.typ, c.id, c.patient)
		}
	}
	if _, err := NewNamer("Bad Tenant", testIDKey, "k"); err == nil {
		t.Error("bad tenant accepted")
	}
	if _, err := NewNamer("t", testIDKey[:8], "k"); err == nil {
		t.Error("short key accepted")
	}
}

// entries turns a slice into the stream ImportEntries takes.
func entries(es ...Entry) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for _, e := range es {
			if !yield(e, nil) {
				return
			}
		}
	}
}

const (
	srcPatient = "MRN-004711" // a source id that must never appear in a URI or text
	srcOrg     = "org-cityhospital"
)

func fhirEntry(typ, id, patient, body string) Entry {
	return Entry{Type: typ, ID: id, Patient: patient, Body: []byte(body), Where: typ + ".ndjson:" + id}
}

func sampleEntries() []Entry {
	return []Entry{
		fhirEntry("Patient", srcPatient, srcPatient, `{"resourceType":"Patient","id":"MRN-004711","name":[{"family":"Doe"}]}`),
		fhirEntry("Observation", "obs-1", srcPatient, `{"resourceType":"Observation","id":"obs-1","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs","display":"Jane Doe's vitals"}]}],"subject":{"reference":"Patient/MRN-004711"}}`),
		fhirEntry("Condition", "cond-1", srcPatient, `{"resourceType":"Condition","id":"cond-1","category":[{"coding":[{"code":"Doe 555-1234"}]}]}`),
		fhirEntry("Organization", srcOrg, "", `{"resourceType":"Organization","id":"org-cityhospital","name":"City Hospital"}`),
		{Type: "Attachment", ID: "DocumentReference/doc-1/content/0", Patient: srcPatient, Body: []byte("%PDF-1.4 note of MRN-004711"),
			MIMEType: "application/pdf", Carrier: Carrier{Type: "DocumentReference", ID: "doc-1"}, Sensitivity: []string{"psy", "restricted"}, Where: "DocumentReference.ndjson:3"},
	}
}

func stagedImport(t testing.TB, path string, eopts EntryOptions, es ...Entry) (ImportReport, error) {
	t.Helper()
	if eopts.Namer == nil {
		eopts.Namer = testNamer(t, "gh")
	}
	return ImportEntriesStaged(context.Background(), path, entries(es...), eopts, Options{Timeout: time.Second})
}

func openRead(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func allResources(t testing.TB, s *Store) []Resource {
	t.Helper()
	rs, err := s.Page("", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestImportEntriesStaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	rep, err := stagedImport(t, path, EntryOptions{}, sampleEntries()...)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lines != 5 || rep.Created != 5 || rep.Updated+rep.Unchanged+rep.Retired != 0 {
		t.Fatalf("report %+v", rep)
	}
	checkDB(t, path)
	s := openRead(t, path)
	rs := allResources(t, s)
	if len(rs) != 5 {
		t.Fatalf("%d resources", len(rs))
	}
	n := testNamer(t, "gh")
	titles := map[string]string{}
	for _, r := range rs {
		// No source id (nor anything of the content) in URI, name, title,
		// description.
		for _, field := range []string{r.URI, r.Name, r.Title, r.Description} {
			for _, bad := range []string{srcPatient, srcOrg, "obs-1", "doc-1", "Doe", "555", "City"} {
				if strings.Contains(field, bad) {
					t.Errorf("%s carries %q: %q", r.URI, bad, field)
				}
			}
		}
		titles[r.Labels.Type] = r.Title
		u, _ := ParseURI(r.URI)
		if r.Labels.Tenant != "gh" || r.Labels.Type != u.Type || r.Source != DefaultSource || r.Version != 1 {
			t.Errorf("%s: labels %+v source %q version %d", r.URI, r.Labels, r.Source, r.Version)
		}
		switch {
		case u.Type == "organization":
			if u.Patient != "" || r.Labels.Patient != "" {
				t.Errorf("reference data has a patient: %s %+v", r.URI, r.Labels)
			}
		default:
			// The URI carries the keyed id; the label the source id.
			if u.Patient != ResourceID(testIDKey, "gh", "Patient", srcPatient) || r.Labels.Patient != srcPatient {
				t.Errorf("%s: patient %q label %q", r.URI, u.Patient, r.Labels.Patient)
			}
		}
	}
	for typ, want := range map[string]string{
		"observation": "Observation (vital-signs)",
		"condition":   "Condition", // its category code is not a code
		"attachment":  "Attachment of a DocumentReference (application/pdf)",
		"patient":     "Patient",
	} {
		if titles[typ] != want {
			t.Errorf("title of %s = %q, want %q", typ, titles[typ], want)
		}
	}
	att, err := s.Get(n.Link("Attachment", "DocumentReference/doc-1/content/0", srcPatient))
	if err != nil {
		t.Fatal(err)
	}
	if att.MIMEType != "application/pdf" || !slices.Equal(att.Labels.Sensitivity, []string{"psy", "restricted"}) {
		t.Errorf("attachment %+v", att)
	}
	b, err := s.Blob(context.Background(), att.Digest)
	if err != nil || string(b) != "%PDF-1.4 note of MRN-004711" {
		t.Errorf("blob %q %v", b, err)
	}
	s.Close()

	// The same stream again: nothing changes and the file is not replaced.
	before := fileSum(t, path)
	rep, err = stagedImport(t, path, EntryOptions{}, sampleEntries()...)
	if err != nil || rep.Unchanged != 5 || rep.Created+rep.Updated+rep.Retired != 0 {
		t.Fatalf("re-import: %+v %v", rep, err)
	}
	if fileSum(t, path) != before {
		t.Error("an unchanged re-import replaced the catalog")
	}

	// One changed resource: a new version of the same URI.
	es := sampleEntries()
	es[1].Body = []byte(`{"resourceType":"Observation","id":"obs-1","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"laboratory"}]}]}`)
	rep, err = stagedImport(t, path, EntryOptions{}, es...)
	if err != nil || rep.Updated != 1 || rep.Unchanged != 4 {
		t.Fatalf("changed re-import: %+v %v", rep, err)
	}
	s = openRead(t, path)
	r, err := s.Get(n.Link("Observation", "obs-1", srcPatient))
	if err != nil || r.Version != 2 || r.Title != "Observation (laboratory)" {
		t.Fatalf("updated resource %+v %v", r, err)
	}
	checkDB(t, path)
}

func fileSum(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Digest(b)
}

// TestStagedRemovesScratchOfCrashedImports: an import killed (SIGKILL,
// power loss) between creating its scratch copy and renaming it leaves the
// copy behind, a whole second catalog; found by probe-import2 killing
// custos import three times, which left three. The next staged import,
// under the import lock (no other import can be writing one), removes
// them, and leaves other files alone.
func TestStagedRemovesScratchOfCrashedImports(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.db")
	if _, err := stagedImport(t, path, EntryOptions{}, sampleEntries()...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".catalog.db.import-123", ".catalog.db.import-456", ".other.db.import-1", "catalog.db.import-7"} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stagedImport(t, path, EntryOptions{}, fhirEntry("Observation", "o-new", srcPatient, `{"resourceType":"Observation","id":"o-new"}`)); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.import-*"))
	slices.Sort(left)
	if want := []string{filepath.Join(dir, ".other.db.import-1"), filepath.Join(dir, "catalog.db.import-7")}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}

// TestImportEntriesFailureLeavesCatalogUntouched: an import that fails
// after several committed batches (of the scratch copy) leaves the catalog
// byte-identical and no scratch file behind; every problem names its Where
// and none quotes content or ids.
func TestImportEntriesFailureLeavesCatalogUntouched(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.db")
	if _, err := stagedImport(t, path, EntryOptions{}, sampleEntries()...); err != nil {
		t.Fatal(err)
	}
	before := fileSum(t, path)
	var es []Entry
	for i := range 50 {
		es = append(es, fhirEntry("Observation", fmt.Sprintf("o%d", i), srcPatient, fmt.Sprintf(`{"resourceType":"Observation","id":"o%d"}`, i)))
	}
	es = append(es,
		fhirEntry("Observation", "bad-json", srcPatient, `{"resourceType":"Observation","id":"MRN-004711"`),
		fhirEntry("Condition", "wrong-type", srcPatient, `{"resourceType":"Observation"}`),
		fhirEntry("Widget", "w", "", `{}`),
		Entry{Type: "Attachment", ID: "a1", Patient: srcPatient, MIMEType: "application/pdf", Body: []byte("MRN-004711 is not a pdf"), Where: "DocumentReference.ndjson:9"},
		Entry{Type: "Attachment", ID: "a2", Patient: srcPatient, MIMEType: "text/plain", Body: []byte("%PDF-1.7 MRN-004711"), Where: "DocumentReference.ndjson:10"},
		Entry{Type: "Attachment", ID: "a3", Patient: srcPatient, MIMEType: "text/plain", Body: []byte{0xff, 0xfe}, Where: "DocumentReference.ndjson:11"},
		Entry{Type: "Observation", ID: "s", Patient: srcPatient, Body: []byte(`{"resourceType":"Observation"}`), Sensitivity: []string{"secret"}, Where: "x.ndjson:99"},
	)
	_, err := stagedImport(t, path, EntryOptions{BatchEntries: 7}, es...)
	if !errors.Is(err, ErrBadEntry) {
		t.Fatalf("err = %v, want ErrBadEntry", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"Observation.ndjson:bad-json: FHIR JSON is not valid json",
		"Condition.ndjson:wrong-type: resourceType does not match",
		"Widget.ndjson:w: not a FHIR R4 resource type",
		"DocumentReference.ndjson:9: attachment bytes are not application/pdf",
		"DocumentReference.ndjson:10: attachment bytes are application/pdf, not text/plain",
		"DocumentReference.ndjson:11: attachment text is not valid utf-8",
		"x.ndjson:99: sensitivity: unknown value",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "MRN-004711") {
		t.Errorf("error quotes content: %s", msg)
	}
	if fileSum(t, path) != before {
		t.Error("a failed import changed the catalog")
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".catalog.db.import-*"))
	if len(left) != 0 {
		t.Errorf("scratch files left: %v", left)
	}

	// The same resource twice: in one batch, and across batches (found in
	// the import's scratch bucket, after earlier batches were written).
	for _, first := range []int{8, 1} { // o8 is in the pending batch, o1 in one written
		dup := fhirEntry("Observation", fmt.Sprintf("o%d", first), srcPatient, `{"resourceType":"Observation"}`)
		dup.Where = "again.ndjson:1"
		_, err = stagedImport(t, path, EntryOptions{BatchEntries: 7}, append(slices.Clone(es[:10]), dup)...)
		want := fmt.Sprintf("again.ndjson:1: the same resource appears twice in the input, with different content or labels (first at Observation.ndjson:o%d)", first)
		if !errors.Is(err, ErrBadEntry) || err.Error() != want {
			t.Fatalf("duplicate: err = %v, want %q", err, want)
		}
		if fileSum(t, path) != before {
			t.Error("a failed import changed the catalog")
		}
	}

	// A reader error mid-stream, after batches were committed to the copy.
	boom := errors.New("Observation.ndjson:51: truncated line")
	stream := func(yield func(Entry, error) bool) {
		for _, e := range es[:50] {
			if !yield(e, nil) {
				return
			}
		}
		yield(Entry{}, boom)
	}
	_, err = ImportEntriesStaged(context.Background(), path, stream, EntryOptions{Namer: testNamer(t, "gh"), BatchEntries: 7}, Options{})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the reader's", err)
	}
	if fileSum(t, path) != before {
		t.Error("a failed import changed the catalog")
	}
}

// TestRetirement: a deleted entry, a full import that no longer mentions a
// resource, and a resource whose patient changed retire a URI: it is no
// longer listed or readable, its versions stay with the retirement time,
// Diff reports it Removed, and a later import brings it back as a new
// version. A full import leaves other tenants and sources alone.
func TestRetirement(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.db")
	// A manifest resource (source "") in the same tenant: never retired by
	// a full FHIR import.
	f := newFixture(t)
	f.add("note")
	f.writeManifest()
	if _, err := ImportStaged(context.Background(), path, f.dir, Options{}, nil); err != nil {
		t.Fatal(err)
	}
	es := sampleEntries()
	if _, err := stagedImport(t, path, EntryOptions{}, es...); err != nil {
		t.Fatal(err)
	}
	other := testNamer(t, "other")
	if _, err := stagedImport(t, path, EntryOptions{Namer: other}, es[3]); err != nil {
		t.Fatal(err)
	}
	old := openRead(t, path)
	n := testNamer(t, "gh")
	obs := n.Link("Observation", "obs-1", srcPatient)
	cond := n.Link("Condition", "cond-1", srcPatient)
	org := n.Link("Organization", srcOrg, "")
	count0, _ := old.Count()

	// A deletion; a Bulk deleted entry names no patient.
	now := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	rep, err := stagedImport(t, path, EntryOptions{Now: func() time.Time { return now }}, Entry{Type: "Observation", ID: "obs-1", Deleted: true, Where: "deleted/Observation.ndjson:1"})
	if err != nil || rep.Retired != 1 {
		t.Fatalf("delete: %+v %v", rep, err)
	}
	cur := openRead(t, path)
	if _, err := cur.Get(obs); !errors.Is(err, ErrNotFound) {
		t.Fatalf("retired resource still readable: %v", err)
	}
	if c, _ := cur.Count(); c != count0-1 {
		t.Errorf("count %d, want %d", c, count0-1)
	}
	for _, r := range allResources(t, cur) {
		if r.URI == obs {
			t.Error("retired resource still listed")
		}
	}
	v1, err1 := cur.Version(obs, 1)
	v2, err2 := cur.Version(obs, 2)
	if err1 != nil || err2 != nil || !v1.Retired.IsZero() || !v2.Retired.Equal(now) || v2.Digest != v1.Digest {
		t.Fatalf("history: %+v %v / %+v %v", v1, err1, v2, err2)
	}
	ch, err := Diff(old, cur)
	if err != nil || !slices.Equal(ch.Removed, []string{obs}) || len(ch.Added)+len(ch.Updated) != 0 {
		t.Fatalf("diff %+v %v", ch, err)
	}
	checkDB(t, path)

	// Deleting it again, or deleting what never was, changes nothing.
	rep, err = stagedImport(t, path, EntryOptions{}, Entry{Type: "Observation", ID: "obs-1", Deleted: true}, Entry{Type: "Observation", ID: "never", Deleted: true})
	if err != nil || rep.Retired != 0 || rep.Unchanged != 2 {
		t.Fatalf("repeated delete: %+v %v", rep, err)
	}

	// It comes back: a new version, readable again.
	rep, err = stagedImport(t, path, EntryOptions{}, es[1])
	if err != nil || rep.Updated != 1 {
		t.Fatalf("revive: %+v %v", rep, err)
	}
	back := openRead(t, path)
	if r, err := back.Get(obs); err != nil || r.Version != 3 || !r.Retired.IsZero() {
		t.Fatalf("revived %+v %v", r, err)
	}

	// A full import without the Condition and the Organization retires
	// both, and nothing of the manifest or of the other tenant.
	rep, err = stagedImport(t, path, EntryOptions{Full: true}, es[0], es[1], es[4])
	if err != nil || rep.Retired != 2 || rep.Unchanged != 3 {
		t.Fatalf("full: %+v %v", rep, err)
	}
	full := openRead(t, path)
	for _, u := range []string{cond, org} {
		if _, err := full.Get(u); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s not retired: %v", u, err)
		}
	}
	for _, u := range []string{f.entries[0].URI, other.Link("Organization", srcOrg, ""), obs} {
		if _, err := full.Get(u); err != nil {
			t.Errorf("%s retired by a full import of another source or tenant: %v", u, err)
		}
	}

	// The Observation moves to another patient: its old URI is retired.
	moved := es[1]
	moved.Patient = "MRN-000999"
	rep, err = stagedImport(t, path, EntryOptions{}, moved)
	if err != nil || rep.Created != 1 || rep.Retired != 1 {
		t.Fatalf("move: %+v %v", rep, err)
	}
	last := openRead(t, path)
	if _, err := last.Get(obs); !errors.Is(err, ErrNotFound) {
		t.Errorf("old uri of a moved resource still readable: %v", err)
	}
	if r, err := last.Get(n.Link("Observation", "obs-1", "MRN-000999")); err != nil || r.Labels.Patient != "MRN-000999" {
		t.Errorf("moved resource: %+v %v", r, err)
	}
	checkDB(t, path)
}

func TestImportEntriesIDKeyChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	if _, err := stagedImport(t, path, EntryOptions{}, sampleEntries()...); err != nil {
		t.Fatal(err)
	}
	before := fileSum(t, path)
	n, _ := NewNamer("gh", testIDKey, "test:id-key@2")
	_, err := stagedImport(t, path, EntryOptions{Namer: n}, sampleEntries()...)
	if !errors.Is(err, ErrIDKeyChanged) {
		t.Fatalf("err = %v, want ErrIDKeyChanged", err)
	}
	if fileSum(t, path) != before {
		t.Error("catalog changed")
	}
}

func TestImportEntriesEncrypted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	dk := newFakeKeys(testKEK)
	rep, err := ImportEntriesStaged(context.Background(), path, entries(sampleEntries()...), EntryOptions{Namer: testNamer(t, "gh"), BatchEntries: 2}, Options{DataKeys: dk})
	if err != nil || rep.Created != 5 {
		t.Fatalf("%+v %v", rep, err)
	}
	// Canaries long enough that ciphertext cannot hold one by chance: a bare
	// "Doe" (3 bytes) turned up in the file's random bytes about once in
	// 700 runs (3 of 2,000 at 4fe62b8, 1 of 2,000 at its successor; a
	// fresh-clone CI run failed on it).
	for _, plain := range []string{"MRN-004711 is", `"family":"Doe"`, "Jane Doe's vitals", "Doe 555-1234"} {
		if fileHolds(t, path, plain) {
			t.Errorf("plaintext content %q in an encrypted catalog", plain)
		}
	}
	s, err := Open(path, Options{ReadOnly: true, DataKeys: dk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Get(testNamer(t, "gh").Link("Attachment", "DocumentReference/doc-1/content/0", srcPatient))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Blob(context.Background(), r.Digest)
	if err != nil || !bytes.HasPrefix(b, []byte("%PDF-1.4")) {
		t.Fatalf("blob %q %v", b, err)
	}
}

func TestImportEntriesProgress(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	var es []Entry
	for i := range 2500 {
		es = append(es, fhirEntry("Observation", fmt.Sprintf("o%d", i), srcPatient, fmt.Sprintf(`{"resourceType":"Observation","id":"o%d"}`, i)))
	}
	var calls [][2]int
	_, err := stagedImport(t, path, EntryOptions{Progress: func(d, tot int) { calls = append(calls, [2]int{d, tot}) }, BatchEntries: 1000}, es...)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) < 2 || calls[len(calls)-1] != [2]int{2500, 2500} {
		t.Fatalf("progress %v", calls)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i][0] <= calls[i-1][0] {
			t.Fatalf("progress not growing: %v", calls)
		}
	}
}

// TestManifestNewShapes: the manifest format also takes the new URI shapes:
// any R4 type, tenant-level reference data (labels.patient ""), and
// attachments with a media type of their own, checked against the bytes.
func TestManifestNewShapes(t *testing.T) {
	f := newFixture(t)
	p, id, id2 := testUUID(1, 1), testUUID(2, 1), testUUID(2, 2)
	f.writeFile("proc.json", []byte(`{"resourceType":"Procedure"}`))
	f.writeFile("org.json", []byte(`{"resourceType":"Organization"}`))
	f.writeFile("a.pdf", []byte("%PDF-1.7 x"))
	f.writeFile("b.txt", []byte("%PDF-1.7 not text"))
	line := func(uri, typ, patient, mt, file string) string {
		b, _ := json.Marshal(ManifestEntry{URI: uri, Name: "n", MIMEType: mt, File: file, Labels: Labels{Tenant: "gh", Patient: patient, Type: typ}})
		return string(b)
	}
	f.writeManifest(
		line("fhir://gh/patients/"+p+"/procedure/"+id, "procedure", p, MIMEFHIR, "proc.json"),
		line("fhir://gh/organization/"+id2, "organization", "", MIMEFHIR, "org.json"),
		line("attachment://gh/patients/"+p+"/attachments/"+id, "attachment", p, "application/pdf", "a.pdf"),
	)
	s, _ := openTestStore(t)
	rep := mustImport(t, s, f.dir)
	if rep.Created != 3 {
		t.Fatalf("report %+v", rep)
	}
	if r, err := s.Get("attachment://gh/patients/" + p + "/attachments/" + id); err != nil || r.MIMEType != "application/pdf" {
		t.Fatalf("attachment %+v %v", r, err)
	}
	// An attachment whose bytes contradict its type, one with a
	// non-canonical type, and one with none are rejected.
	f.writeManifest(
		line("attachment://gh/attachments/"+id, "attachment", "", "text/plain", "b.txt"),
		line("attachment://gh/attachments/"+id2, "attachment", "", "Application/PDF", "a.pdf"),
		line("attachment://gh/attachments/"+testUUID(2, 3), "attachment", "", "", "a.pdf"),
	)
	_, err := s.Import(context.Background(), f.dir, nil)
	if err == nil || !strings.Contains(err.Error(), "mimeType: is not a media type in canonical form") || !strings.Contains(err.Error(), "mimeType: missing") {
		t.Fatalf("err = %v", err)
	}
	f.writeManifest(line("attachment://gh/attachments/"+id, "attachment", "", "text/plain", "b.txt"))
	if _, err := s.Import(context.Background(), f.dir, nil); err == nil || !strings.Contains(err.Error(), "file: attachment bytes are application/pdf, not text/plain") {
		t.Fatalf("err = %v", err)
	}
}

// TestImportDropsSeenInChunks: the scratch bucket of entries seen is
// emptied over several transactions (dropSeen) and then removed, the
// catalog stays consistent, and a later full import, which needs the
// bucket again, still retires exactly what it did not mention.
func TestImportDropsSeenInChunks(t *testing.T) {
	defer func(n int) { seenDropChunk = n }(seenDropChunk)
	es := sampleEntries()
	// lastTx imports es into a new catalog with the given chunk and
	// returns the id of its last transaction.
	lastTx := func(chunk int) (string, uint64) {
		t.Helper()
		seenDropChunk = chunk
		path := filepath.Join(t.TempDir(), "catalog.db")
		if _, err := stagedImport(t, path, EntryOptions{BatchEntries: 2}, es...); err != nil {
			t.Fatal(err)
		}
		checkDB(t, path)
		var id uint64
		s := openRead(t, path)
		s.db.View(func(tx *bolt.Tx) error {
			id = uint64(tx.ID())
			if tx.Bucket(bucketImportSeen) != nil {
				t.Error("scratch bucket left in the catalog")
			}
			return nil
		})
		return path, id
	}
	_, whole := lastTx(4096)
	path, chunked := lastTx(2)
	// 5 keys: one chunk and the removal, or chunks of 2, 2 and 1 and the
	// removal.
	if chunked-whole != 2 {
		t.Errorf("the drop in chunks of 2 took %d more transactions than in one, want 2", chunked-whole)
	}
	rep, err := stagedImport(t, path, EntryOptions{Full: true, BatchEntries: 2}, es[0], es[1], es[4])
	if err != nil {
		t.Fatal(err)
	}
	if rep.Retired != 2 || rep.Unchanged != 3 {
		t.Errorf("full import: %+v, want 2 retired, 3 unchanged", rep)
	}
	checkDB(t, path)
	if n := len(allResources(t, openRead(t, path))); n != 3 {
		t.Errorf("%d live resources after the full import, want 3", n)
	}
}

// TestFullImportNeedsAResource: a full import of deletions only (a Bulk
// export whose output files are missing, say) is refused and changes
// nothing, where it used to retire the whole tenant. A full import of
// deletions and resources keeps exactly its resources: the deletion
// retires what it names, the rest it does not mention is retired too.
func TestFullImportNeedsAResource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	es := sampleEntries()
	if _, err := stagedImport(t, path, EntryOptions{}, es...); err != nil {
		t.Fatal(err)
	}
	before := fileSum(t, path)
	del := Entry{Type: "Observation", ID: "nonexistent", Deleted: true, Where: "del.json:1"}
	_, err := stagedImport(t, path, EntryOptions{Full: true}, del)
	if !errors.Is(err, ErrBadEntry) || !strings.Contains(err.Error(), "input: a full import holds no resource to keep, only deletions (1)") {
		t.Fatalf("full import of deletions only: err = %v", err)
	}
	if fileSum(t, path) != before {
		t.Error("a refused full import changed the catalog")
	}
	if n := len(allResources(t, openRead(t, path))); n != len(es) {
		t.Errorf("%d live resources, want %d", n, len(es))
	}

	// Incrementally, the same deletion is fine (it names nothing live).
	if rep, err := stagedImport(t, path, EntryOptions{}, del); err != nil || rep.Unchanged != 1 || rep.Retired != 0 {
		t.Fatalf("incremental deletion: %+v %v", rep, err)
	}

	// Deletions with resources: the Observation is deleted, the Patient
	// kept, everything else unmentioned and retired.
	obsDel := Entry{Type: "Observation", ID: "obs-1", Deleted: true, Where: "del.json:2"}
	rep, err := stagedImport(t, path, EntryOptions{Full: true}, es[0], obsDel)
	if err != nil || rep.Unchanged != 1 || rep.Retired != 4 {
		t.Fatalf("full import with a deletion: %+v %v, want 1 unchanged, 4 retired", rep, err)
	}
	rs := allResources(t, openRead(t, path))
	if len(rs) != 1 || rs[0].Labels.Type != "patient" {
		t.Errorf("live after the full import: %v, want the Patient only", rs)
	}
	checkDB(t, path)
}

// docRef returns a DocumentReference id of patient carrying the given
// texts as lifted attachments (content[i].attachment), in the order
// fhirin yields them: the carrier, then its attachments.
func docRef(id, patient string, texts ...string) []Entry {
	es := []Entry{fhirEntry("DocumentReference", id, patient, `{"resourceType":"DocumentReference","id":"`+id+`","subject":{"reference":"Patient/`+patient+`"}}`)}
	for i, text := range texts {
		es = append(es, Entry{Type: "Attachment", ID: fmt.Sprintf("DocumentReference/%s/content[%d].attachment", id, i), Patient: patient,
			Body: []byte(text), MIMEType: "text/plain", Carrier: Carrier{Type: "DocumentReference", ID: id}, Where: "DocumentReference.ndjson:" + id})
	}
	return es
}

// TestRetireUncarriedAttachments: an attachment lifted out of a carrier
// is retired when an import updates the carrier without it (moved to
// another patient, or with fewer attachments) or deletes the carrier, in
// the same all-or-nothing import, whatever batch each entry falls in. A
// Binary the carrier linked is a resource of its own and stays.
func TestRetireUncarriedAttachments(t *testing.T) {
	n := testNamer(t, "gh")
	att := func(i int, patient string) string {
		return n.Link("Attachment", fmt.Sprintf("DocumentReference/d2/content[%d].attachment", i), patient)
	}
	for _, batch := range []int{1, 2, 96} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "catalog.db")
			opts := EntryOptions{BatchEntries: batch}
			live := func() []string {
				t.Helper()
				var out []string
				for _, r := range allResources(t, openRead(t, path)) {
					out = append(out, r.URI)
				}
				return out
			}
			import_ := func(wantCreated, wantUpdated, wantRetired int, es ...Entry) {
				t.Helper()
				rep, err := stagedImport(t, path, opts, es...)
				if err != nil || rep.Created != wantCreated || rep.Updated != wantUpdated || rep.Retired != wantRetired {
					t.Fatalf("import: %+v %v, want %d created, %d updated, %d retired", rep, err, wantCreated, wantUpdated, wantRetired)
				}
				checkDB(t, path)
			}
			pats := []Entry{fhirEntry("Patient", "p1", "p1", `{"resourceType":"Patient","id":"p1"}`), fhirEntry("Patient", "p2", "p2", `{"resourceType":"Patient","id":"p2"}`)}
			bin := Entry{Type: "Binary", ID: "b1", Patient: "p1", Body: []byte("linked"), MIMEType: "text/plain", Carrier: Carrier{Type: "DocumentReference", ID: "d2"}, Where: "Binary.ndjson:1"}
			import_(6, 0, 0, append(append(pats, docRef("d2", "p1", "one", "two")...), bin)...)
			if l := live(); !slices.Contains(l, att(0, "p1")) || !slices.Contains(l, att(1, "p1")) {
				t.Fatalf("live %v lacks the attachments", l)
			}

			// The same carrier again: nothing is retired.
			import_(0, 0, 0, docRef("d2", "p1", "one", "two")...)

			// Moved to p2 with one attachment: the carrier and content[0]
			// move (their p1 URIs retire), content[1] is retired.
			import_(2, 0, 3, docRef("d2", "p2", "one")...)
			l := live()
			for _, u := range []string{att(0, "p1"), att(1, "p1"), att(1, "p2"), n.Link("DocumentReference", "d2", "p1")} {
				if slices.Contains(l, u) {
					t.Errorf("%s still live after the move", u)
				}
			}
			for _, u := range []string{att(0, "p2"), n.Link("DocumentReference", "d2", "p2"), n.Link("Binary", "b1", "p1")} {
				if !slices.Contains(l, u) {
					t.Errorf("%s not live after the move", u)
				}
			}

			// Fewer attachments (none): content[0] is retired; then it
			// comes back.
			import_(0, 0, 1, docRef("d2", "p2")...)
			import_(0, 1, 0, docRef("d2", "p2", "one")...)

			// A deletion of the carrier retires its attachment with it,
			// and leaves the Binary.
			import_(0, 0, 2, Entry{Type: "DocumentReference", ID: "d2", Deleted: true, Where: "del.json:2"})
			l = live()
			if slices.Contains(l, att(0, "p2")) || !slices.Contains(l, n.Link("Binary", "b1", "p1")) {
				t.Errorf("after the deletion: live %v", l)
			}
			s := openRead(t, path)
			s.db.View(func(tx *bolt.Tx) error {
				if tx.Bucket(bucketImportCarriers) != nil || tx.Bucket(bucketImportSeen) != nil {
					t.Error("a scratch bucket left in the catalog")
				}
				if k, _ := tx.Bucket(bucketCarried).Cursor().First(); k != nil {
					t.Error("the carried index still lists an attachment of the deleted carrier")
				}
				return nil
			})

			// A full import that moves the carrier: each stale URI is
			// retired once (uncarried, moved or unmentioned), and the
			// Binary nobody mentions any more with them.
			path = filepath.Join(t.TempDir(), "catalog.db")
			opts.Full = false
			import_(6, 0, 0, append(append(pats, docRef("d2", "p1", "one", "two")...), bin)...)
			opts.Full = true
			rep, err := stagedImport(t, path, opts, append(pats, docRef("d2", "p2", "one")...)...)
			if err != nil || rep.Created != 2 || rep.Unchanged != 2 || rep.Retired != 4 {
				t.Fatalf("full import with a move: %+v %v, want 2 created, 2 unchanged, 4 retired", rep, err)
			}
			if l := live(); len(l) != 4 || !slices.Contains(l, att(0, "p2")) {
				t.Errorf("live after the full import: %v", l)
			}
		})
	}
}

// TestImportRepeatedEntries: a resource repeated in one input (Synthea's
// per-patient Bundles each embed the same Organization and Practitioners)
// is imported once when the repeat has the same content in canonical form
// (whitespace, key order and escapes aside), the same patient and the
// same labels, in one batch or across batches; a repeat that differs in
// any of these is refused, naming both places and no content.
func TestImportRepeatedEntries(t *testing.T) {
	org := `{"resourceType":"Organization","id":"org-1","name":"FALMOUTH HOSPITAL","telecom":[{"value":"5085485300"}],"extension":[{"valueDecimal":6.10}]}`
	// The same value: other key order, whitespace, a \u escape.
	orgSame := "{\"id\": \"org-1\", \"resourceType\":\"Organization\",\n \"telecom\":[{\"value\":\"5085485300\"}],\"name\":\"FALMOUTH \\u0048OSPITAL\",\"extension\":[{\"valueDecimal\":6.10}]}"
	at := func(e Entry, where string) Entry { e.Where = where; return e }
	orgA := at(fhirEntry("Organization", "org-1", "", org), "patient-A.json:35")
	orgB := at(fhirEntry("Organization", "org-1", "", orgSame), "patient-B.json:35")
	pat := func(id string) Entry {
		return fhirEntry("Patient", id, id, `{"resourceType":"Patient","id":"`+id+`"}`)
	}
	cond := func(patient, where string) Entry {
		return at(fhirEntry("Condition", "c1", patient, `{"resourceType":"Condition","id":"c1"}`), where)
	}
	for _, c := range []struct {
		batch     int
		encrypted bool
	}{{1, false}, {96, false}, {1, true}} { // across batches (the first read back, decrypted), and in one
		t.Run(fmt.Sprintf("batch=%d,encrypted=%v", c.batch, c.encrypted), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "catalog.db")
			var sopts Options
			if c.encrypted {
				sopts.DataKeys = newFakeKeys(testKEK)
			}
			opts := EntryOptions{Namer: testNamer(t, "gh"), BatchEntries: c.batch}
			stagedImport := func(t *testing.T, path string, opts EntryOptions, es ...Entry) (ImportReport, error) {
				return ImportEntriesStaged(context.Background(), path, entries(es...), opts, sopts)
			}
			del := Entry{Type: "Observation", ID: "gone", Deleted: true, Where: "deleted.ndjson:1"}
			rep, err := stagedImport(t, path, opts, orgA, pat("A"), cond("A", "a.json:3"), del,
				orgB, pat("B"), cond("A", "b.json:9"), at(del, "deleted.ndjson:2"))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Lines != 8 || rep.Created != 4 || rep.Repeated != 3 || rep.Unchanged != 1 {
				t.Errorf("report %+v, want 8 lines, 4 created, 3 repeated, 1 unchanged (the deletion of nothing)", rep)
			}
			s, err := Open(path, Options{ReadOnly: true, DataKeys: sopts.DataKeys})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r, err := s.Get(testNamer(t, "gh").Link("Organization", "org-1", ""))
			if err != nil || r.Version != 1 {
				t.Fatalf("organization %+v %v", r, err)
			}
			if b, err := s.Blob(context.Background(), r.Digest); err != nil || string(b) != org {
				t.Errorf("stored %q %v, want the first occurrence", b, err)
			}
			s.Close()
			checkDB(t, path)
			before := fileSum(t, path)

			for _, c := range []struct {
				name   string
				es     []Entry
				reason string
			}{
				{"content", []Entry{orgA, at(fhirEntry("Organization", "org-1", "", strings.Replace(org, "FALMOUTH", "BOURNE", 1)), "patient-B.json:35")},
					"patient-B.json:35: the same resource appears twice in the input, with different content or labels (first at patient-A.json:35)"},
				{"number", []Entry{orgA, at(fhirEntry("Organization", "org-1", "", strings.Replace(org, "6.10", "6.1", 1)), "patient-B.json:35")},
					"patient-B.json:35: the same resource appears twice in the input, with different content or labels (first at patient-A.json:35)"},
				{"labels", []Entry{orgA, func() Entry { e := orgB; e.Sensitivity = []string{"restricted"}; return e }()},
					"patient-B.json:35: the same resource appears twice in the input, with different content or labels (first at patient-A.json:35)"},
				{"patient", []Entry{pat("A"), pat("B"), cond("A", "a.json:3"), cond("B", "b.json:9")},
					"b.json:9: the same resource appears twice in the input, in different patient compartments (first at a.json:3)"},
				{"deleted", []Entry{orgA, at(Entry{Type: "Organization", ID: "org-1", Deleted: true}, "deleted.ndjson:4")},
					"deleted.ndjson:4: the same resource is both deleted and imported in the input (first at patient-A.json:35)"},
				{"deleted first", []Entry{at(Entry{Type: "Organization", ID: "org-1", Deleted: true}, "deleted.ndjson:4"), orgA},
					"patient-A.json:35: the same resource is both deleted and imported in the input (first at deleted.ndjson:4)"},
			} {
				_, err := stagedImport(t, path, opts, c.es...)
				if !errors.Is(err, ErrBadEntry) || err.Error() != c.reason {
					t.Errorf("%s: err = %v, want %q", c.name, err, c.reason)
				}
				if err != nil && (strings.Contains(err.Error(), "org-1") || strings.Contains(err.Error(), "FALMOUTH")) {
					t.Errorf("%s: the error quotes content: %v", c.name, err)
				}
				if fileSum(t, path) != before {
					t.Errorf("%s: a refused import changed the catalog", c.name)
				}
			}
		})
	}
}

// TestAttachmentEntries: an attachment declared application/octet-stream
// takes any bytes (a PDF among them) and keeps its type; one the store
// refuses is reported with the FHIR path of its contentType (derived from
// the lifted attachment's id, never quoting the carrier's id) and
// ErrAttachment beside ErrBadEntry.
func TestAttachmentEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	pdf := []byte("%PDF-1.4\n%%EOF\n")
	att := func(id, carrier, mt string, body []byte, where string) Entry {
		return Entry{Type: "Attachment", ID: id, Patient: srcPatient, Body: body, MIMEType: mt,
			Carrier: Carrier{Type: "DocumentReference", ID: carrier}, Where: where}
	}
	rep, err := stagedImport(t, path, EntryOptions{}, att("DocumentReference/d-octet/content[0].attachment", "d-octet", "application/octet-stream", pdf, "mime-octet.json:1"))
	if err != nil || rep.Created != 1 {
		t.Fatalf("octet-stream holding a PDF: %+v %v", rep, err)
	}
	r, err := openRead(t, path).Get(testNamer(t, "gh").Link("Attachment", "DocumentReference/d-octet/content[0].attachment", srcPatient))
	if err != nil || r.MIMEType != "application/octet-stream" {
		t.Fatalf("stored %+v %v", r, err)
	}

	_, err = stagedImport(t, path, EntryOptions{},
		att("DocumentReference/MRN-004711/content[1].attachment", "MRN-004711", "text/plain; charset=shift_jis", []byte("x"), "a.json:3"),
		att("DocumentReference/d1/presentedForm[0]", "d1", "application/pdf", []byte("MRN-004711"), "b.json:4"),
		att("DocumentReference/d2/x y", "d2", "application/pdf", []byte("MRN-004711"), "c.json:5"),
		Entry{Type: "Binary", ID: "b1", Patient: srcPatient, Body: pdf, MIMEType: "text/plain", Where: "Binary.ndjson:6"},
		// A declared type is the input's: any token pair parses as one.
		Entry{Type: "Binary", ID: "b2", Patient: srcPatient, Body: pdf, MIMEType: "mrn/004711", Where: "Binary.ndjson:7"},
	)
	for _, want := range []string{
		"a.json:3: DocumentReference.content[1].attachment.contentType: attachment text charset is not utf-8",
		"b.json:4: DocumentReference.presentedForm[0].contentType: attachment bytes are not application/pdf",
		"c.json:5: attachment bytes are not application/pdf", // an element path that is not one: no path
		"Binary.ndjson:6: Binary.contentType: attachment bytes are application/pdf, not text/plain",
		"Binary.ndjson:7: Binary.contentType: attachment bytes are application/pdf, not the declared mime type (one custos does not know)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if !errors.Is(err, ErrAttachment) || !errors.Is(err, ErrBadEntry) {
		t.Errorf("err = %v, want ErrAttachment and ErrBadEntry", err)
	}
	if err != nil && strings.Contains(strings.ToUpper(err.Error()), "MRN") {
		t.Errorf("the error quotes an id or content: %v", err)
	}
}

// An import of another source of the tenant may not move a live resource
// of the first source into another patient's compartment: refused (the
// rule that refuses writing it at its URI, heldByAnotherSource), nothing
// changed. Before, the URI change retired the first source's resource
// before that rule was asked, at the new URI where nothing was live: the
// second source's Observation of patient A replaced the first source's of
// patient B. The first source moves its own resource as before.
func TestImportAnotherSourceDoesNotMoveAResource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	n := testNamer(t, "gh")
	obs := func(patient string) Entry {
		return fhirEntry("Observation", "o1", patient, `{"resourceType":"Observation","id":"o1","subject":{"reference":"Patient/`+patient+`"}}`)
	}
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, obs("MRN-B")); err != nil {
		t.Fatal(err)
	}
	before := fileSum(t, path)
	_, err := stagedImport(t, path, EntryOptions{Namer: n, Source: "other"}, obs("MRN-A"))
	if !errors.Is(err, ErrBadEntry) || !strings.Contains(err.Error(), "another source") || strings.Contains(err.Error(), "MRN") {
		t.Errorf("another source moving the resource: err %v, want the entry refused as another source's (naming no id)", err)
	}
	if fileSum(t, path) != before {
		t.Fatal("a refused import changed the catalog")
	}
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, obs("MRN-A")); err != nil {
		t.Fatalf("its own source moving it: %v", err)
	}
	s := openRead(t, path)
	if _, err := s.Get(n.Link("Observation", "o1", "MRN-A")); err != nil {
		t.Errorf("moved by its own source: %v", err)
	}
}

// An entry with NoOverwrite (a conditional update or create that matched
// nothing) is refused, naming its Where and NoOverwrite path and no id,
// where its id is live with other content or in another compartment,
// and changes nothing; the same content in the same compartment is
// Unchanged (a re-import), and an id of nothing live is created.
func TestImportNoOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	n := testNamer(t, "gh")
	obs := func(patient, text string) Entry {
		e := fhirEntry("Observation", "o1", patient, `{"resourceType":"Observation","id":"o1","code":{"text":"`+text+`"},"subject":{"reference":"Patient/`+patient+`"}}`)
		e.NoOverwrite, e.Where = "Bundle.entry[2].request.url", "b.json:3"
		return e
	}
	if rep, err := stagedImport(t, path, EntryOptions{Namer: n}, obs("MRN-B", "b")); err != nil || rep.Created != 1 {
		t.Fatalf("created %d, %v", rep.Created, err)
	}
	if rep, err := stagedImport(t, path, EntryOptions{Namer: n}, obs("MRN-B", "b")); err != nil || rep.Unchanged != 1 {
		t.Fatalf("the same content again: unchanged %d, %v", rep.Unchanged, err)
	}
	before := fileSum(t, path)
	for _, e := range []Entry{obs("MRN-B", "a"), obs("MRN-A", "b")} {
		_, err := stagedImport(t, path, EntryOptions{Namer: n}, e)
		var ee *EntryError
		if !errors.As(err, &ee) || ee.Path != "Bundle.entry[2].request.url" || !strings.Contains(err.Error(), "409") || strings.Contains(err.Error(), "MRN") || strings.Contains(err.Error(), "o1") {
			t.Errorf("%s: err %v, want the entry refused (409) at its query, naming no id", e.Patient, err)
		}
		if fileSum(t, path) != before {
			t.Fatal("a refused import changed the catalog")
		}
	}
}

// An entry with NoOverwrite whose content is the live resource's in
// canonical form (a server's re-export: other key order, whitespace) is
// no conflict, whatever else changed: with new labels it updates the
// resource as the same bytes do. Before, the store compared the content
// bytes (digests) unless every other field was unchanged too (keepStored
// then named the stored bytes), and refused the re-export as FHIR's 409
// where the same bytes with the same new label were an update. Other
// content is still refused, naming no id.
func TestImportNoOverwriteCanonicalContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	n := testNamer(t, "gh")
	obs := func(body string, labels ...string) Entry {
		e := fhirEntry("Observation", "o1", "MRN-B", body)
		e.NoOverwrite, e.Where, e.Sensitivity = "Bundle.entry[2].request.ifNoneExist", "b.json:3", labels
		return e
	}
	const first = `{"resourceType":"Observation","id":"o1","code":{"text":"b"},"subject":{"reference":"Patient/MRN-B"}}`
	const reordered = `{ "code": {"text": "b"}, "id": "o1", "resourceType": "Observation", "subject": {"reference": "Patient/MRN-B"} }`
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, obs(first)); err != nil {
		t.Fatal(err)
	}
	if rep, err := stagedImport(t, path, EntryOptions{Namer: n}, obs(reordered)); err != nil || rep.Unchanged != 1 {
		t.Fatalf("the same content reordered: unchanged %d, %v", rep.Unchanged, err)
	}
	if rep, err := stagedImport(t, path, EntryOptions{Namer: n}, obs(reordered, "hiv")); err != nil || rep.Updated != 1 {
		t.Fatalf("the same content reordered with a new label: updated %d, %v; want an update, as of the same bytes", rep.Updated, err)
	}
	s := openRead(t, path)
	r, err := s.Get(n.Link("Observation", "o1", "MRN-B"))
	if err != nil || !slices.Contains(r.Labels.Sensitivity, "hiv") {
		t.Errorf("after the update: %+v, %v; want the new label", r, err)
	}
	s.Close()
	before := fileSum(t, path)
	_, err = stagedImport(t, path, EntryOptions{Namer: n}, obs(strings.Replace(reordered, `"b"`, `"c"`, 1)))
	if !errors.Is(err, ErrBadEntry) || !strings.Contains(err.Error(), "409") || strings.Contains(err.Error(), "o1") || strings.Contains(err.Error(), "MRN") {
		t.Errorf("other content: err %v, want the 409 naming no id", err)
	}
	if fileSum(t, path) != before {
		t.Fatal("a refused import changed the catalog")
	}
}
