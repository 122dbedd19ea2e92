package fhirin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// testLink is the Link callback of the tests: a recognizable custos URI.
func testLink(typ, id, patient string) string {
	return "attachment://t/" + typ + "/" + id + "/" + patient
}

func readAll(t testing.TB, path string) ([]Item, error) {
	t.Helper()
	var out []Item
	err := Read(context.Background(), path, Options{Link: testLink}, func(it Item) error {
		out = append(out, it)
		return nil
	})
	return out, err
}

func mustReadAll(t testing.TB, path string) []Item {
	t.Helper()
	items, err := readAll(t, path)
	if err != nil {
		t.Fatalf("Read(%s): %v", path, err)
	}
	return items
}

func find(t testing.TB, items []Item, typ, id string) Item {
	t.Helper()
	for _, it := range items {
		if it.Type == typ && it.ID == id && !it.Deleted {
			return it
		}
	}
	t.Fatalf("no %s %s among %d items", typ, id, len(items))
	return Item{}
}

const (
	p1 = "8c7ba1e5-1f0b-4a3e-9d3c-5e2f7a9b1c01"
	p2 = "3f1d9e2a-6b4c-4d8e-8a1f-2c3b4d5e6f02"
)

// The Bulk export directory and its $export manifest yield the same items.
func TestReadBulkExport(t *testing.T) {
	dir := mustReadAll(t, "testdata/bulk")
	man := mustReadAll(t, "testdata/export-manifest.json")
	if len(dir) != 24 || len(man) != len(dir) {
		t.Fatalf("got %d items from the directory, %d from the manifest; want 24", len(dir), len(man))
	}
	key := func(it Item) string { return it.Type + "/" + it.ID + "/" + it.Patient + "/" + string(it.Body) }
	var a, b []string
	for i := range dir {
		a, b = append(a, key(dir[i])), append(b, key(man[i]))
		if !strings.HasPrefix(man[i].Where, "bulk/") {
			t.Errorf("manifest item Where %q: want the path relative to the manifest", man[i].Where)
		}
	}
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Error("the directory and the manifest yield different items")
	}

	for _, tc := range []struct {
		typ, id, patient string
		labels, consent  []string
	}{
		{"Patient", p1, p1, nil, nil},
		{"Patient", p2, p2, []string{"vip"}, []string{"opt-out"}}, // ActCode CELEB; the Consent denies
		{"Observation", "obs-0002", p1, []string{"hiv"}, nil},
		{"Observation", "obs-0003", p2, []string{"restricted"}, []string{"opt-out"}},
		{"Observation", "obs-0005", p1, nil, nil}, // from the .ndjson.gz file
		{"Condition", "cond-0002", p2, []string{"psy", "sud"}, []string{"opt-out"}},
		{"Organization", "ef58ea08-d883-3957-8300-150554edc8fb", "", nil, nil},
		{"Practitioner", "0000016d-3a85-4cca-0000-000000005e8c", "", nil, nil},
		{"Medication", "b7a1c3d5-e6f7-4a8b-9c0d-1e2f3a4b5c6d", "", nil, nil},
		{"MedicationRequest", "medreq-0001", p1, nil, nil},
		// The PDF Binary takes the compartment of the DocumentReference linking it.
		{"Binary", "c0ffee00-1111-4222-8333-444455556666", p2, nil, []string{"opt-out"}},
		// This one is linked by nobody: its securityContext names the patient.
		{"Binary", "c0ffee00-1111-4222-8333-444455557777", p1, nil, nil},
	} {
		it := find(t, dir, tc.typ, tc.id)
		if it.Patient != tc.patient || !slices.Equal(it.Sensitivity, tc.labels) || !slices.Equal(it.Consent, tc.consent) {
			t.Errorf("%s %s: patient %q labels %v consent %v; want %q %v %v", tc.typ, tc.id, it.Patient, it.Sensitivity, it.Consent, tc.patient, tc.labels, tc.consent)
		}
	}

	// Only the opt-out Consent says OptOut: the importer decides every
	// item's label from the opt-out Consents of its catalog.
	for _, it := range dir {
		if it.OptOut != (it.Type == "Consent" && it.Patient == p2) {
			t.Errorf("%s %s: OptOut %v", it.Type, it.ID, it.OptOut)
		}
	}

	obs := find(t, dir, "Observation", "obs-0001")
	if obs.MIMEType != FHIRJSON || obs.LastUpdated.Format("2006-01-02") != "2024-05-02" || obs.Where != "Observation.000.ndjson:1" {
		t.Errorf("obs-0001: %q %v %q", obs.MIMEType, obs.LastUpdated, obs.Where)
	}
	if !bytes.Contains(obs.Body, []byte(`"value":6.10`)) {
		t.Errorf("obs-0001 body lost the decimal's precision: %s", obs.Body)
	}

	// The inline note is lifted out of its DocumentReference.
	doc := find(t, dir, "DocumentReference", "doc-0001")
	attID := "DocumentReference/doc-0001/content[0].attachment"
	att := find(t, dir, TypeAttachment, attID)
	if !bytes.HasPrefix(att.Body, []byte("Harold594 Kuhn96 was seen")) || att.MIMEType != "text/plain; charset=utf-8" ||
		att.Patient != p1 || att.Carrier != (Carrier{"DocumentReference", "doc-0001"}) {
		t.Errorf("lifted note: %+v", att)
	}
	if bytes.Contains(doc.Body, []byte(`"data"`)) || !bytes.Contains(doc.Body, []byte(`"url":"`+testLink(TypeAttachment, attID, p1)+`"`)) {
		t.Errorf("carrier keeps its data or lacks the link: %s", doc.Body)
	}
	// A url to a Binary of the import becomes the Binary's link.
	doc2 := find(t, dir, "DocumentReference", "doc-0002")
	if !bytes.Contains(doc2.Body, []byte(`"url":"`+testLink("Binary", "c0ffee00-1111-4222-8333-444455556666", p2)+`"`)) {
		t.Errorf("Binary link missing: %s", doc2.Body)
	}
	pdf := find(t, dir, "Binary", "c0ffee00-1111-4222-8333-444455556666")
	if !bytes.HasPrefix(pdf.Body, []byte("%PDF-")) || pdf.MIMEType != "application/pdf" || pdf.Carrier != (Carrier{"DocumentReference", "doc-0002"}) {
		t.Errorf("Binary: %q %q %+v", pdf.Body[:8], pdf.MIMEType, pdf.Carrier)
	}

	var deleted []string
	for _, it := range dir {
		if it.Deleted {
			deleted = append(deleted, it.Type+"/"+it.ID)
			if it.Body != nil || it.Where != "Bundle.deleted.ndjson:1" {
				t.Errorf("deleted item %+v", it)
			}
		}
	}
	if !slices.Equal(deleted, []string{"Observation/obs-0099", "Condition/cond-0042"}) {
		t.Errorf("deleted = %v", deleted)
	}
}

// A Synthea-shaped transaction Bundle: urn:uuid references resolved to
// relative ones, conditional references outside the Bundle kept, notes
// lifted, the Binary an attachment names by urn:uuid linked, every entry
// named by the line it starts on.
func TestReadSyntheaBundle(t *testing.T) {
	const pt = "a3c9e7d1-2b4f-4e6a-8c0d-1f2e3a4b5c6d"
	items := mustReadAll(t, "testdata/synthea-bundle.json")
	src, err := os.ReadFile("testdata/synthea-bundle.json")
	if err != nil {
		t.Fatal(err)
	}
	var entryLines []string // lines where an entry object opens (indent 4)
	for i, l := range strings.Split(string(src), "\n") {
		if l == "    {" {
			entryLines = append(entryLines, "synthea-bundle.json:"+itoa(i+1))
		}
	}
	var resources []Item
	for _, it := range items {
		if bytes.Contains(it.Body, []byte(`"reference":"urn:uuid:`)) || bytes.Contains(it.Body, []byte(`"url":"urn:uuid:`)) {
			t.Errorf("%s %s still holds a urn:uuid reference", it.Type, it.ID)
		}
		if it.Type != TypeAttachment {
			resources = append(resources, it)
		}
		if it.Patient != pt {
			t.Errorf("%s %s: patient %q, want %q", it.Type, it.ID, it.Patient, pt)
		}
	}
	if len(resources) != len(entryLines) {
		t.Fatalf("%d resources for %d entries", len(resources), len(entryLines))
	}
	for i, it := range resources {
		if it.Where != entryLines[i] {
			t.Errorf("%s Where = %q, want %q", it.Type, it.Where, entryLines[i])
		}
	}
	enc := find(t, items, "Encounter", "e1e2e3e4-0001-4aaa-8bbb-000000000001")
	if !bytes.Contains(enc.Body, []byte(`"reference":"Patient/`+pt+`"`)) ||
		!bytes.Contains(enc.Body, []byte(`"reference":"Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|9999924094"`)) {
		t.Errorf("Encounter references: %s", enc.Body)
	}
	if c := find(t, items, "Condition", "e1e2e3e4-0002-4aaa-8bbb-000000000002"); !slices.Equal(c.Sensitivity, []string{"hiv"}) {
		t.Errorf("Condition labels %v", c.Sensitivity)
	}
	for _, id := range []string{"DocumentReference/e1e2e3e4-0004-4aaa-8bbb-000000000004/content[0].attachment", "DiagnosticReport/e1e2e3e4-0005-4aaa-8bbb-000000000005/presentedForm[0]"} {
		if a := find(t, items, TypeAttachment, id); !bytes.HasPrefix(a.Body, []byte("Harold594")) || a.MIMEType != "text/plain; charset=utf-8" {
			t.Errorf("%s: %+v", id, a)
		}
	}
	bin := find(t, items, "Binary", "e1e2e3e4-0008-4aaa-8bbb-000000000008")
	if bin.Carrier != (Carrier{"DocumentReference", "e1e2e3e4-0009-4aaa-8bbb-000000000009"}) {
		t.Errorf("Binary carrier %+v", bin.Carrier)
	}
	doc2 := find(t, items, "DocumentReference", "e1e2e3e4-0009-4aaa-8bbb-000000000009")
	if !bytes.Contains(doc2.Body, []byte(testLink("Binary", bin.ID, pt))) {
		t.Errorf("DocumentReference lacks the Binary link: %s", doc2.Body)
	}
	obs := find(t, items, "Observation", "e1e2e3e4-0003-4aaa-8bbb-000000000003")
	if !bytes.Contains(obs.Body, []byte(`"value":176.30`)) { // re-encoded: the urn:uuid references were resolved
		t.Errorf("Observation lost the decimal's precision: %s", obs.Body)
	}
	prov := find(t, items, "Provenance", "e1e2e3e4-0007-4aaa-8bbb-000000000007")
	if !bytes.Contains(prov.Body, []byte(`"reference":"Claim/e1e2e3e4-0006-4aaa-8bbb-000000000006"`)) {
		t.Errorf("Provenance targets not resolved: %s", prov.Body)
	}
}

// One Bundle, many per file: a JSON array, concatenated values, NDJSON;
// and a directory of them. All yield the same items.
func TestReadBundleForms(t *testing.T) {
	const second = "../testdata/fhir-corpus/bundle-immunization.json"
	var srcs [2][]byte
	var compact [2]bytes.Buffer
	var want []Item
	for i, p := range []string{"testdata/synthea-bundle.json", second} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		srcs[i] = bytes.TrimSpace(b)
		if err := json.Compact(&compact[i], b); err != nil {
			t.Fatal(err)
		}
		want = append(want, mustReadAll(t, p)...)
	}
	dir := t.TempDir()
	forms := map[string][]byte{
		"array.json":        []byte("[\n" + string(srcs[0]) + ",\n" + string(srcs[1]) + "\n]\n"),
		"concatenated.json": []byte(string(srcs[0]) + "\n" + string(srcs[1])),
		"bundles.ndjson":    []byte(compact[0].String() + "\n" + compact[1].String() + "\n"),
	}
	firstLines := strings.Count(string(srcs[0]), "\n") + 1
	for name, b := range forms {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got := mustReadAll(t, p)
		if len(got) != len(want) {
			t.Errorf("%s: %d items, want %d", name, len(got), len(want))
			continue
		}
		for i := range got {
			if !bytes.Equal(got[i].Body, want[i].Body) || got[i].Patient != want[i].Patient {
				t.Errorf("%s: item %d differs", name, i)
			}
		}
		last := got[len(got)-1].Where
		switch name {
		case "bundles.ndjson":
			if last != "bundles.ndjson:2" {
				t.Errorf("second NDJSON Bundle's entry at %q", last)
			}
		case "array.json":
			// The last entry of the second Bundle opens on its line 18.
			if got[0].Where != "array.json:6" || last != "array.json:"+itoa(1+firstLines+18) {
				t.Errorf("array Bundle entries at %q and %q", got[0].Where, last)
			}
		}
	}
	// The same Binary three times is one Binary repeated (the store
	// imports it once); until 2026-12-06 it was refused (ErrID).
	if got, err := readAll(t, dir); err != nil || len(got) != 3*len(want) {
		t.Errorf("a directory holding the Bundles three times: %d items, %v; want %d", len(got), err, 3*len(want))
	}
}

// The corpus written independently of custos (testdata/fhir-corpus): every
// FHIR file reads, each resource lands in MRN-77441123's compartment but
// the Practitioner, the Location (her home: R4's Patient compartment holds
// no Location) and the Provenance of an Immunization, which the R4
// compartment leaves tenant-level.
func TestReadCorpus(t *testing.T) {
	files, err := filepath.Glob("../testdata/fhir-corpus/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("corpus: %v, %d files", err, len(files))
	}
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "identifiers.json" { // the scanner's list, not FHIR
			if ft, _ := Detect(f); ft != FormatUnknown {
				t.Errorf("identifiers.json detected as %v", ft)
			}
			continue
		}
		for _, it := range mustReadAll(t, f) {
			n++
			want := "MRN-77441123"
			if it.Type == "Practitioner" || it.Type == "Provenance" || it.Type == "Location" {
				want = ""
			}
			if it.Patient != want {
				t.Errorf("%s %s: patient %q, want %q", filepath.Base(f), it.Type, it.Patient, want)
			}
		}
	}
	if n < 12 {
		t.Errorf("only %d items from the corpus", n)
	}
}

// A JSON syntax error in a .json file is reported at the line of the bad
// byte, however far the decoder has read ahead of it (pretty-printed
// Bundles, concatenated values, arrays), and a truncated file at its last
// line. Each file plants the bad byte on the line marked "BAD" (the
// truncated file: its last line).
func TestJSONErrorLine(t *testing.T) {
	var pretty strings.Builder // a pretty-printed Bundle of 60 entries, the first one broken
	pretty.WriteString("{\n  \"resourceType\": \"Bundle\",\n  \"type\": \"collection\",\n  \"entry\": [\n")
	for i := range 60 {
		status := `"final"`
		if i == 0 {
			status = "final BAD"
		}
		if i > 0 {
			pretty.WriteString(",\n")
		}
		pretty.WriteString("    {\n      \"resource\": {\n        \"resourceType\": \"Observation\",\n        \"id\": \"o" + itoa(i) +
			"\",\n        \"status\": " + status + ",\n        \"subject\": {\n          \"reference\": \"Patient/p1\"\n        }\n      }\n    }")
	}
	pretty.WriteString("\n  ]\n}\n")
	obs := `{"resourceType":"Observation","id":"o","status":"final"}`
	for name, content := range map[string]string{
		"pretty.json":       pretty.String(),
		"one-line.json":     `{"resourceType":"Patient","id":"p","birthDate":SECRET} BAD` + "\n",
		"concatenated.json": obs + "\n" + obs + "\n\n" + `{"resourceType":"Patient",` + "\n" + `"id":x} BAD` + "\n" + strings.Repeat(obs+"\n", 200),
		"array.json":        "[\n" + obs + ",\n" + obs + ",\n" + `{"resourceType":"Patient","id":"p",` + "\n\n" + `"name":[}]} BAD` + "\n" + strings.Repeat(","+obs+"\n", 200) + "]\n",
		"no-comma.json":     "[\n" + obs + "\n" + obs + " BAD\n" + strings.Repeat(","+obs+"\n", 200) + "]\n",
		"truncated.json":    "[\n" + obs + ",\n" + `{"resourceType":"Patient",` + "\n" + `"id":"p"` + "\n\n",
		"crlf.json":         strings.ReplaceAll("{\n\"resourceType\":\"Patient\",\n\"id\":\"p\",\n\"active\":tru} BAD\n}\n", "\n", "\r\n"),
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			want := 4 // truncated.json
			for i, l := range strings.Split(content, "\n") {
				if strings.Contains(l, "BAD") {
					want = i + 1
				}
			}
			_, err := readAll(t, p)
			var fe *Error
			if !errors.As(err, &fe) || !(errors.Is(err, ErrJSON) || errors.Is(err, ErrTruncated)) {
				t.Fatalf("err = %v, want ErrJSON or ErrTruncated", err)
			}
			if fe.Where != name+":"+itoa(want) {
				t.Errorf("at %s, want %s:%d (%v)", fe.Where, name, want, err)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the error quotes content: %v", err)
			}
		})
	}
}

// Security labels come from meta.security and from the elements R4
// defines as a resource's own security labels (DocumentReference.
// securityLabel, Composition.confidentiality; a contained resource's label
// its container), under every spelling of the
// code systems, and the ActCode sensitivity codes below the ones the
// policy knows map to the same labels (testdata/labels-bundle.json).
func TestReadLabels(t *testing.T) {
	items := mustReadAll(t, "testdata/labels-bundle.json")
	for _, tc := range []struct {
		typ, id string
		want    []string
	}{
		{"Patient", "p1", []string{"vip"}},                         // ActCode CELEB, as older custos data writes it
		{"Patient", "p2", []string{"vip"}},                         // ActCode CEL (celebrity information sensitivity)
		{"DocumentReference", "d1", []string{"psy", "restricted"}}, // PSYTHPN and BH in meta.security, R in securityLabel
		{TypeAttachment, "DocumentReference/d1/content[0].attachment", []string{"psy", "restricted"}},
		{"DocumentReference", "d2", []string{"psy", "sdv"}},  // MH (https spelling) and MST in securityLabel
		{"Binary", "b1", []string{"psy", "sdv"}},             // the labels of the DocumentReference linking it
		{"Observation", "o1", []string{"restricted", "sud"}}, // OPIOIDUD; R under the https spelling
		{"Observation", "o2", []string{"sud"}},               // ETHUD, ActUSPrivacyLaw 42CFRPart2; GDIS has no label
		{"Composition", "c1", []string{"restricted"}},
		{"Composition", "c2", []string{"very-restricted"}},
		{"Composition", "c3", nil},
		{"MedicationRequest", "m1", []string{"hiv", "restricted"}}, // those of its contained Observation and DocumentReference
	} {
		if got := find(t, items, tc.typ, tc.id).Sensitivity; !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: labels %v, want %v", tc.typ, tc.id, got, tc.want)
		}
	}
}

// A reference that is an entry's fullUrl resolves to that entry's
// resource whatever the fullUrl's scheme (urn:oid, an absolute URL that is
// not a RESTful one, a RESTful one, with a version), places the resource
// in its Patient's compartment, and is rewritten to the relative Type/id
// (a RESTful URL already naming that resource is kept as written)
// (testdata/fullurl-bundle.json).
func TestReadFullURLReferences(t *testing.T) {
	items := mustReadAll(t, "testdata/fullurl-bundle.json")
	for _, tc := range []struct {
		typ, id, patient string
		refs             []string // the body holds each
	}{
		{"Observation", "o1", "p1", []string{`"subject":{"reference":"Patient/p1"}`}},
		{"Observation", "o2", "p2", []string{`"subject":{"reference":"Patient/p2"}`}},
		{"Observation", "o3", "p3", []string{`"reference":"https://ehr.example.org/fhir/Patient/p3/_history/2"`}},
		{"Observation", "o4", "p1", []string{`"reference":"Patient/p1"`, `"reference":"Practitioner/pr1"`, `"reference":"https://other.example.org/ids/practitioner-x"`}},
		{"Immunization", "i1", "p1", []string{`"reference":"Patient/p1"`}},
		{"AllergyIntolerance", "a1", "p2", []string{`"reference":"Patient/p2"`}},
		{"Practitioner", "pr1", "", nil},
	} {
		it := find(t, items, tc.typ, tc.id)
		if it.Patient != tc.patient {
			t.Errorf("%s %s: patient %q, want %q", tc.typ, tc.id, it.Patient, tc.patient)
		}
		for _, ref := range tc.refs {
			if !bytes.Contains(it.Body, []byte(ref)) {
				t.Errorf("%s %s: body lacks %s: %s", tc.typ, tc.id, ref, it.Body)
			}
		}
		if bytes.Contains(it.Body, []byte("urn:oid:")) || bytes.Contains(it.Body, []byte("/records/")) {
			t.Errorf("%s %s: a reference to an entry is left unresolved: %s", tc.typ, tc.id, it.Body)
		}
	}
}

// A reference whose scheme or host differs from an entry's fullUrl only in
// case names that entry (RFC 3986: both are case-insensitive): it resolves
// to the same resource as its lower-case form, in a Reference and in an
// attachment url; one whose path differs in case names no entry.
func TestReadFullURLCaseInsensitiveSchemeAndHost(t *testing.T) {
	bundle := func(ref, url string) string {
		return `{"resourceType":"Bundle","type":"collection","entry":[
{"fullUrl":"http://example.org/fhir/Patient/1","resource":{"resourceType":"Patient","id":"1"}},
{"fullUrl":"urn:uuid:0b7e5b4a-6f0e-4c8e-9d2a-0e6b3f1c2d4a","resource":{"resourceType":"Binary","contentType":"text/plain","data":"aGk="}},
{"fullUrl":"urn:uuid:5b1e7c0a-3f0e-4c8e-9d2a-0e6b3f1c2d4a","resource":{"resourceType":"DocumentReference","status":"current",
 "subject":{"reference":"` + ref + `"},"content":[{"attachment":{"contentType":"text/plain","url":"` + url + `"}}]}}]}`
	}
	read := func(t *testing.T, body string) ([]Item, error) {
		path := filepath.Join(t.TempDir(), "b.json")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return readAll(t, path)
	}
	lower, err := read(t, bundle("http://example.org/fhir/Patient/1", "urn:uuid:0b7e5b4a-6f0e-4c8e-9d2a-0e6b3f1c2d4a"))
	if err != nil {
		t.Fatal(err)
	}
	upper, err := read(t, bundle("HTTP://Example.ORG/fhir/Patient/1", "URN:uuid:0b7e5b4a-6f0e-4c8e-9d2a-0e6b3f1c2d4a"))
	if err != nil {
		t.Fatalf("an upper-case scheme and host: %v", err)
	}
	const doc = "5b1e7c0a-3f0e-4c8e-9d2a-0e6b3f1c2d4a"
	l, u := find(t, lower, "DocumentReference", doc), find(t, upper, "DocumentReference", doc)
	if l.Patient != "1" || u.Patient != l.Patient {
		t.Errorf("patient %q (upper case), %q (lower case), want 1", u.Patient, l.Patient)
	}
	if !slices.Equal(u.Links, l.Links) || len(l.Links) != 1 {
		t.Errorf("links %v (upper case), %v (lower case), want the Binary", u.Links, l.Links)
	}
	if _, err := read(t, bundle("http://example.org/FHIR/Patient/1", "urn:uuid:0b7e5b4a-6f0e-4c8e-9d2a-0e6b3f1c2d4a")); !errors.Is(err, ErrCompartment) {
		t.Errorf("a path in another case: err = %v, want ErrCompartment", err)
	}
}

// checkPlacement reads one resource, body, and checks that it is refused
// with ErrCompartment at errPath or, errPath "", placed in patient's
// compartment ("" tenant-level).
func checkPlacement(t *testing.T, body, patient, errPath string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	items, err := readAll(t, path)
	if errPath != "" {
		var fe *Error
		if !errors.As(err, &fe) || !errors.Is(err, ErrCompartment) || fe.Path != errPath {
			t.Fatalf("err = %v, want ErrCompartment at %s", err, errPath)
		}
		return
	}
	if err != nil || len(items) != 1 || items[0].Patient != patient {
		t.Fatalf("items %v, err %v; want one item of patient %q", items, err, patient)
	}
}

// A contained resource is part of its container: its compartment
// references place the container, "#" in it names the container, and one
// naming another patient than the container's, or a contained Patient, is
// refused (docs/import.md, "Patient compartment").
func TestReadContainedCompartment(t *testing.T) {
	obsOf := func(patient string) string {
		return `{"resourceType":"Observation","id":"c","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/` + patient + `"}}`
	}
	for _, tc := range []struct {
		name, body string
		patient    string // want, when err is ""
		errPath    string // the FHIR path of the ErrCompartment
	}{
		{"Synthea's ExplanationOfBenefit with its contained referral and coverage", `{"resourceType":"ExplanationOfBenefit","id":"e","contained":[{"resourceType":"ServiceRequest","id":"referral","status":"completed","intent":"order","subject":{"reference":"Patient/p1"},"requester":{"reference":"Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|9999"},"performer":[{"reference":"Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|9999"}]},{"resourceType":"Coverage","id":"coverage","status":"active","type":{"text":"Medicaid"},"beneficiary":{"reference":"Patient/p1"},"payor":[{"display":"Medicaid"}]}],"status":"active","type":{"text":"x"},"use":"claim","patient":{"reference":"Patient/p1"},"created":"2020-01-01T00:00:00Z","insurer":{"display":"Medicaid"},"provider":{"reference":"Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|9999"},"referral":{"reference":"#referral"},"outcome":"complete","insurance":[{"focal":true,"coverage":{"reference":"#coverage","display":"Medicaid"}}]}`, "p1", ""},
		{"a Medication contained in a MedicationRequest", `{"resourceType":"MedicationRequest","id":"r","contained":[{"resourceType":"Medication","id":"m"}],"status":"active","intent":"order","medicationReference":{"reference":"#m"},"subject":{"reference":"Patient/p1"}}`, "p1", ""},
		{"a contained Observation of the same patient", `{"resourceType":"MedicationRequest","id":"r","contained":[` + obsOf("p1") + `],"status":"active","intent":"order","medicationCodeableConcept":{"text":"x"},"subject":{"reference":"Patient/p1"},"supportingInformation":[{"reference":"#c"}]}`, "p1", ""},
		{"a Patient's contained RelatedPerson naming it with #", `{"resourceType":"Patient","id":"p1","contained":[{"resourceType":"RelatedPerson","id":"rp","patient":{"reference":"#"}}],"contact":[{"organization":{"reference":"#rp"}}]}`, "p1", ""},
		{"a patient's Observation contained in an Organization", `{"resourceType":"Organization","id":"o","contained":[` + obsOf("p2") + `]}`, "p2", ""},
		{"a contained Observation of another patient", `{"resourceType":"MedicationRequest","id":"r","contained":[` + obsOf("p2") + `],"status":"active","intent":"order","medicationCodeableConcept":{"text":"x"},"subject":{"reference":"Patient/p1"},"supportingInformation":[{"reference":"#c"}]}`, "", "MedicationRequest.contained[0].subject"},
		{"a Patient containing another patient's Observation", `{"resourceType":"Patient","id":"p1","contained":[` + obsOf("p2") + `]}`, "", "Patient.contained[0].subject"},
		{"a contained Patient", `{"resourceType":"Observation","id":"o","contained":[{"resourceType":"Patient","id":"x"}],"status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p1"},"focus":[{"reference":"#x"}]}`, "", "Observation.contained[0]"},
		// An operation's output kept with its GuidanceResponse (R4's
		// outputParameters, HL7's R4 example GuidanceResponse-example.json):
		// refused as "not an R4 resource type" until h-r4all.
		{"a GuidanceResponse's contained output Parameters", `{"resourceType":"GuidanceResponse","id":"g","contained":[{"resourceType":"Parameters","id":"out","parameter":[{"name":"score","valueDecimal":7},{"name":"device","valueReference":{"reference":"Device/software"}}]}],"moduleUri":"http://example.org/m","status":"success","subject":{"reference":"Patient/p1"},"outputParameters":{"reference":"#out"}}`, "p1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPlacement(t, tc.body, tc.patient, tc.errPath) })
	}
}

// An absolute reference to a Patient names that server's Patient: it is
// the import's Patient of that id only on the server the resource came
// from, its Bundle entry's RESTful fullUrl or its $export manifest's
// request (docs/import.md, "Patient compartment").
func TestReadAbsolutePatientReferences(t *testing.T) {
	obs := func(ref string) string {
		return `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"` + ref + `"}}`
	}
	entry := func(fullURL, res string) string {
		return `{"resourceType":"Bundle","type":"searchset","entry":[{"fullUrl":"` + fullURL + `","resource":` + res + `}]}`
	}
	manifest := func(request string) string {
		return `{"transactionTime":"2024-01-01T00:00:00Z","request":"` + request + `","output":[{"type":"Observation","url":"Observation.ndjson"}]}`
	}
	for _, tc := range []struct {
		name    string
		files   map[string]string // read: r.json, else m.json
		patient string            // "" = refused with ErrCompartment
	}{
		{"the entry's server", map[string]string{"r.json": entry("https://a.example/fhir/Observation/o", obs("https://a.example/fhir/Patient/7/_history/3"))}, "7"},
		{"another server than the entry's", map[string]string{"r.json": entry("https://a.example/fhir/Observation/o", obs("https://b.example/fhir/Patient/7"))}, ""},
		{"an entry whose fullUrl is a urn", map[string]string{"r.json": entry("urn:uuid:5b1e7c0a-3f0e-4c8e-9d2a-0e6b3f1c2d4a", obs("https://b.example/fhir/Patient/7"))}, ""},
		{"outside a Bundle", map[string]string{"r.json": obs("https://b.example/fhir/Patient/7")}, ""},
		{"the server of the $export request", map[string]string{"m.json": manifest("https://a.example/fhir/Group/g1/$export?_type=Observation"), "Observation.ndjson": obs("https://a.example/fhir/Patient/7")}, "7"},
		{"another server than the $export request's", map[string]string{"m.json": manifest("https://a.example/fhir/$export"), "Observation.ndjson": obs("https://a.example/other/Patient/7")}, ""},
		{"a relative reference", map[string]string{"r.json": obs("Patient/7")}, "7"},
		// RFC 3986: scheme and host are case-insensitive, the path is not.
		{"the entry's server, scheme and host in upper case", map[string]string{"r.json": entry("https://a.example/fhir/Observation/o", obs("HTTPS://A.Example/fhir/Patient/7"))}, "7"},
		{"an upper-case entry's server", map[string]string{"r.json": entry("HTTPS://A.EXAMPLE/fhir/Observation/o", obs("https://a.example/fhir/Patient/7"))}, "7"},
		{"the server of an upper-case $export request", map[string]string{"m.json": manifest("HTTPS://A.Example/fhir/$export"), "Observation.ndjson": obs("https://a.example/fhir/Patient/7")}, "7"},
		{"the entry's server, its path in upper case", map[string]string{"r.json": entry("https://a.example/fhir/Observation/o", obs("https://a.example/FHIR/Patient/7"))}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "r.json")
			if _, ok := tc.files["m.json"]; ok {
				path = filepath.Join(dir, "m.json")
			}
			items, err := readAll(t, path)
			if tc.patient == "" {
				var fe *Error
				if !errors.As(err, &fe) || !errors.Is(err, ErrCompartment) || fe.Path != "Observation.subject" {
					t.Fatalf("err = %v, want ErrCompartment at Observation.subject", err)
				}
				return
			}
			if err != nil || len(items) != 1 || items[0].Patient != tc.patient {
				t.Fatalf("items %v, err %v; want one item of patient %q", items, err, tc.patient)
			}
		})
	}
	for req, want := range map[string]string{
		"https://a.example/fhir/$export":                         "https://a.example/fhir",
		"https://a.example/fhir/Patient/$export?_since=2024":     "https://a.example/fhir",
		"https://a.example/fhir/Group/g-1/$export?_type=Patient": "https://a.example/fhir",
		"REST search of 3 types":                                 "",
		"/fhir/$export":                                          "",
		"https://a.example/fhir/Patient":                         "",
	} {
		if got := exportBase(req); got != want {
			t.Errorf("exportBase(%s) = %q, want %q", req, got, want)
		}
	}
}

// A resource that names no Patient at its compartment elements is
// tenant-level only when nothing says it is about a patient: a Patient
// named elsewhere (Device.patient, an R5 element, an extension) places it
// in that patient's compartment, and two there, one that cannot be placed,
// or at a compartment element something named by identifier or display
// alone with no type, are refused (docs/import.md, "Patient compartment").
func TestReadTenantLevelAboutAPatient(t *testing.T) {
	obs := func(subject, extra string) string {
		return `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":` + subject + extra + `}`
	}
	for _, tc := range []struct {
		name, body string
		patient    string // want, when errPath is ""
		errPath    string
	}{
		{"Device.patient", `{"resourceType":"Device","id":"d","patient":{"reference":"Patient/p1"}}`, "p1", ""},
		{"a Patient in an extension", `{"resourceType":"Organization","id":"org","extension":[{"url":"http://example.org/x","valueReference":{"reference":"Patient/p1"}}]}`, "p1", ""},
		{"two patients outside the compartment elements", `{"resourceType":"Device","id":"d","patient":{"reference":"Patient/p1"},"extension":[{"url":"http://example.org/x","valueReference":{"reference":"Patient/p2"}}]}`, "", "Device.patient"},
		{"another server's Patient outside the compartment elements", `{"resourceType":"Device","id":"d","patient":{"reference":"https://other.example/fhir/Patient/p1"}}`, "", "Device.patient"},
		{"a conditional Patient reference outside the compartment elements", `{"resourceType":"Provenance","id":"pv","target":[{"reference":"Observation/o"}],"recorded":"2024-01-01T00:00:00Z","agent":[{"who":{"reference":"Patient?identifier=x|1"}}]}`, "", "Provenance.agent[0].who"},
		{"a Patient typed with an identifier outside the compartment elements", `{"resourceType":"Organization","id":"org","extension":[{"url":"http://example.org/x","valueReference":{"type":"Patient","identifier":{"value":"1"}}}]}`, "", "Organization.extension[0].valueReference"},
		{"a subject by identifier alone", obs(`{"identifier":{"system":"urn:oid:1.2.3","value":"123"}}`, ""), "", "Observation.subject"},
		{"a subject by display alone", obs(`{"display":"someone"}`, ""), "", "Observation.subject"},
		{"a Device subject named by a typed identifier", obs(`{"type":"Device","identifier":{"value":"123"}}`, ""), "", ""},
		{"a Patient subject and a performer by display alone", obs(`{"reference":"Patient/p1"}`, `,"performer":[{"display":"someone"}]`), "p1", ""},
		{"an AuditEvent whose agent is named by identifier alone", `{"resourceType":"AuditEvent","id":"a","type":{"code":"rest"},"recorded":"2024-01-01T00:00:00Z","agent":[{"who":{"identifier":{"value":"user1"}},"requestor":true}],"source":{"observer":{"display":"ehr"}},"entity":[{"what":{"reference":"Organization/o"}}]}`, "", ""},
		{"a Device subject and a performer by display alone", obs(`{"reference":"Device/d"}`, `,"performer":[{"display":"someone"}]`), "", ""},
		{"a Provenance of an Observation", `{"resourceType":"Provenance","id":"pv","target":[{"reference":"Observation/o"}],"recorded":"2024-01-01T00:00:00Z","agent":[{"who":{"reference":"Practitioner/pr"}}]}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPlacement(t, tc.body, tc.patient, tc.errPath) })
	}
}

// A DELETE of an absolute URL retires the resource it names when the URL
// is on the server of the export (its $export manifest's request).
func TestReadAbsoluteDelete(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"m.json":     `{"transactionTime":"2024-01-01T00:00:00Z","request":"https://ehr.example/fhir/Patient/$export","deleted":[{"type":"Bundle","url":"del.ndjson"}]}`,
		"del.ndjson": `{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"DELETE","url":"https://ehr.example/fhir/Observation/o1"}}]}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	items := mustReadAll(t, filepath.Join(dir, "m.json"))
	if len(items) != 1 || !items[0].Deleted || items[0].Type != "Observation" || items[0].ID != "o1" {
		t.Fatalf("items %+v, want the retirement of Observation o1", items)
	}
}

// An attachment url that is an absolute Binary URL links this import's
// Binary only on the server the carrier came from, or as an entry's
// fullUrl; another server's Binary of the same id is an outside document,
// kept as written (docs/import.md, "Attachments").
func TestReadAbsoluteBinaryURL(t *testing.T) {
	docRef := func(fullURL, url string) string {
		return `{"fullUrl":"` + fullURL + `","resource":{"resourceType":"DocumentReference","id":"d1","status":"current","subject":{"reference":"Patient/p1"},"content":[{"attachment":{"contentType":"text/plain","url":"` + url + `"}}]}}`
	}
	binary := `{"fullUrl":"https://a.example/fhir/Binary/b1","resource":{"resourceType":"Binary","id":"b1","contentType":"text/plain","securityContext":{"reference":"Patient/p2"},"data":"aGVsbG8="}}`
	for _, tc := range []struct {
		name, entries string
		link          bool // the carrier links the Binary
		unplaced      bool // the Binary is refused: no resource links it and it names no Patient
	}{
		{"the carrier's server", docRef("https://a.example/fhir/DocumentReference/d1", "https://a.example/fhir/Binary/b1") + "," + strings.Replace(binary, "p2", "p1", 1), true, false},
		{"an entry's fullUrl", docRef("urn:uuid:1c7e6f0a-0b9d-4e55-8f3a-6d2c1b0a9e01", "https://a.example/fhir/Binary/b1") + "," + strings.Replace(binary, "p2", "p1", 1), true, false},
		{"another server", docRef("https://a.example/fhir/DocumentReference/d1", "https://b.example/fhir/Binary/b1") + "," + binary, false, false},
		{"another server, and this import's Binary names no patient", docRef("https://a.example/fhir/DocumentReference/d1", "https://b.example/fhir/Binary/b1") + "," +
			strings.Replace(binary, `"securityContext":{"reference":"Patient/p2"},`, "", 1), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "b.json")
			if err := os.WriteFile(path, []byte(`{"resourceType":"Bundle","type":"collection","entry":[`+tc.entries+`]}`), 0o644); err != nil {
				t.Fatal(err)
			}
			items, err := readAll(t, path)
			if tc.unplaced {
				if !errors.Is(err, ErrCompartment) || !strings.Contains(err.Error(), "b.json:1: Binary:") {
					t.Fatalf("err = %v, want the Binary refused as linked by nothing", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d, b := find(t, items, "DocumentReference", "d1"), find(t, items, "Binary", "b1")
			linked := bytes.Contains(d.Body, []byte(`"url":"attachment://t/Binary/b1/`))
			if linked != tc.link || b.Patient != map[bool]string{true: "p1", false: "p2"}[tc.link] {
				t.Errorf("linked %v, Binary of %q; want linked %v (body %s)", linked, b.Patient, tc.link, d.Body)
			}
		})
	}
}

// TestReadDocumentBundle: a document Bundle (the shape of HL7's
// International Patient Summary example Bundle-IPS-examples-Bundle-minimal,
// CC0) is imported as its resources: the Composition and everything its
// sections name in the patient's compartment (references written as
// Type/id to entries whose fullUrls are urn:uuids), the author, custodian
// and medication tenant-level.
func TestReadDocumentBundle(t *testing.T) {
	items := mustReadAll(t, "testdata/ips-document.json")
	const patient = "2b90dd2b-2dab-4c75-9bb9-a355e07401e8"
	want := map[string]string{
		"Composition": patient, "Patient": patient, "Condition": patient, "MedicationStatement": patient,
		"AllergyIntolerance": patient, "Practitioner": "", "Organization": "", "Medication": "",
	}
	if len(items) != len(want) {
		t.Fatalf("%d items, want %d", len(items), len(want))
	}
	for _, it := range items {
		if p, ok := want[it.Type]; !ok || it.Patient != p {
			t.Errorf("%s/%s in compartment %q, want %q", it.Type, it.ID, it.Patient, p)
		}
	}
}

// FHIR JSON is UTF-8. Bytes that are not (a file in ISO-8859-1, as some
// exports and hand-edited files are) are refused at the line that holds
// them, in .json and .ndjson alike, without quoting them: a decoder would
// have turned them into U+FFFD and stored the name or note corrupted.
func TestReadRefusesBytesThatAreNotUTF8(t *testing.T) {
	latin1 := "M\xfcller" // "Müller" in ISO-8859-1
	for name, content := range map[string]string{
		"latin1.ndjson": `{"resourceType":"Patient","id":"p1"}` + "\n" + `{"resourceType":"Patient","id":"p2","name":[{"family":"` + latin1 + `"}]}` + "\n",
		"latin1.json":   "{\n\"resourceType\":\"Patient\",\n\"id\":\"p2\",\n\"name\":[{\"family\":\"" + latin1 + "\"}]\n}\n",
		"bundle.json": "{\"resourceType\":\"Bundle\",\"type\":\"collection\",\"entry\":[\n{\"resource\":{\"resourceType\":\"Patient\",\"id\":\"p1\"}},\n" +
			"{\"resource\":{\"resourceType\":\"Observation\",\"id\":\"o1\",\"status\":\"final\",\"code\":{\"text\":\"" + latin1 + "\"},\"subject\":{\"reference\":\"Patient/p1\"}}}\n]}\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			want := 0
			for i, l := range strings.Split(content, "\n") {
				if strings.Contains(l, latin1) {
					want = i + 1
				}
			}
			_, err := readAll(t, p)
			var fe *Error
			if !errors.As(err, &fe) || !errors.Is(err, ErrJSON) || !strings.Contains(err.Error(), "not UTF-8") {
				t.Fatalf("err = %v, want ErrJSON naming UTF-8", err)
			}
			if fe.Where != name+":"+itoa(want) {
				t.Errorf("at %s, want %s:%d", fe.Where, name, want)
			}
			if strings.Contains(err.Error(), "M\xfc") || strings.Contains(err.Error(), "ller") {
				t.Errorf("the error quotes content: %v", err)
			}
		})
	}
	// Valid UTF-8, the replacement character itself included, is read.
	p := filepath.Join(t.TempDir(), "utf8.ndjson")
	if err := os.WriteFile(p, []byte(`{"resourceType":"Patient","id":"p","name":[{"family":"Müller \uFFFD �"}]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, p); err != nil {
		t.Errorf("valid UTF-8: %v", err)
	}
}

// A \u escape of a lone UTF-16 surrogate (\udc00, or \ud800 not followed
// by a low surrogate's escape) is no Unicode character: encoding/json reads
// it as U+FFFD, so a resource the reader re-encoded (a Bundle entry whose
// references it resolved) was stored with U+FFFD in place of the escape,
// silently, while the same resource outside a Bundle kept the escape. Found
// by probe-import3 on a transaction Bundle with a note holding "\udc00". It
// is refused at the line holding it, without quoting it; an escaped
// surrogate pair is a character and reads.
func TestReadRefusesLoneSurrogateEscapes(t *testing.T) {
	const pat = `{"resourceType":"Patient","id":"p1"}`
	obs := func(text string) string {
		return `{"resourceType":"Observation","id":"o1","status":"final","code":{"text":"` + text + `"},"subject":{"reference":"Patient/p1"}}`
	}
	bundle := func(text string) string {
		return "{\"resourceType\":\"Bundle\",\"type\":\"transaction\",\"entry\":[\n" +
			`{"fullUrl":"urn:uuid:61ebe359-bfdc-4613-8bf2-c5e300945f0a","resource":{"resourceType":"Patient","id":"p1"},"request":{"method":"POST","url":"Patient"}},` + "\n" +
			`{"resource":{"resourceType":"Observation","id":"o1","status":"final","code":{"text":"` + text + `"},"subject":{"reference":"urn:uuid:61ebe359-bfdc-4613-8bf2-c5e300945f0a"}},"request":{"method":"POST","url":"Observation"}}` + "\n]}\n"
	}
	for _, lone := range []string{`MRN \\\udc00`, `\udc00`, `a\ud800`, `\ud800\u0041`, `\udc00\ud800`, `\\\ud83d`} {
		for name, content := range map[string]string{
			"lone.ndjson": pat + "\n" + obs(lone) + "\n",
			"bundle.json": bundle(lone),
		} {
			t.Run(name+"/"+lone, func(t *testing.T) {
				p := filepath.Join(t.TempDir(), name)
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				items, err := readAll(t, p)
				var fe *Error
				if !errors.As(err, &fe) || !errors.Is(err, ErrJSON) || !strings.Contains(err.Error(), "surrogate") {
					t.Fatalf("err = %v (%d items), want ErrJSON naming the lone surrogate", err, len(items))
				}
				if want := map[string]string{"lone.ndjson": name + ":2", "bundle.json": name + ":3"}[name]; fe.Where != want {
					t.Errorf("at %s, want %s", fe.Where, want)
				}
				if strings.Contains(err.Error(), "MRN") || strings.Contains(err.Error(), `\ud`) || strings.Contains(err.Error(), `\udc`) {
					t.Errorf("the error quotes content: %v", err)
				}
			})
		}
	}
	// A pair, an escaped backslash before "ud800" (no escape), and the
	// replacement character itself are read, the pair kept.
	for _, ok := range []string{`\ud83d\ude00`, `\uD83D\uDE00`, `\\ud800`, `\ufffd`, `x\\\\ud800`} {
		t.Run("ok/"+ok, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bundle.json")
			if err := os.WriteFile(p, []byte(bundle(ok)), 0o644); err != nil {
				t.Fatal(err)
			}
			items, err := readAll(t, p)
			if err != nil {
				t.Fatalf("%s: %v", ok, err)
			}
			if len(items) != 2 {
				t.Fatalf("%d items, want 2", len(items))
			}
			var v struct {
				Code struct{ Text string }
			}
			var want struct{ Text string }
			if err := json.Unmarshal(items[1].Body, &v); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(`{"text":"`+ok+`"}`), &want); err != nil {
				t.Fatal(err)
			}
			if v.Code.Text != want.Text || strings.ContainsRune(v.Code.Text, '\uFFFD') != strings.Contains(ok, "fffd") {
				t.Errorf("text %q, want %q", v.Code.Text, want.Text)
			}
		})
	}
}

// A manifest of the Bulk Data IG's later editions imports: deleted[]
// without a type (Bundles), and error[] and outcome[] files that hold only
// warnings and information (an export that reported no error).
func TestReadLaterEditionManifest(t *testing.T) {
	dir := t.TempDir()
	warning := `{"resourceType":"OperationOutcome","issue":[{"severity":"warning","code":"informational","diagnostics":"2 Observations had no code"}]}`
	for name, content := range map[string]string{
		"m.json": `{"manifestType":"http://hl7.org/fhir/uv/bulkdata/StructureDefinition/BulkDataManifest","transactionTime":"2024-01-01T00:00:00Z",` +
			`"request":"https://ehr.example/fhir/$export","requiresAccessToken":true,"output":[{"type":"Patient","url":"Patient.ndjson"}],` +
			`"deleted":[{"url":"del.ndjson"}],"error":[{"type":"OperationOutcome","url":"e.ndjson"}],"outcome":[{"url":"o.ndjson"}],"link":[{"relation":"self","url":"https://ehr.example/status/1"}]}`,
		"Patient.ndjson": `{"resourceType":"Patient","id":"p1"}`,
		"del.ndjson":     `{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"DELETE","url":"Observation/o1"}}]}`,
		"e.ndjson":       warning,
		"o.ndjson":       warning + "\n" + `{"resourceType":"OperationOutcome","issue":[{"severity":"information","code":"informational"}]}` + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	items := mustReadAll(t, filepath.Join(dir, "m.json"))
	if len(items) != 2 {
		t.Fatalf("%d items, want the Patient and the retirement of Observation o1: %+v", len(items), items)
	}
}

// A searchset's OperationOutcome entries are the search's outcome, with
// search.mode outcome or without a mode (as custos sync reads a page): a
// warning is skipped, never imported as a resource (it was imported as a
// tenant-level OperationOutcome, its diagnostics readable by any caller
// allowed tenant-level data, or refused for its missing id); an error is
// refused (TestBadInput). An OperationOutcome a search matched is a result.
func TestReadSearchsetOutcomes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "page.json")
	page := `{"resourceType":"Bundle","type":"searchset","entry":[
{"fullUrl":"https://ehr.example/fhir/Patient/p1","resource":{"resourceType":"Patient","id":"p1"},"search":{"mode":"match"}},
{"resource":{"resourceType":"OperationOutcome","issue":[{"severity":"warning","code":"processing","diagnostics":"MRN 123: results suppressed"}]}},
{"resource":{"resourceType":"OperationOutcome","id":"oo2","issue":[{"severity":"information","code":"informational"}]},"search":{"mode":"outcome"}},
{"resource":{"resourceType":"OperationOutcome","id":"oo3","issue":[{"severity":"information","code":"informational"}]},"search":{"mode":"match"}}]}`
	if err := os.WriteFile(p, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	items := mustReadAll(t, p)
	var got []string
	for _, it := range items {
		got = append(got, it.Type+"/"+it.ID)
	}
	if want := []string{"Patient/p1", "OperationOutcome/oo3"}; !slices.Equal(got, want) {
		t.Errorf("items %v, want %v", got, want)
	}
}

// meta.lastUpdated is a FHIR instant: R4's regex takes a leap second
// (second 60), which time.Parse refuses; a real one (2016-12-31T23:59:60Z)
// was refused as "not a FHIR instant". It reads as the second after.
func TestReadLeapSecond(t *testing.T) {
	for s, want := range map[string]string{
		"2016-12-31T23:59:60Z":          "2017-01-01T00:00:00Z",
		"2016-12-31T18:59:60.5-05:00":   "2017-01-01T00:00:00.5Z",
		"2024-01-02T03:04:05.678+00:00": "2024-01-02T03:04:05.678Z",
	} {
		p := filepath.Join(t.TempDir(), "Patient.ndjson")
		if err := os.WriteFile(p, []byte(`{"resourceType":"Patient","id":"p1","meta":{"lastUpdated":"`+s+`"}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		items, err := readAll(t, p)
		if err != nil || len(items) != 1 || items[0].LastUpdated.Format(time.RFC3339Nano) != want {
			t.Errorf("%s: %v %v, want %s", s, items, err, want)
		}
	}
	for _, s := range []string{"2016-12-31T23:59:61Z", "2016-12-31T23:60:00Z", "2016-12-31T23:59:6Z"} {
		p := filepath.Join(t.TempDir(), "Patient.ndjson")
		if err := os.WriteFile(p, []byte(`{"resourceType":"Patient","id":"p1","meta":{"lastUpdated":"`+s+`"}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(t, p); !errors.Is(err, ErrValue) {
			t.Errorf("%s: %v, want ErrValue", s, err)
		}
	}
}

// A full import (Options.Complete) retires what its input does not hold, so
// an $export manifest whose request says the export left resources out
// (_since: only what changed; _type, _typeFilter: only some) is refused
// for it, naming the parameter: custos import --full of a _since export
// retired every resource that had not changed (probe-import2: 3,416
// retired). Without Complete it imports; other parameters are no subset.
func TestReadFullRefusesPartialExport(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Patient.ndjson"), []byte(`{"resourceType":"Patient","id":"p1"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(request string, complete bool) error {
		m := filepath.Join(dir, "m.json")
		b, _ := json.Marshal(map[string]any{"transactionTime": "2024-01-01T00:00:00Z", "request": request,
			"requiresAccessToken": true, "output": []map[string]string{{"type": "Patient", "url": "Patient.ndjson"}}, "error": []any{}})
		if err := os.WriteFile(m, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return Read(t.Context(), m, Options{Link: testLink, Complete: complete}, func(Item) error { return nil })
	}
	for _, tc := range []struct{ request, param string }{
		{"https://ehr.example/fhir/$export?_since=2024-01-01T00:00:00Z", "_since"},
		{"https://ehr.example/fhir/Patient/$export?_outputFormat=application%2Ffhir%2Bndjson&_type=Patient,Observation", "_type"},
		{"https://ehr.example/fhir/Group/g1/$export?_typeFilter=Observation%3Fcategory%3Dlaboratory", "_typeFilter"},
	} {
		err := read(tc.request, true)
		var fe *Error
		if !errors.As(err, &fe) || !errors.Is(err, ErrManifest) || fe.Path != "request" || !strings.Contains(fe.Detail, tc.param) {
			t.Errorf("%s: %v, want ErrManifest at request naming %s", tc.request, err, tc.param)
		}
		if err := read(tc.request, false); err != nil {
			t.Errorf("%s, not full: %v", tc.request, err)
		}
	}
	for _, request := range []string{"https://ehr.example/fhir/$export", "https://ehr.example/fhir/Group/g1/$export?_outputFormat=ndjson", ""} {
		if err := read(request, true); err != nil {
			t.Errorf("%q: %v", request, err)
		}
	}
}

// An export directory assembled with symbolic links to its files (as
// tools that stage exports do) reads like one holding the files: a link to
// a Patient.ndjson was refused as "a directory may hold only *.ndjson[.gz]
// and *.json[.gz] files" (probe-import2). A link to a directory, or a
// dangling one, is still refused.
func TestReadSymlinkedFiles(t *testing.T) {
	src, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "Patient.ndjson"), []byte(`{"resourceType":"Patient","id":"p1"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(src, "Patient.ndjson"), filepath.Join(dir, "Patient.ndjson")); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	if items, err := readAll(t, dir); err != nil || len(items) != 1 {
		t.Fatalf("%d items, %v", len(items), err)
	}
	for name, target := range map[string]string{"a.json": src, "b.ndjson": filepath.Join(src, "missing.ndjson")} {
		d := t.TempDir()
		if err := os.Symlink(target, filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(t, d); !errors.Is(err, ErrFormat) {
			t.Errorf("a link %s to %s: %v, want ErrFormat", name, target, err)
		}
	}
}

// A full import of one page of a search result (a searchset whose link
// says the result continues: relation next) would retire every resource
// on the pages it lacks, as a partial $export would: it is refused, naming
// the link; the same page imports without --full, and a searchset that is
// complete (no next link, or only self) imports in full.
func TestReadFullRefusesSearchPage(t *testing.T) {
	dir := t.TempDir()
	read := func(links string, complete bool) error {
		p := filepath.Join(dir, "page.json")
		b := `{"resourceType":"Bundle","type":"searchset","total":40,` + links + `"entry":[{"fullUrl":"https://ehr.example/fhir/Patient/p1","resource":{"resourceType":"Patient","id":"p1"},"search":{"mode":"match"}}]}`
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		return Read(t.Context(), p, Options{Link: testLink, Complete: complete}, func(Item) error { return nil })
	}
	for _, links := range []string{
		`"link":[{"relation":"self","url":"https://ehr.example/fhir/Patient?_count=1"},{"relation":"next","url":"https://ehr.example/fhir/Patient?_count=1&_offset=1"}],`,
		`"link":[{"relation":"next","url":"https://ehr.example/fhir?_getpages=abc"}],`,
	} {
		err := read(links, true)
		var fe *Error
		if !errors.As(err, &fe) || !errors.Is(err, ErrValue) || fe.Path != "Bundle.link" || !strings.Contains(fe.Detail, "next") {
			t.Errorf("%s full: %v, want ErrValue at Bundle.link naming next", links, err)
		}
		if err != nil && strings.Contains(err.Error(), "ehr.example") {
			t.Errorf("the error quotes the link's url: %v", err)
		}
		if err := read(links, false); err != nil {
			t.Errorf("%s, not full: %v", links, err)
		}
	}
	for _, links := range []string{``, `"link":[{"relation":"self","url":"https://ehr.example/fhir/Patient"}],`} {
		if err := read(links, true); err != nil {
			t.Errorf("%q full: %v", links, err)
		}
	}
	for _, bad := range []string{`"link":{"relation":"next"},`, `"link":[],`} {
		// Not an array; an empty one, which R4 JSON leaves out
		// (fhirr4.Check, as in a resource).
		if err := read(bad, false); !errors.Is(err, ErrJSON) {
			t.Errorf("%s: %v, want ErrJSON", bad, err)
		}
	}
}

// A Patient labelled vip (here ActCode CELEB) marks every item of the
// patient's compartment in the import with the patient-wide vip, the
// reader's first approximation (Item.PatientWide), and none of anyone
// else's; an item's own labels (Sensitivity) stay its own, so the
// importer can take the patient-wide label away again.
func TestReadMarksVIPCharts(t *testing.T) {
	n := 0
	for _, it := range mustReadAll(t, "testdata/bulk") {
		want := []string(nil)
		if it.Patient == p2 {
			want, n = []string{"vip"}, n+1
		}
		if !slices.Equal(it.PatientWide, want) {
			t.Errorf("%s %s of %q: PatientWide %v, want %v", it.Type, it.ID, it.Patient, it.PatientWide, want)
		}
		if it.Type != "Patient" && slices.Contains(it.Sensitivity, "vip") {
			t.Errorf("%s %s: the patient's vip among its own labels %v", it.Type, it.ID, it.Sensitivity)
		}
	}
	if n < 4 {
		t.Errorf("%d items of the VIP, want the Patient, Observation, Condition, Consent, Binary and more", n)
	}
}

// TestReadOutsideBulkDocumentReference reads a line of a real Synthea Bulk
// export (testdata/outside, CC0): the DocumentReference lands in its
// subject's compartment, its base64 note is lifted as a text/plain
// attachment of the same patient, and its conditional author and custodian
// references, which no Bundle resolves, are kept as written.
func TestReadOutsideBulkDocumentReference(t *testing.T) {
	items := mustReadAll(t, filepath.Join("testdata", "outside", "smart-bulk"))
	if len(items) != 2 {
		t.Fatalf("%d items, want the DocumentReference and its note", len(items))
	}
	const patient = "de242789-6443-9ee4-a94d-89e6cbaa2d60"
	doc := find(t, items, "DocumentReference", "f5df1d9c-7823-ace4-d6ed-fc602d018fed")
	if doc.Patient != patient || len(doc.Sensitivity) != 0 || doc.Where != "DocumentReference.004.ndjson:1" {
		t.Errorf("DocumentReference %+v", doc)
	}
	for _, want := range []string{
		`"reference":"Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|9999967299"`,
		`"reference":"Organization?identifier=https://github.com/synthetichealth/synthea|ca275b1b-c90e-3e95-84c9-3b4240fb9284"`,
	} {
		if !strings.Contains(string(doc.Body), want) {
			t.Errorf("body lacks %s", want)
		}
	}
	if strings.Contains(string(doc.Body), `"data"`) {
		t.Error("the note's data is still in the DocumentReference")
	}
	note := find(t, items, TypeAttachment, "DocumentReference/f5df1d9c-7823-ace4-d6ed-fc602d018fed/content[0].attachment")
	if note.Patient != patient || note.MIMEType != "text/plain; charset=utf-8" || !strings.HasPrefix(string(note.Body), "\n2013-07-22\n\n# Chief Complaint\n") {
		t.Errorf("note %s %q %q", note.Patient, note.MIMEType, note.Body[:min(40, len(note.Body))])
	}
}

// HL7's own R4 examples Binary/example and DocumentReference/example (the
// FHIR specification, CC0; fhirin/testdata/outside/hl7-r4-binary and its
// README): the Binary's securityContext names the DocumentReference,
// labelled very restricted (v3 Confidentiality V in securityLabel), and
// nothing links the Binary (the DocumentReference's url names another
// server's document). The Binary is in the DocumentReference's patient's
// compartment with its label; it was refused as a Binary that cannot be
// placed (and, linked by an unlabelled resource, it would have been
// imported without the label): probe-import3.
func TestReadOutsideHL7BinarySecurityContext(t *testing.T) {
	items := mustReadAll(t, filepath.Join("testdata", "outside", "hl7-r4-binary"))
	if len(items) != 2 {
		t.Fatalf("%d items, want the Binary and the DocumentReference", len(items))
	}
	for _, typ := range []string{"Binary", "DocumentReference"} {
		it := find(t, items, typ, "example")
		if it.Patient != "xcda" || !slices.Equal(it.Sensitivity, []string{"very-restricted"}) {
			t.Errorf("%s/example: patient %q labels %v, want xcda [very-restricted]", typ, it.Patient, it.Sensitivity)
		}
	}
	if b := find(t, items, "Binary", "example"); b.MIMEType != "application/pdf" || !bytes.HasPrefix(b.Body, []byte("%PDF-1.5")) {
		t.Errorf("Binary %q %q", b.MIMEType, b.Body[:min(8, len(b.Body))])
	}
}

// HL7's own R4 examples Consent/consent-example-Out and Observation/f003
// (CC0, fhirin/testdata/outside/hl7-r4-consent): P. van de Heuvel withholds
// consent to sharing, recorded as R4 lets it be, by a policyRule of v3
// ActCode OPTOUT with no provision.type. The Consent records an opt-out
// and the patient's Observation carries opt-out; neither did before
// (probe-import3), so the default policy released the chart for every use.
func TestReadOutsideHL7ConsentOptOut(t *testing.T) {
	items := mustReadAll(t, filepath.Join("testdata", "outside", "hl7-r4-consent"))
	if len(items) != 2 {
		t.Fatalf("%d items, want the Consent and the Observation", len(items))
	}
	c := find(t, items, "Consent", "consent-example-Out")
	if c.Patient != "f001" || !c.OptOut || !slices.Equal(c.Consent, []string{"opt-out"}) {
		t.Errorf("Consent: patient %q OptOut %v Consent %v, want f001 true [opt-out]", c.Patient, c.OptOut, c.Consent)
	}
	if o := find(t, items, "Observation", "f003"); o.Patient != "f001" || !slices.Equal(o.Consent, []string{"opt-out"}) {
		t.Errorf("Observation: patient %q Consent %v, want f001 [opt-out]", o.Patient, o.Consent)
	}
}

// A PUT whose url names its own resource imports, however the url is
// written: relative, from the root, with a query; a conditional update
// names no id and imports under the resource's (an absolute url, plain or
// conditional, on the base of its entry's fullUrl: an absolute url where
// the import's server is unknown is refused since 2026-12-06).
func TestReadPutURLForms(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b.json")
	entry := func(id, url string) string {
		return `{"resource":{"resourceType":"Patient","id":"` + id + `"},"request":{"method":"PUT","url":"` + url + `"}}`
	}
	b := `{"resourceType":"Bundle","type":"transaction","entry":[` + strings.Join([]string{
		entry("p1", "Patient/p1"), entry("p2", "/Patient/p2"), entry("p3", "Patient/p3?_format=json"), entry("p4", "Patient?identifier=urn:mrn|4"),
		strings.Replace(entry("p5", "https://ehr.example/fhir/Patient/p5"), "{", `{"fullUrl":"https://ehr.example/fhir/Patient/p5",`, 1), strings.Replace(entry("p6", "https://ehr.example/fhir/Patient?identifier=urn:mrn|6"), "{", `{"fullUrl":"https://ehr.example/fhir/Patient/p6",`, 1),
	}, ",") + `]}`
	if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	items := mustReadAll(t, p)
	if len(items) != 6 {
		t.Fatalf("%d items, want 6", len(items))
	}
}
