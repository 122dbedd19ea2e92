package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/store"
)

// The tests of this file run the real 'custos import' on the FHIR files of
// testdata/fhir (the reproducers of an outside probe of the import) into a
// data directory in t.TempDir(), and read the catalog it leaves on disk.

// importFHIR runs 'custos import --json --data-dir dir --tenant t' on
// input (a path under testdata/fhir, or absolute; with extra flags before
// it) and returns its report,
// or its stderr as the error text with a non-zero exit.
func importFHIR(t *testing.T, dir, input string, flags ...string) (store.ImportReport, string) {
	t.Helper()
	t.Setenv("VAULT_ADDR", "") // the dev id key of the data directory
	args := append([]string{"import", "--json", "--data-dir", dir, "--tenant", "t"}, flags...)
	if !filepath.IsAbs(input) {
		input = filepath.Join("testdata", "fhir", input)
	}
	args = append(args, input)
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		return store.ImportReport{}, errb.String()
	}
	var rep store.ImportReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("custos %s: report %q: %v", strings.Join(args, " "), out.String(), err)
	}
	return rep, ""
}

// mustImportFHIR is importFHIR that fails the test on an error.
func mustImportFHIR(t *testing.T, dir, input string, flags ...string) store.ImportReport {
	t.Helper()
	rep, msg := importFHIR(t, dir, input, flags...)
	if msg != "" {
		t.Fatalf("import %s: %s", input, msg)
	}
	return rep
}

// openCatalog opens the catalog in dir read-only (closed with the test)
// and returns it with its live resources.
func openCatalog(t *testing.T, dir string) (*store.Store, []store.Resource) {
	t.Helper()
	s, err := store.Open(filepath.Join(dir, "catalog.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rs, err := s.Page("", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return s, rs
}

// liveResources lists the live resources of the catalog in dir, as
// "type patient" (the source patient id of the label, "-" for none),
// sorted.
func liveResources(t *testing.T, dir string) []string {
	t.Helper()
	_, rs := openCatalog(t, dir)
	var out []string
	for _, r := range rs {
		p := r.Labels.Patient
		if p == "" {
			p = "-"
		}
		out = append(out, r.Labels.Type+" "+p)
	}
	slices.Sort(out)
	return out
}

// TestImportFullOfDeletionsOnly: 'import --full' of input holding only
// DELETE entries is refused and changes nothing (it retired the whole
// tenant).
func TestImportFullOfDeletionsOnly(t *testing.T) {
	dir := t.TempDir()
	mustImportFHIR(t, dir, "docref.json")
	before := liveResources(t, dir)
	_, msg := importFHIR(t, dir, "delonly.json", "--full")
	if !strings.Contains(msg, "a full import holds no resource to keep, only deletions (1)") || !strings.Contains(msg, "nothing was imported") {
		t.Fatalf("import --full of deletions only: %q", msg)
	}
	if after := liveResources(t, dir); !slices.Equal(after, before) {
		t.Errorf("live resources %v, want %v", after, before)
	}
	// Without --full the same input is an ordinary deletion (of nothing).
	if rep := mustImportFHIR(t, dir, "delonly.json"); rep.Retired != 0 || rep.Unchanged != 1 {
		t.Errorf("incremental deletion: %+v", rep)
	}
}

// TestImportRetiresUncarriedAttachments: the probe's reproducers of stale
// lifted attachments. DocumentReference d2 of p1 with two inline
// attachments, re-imported moved to p2 with one, leaves nothing under p1;
// a DELETE of a DocumentReference retires its attachment with it.
func TestImportRetiresUncarriedAttachments(t *testing.T) {
	dir := t.TempDir()
	mustImportFHIR(t, dir, "docref2.json")
	want := []string{"attachment p1", "attachment p1", "documentreference p1", "patient p2"}
	if got := liveResources(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after docref2.json: %v, want %v", got, want)
	}
	rep := mustImportFHIR(t, dir, "docref3.json")
	want = []string{"attachment p2", "documentreference p2", "patient p2"}
	if got := liveResources(t, dir); !slices.Equal(got, want) || rep.Retired != 3 {
		t.Errorf("after docref3.json: %v (%d retired), want %v (3 retired)", got, rep.Retired, want)
	}

	dir = t.TempDir()
	mustImportFHIR(t, dir, "docref.json")
	rep = mustImportFHIR(t, dir, "del.json")
	want = []string{"patient p1"}
	if got := liveResources(t, dir); !slices.Equal(got, want) || rep.Retired != 2 {
		t.Errorf("after del.json: %v (%d retired), want %v (2 retired)", got, rep.Retired, want)
	}
}

// TestImportRepeatedResource: Bundles that each embed the same
// Practitioner (Synthea's per-patient Bundles do so with their
// Organizations and Practitioners) import it once; if one copy differs the
// import is refused, naming both places and nothing of the content.
func TestImportRepeatedResource(t *testing.T) {
	dir := t.TempDir()
	rep := mustImportFHIR(t, dir, "dup")
	want := []string{"patient a", "patient b", "practitioner -"}
	if got := liveResources(t, dir); !slices.Equal(got, want) || rep.Created != 3 || rep.Repeated != 1 {
		t.Errorf("after dup/: %v, %+v; want %v, 3 created, 1 repeated", got, rep, want)
	}

	in := t.TempDir()
	for _, f := range []string{"bundle-a.json", "bundle-b.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "fhir", "dup", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "bundle-b.json" {
			b = bytes.Replace(b, []byte(`"family":"Bone"`), []byte(`"family":"Marrow"`), 1)
		}
		if err := os.WriteFile(filepath.Join(in, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, msg := importFHIR(t, t.TempDir(), in)
	if !strings.Contains(msg, "bundle-b.json:2: the same resource appears twice in the input, with different content or labels (first at bundle-a.json:2)") {
		t.Errorf("a repeat that differs: %q", msg)
	}
	for _, phi := range []string{"Bone", "Marrow", "dr1"} {
		if strings.Contains(msg, phi) {
			t.Errorf("the error quotes %q: %s", phi, msg)
		}
	}
}

// attachments returns the MIME type and content of each live attachment
// of the catalog in dir.
func attachments(t *testing.T, dir string) map[string]string {
	t.Helper()
	s, rs := openCatalog(t, dir)
	out := map[string]string{}
	for _, r := range rs {
		if r.Labels.Type != "attachment" {
			continue
		}
		b, err := s.Blob(t.Context(), r.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out[r.MIMEType] = string(b)
	}
	return out
}

// TestImportAttachmentTypes: the probe's attachments that the reader
// passed and the store then refused (or the reader refused for a known
// alias) import; one the import cannot take is refused while reading,
// naming the file, the FHIR path of the attachment and the reader's
// sentinel ("bad attachment"), quoting nothing.
func TestImportAttachmentTypes(t *testing.T) {
	for _, c := range []struct{ file, mimeType, content string }{
		{"mime-octet.json", "application/octet-stream", "%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"},
		{"mime-latin1.json", "text/plain; charset=utf-8", "café notes"},
		{"mime-jpg.json", "image/jpeg", "\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"},
		{"mime-jpeg.json", "image/jpeg", ""},
		{"mime-cda.json", "application/hl7-v3+xml", ""},
		{"mime-cdaxml.json", "application/xml", ""},
		{"mime-textxml.json", "text/xml", ""},
	} {
		dir := t.TempDir()
		mustImportFHIR(t, dir, c.file)
		got := attachments(t, dir)
		content, ok := got[c.mimeType]
		if len(got) != 1 || !ok || (c.content != "" && content != c.content) {
			t.Errorf("%s: attachments %q, want one %s holding %q", c.file, got, c.mimeType, c.content)
		}
	}

	dir := t.TempDir()
	_, msg := importFHIR(t, dir, "mime-sjis.json")
	want := "mime-sjis.json:1: DocumentReference.content[0].attachment.contentType: bad attachment: the charset is none of utf-8, us-ascii, iso-8859-1, windows-1252"
	if !strings.Contains(msg, want) || !strings.Contains(msg, "nothing was imported") {
		t.Errorf("Shift_JIS text: %q, want %q", msg, want)
	}
	for _, quoted := range []string{"d-sjis", "Shift_JIS", "gqCC"} {
		if strings.Contains(msg, quoted) {
			t.Errorf("the error quotes %q: %s", quoted, msg)
		}
	}
}

// TestImportFailedFirstLeavesNoTrace: a failed first import leaves the
// data directory as it found it: not there, or empty (it left the dev id
// key it had drawn, dev-keys.json). After a successful import, a failed
// one keeps the key the catalog is named under.
func TestImportFailedFirstLeavesNoTrace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, msg := importFHIR(t, dir, "mime-sjis.json"); msg == "" {
		t.Fatal("the import succeeded")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(dir)
		t.Errorf("a failed first import into a new directory left it: %v %v", err, entries)
	}

	// The directories import had to create for a new data directory go
	// too, not only the data directory itself.
	tmp := t.TempDir()
	if _, msg := importFHIR(t, filepath.Join(tmp, "new", "parent", "data"), "mime-sjis.json"); msg == "" {
		t.Fatal("the import succeeded")
	}
	if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
		t.Errorf("a failed first import into a new directory left the directories made for it: %v %v", entries, err)
	}

	dir = t.TempDir()
	if _, msg := importFHIR(t, dir, "mime-sjis.json"); msg == "" {
		t.Fatal("the import succeeded")
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("a failed first import into an empty directory left %v %v", entries, err)
	}

	mustImportFHIR(t, dir, "docref.json")
	keys, err := os.ReadFile(filepath.Join(dir, "dev-keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, msg := importFHIR(t, dir, "mime-sjis.json"); msg == "" {
		t.Fatal("the import succeeded")
	}
	if after, err := os.ReadFile(filepath.Join(dir, "dev-keys.json")); err != nil || !bytes.Equal(after, keys) {
		t.Errorf("a failed import after a successful one changed the id key: %v", err)
	}
	if got := liveResources(t, dir); len(got) != 3 {
		t.Errorf("live resources %v after a failed import, want the 3 imported before", got)
	}
}

// optOutResources lists the live resources of the catalog in dir as
// "type patient", with " opt-out" when labelled so, sorted.
func optOutResources(t *testing.T, dir string) []string {
	t.Helper()
	_, rs := openCatalog(t, dir)
	var out []string
	for _, r := range rs {
		line := r.Labels.Type + " " + r.Labels.Patient
		if slices.Contains(r.Labels.Consent, store.ConsentOptOut) {
			line += " opt-out"
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}

// TestImportKeepsOptOut: the probe's reproducers of the opt-out lost on
// incremental imports. Day 1 holds p1's opt-out Consent and o1; day 2
// only o1 (unchanged) and a new o2: both carry "opt-out" afterwards (o1
// stays unchanged), where day 2 used to strip o1's label and leave o2
// without one. The reverse order labels the earlier items when the
// Consent arrives, and a revocation clears every label.
func TestImportKeepsOptOut(t *testing.T) {
	dir := t.TempDir()
	mustImportFHIR(t, dir, "optout-day1.json")
	rep := mustImportFHIR(t, dir, "optout-day2.ndjson")
	want := []string{"consent p1 opt-out", "observation p1 opt-out", "observation p1 opt-out", "patient p1 opt-out"}
	if got := optOutResources(t, dir); !slices.Equal(got, want) || rep.Unchanged != 1 || rep.Created != 1 || rep.Relabelled != 0 {
		t.Errorf("day 1, day 2: %v, %+v; want %v, 1 unchanged, 1 created", got, rep, want)
	}

	dir = t.TempDir()
	mustImportFHIR(t, dir, "optout-day2.ndjson")
	rep = mustImportFHIR(t, dir, "optout-day1.json")
	if got := optOutResources(t, dir); !slices.Equal(got, want) || rep.Relabelled != 1 {
		t.Errorf("day 2, day 1: %v, %+v; want %v, 1 relabelled (o2)", got, rep, want)
	}
	rep = mustImportFHIR(t, dir, "optout-revoke.json")
	want = []string{"consent p1", "observation p1", "observation p1", "patient p1"}
	if got := optOutResources(t, dir); !slices.Equal(got, want) || rep.Updated != 1 || rep.Relabelled != 3 {
		t.Errorf("revoked: %v, %+v; want %v, 1 updated, 3 relabelled", got, rep, want)
	}
	// Day 1 again: the import writes c1, o1 and p1 labelled, o2 is
	// relabelled; the text report says so.
	var out, errb bytes.Buffer
	t.Setenv("VAULT_ADDR", "")
	if code := run([]string{"import", "--data-dir", dir, "--tenant", "t", filepath.Join("testdata", "fhir", "optout-day1.json")}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "3 updated, 0 unchanged, 0 retired, 1 relabelled (labels changed) (") {
		t.Errorf("text report: %q %q", out.String(), errb.String())
	}
}

// TestImportRefusesAnotherSourcesResource: a second source of one tenant
// that uses the same ids (two EHRs numbering patients from 1) is refused
// where it would replace the first source's resources, instead of merging
// its patient with the first's (whose HIV result would then sit in the
// second patient's compartment); the catalog is unchanged. The same
// source re-imports as before, and a tenant of its own takes the second.
func TestImportRefusesAnotherSourcesResource(t *testing.T) {
	dir := t.TempDir()
	mustImportFHIR(t, dir, "twosrc/ehr1.ndjson", "--source", "ehr1")
	before := liveResources(t, dir)
	catalog := mustReadFile(t, filepath.Join(dir, "catalog.db"))
	_, msg := importFHIR(t, dir, "twosrc/ehr2.ndjson", "--source", "ehr2")
	if !strings.Contains(msg, "another source of this tenant") {
		t.Fatalf("a second source replacing the first's resources: %q, want a refusal", msg)
	}
	if strings.Contains(msg, "Bravo") || strings.Contains(msg, "123") {
		t.Errorf("the refusal quotes the input: %q", msg)
	}
	if !bytes.Equal(mustReadFile(t, filepath.Join(dir, "catalog.db")), catalog) {
		t.Error("the refused import changed the catalog")
	}
	if got := liveResources(t, dir); !slices.Equal(got, before) {
		t.Errorf("live resources %v, want %v", got, before)
	}
	if rep := mustImportFHIR(t, dir, "twosrc/ehr1.ndjson", "--source", "ehr1"); rep.Unchanged == 0 {
		t.Errorf("the first source's re-import: %+v", rep)
	}
	other := t.TempDir()
	mustImportFHIR(t, other, "twosrc/ehr2.ndjson", "--source", "ehr2")
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImportOfNothing: an input that reads as nothing (valid FHIR, which
// fhirin reads without error) is refused, saying that the input holds
// nothing to import and what reads as nothing; it said "input: no
// entries", naming neither what was missing nor why that fails, while
// docs/import.md said such a Bundle reads without error, and then named
// an empty Bundle and a search that found nothing as the examples, where
// a batch of reads (GET requests without a resource) fits neither.
// Nothing is left behind, and the message holds nothing of the input.
func TestImportOfNothing(t *testing.T) {
	for _, tc := range []struct{ name, bundle, says string }{
		{"an empty searchset", `{"resourceType":"Bundle","type":"searchset","total":0}`, "an empty Bundle"},
		{"a searchset of its outcome alone", `{"resourceType":"Bundle","type":"searchset","total":0,"entry":[{"search":{"mode":"outcome"},` +
			`"resource":{"resourceType":"OperationOutcome","issue":[{"severity":"information","code":"informational","diagnostics":"no Patient 7719"}]}}]}`,
			"a search's outcomes alone"},
		{"a batch of reads", `{"resourceType":"Bundle","type":"batch","entry":[{"request":{"method":"GET","url":"Patient/7719"}},` +
			`{"request":{"method":"GET","url":"Observation?patient=7719&code=8480-6"}},{"request":{"method":"HEAD","url":"Patient/7720"}}]}`,
			"requests that only read: GET or HEAD without a resource"},
	} {
		in := filepath.Join(t.TempDir(), "bundle.json")
		if err := os.WriteFile(in, []byte(tc.bundle), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "data")
		_, msg := importFHIR(t, dir, in)
		if !strings.Contains(msg, "input: no entries: the input holds no resource and no deletion, only what imports nothing (") ||
			!strings.Contains(msg, tc.says) || !strings.Contains(msg, "so there is nothing to import") || !strings.Contains(msg, "nothing was imported") {
			t.Errorf("import of %s: %q, want it to say the input holds nothing to import, naming %q", tc.name, msg, tc.says)
		}
		if strings.Contains(msg, "7719") || strings.Contains(msg, "7720") {
			t.Errorf("import of %s: the message names the input's ids: %q", tc.name, msg)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("import of %s: the refused import left the data directory: %v", tc.name, err)
		}
	}
}

// TestImportReportsSkippedEntries: Bundle entries the reader leaves out on
// purpose beside importable ones (fhirin's testdata/skipped-entries.json:
// 3 GET/HEAD requests without a resource, 3 search outcomes) are counted
// in the import's report, in --json ("skipped") and in its text line;
// before, the import succeeded and said nothing of them. What is imported
// is what it was.
func TestImportReportsSkippedEntries(t *testing.T) {
	t.Setenv("VAULT_ADDR", "") // the dev id key of the data directory
	in, err := filepath.Abs(filepath.Join("..", "..", "fhirin", "testdata", "skipped-entries.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, asJSON := range []bool{true, false} {
		args := []string{"import", "--data-dir", filepath.Join(t.TempDir(), "data"), "--tenant", "t", in}
		if asJSON {
			args = append(args[:1], append([]string{"--json"}, args[1:]...)...)
		}
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("custos %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
		}
		if !asJSON {
			const want = "imported 5 FHIR entries for tenant t: 5 created, 0 updated, 0 unchanged, 0 retired ("
			if got := out.String(); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, " bytes); skipped: 3 read requests (GET/HEAD), 3 search outcomes\n") {
				t.Errorf("custos import said %q, want %q... bytes); skipped: 3 read requests (GET/HEAD), 3 search outcomes", got, want)
			}
			continue
		}
		var rep store.ImportReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("custos import --json: report %q: %v", out.String(), err)
		}
		if rep.Created != 5 || rep.Lines != 5 {
			t.Errorf("custos import --json: %+v, want 5 entries created", rep)
		}
		checkSkippedJSON(t, "custos import --json", out.Bytes(), 3, 3)
	}
}

// checkSkippedJSON checks that the JSON report out of the command what
// holds "skipped" with both counts, reads and outcomes.
func checkSkippedJSON(t *testing.T, what string, out []byte, reads, outcomes int) {
	t.Helper()
	var rep struct {
		Skipped *struct {
			Reads    *int `json:"read_requests"`
			Outcomes *int `json:"search_outcomes"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%s: report %q: %v", what, out, err)
	}
	switch s := rep.Skipped; {
	case s == nil || s.Reads == nil || s.Outcomes == nil:
		t.Errorf("%s: no skipped.read_requests and skipped.search_outcomes in %s", what, out)
	case *s.Reads != reads || *s.Outcomes != outcomes:
		t.Errorf("%s: skipped %d read requests and %d search outcomes, want %d and %d", what, *s.Reads, *s.Outcomes, reads, outcomes)
	}
}
