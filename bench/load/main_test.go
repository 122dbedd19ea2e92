package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit/audittest"
)

// TestHarnessShortRun runs the whole harness briefly with 2 clients: both
// servers must serve reads without error, and custos's audit log must hold
// exactly one verified resources/read allow record per read it served.
func TestHarnessShortRun(t *testing.T) {
	for _, mode := range []string{modeStateless, modeStateful} {
		t.Run(mode, func(t *testing.T) { testShortRun(t, mode) })
	}
}

func testShortRun(t *testing.T, mode string) {
	dataDir := filepath.Join(t.TempDir(), "data")
	memProfile := filepath.Join(t.TempDir(), "allocs.prof")
	rep, err := run(context.Background(), options{
		Clients: []int{2}, Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond,
		Size: 4096, Resources: 50, PerPatient: 10, Rounds: 2, Mode: mode, DataDir: dataDir,
		MemProfile: memProfile,
	})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(memProfile); err != nil || fi.Size() == 0 {
		t.Errorf("-memprofile: %v (want a non-empty allocation profile)", err)
	}
	// The harness verifies its own log (rep.Audit below); this check of the
	// file it left does not depend on the harness reporting truthfully.
	if sum := audittest.Verify(t, filepath.Join(dataDir, "audit.db")); sum.Records == 0 {
		t.Error("the harness left an empty audit log")
	}
	if want := protocolVersion(mode == modeStateless); rep.Settings.Protocol != want {
		t.Errorf("protocol %q, want %q", rep.Settings.Protocol, want)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].Server != "bare" || rep.Runs[1].Server != "custos" {
		t.Fatalf("runs = %+v, want bare then custos", rep.Runs)
	}
	for _, r := range rep.Runs {
		if r.Reads == 0 || r.ReadsPerSec <= 0 || r.P50ms <= 0 || r.P99ms < r.P50ms {
			t.Errorf("%s: reads %d, %.1f/s, p50 %.2f ms, p99 %.2f ms: want reads and ordered percentiles", r.Server, r.Reads, r.ReadsPerSec, r.P50ms, r.P99ms)
		}
		if r.TotalErrors != 0 {
			t.Errorf("%s: %d errors: %v", r.Server, r.TotalErrors, r.ErrorSamples)
		}
	}
	a := rep.Audit
	if !a.Verified || a.Problems != 0 {
		t.Errorf("audit log did not verify: %+v", a)
	}
	if a.ReadsServed != rep.Runs[1].TotalReads || a.ReadsServed == 0 {
		t.Errorf("reads served %d, custos run total %d", a.ReadsServed, rep.Runs[1].TotalReads)
	}
	if a.ReadAllow != uint64(a.ReadsServed) || a.Records != uint64(a.ReadsServed) || !a.Match {
		t.Errorf("audit: %d records, %d read allow records for %d reads served (match %v): want one record per read", a.Records, a.ReadAllow, a.ReadsServed, a.Match)
	}
	if g := rep.Runs[1].AuditRecords; g == nil || *g != uint64(rep.Runs[1].TotalReads) {
		t.Errorf("audit head growth during the custos run = %v, want %d", g, rep.Runs[1].TotalReads)
	}
	if c, g := rep.Runs[1].AuditCommits, rep.Runs[1].AuditRecords; c == nil || g == nil || *c == 0 || *c > *g {
		t.Errorf("audit commits during the custos run = %v for %v records, want between 1 and the records", c, g)
	}
	// custos's own histograms saw exactly the measured reads (a slice ends
	// when its clients have their answers, which custos observes before it
	// sends them), one audit append and one policy decision each, and a
	// handler's time holds its append's.
	if m := rep.Runs[1].Own; m == nil {
		t.Error("custos run without its own means (ops metrics)")
	} else {
		n := uint64(rep.Runs[1].Reads)
		if m.Reads != n || m.AuditAppends != n || m.PolicyEvals != n {
			t.Errorf("ops metrics counted %d reads, %d audit appends, %d policy decisions for %d measured reads", m.Reads, m.AuditAppends, m.PolicyEvals, n)
		}
		if m.PolicyMs <= 0 || m.AuditAppendMs <= 0 || m.ReadMs < m.AuditAppendMs || m.ReadMs > rep.Runs[1].MaxMs {
			t.Errorf("own means %+v: want 0 < policy, 0 < audit append <= read <= the slowest read seen by a client (%v ms)", m, rep.Runs[1].MaxMs)
		}
	}
	if rep.Runs[0].Own != nil {
		t.Errorf("bare run has custos's own means: %+v", rep.Runs[0].Own)
	}
	for _, r := range rep.Runs {
		// A read over TLS and JSON-RPC allocates at least its 4 KiB note
		// (encoded and decoded), and far less than 100 MB.
		if r.AllocKBPerRead < 4 || r.AllocKBPerRead > 100_000 {
			t.Errorf("%s: allocated %v KB per read", r.Server, r.AllocKBPerRead)
		}
	}
	if rep.Settings.Patients != 5 {
		t.Errorf("patients = %d, want 5 (50 notes, 10 per patient)", rep.Settings.Patients)
	}
	if len(rep.Compare) != 1 || rep.Compare[0].ThroughputRatio <= 0 || rep.Compare[0].P99Ratio <= 0 {
		t.Errorf("comparison = %+v, want positive ratios", rep.Compare)
	}
	if runtime.GOOS == "linux" {
		for _, r := range rep.Runs {
			// A read costs CPU: at least a TLS round trip and a JSON-RPC
			// exchange, far more than a microsecond, far less than a second.
			if r.CPUPerReadMs < 0.001 || r.CPUPerReadMs > 1000 {
				t.Errorf("%s: CPU per read %v ms", r.Server, r.CPUPerReadMs)
			}
			if r.IdleGCPerReadMs < 0 {
				t.Errorf("%s: idle GC per read %v ms", r.Server, r.IdleGCPerReadMs)
			}
		}
		if len(rep.Compare) == 1 && rep.Compare[0].CPURatio <= 0 {
			t.Errorf("comparison = %+v, want a CPU-per-read ratio", rep.Compare[0])
		}
	}

	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{"custos/bare: throughput", "cpu/read", "idle-gc", "alloc/read", "audit records/commit", "custos's own means (ops metrics)", "every served read has its record", "clients  server"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestCLI(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"bad clients", []string{"-clients", "8,x"}, 2, "-clients"},
		{"zero clients", []string{"-clients", "0"}, 2, "-clients"},
		{"bad mode", []string{"-mode", "sse"}, 2, "-mode"},
		{"bad size", []string{"-size", "0"}, 2, "-size"},
		{"bad rounds", []string{"-rounds", "0"}, 2, "-rounds"},
		{"bad notes per patient", []string{"-notes-per-patient", "0"}, 2, "-notes-per-patient"},
		{"extra args", []string{"now"}, 2, "unexpected arguments"},
		{"help", []string{"-h"}, 0, "usage: go run ./bench/load"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cli(tt.args, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.err) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.err)
			}
		})
	}
}

// TestCLIJSON runs the command end to end with -json -check on a non-empty
// -data directory (refused) and on a fresh one.
func TestCLIJSON(t *testing.T) {
	busy := t.TempDir()
	if err := os.WriteFile(filepath.Join(busy, "audit.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := cli([]string{"-data", busy, "-clients", "1"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "not empty") {
		t.Fatalf("non-empty -data: exit %d, stderr %q; want 1 and a refusal", code, stderr.String())
	}

	stdout.Reset()
	stderr.Reset()
	code := cli([]string{"-json", "-clients", "1", "-duration", "200ms", "-warmup", "0s", "-resources", "20", "-size", "512"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr.String())
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%s", err, stdout.String())
	}
	if len(rep.Runs) != 2 || rep.Runs[1].Reads == 0 || !rep.Audit.Match || rep.Settings.Size != 512 {
		t.Errorf("report = %+v", rep)
	}
}

func TestQuantile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		q    float64
		in   []time.Duration
		want time.Duration
	}{
		{0.50, d, 50 * time.Millisecond},
		{0.99, d, 99 * time.Millisecond},
		{1.00, d, 100 * time.Millisecond},
		{0.01, d, 1 * time.Millisecond},
		{0.99, d[:1], 1 * time.Millisecond},
		{0.50, nil, 0},
	}
	for _, tt := range tests {
		if got := quantile(tt.in, tt.q); got != tt.want {
			t.Errorf("quantile(%d values, %g) = %v, want %v", len(tt.in), tt.q, got, tt.want)
		}
	}
}

func TestCompareTargets(t *testing.T) {
	bare := runResult{Clients: 64, ReadsPerSec: 1000, P99ms: 100}
	tests := []struct {
		name  string
		bare  runResult
		cust  runResult
		pass  []bool
		ratio float64
	}{
		{"64 pass", bare, runResult{Clients: 64, Reads: 1, ReadsPerSec: 800, P99ms: 150}, []bool{true, true}, 0.8},
		{"64 slow", bare, runResult{Clients: 64, Reads: 1, ReadsPerSec: 799, P99ms: 151}, []bool{false, false}, 0.799},
		{"8 pass", runResult{Clients: 8, ReadsPerSec: 1000, P99ms: 10}, runResult{Clients: 8, Reads: 1, ReadsPerSec: 900, P99ms: 15}, []bool{true, true}, 0.9},
		{"8 p99 over", runResult{Clients: 8, ReadsPerSec: 1000, P99ms: 10}, runResult{Clients: 8, Reads: 1, ReadsPerSec: 900, P99ms: 15.1}, []bool{true, false}, 0.9},
		{"8 no reads", runResult{Clients: 8, ReadsPerSec: 1000, P99ms: 10}, runResult{Clients: 8}, []bool{false, false}, 0},
		{"1 pass", runResult{Clients: 1, Reads: 1, ReadsPerSec: 1000, P50ms: 0.5}, runResult{Clients: 1, Reads: 1, ReadsPerSec: 600, P50ms: 1.5}, []bool{true}, 0.6},
		{"1 fail", runResult{Clients: 1, Reads: 1, ReadsPerSec: 1000, P50ms: 0.5}, runResult{Clients: 1, Reads: 1, ReadsPerSec: 600, P50ms: 1.6}, []bool{false}, 0.6},
		{"2 no target", runResult{Clients: 2, ReadsPerSec: 10, P99ms: 1}, runResult{Clients: 2, Reads: 1, ReadsPerSec: 5, P99ms: 2}, nil, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compare(tt.bare, tt.cust)
			if len(c.Checks) != len(tt.pass) {
				t.Fatalf("checks = %+v, want %d", c.Checks, len(tt.pass))
			}
			for i, ch := range c.Checks {
				if ch.Pass != tt.pass[i] {
					t.Errorf("%s = %.3f: pass %v, want %v", ch.Name, ch.Value, ch.Pass, tt.pass[i])
				}
			}
			if d := c.ThroughputRatio - tt.ratio; d > 1e-9 || d < -1e-9 {
				t.Errorf("throughput ratio %v, want %v", c.ThroughputRatio, tt.ratio)
			}
		})
	}
}

func TestNoteText(t *testing.T) {
	for _, size := range []int{1, 100, 4096, 10000} {
		s := noteText(7, size)
		if len(s) != size || !strings.HasSuffix(s, "\n") {
			t.Errorf("noteText(7, %d): %d bytes, want %d ending in a newline", size, len(s), size)
		}
	}
	a, b := newDataset(25, 64, 10), newDataset(25, 64, 10)
	if len(a.uris) != 25 || len(a.patients) != 3 || a.uris[24] != b.uris[24] || a.contents[3] == a.contents[4] {
		t.Errorf("dataset not deterministic or not distinct: %d uris, %d patients", len(a.uris), len(a.patients))
	}
}

func TestProfilePath(t *testing.T) {
	if got := profilePath("/tmp/c.prof", 64, true); got != "/tmp/c-c64.prof" {
		t.Errorf("got %q", got)
	}
	if got := profilePath("/tmp/c.prof", 64, false); got != "/tmp/c.prof" {
		t.Errorf("got %q", got)
	}
}
