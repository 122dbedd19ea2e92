package scrub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/audit"
)

// Defaults of Config.
const (
	// DefaultInterval: the whole log once a day.
	DefaultInterval = 24 * time.Hour
	// DefaultRate is the records checked per second at most: about 5% of
	// one core here (VerifyRange costs ~5 µs of CPU per record), and
	// 864 million records a day, the whole log at 10,000 reads/s.
	DefaultRate = 10000
	// MaxChunk is the largest number of records per read transaction.
	MaxChunk = 1024
	// MaxProblems is the number of problems a Pass keeps (Found counts
	// them all).
	MaxProblems = 20
)

// Action is the audit action of the record a server writes when a pass
// found the log broken (Pass.Entry).
const Action = "audit/integrity"

// Log is what a scrubber needs of the audit log; *audit.Log has it.
// TreeHead gives the size N a pass checks; VerifyRange checks a range of
// records next to the writer (see audit.Log.VerifyRange).
type Log interface {
	TreeHead(ctx context.Context) (int64, tlog.Hash, error)
	VerifyRange(ctx context.Context, ro audit.RangeOptions, report func(audit.Problem)) (audit.Summary, error)
}

// Config configures a Scrubber. Log is required.
type Config struct {
	Log Log
	// Anchored returns the roots of the anchored checkpoints by tree
	// size. It is called at the start of each pass, before the tree head
	// is read (so every size is at most N). An error that matches
	// audit.ErrCorrupt (errors.Is) is an integrity finding — the anchors
	// disagree with each other or with the log (a fork, a rollback) — and
	// its *audit.CorruptError (errors.As), if any, gives the seq and kind
	// reported; any other error stops the pass without a finding. nil
	// means no anchors: only the stored tree is checked.
	Anchored func(ctx context.Context) (map[int64]tlog.Hash, error)
	// Interval is the time between the starts of two passes; 0 means
	// DefaultInterval. The first pass starts when Run does.
	Interval time.Duration
	// Rate is the number of records checked per second at most; 0 means
	// DefaultRate.
	Rate int
	// OnPass, if not nil, is called by Run after every pass (not after a
	// pass cut short by Run's ctx).
	OnPass func(Pass)
	// Logger receives the operational log; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Pass is the outcome of one scrub pass.
type Pass struct {
	Started, Ended time.Time
	// Size is N: the pass checked records 1..N (the tree size when it
	// began); Records is how many it walked.
	Size    int64
	Records uint64
	// Problems are the first MaxProblems problems found, in order; Found
	// counts them all. Found > 0 means the log is broken (Broken).
	Problems []audit.Problem
	Found    int
	// Err is why the pass stopped before a verdict (I/O, unreadable
	// anchors, a closed log, ctx); nil when it ran to the end.
	Err error
}

// Broken reports whether the pass found an integrity problem.
func (p Pass) Broken() bool { return p.Found > 0 }

// OK reports whether the pass verified records 1..Size.
func (p Pass) OK() bool { return p.Err == nil && p.Found == 0 }

// Reason is the audit reason of a broken pass: its first problem's kind
// and seq, the number of problems and the size checked, e.g.
// "kind=hash_mismatch,seq=1234,problems=3,size=50000". "" if not broken.
func (p Pass) Reason() string {
	if !p.Broken() {
		return ""
	}
	first := p.Problems[0]
	return "kind=" + first.Kind + ",seq=" + strconv.FormatUint(first.Seq, 10) +
		",problems=" + strconv.Itoa(p.Found) + ",size=" + strconv.FormatInt(p.Size, 10)
}

// Entry is the audit record of a broken pass: Action, outcome error and
// Reason, by the principal "custos" from the source "scrub". The caller
// adds what its other records carry (keys, policy revision, dev).
func (p Pass) Entry() audit.Entry {
	return audit.Entry{
		Action: Action, Outcome: audit.OutcomeError, Reason: p.Reason(),
		Principal: audit.Principal{Sub: "custos", Roles: []string{}}, Source: "scrub",
		URIs: []string{}, Patients: []string{}, Digests: []string{}, Obligations: []string{},
	}
}

// Scrubber runs passes on a schedule. Create it with New.
type Scrubber struct {
	c   Config
	log *slog.Logger
}

// New checks c and returns a Scrubber.
func New(c Config) (*Scrubber, error) {
	switch {
	case c.Log == nil:
		return nil, errors.New("scrub: Config.Log is required")
	case c.Interval < 0 || c.Rate < 0:
		return nil, errors.New("scrub: negative Interval or Rate")
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scrubber{c: c, log: c.Logger}, nil
}

// Run runs a pass at once, then one every Interval (from start to start),
// until ctx is done; it returns nil then. Each finished pass is logged
// and given to OnPass.
func (s *Scrubber) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		p := s.Pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if s.c.OnPass != nil {
			s.c.OnPass(p)
		}
		took := p.Ended.Sub(p.Started)
		wait := s.c.Interval - took
		if wait < 0 {
			s.log.Warn("audit scrub pass took longer than the scrub interval; starting the next at once (raise the rate or the interval)",
				"took", took.String(), "interval", s.c.Interval.String(), "records", p.Records)
			wait = 0
		}
		t.Reset(wait)
	}
}

// Pass checks records 1..N once, N being the tree size after the anchored
// roots are read, at most Rate records per second, and logs the verdict.
func (s *Scrubber) Pass(ctx context.Context) Pass {
	p := Pass{Started: s.c.Now()}
	p.Err = s.pass(ctx, &p)
	p.Ended = s.c.Now()
	took := p.Ended.Sub(p.Started).String()
	switch {
	case p.Broken():
		for _, pr := range p.Problems {
			s.log.Error("AUDIT LOG INTEGRITY FAILURE: a record, the Merkle tree or an anchored checkpoint does not verify", "seq", pr.Seq, "kind", pr.Kind)
		}
		s.log.Error("AUDIT LOG INTEGRITY FAILURE: scrub pass found the audit log broken", "problems", p.Found, "size", p.Size, "took", took)
	case p.Err != nil && ctx.Err() != nil:
		s.log.Info("audit scrub pass stopped", "size", p.Size, "records", p.Records)
	case p.Err != nil:
		s.log.Error("audit scrub pass could not finish", "size", p.Size, "records", p.Records, "took", took, "err", p.Err)
	default:
		s.log.Info("audit scrub pass verified the log", "size", p.Size, "records", p.Records, "took", took)
	}
	return p
}

func (s *Scrubber) pass(ctx context.Context, p *Pass) error {
	var roots map[int64]tlog.Hash
	if s.c.Anchored != nil {
		var err error
		if roots, err = s.c.Anchored(ctx); err != nil {
			if !errors.Is(err, audit.ErrCorrupt) {
				return fmt.Errorf("reading the anchored checkpoints: %w", err)
			}
			pr := audit.Problem{Kind: audit.KindCheckpointMismatch, Detail: err.Error()}
			var ce *audit.CorruptError
			if errors.As(err, &ce) {
				pr = audit.Problem{Seq: ce.Seq, Kind: ce.Kind, Expected: ce.Expected, Got: ce.Got, Detail: ce.Detail}
			}
			p.add(pr)
			return nil
		}
	}
	size, _, err := s.c.Log.TreeHead(ctx)
	if err != nil {
		return err
	}
	p.Size = size
	if size == 0 {
		return nil
	}
	sum, err := s.c.Log.VerifyRange(ctx, audit.RangeOptions{
		From: 1, To: uint64(size), Roots: roots, Chunk: min(MaxChunk, max(1, s.c.Rate/10)), Pace: audit.Pacer(s.c.Rate),
	}, p.add)
	p.Records = sum.Records
	return err
}

func (p *Pass) add(pr audit.Problem) {
	p.Found++
	if len(p.Problems) < MaxProblems {
		p.Problems = append(p.Problems, pr)
	}
}
