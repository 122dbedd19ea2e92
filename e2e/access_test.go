package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/policy/impact"
)

// TestAuditorCommandsNextToARunningServer runs every auditor command
// (verify, verify --anchor-dir, export jsonl and csv, export bundle and
// verify --bundle, report, prove, hash, policy impact, compliance report)
// against a running `custos serve` while go-sdk clients read through it,
// then again on the stopped server's files. Each run must be consistent
// (the exports are exactly a prefix that ends at their own access record,
// the bundles verify, the proof checks) and must leave exactly one access
// record with its action and purpose, in the same verified chain
// (docs/audit-access.md).
func TestAuditorCommandsNextToARunningServer(t *testing.T) {
	auditorCommandsNextToARunningServer(t)
}

// TestAuditorCommandsSpanSealedSegments is the same with a tiny roll size
// (64 KiB, tens of records): the log rolls over again and again under the
// load and while the commands run, and every command (verify, export,
// bundle, report, prove, hash, policy impact, compliance report) spans
// the sealed segments and the live one, against the running server and on
// the stopped server's files.
func TestAuditorCommandsSpanSealedSegments(t *testing.T) {
	data := auditorCommandsNextToARunningServer(t, "--audit-roll-size", "65536")
	sealed, _ := filepath.Glob(filepath.Join(audit.SealedDir(filepath.Join(data, "audit.db")), "*.db"))
	notes, _ := filepath.Glob(filepath.Join(audit.SealedDir(filepath.Join(data, "audit.db")), "*.seal"))
	if len(sealed) < 3 || len(notes) != len(sealed) {
		t.Fatalf("%d sealed segments, %d seal notes; want 3 or more, one note each", len(sealed), len(notes))
	}
	t.Logf("%d sealed segments", len(sealed))
	for _, f := range sealed {
		if _, err := audit.VerifySegment(context.Background(), f, func(p audit.Problem) { t.Errorf("%s alone: %s", filepath.Base(f), p) }); err != nil {
			t.Error(err)
		}
	}
}

// principal is the sub and the patients of a principal file.
type principal struct {
	Sub      string   `json:"sub"`
	Patients []string `json:"patients"`
}

// principalOf reads the principal file of role in d; it must name patients.
func principalOf(t *testing.T, d *dataset, role string) principal {
	t.Helper()
	var p principal
	raw, err := os.ReadFile(d.principal(role))
	if err == nil {
		err = json.Unmarshal(raw, &p)
	}
	if err != nil || len(p.Patients) == 0 {
		t.Fatalf("%s principal: %v (%d patients)", role, err, len(p.Patients))
	}
	return p
}

// auditorCommandsNextToARunningServer runs the test above with extra serve
// arguments and returns the data directory.
func auditorCommandsNextToARunningServer(t *testing.T, serveArgs ...string) string {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	anchor := t.TempDir()
	tok := newToken(t, d.principal("clinician"), tokens)
	clin := principalOf(t, d, "clinician")
	vkeys := filepath.Join(t.TempDir(), "vkeys")

	s := serve(t, d, nil, append([]string{"--dev", "--listen", loopback, "--tokens", tokens,
		"--anchor-dir", anchor, "--checkpoint-interval", "50ms", "--node", "e2e",
		"--rate-limit", "0"}, serveArgs...)...) // the load is one principal reading as fast as it can

	mustCustos(t, "audit", "pubkey", "--data-dir", d.data, "--dev", "--origin", "custos.local/e2e/audit", "-o", vkeys)

	// Load: four go-sdk clients read in a loop until the commands are done.
	reads, stopLoad := readUnderLoad(t, s.url, tok, 4)
	waitFor(t, func() bool { return reads.Load() >= 40 })

	runAll := func(mode string) map[string]int {
		t.Helper()
		dir := t.TempDir()
		want := map[string]int{}
		ran := func(action, purpose string) { want[action+" "+purpose]++ }

		var v struct {
			OK      bool          `json:"ok"`
			Summary audit.Summary `json:"summary"`
		}
		out := mustCustos(t, "audit", "verify", "--data-dir", d.data, "--json")
		if err := json.Unmarshal([]byte(out), &v); err != nil || !v.OK || v.Summary.Records == 0 {
			t.Fatalf("%s: verify: %v %s", mode, err, out)
		}
		ran("audit/verify", "HOPERAT")
		if out := mustCustos(t, "audit", "verify", "--data-dir", d.data, "--anchor-dir", anchor, "--pubkey", vkeys, "--purpose", "HSYSADMIN"); !strings.Contains(out, "OK: consistent with") {
			t.Fatalf("%s: verify --anchor-dir: %s", mode, out)
		}
		ran("audit/verify", "HSYSADMIN")

		// JSONL: exactly records 1..N, N being this export's access record.
		jsonl := mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--by", "e2e-auditor", "--format", "jsonl")
		lines := strings.Split(strings.TrimSpace(jsonl), "\n")
		for i, l := range lines {
			r, err := audit.Decode([]byte(l))
			if err != nil || r.Seq != uint64(i+1) {
				t.Fatalf("%s: export line %d: seq %d, %v", mode, i+1, r.Seq, err)
			}
			if i == len(lines)-1 && (r.Action != "audit/export" || r.Reason != "by=e2e-auditor format=jsonl" || !strings.HasPrefix(r.Principal.Sub, "os:uid=")) {
				t.Fatalf("%s: the export does not end at its own access record: %+v", mode, r)
			}
		}
		ran("audit/export", "HOPERAT")
		csv := mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "csv")
		rows := strings.Split(strings.TrimSpace(csv), "\n")
		if len(rows) < len(lines)+2 || !strings.Contains(rows[len(rows)-1], ",audit/export,") {
			t.Fatalf("%s: csv export: %d rows after a %d-line jsonl export; last %q", mode, len(rows), len(lines), rows[len(rows)-1])
		}
		ran("audit/export", "HOPERAT")

		// A bundle, verified offline.
		bdir := filepath.Join(dir, "bundle")
		mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--out", bdir)
		ran("audit/export", "HOPERAT")
		if tr := mustCustos(t, "audit", "verify", "--bundle", bdir, "--pubkey", vkeys); !strings.Contains(tr, "VERIFIED") {
			t.Fatalf("%s: bundle does not verify:\n%s", mode, tr)
		}
		var m bundle.Manifest
		b, _ := os.ReadFile(filepath.Join(bdir, bundle.FileManifest))
		if err := json.Unmarshal(b, &m); err != nil || m.From != 1 || m.To == 0 || uint64(m.Upper) != m.To {
			t.Fatalf("%s: manifest %+v: %v", mode, m, err)
		}

		// Reports.
		var rep struct {
			Rows []struct {
				User    string `json:"user"`
				Outcome string `json:"outcome"`
			} `json:"rows"`
		}
		out = mustCustos(t, "audit", "report", "--data-dir", d.data, "--dev", "--purpose", "HOPERAT", "--user", clin.Sub, "--json")
		if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Rows) == 0 {
			t.Fatalf("%s: report --user: %v\n%s", mode, err, out)
		}
		for _, r := range rep.Rows {
			if r.User != clin.Sub {
				t.Fatalf("%s: report --user %s has a row of %s", mode, clin.Sub, r.User)
			}
		}
		ran("audit/report", "HOPERAT")
		mustCustos(t, "audit", "report", "--data-dir", d.data, "--dev", "--purpose", "PATRQT", "--patient", clin.Patients[0], "--disclosures")
		ran("audit/report", "PATRQT")

		// An inclusion proof that checks against the verifier keys.
		out = mustCustos(t, "audit", "prove", "--data-dir", d.data, "--purpose", "HOPERAT", "--seq", "2", "--json")
		in, err := bundle.ParseInclusion([]byte(out))
		keys, _ := os.ReadFile(vkeys)
		if err != nil || bundle.CheckInclusion(in, []byte(lines[1]), keys) != nil {
			t.Fatalf("%s: prove: %v\n%s", mode, err, out)
		}
		ran("audit/prove", "HOPERAT")

		if h := mustCustos(t, "audit", "hash", clin.Patients[0], "--dev", "--purpose", "PATRQT", "--data-dir", d.data); !strings.HasPrefix(h, "hk1-") {
			t.Fatalf("%s: hash printed %q", mode, h)
		}
		ran("audit/hash", "PATRQT")

		var imp impact.Report
		out = mustCustos(t, "policy", "impact", "--data-dir", d.data, "--purpose", "HOPERAT", "--candidate", "../policy/impact/testdata/candidate", "--json")
		if err := json.Unmarshal([]byte(out), &imp); err != nil || imp.Replayed == 0 || imp.Examined < uint64(len(lines)) {
			t.Fatalf("%s: policy impact: %v\n%s", mode, err, out)
		}
		ran("policy/impact", "HOPERAT")

		// The compliance package: its bundle verifies offline and ends at
		// the latest checkpoint of size at most its own access record's
		// seq N. Records after that checkpoint (the access record among
		// them) are named as not covered; a checkpoint signed right at N
		// covers them all.
		pkg := filepath.Join(dir, "package")
		var cp struct {
			Verified       bool `json:"verified"`
			NothingDeleted bool `json:"nothing_deleted"`
			Bundle         struct {
				From, To   uint64
				NotCovered *struct{ From, To uint64 } `json:"not_covered"`
			}
		}
		out = mustCustos(t, "compliance", "report", "--data-dir", d.data, "--anchor-dir", anchor, "--pubkey", vkeys,
			"--purpose", "HOPERAT", "--by", "e2e-auditor", "--out", pkg, "--json")
		if err := json.Unmarshal([]byte(out), &cp); err != nil || !cp.Verified || !cp.NothingDeleted || cp.Bundle.From != 1 {
			t.Fatalf("%s: compliance report: %v\n%s", mode, err, out)
		}
		if tr := mustCustos(t, "audit", "verify", "--bundle", filepath.Join(pkg, "bundle"), "--pubkey", vkeys); !strings.Contains(tr, "VERIFIED") {
			t.Fatalf("%s: the package's bundle does not verify:\n%s", mode, tr)
		}
		recs := bundleRecords(t, filepath.Join(pkg, "bundle", "records.jsonl"))
		last := recs[len(recs)-1]
		if nc := cp.Bundle.NotCovered; last.Seq != cp.Bundle.To || (nc != nil && nc.From != last.Seq+1) ||
			(nc == nil && (last.Action != "compliance/report" || !strings.HasPrefix(last.Reason, "by=e2e-auditor"))) {
			t.Fatalf("%s: the package's bundle ends at %+v, not covered %+v", mode, last, nc)
		}
		ran("compliance/report", "HOPERAT")
		return want
	}

	before := reads.Load()
	live := runAll("running server")
	// Clinicians' reads go on while the auditor works (a failed read fails
	// the test in readUnderLoad).
	if n := reads.Load() - before; n == 0 {
		t.Errorf("no read completed while the auditor commands ran (%d before them)", before)
	}
	stopLoad()
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}
	t.Logf("%d reads by 4 clients, %d of them while the commands ran", reads.Load(), reads.Load()-before)
	stopped := runAll("stopped server")

	// Exactly one access record per command, with its action and purpose,
	// from the socket while serving and from the command itself after.
	sum := audittest.Verify(t, d.audit())
	got := map[string]map[string]int{"admin.sock": {}, "local": {}}
	l, err := audit.Open(d.audit(), audit.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = l.Records(context.Background(), 1, sum.HeadSeq, func(_ uint64, c []byte) error {
		r, err := audit.Decode(c)
		if err != nil {
			return err
		}
		if r.Principal.ClientID == "custos-cli" {
			if got[r.Source] == nil {
				return fmt.Errorf("access record from source %q", r.Source)
			}
			got[r.Source][r.Action+" "+r.PurposeOfUse]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]map[string]int{"admin.sock": live, "local": stopped} {
		if fmt.Sprint(got[src]) != fmt.Sprint(want) {
			t.Errorf("access records through %s: %v, want %v", src, got[src], want)
		}
	}
	return d.data
}

// waitFor waits up to 20 s for cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// readUnderLoad starts n go-sdk clients that read the resources they list,
// in a loop, through the server at url until stop is called (stop waits for
// them). reads counts the reads done; a failed read fails the test.
func readUnderLoad(t *testing.T, url, tok string, n int) (reads *atomic.Int64, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reads = new(atomic.Int64)
	var wg sync.WaitGroup
	for i := range n {
		cs := connect(t, url, tok)
		page, err := cs.ListResources(ctx, nil)
		if err != nil || len(page.Resources) == 0 {
			t.Fatalf("list: %v", err)
		}
		wg.Go(func() {
			defer cs.Close()
			for j := i; ctx.Err() == nil; j++ {
				_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: page.Resources[j%len(page.Resources)].URI})
				if err != nil && ctx.Err() == nil {
					t.Errorf("read under load: %v", err)
					return
				}
				reads.Add(1)
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return reads, func() { cancel(); wg.Wait() }
}
