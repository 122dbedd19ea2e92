package impact_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/policy/impact"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var (
	key      = bytes.Repeat([]byte{7}, 32)
	pA       = audit.Pseudonym(key, "7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01")
	pB       = audit.Pseudonym(key, "0c6e2b7d-5a44-4d39-8f0f-9b1e7c3a2d02")
	start    = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	hospital = "general-hospital"
)

func principal(sub, role string, patients ...string) policy.Principal {
	return policy.Principal{Sub: sub, Roles: []string{role}, ClientID: "assistant", Tenant: hospital, Patients: append([]string{}, patients...)}
}

func read(p policy.Principal, purpose, typ, patient string) policy.Input {
	scheme, seg := "fhir", typ
	switch typ {
	case "note", "report", "image":
		scheme, seg = typ, typ+"s"
	}
	return policy.Input{Principal: p, PurposeOfUse: purpose, Action: policy.ActionRead, Resource: &policy.Resource{
		URI:  scheme + "://" + hospital + "/patients/" + patient + "/" + seg + "/3f0c8a2e-6b1d-4c5e-9a7f-1e2d3c4b5a69",
		Type: typ, Patient: patient, Tenant: hospital, Sensitivity: []string{}, Consent: []string{},
	}}
}

// decision is one request the test log records.
type decision struct {
	in       policy.Input
	notFound bool
}

// traffic is what the test log records, one decision per hour from start.
var traffic = []decision{
	{in: read(principal("dr.alice", "clinician", pA), "TREAT", "observation", pA)},                                               // 1 allow
	{in: read(principal("bob.billing", "billing"), "HPAYMT", "coverage", pA)},                                                    // 2 allow, billing obligations
	{in: read(principal("rita.research", "researcher"), "HRESCH", "observation", pB)},                                            // 3 allow, research obligations
	{in: read(principal("dr.alice", "clinician", pA), "TREAT", "observation", pB)},                                               // 4 deny: no care relationship
	{in: read(principal("olga.outsider", "clinician"), "TREAT", "observation", pB)},                                              // 5 deny
	{in: policy.Input{Principal: principal("dr.alice", "clinician", pA), PurposeOfUse: "TREAT", Action: policy.ActionTemplates}}, // 6 allow
	{in: read(principal("bob.billing", "billing"), "HPAYMT", "coverage", pB), notFound: true},                                    // 7 deny not_found
	{in: read(principal("rita.research", "researcher"), "HRESCH", "report", pB)},                                                 // 8 deny: type not permitted
	{}, // 9 a list: no input
}

// newLog writes traffic to a real audit log, decided by the default policy
// and recorded as the server records it, and returns it opened read-only.
func newLog(t *testing.T) *audit.Log {
	t.Helper()
	return logOf(t, traffic)
}

// logOf writes decisions to a real audit log as newLog does.
func logOf(t *testing.T, traffic []decision) *audit.Log {
	t.Helper()
	ctx := context.Background()
	n := 0
	log, path := audittest.Open(t, audit.Options{Node: "test", Now: func() time.Time { n++; return start.Add(time.Duration(n-1) * time.Hour) }})
	eng := engine(t, dirFS(t, "testdata/baseline"))
	for _, tr := range traffic {
		e := audit.Entry{Outcome: audit.OutcomeAllow, Action: "resources/list", Reason: "returned=0 denied=0 scanned=0", Principal: audit.Principal{Sub: "dr.alice"}}
		if tr.in.Action != "" {
			d, err := eng.Decide(ctx, tr.in)
			if err != nil {
				t.Fatal(err)
			}
			e = audit.Entry{Action: "resources/read", Outcome: audit.OutcomeDeny, Reason: strings.Join(d.Reasons, ","),
				Principal: audit.Principal{Sub: tr.in.Principal.Sub, Roles: tr.in.Principal.Roles}, PurposeOfUse: tr.in.PurposeOfUse}
			if tr.in.Action == policy.ActionTemplates {
				e.Action = "resources/templates/list"
			}
			if d.Allow {
				e.Outcome = audit.OutcomeAllow
				for _, o := range d.Obligations {
					e.Obligations = append(e.Obligations, o.String())
				}
			}
			if tr.notFound {
				e.Outcome, e.Reason = audit.OutcomeDeny, "not_found"
			}
			if e.Input, err = json.Marshal(tr.in); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := log.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	return audittest.OpenPath(t, path, audit.Options{ReadOnly: true})
}

func engine(t *testing.T, fsys fs.FS) *policy.Engine {
	t.Helper()
	e, err := policy.Load(context.Background(), fsys, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The recorded policy of these tests is testdata/baseline, a frozen copy of
// the default policy (so that the expectations do not follow later policy
// changes); candidates are testdata/candidate and variants of the baseline.

// variant is the baseline policy with each old text replaced by new.
func variant(t *testing.T, repl ...string) fstest.MapFS {
	t.Helper()
	src, err := os.ReadFile("testdata/baseline/custos/authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for i := 0; i < len(repl); i += 2 {
		if !strings.Contains(s, repl[i]) {
			t.Fatalf("the default policy no longer contains %q", repl[i])
		}
		s = strings.Replace(s, repl[i], repl[i+1], 1)
	}
	return fstest.MapFS{"custos/authz.rego": {Data: []byte(s)}}
}

func dirFS(t *testing.T, dir string) fstest.MapFS {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "custos", "authz.rego"))
	if err != nil {
		t.Fatal(err)
	}
	return fstest.MapFS{"custos/authz.rego": {Data: b}}
}

func TestReplay(t *testing.T) {
	log := newLog(t)
	cases := []struct {
		name      string
		candidate fs.FS
		opts      impact.Options
		want      impact.Counts
		rows      map[uint64]impact.Change
		replayed  int
	}{
		{
			name:      "same policy changes nothing",
			candidate: dirFS(t, "testdata/baseline"),
			want:      impact.Counts{Unchanged: 8},
			replayed:  8,
		},
		{
			name:      "candidate denies billing and keeps research notes",
			candidate: dirFS(t, "testdata/candidate"),
			want:      impact.Counts{AllowToDeny: 1, ObligationsChanged: 1, Unchanged: 6},
			rows:      map[uint64]impact.Change{2: impact.ChangeAllowToDeny, 3: impact.ChangeObligations},
			replayed:  8,
		},
		{
			name: "candidate drops the care relationship",
			candidate: variant(t, "care_relationship if {\n\tinput.resource.patient != \"\"\n\tinput.resource.patient in input.principal.patients\n}",
				"care_relationship if input.resource.patient != \"\""),
			// The outsider is a clinician too; the not-found read stays not found.
			want:     impact.Counts{DenyToAllow: 2, Unchanged: 6},
			rows:     map[uint64]impact.Change{4: impact.ChangeDenyToAllow, 5: impact.ChangeDenyToAllow},
			replayed: 8,
		},
		{
			name:      "candidate that fails for research is a denial",
			candidate: variant(t, "default decision :=", "decision := {\"allow\": true} if input.purpose_of_use == \"HRESCH\"\n\ndefault decision :="),
			want:      impact.Counts{AllowToDeny: 0, ReplayError: 2, Unchanged: 6},
			rows:      map[uint64]impact.Change{3: impact.ChangeReplayError, 8: impact.ChangeReplayError},
			replayed:  8,
		},
		{
			name: "binary resources allowed with obligations stay denied",
			candidate: variant(t, "\"encounter\": research_clinical_obligations,\n}",
				"\"encounter\": research_clinical_obligations,\n\t\"report\": research_clinical_obligations,\n}"),
			want:     impact.Counts{Unchanged: 8},
			replayed: 8,
		},
		{
			name:      "time range",
			candidate: dirFS(t, "testdata/candidate"),
			opts:      impact.Options{Since: start.Add(2 * time.Hour), Until: start.Add(5 * time.Hour)}, // seqs 3, 4, 5
			want:      impact.Counts{ObligationsChanged: 1, Unchanged: 2},
			rows:      map[uint64]impact.Change{3: impact.ChangeObligations},
			replayed:  3,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := impact.Replay(context.Background(), engine(t, c.candidate), log, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Counts != c.want || rep.Replayed != c.replayed {
				t.Errorf("counts %+v (replayed %d), want %+v (replayed %d)", rep.Counts, rep.Replayed, c.want, c.replayed)
			}
			if len(rep.Rows) != len(c.rows) {
				t.Errorf("%d rows, want %d: %+v", len(rep.Rows), len(c.rows), rep.Rows)
			}
			for _, r := range rep.Rows {
				if c.rows[r.Seq] != r.Change {
					t.Errorf("row %d: %s, want %s", r.Seq, r.Change, c.rows[r.Seq])
				}
				if r.Change == impact.ChangeReplayError && (r.After != impact.Deny || r.Error == "") {
					t.Errorf("row %d: replay error rendered as %s %q", r.Seq, r.After, r.Error)
				}
			}
			if c.opts.Since.IsZero() && rep.Skipped != 1 {
				t.Errorf("skipped %d, want the list record", rep.Skipped)
			}
		})
	}
}

// TestReportGolden pins both renderings of one report.
func TestReportGolden(t *testing.T) {
	log := newLog(t)
	rep, err := impact.Replay(context.Background(), engine(t, dirFS(t, "testdata/candidate")), log, impact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var table, js bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/report.txt", table.Bytes())
	golden(t, "testdata/report.json", js.Bytes())
	for _, b := range [][]byte{table.Bytes(), js.Bytes()} {
		for _, p := range []string{pA, pB} {
			if bytes.Contains(b, []byte(p)) {
				t.Error("the report names a patient")
			}
		}
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update to accept):\n%s", path, got)
	}
}

// A record that does not decode, or an input that is not a policy input,
// stops the replay.
type badSource struct{ log *audit.Log }

func (b badSource) Head() (uint64, string) { return b.log.Head() }
func (b badSource) Records(ctx context.Context, from, to uint64, fn func(uint64, []byte) error) error {
	return b.log.Records(ctx, from, to, fn)
}
func (b badSource) Inputs(ctx context.Context, from, to uint64, fn func(uint64, []byte) error) error {
	return b.log.Inputs(ctx, from, to, func(seq uint64, _ []byte) error { return fn(seq, []byte(`[1]`)) })
}

// TestReplayAppliesTheTenantBoundary: the server denies a resource of
// another tenant whatever the policy says (policy.Enforce), so a candidate
// that forgets the tenant check changes nothing a replay can show; before,
// the report counted the recorded cross-tenant denial as deny → allow, an
// exposure the server would never have allowed.
func TestReplayAppliesTheTenantBoundary(t *testing.T) {
	other := read(principal("dr.alice", "clinician", pA), "TREAT", "observation", pA)
	other.Resource.Tenant = "other-clinic"
	other.Resource.URI = strings.Replace(other.Resource.URI, hospital, "other-clinic", 1)
	tenantless := read(principal("dr.alice", "clinician", pA), "TREAT", "observation", pA)
	tenantless.Principal.Tenant = ""
	log := logOf(t, []decision{{in: other}, {in: tenantless}, {in: read(principal("dr.alice", "clinician", pA), "TREAT", "observation", pA)}})
	candidate := variant(t, "resource_denies contains \"tenant_mismatch\" if {\n\thas_resource\n\tnot same_tenant\n}", "")
	rep, err := impact.Replay(context.Background(), engine(t, candidate), log, impact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (impact.Counts{Unchanged: 3}); rep.Counts != want || len(rep.Rows) != 0 {
		t.Errorf("counts %+v, rows %+v; want %+v: the server's tenant boundary denies both whatever the candidate says", rep.Counts, rep.Rows, want)
	}
}

func TestReplayStopsOnBadInput(t *testing.T) {
	_, err := impact.Replay(context.Background(), engine(t, dirFS(t, "testdata/baseline")), badSource{newLog(t)}, impact.Options{})
	if !errors.Is(err, impact.ErrRecord) {
		t.Fatalf("Replay = %v, want ErrRecord", err)
	}
}

// TestTableIsPlainText: the table shows the records' text (a user, a
// purpose, a candidate policy's reasons and error) with its non-printable
// characters escaped, so that a principal holding a newline cannot forge a
// row, nor an escape sequence reach the security team's terminal.
func TestTableIsPlainText(t *testing.T) {
	hostile := "dr-a\n9\t2026-01-01 00:00:00\tforged\x1b]52;c;Zm9v\x07\u202e"
	rep := &impact.Report{Rows: []impact.Row{{
		Seq: 7, Time: time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC), User: hostile, PurposeOfUse: "TREAT\r",
		ResourceType: "note", Change: impact.ChangeReplayError, Before: impact.Allow, After: impact.Deny,
		ReasonsBefore: []string{"care\u200b_team"}, ReasonsAfter: []string{"x\ny"}, Error: "eval: \x1b[2J" + hostile,
	}}}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if got := strings.Count(out, "\n"); got != 7 {
		t.Errorf("%d lines, want 7 (header 3, blank, column heads, one row, one error line):\n%s", got, out)
	}
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e", "\u200b", "\t"} {
		if strings.Contains(out, bad) {
			t.Errorf("the table holds %q:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, `dr-a\n9\t2026`) || !strings.Contains(out, `\x1b[2J`) {
		t.Errorf("the hostile text is not shown escaped:\n%s", out)
	}
}

// TestReplayProgress: Replay reports the records examined of the head,
// never going back, and ends at its total when it succeeds, also when it
// stops early at --until (records are in time order: those after it are
// not read); the report is the same with or without progress.
func TestReplayProgress(t *testing.T) {
	const n = 2500 // windows of 1024: --until stops in the first
	ctx := context.Background()
	i := 0
	log, _ := audittest.Open(t, audit.Options{Node: "test", Now: func() time.Time { i++; return start.Add(time.Duration(i) * time.Second) }})
	for range n {
		if _, err := log.Append(ctx, audit.Entry{Action: "resources/list", Outcome: audit.OutcomeAllow, Principal: audit.Principal{Sub: "dr.alice"}}); err != nil {
			t.Fatal(err)
		}
	}
	eng := engine(t, dirFS(t, "testdata/baseline"))
	for _, opts := range []impact.Options{{}, {Until: start.Add(100 * time.Second)}, {Since: start.Add(2000 * time.Second)}} {
		plain, err := impact.Replay(ctx, eng, log, opts)
		if err != nil {
			t.Fatal(err)
		}
		type report struct{ done, total int }
		var ps []report
		opts.Progress = func(done, total int) { ps = append(ps, report{done, total}) }
		watched, err := impact.Replay(ctx, eng, log, opts)
		if err != nil {
			t.Fatal(err)
		}
		if pj, wj := mustJSON(t, plain), mustJSON(t, watched); !bytes.Equal(pj, wj) {
			t.Fatalf("until %v: the report with progress differs:\n%s\nwithout:\n%s", opts.Until, wj, pj)
		}
		if len(ps) == 0 {
			t.Fatalf("until %v: no progress", opts.Until)
		}
		for k, p := range ps {
			if p.total != n || p.done > p.total || (k > 0 && p.done < ps[k-1].done) {
				t.Fatalf("until %v: report %d is %+v (of %+v)", opts.Until, k, p, ps)
			}
		}
		if last := ps[len(ps)-1]; last.done != last.total {
			t.Fatalf("until %v: the last report %+v does not reach its total (%+v)", opts.Until, last, ps)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
