package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
)

// Modes of the Streamable HTTP transport.
const (
	modeStateful  = "stateful"
	modeStateless = "stateless"
)

// Defaults of the flags that tests shorten.
const (
	defaultDuration = 10 * time.Second
	defaultWarmup   = 2 * time.Second
)

// Targets of issue 17 (docs/benchmarks.md), which replaced the load-harness
// issue's (64 clients: throughput ratio ≥ 0.5; 8 clients: p99 ≤ 25 ms).
const (
	targetThroughputRatio = 0.8 // custos/bare reads/s at 8 and 64 clients, at least
	targetP99Ratio        = 1.5 // custos/bare p99 at 8 and 64 clients, at most
	targetP50OverMs       = 1.0 // custos p50 minus bare p50 at 1 client, at most (ms)
)

// options configure one run of the harness.
type options struct {
	Clients    []int
	Duration   time.Duration
	Warmup     time.Duration
	Size       int
	Resources  int
	Rounds     int // measured slices per server and concurrency, alternating bare and custos
	PerPatient int // notes per patient; every clinician cares for every patient
	// Principals is the number of distinct clinicians (bearer tokens);
	// client i reads as clinician i mod Principals. 0: one per client.
	Principals int
	Mode       string
	BareJSON   bool // the bare server answers with application/json
	CPUProfile string
	// MemProfile, if set, receives the allocation profile (runtime/pprof
	// "allocs": cumulative since the process started) after each level.
	MemProfile string
	DataDir    string  // "": a temporary directory, removed
	RateLimit  float64 // custos per-principal requests/s; 0 disables
	// AuditBatchDelay, if not 0, fixes the audit log's group-commit window
	// (audit.Options.MinBatchDelay = MaxBatchDelay); 0 leaves the audit
	// package's adaptive window, what serve uses.
	AuditBatchDelay time.Duration
	// Flood, if not nil, runs the -flood scenario (runFlood) instead of
	// the comparison with the bare server.
	Flood    *floodOptions
	Logger   *slog.Logger
	Progress io.Writer // progress lines; nil discards
}

func (o *options) validate() error {
	switch {
	case len(o.Clients) == 0:
		return errors.New("no -clients")
	case o.Duration <= 0:
		return errors.New("-duration must be positive")
	case o.Warmup < 0:
		return errors.New("-warmup must not be negative")
	case o.Size < 1 || o.Size > 16<<20:
		return errors.New("-size must be between 1 and 16 MiB")
	case o.Resources < 1 || o.Resources > 1_000_000:
		return errors.New("-resources must be between 1 and 1,000,000")
	case o.Rounds < 1 || o.Duration/time.Duration(max(1, o.Rounds)) < time.Millisecond:
		return errors.New("-rounds must be at least 1, with slices of -duration/-rounds of at least 1ms")
	case o.PerPatient < 1:
		return errors.New("-notes-per-patient must be at least 1")
	case o.Mode != modeStateful && o.Mode != modeStateless:
		return fmt.Errorf("-mode %q: want %s or %s", o.Mode, modeStateful, modeStateless)
	case o.Principals < 0:
		return errors.New("-principals must not be negative")
	case o.AuditBatchDelay < 0:
		return errors.New("-audit-batch-delay must not be negative")
	case o.RateLimit < 0:
		return errors.New("-rate-limit must not be negative")
	}
	return nil
}

// report is the harness's result.
type report struct {
	Machine  machine      `json:"machine"`
	Settings settings     `json:"settings"`
	Runs     []runResult  `json:"runs"`
	Compare  []comparison `json:"comparisons"`
	Audit    auditCheck   `json:"audit"`
	// Pass: every target met, no run had an error, every served custos
	// read has its audit record and the log verified.
	Pass bool `json:"pass"`
}

type machine struct {
	CPU        string  `json:"cpu"`
	NumCPU     int     `json:"num_cpu"`
	MemGiB     float64 `json:"mem_gib"`
	Go         string  `json:"go"`
	OS         string  `json:"os"`
	LoadBefore string  `json:"loadavg_before"`
	LoadAfter  string  `json:"loadavg_after"`
	// Fsync is the disk's write+fsync latency in the data directory,
	// probed before each concurrency level and after the last.
	Fsync []fsyncProbe `json:"fsync"`
}

type settings struct {
	Clients      []int   `json:"clients"`
	DurationS    float64 `json:"duration_s"`
	WarmupS      float64 `json:"warmup_s"`
	Rounds       int     `json:"rounds"`
	Size         int     `json:"size_bytes"`
	Resources    int     `json:"resources"`
	Patients     int     `json:"patients"`   // in every clinician's care relationships
	Principals   int     `json:"principals"` // distinct clinicians (tokens); client i is clinician i mod principals
	BareMode     string  `json:"bare_mode"`
	CustosMode   string  `json:"custos_mode"`
	Transport    string  `json:"transport"`
	RateLimit    float64 `json:"custos_rate_limit"`
	ModesDiffer  bool    `json:"modes_differ"` // -bare-framing other than custos's: the ratios compare unlike things
	Protocol     string  `json:"protocol"`
	AuditBatchMs float64 `json:"audit_batch_delay_ms"` // fixed window; 0: adaptive (audit defaults)
}

// comparison is custos against bare at one concurrency.
type comparison struct {
	Clients         int     `json:"clients"`
	ThroughputRatio float64 `json:"throughput_ratio"`   // custos reads/s ÷ bare reads/s
	P99Ratio        float64 `json:"p99_ratio"`          // custos p99 ÷ bare p99
	CPURatio        float64 `json:"cpu_per_read_ratio"` // custos CPU per read ÷ bare's; 0 if not measured
	Checks          []check `json:"checks,omitempty"`
}

type check struct {
	Name   string  `json:"name"`
	Target string  `json:"target"`
	Value  float64 `json:"value"`
	Pass   bool    `json:"pass"`
}

// auditCheck compares the custos audit log with the reads custos served.
type auditCheck struct {
	ReadsServed int64             `json:"reads_served"` // successful custos reads, warm-up included
	ReadErrors  int64             `json:"read_errors"`  // failed custos reads, warm-up included
	Records     uint64            `json:"records"`      // records in the log
	ReadAllow   uint64            `json:"read_allow_records"`
	ByKind      map[string]uint64 `json:"by_action_outcome"`
	Problems    int               `json:"verify_problems"`
	Verified    bool              `json:"verified"`
	Match       bool              `json:"match"` // ReadAllow == ReadsServed, and each run's head growth matched its reads
	Notes       []string          `json:"notes,omitempty"`
}

// run builds both servers, runs the load at each concurrency (bare, then
// custos), verifies the audit log and returns the report.
func run(ctx context.Context, o options) (_ *report, err error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	logger, progress := o.sinks()
	dir, cleanup, err := dataDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()

	principals := o.Principals
	if principals == 0 {
		for _, n := range o.Clients {
			principals = max(principals, n)
		}
	}
	rep := &report{Machine: describeMachine(), Settings: settings{
		Clients: o.Clients, DurationS: o.Duration.Seconds(), WarmupS: o.Warmup.Seconds(), Rounds: o.Rounds,
		Size: o.Size, Resources: o.Resources, BareMode: modeName(o.Mode == modeStateless, o.BareJSON),
		CustosMode: modeName(o.Mode == modeStateless, o.Mode == modeStateless), Protocol: protocolVersion(o.Mode == modeStateless), Transport: "HTTP/1.1 over TLS 1.3 (ECDSA P-256, self-signed), 127.0.0.1",
		RateLimit: o.RateLimit, ModesDiffer: o.BareJSON != (o.Mode == modeStateless),
		AuditBatchMs: float64(o.AuditBatchDelay) / float64(time.Millisecond),
	}}

	fmt.Fprintf(progress, "load: building a catalog of %d notes of %d bytes in %s\n", o.Resources, o.Size, dir)
	d := newDataset(o.Resources, o.Size, o.PerPatient)
	rep.Settings.Patients, rep.Settings.Principals = len(d.patients), principals
	tlsCfg, pool, err := tlsSetup()
	if err != nil {
		return nil, err
	}
	cs, err := openCustos(ctx, dir, d, principals, server.RateLimit{PerSecond: o.RateLimit, Burst: max(1, int(2*o.RateLimit))}, o.AuditBatchDelay, tlsCfg, o.CPUProfile != "", true, logger)
	if err != nil {
		return nil, fmt.Errorf("custos: %w", err)
	}
	defer func() {
		if cerr := cs.close(context.Background()); cerr != nil && err == nil {
			err = fmt.Errorf("closing custos: %w", cerr)
		}
	}()
	bareH := bareServer(d, o.Mode == modeStateless, o.BareJSON)
	if o.CPUProfile != "" {
		bareH = labelled(bareH, "bare")
	}
	bareL, err := listenTLS(bareH, tlsCfg)
	if err != nil {
		return nil, err
	}
	defer bareL.stop()

	bare := target{name: "bare", url: bareL.url}
	cust := target{name: "custos", url: cs.url, tokens: cs.tokens}
	runsMatch := true
	probe := func() {
		if p, err := probeFsync(dir, 20); err == nil {
			rep.Machine.Fsync = append(rep.Machine.Fsync, p)
		}
	}
	for _, n := range o.Clients {
		probe()
		r, err := runConcurrency(ctx, o, progress, n, bare, cust, d, pool, cs)
		if err != nil {
			return nil, err
		}
		b, c := r[0], r[1]
		rep.Audit.ReadsServed += c.TotalReads
		rep.Audit.ReadErrors += c.TotalErrors
		if *c.AuditRecords != uint64(c.TotalReads) {
			runsMatch = false
			rep.Audit.Notes = append(rep.Audit.Notes, fmt.Sprintf("%d clients: the audit log grew by %d records for %d reads served (%d failed)", n, *c.AuditRecords, c.TotalReads, c.TotalErrors))
		}
		rep.Runs = append(rep.Runs, b, c)
		rep.Compare = append(rep.Compare, compare(b, c))
	}

	probe()
	// Stop serving and close the log (final checkpoint), then verify the
	// file as `custos audit verify` does and count its records.
	bareL.stop()
	if err := cs.close(ctx); err != nil {
		return nil, fmt.Errorf("closing custos: %w", err)
	}
	if err := countAudit(ctx, cs.audit, &rep.Audit); err != nil {
		return nil, fmt.Errorf("audit verification: %w", err)
	}
	rep.Audit.Match = runsMatch && rep.Audit.ReadAllow == uint64(rep.Audit.ReadsServed)
	rep.Machine.LoadAfter = loadavg()

	rep.Pass = rep.Audit.Match && rep.Audit.Verified
	for _, r := range rep.Runs {
		if r.TotalErrors > 0 {
			rep.Pass = false
		}
	}
	for _, c := range rep.Compare {
		for _, ch := range c.Checks {
			rep.Pass = rep.Pass && ch.Pass
		}
	}
	return rep, nil
}

// sinks are o.Logger and o.Progress, discarding where nil.
func (o *options) sinks() (*slog.Logger, io.Writer) {
	logger, progress := o.Logger, o.Progress
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if progress == nil {
		progress = io.Discard
	}
	return logger, progress
}

// dataDir is the data directory of a run: dir, which must be empty or
// absent (the audit count needs a fresh audit log) and is kept, or with
// dir "" a temporary directory that cleanup removes.
func dataDir(dir string) (_ string, cleanup func(), err error) {
	if dir == "" {
		if dir, err = os.MkdirTemp("", "custos-load-"); err != nil {
			return "", nil, err
		}
		return dir, func() { os.RemoveAll(dir) }, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	if ents, err := os.ReadDir(dir); err != nil {
		return "", nil, err
	} else if len(ents) > 0 {
		return "", nil, fmt.Errorf("-data %s is not empty: the audit count needs a fresh audit log", dir)
	}
	return dir, func() {}, nil
}

// runConcurrency runs n clients against each server: both fleets connect,
// warm up (bare, then custos), then take turns for o.Rounds slices of
// o.Duration/o.Rounds each, bare first, so that slow changes in the
// machine's load hit both alike. It returns the bare and the custos
// result; the custos one says how much the audit log grew meanwhile.
func runConcurrency(ctx context.Context, o options, progress io.Writer, n int, bare, cust target, d dataset, pool *x509.CertPool, cs *custosSide) (_ [2]runResult, err error) {
	fmt.Fprintf(progress, "load: %d clients: %s warm-up, then %d × (%s bare, %s custos)\n", n, o.Warmup, o.Rounds, o.Duration/time.Duration(o.Rounds), o.Duration/time.Duration(o.Rounds))
	var fleets [2]*fleet
	defer func() {
		for _, f := range fleets {
			if f != nil {
				f.close()
			}
		}
	}()
	headBefore, commitsBefore := cs.head(), cs.commits()
	for i, t := range []target{bare, cust} {
		if fleets[i], err = connect(ctx, t, n, protocolVersion(o.Mode == modeStateless), pool); err != nil {
			return [2]runResult{}, err
		}
	}
	if o.CPUProfile != "" {
		stop, err := startProfile(profilePath(o.CPUProfile, n, len(o.Clients) > 1))
		if err != nil {
			return [2]runResult{}, err
		}
		defer func() {
			if perr := stop(); perr != nil && err == nil {
				err = perr
			}
		}()
	}
	for i, f := range fleets {
		if err := f.slice(ctx, o.Warmup, false, d, uint64(n)<<8|uint64(i)); err != nil {
			return [2]runResult{}, err
		}
	}
	slice := o.Duration / time.Duration(o.Rounds)
	var cpu [2]time.Duration
	var rt [2]runtimeSample
	var own opsSample // custos's own histograms over its measured slices
	opsURL := cs.opsURL()
	for round := range o.Rounds {
		for i, f := range fleets {
			var o0 opsSample
			if i == 1 && opsURL != "" {
				if o0, err = scrapeOps(ctx, opsURL); err != nil {
					return [2]runResult{}, err
				}
			}
			c0, r0 := processCPU(), readRuntime()
			if err := f.slice(ctx, slice, true, d, uint64(n)<<16|uint64(round)<<8|uint64(i)); err != nil {
				return [2]runResult{}, err
			}
			cpu[i] += processCPU() - c0
			rt[i] = rt[i].add(readRuntime().sub(r0))
			if i == 1 && opsURL != "" {
				o1, err := scrapeOps(ctx, opsURL)
				if err != nil {
					return [2]runResult{}, err
				}
				own = own.add(o1.sub(o0))
			}
		}
	}
	if o.MemProfile != "" {
		if err := writeAllocs(profilePath(o.MemProfile, n, len(o.Clients) > 1)); err != nil {
			return [2]runResult{}, err
		}
	}
	headAfter := cs.head()
	grew, commits := headAfter-headBefore, cs.commits()-commitsBefore
	res := [2]runResult{fleets[0].result(), fleets[1].result()}
	for i := range res {
		if res[i].Reads > 0 && cpu[i] > 0 {
			res[i].CPUPerReadMs = ms(cpu[i]) / float64(res[i].Reads)
			res[i].AllocKBPerRead = float64(rt[i].allocBytes) / 1024 / float64(res[i].Reads)
			res[i].IdleGCPerReadMs = ms(rt[i].gcIdle) / float64(res[i].Reads)
		}
	}
	res[1].AuditRecords, res[1].AuditCommits = &grew, &commits
	if opsURL != "" {
		res[1].Own = &ownMeans{
			ReadMs: own.read.meanMs(), Reads: own.read.count,
			AuditAppendMs: own.audit.meanMs(), AuditAppends: own.audit.count,
			PolicyMs: own.policy.meanMs(), PolicyEvals: own.policy.count,
		}
	}
	return res, nil
}

// compare computes the ratios of one concurrency and checks the targets
// that apply to it (8 and 64 clients: throughput and p99 ratios; 1 client:
// p50 over bare).
func compare(bare, cust runResult) comparison {
	c := comparison{Clients: bare.Clients}
	if bare.ReadsPerSec > 0 {
		c.ThroughputRatio = cust.ReadsPerSec / bare.ReadsPerSec
	}
	if bare.P99ms > 0 {
		c.P99Ratio = cust.P99ms / bare.P99ms
	}
	if bare.CPUPerReadMs > 0 {
		c.CPURatio = cust.CPUPerReadMs / bare.CPUPerReadMs
	}
	switch bare.Clients {
	case 8, 64:
		c.Checks = append(c.Checks,
			check{Name: "throughput custos/bare", Target: fmt.Sprintf(">= %.2g", targetThroughputRatio), Value: c.ThroughputRatio, Pass: c.ThroughputRatio >= targetThroughputRatio},
			check{Name: "p99 custos/bare", Target: fmt.Sprintf("<= %.2g", targetP99Ratio), Value: c.P99Ratio, Pass: c.P99Ratio > 0 && c.P99Ratio <= targetP99Ratio},
		)
	case 1:
		over := cust.P50ms - bare.P50ms
		c.Checks = append(c.Checks,
			check{Name: "custos p50 - bare p50 (ms)", Target: fmt.Sprintf("<= %g", targetP50OverMs), Value: over, Pass: cust.Reads > 0 && bare.Reads > 0 && over <= targetP50OverMs},
		)
	}
	return c
}

// countAudit verifies the closed audit log at path and counts its records
// by action and outcome.
func countAudit(ctx context.Context, path string, a *auditCheck) error {
	sum, err := audit.VerifyFile(ctx, path, func(p audit.Problem) {
		a.Notes = append(a.Notes, "verify: "+p.String())
	})
	if err != nil {
		return err
	}
	a.Records, a.Problems, a.Verified = sum.Records, sum.Problems, sum.Problems == 0
	a.ByKind = map[string]uint64{}
	if sum.HeadSeq == 0 {
		return nil
	}
	l, err := audit.Open(path, audit.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer l.Close()
	return l.Records(ctx, 1, sum.HeadSeq, func(_ uint64, canonical []byte) error {
		r, err := audit.Decode(canonical)
		if err != nil {
			return err
		}
		a.ByKind[r.Action+" "+r.Outcome]++
		if r.Action == audit.ActionResourcesRead && r.Outcome == audit.OutcomeAllow {
			a.ReadAllow++
		}
		return nil
	})
}

// startProfile starts a CPU profile into path; the returned function
// stops it and closes the file.
func startProfile(path string) (func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// writeAllocs writes the allocation profile to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// labelled runs h under the pprof label side=name, so that a CPU profile
// can be split by server (go tool pprof -tagfocus side=custos); goroutines
// started while serving (the SDK's per-session goroutines) inherit it.
func labelled(h http.Handler, name string) http.Handler {
	labels := pprof.Labels("side", name)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), labels, func(ctx context.Context) { h.ServeHTTP(w, r.WithContext(ctx)) })
	})
}

// profilePath is FILE, or FILE with -cN before its extension when several
// concurrencies are profiled.
func profilePath(path string, n int, several bool) string {
	if !several {
		return path
	}
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s-c%d%s", strings.TrimSuffix(path, ext), n, ext)
}

func modeName(stateless, jsonResponse bool) string {
	m, r := "stateful sessions", "SSE responses"
	if stateless {
		m = "stateless"
	}
	if jsonResponse {
		r = "JSON responses"
	}
	return m + ", " + r
}

// describeMachine reads what /proc says about the CPU, memory and load.
func describeMachine() machine {
	m := machine{NumCPU: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, LoadBefore: loadavg()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb float64
			if n, _ := fmt.Sscanf(sc.Text(), "MemTotal: %f kB", &kb); n == 1 {
				m.MemGiB = kb / (1 << 20)
				break
			}
		}
		f.Close()
	}
	return m
}

// loadavg is the 1-, 5- and 15-minute load average ("" if unknown): other
// builds on a shared machine show up here.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// print writes the human-readable report.
func (r *report) print(w io.Writer) {
	m, s := r.Machine, r.Settings
	fmt.Fprintf(w, "machine: %d CPU (%s), %.0f GiB, %s %s; load average %s before, %s after\n", m.NumCPU, m.CPU, m.MemGiB, m.Go, m.OS, m.LoadBefore, m.LoadAfter)
	if len(m.Fsync) > 0 {
		fmt.Fprint(w, "disk: 4 KiB append+fsync")
		for _, p := range m.Fsync {
			fmt.Fprintf(w, " [p50 %.1f ms, max %.1f ms]", p.P50ms, p.MaxMs)
		}
		fmt.Fprintln(w, " (before each concurrency level and at the end)")
	}
	fmt.Fprintf(w, "catalog: %d text resources of %d bytes, %d patients; %s; warm-up %gs, %gs measured per server in %d alternating slices\n", s.Resources, s.Size, s.Patients, s.Transport, s.WarmupS, s.DurationS, s.Rounds)
	fmt.Fprintf(w, "mode: MCP %s; bare %s; custos %s", s.Protocol, s.BareMode, s.CustosMode)
	if s.ModesDiffer {
		fmt.Fprint(w, " (MODES DIFFER: -bare-framing differs from custos's)")
	}
	rl := "off"
	if s.RateLimit > 0 {
		rl = fmt.Sprintf("%g/s per principal", s.RateLimit)
	}
	win := fmt.Sprintf("adaptive %g–%g ms window", float64(audit.DefaultMinBatchDelay)/float64(time.Millisecond), float64(audit.DefaultMaxBatchDelay)/float64(time.Millisecond))
	if s.AuditBatchMs > 0 {
		win = fmt.Sprintf("fixed %g ms window", s.AuditBatchMs)
	}
	fmt.Fprintf(w, "\ncustos: default policy, audit fsync with group commit (%s), checkpoints, %s (each a clinician caring for all %d patients, TREAT), rate limit %s\n\n", win, principalsText(s), s.Patients, rl)

	fmt.Fprintf(w, "%7s  %-6s  %9s  %8s  %8s  %8s  %8s  %6s  %9s  %9s  %10s\n", "clients", "server", "reads/s", "p50", "p90", "p99", "max", "errors", "cpu/read", "idle-gc", "alloc/read")
	for i, run := range r.Runs {
		flag := ""
		if run.TotalErrors > 0 {
			flag = "  << ERRORS"
		}
		fmt.Fprintf(w, "%7d  %-6s  %9.1f  %8s  %8s  %8s  %8s  %6d  %9s  %9s  %10s%s\n", run.Clients, run.Server, run.ReadsPerSec,
			fmtMs(run.P50ms), fmtMs(run.P90ms), fmtMs(run.P99ms), fmtMs(run.MaxMs), run.Errors, fmt.Sprintf("%.3f ms", run.CPUPerReadMs),
			fmt.Sprintf("%.3f ms", run.IdleGCPerReadMs), fmt.Sprintf("%.0f KB", run.AllocKBPerRead), flag)
		for _, e := range run.ErrorSamples {
			fmt.Fprintf(w, "         error: %s\n", e)
		}
		if i%2 == 1 {
			c := r.Compare[i/2]
			fmt.Fprintf(w, "%7s  custos/bare: throughput %.2f, p99 %.2f, cpu/read %.2f", "", c.ThroughputRatio, c.P99Ratio, c.CPURatio)
			if run.AuditRecords != nil && run.AuditCommits != nil && *run.AuditCommits > 0 {
				fmt.Fprintf(w, "; audit records/commit %.1f", float64(*run.AuditRecords)/float64(*run.AuditCommits))
			}
			for _, ch := range c.Checks {
				fmt.Fprintf(w, "; %s %.2f (%s) %s", ch.Name, ch.Value, ch.Target, passFail(ch.Pass))
			}
			fmt.Fprintln(w)
			if m := run.Own; m != nil {
				fmt.Fprintf(w, "%7s  custos's own means (ops metrics): a read in its handler %.3f ms (%d), of which its audit append %.3f ms (%d), a policy decision %.3f ms (%d)\n",
					"", m.ReadMs, m.Reads, m.AuditAppendMs, m.AuditAppends, m.PolicyMs, m.PolicyEvals)
			}
		}
	}

	a := r.Audit
	fmt.Fprintf(w, "\naudit: %d records, verified: %v (%d problems); resources/read allow records %d for %d custos reads served (%d failed): ",
		a.Records, a.Verified, a.Problems, a.ReadAllow, a.ReadsServed, a.ReadErrors)
	if a.Match {
		fmt.Fprintln(w, "every served read has its record")
	} else {
		fmt.Fprintln(w, "MISMATCH: SERVED READS WITHOUT A MATCHING AUDIT RECORD COUNT")
	}
	kinds := make([]string, 0, len(a.ByKind))
	for k := range a.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  %s: %d\n", k, a.ByKind[k])
	}
	for _, n := range a.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintf(w, "\nresult: %s", passFail(r.Pass))
	if s.ModesDiffer {
		fmt.Fprint(w, " (bare and custos ran in different modes: the ratios compare unlike things)")
	}
	fmt.Fprintln(w)
}

func principalsText(s settings) string {
	if o := slices.Max(s.Clients); s.Principals >= o {
		return "one dev token per client"
	}
	return fmt.Sprintf("%d dev tokens shared round-robin by the clients", s.Principals)
}

func fmtMs(v float64) string { return fmt.Sprintf("%.1f ms", v) }

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func (r *report) passed() bool { return r.Pass }
