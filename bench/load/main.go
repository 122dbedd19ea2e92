package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
)

func main() {
	if cfg, ok := os.LookupEnv(floodChildEnv); ok {
		os.Exit(floodChild(cfg, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// cli parses args, runs the harness and prints the report: data to stdout,
// progress and errors to stderr (prefixed "load: "). It returns the exit
// status: 2 for bad usage, 1 for a failed run (or, with -check, a missed
// target), else 0.
func cli(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o       options
		clients string
		asJSON  bool
		check   bool
		flood   bool
		fo      = floodOptions{Requests: 20000, Rate: 2000, Sources: 64, Workers: 16, Pin: true}
	)
	fs.StringVar(&clients, "clients", "8,64", "comma-separated numbers of concurrent clients; each is run against the bare server, then custos")
	fs.DurationVar(&o.Duration, "duration", defaultDuration, "measured time per server at each concurrency")
	fs.DurationVar(&o.Warmup, "warmup", defaultWarmup, "warm-up per server at each concurrency (reads not measured, but audited)")
	fs.IntVar(&o.Rounds, "rounds", 5, "split each -duration into this many slices, alternating bare and custos slices (robust to a machine whose load changes)")
	fs.IntVar(&o.Size, "size", 4096, "bytes of text content per resource")
	fs.IntVar(&o.Resources, "resources", 1000, "number of resources (notes) in the catalog")
	fs.IntVar(&o.PerPatient, "notes-per-patient", 10, "notes per patient; every benchmark clinician has a care relationship with every patient, so this sets the size of the principal's patient list")
	fs.IntVar(&o.Principals, "principals", 0, "distinct clinicians (bearer tokens) the custos clients read as, round-robin; 0: one per client")
	fs.StringVar(&o.Mode, "mode", modeStateless, "stateless (MCP 2026-07-28, no sessions) or stateful (2025-11-25 sessions); custos serves both on one endpoint, the bare server the mode's")
	bareFraming := fs.String("bare-framing", "", "json or sse: how the bare server frames its responses; default: as custos does in the mode (stateless: JSON, stateful: SSE). A different choice makes the ratios compare unlike things")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of each custos run to this file (with -cN before the extension when several -clients are given); with -flood, of the flood alone (phase 1)")
	fs.StringVar(&o.MemProfile, "memprofile", "", "after each concurrency level, write the allocation profile (cumulative since the process started: compare levels with go tool pprof -base) to this file (with -cN before the extension when several -clients are given)")
	fs.StringVar(&o.DataDir, "data", "", "data directory for custos's catalog and audit log (must be empty or absent; kept). Default: a temporary directory, removed")
	fs.Float64Var(&o.RateLimit, "rate-limit", 0, "custos per-principal rate limit in requests/s (serve's default is 100; 0 disables)")
	fs.DurationVar(&o.AuditBatchDelay, "audit-batch-delay", 0, "fix custos's audit group-commit window (audit.Options.MinBatchDelay and MaxBatchDelay); 0: the adaptive window serve uses (0–5 ms by the scheduler's latency)")
	fs.BoolVar(&flood, "flood", false, "run the unauthenticated flood scenario instead: the audit volume's growth for -flood-requests unauthenticated requests, and a clinician's p99 with and without them (-clients clinicians, default 1)")
	fs.IntVar(&fo.Requests, "flood-requests", fo.Requests, "-flood: unauthenticated requests per phase")
	fs.Float64Var(&fo.Rate, "flood-rate", fo.Rate, "-flood: the flood's pace in requests/s (0: as fast as -flood-workers go)")
	fs.IntVar(&fo.Sources, "flood-sources", fo.Sources, "-flood: source addresses (127.0.0.2 onward)")
	fs.IntVar(&fo.Workers, "flood-workers", fo.Workers, "-flood: flood requests in flight")
	fs.BoolVar(&fo.NewConns, "flood-new-conns", false, "-flood: open a new TLS connection for every flood request (a handshake each) instead of keep-alive connections")
	fs.BoolVar(&fo.Pin, "flood-pin", fo.Pin, "-flood: pin custos and the clinician to the first CPU and the flood process to the others (Linux)")
	var aud auditorOptions
	fs.IntVar(&aud.Records, "auditor", 0, "run the auditor scenario instead (auditor.go): append this many records to the audit log, then have -clients clinicians read (one value, default 8) in -rounds quiet slices of -duration/-rounds, each followed by one 'audit verify' of the whole log through the admin socket, and compare the clinicians' latency in both; 0: off")
	fs.Float64Var(&aud.CPU, "auditor-cpu", 0, "-auditor: the share of one CPU an auditor's walk may use (serve's audit.auditor_cpu; 0: its default, 1: unpaced)")
	var cat catalogOptions
	fs.IntVar(&cat.Patients, "catalog", 0, "run the big-catalog scenario instead (catalog.go): a synthetic catalog of this many patients (~10 resources each), first list pages and a researcher's first read; 0: off")
	fs.IntVar(&cat.Rounds, "catalog-rounds", 5, "rounds of the big-catalog scenario (first pages per persona, each in a new session)")
	fs.BoolVar(&check, "check", false, "exit 1 if a target is missed, a run had errors or the audit count does not match")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./bench/load [flags]\n\nDrives N concurrent MCP clients over HTTPS against custos (every read\ndecided and durably audited) and a bare go-sdk server serving the same\nresources, and compares throughput and latency.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "load: unexpected arguments %q\n", fs.Args())
		return 2
	}
	switch *bareFraming {
	case "":
		o.BareJSON = o.Mode == modeStateless
	case "json", "sse":
		o.BareJSON = *bareFraming == "json"
	default:
		fmt.Fprintf(stderr, "load: -bare-framing: want json or sse, got %q\n", *bareFraming)
		return 2
	}
	var err error
	if o.Clients, err = parseClients(clients); err != nil {
		fmt.Fprintf(stderr, "load: -clients: %v\n", err)
		return 2
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "load: %v\n", err)
		return 2
	}
	if flood {
		if err := fo.validate(); err != nil {
			fmt.Fprintf(stderr, "load: %v\n", err)
			return 2
		}
		o.Flood = &fo
		if !clinicians(fs, &o, 1, "-flood", stderr) {
			return 2
		}
	}
	o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o.Progress = stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if aud.Records > 0 {
		if !clinicians(fs, &o, 8, "-auditor", stderr) {
			return 2
		}
		rep, err := runAuditor(ctx, o, aud)
		if err != nil {
			fmt.Fprintf(stderr, "load: %v\n", err)
			return 1
		}
		return emit(rep, rep.passed(), asJSON, check, stdout, stderr)
	}
	if cat.Patients > 0 {
		cat.DataDir, cat.Logger, cat.Progress = o.DataDir, o.Logger, o.Progress
		return cliCatalog(ctx, cat, asJSON, check, stdout, stderr)
	}
	var rep interface {
		print(io.Writer)
		passed() bool
	}
	if o.Flood != nil {
		rep, err = runFlood(ctx, o)
	} else {
		rep, err = run(ctx, o)
	}
	if err != nil {
		fmt.Fprintf(stderr, "load: %v\n", err)
		return 1
	}
	return emit(rep, rep.passed(), asJSON, check, stdout, stderr)
}

// emit prints rep to stdout, as JSON with asJSON, and returns the exit
// status: 1 when it cannot, or with check when the report did not pass.
func emit(rep interface{ print(io.Writer) }, pass, asJSON, check bool, stdout, stderr io.Writer) int {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "load: %v\n", err)
			return 1
		}
	} else {
		rep.print(stdout)
	}
	if check && !pass {
		return 1
	}
	return 0
}

// clinicians sets o.Clients for a scenario that runs one number of
// clinicians: def unless -clients was given, which must then be one value
// (false, said on stderr, otherwise).
func clinicians(fs *flag.FlagSet, o *options, def int, scenario string, stderr io.Writer) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "clients" })
	if !given {
		o.Clients = []int{def}
		return true
	}
	if len(o.Clients) != 1 {
		fmt.Fprintf(stderr, "load: %s takes one -clients value (the clinicians)\n", scenario)
		return false
	}
	return true
}

// parseClients parses "8,64".
func parseClients(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("%q is not a number of clients between 1 and 4096", f)
		}
		out = append(out, n)
	}
	return out, nil
}
