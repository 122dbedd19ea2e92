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
)

func TestImportSuccess(t *testing.T) {
	s, _ := openTestStore(t)
	f := newFixture(t)
	f.addN(18) // every type twice
	// Two entries sharing identical content: stored once.
	dup := f.add("note")
	f.entries[dup].File = f.entries[dup-2].File // note two entries earlier
	f.writeManifest()

	var calls [][2]int
	rep, err := s.Import(context.Background(), f.dir, func(done, total int) {
		calls = append(calls, [2]int{done, total})
	})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	want := ImportReport{Lines: 19, Created: 19}
	rep.Bytes = 0
	if rep != want {
		t.Fatalf("report = %+v, want %+v", rep, want)
	}
	if len(calls) == 0 || calls[len(calls)-1] != [2]int{38, 38} {
		t.Fatalf("progress calls end with %v, want [38 38]", calls)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i][0] <= calls[i-1][0] {
			t.Fatalf("progress not increasing: %v", calls)
		}
	}
	if n, _ := s.Count(); n != 19 {
		t.Fatalf("Count = %d, want 19", n)
	}
	if n := blobCount(t, s); n != 18 {
		t.Fatalf("blobs = %d, want 18 (one deduplicated)", n)
	}
	for _, e := range f.entries {
		r, err := s.Get(e.URI)
		if err != nil {
			t.Fatalf("Get(%s): %v", e.URI, err)
		}
		data := f.readFile(e.File)
		if r.Digest != Digest(data) || r.Size != int64(len(data)) || r.Version != 1 {
			t.Errorf("%s: etag %s size %d version %d", e.URI, r.Digest, r.Size, r.Version)
		}
		if r.Name != e.Name || r.Title != e.Title || r.Description != e.Description || r.MIMEType != e.MIMEType {
			t.Errorf("%s: metadata %+v", e.URI, r)
		}
		if !slices.Equal(r.Labels.Sensitivity, e.Labels.Sensitivity) || !slices.Equal(r.Labels.Consent, e.Labels.Consent) ||
			r.Labels.Tenant != e.Labels.Tenant || r.Labels.Patient != e.Labels.Patient || r.Labels.Type != e.Labels.Type {
			t.Errorf("%s: labels %+v, want %+v", e.URI, r.Labels, e.Labels)
		}
		if !r.Annotations.LastModified.Equal(e.Annotations.LastModified) || r.Annotations.Priority != 0.5 {
			t.Errorf("%s: annotations %+v", e.URI, r.Annotations)
		}
		b, err := s.Blob(context.Background(), r.Digest)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("Blob(%s) = %d bytes, %v", r.Digest, len(b), err)
		}
		// Blob returns a copy the caller may modify.
		b[0] ^= 0xff
		if b2, err := s.Blob(context.Background(), r.Digest); err != nil || !bytes.Equal(b2, data) {
			t.Fatalf("Blob after modifying a returned slice: %v", err)
		}
	}

	// The manifest file itself may be given instead of the directory.
	rep = mustImport(t, s, filepath.Join(f.dir, ManifestName))
	if rep.Unchanged != 19 || rep.Created != 0 || rep.Updated != 0 {
		t.Fatalf("second import via file = %+v, want all unchanged", rep)
	}
}

// badCase mutates a valid 5-entry fixture so that line 3 is bad.
type badCase struct {
	name   string
	mutate func(f *fixture) []string // returns the manifest lines
	want   string                    // substring of the error, after "manifest.jsonl:3: "
}

func badCases(t *testing.T) []badCase {
	line3 := func(f *fixture, edit func(e *ManifestEntry)) []string {
		edit(&f.entries[2])
		return f.lines()
	}
	return []badCase{
		{"bad json", func(f *fixture) []string {
			l := f.lines()
			l[2] = l[2][:len(l[2])/2] + `",,}`
			return l
		}, "json: invalid json syntax"},
		{"truncated json", func(f *fixture) []string {
			l := f.lines()
			l[2] = l[2][:len(l[2])-5]
			return l
		}, "json: truncated json"},
		{"not an object", func(f *fixture) []string {
			l := f.lines()
			l[2] = `["` + phiMarker + `"]`
			return l
		}, "json: line is not a json object"},
		{"trailing data", func(f *fixture) []string {
			l := f.lines()
			l[2] += ` {}`
			return l
		}, "json: trailing data"},
		{"unknown field", func(f *fixture) []string {
			l := f.lines()
			l[2] = `{"ssn":"` + phiMarker + `",` + l[2][1:]
			return l
		}, `json: unknown field "ssn"`},
		{"unknown nested field", func(f *fixture) []string {
			l := f.lines()
			l[2] = strings.Replace(l[2], `"labels":{`, `"labels":{"mrn":"123",`, 1)
			return l
		}, `json: unknown field "mrn"`},
		{"wrong type", func(f *fixture) []string {
			l := f.lines()
			l[2] = strings.Replace(l[2], `"priority":0.5`, `"priority":"high"`, 1)
			return l
		}, "json: field annotations.priority has the wrong type"},
		{"bad uri", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.URI = strings.ToUpper(e.URI[:4]) + e.URI[4:] })
		}, "uri: scheme is not lowercase"},
		{"bad uri id", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.URI = e.URI[:len(e.URI)-36] + "not-a-uuid" })
		}, "uri: id is not a canonical uuid"},
		{"missing uri", func(f *fixture) []string { return line3(f, func(e *ManifestEntry) { e.URI = "" }) }, "uri: missing"},
		{"tenant mismatch", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.Labels.Tenant = "other-hospital" })
		}, "labels.tenant: does not match the uri"},
		{"patient mismatch", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.Labels.Patient = testUUID(9, 9) })
		}, "labels.patient: does not match the uri"},
		{"type mismatch", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.Labels.Type = "patient" })
		}, "labels.type: does not match the uri"},
		{"missing name", func(f *fixture) []string { return line3(f, func(e *ManifestEntry) { e.Name = "" }) }, "name: missing"},
		{"control char in name", func(f *fixture) []string { return line3(f, func(e *ManifestEntry) { e.Name = "a\x1bb" }) }, "name: contains control characters"},
		{"missing mime", func(f *fixture) []string { return line3(f, func(e *ManifestEntry) { e.MIMEType = "" }) }, "mimeType: missing"},
		{"wrong mime", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.MIMEType = "application/json" })
		}, "mimeType: must be image/png for image resources"},
		{"bad audience", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.Annotations.Audience = []string{"robot"} })
		}, "annotations.audience: unknown value"},
		{"priority too high", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.Annotations.Priority = 1.5 })
		}, "annotations.priority: must be between 0 and 1"},
		{"priority negative", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.Annotations.Priority = -0.1 })
		}, "annotations.priority: must be between 0 and 1"},
		{"unknown sensitivity", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.Labels.Sensitivity = []string{"hiv", "psych"} })
		}, "labels.sensitivity: unknown value"},
		{"duplicate sensitivity", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.Labels.Sensitivity = []string{"vip", "vip"} })
		}, "labels.sensitivity: duplicate value"},
		{"unknown consent", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.Labels.Consent = []string{"opt-in"} })
		}, "labels.consent: unknown value"},
		{"missing file field", func(f *fixture) []string { return line3(f, func(e *ManifestEntry) { e.File = "" }) }, "file: missing"},
		{"missing file", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.File = "fhir/does-not-exist.json" })
		}, "file: does not exist"},
		{"file is a directory", func(f *fixture) []string { return line3(f, func(e *ManifestEntry) { e.File = "fhir" }) }, "file: is not a regular file"},
		{"path escape dotdot", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.File = "../" + filepath.Base(f.dir) + "/" + e.File })
		}, "file: path escapes the manifest directory"},
		{"path absolute", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.File = filepath.Join(f.dir, e.File) })
		}, "file: path is absolute"},
		{"path not clean", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) { e.File = "./" + e.File })
		}, "file: path is not clean"},
		{"symlink escape", func(f *fixture) []string {
			outside := filepath.Join(t.TempDir(), "outside.json")
			if err := os.WriteFile(outside, f.readFile(f.entries[2].File), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(f.dir, "link.json")); err != nil {
				t.Fatal(err)
			}
			return line3(f, func(e *ManifestEntry) { e.File = "link.json" })
		}, "file: path escapes the manifest directory"},
		{"symlinked directory escape", func(f *fixture) []string {
			outDir := t.TempDir()
			if err := os.WriteFile(filepath.Join(outDir, "x.json"), f.readFile(f.entries[2].File), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outDir, filepath.Join(f.dir, "linkdir")); err != nil {
				t.Fatal(err)
			}
			return line3(f, func(e *ManifestEntry) { e.File = "linkdir/x.json" })
		}, "file: path escapes the manifest directory"},
		{"bad png", func(f *fixture) []string {
			// entry 3 (index 2) of typeCycle[8:] is an image, see fixture below.
			f.writeFile(f.entries[2].File, []byte("GIF89a"+phiMarker))
			return f.lines()
		}, "file: is not a png"},
		{"duplicate uri", func(f *fixture) []string {
			return line3(f, func(e *ManifestEntry) {
				e.URI = f.entries[0].URI
				e.Labels = f.entries[0].Labels
				e.MIMEType = f.entries[0].MIMEType
			})
		}, "uri: duplicate uri (first on line 1)"},
	}
}

// badFixture builds a valid 5-entry manifest: observation, note, image,
// report, condition (line 3 is the image).
func badFixture(t *testing.T) *fixture {
	f := newFixture(t)
	for _, typ := range []string{"observation", "note", "image", "report", "condition"} {
		f.add(typ)
	}
	return f
}

func TestImportRejectsBadLine(t *testing.T) {
	for _, tc := range badCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTestStore(t)
			f := badFixture(t)
			f.writeManifest(tc.mutate(f)...)
			_, err := s.Import(context.Background(), f.dir, nil)
			if err == nil {
				t.Fatal("Import succeeded, want error")
			}
			if !errors.Is(err, ErrBadManifest) {
				t.Fatalf("error %v does not wrap ErrBadManifest", err)
			}
			want := "manifest.jsonl:3: " + tc.want
			if !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error = %q, want prefix %q", err, want)
			}
			var me *ManifestError
			if !errors.As(err, &me) || me.Line != 3 || me.File != ManifestName {
				t.Fatalf("error %#v is not a *ManifestError for line 3", me)
			}
			if strings.Contains(err.Error(), phiMarker) || strings.Contains(err.Error(), "999-12-3456") {
				t.Fatalf("error leaks file content: %q", err)
			}
			assertEmpty(t, s, f)
		})
	}
}

// assertEmpty proves that nothing of f was written, lines before the bad one
// included.
func assertEmpty(t *testing.T, s *Store, f *fixture) {
	t.Helper()
	if n, err := s.Count(); err != nil || n != 0 {
		t.Fatalf("Count = %d, %v after failed import, want 0", n, err)
	}
	for _, e := range f.entries[:2] {
		if _, err := s.Get(e.URI); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%s) after failed import: %v, want ErrNotFound", e.URI, err)
		}
	}
	if n := blobCount(t, s); n != 0 {
		t.Fatalf("%d blobs after failed import, want 0", n)
	}
}

func TestImportReportsEveryBadLine(t *testing.T) {
	s, _ := openTestStore(t)
	f := badFixture(t)
	l := f.lines()
	l[1] = "{not json"
	f.entries[4].Labels.Type = "patient"
	l[4] = f.lines()[4]
	f.writeManifest(l...)
	_, err := s.Import(context.Background(), f.dir, nil)
	if err == nil {
		t.Fatal("Import succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"manifest.jsonl:2: json:", "manifest.jsonl:5: labels.type:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	assertEmpty(t, s, f)

	// Files are checked for every line too.
	f2 := badFixture(t)
	f2.entries[0].File = "missing-a.json"
	f2.entries[3].File = "missing-b.pdf"
	f2.writeManifest()
	_, err = s.Import(context.Background(), f2.dir, nil)
	if err == nil || !strings.Contains(err.Error(), "manifest.jsonl:1: file: does not exist") ||
		!strings.Contains(err.Error(), "manifest.jsonl:4: file: does not exist") {
		t.Fatalf("error = %v, want lines 1 and 4", err)
	}
	assertEmpty(t, s, f2)
}

func TestImportContentChecks(t *testing.T) {
	tests := []struct {
		typ  string
		data string
		want string
	}{
		{"observation", `{"resourceType":"Observation"`, "file: is not valid json"},
		{"observation", `["Observation"]`, "file: is not a json object"},
		{"observation", `{"id":"x"}`, "file: has no resourceType"},
		{"observation", `{"resourceType":"Patient","name":"` + phiMarker + `"}`, "file: resourceType does not match type observation"},
		{"note", "caf\xe9 " + phiMarker, "file: is not valid utf-8"},
		{"observation", `{"resourceType":"Observation","note":"caf` + "\xe9" + `"}`, "file: is not valid utf-8"},
		{"report", "PDF-1.4 " + phiMarker, "file: is not a pdf"},
		{"image", "\x89PNG\r\n" + phiMarker, "file: is not a png"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			s, _ := openTestStore(t)
			f := newFixture(t)
			f.add("patient")
			i := f.add(tt.typ)
			f.writeFile(f.entries[i].File, []byte(tt.data))
			f.writeManifest()
			_, err := s.Import(context.Background(), f.dir, nil)
			want := "manifest.jsonl:2: " + tt.want
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error = %v, want prefix %q", err, want)
			}
			if strings.Contains(err.Error(), phiMarker) {
				t.Fatalf("error leaks content: %q", err)
			}
			if n, _ := s.Count(); n != 0 {
				t.Fatalf("Count = %d after failed import", n)
			}
		})
	}
	// resourceType is matched case-insensitively.
	s, _ := openTestStore(t)
	f := newFixture(t)
	i := f.add("medicationrequest")
	f.writeFile(f.entries[i].File, []byte(`{"resourceType":"MEDICATIONREQUEST"}`))
	f.writeManifest()
	mustImport(t, s, f.dir)
}

func TestImportFailureKeepsPreviousState(t *testing.T) {
	s, _ := openTestStore(t)
	f := badFixture(t)
	f.writeManifest()
	mustImport(t, s, f.dir)
	before, err := s.Page("", 100)
	if err != nil {
		t.Fatal(err)
	}
	blobs := blobCount(t, s)

	// Change line 1's content and line 2's title, add a new entry, and break line 5.
	f.writeFile(f.entries[0].File, content(mustParse(t, f.entries[0].URI), "changed"))
	f.entries[1].Title = "changed"
	f.add("encounter")
	f.entries[4].Labels.Consent = []string{"maybe"}
	f.writeManifest()
	_, err = s.Import(context.Background(), f.dir, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "manifest.jsonl:5: labels.consent") {
		t.Fatalf("error = %v", err)
	}
	after, _ := s.Page("", 100)
	if len(after) != len(before) {
		t.Fatalf("resources changed: %d -> %d", len(before), len(after))
	}
	for i := range before {
		if after[i].Digest != before[i].Digest || after[i].Version != 1 || after[i].Title != before[i].Title {
			t.Fatalf("resource %d changed by failed import: %+v", i, after[i])
		}
	}
	if _, err := s.Get(f.entries[5].URI); !errors.Is(err, ErrNotFound) {
		t.Fatalf("new entry written by failed import: %v", err)
	}
	if got := blobCount(t, s); got != blobs {
		t.Fatalf("blobs %d -> %d after failed import", blobs, got)
	}
}

func TestImportCanceled(t *testing.T) {
	s, _ := openTestStore(t)
	f := newFixture(t)
	f.addN(20)
	f.writeManifest()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Import(ctx, f.dir, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Import with canceled ctx: %v", err)
	}
	if n, _ := s.Count(); n != 0 {
		t.Fatalf("Count = %d", n)
	}
}

func TestReimport(t *testing.T) {
	s, _ := openTestStore(t)
	f := newFixture(t)
	f.addN(9)
	f.writeManifest()
	mustImport(t, s, f.dir)

	changed := f.entries[1]
	old, err := s.Get(changed.URI)
	if err != nil {
		t.Fatal(err)
	}
	oldData := f.readFile(changed.File)
	newData := content(mustParse(t, changed.URI), "version two")
	f.writeFile(changed.File, newData)
	f.entries[4].Title = "Renamed"                    // metadata only
	f.entries[5].Labels.Sensitivity = []string{"vip"} // labels only
	// Reordering a set is not a change.
	f.entries[6].Annotations.Audience = []string{"user", "assistant"}
	f.writeManifest()

	rep := mustImport(t, s, f.dir)
	if rep.Updated != 3 || rep.Unchanged != 6 || rep.Created != 0 || rep.Lines != 9 {
		t.Fatalf("report = %+v, want 3 updated, 6 unchanged", rep)
	}
	cur, err := s.Get(changed.URI)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Version != 2 || cur.Digest == old.Digest || cur.Digest != Digest(newData) || cur.Size != int64(len(newData)) {
		t.Fatalf("after content change: %+v (old etag %s)", cur, old.Digest)
	}
	v1, err := s.Version(changed.URI, 1)
	if err != nil || v1.Digest != old.Digest || v1.Version != 1 {
		t.Fatalf("Version 1 = %+v, %v", v1, err)
	}
	if b, err := s.Blob(context.Background(), old.Digest); err != nil || !bytes.Equal(b, oldData) {
		t.Fatalf("old blob: %v", err)
	}
	meta, _ := s.Get(f.entries[4].URI)
	if meta.Version != 2 || meta.Title != "Renamed" {
		t.Fatalf("after metadata change: %+v", meta)
	}
	if v1, _ := s.Version(f.entries[4].URI, 1); v1.Digest != meta.Digest || v1.Title == "Renamed" {
		t.Fatalf("metadata change: v1 %+v", v1)
	}
	if r, _ := s.Get(f.entries[6].URI); r.Version != 1 {
		t.Fatalf("reordered audience created version %d", r.Version)
	}
	if _, err := s.Version(changed.URI, 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Version 3: %v", err)
	}

	// Identical re-import: nothing changes.
	rep = mustImport(t, s, f.dir)
	if rep.Unchanged != 9 || rep.Updated != 0 || rep.Created != 0 {
		t.Fatalf("identical re-import = %+v", rep)
	}
	if cur2, _ := s.Get(changed.URI); cur2.Version != 2 || cur2.Digest != cur.Digest {
		t.Fatalf("identical re-import changed %+v", cur2)
	}

	// Going back to the old content is a new version, not a rollback.
	f.writeFile(changed.File, oldData)
	rep = mustImport(t, s, f.dir)
	if rep.Updated != 1 {
		t.Fatalf("revert import = %+v", rep)
	}
	if r, _ := s.Get(changed.URI); r.Version != 3 || r.Digest != old.Digest {
		t.Fatalf("after revert: %+v", r)
	}
}

func TestParseManifest(t *testing.T) {
	f := newFixture(t)
	f.add("observation")
	f.entries[0].Labels.Sensitivity = []string{"vip", "hiv"}
	f.entries[0].Labels.Consent = []string{}
	l := f.lines()
	in := "\n" + l[0] + "\n\n"
	got, err := ParseManifest(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !slices.Equal(got[0].Labels.Sensitivity, []string{"hiv", "vip"}) || got[0].Labels.Consent != nil {
		t.Fatalf("ParseManifest = %+v", got)
	}
	_, err = ParseManifest(strings.NewReader(l[0] + "\n" + `{"uri":1}` + "\n"))
	var me *ManifestError
	if !errors.As(err, &me) || me.Line != 2 || !strings.HasPrefix(err.Error(), "line 2: json: field uri has the wrong type") {
		t.Fatalf("error = %v", err)
	}
	if _, err := ParseManifest(strings.NewReader("\n\n")); !errors.Is(err, ErrBadManifest) {
		t.Fatalf("empty manifest: %v", err)
	}
	long := strings.Repeat("x", MaxManifestLine+1)
	if _, err := ParseManifest(strings.NewReader(l[0] + "\n" + long + "\n")); err == nil || !strings.HasPrefix(err.Error(), "line 2: line longer") {
		t.Fatalf("long line: %v", err)
	}
	// Many bad lines are capped.
	var many strings.Builder
	for i := 0; i < 30; i++ {
		many.WriteString("{}\n")
	}
	_, err = ParseManifest(strings.NewReader(many.String()))
	if err == nil || !strings.Contains(err.Error(), "more problems not shown") || !strings.Contains(err.Error(), "line 5:") || strings.Contains(err.Error(), "line 6:") {
		t.Fatalf("capped errors: %v", err)
	}
}

func mustParse(t testing.TB, raw string) URI {
	t.Helper()
	u, err := ParseURI(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
