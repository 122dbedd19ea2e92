package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/time/rate"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/server/clientaddr"
	"github.com/custos-mcp/custos/server/ops"
)

// ActionRateLimited is the audit action of a request refused with 429.
const ActionRateLimited = "http/rate_limited"

// RateLimit is a per-principal token bucket: PerSecond requests on average,
// bursts of up to Burst. A zero PerSecond disables it.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// limiter holds one bucket per principal, dropping idle ones.
type limiter struct {
	rl   RateLimit
	mu   sync.Mutex
	m    map[string]*bucket
	swep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiter(rl RateLimit) *limiter {
	return &limiter{rl: rl, m: map[string]*bucket{}}
}

// allow takes a token from key's bucket.
func (l *limiter) allow(key string, now time.Time) bool { return l.allowN(key, now, 1) }

// allowN takes n tokens from key's bucket, or none: n over the burst is
// never allowed.
func (l *limiter) allowN(key string, now time.Time, n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swep) > time.Minute {
		for k, b := range l.m {
			if now.Sub(b.seen) > 10*time.Minute {
				delete(l.m, k)
			}
		}
		l.swep = now
	}
	b, ok := l.m[key]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.rl.PerSecond), max(1, l.rl.Burst))}
		l.m[key] = b
	}
	b.seen = now
	return b.lim.AllowN(now, n)
}

// messagesIn is the number of JSON-RPC messages r carries: the length of a
// POST's batch (revision 2025-03-26; later ones refuse batches, but a client
// may negotiate it), 1 for any other request. A body whose first byte after
// whitespace is not '[' is read no further than that byte (opensBatch)
// unless a check before already read it into its memo; a batch is read
// through the memo (bodyOf), which the checks after the rate limit then
// share. The body stays readable in full.
func messagesIn(r *http.Request) int {
	if r.Method != http.MethodPost || r.Body == nil {
		return 1
	}
	if p, ok := r.Body.(*peekedBody); !(ok && !p.read) && !opensBatch(r) {
		// Not read yet, and no batch: a principal past its bucket is
		// refused without its body being read (up to 1 MiB each time,
		// until h-review49: TestRateLimitRefusesWithoutReadingTheBody).
		return 1
	}
	m := peekMessage(r)
	if m == nil {
		return 1 // refused further on (too large, unreadable)
	}
	if t := bytes.TrimLeft(m.b, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return 1
	}
	raws, _, err := m.batch()
	if err != nil {
		return 1 // refused further on (not JSON)
	}
	return max(1, len(raws))
}

// opensBatch reads r's body up to its first byte that is not whitespace
// and reports whether that byte is '[' (false at an error or the end),
// leaving the body readable in full.
func opensBatch(r *http.Request) bool {
	// Byte by byte: the body is buffered below (net/http), and most
	// bodies start with '{'.
	var one [1]byte
	var head []byte // what was read of the body, given back below
	c, err := byte(0), error(nil)
	for len(head) <= maxBody {
		var n int
		n, err = r.Body.Read(one[:])
		if n == 1 {
			c = one[0]
			head = append(head, c)
			if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
				continue
			}
			err = nil // this byte decides, whatever follows it
			break
		}
		if err != nil {
			break
		}
	}
	r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	return err == nil && c == '['
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// rateLimited refuses a principal's requests beyond its bucket with 429 and
// Retry-After. It runs after token verification (the principal is the
// token's sub, tenant and client, as for sessions). Refusals are recorded as refusals anyone can cause are
// (refusals.go: the first of its kind in a window on its own, the rest in
// one aggregate record): a client retrying at once in a loop is refused
// thousands of times a second, and one fsync'd record each would fill the
// audit volume and stall every other caller's commits.
func (s *Server) rateLimited(next http.Handler) http.Handler {
	if s.cfg.RateLimit.PerSecond <= 0 {
		return next
	}
	l := newLimiter(s.cfg.RateLimit)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The bucket is the principal's as a session is bound to it
		// (sessionOwner: sub, tenant and client). Keyed by the sub alone,
		// a token of the same sub in another tenant, or through another
		// client, emptied the bucket of every other such principal
		// (TestRateLimitBucketIsPerPrincipal), and the refusal was recorded
		// naming the sub only, without the caller's client or roles.
		var who policy.Principal
		ti := auth.TokenInfoFromContext(r.Context())
		if ti != nil {
			who = principalOf(ti)
		}
		o := ownerOf(ti)
		key := strconv.Quote(o.sub) + " " + strconv.Quote(o.tenant) + " " + strconv.Quote(o.client)
		// A batch costs one token per message: it runs each, and one
		// request of a 1 MiB batch was thousands of decided, audited reads.
		n := messagesIn(r)
		if l.allowN(key, time.Now(), n) {
			next.ServeHTTP(w, r)
			return
		}
		s.cfg.Metrics.RateLimited(ops.LimitPrincipal)
		e := s.entry(context.Background(), Identity{Principal: who, Source: clientaddr.Of(r)}, ActionRateLimited)
		if err := s.refuseCounted(context.Background(), e, audit.OutcomeDeny, withTenant(ReasonRateLimited, who.Tenant), nil); err != nil {
			s.log.Error("auditing a rate-limit refusal failed", "err", err)
		}
		w.Header().Set("Retry-After", "1")
		if n > max(1, l.rl.Burst) {
			http.Error(w, fmt.Sprintf("rate limit exceeded: a batch of %d messages is more than the %d a principal may send at once; send smaller batches", n, max(1, l.rl.Burst)), http.StatusTooManyRequests)
			return
		}
		http.Error(w, "rate limit exceeded: retry later", http.StatusTooManyRequests)
	})
}
