package server

import (
	"testing"
	"time"
)

func TestLimiterPerPrincipal(t *testing.T) {
	l := newLimiter(RateLimit{PerSecond: 2, Burst: 3})
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := range 3 {
		if !l.allow("a", now) {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	if l.allow("a", now) {
		t.Fatal("a request beyond the burst was allowed")
	}
	if !l.allow("b", now) {
		t.Fatal("one principal's bucket limited another")
	}
	if !l.allow("a", now.Add(600*time.Millisecond)) {
		t.Fatal("the bucket did not refill")
	}
	// Idle buckets are dropped.
	l.allow("a", now.Add(20*time.Minute))
	if _, ok := l.m["b"]; ok {
		t.Fatal("an idle bucket was kept")
	}
}
