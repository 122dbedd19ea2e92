package access

import (
	"context"
	"testing"
	"time"
)

// TestRestFor: a walk busy for b rests b × (1-share)/share, at most
// maxRest; a share outside (0, 1) is no pacing.
func TestRestFor(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		busy  time.Duration
		share float64
		want  time.Duration
	}{
		{10 * ms, 0.5, 10 * ms},
		{10 * ms, 0.25, 30 * ms},
		{10 * ms, 0.75, 10 * ms / 3},
		{10 * ms, 0.01, maxRest}, // 990 ms, bounded
		{10 * ms, 1, 0},
		{10 * ms, 2, 0},
		{10 * ms, 0, 0},
		{10 * ms, -0.5, 0},
		{0, 0.5, 0},
		{-ms, 0.5, 0},
	} {
		if got := restFor(c.busy, c.share); got != c.want {
			t.Errorf("restFor(%v, %g) = %v, want %v", c.busy, c.share, got, c.want)
		}
	}
}

// TestPacerRestsForItsBusyStretch: rest sleeps for the stretch since the
// previous rest (its clock's: real time plus the busy time the test
// adds), and starts the next stretch when it wakes.
func TestPacerRestsForItsBusyStretch(t *testing.T) {
	if newPacer(context.Background(), newBudget(1), time.Now) != nil || newPacer(context.Background(), newBudget(0), time.Now) != nil {
		t.Fatal("a share of 0 or 1 made a pacer")
	}
	var p *pacer
	p.rest() // nil: no pacing, no panic
	t0, busy := time.Now(), time.Duration(0)
	now := func() time.Time { return t0.Add(time.Since(t0) + busy) }
	p = newPacer(context.Background(), newBudget(0.5), now)
	busy = 40 * time.Millisecond
	start := time.Now()
	p.rest()
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Errorf("rested %v after 40 ms busy at share 0.5, want 40 ms", el)
	}
	if woke := now(); p.since.After(woke) || woke.Sub(p.since) > 20*time.Millisecond {
		t.Errorf("the next stretch starts at %v, want when the rest ended (%v)", p.since, woke)
	}
	start = time.Now()
	p.rest() // busy 0 since: no rest
	if el := time.Since(start); el > 20*time.Millisecond {
		t.Errorf("rested %v after no work", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p = newPacer(ctx, newBudget(0.001), now)
	busy += time.Second // would rest maxRest
	cancel()
	start = time.Now()
	p.rest()
	if el := time.Since(start); el >= maxRest {
		t.Errorf("a cancelled pacer rested %v", el)
	}
}

// TestBudgetIsShared: stretches booked on one budget are paid one after
// the other at its share: one walk alone rests restFor, two walks busy at
// the same time rest until both are paid (the second twice as long), and
// a budget idle for a while starts afresh.
func TestBudgetIsShared(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	b := newBudget(0.5)
	if got := b.book(10*ms, t0.Add(10*ms)); !got.Equal(t0.Add(20 * ms)) {
		t.Errorf("alone: paid at %v, want t0+20ms", got.Sub(t0))
	}
	// Two walks, each busy 10 ms from t0+20ms.
	end := t0.Add(30 * ms)
	a, c := b.book(10*ms, end), b.book(10*ms, end)
	if !a.Equal(t0.Add(40*ms)) || !c.Equal(t0.Add(60*ms)) {
		t.Errorf("together: paid at %v and %v, want t0+40ms and t0+60ms (20 ms busy at 0.5 is 40 ms)", a.Sub(t0), c.Sub(t0))
	}
	if got := b.book(10*ms, t0.Add(time.Second)); !got.Equal(t0.Add(time.Second + 10*ms)) {
		t.Errorf("after an idle second: paid at %v, want t0+1.01s", got.Sub(t0))
	}
}

// TestBudgetBoundsAStalledStretch: a stretch slowed by something other
// than the walk's work (a stalled disk, a stopped process, a slow reader
// of an export's output) costs the budget at most maxRest of busy time,
// as a walk alone rests at most maxRest after it: a walk sharing the
// budget rests at most maxRest + maxRest for it, and so does the walk
// that stalled. Before, the whole stall was booked: when another walk
// had booked the schedule up to now, a 10 s stall made both walks rest
// about 10 s more.
func TestBudgetBoundsAStalledStretch(t *testing.T) {
	ms, t0, b := time.Millisecond, time.Unix(1000, 0), newBudget(0.5)
	b.book(10*ms, t0.Add(10*ms)) // walk B, busy 10 ms from t0: paid at t0+20ms
	// Walk A, whose chunk stalled 10 s, ends it at t0+20ms.
	end := t0.Add(20 * ms)
	if rest := b.book(10*time.Second, end).Sub(end); rest > 2*maxRest {
		t.Errorf("the stalled walk rests %v, want at most %v", rest, 2*maxRest)
	}
	// B's next chunk, 10 ms busy to t0+30ms.
	end = t0.Add(30 * ms)
	if rest := b.book(10*ms, end).Sub(end); rest > 2*maxRest+20*ms {
		t.Errorf("a walk sharing the budget rests %v after another's stalled chunk, want at most %v", rest, 2*maxRest+20*ms)
	}
	// Alone, the stalled walk rests maxRest, as before.
	b = newBudget(0.5)
	end = t0.Add(10 * time.Second)
	if rest := b.book(10*time.Second, end).Sub(end); rest != maxRest {
		t.Errorf("alone after a stalled chunk: rests %v, want %v", rest, maxRest)
	}
}

// TestCancelledRestIsRefunded: a walk whose caller goes away while it
// rests gives the budget back the rest it booked and did not take, so
// the next walk on the budget rests as one alone would. Before, the whole
// booked rest stayed on the schedule: a walk after one cancelled 20 ms
// into a 200 ms rest rested about 190 ms for 10 ms of work at 0.5.
func TestCancelledRestIsRefunded(t *testing.T) {
	t0, busy := time.Now(), time.Duration(0)
	now := func() time.Time { return t0.Add(time.Since(t0) + busy) }
	b := newBudget(0.5)
	ctx, cancel := context.WithCancel(context.Background())
	p := newPacer(ctx, b, now)
	busy = 200 * time.Millisecond // books a 200 ms rest at 0.5
	stop := time.AfterFunc(20*time.Millisecond, cancel)
	defer stop.Stop()
	start := time.Now()
	p.rest()
	if el := time.Since(start); el >= 150*time.Millisecond {
		t.Fatalf("a cancelled rest took %v", el)
	}
	q := newPacer(context.Background(), b, now)
	busy += 10 * time.Millisecond
	start = time.Now()
	q.rest()
	if el := time.Since(start); el >= 100*time.Millisecond {
		t.Errorf("after a walk cancelled while it rested, 10 ms of work at 0.5 rested %v, want about 10 ms (the cancelled walk's unused rest given back)", el)
	}
}

// TestTwoWalksStoppedTogetherRefundOnce: walks A, B and C each book 10 ms
// of work at 0.5 at once: paid at 20, 40 and 60 ms, their stretches on
// the schedule [0, 20], [20, 40], [40, 60]. A and B stop at 10 ms (their
// callers went away, or the Service closed): A gives back 10 ms (its rest
// not taken), B its whole stretch, 20 ms, not the 30 ms until it was paid
// (10 ms of which is A's, given back by A already). A walk D booking 10
// ms then is paid at 30 + 20 = 50 ms. The refund counted A's rest twice:
// D was paid at 40 ms and, with C still walking, the walks together used
// more than their share.
func TestTwoWalksStoppedTogetherRefundOnce(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	b := newBudget(0.5)
	end := t0.Add(10 * ms)
	var paid [3]time.Time
	for i := range paid {
		paid[i] = b.book(10*ms, end)
	}
	if want := t0.Add(60 * ms); !paid[2].Equal(want) {
		t.Fatalf("the third stretch is paid at %v, want %v", paid[2].Sub(t0), want.Sub(t0))
	}
	for _, p := range paid[:2] {
		b.refund(p, b.cost(10*ms), end)
	}
	if got, want := b.book(10*ms, end), t0.Add(50*ms); !got.Equal(want) {
		t.Errorf("after two walks stopped at 10 ms, a new stretch is paid at %v, want %v", got.Sub(t0), want.Sub(t0))
	}
}
