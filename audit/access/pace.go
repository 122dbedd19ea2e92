package access

import (
	"context"
	"sync"
	"time"
)

// A budget is the share of one CPU that all the paced walks of one
// Service (one server's auditors) use together: two auditors at once get
// half of it each, not the share each. It books every walk's busy
// stretches on one schedule, at share: a stretch busy for b costs the
// wall time one walk alone would take for it, b + restFor(b, share) (b
// at most maxBusy: a stalled stretch is not shared), and starts no
// earlier than the previous stretch's cost was paid (free). A
// walk rests until its stretch is paid, so the walks together are busy
// about share of the wall time, and one walk alone rests exactly as
// restFor says; a walk that stops while it rests gives back the rest it
// did not take (refund). A nil *budget does not pace.
type budget struct {
	share float64
	mu    sync.Mutex
	free  time.Time // when the stretches booked so far are paid
}

// newBudget returns the budget of a Service paced at share (nil: share is
// not in (0, 1), no pacing).
func newBudget(share float64) *budget {
	if share <= 0 || share >= 1 {
		return nil
	}
	return &budget{share: share}
}

// book books a stretch busy for busy that ended at end and returns when
// it is paid: the walk rests until then. A stretch counts at most maxRest
// of busy time (maxBusy): one longer was slowed by something other than
// the walk's work (a stalled disk, a stopped process, a slow reader of an
// export's output), as maxRest says, and booking all of it made every
// walk sharing the budget rest as long again (a 10 s stall, 10 s).
func (b *budget) book(busy time.Duration, end time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if start := end.Add(-min(busy, maxBusy)); b.free.Before(start) {
		b.free = start // nothing booked is unpaid: the stretch starts the schedule
	}
	b.free = b.free.Add(b.cost(busy))
	return b.free
}

// cost is what a stretch busy for busy takes of the schedule: its charged
// busy time and its rest. The time from its end until it is paid may be
// longer: the rest before it pays for stretches booked earlier.
func (b *budget) cost(busy time.Duration) time.Duration {
	return min(busy, maxBusy) + restFor(busy, b.share)
}

// refund gives back the part of a stretch of cost cost, paid at paid, that
// its walk did not rest: the walk stopped resting at at (its caller went
// away, or the Service closed) and will not walk on, so the part of its
// stretch past at is no one's: at most cost, the stretch's own. The rest
// before the stretch paid for stretches booked before it, and their walks
// give back what they did not take themselves: refunding it too counted
// it twice when two walks stopped at once (every walk does at Close; two
// auditors' callers can go away together), and a third walk sharing the
// budget then rested too little. Walks booked after it keep the rests
// they were given; the next booking starts that much earlier.
func (b *budget) refund(paid time.Time, cost time.Duration, at time.Time) {
	if !paid.After(at) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free = b.free.Add(-min(paid.Sub(at), cost))
}

// A pacer keeps one auditor operation's walk of the log within its
// Service's budget while a server serves beside it (Service.Pace): after
// each chunk the walk has done (a verify or export chunk, a bundle's
// part: between read transactions, never inside one) it rests until the
// chunk is paid on the budget's schedule: for the time the chunk took
// scaled by (1-share)/share when it walks alone, longer while other walks
// share the budget. The time is wall time, so a walk that waited for a CPU
// the server's reads held rests longer: under contention the auditor backs
// off further. A nil *pacer does not pace.
type pacer struct {
	ctx    context.Context
	budget *budget
	since  time.Time // start of the current busy stretch
	now    func() time.Time
}

// maxRest bounds the rest one walk alone makes after a chunk, so that a
// chunk slowed by something else (a stalled disk, a stopped process) does
// not make the walk sleep for as long again. Walks sharing a budget rest
// up to maxBusy + maxRest for each of the others' chunks too.
const maxRest = 250 * time.Millisecond

// maxBusy bounds the busy time one chunk books on a budget (budget.book):
// a chunk of records takes milliseconds; one that took longer waited for
// something else, which is no CPU the walks share.
const maxBusy = maxRest

// restFor is how long a walk that was busy for busy rests to use share of
// one CPU: busy × (1-share)/share, at most maxRest. share outside (0, 1)
// is no pacing (0).
func restFor(busy time.Duration, share float64) time.Duration {
	if share <= 0 || share >= 1 || busy <= 0 {
		return 0
	}
	return min(time.Duration(float64(busy)*(1-share)/share), maxRest)
}

// newPacer returns the pacer of one operation run under ctx on budget b
// (nil: b is nil, no pacing).
func newPacer(ctx context.Context, b *budget, now func() time.Time) *pacer {
	if b == nil {
		return nil
	}
	return &pacer{ctx: ctx, budget: b, since: now(), now: now}
}

// rest ends a busy stretch: it books it on the budget, sleeps until it is
// paid (or until ctx is done: the walk then stops at its next check of
// ctx, and the rest not taken is refunded) and starts the next.
func (p *pacer) rest() {
	if p == nil {
		return
	}
	end := p.now()
	busy := end.Sub(p.since)
	paid := p.budget.book(busy, end)
	if d := paid.Sub(end); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			p.budget.refund(paid, p.budget.cost(busy), p.now())
		}
	}
	p.since = p.now()
}
