package main

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/app/admin"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/server"
)

// auditorOptions configure the -auditor scenario: clinicians reading
// while an auditor verifies the whole log through the admin socket.
type auditorOptions struct {
	Records int     // records the log holds before serving (appended directly, in batches)
	CPU     float64 // app.AdminOptions.AuditorCPU (0: serve's default)
}

// auditorReport is the -auditor scenario's result: the clinicians' reads
// in slices without an auditor and while one verifies, alternated.
type auditorReport struct {
	Machine  machine `json:"machine"`
	Settings struct {
		Clinicians  int     `json:"clinicians"`
		Rounds      int     `json:"rounds"`
		SliceS      float64 `json:"quiet_slice_s"`
		Prefilled   int     `json:"prefilled_records"`
		AuditorCPU  float64 `json:"auditor_cpu"`
		Resources   int     `json:"resources"`
		Size        int     `json:"size"`
		Description string  `json:"description"`
	} `json:"settings"`
	Quiet     runResult `json:"quiet"`
	Verifying runResult `json:"verifying"`
	// P99Ratio is the clinicians' p99 while an auditor verifies over
	// their p99 without one.
	P99Ratio float64 `json:"p99_ratio"`
	// VerifyS are the verifications' wall times; VerifiedRecords how many
	// records each walked (the log grows during the run).
	VerifyS         []float64  `json:"verify_s"`
	VerifiedRecords []int64    `json:"verified_records"`
	Audit           auditCheck `json:"audit"`
	Pass            bool       `json:"pass"`
}

// prefillBatch is how many records the prefill appends concurrently.
const prefillBatch = 256

// runAuditor runs the -auditor scenario.
func runAuditor(ctx context.Context, o options, ao auditorOptions) (_ *auditorReport, err error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if ao.Records < 0 || ao.CPU < 0 {
		return nil, errors.New("-auditor and -auditor-cpu must not be negative")
	}
	logger, progress := o.sinks()
	dir, cleanup, err := dataDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	clinicians := o.Clients[0]
	rep := &auditorReport{Machine: describeMachine()}
	s := &rep.Settings
	s.Clinicians, s.Rounds, s.SliceS, s.Prefilled, s.AuditorCPU = clinicians, o.Rounds, (o.Duration / time.Duration(o.Rounds)).Seconds(), ao.Records, ao.CPU
	s.Resources, s.Size = o.Resources, o.Size
	s.Description = "custos alone; clinicians read while nothing else runs, then while one auditor runs 'audit verify' over the admin socket (the whole log), alternated"

	cl, err := clinicianSetup(ctx, o, dir, clinicians, logger)
	if err != nil {
		return nil, err
	}
	d, tlsCfg, pool, tokens, tf := cl.d, cl.tlsCfg, cl.pool, cl.tokens, cl.tf
	cs, err := startCustos(ctx, dir, tokens, tf, server.RateLimit{PerSecond: o.RateLimit, Burst: max(1, int(2*o.RateLimit))}, o.AuditBatchDelay, tlsCfg, false, false, logger,
		func(a *app.Options) { a.Admin.AuditorCPU = ao.CPU })
	if err != nil {
		return nil, fmt.Errorf("custos: %w", err)
	}
	defer func() {
		if cerr := cs.close(context.Background()); cerr != nil && err == nil {
			err = cerr
		}
	}()
	fmt.Fprintf(progress, "load: appending %d records to the audit log\n", ao.Records)
	if err := prefill(ctx, cs.app.AuditLog(), ao.Records, d); err != nil {
		return nil, fmt.Errorf("prefill: %w", err)
	}
	fmt.Fprintf(progress, "load: %d clinician(s), %d × (%s without an auditor, one 'audit verify')\n", clinicians, o.Rounds, o.Duration/time.Duration(o.Rounds))
	if err := auditorPhase(ctx, o, cs, dir, clinicians, d, pool, rep); err != nil {
		return nil, err
	}
	if err := cs.close(ctx); err != nil {
		return nil, err
	}
	rep.Audit.ReadsServed = rep.Quiet.TotalReads + rep.Verifying.TotalReads
	rep.Audit.ReadErrors = rep.Quiet.TotalErrors + rep.Verifying.TotalErrors
	if err := countAudit(ctx, cs.audit, &rep.Audit); err != nil {
		return nil, fmt.Errorf("audit verification: %w", err)
	}
	// The prefilled records are reads too: every served read adds one more.
	rep.Audit.Match = rep.Audit.ReadAllow == uint64(rep.Audit.ReadsServed)+uint64(ao.Records)
	rep.Machine.LoadAfter = loadavg()
	rep.Pass = rep.Audit.Match && rep.Audit.Verified && rep.Audit.ReadErrors == 0 && rep.Verifying.Reads > 0
	return rep, nil
}

// prefill appends n records shaped like a clinician's read to l, batches
// of prefillBatch appends in flight (group-committed together).
func prefill(ctx context.Context, l *audit.Log, n int, d dataset) error {
	var wg sync.WaitGroup
	errs := make(chan error, prefillBatch)
	next := make(chan int)
	for range prefillBatch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				k := i % len(d.uris)
				sum := sha256.Sum256([]byte(d.contents[k]))
				pat := sha256.Sum256([]byte(fmt.Sprint("patient", k/10)))
				_, err := l.Append(ctx, audit.Entry{
					Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow, Reason: "clinician_care_team",
					Principal:    audit.Principal{Sub: fmt.Sprintf("clinician-%d", i%64), Roles: []string{"clinician"}, ClientID: "load-bench"},
					PurposeOfUse: "TREAT", Source: "127.0.0.1:0", URIs: []string{d.uris[k]},
					Patients: []string{hex.EncodeToString(pat[:16])}, Digests: []string{"sha256:" + hex.EncodeToString(sum[:]) + "@v1"},
					DecisionID: fmt.Sprintf("prefill-%d", i), PolicyRevision: "builtin", Dev: true,
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
send:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break send
		case <-ctx.Done():
			err = ctx.Err()
			break send
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err != nil {
		return err
	}
	return <-errs
}

// auditorPhase alternates quiet slices and verifications, measuring the
// clinicians' reads in each.
func auditorPhase(ctx context.Context, o options, cs *custosSide, dir string, clinicians int, d dataset, pool *x509.CertPool, rep *auditorReport) (err error) {
	fleets, err := twoFleets(ctx, o, cs, clinicians, d, pool) // quiet, verifying
	defer closeFleets(fleets)
	if err != nil {
		return err
	}
	c, err := admin.Dial(ctx, admin.Path(dir))
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	defer c.Close()
	slice := o.Duration / time.Duration(o.Rounds)
	for round := range o.Rounds {
		if err := fleets[0].slice(ctx, slice, true, d, uint64(round)<<8); err != nil {
			return err
		}
		done := make(chan struct{})
		var verr error
		var walked int64
		start := time.Now()
		go func() {
			defer close(done)
			var res access.VerifyResult
			_, verr = c.DoProgress(ctx, access.OpVerify, access.VerifyRequest{Ask: access.Ask{By: "load-bench", Purpose: "HOPERAT"}},
				func(r io.Reader) error { return json.NewDecoder(r).Decode(&res) },
				func(p access.Progress) { walked = p.Done })
			if verr == nil && !res.OK {
				verr = fmt.Errorf("the log did not verify: %d problem(s)", len(res.Problems))
			}
		}()
		if err := fleets[1].sliceUntil(ctx, done, true, d, uint64(round)<<8|1); err != nil {
			<-done
			return err
		}
		if verr != nil {
			return fmt.Errorf("audit verify: %w", verr)
		}
		rep.VerifyS = append(rep.VerifyS, time.Since(start).Seconds())
		rep.VerifiedRecords = append(rep.VerifiedRecords, walked)
	}
	rep.Quiet, rep.Verifying = fleets[0].result(), fleets[1].result()
	rep.Quiet.Server, rep.Verifying.Server = "quiet", "verifying"
	if rep.Quiet.P99ms > 0 {
		rep.P99Ratio = rep.Verifying.P99ms / rep.Quiet.P99ms
	}
	return nil
}

func (r *auditorReport) print(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "machine: %d CPU (%s), %.0f GiB, %s %s; load average %s before, %s after\n", m.NumCPU, m.CPU, m.MemGiB, m.Go, m.OS, m.LoadBefore, m.LoadAfter)
	s := r.Settings
	fmt.Fprintf(w, "auditor: %s\n", s.Description)
	cpu := "serve's default"
	if s.AuditorCPU > 0 {
		cpu = fmt.Sprint(s.AuditorCPU)
	}
	fmt.Fprintf(w, "log: %d records appended before serving; auditor CPU share: %s; %d clinician(s), %d rounds, %.1fs quiet slices\n\n", s.Prefilled, cpu, s.Clinicians, s.Rounds, s.SliceS)
	fmt.Fprintf(w, "%-10s %9s %9s %9s %9s %9s %7s\n", "slices", "reads/s", "p50", "p90", "p99", "max", "errors")
	for _, x := range []runResult{r.Quiet, r.Verifying} {
		fmt.Fprintf(w, "%-10s %9.1f %9s %9s %9s %9s %7d\n", x.Server, x.ReadsPerSec, fmtMs(x.P50ms), fmtMs(x.P90ms), fmtMs(x.P99ms), fmtMs(x.MaxMs), x.Errors)
	}
	fmt.Fprintf(w, "\nclinicians' p99 verifying/quiet: %.2f\n", r.P99Ratio)
	for i, v := range r.VerifyS {
		fmt.Fprintf(w, "verify %d: %.2f s, %d records (%.0f records/s)\n", i+1, v, r.VerifiedRecords[i], float64(r.VerifiedRecords[i])/v)
	}
	a := r.Audit
	fmt.Fprintf(w, "\naudit: %d records, verified: %v (%d problems); resources/read allow records %d for %d reads served (%d failed) + %d prefilled\n", a.Records, a.Verified, a.Problems, a.ReadAllow, a.ReadsServed, a.ReadErrors, s.Prefilled)
	fmt.Fprintf(w, "result: %s\n", map[bool]string{true: "PASS", false: "FAIL"}[r.Pass])
}

func (r *auditorReport) passed() bool { return r.Pass }
