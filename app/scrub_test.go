package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/app/admin"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/server/ops"
)

// integrityOptions serve f over loopback HTTP with the ops endpoints, a
// checkpoint after every record, and a scrub pass every second.
func integrityOptions(t *testing.T, f fixture) app.Options {
	return app.Options{
		DataDir: f.data, Dev: true, Node: "test", Version: "test",
		Checkpoints: app.CheckpointOptions{Every: 1, Interval: 20 * time.Millisecond},
		Scrub:       app.ScrubOptions{Interval: time.Second, Rate: 100000},
		HTTP:        &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: f.tokens(t)},
		Ops:         app.OpsOptions{Listen: "127.0.0.1:0"},
	}
}

// serveReads opens an App on o, lists and reads n resources as the
// clinician, and closes it cleanly (a final checkpoint covers every record).
func serveReads(t *testing.T, o app.Options, n int) {
	t.Helper()
	a, err := app.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()
	cs := connectClinician(t, ctx, a)
	page, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: page.Resources[i%len(page.Resources)].URI}); err != nil {
			t.Fatal(err)
		}
	}
	cs.Close()
	cancel()
	<-served
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

func connectClinician(t *testing.T, ctx context.Context, a *app.App) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "integrity-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: a.URL(), HTTPClient: &http.Client{Transport: bearer{"clinician-token"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEditBeforeTheLastAnchorIsFoundByTheScrubber: a record flipped in the
// middle of a stopped server's log, behind the last anchored checkpoint,
// passes the startup checks (they verify only what follows that
// checkpoint) and is found by the scrubber's first pass, which starts with
// the server: /readyz is not ready, naming the seq; the integrity metrics
// say so; reads are refused with a clear error; and an audit/integrity
// record naming the seq is appended to the same log, after the break.
func TestEditBeforeTheLastAnchorIsFoundByTheScrubber(t *testing.T) {
	f := newFixture(t)
	o := integrityOptions(t, f)
	serveReads(t, o, 4)
	path := filepath.Join(f.data, app.AuditFile)
	audittest.Verify(t, path)
	const victim = 3
	audittest.FlipRecord(t, path, victim)

	start := time.Now()
	a, err := app.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open refused an edit behind the last anchor: %v (the scrubber is what finds it)", err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()

	var code int
	var body string
	for deadline := start.Add(o.Scrub.Interval + 5*time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if code, body = get(t, a.OpsURL()+"/readyz"); code == http.StatusServiceUnavailable {
			break
		}
	}
	want := fmt.Sprintf(`"integrity":"audit log broken: hash_mismatch at seq %d"`, victim)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, want) {
		t.Fatalf("readyz = %d %s; want 503 with %s", code, body, want)
	}
	t.Logf("found %v after restart: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(body))

	_, metrics := get(t, a.OpsURL()+"/metrics")
	for _, re := range []string{`(?m)^custos_audit_integrity_ok 0$`, `(?m)^custos_audit_scrub_failures_total [1-9]`, `(?m)^custos_ready_check\{check="integrity"\} 0$`} {
		if !regexp.MustCompile(re).MatchString(metrics) {
			t.Errorf("metrics lack %s", re)
		}
	}

	// Fail closed: a read is refused, saying why.
	cs := connectClinician(t, ctx, a)
	_, err = cs.ListResources(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "integrity") {
		t.Errorf("list after the break: %v; want a refusal naming the integrity check", err)
	}
	cs.Close()

	// Auditors are not locked out: a verification through the admin
	// socket is recorded (after the break, in the same chain) and names
	// the edited record, while reads stay refused.
	ac, err := admin.Dial(ctx, admin.Path(f.data))
	if err != nil {
		t.Fatal(err)
	}
	var vr access.VerifyResult
	res, err := ac.Do(ctx, access.OpVerify, access.VerifyRequest{}, func(r io.Reader) error { return json.NewDecoder(r).Decode(&vr) })
	ac.Close()
	if err != nil || res.AccessSeq == 0 {
		t.Fatalf("audit verify over the admin socket after the break: %v (access seq %d)", err, res.AccessSeq)
	}
	if vr.OK || len(vr.Problems) == 0 || vr.Problems[0].Seq != victim {
		t.Errorf("verify after the break: ok=%v problems=%v; want the edit at seq %d named", vr.OK, vr.Problems, victim)
	}
	cancel()
	<-served
	// The record follows the latch (which refuses releases first).
	var integrity []audit.Record
	var head uint64
	for deadline := time.Now().Add(5 * time.Second); len(integrity) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		head, _ = a.AuditLog().Head()
		err = a.AuditLog().Records(context.Background(), victim+1, head, func(seq uint64, canon []byte) error {
			r, err := audit.Decode(canon)
			if err == nil && r.Action == "audit/integrity" {
				integrity = append(integrity, r)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(integrity) == 0 {
		t.Fatal("no audit/integrity record after the break")
	}
	r := integrity[0]
	if r.Outcome != audit.OutcomeError || !strings.Contains(r.Reason, fmt.Sprintf("kind=hash_mismatch,seq=%d,", victim)) || r.Principal.Sub != "custos" {
		t.Errorf("integrity record: outcome %s reason %q principal %q", r.Outcome, r.Reason, r.Principal.Sub)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// The evidence stays: the chain continued past the break, and the
	// only problems are the edited record's (and the root over it).
	sum, err := audit.VerifyFile(context.Background(), path, func(p audit.Problem) {
		if p.Seq != victim && p.Kind != audit.KindTreeRootMismatch {
			t.Errorf("problem elsewhere than the edited record: %s", p)
		}
	})
	if err != nil || sum.Problems == 0 || sum.HeadSeq != head {
		t.Errorf("verify after: %+v, %v", sum, err)
	}
}

// TestEditAfterTheLastAnchorIsRefusedAtStartup: records appended after the
// last anchored checkpoint (a crash before the next one) are verified at
// startup; intact, the server starts; with one of them edited it refuses
// to start, naming the seq.
func TestEditAfterTheLastAnchorIsRefusedAtStartup(t *testing.T) {
	f := newFixture(t)
	o := integrityOptions(t, f)
	serveReads(t, o, 2)
	path := filepath.Join(f.data, app.AuditFile)

	// Records written after the last checkpoint, as by a server that
	// crashed before anchoring them.
	appendUnanchored := func(n int) (first uint64) {
		l, err := audit.Open(path, audit.Options{Node: "test"})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for i := range n {
			r, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow,
				Reason: "clinician_care_team", Principal: audit.Principal{Sub: "dr-crash"}, PurposeOfUse: "TREAT", Dev: true})
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = r.Seq
			}
		}
		return first
	}

	appendUnanchored(3)
	a, err := app.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open refused an intact unanchored suffix: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	first := appendUnanchored(3)
	victim := first + 1
	audittest.Verify(t, path)
	audittest.FlipRecord(t, path, victim)
	_, err = app.Open(context.Background(), o)
	if err == nil {
		t.Fatal("Open served a log with an edited record after the last anchored checkpoint")
	}
	if !errors.Is(err, audit.ErrCorrupt) || !strings.Contains(err.Error(), "refusing to serve") ||
		!strings.Contains(err.Error(), fmt.Sprintf("seq %d: hash_mismatch", victim)) {
		t.Fatalf("Open = %v; want a refusal naming seq %d", err, victim)
	}
	t.Logf("refusal: %v", err)
}

// TestScrubOptionsChecked: the scrub schedule is validated with the rest.
func TestScrubOptionsChecked(t *testing.T) {
	o := app.Options{DataDir: t.TempDir(), Dev: true, HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", TokensFile: "t.json"},
		Scrub: app.ScrubOptions{Interval: 10 * time.Millisecond, Rate: -5}}
	var got []string
	for _, p := range o.Check(app.CheckOptions{SkipFiles: true}) {
		got = append(got, p.String())
	}
	want := []string{"audit.scrub_interval: must be 1s or more, got 10ms", "audit.scrub_rate: must be 1 or more records per second, got -5"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestIntegrityMetricOnAFirstStart: custos_audit_integrity_ok is 1 from
// the first start of a new deployment (an empty audit log, nothing
// anchored: nothing to verify, nothing broken), and on a restart while the
// log is still empty. It stayed at 0 there until a restart found records
// to verify, so the critical alert CustosAuditIntegrityBroken fired on
// every new, healthy server.
func TestIntegrityMetricOnAFirstStart(t *testing.T) {
	f := newFixture(t)
	o := integrityOptions(t, f)
	o.Scrub.Interval = time.Hour // the first pass runs at startup
	for _, start := range []string{"first start", "restart"} {
		a, err := app.Open(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- a.Serve(ctx) }()
		code, body := get(t, a.OpsURL()+"/readyz")
		_, metrics := get(t, a.OpsURL()+"/metrics")
		cancel()
		<-served
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if code != http.StatusOK {
			t.Fatalf("%s: /readyz %d %s", start, code, body)
		}
		if !regexp.MustCompile(`(?m)^custos_audit_integrity_ok 1$`).MatchString(metrics) {
			t.Errorf("%s: custos_audit_integrity_ok is not 1 on a healthy server:\n%s", start,
				regexp.MustCompile(`(?m)^custos_audit_integrity_ok .*$`).FindString(metrics))
		}
	}
}

// The metric's step labels are the audit log's rollover steps: a step the
// metric did not know would be counted under another name.
func TestSegmentStepsAgree(t *testing.T) {
	want := []string{audit.SegmentSeal, audit.SegmentSealNote, audit.SegmentArchive}
	if strings.Join(ops.SegmentSteps, ",") != strings.Join(want, ",") {
		t.Fatalf("ops.SegmentSteps %q, audit's steps %q", ops.SegmentSteps, want)
	}
}
