package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// messagesIn counts a batch's messages whatever whitespace leads it, 1 for
// anything else, and leaves the body readable in full.
func TestMessagesIn(t *testing.T) {
	for _, c := range []struct {
		body string
		want int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 1},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, 2},
		{strings.Repeat(" \t\r\n", 300) + `[{},{},{}]`, 3},
		{`[]`, 1},
		{`[{},`, 1},
		{``, 1},
		{`   `, 1},
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(c.body))
		if got := messagesIn(r); got != c.want {
			t.Errorf("messagesIn(%.40q) = %d, want %d", c.body, got, c.want)
		}
		if rest, _ := io.ReadAll(r.Body); string(rest) != c.body {
			t.Errorf("body %.40q read back as %.40q", c.body, rest)
		}
	}
}
