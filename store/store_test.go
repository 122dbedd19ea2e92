package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBlobIntegrity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	i := f.add("note")
	marker := "UNIQUE-BLOB-MARKER-7f3c"
	data := []byte("# Note\n\n" + marker + "\n")
	f.writeFile(f.entries[i].File, data)
	f.add("observation")
	f.writeManifest()
	mustImport(t, s, f.dir)
	r, err := s.Get(f.entries[i].URI)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := s.Get(f.entries[1].URI)
	s.Close()

	// Flip one byte of the blob directly in the bbolt file.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := bytes.Count(raw, []byte(marker))
	if n == 0 {
		t.Fatal("marker not found in the database file")
	}
	corrupted := slices.Clone(data)
	corrupted[len(corrupted)-2] ^= 0x01
	raw = bytes.ReplaceAll(raw, data, corrupted)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.Blob(context.Background(), r.Digest)
	if b != nil {
		t.Fatalf("Blob returned %d corrupt bytes", len(b))
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Blob error = %v, want ErrCorrupt", err)
	}
	var ie *IntegrityError
	if !errors.As(err, &ie) {
		t.Fatalf("error %T is not an *IntegrityError", err)
	}
	if ie.Digest != r.Digest || ie.Got != Digest(corrupted) {
		t.Fatalf("evidence = %+v, want digest %s got %s", ie, r.Digest, Digest(corrupted))
	}
	if !strings.Contains(err.Error(), r.Digest) || strings.Contains(err.Error(), marker) {
		t.Fatalf("error message %q", err)
	}
	// Other blobs are unaffected.
	if _, err := s.Blob(context.Background(), other.Digest); err != nil {
		t.Fatalf("untouched blob: %v", err)
	}
}

func TestBlobLookupErrors(t *testing.T) {
	s, _ := openTestStore(t)
	for _, d := range []string{
		"",
		"sha256:",
		"sha256:" + strings.Repeat("0", 64),
		"sha256:" + strings.Repeat("A", 64),
		"sha512:" + strings.Repeat("0", 64),
		"sha256:" + strings.Repeat("0", 63),
		strings.Repeat("0", 64),
	} {
		if b, err := s.Blob(context.Background(), d); !errors.Is(err, ErrNotFound) || b != nil {
			t.Errorf("Blob(%q) = %v, %v, want ErrNotFound", d, b, err)
		}
	}
}

func TestGetErrors(t *testing.T) {
	s, _ := openTestStore(t)
	if _, err := s.Get("fhir://gh/patients/" + tPatient + "/patient/" + tID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}
	if _, err := s.Get("fhir://gh/patients/" + tPatient + "/patient/" + tID + "?x"); !errors.Is(err, ErrBadURI) {
		t.Fatalf("Get bad uri: %v", err)
	}
	if _, err := s.Version("fhir://gh/patients/"+tPatient+"/patient/"+tID, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Version 0: %v", err)
	}
}

func TestPage(t *testing.T) {
	s, _ := openTestStore(t)
	f := newFixture(t)
	f.addN(250)
	f.writeManifest()
	mustImport(t, s, f.dir)

	var want []string
	for _, e := range f.entries {
		want = append(want, e.URI)
	}
	slices.Sort(want)
	if n, err := s.Count(); err != nil || n != 250 {
		t.Fatalf("Count = %d, %v", n, err)
	}

	for _, limit := range []int{1, 7, 100, 250, 1000} {
		var got []string
		after := ""
		pages := 0
		for {
			page, err := s.Page(after, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page))
			}
			for _, r := range page {
				got = append(got, r.URI)
			}
			pages++
			if len(page) < limit {
				break
			}
			after = page[len(page)-1].URI
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: paged URIs differ from sorted URIs (%d vs %d)", limit, len(got), len(want))
		}
		if wantPages := 250/limit + 1; pages != wantPages {
			t.Fatalf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
	}

	// A cursor that is not a stored URI continues after it.
	mid := want[100]
	cursor := mid[:len(mid)-1] // sorts just before mid
	page, err := s.Page(cursor, 3)
	if err != nil || len(page) != 3 || page[0].URI != mid {
		t.Fatalf("Page(non-key cursor) = %v, %v", page, err)
	}
	// Strictly greater.
	page, _ = s.Page(mid, 1)
	if len(page) != 1 || page[0].URI != want[101] {
		t.Fatalf("Page(mid) = %v", page)
	}
	// Past the end.
	if page, err := s.Page(want[249], 10); err != nil || len(page) != 0 {
		t.Fatalf("Page(last) = %v, %v", page, err)
	}
	if page, err := s.Page("~", 10); err != nil || len(page) != 0 {
		t.Fatalf("Page(~) = %v, %v", page, err)
	}
	if _, err := s.Page("", 0); err == nil {
		t.Fatal("Page with limit 0 succeeded")
	}
}

func TestOpenLocked(t *testing.T) {
	_, path := openTestStore(t)
	s2, err := Open(path, Options{Timeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if _, err := Open(path, Options{Timeout: 50 * time.Millisecond, ReadOnly: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only Open while a writer holds the lock: %v, want ErrLocked", err)
	}
}

func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.db"), Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only Open of a missing file succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only Open created the file: %v", err)
	}

	path := filepath.Join(dir, "store.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, want 0600", fi.Mode().Perm())
	}
	f := newFixture(t)
	f.addN(3)
	f.writeManifest()
	mustImport(t, s, f.dir)
	s.Close()

	// Two readers share the lock.
	r1, err := Open(path, Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := Open(path, Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	defer r2.Close()
	if n, _ := r2.Count(); n != 3 {
		t.Fatalf("Count = %d", n)
	}
	if _, err := r1.Import(t.Context(), f.dir, nil); err == nil {
		t.Fatal("Import into a read-only store succeeded")
	}
	if _, err := Open(path, Options{Timeout: -1}); err == nil {
		t.Fatal("negative timeout accepted")
	}
}

func TestOpenRejectsForeignFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "not-a-db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path, Options{}); err == nil {
		s.Close()
		t.Fatal("Open of a non-bbolt file succeeded")
	}
}
