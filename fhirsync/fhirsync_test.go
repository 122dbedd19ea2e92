package fhirsync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/fhirin"
)

func TestParseBase(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"https://ehr.example.org/fhir/R4/", "https://ehr.example.org/fhir/R4", true},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", true},
		{"https://user:secret@ehr.example.org/fhir", "", false},
		{"https://ehr.example.org/fhir?token=abc", "", false},
		{"https://ehr.example.org/fhir#frag", "", false},
		{"https://ehr.example.org/fhir?", "", false},
		{"ftp://ehr.example.org/fhir", "", false},
		{"/fhir", "", false},
	} {
		u, err := ParseBase(tc.in)
		if tc.ok != (err == nil) || (err == nil && u.String() != tc.want) {
			t.Errorf("ParseBase(%q) = %v, %v; want %q ok=%v", tc.in, u, err, tc.want, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrBadConfig) || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "abc")) {
			t.Errorf("ParseBase(%q) error %v: want ErrBadConfig without the value", tc.in, err)
		}
	}
}

// TestWhereNamesOnlyThePath: a pre-signed URL's query (credentials) never
// reaches a message.
func TestWhereNamesOnlyThePath(t *testing.T) {
	u, _ := url.Parse("https://files.example.org/export/Patient.ndjson?X-Amz-Signature=SECRET&token=T")
	if got := where(u); got != "/export/Patient.ndjson" {
		t.Fatalf("where = %q", got)
	}
}

func TestBackoff(t *testing.T) {
	base, maxd := 100*time.Millisecond, 2*time.Second
	for n := 0; n < 40; n++ {
		d := min(base<<min(n, 20), maxd)
		for i := 0; i < 50; i++ {
			got := backoff(n, base, maxd, 0)
			if got < d/2 || got > d {
				t.Fatalf("backoff(%d) = %s, want in [%s, %s]", n, got, d/2, d)
			}
		}
	}
	if got := backoff(0, base, maxd, 1500*time.Millisecond); got != 1500*time.Millisecond {
		t.Fatalf("Retry-After 1.5s gave %s", got)
	}
	if got := backoff(0, base, maxd, time.Hour); got != maxd {
		t.Fatalf("Retry-After 1h gave %s, want the cap %s", got, maxd)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"3", 3 * time.Second}, {"-1", 0}, {"soon", 0},
		{now.Add(5 * time.Second).Format(http.TimeFormat), 5 * time.Second},
		{now.Add(-5 * time.Second).Format(http.TimeFormat), 0},
		// Beyond any deadline, and never wrapped negative.
		{"10000000000", maxRetryAfter}, {"99999999999999999999999", maxRetryAfter},
		{now.AddDate(100, 0, 0).Format(http.TimeFormat), maxRetryAfter},
	} {
		if got := retryAfter(http.Header{"Retry-After": {tc.v}}, now); got != tc.want {
			t.Errorf("Retry-After %q = %s, want %s", tc.v, got, tc.want)
		}
	}
}

// TestCopyNDJSON: what a staged file may hold; every refusal names the
// source and line, never the line's content.
func TestCopyNDJSON(t *testing.T) {
	const pat = `{"resourceType":"Patient","id":"p1","name":[{"family":"SECRETNAME"}]}`
	for _, tc := range []struct {
		name, in, typ string
		deleted       bool
		n             int
		err           string
	}{
		{"two lines", pat + "\n" + pat + "\n", "Patient", false, 2, ""},
		{"no final newline", pat + "\n" + pat, "Patient", false, 2, ""},
		{"blank lines", "\n" + pat + "\n\n", "Patient", false, 1, ""},
		{"empty", "", "Patient", false, 0, ""},
		{"truncated", pat + "\n" + pat[:30], "Patient", false, 1, "src line 2: not a complete JSON value"},
		{"other type", pat + "\n", "Observation", false, 0, `src line 1: resourceType "Patient" in a file of type "Observation"`},
		{"no id", `{"resourceType":"Patient"}` + "\n", "Patient", false, 0, "src line 1: resource without an id"},
		{"array", `[1,2]` + "\n", "Patient", false, 0, "src line 1: not a JSON object"},
		{"too long", `{"resourceType":"Patient","id":"` + strings.Repeat("x", 300) + `"}`, "Patient", false, 0, "src line 1: longer than 256 bytes"},
		{"deleted", `{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"DELETE","url":"Patient/p1"}}]}` + "\n", "Bundle", true, 1, ""},
		{"deleted PUT", `{"resourceType":"Bundle","entry":[{"request":{"method":"PUT","url":"Patient/p1"}}]}` + "\n", "Bundle", true, 0, "src line 1: deleted Bundle entry without request DELETE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := newStage(t.TempDir(), 256)
			if err != nil {
				t.Fatal(err)
			}
			n, err := st.copyNDJSON(strings.NewReader(tc.in), "src", tc.typ, tc.deleted)
			if tc.err != "" {
				if !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "SECRETNAME") {
					t.Fatalf("err = %v; want ErrServer containing %q and no content", err, tc.err)
				}
				return
			}
			if err != nil || n != tc.n {
				t.Fatalf("n, err = %d, %v; want %d", n, err, tc.n)
			}
			if err := st.finish(time.Unix(0, 0), "req"); err != nil {
				t.Fatal(err)
			}
			var m Manifest
			b, _ := os.ReadFile(filepath.Join(st.dir, ManifestName))
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			files := m.Output
			if tc.deleted {
				files = m.Deleted
				if st.deleted != 1 {
					t.Fatalf("deleted = %d", st.deleted)
				}
			}
			if len(files) != 1 || files[0].Count != tc.n {
				t.Fatalf("manifest %+v", m)
			}
			staged, _ := os.ReadFile(filepath.Join(st.dir, files[0].URL))
			if lines := bytes.Count(staged, []byte("\n")); lines != tc.n {
				t.Fatalf("staged %d lines, want %d", lines, tc.n)
			}
		})
	}
}

// FuzzCopyNDJSON: any input is staged or refused, never a panic, and a
// staged file holds only complete JSON objects, one per line.
func FuzzCopyNDJSON(f *testing.F) {
	f.Add([]byte(`{"resourceType":"Patient","id":"p"}` + "\n"))
	f.Add([]byte(`{"resourceType":"Patient","id":"p"`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		st, err := newStage(t.TempDir(), 1024)
		if err != nil {
			t.Fatal(err)
		}
		n, err := st.copyNDJSON(bytes.NewReader(in), "src", "Patient", false)
		if err != nil {
			return
		}
		b, _ := os.ReadFile(filepath.Join(st.dir, st.m.Output[0].URL))
		lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
		if len(b) == 0 {
			lines = nil
		}
		if len(lines) != n {
			t.Fatalf("%d lines staged, reported %d", len(lines), n)
		}
		for _, l := range lines {
			if !json.Valid(l) || l[0] != '{' {
				t.Fatalf("staged line %q is not a JSON object", l)
			}
		}
	})
}

// TestStateRoundTripAndAtomic: the state written is read back; a file of
// another base is refused; no temporary file is left behind.
func TestStateRoundTripAndAtomic(t *testing.T) {
	dir := t.TempDir()
	base := "https://ehr.example.org/fhir"
	if s, err := ReadState(dir, base); err != nil || !s.Since.IsZero() {
		t.Fatalf("missing state: %+v, %v", s, err)
	}
	want := State{Base: base, Mode: "bulk", Since: time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC), Resources: 7}
	if err := writeState(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadState(dir, base+"/")
	if err != nil || !got.Since.Equal(want.Since) || got.Mode != "bulk" || got.Resources != 7 {
		t.Fatalf("ReadState = %+v, %v", got, err)
	}
	other := "https://other.example.org/fhir"
	os.Rename(statePath(dir, base), statePath(dir, other))
	if _, err := ReadState(dir, other); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("a state of another base: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".sync-state-") {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}

// TestAuditEntry: the records of a sync say what happened, with the base
// as source and the error on failure.
func TestAuditEntry(t *testing.T) {
	p := audit.Principal{Sub: "uid:0", ClientID: "custos"}
	since := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	start := AuditEntry(Event{Phase: "start", Base: "https://ehr/fhir", Since: since}, p, true, []string{"fhir-client=dev:x"})
	if start.Action != ActionSyncStart || start.Outcome != audit.OutcomeAllow || start.Reason != "incremental since=2026-11-24T00:00:00Z" || start.Source != "https://ehr/fhir" || !start.Dev {
		t.Fatalf("start = %+v", start)
	}
	end := AuditEntry(Event{Phase: "end", Base: "https://ehr/fhir", Full: true, Mode: "rest", Resources: 3, Types: map[string]int{"Patient": 1, "Condition": 2},
		Requests: 4, Duration: 1500 * time.Millisecond, Err: errors.New("fhirsync: import failed: x")}, p, false, nil)
	want := "full mode=rest resources=3 deleted=0 requests=4 duration=1.5s types=Condition:2,Patient:1 error: fhirsync: import failed: x"
	if end.Action != ActionSyncEnd || end.Outcome != audit.OutcomeError || end.Reason != want {
		t.Fatalf("end = %s %s %q\nwant reason %q", end.Action, end.Outcome, end.Reason, want)
	}
	long := AuditEntry(Event{Phase: "end", Err: errors.New(strings.Repeat("é", 2000))}, p, false, nil)
	if len(long.Reason) > maxReason+4 || !strings.HasSuffix(long.Reason, "…") {
		t.Fatalf("a long reason is not bounded: %d bytes", len(long.Reason))
	}
}

// TestChooseExport: the kick-off the CapabilityStatement offers, in the
// order Group (when asked) > system > Patient > none (REST).
func TestChooseExport(t *testing.T) {
	cs := func(system bool, resOps map[string]string) capabilityStatement {
		var c capabilityStatement
		b := `{"resourceType":"CapabilityStatement","rest":[{"mode":"server","resource":[`
		first := true
		for _, typ := range []string{"Group", "Observation", "Patient"} {
			if !first {
				b += ","
			}
			first = false
			b += `{"type":"` + typ + `","interaction":[{"code":"read"},{"code":"search-type"}]`
			if def, ok := resOps[typ]; ok {
				b += `,"operation":[{"name":"export","definition":"` + def + `"}]`
			}
			b += `}`
		}
		b += `]`
		if system {
			b += `,"operation":[{"name":"export","definition":"http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export"}]`
		}
		b += `}]}`
		if err := json.Unmarshal([]byte(b), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	const grp, pat = "http://hl7.org/fhir/uv/bulkdata/OperationDefinition/group-export", "http://hl7.org/fhir/uv/bulkdata/OperationDefinition/patient-export"
	for _, tc := range []struct {
		name   string
		cs     capabilityStatement
		group  string
		export string
	}{
		{"system", cs(true, nil), "", "$export"},
		{"group asked and offered", cs(true, map[string]string{"Group": grp}), "g1", "Group/g1/$export"},
		{"group asked, not offered", cs(true, nil), "g1", "$export"},
		{"patient only", cs(false, map[string]string{"Patient": pat}), "", "Patient/$export"},
		{"none", cs(false, nil), "", ""},
	} {
		got, types := chooseExport(tc.cs, tc.group)
		if got != tc.export || strings.Join(types, ",") != "Group,Observation,Patient" {
			t.Errorf("%s: %q %v, want %q and three searchable types", tc.name, got, types, tc.export)
		}
	}
}

// brokenReader yields its data, then a transport error.
type brokenReader struct{ data *strings.Reader }

func (b brokenReader) Read(p []byte) (int, error) {
	if b.data.Len() == 0 {
		return 0, errors.New("connection reset by peer")
	}
	return b.data.Read(p)
}

// TestCopyNDJSONInterrupted: a body that breaks off is errInterrupted (to
// be retried), leaves no file, and the retry reuses the file's number.
func TestCopyNDJSONInterrupted(t *testing.T) {
	st, err := newStage(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	line := `{"resourceType":"Patient","id":"p1"}` + "\n"
	_, err = st.copyNDJSON(brokenReader{strings.NewReader(line + line[:10])}, "src", "Patient", false)
	if !errors.Is(err, errInterrupted) || errors.Is(err, ErrServer) {
		t.Fatalf("err = %v, want errInterrupted", err)
	}
	if entries, _ := os.ReadDir(st.dir); len(entries) != 0 {
		t.Fatalf("left %d files", len(entries))
	}
	n, err := st.copyNDJSON(strings.NewReader(line+line), "src", "Patient", false)
	if err != nil || n != 2 || st.m.Output[0].URL != "Patient.000.ndjson" || st.counts["Patient"] != 2 {
		t.Fatalf("retry: %d, %v, %+v", n, err, st.m.Output)
	}
}

// TestSourceLabel: one label per server, whatever the spelling of its base,
// within the catalog's source alphabet [a-z0-9:._-] and 64 bytes.
func TestSourceLabel(t *testing.T) {
	a, b := SourceLabel("https://EHR.example.org/fhir/R4/"), SourceLabel("https://EHR.example.org/fhir/R4")
	c := SourceLabel("https://ehr.example.org/fhir/R5")
	if a != b || a == c || len(a) > 64 || !strings.HasPrefix(a, "fhir-sync:") {
		t.Fatalf("labels %q %q %q", a, b, c)
	}
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(":._-", r)) {
			t.Fatalf("label %q has %q", a, r)
		}
	}
	if !strings.Contains(statePath("d", "https://EHR.example.org/fhir/R4"), a[len("fhir-sync:"):]) {
		t.Fatal("the label and the state file name differ in their id")
	}
}

// TestStagedRequestNamesTheServer: the importer reads a staged export and
// takes an absolute reference to the synced server's Patient as this
// import's Patient (the staged manifest's request names the server), and
// refuses one to another server's.
func TestStagedRequestNamesTheServer(t *testing.T) {
	base, err := ParseBase("https://ehr.example.org/fhir/R4/")
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		"https://ehr.example.org/fhir/R4/Patient/p1":   "p1",
		"https://other.example.org/fhir/R4/Patient/p1": "",
	} {
		st, err := newStage(t.TempDir(), 1<<10)
		if err != nil {
			t.Fatal(err)
		}
		obs := `{"resourceType":"Observation","id":"o1","status":"final","code":{"text":"x"},"subject":{"reference":"` + ref + `"}}` + "\n"
		if _, err := st.copyNDJSON(strings.NewReader(obs), "src", "Observation", false); err != nil {
			t.Fatal(err)
		}
		if err := st.finish(time.Unix(0, 0), stagedRequest(base)); err != nil {
			t.Fatal(err)
		}
		var got []string
		err = fhirin.Read(context.Background(), filepath.Join(st.dir, ManifestName), fhirin.Options{Link: func(typ, id, patient string) string { return "x" }},
			func(it fhirin.Item) error { got = append(got, it.Patient); return nil })
		if want == "" {
			if !errors.Is(err, fhirin.ErrCompartment) {
				t.Errorf("%s: err = %v, want ErrCompartment", ref, err)
			}
			continue
		}
		if err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("%s: patients %v, err %v; want [%s]", ref, got, err, want)
		}
	}
}

// TestDeletedKey: the Type/id of a deleted file's DELETE entry, however
// its request.url is written; "" for what names no resource.
func TestDeletedKey(t *testing.T) {
	for ref, want := range map[string]string{
		"Observation/o1":                                 "Observation/o1",
		"/Observation/o1":                                "Observation/o1",
		"Observation/o1/_history/3":                      "Observation/o1",
		"https://ehr.example/fhir/Observation/o1":        "Observation/o1",
		"https://ehr.example/fhir/Patient/p1/_history/2": "Patient/p1",
		"Observation/o1?_format=json":                    "Observation/o1",
		"Observation":                                    "",
		"notatype/o1":                                    "",
		"":                                               "",
	} {
		if got := deletedKey(ref); got != want {
			t.Errorf("deletedKey(%q) = %q, want %q", ref, got, want)
		}
	}
}
