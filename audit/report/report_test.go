package report

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/custos-mcp/custos/audit"
)

var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

func rec(seq uint64, sub, action, outcome, purpose string, patients ...string) audit.Record {
	r := audit.Record{V: audit.FormatVersion, Seq: seq, EventID: "e", Time: t0.Add(time.Duration(seq) * time.Hour), Node: "n"}
	r.Action, r.Outcome, r.PurposeOfUse = action, outcome, purpose
	r.Principal = audit.Principal{Sub: sub, Roles: []string{"clinician"}, ClientID: "c"}
	r.Patients = patients
	r.URIs = []string{}
	for _, p := range patients {
		r.URIs = append(r.URIs, "note://t/patients/"+p+"/notes/x")
	}
	r.Digests, r.Obligations, r.Keys = []string{}, []string{}, []string{}
	r.PrevHash = audit.ZeroHash
	return r
}

// sliceSource serves encoded records (the pure part of a log).
type sliceSource [][]byte

func (s sliceSource) Records(_ context.Context, from, to uint64, fn func(uint64, []byte) error) error {
	for i, b := range s {
		seq := uint64(i + 1)
		if seq < from || (to != 0 && seq > to) {
			continue
		}
		if err := fn(seq, b); err != nil {
			return err
		}
	}
	return nil
}

func fixture() (sliceSource, []audit.Record) {
	recs := []audit.Record{
		rec(1, "dr-a", "resources/read", audit.OutcomeAllow, "TREAT", "hk1-p1"),
		rec(2, "dr-b", "resources/read", audit.OutcomeDeny, "TREAT", "hk1-p1"),
		rec(3, "res-c", "resources/read", audit.OutcomeAllow, "HRESCH", "hk1-p1"),
		rec(4, "dr-a", "resources/read", audit.OutcomeAllow, "ETREAT", "hk1-p2"),
		rec(5, "res-c", "resources/list", audit.OutcomeAllow, "HRESCH", "hk1-p1", "hk1-p2"),
		rec(6, "bill-d", "resources/read", audit.OutcomeAllow, "HPAYMT", "hk1-p1"),
		rec(7, "lawyer-e", "resources/read", audit.OutcomeAllow, "HLEGAL", "hk1-p1"),
	}
	var src sliceSource
	for _, r := range recs {
		src = append(src, audit.Encode(r))
	}
	return src, recs
}

func TestQueries(t *testing.T) {
	src, _ := fixture()
	for _, tc := range []struct {
		name string
		q    Query
		want []uint64
	}{
		{"everything", Query{}, []uint64{1, 2, 3, 4, 5, 6, 7}},
		{"patient incl. denials", Query{Patients: []string{"hk1-p1", "hk1-old-version"}}, []uint64{1, 2, 3, 5, 6, 7}},
		{"accounting of disclosures", Query{Patients: []string{"hk1-p1"}, Disclosures: true}, []uint64{3, 7}},
		{"user", Query{User: "dr-a"}, []uint64{1, 4}},
		{"denials", Query{Denials: true}, []uint64{2}},
		{"break-glass", Query{BreakGlass: true}, []uint64{4}},
		{"since/until", Query{Since: t0.Add(2 * time.Hour), Until: t0.Add(5 * time.Hour)}, []uint64{2, 3, 4}},
		{"patient and user", Query{Patients: []string{"hk1-p2"}, User: "res-c"}, []uint64{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Run(context.Background(), src, tc.q, uint64(len(src)), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, r := range rep.Rows {
				got = append(got, r.Seq)
			}
			if len(got) != len(tc.want) || !equal(got, tc.want) {
				t.Fatalf("rows %v, want %v", got, tc.want)
			}
			if rep.Scanned != uint64(len(src)) {
				t.Fatalf("scanned %d", rep.Scanned)
			}
			for _, r := range rep.Rows {
				for _, u := range r.Resources {
					if len(tc.q.Patients) > 0 && !strings.Contains(u, "/"+tc.q.Patients[0]+"/") && !strings.Contains(u, "/"+tc.q.Patients[len(tc.q.Patients)-1]+"/") {
						t.Errorf("row %d shows another patient's resource %s", r.Seq, u)
					}
				}
			}
		})
	}
}

func equal(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func TestRenderingsAndDamagedRecord(t *testing.T) {
	src, _ := fixture()
	rep, err := Run(context.Background(), src, Query{Patients: []string{"hk1-p1"}, PatientLabel: "hk1-p1", Disclosures: true}, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tb, js bytes.Buffer
	if err := rep.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"accounting of disclosures", "patient hk1-p1", "2 of 7 records match", "lawyer-e", "HLEGAL"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	if err := rep.WriteJSON(&js); err != nil || !strings.Contains(js.String(), `"seq": 7`) {
		t.Errorf("json: %v\n%s", err, js.String())
	}
	src[3] = append([]byte(nil), src[3][:len(src[3])-1]...) // damaged record 4
	if _, err := Run(context.Background(), src, Query{}, 7, nil); err == nil || !strings.Contains(err.Error(), "record 4") {
		t.Fatalf("damaged record: %v", err)
	}
}

// TestKeyVersionsAreStated: a patient report names the audit key versions
// it searched, and a gap the operator accepted is stated in both
// renderings.
func TestKeyVersionsAreStated(t *testing.T) {
	src, _ := fixture()
	rep, err := Run(context.Background(), src, Query{Patients: []string{"hk1-p1"}, PatientLabel: "hk1-p1"}, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep.KeyVersions = &KeyVersions{Searched: []string{"secret/k@5", "secret/k@4", "secret/k@1"},
		NotSearched: []KeyProblem{{"secret/k@3", "deleted in Vault"}, {"secret/k@2", "destroyed in Vault"}}, GapAccepted: true}
	var tb, js bytes.Buffer
	rep.WriteTable(&tb)
	for _, want := range []string{"audit key versions searched: secret/k@5, secret/k@4, secret/k@1\n",
		"NOT searched: secret/k@2 (destroyed in Vault)", "GAP ACCEPTED", "MISSING from this answer"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	rep.WriteJSON(&js)
	var got struct {
		KeyVersions KeyVersions `json:"key_versions"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil || len(got.KeyVersions.Searched) != 3 ||
		len(got.KeyVersions.NotSearched) != 2 || !got.KeyVersions.GapAccepted {
		t.Fatalf("json key versions: %+v %v\n%s", got, err, js.String())
	}
}

// TestTableIsPlainText: a principal, a client, a reason or a URI may hold
// anything a token issuer, an OAuth client or a policy error wrote. The
// table a privacy officer reads in a terminal shows each record on its own
// line with its own cells: control characters (a newline forging a row, a
// tab shifting columns, a terminal escape sequence rewriting the screen),
// invisible format characters (bidi overrides) and non-ASCII spaces are
// shown escaped, never written raw.
func TestTableIsPlainText(t *testing.T) {
	hostile := []string{
		"dr-x\n99\t2026-11-01 09:00:00\tdr-a\tclinician\tc\tTREAT\tresources/read\tallow\tok",
		"\x1b]52;c;ZXZpbA==\x07\x1b[2J", "a\u202eevil", "b\u2028c", "nb\u00a0sp", "del\x7f", "c1\u0085", "bad\xffutf8",
	}
	var src sliceSource
	for i, h := range hostile {
		r := rec(uint64(i+1), h, "resources/read", audit.OutcomeDeny, "TREAT", "hk1-p1")
		r.Principal.Roles = []string{h}
		r.Principal.ClientID = h
		r.Reason = h
		r.URIs = []string{"note://t/patients/hk1-p1/notes/" + h}
		src = append(src, audit.Encode(r))
	}
	rep, err := Run(context.Background(), src, Query{User: hostile[0], Denials: true}, uint64(len(src)), nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := Run(context.Background(), src, Query{Denials: true}, uint64(len(src)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, rep := range []Report{rep, all} {
		var tb bytes.Buffer
		if err := rep.WriteTable(&tb); err != nil {
			t.Fatal(err)
		}
		text := tb.String()
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		if want := 4 + len(rep.Rows); len(lines) != want {
			t.Errorf("%d lines for %d rows, want %d (a cell broke its line):\n%s", len(lines), len(rep.Rows), want, text)
		}
		if !utf8.ValidString(text) {
			t.Errorf("the output is not UTF-8: %q", text)
		}
		for i, r := range []rune(text) {
			if r != '\n' && !unicode.IsPrint(r) {
				t.Errorf("the table holds %U at rune %d:\n%q", r, i, text)
				break
			}
		}
	}
}

// TestJSONListsAreNeverNull: a record's empty lists (a principal with no
// roles, a list page that named no resource, a denial with no obligation)
// are [] in the JSON report, as in the record, never null: a reader that
// iterates .roles[] or .resources[] (jq) would fail on null. Probing
// `custos audit report --user SUB --json` over a log of a principal with
// "roles": [] gave "roles": null on all 411 of its rows.
func TestJSONListsAreNeverNull(t *testing.T) {
	r := rec(1, "dr-empty", "resources/list", audit.OutcomeAllow, "TREAT")
	r.Principal.Roles = []string{}
	r.Reason = "nothing_visible returned=0 denied=0 scanned=0"
	// A record naming the patient in no URI (an auditor's access record):
	// its row in a patient report has no resources, [] too.
	r2 := rec(2, "auditor", "audit/report", audit.OutcomeAllow, "PATRQT", "hk1-p1")
	r2.URIs, r2.Principal.Roles = []string{}, []string{}
	src := sliceSource{audit.Encode(r), audit.Encode(r2)}
	for _, q := range []Query{{}, {Patients: []string{"hk1-p1"}}, {User: "dr-empty"}} {
		rep, err := Run(context.Background(), src, q, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		var js bytes.Buffer
		if err := rep.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Rows []map[string]json.RawMessage `json:"rows"`
		}
		if err := json.Unmarshal(js.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		for _, row := range got.Rows {
			for _, k := range []string{"roles", "resources", "obligations"} {
				if string(row[k]) != "[]" {
					t.Errorf("query %+v: row %s %s = %s, want []", q, row["seq"], k, row[k])
				}
			}
		}
	}
}

// TestEmptyReportListsArePresent: every list of the JSON report is
// present, [] when empty, never omitted or null: a patient report that
// matched nothing has "tenants": [] and "rows": [], a report without
// --patient "tenants": [] too, and key_versions its "not_searched": []
// when every version was searched, also once the report has gone through
// the admin socket (decoded, then written again, as the CLI does). Before,
// "tenants" was omitted from an empty patient report (omitempty) and
// "not_searched" from every report that searched all versions.
func TestEmptyReportListsArePresent(t *testing.T) {
	src, _ := fixture()
	for name, q := range map[string]Query{"patient": {Patients: []string{"hk1-nobody"}, PatientLabel: "hk1-nobody"}, "user": {User: "nobody"}} {
		rep, err := Run(context.Background(), src, q, 7, nil)
		if err != nil {
			t.Fatal(err)
		}
		rep.KeyVersions = &KeyVersions{Searched: []string{"secret/k@1"}}
		var js bytes.Buffer
		if err := rep.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		// Through the admin socket: decoded, then written again.
		var again Report
		if err := json.Unmarshal(js.Bytes(), &again); err != nil {
			t.Fatal(err)
		}
		var js2 bytes.Buffer
		if err := again.WriteJSON(&js2); err != nil {
			t.Fatal(err)
		}
		for _, out := range []*bytes.Buffer{&js, &js2} {
			var got struct {
				Tenants     json.RawMessage `json:"tenants"`
				Rows        json.RawMessage `json:"rows"`
				KeyVersions struct {
					NotSearched json.RawMessage `json:"not_searched"`
				} `json:"key_versions"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			for field, v := range map[string]json.RawMessage{"tenants": got.Tenants, "rows": got.Rows, "key_versions.not_searched": got.KeyVersions.NotSearched} {
				if string(v) != "[]" {
					t.Errorf("%s report: %s = %q, want []:\n%s", name, field, v, out)
				}
			}
		}
	}
}

// TestBreakGlassIsNotReadInAQuotedValue: since h-edge3 a refusal's reason
// holds the caller's tenant and the session owner's sub, tenant and client,
// Go-quoted; "btg" or "break_glass" there is a token's claim, not a grant.
func TestBreakGlassIsNotReadInAQuotedValue(t *testing.T) {
	tests := []struct {
		reason string
		want   bool
	}{
		{`http_403,insufficient_scope,tenant="btg-clinic"`, false},
		{`http_403,session_mismatch,tenant="t",owner_sub="robtgreen"`, false},
		{`http_403,cross_origin,tenant="a\"break_glass"`, false},
		{`allow break_glass,grant=0f3c`, true},
		{`allow x="q" break_glass,grant=0f3c`, true},
		{`btg grant="x"`, false}, // no mark of custos's: "btg", and grant= of no id
		{`unclosed "break_glass`, true},
	}
	for _, tt := range tests {
		r := rec(1, "dr-a", "auth/reject", audit.OutcomeDeny, "TREAT")
		r.Reason = tt.reason
		if got := IsBreakGlass(r); got != tt.want {
			t.Errorf("IsBreakGlass(reason %q) = %v, want %v", tt.reason, got, tt.want)
		}
	}
}

// TestBreakGlassIsAMarkNotASubstring: a record is a break-the-glass access
// by the marks custos writes (purpose ETREAT, an action btg/*, the reason
// field break_glass or grant=<id>), not because "btg" is somewhere in its
// reason: a signing key's id in a policy/load, a policy's reason, a
// retired resource's name counted as emergency accesses.
func TestBreakGlassIsAMarkNotASubstring(t *testing.T) {
	tests := []struct {
		action, purpose, reason string
		want                    bool
	}{
		{"policy/load", "", "candidate=sha256:0f3c sequence=4 key=btg-2026", false},
		{"resources/read", "TREAT", "care,unit=rbtgw", false},
		{"resources/read", "TREAT", "no_break_glass_grant", false},
		{"catalog/retire", "", "retired btg-17", false},
		{"resources/list", "TREAT", "returned=2 denied=0 scanned=2", false},
		{"resources/read", "TREAT", "break_glass,grant=0f3c", true},
		{"resources/read", "TREAT", "break_glass,grant=0f3c,page=2", true},
		{"resources/list", "TREAT", "returned=3 denied=0 scanned=3 grant=0f3c", true},
		{"complete", "TREAT", "argument=id returned=1 denied=0 scanned=1 grant=0f3c", true},
		{"btg/grant", "", "grant=0f3c grantee=dr-a tenant=t1", true},
		{"resources/read", "ETREAT", "denied", true},
	}
	for _, tt := range tests {
		r := rec(1, "dr-a", tt.action, audit.OutcomeAllow, tt.purpose)
		r.Reason = tt.reason
		if got := IsBreakGlass(r); got != tt.want {
			t.Errorf("IsBreakGlass(%s, purpose %q, reason %q) = %v, want %v", tt.action, tt.purpose, tt.reason, got, tt.want)
		}
	}
}

// TestAuditorAccessIsNotBreakGlass: an auditor's access record reads the
// audit log, not a patient's records, and its reason names what the
// auditor asked: "break_glass" for 'audit report --break-glass' itself,
// "user=robtgreen" for a user report, "by=btg.reviewer" for whom the
// operator acts (--by). Found by h-review52 with the real
// binary: each run of 'custos audit report --break-glass' listed its own
// access record, and every earlier run's, as an emergency access
// ("allow [BREAK-GLASS]  break_glass", user os:uid=0(root)).
func TestAuditorAccessIsNotBreakGlass(t *testing.T) {
	tests := []struct {
		action, purpose, reason string
	}{
		{"audit/report", "HOPERAT", "break_glass"},
		{"audit/report", "HOPERAT", "user=robtgreen"},
		{"audit/report", "ETREAT", "denials"},
		{"audit/export", "HOPERAT", "format=csv"},
		{"audit/verify", "HOPERAT", "by=btg.reviewer"},
		{"compliance/report", "HOPERAT", "by=ticket:btg-7"},
		{"backup", "HOPERAT", "by=btg.reviewer"},
	}
	for _, tt := range tests {
		r := rec(1, "os:uid=0(root)", tt.action, audit.OutcomeAllow, tt.purpose)
		r.Reason = tt.reason
		if IsBreakGlass(r) {
			t.Errorf("IsBreakGlass(%s, purpose %s, reason %q) = true: an auditor's read of the log is no emergency access", tt.action, tt.purpose, tt.reason)
		}
	}
	if !(Query{BreakGlass: true}).Match(rec(2, "dr-a", "resources/read", audit.OutcomeAllow, "ETREAT", "p1")) {
		t.Error("an ETREAT read is no longer a break-glass access")
	}
}
