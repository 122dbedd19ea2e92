package synth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden-tree.sha256")

// generate runs Generate into a fresh temp dir and fails the test on error.
func generate(t testing.TB, opts Options) (string, Summary) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	sum, err := Generate(context.Background(), dir, opts)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", opts, err)
	}
	return dir, sum
}

// treeDigests maps every file's slash path to its SHA-256.
func treeDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		sum := sha256.Sum256(b)
		out[filepath.ToSlash(rel)] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// treeDigest folds treeDigests into one hex digest (sorted "sha  path" lines).
func treeDigest(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s  %s\n", m[k], k)
	}
	return hex.EncodeToString(h.Sum(nil))
}

type testEntry struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	MimeType    string `json:"mimeType"`
	Annotations struct {
		Audience     []string `json:"audience"`
		Priority     float64  `json:"priority"`
		LastModified string   `json:"lastModified"`
	} `json:"annotations"`
	Labels struct {
		Tenant      string   `json:"tenant"`
		Patient     string   `json:"patient"`
		Type        string   `json:"type"`
		Sensitivity []string `json:"sensitivity"`
		Consent     []string `json:"consent"`
	} `json:"labels"`
	File string `json:"file"`
}

var manifestKeys = []string{"uri", "name", "title", "description", "mimeType", "annotations", "labels", "file"}

// topLevelKeys returns the keys of a JSON object in document order.
func topLevelKeys(t *testing.T, line []byte) []string {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		t.Fatalf("manifest line is not a JSON object: %v", err)
	}
	type kp struct {
		k string
		i int
	}
	var ks []kp
	for k := range raw {
		ks = append(ks, kp{k, bytes.Index(line, []byte(`"`+k+`":`))})
	}
	sort.Slice(ks, func(a, b int) bool { return ks[a].i < ks[b].i })
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.k
	}
	return out
}

func readManifest(t *testing.T, dir string) []testEntry {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []testEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if got := topLevelKeys(t, line); !slices.Equal(got, manifestKeys) {
			t.Errorf("line %d: keys %v, want %v", n, got, manifestKeys)
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var e testEntry
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

const uuidRE = `[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`

var uriRE = regexp.MustCompile(`^(?:` +
	`fhir://([a-z0-9-]+)/patients/(` + uuidRE + `)/(patient|observation|condition|medicationrequest|encounter|coverage)/(` + uuidRE + `)` +
	`|(note)://([a-z0-9-]+)/patients/(` + uuidRE + `)/notes/(` + uuidRE + `)` +
	`|(report)://([a-z0-9-]+)/patients/(` + uuidRE + `)/reports/(` + uuidRE + `)` +
	`|(image)://([a-z0-9-]+)/patients/(` + uuidRE + `)/images/(` + uuidRE + `)` +
	`)$`)

// tenantURIRE is the grammar of a tenant-level resource's URI (the
// payers' Organizations, whose ids are name-based UUIDs, version 5).
var tenantURIRE = regexp.MustCompile(`^fhir://([a-z0-9-]+)/(organization)/([0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})$`)

// parseURI returns tenant, patient ("" for a tenant-level resource), type
// and id of a manifest URI.
func parseURI(uri string) (tenant, patient, typ, id string, ok bool) {
	if m := tenantURIRE.FindStringSubmatch(uri); m != nil {
		return m[1], "", m[2], m[3], true
	}
	m := uriRE.FindStringSubmatch(uri)
	if m == nil {
		return "", "", "", "", false
	}
	for g := 1; g < len(m); g += 4 {
		if m[g] == "" && m[g+1] == "" {
			continue
		}
		if g == 1 {
			return m[1], m[2], m[3], m[4], true
		}
		return m[g+1], m[g+2], m[g], m[g+3], true
	}
	return "", "", "", "", false
}

var fhirResourceType = map[string]string{
	"patient": "Patient", "observation": "Observation", "condition": "Condition",
	"medicationrequest": "MedicationRequest", "encounter": "Encounter", "coverage": "Coverage",
	"organization": "Organization",
}

// TestDeterministic runs under -race (tools/racetests): Generate writes patients on a pool of goroutines; the output must not depend on their order.
//
//custos:race
func TestDeterministic(t *testing.T) {
	opts := Options{Patients: 13, Seed: 7}
	a, _ := generate(t, opts)
	b, _ := generate(t, opts)
	da, db := treeDigests(t, a), treeDigests(t, b)
	if len(da) == 0 {
		t.Fatal("empty tree")
	}
	for k, v := range da {
		if db[k] != v {
			t.Errorf("%s differs between identical runs", k)
		}
	}
	for k := range db {
		if _, ok := da[k]; !ok {
			t.Errorf("%s only in second run", k)
		}
	}

	opts.Seed = 8
	c, _ := generate(t, opts)
	dc := treeDigests(t, c)
	if dc[ManifestFile] == da[ManifestFile] {
		t.Error("different seeds produced the same manifest")
	}
	if treeDigest(dc) == treeDigest(da) {
		t.Error("different seeds produced the same tree")
	}
}

// TestGoldenTree pins the exact output for one small data set, so an
// accidental change to the generator (or to an encoder it relies on) is
// noticed. Run with -update after an intended change.
func TestGoldenTree(t *testing.T) {
	dir, _ := generate(t, Options{Patients: 7})
	got := treeDigest(treeDigests(t, dir))
	golden := filepath.Join("testdata", "golden-tree.sha256")
	if *update {
		if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(want)) != got {
		t.Errorf("tree digest %s, golden %s (run go test -run TestGoldenTree -update after an intended change)", got, strings.TrimSpace(string(want)))
	}
}

func TestManifestAndFiles(t *testing.T) {
	const n = 23
	dir, sum := generate(t, Options{Patients: n})
	entries := readManifest(t, dir)
	if len(entries) != sum.Resources {
		t.Fatalf("manifest has %d lines, summary says %d", len(entries), sum.Resources)
	}
	seenURI := map[string]bool{}
	seenFile := map[string]bool{}
	patients := map[string]bool{}
	for _, e := range entries {
		tenant, patient, typ, id, ok := parseURI(e.URI)
		if !ok {
			t.Errorf("URI %q does not match the grammar", e.URI)
			continue
		}
		if seenURI[e.URI] {
			t.Errorf("duplicate URI %s", e.URI)
		}
		seenURI[e.URI] = true
		if e.Labels.Tenant != tenant || tenant != DefaultTenant || e.Labels.Patient != patient || e.Labels.Type != typ {
			t.Errorf("%s: labels %+v do not match URI", e.URI, e.Labels)
		}
		if want := typ + "-" + id[:8]; e.Name != want {
			t.Errorf("%s: name %q, want %q", e.URI, e.Name, want)
		}
		if !slices.Equal(e.Annotations.Audience, []string{"user", "assistant"}) || e.Annotations.Priority <= 0 || e.Annotations.Priority > 1 {
			t.Errorf("%s: annotations %+v", e.URI, e.Annotations)
		}
		if _, err := time.Parse(time.RFC3339, e.Annotations.LastModified); err != nil {
			t.Errorf("%s: lastModified: %v", e.URI, err)
		}
		if e.Title == "" || e.Description == "" {
			t.Errorf("%s: empty title or description", e.URI)
		}
		if seenFile[e.File] {
			t.Errorf("duplicate file %s", e.File)
		}
		seenFile[e.File] = true
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(e.File)))
		if err != nil {
			t.Errorf("%s: %v", e.URI, err)
			continue
		}
		var wantFile, wantMime string
		switch typ {
		case "note":
			wantFile, wantMime = "notes/"+id+".md", "text/markdown"
			if !bytes.HasPrefix(data, []byte("# ")) {
				t.Errorf("%s: note is not Markdown with a heading", e.File)
			}
		case "report":
			wantFile, wantMime = "reports/"+id+".pdf", "application/pdf"
			checkPDF(t, e.File, data)
		case "image":
			wantFile, wantMime = "images/"+id+".png", "image/png"
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil {
				t.Errorf("%s: %v", e.File, err)
			} else if b := img.Bounds(); b.Dx() != 32 || b.Dy() != 32 {
				t.Errorf("%s: image is %v, want 32x32", e.File, b)
			}
		default:
			wantFile, wantMime = "fhir/"+id+".json", "application/fhir+json"
			if typ == "patient" {
				patients[patient] = true
				if id != patient {
					t.Errorf("%s: Patient id %s differs from patient %s", e.URI, id, patient)
				}
			}
			checkFHIR(t, e.File, data, fhirResourceType[typ], id, patient)
		}
		if e.File != wantFile || e.MimeType != wantMime {
			t.Errorf("%s: file %q mime %q, want %q %q", e.URI, e.File, e.MimeType, wantFile, wantMime)
		}
	}
	if len(patients) != n {
		t.Errorf("%d Patient resources, want %d", len(patients), n)
	}
	for _, e := range entries {
		if e.Labels.Patient == "" && e.Labels.Type == "organization" {
			continue // tenant-level: the payers
		}
		if !patients[e.Labels.Patient] {
			t.Errorf("%s: patient %s has no Patient resource", e.URI, e.Labels.Patient)
		}
	}
	// No orphan files: every content file is in the manifest.
	for _, sub := range []string{"fhir", "notes", "reports", "images"} {
		ents, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range ents {
			if !seenFile[sub+"/"+de.Name()] {
				t.Errorf("orphan file %s/%s", sub, de.Name())
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, manifestTemp)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temporary manifest left behind: %v", err)
	}
}

func checkFHIR(t *testing.T, name string, data []byte, resourceType, id, patient string) {
	t.Helper()
	var r struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
		Subject      *struct {
			Reference string `json:"reference"`
		} `json:"subject"`
		Beneficiary *struct {
			Reference string `json:"reference"`
		} `json:"beneficiary"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Errorf("%s: invalid JSON: %v", name, err)
		return
	}
	if r.ResourceType != resourceType || r.ID != id {
		t.Errorf("%s: resourceType %q id %q, want %q %q", name, r.ResourceType, r.ID, resourceType, id)
	}
	ref := ""
	switch {
	case r.Subject != nil:
		ref = r.Subject.Reference
	case r.Beneficiary != nil:
		ref = r.Beneficiary.Reference
	}
	if resourceType != "Patient" && patient != "" && ref != "Patient/"+patient {
		t.Errorf("%s: refers to %q, want Patient/%s", name, ref, patient)
	}
}

var startxrefRE = regexp.MustCompile(`startxref\n(\d+)\n%%EOF$`)
var streamRE = regexp.MustCompile(`(?s)<< /Length (\d+) >>\nstream\n(.*?)\nendstream`)
var xrefEntryRE = regexp.MustCompile(`(\d{10}) 00000 n \n`)

// checkPDF checks the header, trailer and that every xref offset points at
// its object.
func checkPDF(t *testing.T, name string, data []byte) {
	t.Helper()
	if !bytes.HasPrefix(data, []byte("%PDF-")) || !bytes.HasSuffix(data, []byte("%%EOF")) {
		t.Errorf("%s: not framed by %%PDF- ... %%%%EOF", name)
		return
	}
	m := startxrefRE.FindSubmatch(data)
	if m == nil {
		t.Errorf("%s: no startxref", name)
		return
	}
	off, _ := strconv.Atoi(string(m[1]))
	if off >= len(data) || !bytes.HasPrefix(data[off:], []byte("xref\n")) {
		t.Errorf("%s: startxref %d does not point at xref", name, off)
		return
	}
	entries := xrefEntryRE.FindAllSubmatch(data[off:], -1)
	if len(entries) != 5 {
		t.Errorf("%s: %d xref entries, want 5", name, len(entries))
	}
	for k, e := range entries {
		o, _ := strconv.Atoi(string(e[1]))
		if want := fmt.Sprintf("%d 0 obj\n", k+1); o >= len(data) || !bytes.HasPrefix(data[o:], []byte(want)) {
			t.Errorf("%s: xref entry %d (offset %d) does not point at %q", name, k+1, o, want)
		}
	}
	if m := streamRE.FindSubmatch(data); m == nil {
		t.Errorf("%s: no content stream", name)
	} else if n, _ := strconv.Atoi(string(m[1])); n != len(m[2]) {
		t.Errorf("%s: stream /Length %d, stream holds %d bytes", name, n, len(m[2]))
	}
	if !bytes.Contains(data, []byte("(Laboratory report) Tj")) {
		t.Errorf("%s: no \"Laboratory report\" text", name)
	}
}

// testPatient is what the tests read back from Patient files.
type testPatient struct {
	ID         string `json:"id"`
	Identifier []struct {
		System string `json:"system"`
		Value  string `json:"value"`
	} `json:"identifier"`
	Name []struct {
		Family string   `json:"family"`
		Given  []string `json:"given"`
	} `json:"name"`
	Telecom []struct {
		System string `json:"system"`
		Value  string `json:"value"`
	} `json:"telecom"`
	BirthDate string `json:"birthDate"`
	Address   []struct {
		Line       []string `json:"line"`
		PostalCode string   `json:"postalCode"`
	} `json:"address"`
}

func (p testPatient) identifiers() []string {
	var out []string
	for _, n := range p.Name {
		out = append(out, n.Family, strings.Join(n.Given, " ")+" "+n.Family)
		out = append(out, n.Given...)
	}
	for _, id := range p.Identifier {
		out = append(out, id.Value)
	}
	for _, tc := range p.Telecom {
		out = append(out, tc.Value)
	}
	for _, a := range p.Address {
		out = append(out, a.PostalCode)
		out = append(out, a.Line...)
	}
	return append(out, p.BirthDate)
}

func readPatients(t *testing.T, dir string, entries []testEntry) map[string]testPatient {
	t.Helper()
	out := map[string]testPatient{}
	for _, e := range entries {
		if e.Labels.Type != "patient" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		var p testPatient
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		out[p.ID] = p
	}
	return out
}

func TestMetadataCarriesNoIdentifiers(t *testing.T) {
	dir, _ := generate(t, Options{Patients: 40, Seed: 3})
	entries := readManifest(t, dir)
	patients := readPatients(t, dir, entries)
	var ids []string
	for _, p := range patients {
		for _, s := range p.identifiers() {
			if s == "" {
				t.Fatalf("patient %s has an empty identifier", p.ID)
			}
			ids = append(ids, s)
		}
	}
	if len(ids) < 40*8 {
		t.Fatalf("collected only %d identifiers", len(ids))
	}
	for _, e := range entries {
		for _, field := range []string{e.Title, e.Description, e.Name} {
			for _, s := range ids {
				if strings.Contains(field, s) {
					t.Errorf("%s: metadata %q contains identifier %q", e.URI, field, s)
				}
			}
		}
	}
	// The notes, by contrast, must mention the identifiers that scrubbing
	// has to find.
	for _, e := range entries {
		if e.Labels.Type != "note" {
			continue
		}
		p := patients[e.Labels.Patient]
		b, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{p.Name[0].Given[0] + " " + p.Name[0].Family, p.Identifier[0].Value, p.Telecom[0].Value, p.Telecom[1].Value, p.BirthDate} {
			if !bytes.Contains(b, []byte(s)) {
				t.Errorf("%s: note does not mention %q", e.File, s)
			}
		}
	}
}

func TestSyntheticIdentifierFormats(t *testing.T) {
	dir, _ := generate(t, Options{Patients: 30})
	patients := readPatients(t, dir, readManifest(t, dir))
	mrnRE := regexp.MustCompile(`^MRN-\d{8}$`)
	ssnRE := regexp.MustCompile(`^9\d{2}-\d{2}-\d{4}$`)
	phoneRE := regexp.MustCompile(`^\(\d{3}\) 555-01\d{2}$`)
	mrns := map[string]bool{}
	for _, p := range patients {
		var mrn, ssn string
		for _, id := range p.Identifier {
			switch id.System {
			case "urn:custos:mrn":
				mrn = id.Value
			case "http://hl7.org/fhir/sid/us-ssn":
				ssn = id.Value
			}
		}
		if !mrnRE.MatchString(mrn) || !ssnRE.MatchString(ssn) {
			t.Errorf("patient %s: MRN %q SSN %q not in synthetic formats", p.ID, mrn, ssn)
		}
		if mrns[mrn] {
			t.Errorf("duplicate MRN %s", mrn)
		}
		mrns[mrn] = true
		if len(p.Telecom) != 2 || !phoneRE.MatchString(p.Telecom[0].Value) || !strings.HasSuffix(p.Telecom[1].Value, "@example.com") {
			t.Errorf("patient %s: telecom %+v not synthetic", p.ID, p.Telecom)
		}
	}
}

type summaryJSON struct {
	Patients  int               `json:"patients"`
	Resources int               `json:"resources"`
	ByType    map[string]int    `json:"by_type"`
	EdgeCases map[string]string `json:"edge_cases"`
}

func readSummary(t *testing.T, dir string) summaryJSON {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var s summaryJSON
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func ageAt(birth string, now time.Time) int {
	b, err := time.Parse(dateFmt, birth)
	if err != nil {
		return -1
	}
	age := now.Year() - b.Year()
	if now.Month() < b.Month() || (now.Month() == b.Month() && now.Day() < b.Day()) {
		age--
	}
	return age
}

func TestEdgeCases(t *testing.T) {
	now := time.Date(2027, time.March, 15, 12, 0, 0, 0, time.UTC)
	dir, _ := generate(t, Options{Patients: 12, Now: now})
	entries := readManifest(t, dir)
	patients := readPatients(t, dir, entries)
	s := readSummary(t, dir)
	if s.Patients != 12 || s.Resources != len(entries) {
		t.Errorf("SUMMARY counts %d/%d, want 12/%d", s.Patients, s.Resources, len(entries))
	}
	if len(s.EdgeCases) != len(EdgeCases) {
		t.Fatalf("edge_cases %v, want all of %v", s.EdgeCases, EdgeCases)
	}
	// Edge case k is patient #k: the k-th Patient line of the manifest.
	var order []string
	for _, e := range entries {
		if e.Labels.Type == "patient" {
			order = append(order, e.Labels.Patient)
		}
	}
	for k, name := range EdgeCases {
		if s.EdgeCases[name] != order[k] {
			t.Errorf("edge case %s is %s, want patient #%d %s", name, s.EdgeCases[name], k, order[k])
		}
	}

	for id, p := range patients {
		age := ageAt(p.BirthDate, now)
		if id == s.EdgeCases["aged_92"] {
			if age != 92 {
				t.Errorf("aged_92 patient born %s is %d at %s", p.BirthDate, age, now)
			}
		} else if age < 18 || age > 89 {
			t.Errorf("patient %s born %s is %d: only the edge case may be over 89", id, p.BirthDate, age)
		}
		zip3 := p.Address[0].PostalCode[:3]
		restricted := slices.Contains(RestrictedZIP3, zip3)
		if restricted != (id == s.EdgeCases["zip3_restricted"]) {
			t.Errorf("patient %s ZIP %s restricted=%v", id, p.Address[0].PostalCode, restricted)
		}
	}

	conditionCode := func(e testEntry) string {
		b, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Code struct {
				Coding []struct{ System, Code string }
			}
		}
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		for _, cd := range c.Code.Coding {
			if cd.System == icd10Sys {
				return cd.Code
			}
		}
		return ""
	}
	found := map[string]int{}
	for _, e := range entries {
		pid := e.Labels.Patient
		isVIP := slices.Contains(e.Labels.Sensitivity, "vip")
		if isVIP != (pid == s.EdgeCases["vip"]) {
			t.Errorf("%s: vip label %v", e.URI, isVIP)
		}
		optOut := slices.Equal(e.Labels.Consent, []string{"opt-out"})
		if optOut != (pid == s.EdgeCases["opted_out"]) || (!optOut && e.Labels.Consent != nil) {
			t.Errorf("%s: consent %v", e.URI, e.Labels.Consent)
		}
		for _, tag := range []string{"hiv", "sud"} {
			has := slices.Contains(e.Labels.Sensitivity, tag)
			if has && pid != s.EdgeCases[tag] {
				t.Errorf("%s: %s label on a patient who is not the %s edge case", e.URI, tag, tag)
			}
			if has {
				found[tag+"/"+e.Labels.Type]++
			}
		}
		if e.Labels.Type == "condition" {
			switch code := conditionCode(e); code {
			case "B20", "F11.20":
				want := map[string]string{"B20": "hiv", "F11.20": "sud"}[code]
				if !slices.Equal(e.Labels.Sensitivity, []string{want}) || pid != s.EdgeCases[want] {
					t.Errorf("%s: %s condition labelled %v for patient %s", e.URI, code, e.Labels.Sensitivity, pid)
				}
			}
		}
	}
	for _, k := range []string{"hiv/condition", "hiv/note", "hiv/medicationrequest", "sud/condition", "sud/note", "sud/medicationrequest"} {
		if found[k] != 1 {
			t.Errorf("%d %s resources labelled, want 1", found[k], k)
		}
	}
}

func TestFewPatientsPlaceEdgeCasesThatFit(t *testing.T) {
	for n := 1; n <= len(EdgeCases); n++ {
		dir, _ := generate(t, Options{Patients: n})
		s := readSummary(t, dir)
		if len(s.EdgeCases) != n {
			t.Errorf("N=%d: edge_cases %v, want the first %d", n, s.EdgeCases, n)
		}
		for _, name := range EdgeCases[:n] {
			if s.EdgeCases[name] == "" {
				t.Errorf("N=%d: edge case %s missing", n, name)
			}
		}
	}
}

func TestPrincipals(t *testing.T) {
	dir, _ := generate(t, Options{Patients: 20})
	s := readSummary(t, dir)
	read := func(name string) Principal {
		b, err := os.ReadFile(filepath.Join(dir, PrincipalsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var p Principal
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return p
	}
	tests := []struct {
		file     string
		roles    []string
		tenant   string
		purpose  string
		patients int
	}{
		{"clinician.json", []string{"clinician"}, DefaultTenant, "TREAT", 10},
		{"clinician-hiv.json", []string{"clinician", "sensitive:hiv"}, DefaultTenant, "TREAT", 10},
		{"billing.json", []string{"billing"}, DefaultTenant, "HPAYMT", 0},
		{"researcher.json", []string{"researcher"}, DefaultTenant, "HRESCH", 0},
		{"auditor.json", []string{"auditor"}, DefaultTenant, "HOPERAT", 0},
		{"outsider.json", []string{"clinician"}, "other-clinic", "TREAT", 0},
	}
	for _, tc := range tests {
		p := read(tc.file)
		if p.Sub == "" || p.ClientID != DemoClientID || !slices.Equal(p.Roles, tc.roles) || p.Tenant != tc.tenant ||
			p.PurposeOfUse != tc.purpose || len(p.Patients) != tc.patients || p.Patients == nil {
			t.Errorf("%s: %+v", tc.file, p)
		}
		if tc.patients > 0 {
			for _, name := range EdgeCases {
				if !slices.Contains(p.Patients, s.EdgeCases[name]) {
					t.Errorf("%s: no care relationship with edge case %s", tc.file, name)
				}
			}
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, PrincipalsDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(tests) {
		t.Errorf("%d principal files, want %d", len(ents), len(tests))
	}
}

func TestTenantOption(t *testing.T) {
	dir, _ := generate(t, Options{Patients: 3, Tenant: "other-clinic"})
	for _, e := range readManifest(t, dir) {
		if tenant, _, _, _, _ := parseURI(e.URI); tenant != "other-clinic" || e.Labels.Tenant != "other-clinic" {
			t.Errorf("%s: tenant label %q", e.URI, e.Labels.Tenant)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, PrincipalsDir, "outsider.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"tenant": "other-hospital"`)) {
		t.Errorf("outsider shares the data set's tenant:\n%s", b)
	}
}

func TestEstimateMatchesManifest(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 6, 7, 12, 31, 60} {
		dir, sum := generate(t, Options{Patients: n, Seed: int64(n)})
		entries := readManifest(t, dir)
		if got := Estimate(n); got != len(entries) || sum.Resources != got {
			t.Errorf("N=%d: Estimate %d, manifest %d lines, Summary.Resources %d", n, got, len(entries), sum.Resources)
		}
		total := 0
		byType := map[string]int{}
		for _, e := range entries {
			byType[e.Labels.Type]++
		}
		for k, v := range sum.ByType {
			total += v
			if byType[k] != v {
				t.Errorf("N=%d: ByType[%s]=%d, manifest has %d", n, k, v, byType[k])
			}
		}
		if total != len(entries) || sum.ByType["patient"] != n || sum.Patients != n {
			t.Errorf("N=%d: summary %+v", n, sum)
		}
		var size int64
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				fi, _ := d.Info()
				size += fi.Size()
			}
			return err
		})
		if sum.Bytes != size {
			t.Errorf("N=%d: Summary.Bytes %d, tree holds %d", n, sum.Bytes, size)
		}
	}
	if Estimate(0) != 0 || Estimate(-1) != 0 {
		t.Error("Estimate of no patients is not 0")
	}
	if got := Estimate(10000); got < 95000 || got > 105000 {
		t.Errorf("Estimate(10000) = %d, want about 100,000", got)
	}
}

func TestProgress(t *testing.T) {
	var calls []int
	_, _ = generate(t, Options{Patients: 260, Progress: func(done, total int) {
		if total != 260 {
			t.Errorf("total %d", total)
		}
		calls = append(calls, done)
	}})
	if len(calls) != 260 || calls[0] != 1 || calls[259] != 260 || !slices.IsSorted(calls) {
		t.Errorf("progress calls: %d, first/last %v", len(calls), []int{calls[0], calls[len(calls)-1]})
	}
}

func TestGenerateErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(t *testing.T) string
		opts  Options
		want  error
	}{
		{"no patients", func(t *testing.T) string { return filepath.Join(t.TempDir(), "d") }, Options{}, ErrInvalidOptions},
		{"negative patients", func(t *testing.T) string { return filepath.Join(t.TempDir(), "d") }, Options{Patients: -3}, ErrInvalidOptions},
		{"bad tenant", func(t *testing.T) string { return filepath.Join(t.TempDir(), "d") }, Options{Patients: 1, Tenant: "Bad/Tenant"}, ErrInvalidOptions},
		{"dir not empty", func(t *testing.T) string {
			d := t.TempDir()
			os.WriteFile(filepath.Join(d, "x"), []byte("x"), 0o600)
			return d
		}, Options{Patients: 1}, ErrDirNotEmpty},
		{"path is a file", func(t *testing.T) string {
			f := filepath.Join(t.TempDir(), "f")
			os.WriteFile(f, []byte("x"), 0o600)
			return f
		}, Options{Patients: 1}, ErrDirNotEmpty},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.setup(t)
			_, err := Generate(ctx, dir, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
				t.Errorf("manifest exists after failure")
			}
		})
	}
	// An existing empty directory is accepted.
	if _, err := Generate(ctx, t.TempDir(), Options{Patients: 1}); err != nil {
		t.Errorf("empty existing dir: %v", err)
	}
}

func TestCancelLeavesNoManifest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	dir := filepath.Join(t.TempDir(), "d")
	_, err := Generate(ctx, dir, Options{Patients: 600, Progress: func(done, _ int) {
		if done == 10 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	for _, name := range []string{ManifestFile, manifestTemp} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after cancellation", name)
		}
	}
}

func BenchmarkGenerate1000Patients(b *testing.B) {
	b.ReportAllocs()
	var sum Summary
	for b.Loop() {
		dir := filepath.Join(b.TempDir(), "d")
		var err error
		sum, err = Generate(context.Background(), dir, Options{Patients: 1000})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(sum.Resources), "resources/op")
	b.ReportMetric(float64(sum.Bytes)/1e6, "MB/op")
}

// Identifiers reports every identifier the generator wrote, as found by the
// test's own manifest-driven reading of the Patient files.
func TestIdentifiers(t *testing.T) {
	dir, _ := generate(t, Options{Patients: 8, Seed: 5})
	got, err := Identifiers(dir)
	if err != nil {
		t.Fatal(err)
	}
	patients := readPatients(t, dir, readManifest(t, dir))
	for _, p := range patients {
		for _, want := range p.identifiers() {
			if _, found := slices.BinarySearch(got, want); len(want) >= 3 && !found {
				t.Errorf("patient %s: identifier missing from Identifiers", p.ID)
			}
		}
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Error("Identifiers is not sorted and deduplicated")
	}
	if _, err := Identifiers(t.TempDir()); err == nil {
		t.Error("a directory without patients gave no error")
	}
}

// TestCoveragePayorIsAnOrganizationOfTheSet: every Coverage names its
// payor by a reference to an Organization the data set holds (tenant-level
// reference data, in the manifest and the Bulk export), as R4 data does;
// until h-views the payor was a display alone, and a biller's view, which
// keeps a payor's reference and drops its display, kept no payor at all.
func TestCoveragePayorIsAnOrganizationOfTheSet(t *testing.T) {
	dir, _ := generate(t, Options{Patients: 12})
	orgs := map[string]bool{}
	var coverages [][]byte
	for _, e := range readManifest(t, dir) {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(e.File)))
		if err != nil {
			t.Fatal(err)
		}
		switch e.Labels.Type {
		case "organization":
			var o struct{ ResourceType, ID, Name string }
			if err := json.Unmarshal(data, &o); err != nil || o.ResourceType != "Organization" || o.Name == "" || e.Labels.Patient != "" {
				t.Errorf("%s: %s (%v)", e.URI, data, err)
			}
			orgs["Organization/"+o.ID] = true
		case "coverage":
			coverages = append(coverages, data)
		}
	}
	bulk, err := os.ReadFile(filepath.Join(dir, BulkDir, "Organization.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(bulk, []byte("\n")); n != len(orgs) || len(orgs) != len(payors) {
		t.Errorf("%d Organizations in the manifest, %d in the Bulk export, want %d", len(orgs), n, len(payors))
	}
	if len(coverages) != 12 {
		t.Fatalf("%d Coverages", len(coverages))
	}
	for _, c := range coverages {
		var v struct {
			Payor []struct{ Reference, Display string }
		}
		if err := json.Unmarshal(c, &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Payor) != 1 || !orgs[v.Payor[0].Reference] || v.Payor[0].Display == "" {
			t.Errorf("a Coverage's payor names no Organization of the set: %+v", v.Payor)
		}
	}
}
