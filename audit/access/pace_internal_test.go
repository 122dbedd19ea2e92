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
// previous rest (its clock's), and starts the next stretch when it wakes.
func TestPacerRestsForItsBusyStretch(t *testing.T) {
	if newPacer(context.Background(), 1, time.Now) != nil || newPacer(context.Background(), 0, time.Now) != nil {
		t.Fatal("a share of 0 or 1 made a pacer")
	}
	var p *pacer
	p.rest() // nil: no pacing, no panic
	clock := time.Unix(0, 0)
	now := func() time.Time { return clock }
	p = newPacer(context.Background(), 0.5, now)
	clock = clock.Add(40 * time.Millisecond) // busy 40 ms
	start := time.Now()
	p.rest()
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Errorf("rested %v after 40 ms busy at share 0.5, want 40 ms", el)
	}
	if !p.since.Equal(clock) {
		t.Errorf("the next stretch starts at %v, want %v", p.since, clock)
	}
	start = time.Now()
	p.rest() // busy 0 since: no rest
	if el := time.Since(start); el > 20*time.Millisecond {
		t.Errorf("rested %v after no work", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p = newPacer(ctx, 0.001, now)
	clock = clock.Add(time.Second) // would rest maxRest
	cancel()
	start = time.Now()
	p.rest()
	if el := time.Since(start); el >= maxRest {
		t.Errorf("a cancelled pacer rested %v", el)
	}
}
