package server

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/custos-mcp/custos/audit"
)

// Refusals that anyone can cause (a request without a token, with a bad
// one, from another origin, a read while the audit volume is low, one
// session too many) must not each cost an fsync'd audit record: 11,781
// unauthenticated requests in 12 s once filled a 12 MiB audit volume, and
// then every clinician read was refused. They are recorded in aggregate:
//
//   - within one window (RefusalLimits.Window), the first refusal of each
//     kind — action, source address, principal and reason — is recorded on
//     its own, as before, so a single failed login stays visible; at most
//     maxIndividual refusals per window are recorded so, server-wide;
//   - every further one is counted, and at the end of the window (or on
//     Close) each kind counted is written as one aggregate record: the
//     same action, source, principal and reason, the reason followed by
//     ",aggregate,count=N,window=START/END" (docs/audit-format.md);
//   - failed authentications are also counted per source (an IPv4
//     address, or an IPv6 /64: limitKey): beyond RefusalLimits.PerSource in
//     one window, that source's failing requests are answered 429 (counted
//     in the aggregate, no record of their own).
//
// At most maxKinds kinds and maxSources sources are tracked per window;
// beyond that, refusals are counted under the source "other" (and no
// principal), so memory and records per window stay bounded whatever the
// number of addresses an attacker uses, and sources beyond the table are
// not limited (see failedAuth: a limit shared by unrelated addresses would
// lock the innocent out). Every refusal is still counted in the metrics,
// one by one.

// RefusalLimits bound what refusals anyone can cause cost the audit log.
// The zero value means the defaults.
type RefusalLimits struct {
	// Window is the aggregation window; 0 means DefaultRefusalWindow.
	Window time.Duration
	// PerSource is how many failed authentications one source (an IPv4
	// address or an IPv6 /64) may make in one Window before its failing
	// requests are answered 429; 0 means DefaultRefusalsPerSource.
	PerSource int
}

// Defaults of RefusalLimits and the server-wide bounds of aggregation.
const (
	DefaultRefusalWindow     = time.Minute
	DefaultRefusalsPerSource = 30
	// maxIndividual bounds the refusals recorded one by one per window.
	maxIndividual = 64
	// maxKinds and maxSources bound the state kept per window.
	maxKinds   = 4096
	maxSources = 4096
)

// aggregateSource is the source of refusals counted once the tables of a
// window are full.
const aggregateSource = "other"

// refusalKind is what one aggregate record counts: refusals alike in
// everything the record says. The principal is all of what the record
// names (sub, client_id, roles), not the sub alone, which had one sub's
// refusals through another client counted into the aggregate naming the
// first client.
type refusalKind struct {
	action, outcome, source, sub, client, roles, reason string
}

// refusals aggregates refusals (see above). Its flusher starts with the
// first refusal counted and stops on close.
type refusals struct {
	s      *Server
	window time.Duration
	per    int

	mu         sync.Mutex
	start      time.Time                     // of the current window
	kinds      map[refusalKind]*refusalTally // kinds seen in the window
	sources    map[string]int                // failed authentications per source
	individual int                           // refusals recorded one by one in the window
	closed     bool

	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// refusalTally counts the refusals of one kind beyond the first.
type refusalTally struct {
	n   int
	who audit.Principal // of the first: the aggregate names it
}

func newRefusals(s *Server, l RefusalLimits) *refusals {
	r := &refusals{s: s, window: l.Window, per: l.PerSource, stop: make(chan struct{}), done: make(chan struct{})}
	if r.window <= 0 {
		r.window = DefaultRefusalWindow
	}
	if r.per <= 0 {
		r.per = DefaultRefusalsPerSource
	}
	r.reset(s.now())
	return r
}

func (r *refusals) reset(now time.Time) {
	r.start = now
	r.kinds = map[refusalKind]*refusalTally{}
	r.sources = map[string]int{}
	r.individual = 0
}

// hostOf is the source address of a remote address "host:port" (the port
// changes with every connection).
func hostOf(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// count counts one refusal of kind k by who and reports whether it is to
// be recorded on its own (the first of its kind in the window, within the
// server-wide budget, unless mayRecord is false: then it is counted for the
// aggregate whatever it is). After close every refusal is recorded on its
// own.
func (r *refusals) count(k refusalKind, who audit.Principal, mayRecord bool) (individual bool) {
	r.once.Do(func() { go r.run() })
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return true
	}
	if t, ok := r.kinds[k]; ok {
		t.n++
		return false
	}
	if mayRecord && r.individual < maxIndividual && len(r.kinds) < maxKinds {
		r.individual++
		r.kinds[k] = &refusalTally{who: who}
		return true
	}
	if len(r.kinds) >= maxKinds {
		k, who = refusalKind{action: k.action, outcome: k.outcome, source: aggregateSource, reason: k.reason}, audit.Principal{Roles: []string{}}
	}
	t, ok := r.kinds[k]
	if !ok {
		t = &refusalTally{who: who}
		r.kinds[k] = t
	}
	t.n++
	return false
}

// failedAuth counts one failed authentication from source (an address
// without port, hostOf) and reports whether the source is over its limit in
// this window. Sources are counted by limitKey: an IPv6 /64 is one source.
//
// A new source that finds the table full (maxSources) is never over: the
// sources beyond the table are not counted together, as one shared count
// would let anyone with 4,096 addresses (one IPv6 /64 holds 2^64) answer
// every other new address 429 without a challenge, so that no new client
// could discover the authorization server or renew an expired token.
func (r *refusals) failedAuth(source string) (over bool) {
	key := limitKey(source)
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.sources[key]
	if !ok && len(r.sources) >= maxSources {
		return false
	}
	r.sources[key] = n + 1
	return n+1 > r.per
}

// limitKey is the key a source address is limited by: an IPv4 address
// itself, an IPv6 address its /64 prefix ("2001:db8:1:2::/64"), which is
// what one subscriber or host is given (RFC 6177, RFC 7934), so that
// stepping through one's own /64 does not make a new source each time.
// Anything else (not an IP address) is its own key.
func limitKey(source string) string {
	addr, err := netip.ParseAddr(source)
	if err != nil {
		return source
	}
	addr = addr.Unmap()
	if addr.Is4() {
		return addr.String()
	}
	p, err := addr.WithZone("").Prefix(64)
	if err != nil {
		return source
	}
	return p.String()
}

// retryAfter is the whole seconds until the current window ends (at least 1).
func (r *refusals) retryAfter() string {
	r.mu.Lock()
	left := r.window - r.s.now().Sub(r.start)
	r.mu.Unlock()
	return strconv.Itoa(max(1, int((left+time.Second-1)/time.Second)))
}

func (r *refusals) run() {
	defer close(r.done)
	t := time.NewTicker(r.window)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.flush(context.Background(), false)
		}
	}
}

// flush writes one aggregate record per kind counted in the window and
// starts a new window; with final, no new window starts and later
// refusals are recorded one by one. A record that cannot be written is
// logged and counted (custos_refusal_aggregates_unwritten_total): the
// requests it counts were refused, nothing was released.
func (r *refusals) flush(ctx context.Context, final bool) {
	r.mu.Lock()
	start, kinds := r.start, r.kinds
	end := r.s.now()
	r.reset(end)
	r.closed = r.closed || final
	r.mu.Unlock()
	window := start.UTC().Format(time.RFC3339) + "/" + end.UTC().Format(time.RFC3339)
	for k, t := range kinds {
		if t.n == 0 {
			continue
		}
		e := r.s.entry(ctx, Identity{Source: k.source}, k.action)
		e.Principal = t.who
		reason := k.reason + "," + ReasonAggregate + ",count=" + strconv.Itoa(t.n) + ",window=" + window
		if err := r.s.refuse(ctx, e, k.outcome, reason, nil); err != nil {
			r.s.cfg.Metrics.AggregateUnwritten()
			r.s.log.Error("AUDIT: an aggregate refusal record could not be written; the refusals it counts are not on record (they were refused, nothing was released)",
				"action", k.action, "source", k.source, "reason", k.reason, "count", t.n, "window", window, "err", err)
		}
	}
}

// close writes the pending aggregates and stops the flusher.
// Call it once.
func (r *refusals) close(ctx context.Context) {
	r.once.Do(func() { close(r.done) }) // never started
	close(r.stop)
	<-r.done
	r.flush(ctx, true)
}

// refuseCounted is refuse for the refusals anyone can cause (see above):
// e is recorded on its own if it is the first of its kind in the window,
// else counted for the window's aggregate record and not written now.
// answer is returned either way (or the commit's error, as refuse does).
func (s *Server) refuseCounted(ctx context.Context, e audit.Entry, outcome, reason string, answer error) error {
	return s.refuseCountedIf(ctx, e, outcome, reason, answer, true)
}

// refuseCountedIf is refuseCounted; without mayRecord the refusal is only
// counted for the aggregate (a source over its limit, answered 429).
func (s *Server) refuseCountedIf(ctx context.Context, e audit.Entry, outcome, reason string, answer error, mayRecord bool) error {
	k := refusalKind{action: e.Action, outcome: outcome, source: hostOf(e.Source), sub: e.Principal.Sub,
		client: e.Principal.ClientID, roles: strings.Join(e.Principal.Roles, "\x00"), reason: reason}
	if !s.refusals.count(k, e.Principal, mayRecord) {
		return answer
	}
	return s.refuse(ctx, e, outcome, reason, answer)
}

// Close writes the pending aggregate refusal records (see refusals.go);
// after it every refusal is recorded on its own. Call it once the
// transports stopped and before the audit log closes (app.App.Close).
// Records that cannot be written are logged and counted, not returned: the
// requests they count were refused. It may be called more than once.
func (s *Server) Close(ctx context.Context) {
	s.closeOnce.Do(func() { s.refusals.close(ctx) })
}
