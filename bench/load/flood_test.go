package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit/audittest"
)

// TestMain runs the flood process when the harness starts this test binary
// as one (runFlood re-executes its own program).
func TestMain(m *testing.M) {
	if cfg, ok := os.LookupEnv(floodChildEnv); ok {
		os.Exit(floodChild(cfg, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestFloodShortRun runs the -flood scenario small: a separate flood
// process sends unauthenticated requests from 8 source addresses; every one
// is refused (401, then 429 beyond the per-source limit) and on record, one
// by one or counted in an aggregate; the audit volume grows by the few
// records that costs; the clinician's reads go on without error, and each
// has its audit record. The p99 ratio is measured, not asserted here.
func TestFloodShortRun(t *testing.T) {
	const requests, sources = 600, 8
	dataDir := filepath.Join(t.TempDir(), "data")
	procs, cpus := runtime.GOMAXPROCS(0), allowedCPUs()
	rep, err := runFlood(context.Background(), options{
		Clients: []int{1}, Duration: 400 * time.Millisecond, Warmup: 50 * time.Millisecond,
		Size: 1024, Resources: 50, PerPatient: 10, Rounds: 2, Mode: modeStateless, DataDir: dataDir,
		Flood: &floodOptions{Requests: requests, Sources: sources, Workers: 4, Pin: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum := audittest.Verify(t, filepath.Join(dataDir, "audit.db")); sum.Records == 0 {
		t.Error("the scenario left an empty audit log")
	}
	// On Linux with two CPUs or more, custos ran on the first and the flood
	// process on the others; afterwards this process may use all of them
	// again.
	s := rep.Settings
	if runtime.GOOS == "linux" && len(cpus) >= 2 {
		if !s.Pinned || !slices.Equal(s.ServerCPUs, cpus[:1]) || !slices.Equal(s.FloodCPUs, cpus[1:]) || !slices.Equal(s.FloodRanOn, cpus[1:]) {
			t.Errorf("pinned %v: custos on %v, flood on %v (it reports %v); want %v and %v", s.Pinned, s.ServerCPUs, s.FloodCPUs, s.FloodRanOn, cpus[:1], cpus[1:])
		}
	}
	if got := allowedCPUs(); !slices.Equal(got, cpus) || runtime.GOMAXPROCS(0) != procs {
		t.Errorf("after the run: CPUs %v, GOMAXPROCS %d; want %v and %d as before", got, runtime.GOMAXPROCS(0), cpus, procs)
	}
	v := rep.Volume
	// 30 failures per source are answered 401, the rest 429.
	perSource := rep.Settings.PerSource
	if v.Answers["401"] != sources*perSource || v.Answers["429"] != requests-sources*perSource {
		t.Errorf("volume phase answers %v, want %d × 401 and %d × 429", v.Answers, sources*perSource, requests-sources*perSource)
	}
	// Request k comes from source k mod 8 with a forged token if k is odd,
	// so each source refuses one kind (no token, or a forged one): its
	// first refusal on its own, then one aggregate counting the rest, the
	// 429s included.
	if v.Rejects != 2*sources || v.Aggregates != sources || v.Accounted != requests || v.Aggregated != requests-sources {
		t.Errorf("auth/reject records %d (%d aggregates counting %d), accounting for %d: want %d, %d counting %d, all %d",
			v.Rejects, v.Aggregates, v.Aggregated, v.Accounted, 2*sources, sources, requests-sources, requests)
	}
	if v.Growth <= 0 || v.Growth >= targetFloodVolume || v.UsedAfter != v.UsedBefore+v.Growth || v.FilesAfter < v.FilesBefore {
		t.Errorf("volume %d → %d bytes (growth %d), files %d → %d", v.UsedBefore, v.UsedAfter, v.Growth, v.FilesBefore, v.FilesAfter)
	}
	if v.ServerCPUPerRefusalUs <= 0 {
		t.Errorf("custos CPU per refused request %v µs, want a measurement", v.ServerCPUPerRefusalUs)
	}
	l := rep.Latency
	if l.Answers["401"]+l.Answers["429"] != requests {
		t.Errorf("latency phase answers %v, want %d refusals", l.Answers, requests)
	}
	for _, r := range []runResult{l.Unloaded, l.Flooded} {
		if r.Reads == 0 || r.TotalErrors != 0 || r.P99ms < r.P50ms || r.P50ms <= 0 {
			t.Errorf("%s: %d reads, %d errors %v, p50 %.2f ms, p99 %.2f ms", r.Server, r.Reads, r.TotalErrors, r.ErrorSamples, r.P50ms, r.P99ms)
		}
	}
	if l.P99Ratio <= 0 {
		t.Errorf("p99 ratio %v", l.P99Ratio)
	}
	a := rep.Audit
	if !a.Verified || !a.Match || a.ReadsServed != l.Unloaded.TotalReads+l.Flooded.TotalReads || a.ReadAllow != uint64(a.ReadsServed) {
		t.Errorf("audit %+v: want every clinician read on record", a)
	}
	if len(rep.Checks) != 5 {
		t.Errorf("checks %+v", rep.Checks)
	}
	for _, c := range rep.Checks[:4] { // the p99 ratio (the last) depends on the machine
		if !c.Pass {
			t.Errorf("check %s = %v (%s): FAIL", c.Name, c.Value, c.Target)
		}
	}
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{"volume (the flood alone", "accounting for 600 refusals", "unloaded", "flooded", "check: audit volume growth"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFloodCLI(t *testing.T) {
	tests := []struct {
		name string
		args []string
		err  string
	}{
		{"two clinician counts", []string{"-flood", "-clients", "1,2"}, "one -clients value"},
		{"no requests", []string{"-flood", "-flood-requests", "0"}, "-flood-requests"},
		{"negative rate", []string{"-flood", "-flood-rate", "-1"}, "-flood-rate"},
		{"no sources", []string{"-flood", "-flood-sources", "0"}, "-flood-sources"},
		{"no workers", []string{"-flood", "-flood-workers", "0"}, "-flood-workers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cli(tt.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.err) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tt.err)
			}
		})
	}
}

// The flood process refuses a configuration it cannot use and a batch line
// it cannot parse.
func TestFloodChildInput(t *testing.T) {
	var out, errs bytes.Buffer
	if code := floodChild("{}", strings.NewReader(""), &out, &errs); code != 2 {
		t.Errorf("empty configuration: exit %d", code)
	}
	if code := floodChild(`{"sources":1,"workers":1,"ca_pem":"x"}`, strings.NewReader(""), &out, &errs); code != 2 {
		t.Errorf("no certificate: exit %d", code)
	}
	cfg, _, err := tlsSetup()
	if err != nil {
		t.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cfg.Certificates[0].Certificate[0]})
	good, _ := json.Marshal(floodConfig{CAPEM: string(ca), Sources: 1, Workers: 1})
	errs.Reset()
	if code := floodChild(string(good), strings.NewReader("ten https://127.0.0.1:1/mcp\n"), &out, &errs); code != 2 || !strings.Contains(errs.String(), "want a number of requests") {
		t.Errorf("bad batch line: exit %d, stderr %q", code, errs.String())
	}
	if code := floodChild(string(good), strings.NewReader(""), &out, &errs); code != 0 {
		t.Errorf("no batch: exit %d, want 0", code)
	}
}

// TestFloodCLIJSON runs -flood end to end through the command line with
// -json: the report on stdout is the flood report.
func TestFloodCLIJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := cli([]string{"-flood", "-json", "-flood-requests", "200", "-flood-sources", "4", "-flood-workers", "4",
		"-duration", "200ms", "-rounds", "1", "-warmup", "0s", "-resources", "20", "-size", "256"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr.String())
	}
	var rep floodReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%s", err, stdout.String())
	}
	if rep.Settings.Requests != 200 || rep.Settings.Clinicians != 1 || rep.Volume.Accounted != 200 || rep.Latency.Flooded.Reads == 0 || !rep.Audit.Verified {
		t.Errorf("report = %+v", rep)
	}
}
