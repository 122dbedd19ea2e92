package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit/audittest"
)

// TestAuditorShortRun runs the -auditor scenario small: the log holds the
// prefilled records, each round's verify walks all of them through the
// admin socket and finds the log intact, the clinicians' reads go on
// without error during it, and each has its audit record. The p99 ratio
// is measured, not asserted here.
func TestAuditorShortRun(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	const prefilled = 3000
	rep, err := runAuditor(context.Background(), options{
		Clients: []int{2}, Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond,
		Size: 1024, Resources: 50, PerPatient: 10, Rounds: 2, Mode: modeStateless, DataDir: dataDir,
	}, auditorOptions{Records: prefilled, CPU: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if sum := audittest.Verify(t, filepath.Join(dataDir, "audit.db")); sum.Records < prefilled {
		t.Errorf("the log holds %d records, want at least the %d prefilled", sum.Records, prefilled)
	}
	if !rep.Pass {
		t.Errorf("report did not pass: %+v", rep.Audit)
	}
	if len(rep.VerifyS) != 2 || len(rep.VerifiedRecords) != 2 {
		t.Fatalf("verifications %v / %v, want one per round", rep.VerifyS, rep.VerifiedRecords)
	}
	for i, n := range rep.VerifiedRecords {
		if n < prefilled || rep.VerifyS[i] <= 0 {
			t.Errorf("verify %d walked %d records in %.3f s, want at least %d", i+1, n, rep.VerifyS[i], prefilled)
		}
	}
	for _, r := range []runResult{rep.Quiet, rep.Verifying} {
		if r.Reads == 0 || r.P99ms < r.P50ms || r.TotalErrors != 0 {
			t.Errorf("%s: reads %d, p50 %.2f ms, p99 %.2f ms, errors %d %v", r.Server, r.Reads, r.P50ms, r.P99ms, r.TotalErrors, r.ErrorSamples)
		}
	}
	if rep.Settings.AuditorCPU != 0.5 || rep.Settings.Prefilled != prefilled {
		t.Errorf("settings %+v", rep.Settings)
	}
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{"clinicians' p99 verifying/quiet:", "verify 2:", "auditor CPU share: 0.5", "result: PASS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestAuditorCLI(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		err  string
	}{
		{"two clinician counts", []string{"-auditor", "10", "-clients", "1,2"}, "one -clients value"},
		{"negative share", []string{"-auditor", "10", "-auditor-cpu", "-1"}, "-auditor-cpu"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cli(tt.args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), tt.err) {
				t.Errorf("exit %d, stderr %q; want an error naming %q", code, stderr.String(), tt.err)
			}
		})
	}
}
