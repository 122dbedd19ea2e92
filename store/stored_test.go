package store

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A stored entry (Entry.Stored: a Binary the stream links but does not
// hold) gives the live Binary a new version with the labels it lacks,
// content unchanged, and the staged import commits it even when nothing
// else changed (the rename skipped it: Relabelled was not counted as a
// change). A stored entry naming a Binary that is not live under its URI
// (another patient's, retired, none), or contradicting an entry with
// content for the same Binary, or from another source of the tenant, fails
// the import and changes nothing.
func TestStoredEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	n := testNamer(t, "gh")
	bin := Entry{Type: "Binary", ID: "b1", Patient: srcPatient, Body: []byte("note"), MIMEType: "text/plain", Sensitivity: []string{"psy"}, Where: "Binary.ndjson:1"}
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, bin); err != nil {
		t.Fatal(err)
	}
	stored := func(patient string, labels ...string) Entry {
		return Entry{Type: "Binary", ID: "b1", Patient: patient, Sensitivity: labels, Stored: true, Where: "DocumentReference.ndjson:1"}
	}
	uri := n.Link("Binary", "b1", srcPatient)
	get := func() Resource {
		s := openRead(t, path)
		defer s.Close()
		r, err := s.Get(uri)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	v1 := get()

	rep, err := stagedImport(t, path, EntryOptions{Namer: n}, stored(srcPatient, "psy"))
	if err != nil || rep.Unchanged != 1 || rep.Relabelled != 0 {
		t.Fatalf("a stored entry with no label to add: %+v, %v", rep, err)
	}
	rep, err = stagedImport(t, path, EntryOptions{Namer: n}, stored(srcPatient, "hiv"))
	if err != nil || rep.Relabelled != 1 {
		t.Fatalf("a stored entry adding hiv: %+v, %v", rep, err)
	}
	v2 := get()
	if !slices.Equal(v2.Labels.Sensitivity, []string{"hiv", "psy"}) || v2.Version != v1.Version+1 || v2.Digest != v1.Digest || v2.Title != v1.Title {
		t.Errorf("relabelled Binary: %+v, want v1 %+v with hiv added", v2, v1)
	}

	before := fileSum(t, path)
	for name, es := range map[string][]Entry{
		"another patient":            {stored("MRN-other", "psy")},
		"none":                       {{Type: "Binary", ID: "b2", Patient: srcPatient, Stored: true, Where: "DocumentReference.ndjson:1"}},
		"with content":               {bin, stored(srcPatient, "psy")},
		"deleted first":              {{Type: "Binary", ID: "b1", Deleted: true, Where: "deleted:1"}, stored(srcPatient, "psy")},
		"deleted first, two batches": {{Type: "Binary", ID: "b1", Deleted: true, Where: "deleted:1"}, fhirEntry("Organization", srcOrg, "", `{"resourceType":"Organization","id":"org-cityhospital"}`), stored(srcPatient, "psy")},
	} {
		eo := EntryOptions{Namer: n}
		if strings.HasSuffix(name, "two batches") {
			eo.BatchEntries = 1
		}
		_, err := stagedImport(t, path, eo, es...)
		if !errors.Is(err, ErrBadEntry) || !strings.Contains(err.Error(), "DocumentReference.ndjson:1") {
			t.Errorf("%s: err %v, want an entry error at the link", name, err)
		}
		if strings.HasPrefix(name, "deleted first") && !strings.Contains(err.Error(), "links a Binary that the input deletes (at deleted:1)") {
			t.Errorf("%s: error %q does not say the input deletes the Binary it links", name, err)
		}
		if strings.Contains(err.Error(), "MRN") {
			t.Errorf("%s: error %q names a source id", name, err)
		}
		if fileSum(t, path) != before {
			t.Errorf("%s: the catalog changed", name)
		}
	}
	// Another source of the tenant may not write the Binary, even its labels.
	if _, err := stagedImport(t, path, EntryOptions{Namer: n, Source: "other"}, stored(srcPatient, "sex")); !errors.Is(err, ErrBadEntry) ||
		!strings.Contains(err.Error(), "another source") {
		t.Errorf("a stored entry of another source's Binary: err %v", err)
	}
	if fileSum(t, path) != before {
		t.Error("another source's stored entry changed the catalog")
	}
	// Retired: a full import without it retires it.
	if _, err := stagedImport(t, path, EntryOptions{Namer: n, Full: true}, fhirEntry("Organization", srcOrg, "", `{"resourceType":"Organization","id":"org-cityhospital"}`)); err != nil {
		t.Fatal(err)
	}
	before = fileSum(t, path)
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, stored(srcPatient, "psy")); !errors.Is(err, ErrBadEntry) {
		t.Errorf("a stored entry of a retired Binary: err %v", err)
	}
	if fileSum(t, path) != before {
		t.Error("the catalog changed")
	}
}

// Stored entries across batch boundaries (BatchEntries 1, dropRepeats): a
// repeat in a later batch is imported once (Repeated); a stored entry and
// the Binary's content or deletion, or two stored entries with other
// labels, in different batches, are a contradiction and change nothing.
func TestStoredEntriesAcrossBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	n := testNamer(t, "gh")
	bin := Entry{Type: "Binary", ID: "b1", Patient: srcPatient, Body: []byte("note"), MIMEType: "text/plain", Sensitivity: []string{"psy"}, Where: "Binary.ndjson:1"}
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, bin); err != nil {
		t.Fatal(err)
	}
	stored := func(labels ...string) Entry {
		return Entry{Type: "Binary", ID: "b1", Patient: srcPatient, Sensitivity: labels, Stored: true, Where: "DocumentReference.ndjson:1"}
	}
	obs := itemEntry("Observation", "o1", srcPatient, false)
	rep, err := stagedImport(t, path, EntryOptions{Namer: n, BatchEntries: 1}, stored("hiv"), obs, stored("hiv"))
	if err != nil || rep.Relabelled != 1 || rep.Repeated != 1 {
		t.Fatalf("a stored entry repeated in a later batch: %+v %v", rep, err)
	}
	before := fileSum(t, path)
	for name, es := range map[string][]Entry{
		"content then stored": {bin, obs, stored("sex")},
		"stored then content": {stored("sex"), obs, bin},
		"deleted then stored": {{Type: "Binary", ID: "b1", Deleted: true, Where: "deleted:1"}, obs, stored("sex")},
		"stored, other label": {stored("sex"), obs, stored("hiv")},
	} {
		if _, err := stagedImport(t, path, EntryOptions{Namer: n, BatchEntries: 1}, es...); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: err %v, want ErrBadEntry", name, err)
		}
		if fileSum(t, path) != before {
			t.Errorf("%s: the catalog changed", name)
		}
	}
}

// A stored entry that adds a label to a Binary whose patient's opt-out
// the same import clears gives it one new version, counted once: writeStored
// kept the catalog's "opt-out" the index no longer confirmed, and
// relabelOptOut then cleared it with a second version, Relabelled 2 for
// one item (found by h-review6).
func TestStoredEntryAndOptOutClearedOneVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	n := testNamer(t, "gh")
	bin := Entry{Type: "Binary", ID: "b1", Patient: srcPatient, Body: []byte("note"), MIMEType: "text/plain", Where: "Binary.ndjson:1", Consent: []string{ConsentOptOut}}
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, consentEntry("c1", srcPatient, true), bin); err != nil {
		t.Fatal(err)
	}
	s := openRead(t, path)
	v1, err := s.Get(n.Link("Binary", "b1", srcPatient))
	s.Close()
	if err != nil || len(v1.Labels.Consent) != 1 {
		t.Fatalf("%+v %v", v1, err)
	}
	rep, err := stagedImport(t, path, EntryOptions{Namer: n}, consentEntry("c1", srcPatient, false),
		Entry{Type: "Binary", ID: "b1", Patient: srcPatient, Sensitivity: []string{"hiv"}, Stored: true, Where: "DocumentReference.ndjson:1"})
	if err != nil {
		t.Fatal(err)
	}
	s = openRead(t, path)
	v2, err := s.Get(n.Link("Binary", "b1", srcPatient))
	if err != nil {
		t.Fatal(err)
	}
	if len(v2.Labels.Consent) != 0 || !slices.Equal(v2.Labels.Sensitivity, []string{"hiv"}) {
		t.Errorf("the Binary: consent %v sensitivity %v, want none and [hiv]", v2.Labels.Consent, v2.Labels.Sensitivity)
	}
	if v2.Version != v1.Version+1 || rep.Relabelled != 1 {
		t.Errorf("one relabelling wrote %d versions, counted Relabelled %d", v2.Version-v1.Version, rep.Relabelled)
	}

}

// GetByID finds a live resource of a streaming import by its keyed id
// alone (the patient segment of its URI unknown to the caller), through
// the id index; the Binary with the same source id in another tenant, a
// retired resource, a catalog no streaming import wrote and an id never
// imported are ErrNotFound, a malformed id ErrBadURI.
func TestGetByID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	n, other := testNamer(t, "gh"), testNamer(t, "gi")
	keyed := func(n *Namer, id string) string {
		u, err := n.URI("Binary", id, "")
		if err != nil {
			t.Fatal(err)
		}
		return u.ID
	}
	s0, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s0.GetByID(keyed(n, "b1")); !errors.Is(err, ErrNotFound) {
		t.Errorf("a catalog without the id index: %v, want ErrNotFound", err)
	}
	s0.Close()
	bin := Entry{Type: "Binary", ID: "b1", Patient: srcPatient, Body: []byte("note"), MIMEType: "text/plain", Sensitivity: []string{"psy"}, Where: "Binary.ndjson:1"}
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, bin); err != nil {
		t.Fatal(err)
	}
	s := openRead(t, path)
	r, err := s.GetByID(keyed(n, "b1"))
	if err != nil || r.URI != n.Link("Binary", "b1", srcPatient) || r.Labels.Patient != srcPatient || !slices.Equal(r.Labels.Sensitivity, []string{"psy"}) {
		t.Errorf("GetByID of the Binary: %+v, %v", r, err)
	}
	for name, id := range map[string]string{"another tenant": keyed(other, "b1"), "never imported": keyed(n, "b2")} {
		if _, err := s.GetByID(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := s.GetByID(strings.ToUpper(keyed(n, "b1"))); !errors.Is(err, ErrBadURI) {
		t.Errorf("an id not in canonical form: %v, want ErrBadURI", err)
	}
	s.Close()
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, Entry{Type: "Binary", ID: "b1", Deleted: true, Where: "deleted:1"}); err != nil {
		t.Fatal(err)
	}
	s = openRead(t, path)
	defer s.Close()
	if _, err := s.GetByID(keyed(n, "b1")); !errors.Is(err, ErrNotFound) {
		t.Errorf("a retired Binary: %v, want ErrNotFound", err)
	}
}

// A Referencer names source resources by their URIs' keyed ids (the serve
// path's minimize.Options.KeyID): a resource a streaming import named by
// the id of its URI, and one the catalog does not hold (or not in this
// tenant) by the id a streaming import would give it, so that a view does
// not tell a hidden or retired resource from a missing one; not by
// another type, nor a type custos does not know; a key too short is
// refused.
func TestReferencerKeyedID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	n := testNamer(t, "gh")
	cov := Entry{Type: "Coverage", ID: "VSDMCoverage-GKV-V731904826", Patient: srcPatient,
		Body: []byte(`{"resourceType":"Coverage","id":"VSDMCoverage-GKV-V731904826"}`), MIMEType: MIMEFHIR, Where: "Coverage.ndjson:1"}
	bin := Entry{Type: "Binary", ID: "b1", Patient: srcPatient, Body: []byte("note"), MIMEType: "text/plain", Where: "Binary.ndjson:1"}
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, cov, bin); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReferencer(testIDKey[:MinIDKeySize-1]); err == nil {
		t.Error("a short key was taken")
	}
	r, err := NewReferencer(testIDKey)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]string{ // keyed ids of the URIs the import gave
		"Coverage": n.Link("Coverage", cov.ID, srcPatient),
		"Binary":   n.Link("Binary", "b1", srcPatient),
	}
	for _, c := range []struct {
		tenant, typ, id string
		want            string // "held" (the URI's id), "keyed" (ResourceID), "" (not named)
	}{
		{"gh", "Coverage", cov.ID, "held"},
		{"gh", "Binary", "b1", "held"},
		{"gi", "Coverage", cov.ID, "keyed"},
		{"gh", "Coverage", "VSDMCoverage-GKV-0", "keyed"},
		{"gh", "Patient", cov.ID, "keyed"},
		{"gh", "coverage", cov.ID, ""},
		{"gh", "Attachment", "b1", ""},
		{"gh", "", cov.ID, ""},
		{"gh", "Coverage", "", ""},
		{"GH", "Coverage", cov.ID, ""},
	} {
		got, ok := r.KeyedID(c.tenant, c.typ, c.id)
		switch c.want {
		case "":
			if ok || got != "" {
				t.Errorf("%s %s/%s named %q", c.tenant, c.typ, c.id, got)
			}
		case "held":
			if !ok || !strings.HasSuffix(held[c.typ], "/"+got) {
				t.Errorf("%s %s/%s: %q %v, want the id of %s", c.tenant, c.typ, c.id, got, ok, held[c.typ])
			}
		default:
			if want := ResourceID(testIDKey, c.tenant, c.typ, c.id); !ok || got != want || strings.Contains(got, c.id) {
				t.Errorf("%s %s/%s: %q %v, want %q", c.tenant, c.typ, c.id, got, ok, want)
			}
		}
	}
}
