package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
)

// Targets of issue 16, item 4 (docs/benchmarks.md, "Unauthenticated
// flood").
const (
	targetFloodVolume   = 1_000_000 // bytes the audit volume may grow by for the flood, less than
	targetFloodP99Ratio = 2.0       // clinician p99 under the flood ÷ unloaded p99, at most
)

// floodOptions configure the -flood scenario (see runFlood).
type floodOptions struct {
	Requests int     // unauthenticated requests per phase
	Rate     float64 // the flood process's pace, requests/s; 0 unpaced
	Sources  int     // source addresses, 127.0.0.2 onward
	Workers  int     // flood requests in flight
	Pin      bool    // pin custos and the clinician to one CPU, the flood to the others
	NewConns bool    // a new TCP and TLS connection for every flood request
}

func (f *floodOptions) validate() error {
	switch {
	case f.Requests < 1:
		return errors.New("-flood-requests must be at least 1")
	case f.Rate < 0:
		return errors.New("-flood-rate must not be negative")
	case f.Sources < 1 || f.Sources > 65000:
		return errors.New("-flood-sources must be between 1 and 65,000")
	case f.Workers < 1:
		return errors.New("-flood-workers must be at least 1")
	}
	return nil
}

// floodReport is the result of the -flood scenario.
type floodReport struct {
	Machine  machine       `json:"machine"`
	Settings floodSettings `json:"settings"`
	Volume   floodVolume   `json:"volume"`  // phase 1: the flood alone
	Latency  floodLatency  `json:"latency"` // phase 2: the clinician with and without the flood
	Audit    auditCheck    `json:"audit"`
	Checks   []check       `json:"checks"`
	// Pass: every check met, no clinician read failed, every flood request
	// refused and on record (one by one or in an aggregate), every read
	// served has its audit record and the log verified.
	Pass bool `json:"pass"`
}

type floodSettings struct {
	Requests   int     `json:"requests"`
	Rate       float64 `json:"rate"` // 0: unpaced
	Sources    int     `json:"sources"`
	Workers    int     `json:"workers"`
	Clinicians int     `json:"clinicians"`
	Rounds     int     `json:"rounds"`
	DurationS  float64 `json:"unloaded_duration_s"`
	WarmupS    float64 `json:"warmup_s"`
	Resources  int     `json:"resources"`
	Size       int     `json:"size_bytes"`
	Protocol   string  `json:"protocol"`
	Transport  string  `json:"transport"`
	NewConns   bool    `json:"new_conns"` // a TLS handshake per flood request
	Pinned     bool    `json:"pinned"`
	ServerCPUs []int   `json:"server_cpus,omitempty"` // custos and the clinician (this process)
	FloodCPUs  []int   `json:"flood_cpus,omitempty"`  // the flood process
	// FloodRanOn is the CPUs the flood process said it may run on.
	FloodRanOn []int   `json:"flood_ran_on,omitempty"`
	WindowS    float64 `json:"refusal_window_s"`
	PerSource  int     `json:"refusals_per_source"`
}

// floodVolume is what the flood alone did to the audit volume: a server
// started on the log, flooded and stopped (which writes the pending
// aggregates), measured on the closed log before and after.
type floodVolume struct {
	Answers map[string]int `json:"answers"` // HTTP status → count
	Seconds float64        `json:"seconds"`
	// Records is every record the phase added: auth/reject ones and the
	// server start's and stop's own (policy load, checkpoint).
	Records    uint64 `json:"records"`
	Rejects    int    `json:"auth_reject_records"`
	Aggregates int    `json:"aggregate_records"`
	Aggregated int    `json:"refusals_in_aggregates"`
	// Accounted is the refusals on record: individual auth/reject records
	// plus the counts of the aggregates. It must equal the requests.
	Accounted int `json:"refusals_accounted"`
	// UsedBefore and UsedAfter are the audit volume's bytes in use: bbolt's
	// high-water mark of audit.db (pages × page size; the file itself
	// grows by doubling, then in 1 GiB steps, and is reused) plus every
	// other audit file (sealed segments). FilesBefore/After are the files'
	// sizes on disk.
	UsedBefore  int64   `json:"used_before_bytes"`
	UsedAfter   int64   `json:"used_after_bytes"`
	Growth      int64   `json:"growth_bytes"` // UsedAfter - UsedBefore: the flood, and one start and stop
	FilesBefore int64   `json:"files_before_bytes"`
	FilesAfter  int64   `json:"files_after_bytes"`
	FloodCPUms  float64 `json:"flood_process_cpu_ms"`
	// ServerCPUPerRefusalUs is this process's CPU (custos alone: the
	// clinician does not read in this phase) during the flood, per request.
	ServerCPUPerRefusalUs float64 `json:"server_cpu_per_refusal_us"`
}

// floodLatency is the clinician's reads without and with the flood, in
// alternating slices.
type floodLatency struct {
	Unloaded runResult      `json:"unloaded"`
	Flooded  runResult      `json:"flooded"`
	P99Ratio float64        `json:"p99_ratio"` // flooded p99 ÷ unloaded p99
	Answers  map[string]int `json:"answers"`
	// FloodSeconds is the time the flood slices took; FloodRate the pace
	// achieved.
	FloodSeconds float64 `json:"flood_seconds"`
	FloodRate    float64 `json:"flood_rate"`
	FloodCPUms   float64 `json:"flood_process_cpu_ms"`
	// ServerCPUPerRefusalUs is what one refused request cost this process
	// (custos, and the clinician's client): its CPU during the flood slices,
	// less the clinician's reads at their unloaded CPU cost, per request.
	ServerCPUPerRefusalUs float64 `json:"server_cpu_per_refusal_us"`
	Records               uint64  `json:"records"` // added in the phase: reads, refusals, start and stop
}

// runFlood is the -flood scenario: custos served over HTTPS as in run,
// and a separate flood process (this program again, floodChild) that sends
// unauthenticated requests from o.Flood.Sources loopback addresses. With
// o.Flood.Pin, this process (custos and the clinician) is pinned to one CPU
// and the flood process to the others, so that the flood's own work does
// not take the server's CPU.
//
//  1. Volume: custos starts on a new log and stops (the "before"), then
//     starts again, takes o.Flood.Requests flood requests alone and stops
//     (which writes the pending aggregate records): the audit volume's
//     growth and the refusals on record.
//  2. Latency: custos starts again, o.Clients[0] clinicians connect twice
//     (an unloaded and a flooded fleet) and warm up, then o.Rounds rounds
//     of an unloaded slice of o.Duration/o.Rounds and a flooded slice that
//     lasts as long as the flood process takes for its share of another
//     o.Flood.Requests requests. The p99s of the two fleets are compared.
//
// The log is verified at the end and its read records counted against the
// clinician's reads served.
func runFlood(ctx context.Context, o options) (_ *floodReport, err error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Flood == nil {
		return nil, errors.New("no flood options")
	}
	if err := o.Flood.validate(); err != nil {
		return nil, err
	}
	logger, progress := o.sinks()
	dir, cleanup, err := dataDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fo := *o.Flood
	clinicians := o.Clients[0]
	rep := &floodReport{Machine: describeMachine(), Settings: floodSettings{
		Requests: fo.Requests, Rate: fo.Rate, Sources: fo.Sources, Workers: fo.Workers, NewConns: fo.NewConns, Clinicians: clinicians,
		Rounds: o.Rounds, DurationS: o.Duration.Seconds(), WarmupS: o.Warmup.Seconds(), Resources: o.Resources, Size: o.Size,
		Protocol:  protocolVersion(o.Mode == modeStateless),
		Transport: "HTTP/1.1 over TLS 1.3, 127.0.0.1; the flood from 127.0.0.2 onward",
		WindowS:   server.DefaultRefusalWindow.Seconds(), PerSource: server.DefaultRefusalsPerSource,
	}}

	cl, err := clinicianSetup(ctx, o, dir, clinicians, logger)
	if err != nil {
		return nil, err
	}
	d, tlsCfg, pool, tokens, tf := cl.d, cl.tlsCfg, cl.pool, cl.tokens, cl.tf
	var serverCPUs, floodCPUs []int
	if fo.Pin {
		var ok bool
		if serverCPUs, floodCPUs, ok = cpuSplit(); ok {
			restore, err := pinProcess(serverCPUs)
			if err != nil {
				return nil, fmt.Errorf("pinning: %w", err)
			}
			defer restore()
			rep.Settings.Pinned, rep.Settings.ServerCPUs, rep.Settings.FloodCPUs = true, serverCPUs, floodCPUs
		} else {
			fmt.Fprintln(progress, "load: fewer than 2 CPUs: the flood and custos share them")
		}
	}
	fp, err := startFlood(ctx, tlsCfg, fo, floodCPUs)
	if err != nil {
		return nil, err
	}
	defer func() {
		if ferr := fp.stop(); ferr != nil && err == nil {
			err = fmt.Errorf("flood process: %w (stderr: %s)", ferr, fp.stderr)
		}
	}()
	start := func() (*custosSide, error) {
		return startCustos(ctx, dir, tokens, tf, server.RateLimit{PerSecond: o.RateLimit, Burst: max(1, int(2*o.RateLimit))}, o.AuditBatchDelay, tlsCfg, o.CPUProfile != "", false, logger)
	}
	auditPath := filepath.Join(dir, app.AuditFile)

	// 1. Volume.
	fmt.Fprintf(progress, "load: flood volume: %d unauthenticated requests from %d addresses, custos alone\n", fo.Requests, fo.Sources)
	cs, err := start()
	if err != nil {
		return nil, fmt.Errorf("custos: %w", err)
	}
	if err := cs.close(ctx); err != nil {
		return nil, err
	}
	before, err := measureVolume(dir, auditPath)
	if err != nil {
		return nil, err
	}
	if cs, err = start(); err != nil {
		return nil, fmt.Errorf("custos: %w", err)
	}
	b, cpu, err := profiledBatch(fp, fo.Requests, cs.url, o.CPUProfile)
	if cerr := cs.close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	after, err := measureVolume(dir, auditPath)
	if err != nil {
		return nil, err
	}
	v := &rep.Volume
	v.Answers, v.Seconds, v.FloodCPUms = b.Status, b.Seconds, b.CPUms
	rep.Settings.FloodRanOn = b.CPUs
	v.ServerCPUPerRefusalUs = float64(cpu.Microseconds()) / float64(fo.Requests)
	v.UsedBefore, v.UsedAfter, v.Growth = before.used, after.used, after.used-before.used
	v.FilesBefore, v.FilesAfter = before.files, after.files
	v.Records = after.head - before.head
	if err := countRejects(ctx, auditPath, before.head+1, after.head, v); err != nil {
		return nil, err
	}

	// 2. Latency.
	fmt.Fprintf(progress, "load: flood latency: %d clinician(s), %d × (%s unloaded, %d flood requests)\n", clinicians, o.Rounds, o.Duration/time.Duration(o.Rounds), fo.Requests/o.Rounds)
	if cs, err = start(); err != nil {
		return nil, fmt.Errorf("custos: %w", err)
	}
	defer func() {
		if cerr := cs.close(context.Background()); cerr != nil && err == nil {
			err = cerr
		}
	}()
	lat, reads, err := floodLatencyPhase(ctx, o, fp, cs, clinicians, d, pool)
	if err != nil {
		return nil, err
	}
	if err := cs.close(ctx); err != nil {
		return nil, err
	}
	end, err := measureVolume(dir, auditPath)
	if err != nil {
		return nil, err
	}
	lat.Records = end.head - after.head
	rep.Latency = lat
	rep.Audit.ReadsServed, rep.Audit.ReadErrors = reads.ok, reads.errs
	if err := countAudit(ctx, auditPath, &rep.Audit); err != nil {
		return nil, fmt.Errorf("audit verification: %w", err)
	}
	rep.Audit.Match = rep.Audit.ReadAllow == uint64(rep.Audit.ReadsServed)
	rep.Machine.LoadAfter = loadavg()

	refused := func(a map[string]int) int { return a["401"] + a["429"] }
	rep.Checks = []check{
		{Name: "audit volume growth for the flood (bytes)", Target: fmt.Sprintf("< %d", targetFloodVolume), Value: float64(v.Growth), Pass: v.Growth < targetFloodVolume},
		{Name: "flood requests refused (401/429), volume phase", Target: fmt.Sprintf("= %d", fo.Requests), Value: float64(refused(v.Answers)), Pass: refused(v.Answers) == fo.Requests},
		{Name: "refusals on record (individual + aggregated)", Target: fmt.Sprintf("= %d", fo.Requests), Value: float64(v.Accounted), Pass: v.Accounted == fo.Requests},
		{Name: "flood requests refused (401/429), latency phase", Target: fmt.Sprintf("= %d", fo.Requests), Value: float64(refused(lat.Answers)), Pass: refused(lat.Answers) == fo.Requests},
		{Name: "clinician p99 flooded/unloaded", Target: fmt.Sprintf("< %g", targetFloodP99Ratio), Value: lat.P99Ratio, Pass: lat.P99Ratio > 0 && lat.P99Ratio < targetFloodP99Ratio},
	}
	rep.Pass = rep.Audit.Match && rep.Audit.Verified && reads.errs == 0 && lat.Flooded.Reads > 0
	for _, c := range rep.Checks {
		rep.Pass = rep.Pass && c.Pass
	}
	return rep, nil
}

// tally is the clinician's reads, warm-up included.
type tally struct{ ok, errs int64 }

// floodLatencyPhase runs phase 2 of runFlood against cs.
func floodLatencyPhase(ctx context.Context, o options, fp *floodProcess, cs *custosSide, clinicians int, d dataset, pool *x509.CertPool) (lat floodLatency, reads tally, err error) {
	fleets, err := twoFleets(ctx, o, cs, clinicians, d, pool) // unloaded, flooded
	defer closeFleets(fleets)
	if err != nil {
		return lat, reads, err
	}
	lat.Answers = map[string]int{}
	var cpu [2]time.Duration
	slice := o.Duration / time.Duration(o.Rounds)
	for round := range o.Rounds {
		c0 := processCPU()
		if err := fleets[0].slice(ctx, slice, true, d, uint64(round)<<8); err != nil {
			return lat, reads, err
		}
		cpu[0] += processCPU() - c0

		n := o.Flood.Requests / o.Rounds
		if round == o.Rounds-1 {
			n = o.Flood.Requests - n*(o.Rounds-1)
		}
		done := make(chan struct{})
		var b floodBatch
		var berr error
		c0 = processCPU()
		go func() {
			defer close(done)
			b, berr = fp.batch(n, cs.url)
		}()
		if err := fleets[1].sliceUntil(ctx, done, true, d, uint64(round)<<8|1); err != nil {
			<-done
			return lat, reads, err
		}
		cpu[1] += processCPU() - c0
		if berr != nil {
			return lat, reads, berr
		}
		for k, v := range b.Status {
			lat.Answers[k] += v
		}
		lat.FloodSeconds += b.Seconds
		lat.FloodCPUms += b.CPUms
	}
	lat.Unloaded, lat.Flooded = fleets[0].result(), fleets[1].result()
	lat.Unloaded.Server, lat.Flooded.Server = "unloaded", "flooded"
	if lat.Unloaded.P99ms > 0 {
		lat.P99Ratio = lat.Flooded.P99ms / lat.Unloaded.P99ms
	}
	if lat.FloodSeconds > 0 {
		lat.FloodRate = float64(o.Flood.Requests) / lat.FloodSeconds
	}
	for i, r := range []*runResult{&lat.Unloaded, &lat.Flooded} {
		if r.Reads > 0 {
			r.CPUPerReadMs = ms(cpu[i]) / float64(r.Reads)
		}
		reads.ok += r.TotalReads
		reads.errs += r.TotalErrors
	}
	// The flood's share of this process's CPU in the flooded slices: what
	// is left after the clinician's reads at their unloaded cost.
	if lat.Unloaded.Reads > 0 {
		left := ms(cpu[1]) - float64(lat.Flooded.Reads)*lat.Unloaded.CPUPerReadMs
		lat.ServerCPUPerRefusalUs = max(0, left) * 1000 / float64(o.Flood.Requests)
	}
	return lat, reads, nil
}

// twoFleets connects two fleets of n clients to cs, each warmed up for
// o.Warmup: one measured in the quiet slices of a scenario, the other in
// its loaded ones. The caller closes them (closeFleets), also on error.
func twoFleets(ctx context.Context, o options, cs *custosSide, n int, d dataset, pool *x509.CertPool) (fleets [2]*fleet, err error) {
	t := target{name: "custos", url: cs.url, tokens: cs.tokens}
	version := protocolVersion(o.Mode == modeStateless)
	for i := range fleets {
		if fleets[i], err = connect(ctx, t, n, version, pool); err != nil {
			return fleets, err
		}
		if err := fleets[i].slice(ctx, o.Warmup, false, d, uint64(i)); err != nil {
			return fleets, err
		}
	}
	return fleets, nil
}

// closeFleets closes the fleets that were connected.
func closeFleets(fleets [2]*fleet) {
	for _, f := range fleets {
		if f != nil {
			f.close()
		}
	}
}

// profiledBatch has the flood process send n requests to url and returns
// its answer and this process's CPU time meanwhile; with a profile path,
// it writes a CPU profile of that time there.
func profiledBatch(fp *floodProcess, n int, url, profile string) (_ floodBatch, cpu time.Duration, err error) {
	if profile != "" {
		stop, err := startProfile(profile)
		if err != nil {
			return floodBatch{}, 0, err
		}
		defer func() {
			if perr := stop(); perr != nil && err == nil {
				err = perr
			}
		}()
	}
	c0 := processCPU()
	b, err := fp.batch(n, url)
	return b, processCPU() - c0, err
}

// startFlood starts the flood process on cpus (none: unpinned).
func startFlood(ctx context.Context, tlsCfg *tls.Config, fo floodOptions, cpus []int) (*floodProcess, error) {
	// The flood process is this program again: the load command, or the
	// test binary, whose TestMain runs floodChild too.
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsCfg.Certificates[0].Certificate[0]})
	cfg, err := json.Marshal(floodConfig{CAPEM: string(caPEM), Sources: fo.Sources, Workers: fo.Workers, Rate: fo.Rate, NewConns: fo.NewConns})
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), floodChildEnv+"="+string(cfg))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &floodProcess{stdin: stdin, stderr: &strings.Builder{}, wait: cmd.Wait}
	cmd.Stderr = p.stderr
	if err := startPinned(cmd, cpus); err != nil {
		return nil, fmt.Errorf("starting the flood process: %w", err)
	}
	p.out = newLineScanner(stdout)
	return p, nil
}

// volumeState is the closed audit log at one moment.
type volumeState struct {
	head  uint64
	used  int64 // bytes in use (see floodVolume)
	files int64 // bytes of the audit files on disk
}

// measureVolume measures the closed audit log at auditPath and the other
// audit files in dir (any file or directory whose name starts with
// "audit", such as sealed segments).
func measureVolume(dir, auditPath string) (volumeState, error) {
	var v volumeState
	db, err := bolt.Open(auditPath, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return v, err
	}
	err = db.View(func(tx *bolt.Tx) error { v.used = tx.Size(); return nil })
	db.Close()
	if err != nil {
		return v, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return v, err
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "audit") {
			continue
		}
		werr := filepath.WalkDir(filepath.Join(dir, e.Name()), func(p string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return err
			}
			fi, err := de.Info()
			if err != nil {
				return err
			}
			v.files += fi.Size()
			if p != auditPath {
				v.used += fi.Size()
			}
			return nil
		})
		if werr != nil {
			return v, werr
		}
	}
	l, err := audit.Open(auditPath, audit.Options{ReadOnly: true})
	if err != nil {
		return v, err
	}
	v.head, _ = l.Head()
	return v, l.Close()
}

// countRejects counts the auth/reject records from seq from to seq to of
// the closed log at path, and the refusals they account for.
func countRejects(ctx context.Context, path string, from, to uint64, v *floodVolume) error {
	if to < from {
		return nil
	}
	l, err := audit.Open(path, audit.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer l.Close()
	return l.Records(ctx, from, to, func(_ uint64, canonical []byte) error {
		r, err := audit.Decode(canonical)
		if err != nil {
			return err
		}
		if r.Action != server.ActionAuthReject {
			return nil
		}
		v.Rejects++
		if _, rest, ok := strings.Cut(r.Reason, ","+server.ReasonAggregate+",count="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest+",", ',')])
			if err != nil {
				return fmt.Errorf("record %d: aggregate count in %q: %w", r.Seq, r.Reason, err)
			}
			v.Aggregates++
			v.Aggregated += n
			v.Accounted += n
		} else {
			v.Accounted++
		}
		return nil
	})
}

// print writes the human-readable report of the -flood scenario.
func (r *floodReport) print(w io.Writer) {
	m, s := r.Machine, r.Settings
	fmt.Fprintf(w, "machine: %d CPU (%s), %.0f GiB, %s %s; load average %s before, %s after\n", m.NumCPU, m.CPU, m.MemGiB, m.Go, m.OS, m.LoadBefore, m.LoadAfter)
	pace := "unpaced"
	if s.Rate > 0 {
		pace = fmt.Sprintf("paced at %g/s", s.Rate)
	}
	conns := "keep-alive connections"
	if s.NewConns {
		conns = "a new TLS connection per request"
	}
	fmt.Fprintf(w, "flood: %d unauthenticated requests per phase (half no token, half a forged one) from %d source addresses, %d in flight, %s, %s; a separate process\n", s.Requests, s.Sources, s.Workers, pace, conns)
	if s.Pinned {
		fmt.Fprintf(w, "cpus: custos and the clinician on %v, the flood process on %v (it reports %v)\n", s.ServerCPUs, s.FloodCPUs, s.FloodRanOn)
	} else {
		fmt.Fprintln(w, "cpus: not pinned (the flood shares the server's CPUs)")
	}
	fmt.Fprintf(w, "custos: MCP %s, %s; refusal window %gs, %d failures per source; %d clinician(s), %d notes of %d bytes\n\n", s.Protocol, s.Transport, s.WindowS, s.PerSource, s.Clinicians, s.Resources, s.Size)

	v := r.Volume
	fmt.Fprintf(w, "volume (the flood alone, %.1f s): answers %s\n", v.Seconds, answers(v.Answers))
	fmt.Fprintf(w, "  records added %d: %d auth/reject (%d one by one, %d aggregates counting %d) accounting for %d refusals\n",
		v.Records, v.Rejects, v.Rejects-v.Aggregates, v.Aggregates, v.Aggregated, v.Accounted)
	fmt.Fprintf(w, "  audit volume in use %d → %d bytes: grew %d bytes (%.1f bytes per request); files on disk %d → %d bytes\n",
		v.UsedBefore, v.UsedAfter, v.Growth, float64(v.Growth)/float64(max(1, s.Requests)), v.FilesBefore, v.FilesAfter)
	fmt.Fprintf(w, "  custos CPU per refused request: %.1f µs; flood process CPU %.0f ms\n\n", v.ServerCPUPerRefusalUs, v.FloodCPUms)

	l := r.Latency
	fmt.Fprintf(w, "latency (%d rounds): flood answers %s in %.1f s (%.0f/s), flood process CPU %.0f ms\n", s.Rounds, answers(l.Answers), l.FloodSeconds, l.FloodRate, l.FloodCPUms)
	fmt.Fprintf(w, "%-9s  %7s  %9s  %8s  %8s  %8s  %8s  %6s  %9s\n", "clinician", "reads", "reads/s", "p50", "p90", "p99", "max", "errors", "cpu/read")
	for _, run := range []runResult{l.Unloaded, l.Flooded} {
		fmt.Fprintf(w, "%-9s  %7d  %9.1f  %8s  %8s  %8s  %8s  %6d  %9s\n", run.Server, run.Reads, run.ReadsPerSec,
			fmtMs(run.P50ms), fmtMs(run.P90ms), fmtMs(run.P99ms), fmtMs(run.MaxMs), run.Errors, fmt.Sprintf("%.3f ms", run.CPUPerReadMs))
		for _, e := range run.ErrorSamples {
			fmt.Fprintf(w, "           error: %s\n", e)
		}
	}
	fmt.Fprintf(w, "  CPU per refused request in this process (custos and the clinician, reads taken off at their unloaded cost): %.1f µs\n\n", l.ServerCPUPerRefusalUs)

	a := r.Audit
	fmt.Fprintf(w, "audit: %d records, verified: %v (%d problems); read allow records %d for %d clinician reads served (%d failed)\n",
		a.Records, a.Verified, a.Problems, a.ReadAllow, a.ReadsServed, a.ReadErrors)
	for _, n := range a.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	for _, c := range r.Checks {
		val := fmt.Sprintf("%.2f", c.Value)
		if c.Value == math.Trunc(c.Value) {
			val = fmt.Sprintf("%.0f", c.Value)
		}
		fmt.Fprintf(w, "check: %s %s (%s) %s\n", c.Name, val, c.Target, passFail(c.Pass))
	}
	fmt.Fprintf(w, "\nresult: %s\n", passFail(r.Pass))
}

// answers formats status counts: "401 × 1920, 429 × 18080".
func answers(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s × %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func (r *floodReport) passed() bool { return r.Pass }
