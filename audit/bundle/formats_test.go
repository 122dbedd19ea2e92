package bundle

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/custos-mcp/custos/audit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenRecords is one record of each kind: read, list and templates list
// allowed, a denied read, a failed read, actions outside the BALP
// mappings, and an auditor's access to the log.
func goldenRecords() map[string]audit.Record {
	read := testRecord(4, audit.ZeroHash) // seq 4: allow read
	list := testRecord(5, audit.ZeroHash) // seq 5: allow list
	tmpl := testRecord(8, audit.ZeroHash)
	tmpl.Action, tmpl.URIs, tmpl.Patients, tmpl.Digests = audit.ActionResourcesTemplatesList, []string{"phi://patients/{id}/summary"}, nil, nil
	deny := testRecord(6, audit.ZeroHash)
	errRec := testRecord(7, audit.ZeroHash)
	errRec.Source = "stdio"
	other := testRecord(12, audit.ZeroHash)
	other.Action, other.URIs, other.Patients, other.Digests, other.PurposeOfUse = "policy/load", nil, nil, nil, ""
	other.Principal = audit.Principal{Sub: "=cmd|' /C calc'!A0", ClientID: "-custos"}
	other.Dev = true
	// A read of a resource concerning two patients: one event per patient.
	multi := testRecord(16, audit.ZeroHash)
	multi.Patients = append(multi.Patients, "hk1-00000000000000000000000000000099")
	// A request refused before authentication: no principal.
	unauth := testRecord(14, audit.ZeroHash)
	unauth.Action, unauth.Reason, unauth.URIs, unauth.Patients, unauth.Digests = "auth/reject", "http_401,no_token", nil, nil, nil
	unauth.Principal, unauth.PurposeOfUse, unauth.Session, unauth.Source, unauth.DecisionID, unauth.PolicyRevision = audit.Principal{}, "", "", "203.0.113.7:40112", "", ""
	// An aggregate refusal record: N refusals in a window (count, period).
	aggregate := unauth
	aggregate.Seq, aggregate.Source = 17, "203.0.113.7"
	aggregate.Reason = "http_401,no_token,aggregate,count=1931,window=2026-11-21T08:59:00Z/2026-11-21T09:00:00Z"
	// The audit log found broken (OCSF severity Critical).
	integrity := other
	integrity.Seq, integrity.Action, integrity.Outcome, integrity.Reason = 18, "audit/integrity", audit.OutcomeError, "kind=hash_mismatch,seq=42,problems=1,size=90"
	integrity.Principal, integrity.Source, integrity.Dev = audit.Principal{Sub: "custos", Roles: []string{}}, "scrub", false
	// custos's own act (an application agent, not a user) on a URI that
	// did not parse, recorded as "invalid" (no URI identifier system).
	retire := other
	retire.Seq, retire.Action, retire.Outcome, retire.Reason, retire.URIs = 19, "catalog/retire", audit.OutcomeAllow, "retired", []string{"invalid"}
	retire.Principal, retire.Source, retire.Dev, retire.Session, retire.DecisionID = audit.Principal{Sub: "custos", Roles: []string{}}, "", false, "", ""
	// An auditor's access to the log (a DICOM Audit Log Used event, with
	// the audit log as its participant object): a report on one patient.
	logUsed := retire
	logUsed.Seq, logUsed.Action, logUsed.Reason, logUsed.URIs = 20, "audit/report", "by=privacy-officer patient=hk1-00000000000000000000000000000042", nil
	logUsed.Principal, logUsed.PurposeOfUse, logUsed.Source = audit.Principal{Sub: "os:uid=1001(auditor)", Roles: []string{}, ClientID: "custos-cli"}, "HOPERAT", "admin.sock"
	logUsed.Patients, logUsed.Keys = []string{"hk1-00000000000000000000000000000042"}, []string{"audit-hmac=secret/custos/audit-hmac-key@2"}
	// A backup's copy of the log, an Audit Log Used event too.
	backup := logUsed
	backup.Seq, backup.Action, backup.Reason, backup.Patients, backup.Keys = 21, "backup", "by=ops", nil, []string{}
	return map[string]audit.Record{"read": read, "list": list, "templates": tmpl, "deny": deny, "error": errRec, "other": other, "multi": multi, "unauth": unauth,
		"aggregate": aggregate, "integrity": integrity, "retire": retire, "auditlogused": logUsed, "backup": backup}
}

func TestFormatsGolden(t *testing.T) {
	for name, r := range goldenRecords() {
		// Records come from audit.Decode in a bundle: round-trip to set Hash.
		r, err := audit.Decode(audit.Encode(r))
		if err != nil {
			t.Fatal(err)
		}
		events, err := FHIRAuditEvents(r)
		if err != nil {
			t.Fatal(err)
		}
		var fhir []byte
		for _, ev := range events {
			fhir = append(fhir, indent(t, ev)...)
		}
		ocsf, err := OCSFAPIActivity(r)
		if err != nil {
			t.Fatal(err)
		}
		var c bytes.Buffer
		w := csv.NewWriter(&c)
		w.Write(audit.CSVHeader)
		w.Write(CSVRow(r))
		w.Flush()
		for _, g := range []struct {
			file string
			got  []byte
		}{
			{name + ".fhir.json", fhir},
			{name + ".ocsf.json", indent(t, ocsf)},
			{name + ".csv", c.Bytes()},
		} {
			path := filepath.Join("testdata", "golden", g.file)
			if *update {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, g.got, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(g.got, want) {
				t.Errorf("%s differs from golden:\n%s", g.file, g.got)
			}
		}
		// Compact output is one line, no HTML escaping.
		if bytes.ContainsAny(events[0], "\n") || bytes.ContainsAny(ocsf, "\n") {
			t.Errorf("%s: multi-line output", name)
		}
	}
}

// TestFormatMappings checks the coded values that matter to auditors,
// independently of the golden files.
func TestFormatMappings(t *testing.T) {
	type fhirView struct {
		Meta struct {
			Profile []string `json:"profile"`
		} `json:"meta"`
		Type    struct{ Code string }   `json:"type"`
		Subtype []struct{ Code string } `json:"subtype"`
		Action  string                  `json:"action"`
		Outcome string                  `json:"outcome"`
		Agent   []struct {
			Who struct {
				Identifier struct{ Value string } `json:"identifier"`
			} `json:"who"`
			Requestor bool `json:"requestor"`
		} `json:"agent"`
		PurposeOfEvent []struct {
			Coding []struct{ System, Code string } `json:"coding"`
		} `json:"purposeOfEvent"`
		Recorded string `json:"recorded"`
	}
	type ocsfView struct {
		ClassUID    int   `json:"class_uid"`
		CategoryUID int   `json:"category_uid"`
		ActivityID  int   `json:"activity_id"`
		TypeUID     int   `json:"type_uid"`
		Time        int64 `json:"time"`
		StatusID    int   `json:"status_id"`
		Metadata    struct {
			UID      string `json:"uid"`
			Sequence uint64 `json:"sequence"`
			Product  struct{ Name string }
		} `json:"metadata"`
		Actor struct {
			User struct{ UID string } `json:"user"`
		} `json:"actor"`
		API struct{ Operation string } `json:"api"`
	}
	recs := goldenRecords()
	for _, tc := range []struct {
		kind                      string
		profile, typ, sub, action string
		outcome                   string
		activity, status          int
	}{
		{"read", balpPatientRead, "rest", "read", "R", "0", 2, 1},
		{"list", balpPatientQuery, "rest", "search", "E", "0", 2, 1},
		{"templates", balpQuery, "rest", "search", "E", "0", 2, 1},
		{"deny", "", "rest", "read", "R", "4", 2, 2},
		{"error", "", "rest", "read", "R", "8", 2, 2},
		{"other", "", "110100", "", "E", "0", 99, 1},
	} {
		r := recs[tc.kind]
		evs, _ := FHIRAuditEvents(r)
		b := evs[0]
		var f fhirView
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		gotProfile := ""
		if len(f.Meta.Profile) > 0 {
			gotProfile = f.Meta.Profile[0]
		}
		gotSub := ""
		if len(f.Subtype) > 0 {
			gotSub = f.Subtype[0].Code
		}
		if gotProfile != tc.profile || f.Type.Code != tc.typ || gotSub != tc.sub || f.Action != tc.action || f.Outcome != tc.outcome {
			t.Errorf("%s: FHIR profile %q type %q subtype %q action %q outcome %q", tc.kind, gotProfile, f.Type.Code, gotSub, f.Action, f.Outcome)
		}
		if f.Agent[0].Who.Identifier.Value != r.Principal.Sub || !f.Agent[0].Requestor || f.Agent[1].Who.Identifier.Value != r.Principal.ClientID {
			t.Errorf("%s: FHIR agents %+v", tc.kind, f.Agent)
		}
		if r.PurposeOfUse != "" && (len(f.PurposeOfEvent) != 1 || f.PurposeOfEvent[0].Coding[0].Code != r.PurposeOfUse || f.PurposeOfEvent[0].Coding[0].System != fhirActReason) {
			t.Errorf("%s: purposeOfEvent %+v", tc.kind, f.PurposeOfEvent)
		}
		if f.Recorded != r.Time.Format(audit.TimeLayout) {
			t.Errorf("%s: recorded %s", tc.kind, f.Recorded)
		}
		b, _ = OCSFAPIActivity(r)
		var o ocsfView
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatal(err)
		}
		if o.ClassUID != 6003 || o.CategoryUID != 6 || o.ActivityID != tc.activity || o.TypeUID != 600300+tc.activity || o.StatusID != tc.status ||
			o.Time != r.Time.UnixMilli() || o.Metadata.UID != r.EventID || o.Metadata.Sequence != r.Seq || o.Metadata.Product.Name != "custos" ||
			o.Actor.User.UID != r.Principal.Sub || o.API.Operation != r.Action {
			t.Errorf("%s: OCSF %+v", tc.kind, o)
		}
	}
	// CSV neutralizes formulas.
	row := CSVRow(recs["other"])
	if row[8] != "'=cmd|' /C calc'!A0" || row[10] != "'-custos" {
		t.Errorf("CSV injection not neutralized: %q %q", row[8], row[10])
	}
	if len(row) != len(audit.CSVHeader) {
		t.Errorf("CSV row has %d cells, header %d", len(row), len(audit.CSVHeader))
	}
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// TestFHIRStringRules pins how record text is made a FHIR string or code.
func TestFHIRStringRules(t *testing.T) {
	for _, tc := range []struct{ in, str, code string }{
		{"TREAT", "TREAT", "TREAT"},
		{"TREAT ", "TREAT ", "TREAT"},
		{" a\tb\r\nc ", " a\tb\r\nc ", "a b c"},
		{"dr\u00a0ada", "dr ada", "dr ada"},
		{"山田\u3000太郎", "山田 太郎", "山田 太郎"},
		{"\ufeffbom", " bom", "bom"},
		{"x\u2028y\u2029z", "x y z", "x y z"},
		{"ctl\x01\x7f\u0085", "ctl\ufffd\ufffd\ufffd", "ctl\ufffd\ufffd\ufffd"},
		{"bad\xffutf8", "bad\ufffdutf8", "bad\ufffdutf8"},
		{" ", "", ""},
		{"\u00a0\u3000\ufeff", "", ""},
		{"", "", ""},
	} {
		if got := fhirString(tc.in); got != tc.str {
			t.Errorf("fhirString(%q) = %q, want %q", tc.in, got, tc.str)
		}
		if got := fhirCode(tc.in); got != tc.code {
			t.Errorf("fhirCode(%q) = %q, want %q", tc.in, got, tc.code)
		}
	}
	if got := fhirRequired(" \u00a0"); got != "\ufffd" {
		t.Errorf("fhirRequired of blanks = %q", got)
	}
	long := strings.Repeat("é", maxFHIRString) // twice the limit in bytes
	got := fhirString(long)
	if len(got) > 1<<20 || !utf8.ValidString(got) || !strings.HasSuffix(got, " [truncated]") {
		t.Errorf("a long string: %d bytes, valid UTF-8 %v, suffix %q", len(got), utf8.ValidString(got), got[len(got)-12:])
	}
}

// TestBundleCSVShowsFormatControls: the bundle's audit.csv writes a bidi
// control or another invisible format character as the text of its
// escape (audit.CSVCell), as 'audit export --format csv' does; the FHIR
// and OCSF renderings are JSON and unchanged (the previous version's,
// byte for byte). Until h-audit12 audit.csv kept each as stored, so a
// client id holding a right-to-left override displayed reversed.
func TestBundleCSVShowsFormatControls(t *testing.T) {
	_, recs := namedRecords(t, "bidi.tsv")
	r := recs[0].r
	b, err := FormatCSV.render(r)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(rows) != 1 || len(rows[0]) != len(audit.CSVHeader) {
		t.Fatalf("audit.csv row does not parse: %v\n%s", err, b)
	}
	for _, cell := range rows[0] {
		if strings.ContainsFunc(cell, func(r rune) bool { return unicode.Is(unicode.Cf, r) }) {
			t.Errorf("cell %q holds a format character as it is", cell)
		}
	}
	if want := `\u202aclaude\u202c\u202bdesktop\u202c\u202dx\u202c`; !slices.Contains(rows[0], want) {
		t.Errorf("no cell %q in %q", want, rows[0])
	}
	jsonAsBefore(t, r, renderer311e1f4, rendererBf44145)
}

// TestBundleCSVShowsLineControls: the bundle's audit.csv writes a control
// character (ESC, C1's CSI and NEL, a vertical tab, NUL) and a line or
// paragraph separator as the text of its escape (audit.CSVCell), as
// 'audit export --format csv' does; the FHIR and OCSF renderings are
// unchanged (the previous version's, byte for byte). Until h-review48
// audit.csv kept each as stored: an escape sequence that rewrote a
// terminal, a line break no CSV reader saw.
func TestBundleCSVShowsLineControls(t *testing.T) {
	_, recs := namedRecords(t, "controls.tsv")
	r := recs[0].r
	b, err := FormatCSV.render(r)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(bytes.TrimSuffix(b, []byte("\n")), func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }); i >= 0 {
		t.Errorf("audit.csv holds a control character or a separator as it is at byte %d:\n%q", i, b)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(rows) != 1 || len(rows[0]) != len(audit.CSVHeader) {
		t.Fatalf("audit.csv row does not parse: %v\n%s", err, b)
	}
	if want := `claude\u2028desktop`; !slices.Contains(rows[0], want) {
		t.Errorf("no cell %q in %q", want, rows[0])
	}
	jsonAsBefore(t, r, rendererBf44145, renderer486663c)
}

// jsonAsBefore checks that the FHIR and OCSF renderings of r by the
// version after, which changed the CSV's rules, are those of the version
// before it, byte for byte: a change of the CSV's rules changed no JSON.
func jsonAsBefore(t *testing.T, r audit.Record, before, after renderer) {
	t.Helper()
	for _, f := range []Format{FormatFHIR, FormatOCSF} {
		got, err := f.renderAs(r, after)
		if err != nil {
			t.Fatal(err)
		}
		if prev, _ := f.renderAs(r, before); !bytes.Equal(got, prev) {
			t.Errorf("%s rendering changed:\n got %s\nwant %s", f, got, prev)
		}
	}
}
