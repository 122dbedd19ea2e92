package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/audit/scrub"
	"github.com/custos-mcp/custos/server/ops"
)

// Continuous integrity of the audit log (docs/operations.md, "Continuous
// integrity"): at startup every record after the last anchored checkpoint
// is verified before anything is served (verifySuffix); while serving, a
// scrubber re-verifies the whole log on a schedule (startScrub). A break
// found by the scrubber latches the App's integrity guard: /readyz is not
// ready, custos_audit_integrity_ok is 0, an audit/integrity record naming
// the seq is appended, and every later append of the server is refused with
// audit.ErrIntegrity, so nothing more is released until an operator has
// investigated and restarted.

// integrity is the guard the server's appends pass (checkpointedLog): nil
// until a scrub pass finds the log broken, then that pass's first problem.
type integrity struct {
	mu     sync.Mutex
	broken *audit.Problem
}

// check returns nil while the log is intact, else an error matching
// audit.ErrIntegrity that names the record (never its contents).
func (g *integrity) check() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.broken == nil {
		return nil
	}
	return fmt.Errorf("%w: %s at seq %d; nothing is released until an operator has investigated and restarted", audit.ErrIntegrity, g.broken.Kind, g.broken.Seq)
}

// latch records p as the break, if none was recorded yet.
func (g *integrity) latch(p audit.Problem) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.broken == nil {
		g.broken = &p
	}
}

// maxSuffixProblems bounds the problems a refused startup lists.
const maxSuffixProblems = 5

// verifySuffix verifies, before anything is served, every record after
// the last anchored checkpoint (from the record at its size, so that the
// suffix is proven to extend the anchored tree), and refuses to serve,
// naming the records, if one does not verify. entries have passed
// checkpoint.CheckAgainst. With no checkpoint anchored yet the whole log is
// verified.
func (a *App) verifySuffix(ctx context.Context, entries []checkpoint.Entry) error {
	head, _ := a.audit.Head()
	var last checkpoint.Entry
	for _, e := range entries {
		if e.Size > last.Size {
			last = e
		}
	}
	from := uint64(max(last.Size, 1))
	if head < from {
		// An empty log: nothing to verify, nothing broken (the gauge
		// starts at 0, and would read as a broken log until a restart).
		a.metrics.SetAuditIntegrity(true)
		return nil
	}
	roots := map[int64]tlog.Hash{}
	if last.Size > 0 {
		roots[last.Size] = last.Root
	}
	start := time.Now()
	var problems []string
	sum, err := a.audit.VerifyRange(ctx, audit.RangeOptions{From: from, To: head, Roots: roots}, func(p audit.Problem) {
		if len(problems) < maxSuffixProblems {
			problems = append(problems, p.String())
		}
	})
	if err != nil {
		return fmt.Errorf("verifying the audit records after the last anchored checkpoint: %w", err)
	}
	if sum.Problems > 0 {
		a.log.Error("AUDIT LOG INTEGRITY FAILURE at startup: a record after the last anchored checkpoint does not verify; refusing to serve",
			"from", from, "to", head, "problems", sum.Problems)
		return fmt.Errorf("%w: records %d..%d after the last anchored checkpoint (size %d) do not verify (%d problem(s)); refusing to serve: %s",
			audit.ErrCorrupt, from, head, last.Size, sum.Problems, strings.Join(problems, "; "))
	}
	a.metrics.SetAuditIntegrity(true)
	a.log.Info("audit records after the last anchored checkpoint verified", "from", from, "to", head, "anchored_size", last.Size, "took", time.Since(start).String())
	return nil
}

// anchoredRoots is the scrubber's view of the anchors: it reads them
// again (the checkpointer appends to them), checks the log against them as
// startup does, and returns their roots by size. A disagreement (a fork, a
// rollback, an inconsistent tree, a bad signature, a corrupt anchor line)
// is returned as an *audit.CorruptError, an integrity finding; a failure
// to read them (a torn last line read while the checkpointer appends,
// twice in a row; I/O) is not.
func (a *App) anchoredRoots(ctx context.Context) (map[int64]tlog.Hash, error) {
	entries, err := checkpoint.Load(a.anchors...)
	if errors.Is(err, checkpoint.ErrTorn) {
		time.Sleep(100 * time.Millisecond) // the checkpointer may be writing the line
		entries, err = checkpoint.Load(a.anchors...)
	}
	if err == nil {
		err = checkpoint.CheckAgainst(ctx, a.audit, entries, a.verifiers)
	}
	for _, integrity := range []error{checkpoint.ErrFork, checkpoint.ErrRolledBack, checkpoint.ErrInconsistent,
		checkpoint.ErrBadSignature, checkpoint.ErrBadCheckpoint, checkpoint.ErrCorruptAnchor} {
		if errors.Is(err, integrity) {
			ce := &audit.CorruptError{Kind: audit.KindCheckpointMismatch, Detail: err.Error()}
			var fork *checkpoint.ForkError
			if errors.As(err, &fork) {
				ce.Seq = uint64(fork.Size)
			}
			return nil, ce
		}
	}
	if err != nil {
		return nil, err
	}
	roots := make(map[int64]tlog.Hash, len(entries))
	for _, e := range entries {
		roots[e.Size] = e.Root
	}
	return roots, nil
}

// startScrub starts the background scrubber (stopped by Close).
func (a *App) startScrub() error {
	s, err := scrub.New(scrub.Config{
		Log: a.audit, Anchored: a.anchoredRoots, Interval: a.o.Scrub.Interval, Rate: a.o.Scrub.Rate,
		OnPass: a.scrubbed, Logger: a.log,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	a.stopScrub = func() { cancel(); <-done }
	return nil
}

// scrubbed acts on a scrub pass: metrics always; for a broken log, the
// guard is latched (every later append refused), and an audit/integrity
// record naming the first problem's seq and kind is appended to the same
// log and anchored (the chain continues; the evidence stays).
func (a *App) scrubbed(p scrub.Pass) {
	switch {
	case p.Broken():
		a.metrics.ScrubFailed()
		a.metrics.SetAuditIntegrity(false)
		a.guard.latch(p.Problems[0])
		e := p.Entry()
		e.Dev, e.Keys, e.PolicyRevision = a.keys.Dev(), a.keys.KeyIDs(), a.policy.Revision()
		rec, err := a.audit.Append(context.Background(), e)
		if err != nil {
			a.log.Error("AUDIT LOG INTEGRITY FAILURE could not be recorded in the audit log", "seq", p.Problems[0].Seq, "kind", p.Problems[0].Kind, "err", err)
		} else {
			a.ckpt.Notify(int64(rec.Seq))
		}
		a.log.Error("AUDIT LOG INTEGRITY FAILURE: reads and lists are refused until an operator has investigated and restarted (docs/operations.md, Continuous integrity)",
			"seq", p.Problems[0].Seq, "kind", p.Problems[0].Kind, "problems", p.Found, "recorded_at_seq", rec.Seq)
	case p.Err != nil:
		a.metrics.ScrubFailed()
	default:
		a.metrics.ScrubSucceeded(p.Ended)
	}
}

// integrityCheck is the readiness check "integrity": failing, with the
// seq and kind, once the guard is latched.
func (a *App) integrityCheck(context.Context) error {
	a.guard.mu.Lock()
	defer a.guard.mu.Unlock()
	if b := a.guard.broken; b != nil {
		return ops.NewSafeError(fmt.Sprintf("audit log broken: %s at seq %d", b.Kind, b.Seq))
	}
	return nil
}
