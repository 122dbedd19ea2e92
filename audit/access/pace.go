package access

import (
	"context"
	"time"
)

// A pacer keeps one auditor operation's walk of the log to about share of
// one CPU while a server serves beside it (Service.Pace): after each chunk
// the walk has done (a verify or export chunk, a bundle's part: between
// read transactions, never inside one) it rests for the time the chunk
// took scaled by (1-share)/share. The time is wall time, so a walk that
// waited for a CPU the server's reads held rests longer: under contention
// the auditor backs off further. A nil *pacer does not pace.
type pacer struct {
	ctx   context.Context
	share float64
	since time.Time // start of the current busy stretch
	now   func() time.Time
}

// maxRest bounds one rest, so that a chunk slowed by something else (a
// stalled disk, a stopped process) does not make the walk sleep for as
// long again.
const maxRest = 250 * time.Millisecond

// restFor is how long a walk that was busy for busy rests to use share of
// one CPU: busy × (1-share)/share, at most maxRest. share outside (0, 1)
// is no pacing (0).
func restFor(busy time.Duration, share float64) time.Duration {
	if share <= 0 || share >= 1 || busy <= 0 {
		return 0
	}
	return min(time.Duration(float64(busy)*(1-share)/share), maxRest)
}

// newPacer returns the pacer of one operation run under ctx (nil: share
// is not in (0, 1), no pacing).
func newPacer(ctx context.Context, share float64, now func() time.Time) *pacer {
	if share <= 0 || share >= 1 {
		return nil
	}
	return &pacer{ctx: ctx, share: share, since: now(), now: now}
}

// rest ends a busy stretch: it sleeps restFor it (or until ctx is done;
// the walk then stops at its next check of ctx) and starts the next.
func (p *pacer) rest() {
	if p == nil {
		return
	}
	if d := restFor(p.now().Sub(p.since), p.share); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
		}
	}
	p.since = p.now()
}
