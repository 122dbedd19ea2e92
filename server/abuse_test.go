package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/ops"
)

// Tests of what anyone can make the server do to its audit log
// (refusals.go, sessions.go, the Volume check of admit): refusals are
// recorded once per kind and window and otherwise counted, a source over
// its limit is answered 429, sessions per principal are capped, the
// audit volume's reserve refuses new requests, and a hijack attempt is
// recorded with its own caller.

// metric is the value of the series of name whose labels include the
// given label value ("" for a series without labels).
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := label == ""
			for _, lp := range m.GetLabel() {
				ok = ok || lp.GetValue() == label
			}
			if !ok {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%s}", name, label)
	return 0
}

// postList sends one resources/list request (revision 2025-11-25) with
// the given headers and returns the status and the response headers.
func postList(t *testing.T, url string, header map[string]string) (int, http.Header) {
	t.Helper()
	h := map[string]string{"Mcp-Protocol-Version": rev2025}
	for k, v := range header {
		h[k] = v
	}
	status, hdr, _ := post(t, url, "", h, `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{}}`)
	return status, hdr
}

// withMetrics tunes a fixture with metrics on a registry of its own.
func withMetrics(reg *prometheus.Registry, more func(*server.Config)) func(*server.Config) {
	m := ops.New(reg)
	return func(c *server.Config) {
		c.Metrics = m
		if more != nil {
			more(c)
		}
	}
}

func TestFailedAuthenticationsAreAggregatedPerSource(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newServerFixture(t, fixtureOptions{tune: withMetrics(reg, func(c *server.Config) {
		c.Refusals = server.RefusalLimits{Window: time.Hour, PerSource: 10}
	})})
	hs := f.serveHTTP("clinician")
	const n = 50
	codes := map[int]int{}
	for i := range n {
		h := map[string]string{}
		if i%2 == 1 {
			h["Authorization"] = "Bearer not-a-token"
		}
		status, hdr := postList(t, hs.url, h)
		codes[status]++
		if status == http.StatusTooManyRequests && hdr.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		// RFC 6750 §3.1: a refused token is named in the challenge; a
		// request without one gets the bare challenge.
		if want := map[bool]string{false: `Bearer realm="custos"`, true: `Bearer realm="custos", error="invalid_token"`}[i%2 == 1]; status == http.StatusUnauthorized && hdr.Get("WWW-Authenticate") != want {
			t.Errorf("request %d: challenge %q, want %q", i, hdr.Get("WWW-Authenticate"), want)
		}
	}
	if codes[401] != 10 || codes[429] != n-10 {
		t.Fatalf("answers %v, want 10 × 401 then 429s", codes)
	}
	// A valid token from the same, limited, address is served as usual.
	cs := hs.connect(t, "clinician", rev2025)
	if _, err := cs.ListResources(context.Background(), nil); err != nil {
		t.Fatalf("a clinician behind a limited address was refused: %v", err)
	}

	// A missing token and a refused one are two reasons (a dev token's
	// refusal says error="invalid_token" too): the first of each is
	// written alone, the rest is counted for the aggregate.
	var rejects []string
	for _, r := range f.records() {
		if r.Action == server.ActionAuthReject {
			if r.Principal.Sub != "" {
				t.Errorf("a refusal named a principal: %+v", r)
			}
			rejects = append(rejects, r.Reason)
		}
	}
	if strings.Join(rejects, " ") != "http_401,no_token http_401,invalid_token" {
		t.Fatalf("auth/reject records before the window ended: %q, want the first of each reason alone", rejects)
	}
	for _, class := range []string{ops.FailureNoToken, ops.FailureInvalidToken} {
		if got := metric(t, reg, "custos_auth_failures_total", class); got != n/2 {
			t.Errorf("custos_auth_failures_total{%s} = %v, want every one of %d", class, got, n/2)
		}
	}
	if got := metric(t, reg, "custos_rate_limited_total", ops.LimitSource); got != n-10 {
		t.Errorf("custos_rate_limited_total{source} = %v, want %d", got, n-10)
	}

	// Close writes the aggregates: the other 24 of each, with source and
	// window.
	before := len(f.records())
	f.srv.Close(context.Background())
	recs := f.records()[before:]
	if len(recs) != 2 {
		t.Fatalf("Close wrote %d records, want one aggregate per reason", len(recs))
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Reason > recs[j].Reason })
	const other = "http_401,invalid_token,aggregate,count=24,window="
	if o := recs[1]; o.Source != "127.0.0.1" || !strings.HasPrefix(o.Reason, other) {
		t.Fatalf("aggregate source %q reason %q, want %s…", o.Source, o.Reason, other)
	}
	r := recs[0]
	const prefix = "http_401,no_token,aggregate,count=24,window="
	if r.Action != server.ActionAuthReject || r.Outcome != audit.OutcomeDeny || r.Source != "127.0.0.1" || !strings.HasPrefix(r.Reason, prefix) {
		t.Fatalf("aggregate %s/%s source %q reason %q, want %s…", r.Action, r.Outcome, r.Source, r.Reason, prefix)
	}
	start, end, ok := strings.Cut(strings.TrimPrefix(r.Reason, prefix), "/")
	t0, err0 := time.Parse(time.RFC3339, start)
	t1, err1 := time.Parse(time.RFC3339, end)
	if !ok || err0 != nil || err1 != nil || t1.Before(t0) {
		t.Errorf("window %q is not START/END in RFC 3339", strings.TrimPrefix(r.Reason, prefix))
	}
}

// The per-source limit of failed authentications counts an IPv6 /64 as
// one source, and does not lock out new sources once its table is full
// (found by probe: 4,097 addresses of one /64, a fraction of a second of
// requests, made every new address's unauthenticated request a 429 without
// WWW-Authenticate, so that no new MCP client could discover the
// authorization server or renew an expired token for the rest of the
// window).
func TestFailedAuthLimitPerIPv6PrefixAndNoSharedOverflow(t *testing.T) {
	const per = 5
	newHandler := func(t *testing.T) func(remote string) *http.Response {
		f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) {
			c.Refusals = server.RefusalLimits{Window: time.Hour, PerSource: per}
		}})
		h, _ := f.httpHandler("clinician")
		return func(remote string) *http.Response {
			req := httptest.NewRequest(http.MethodPost, "https://custos.test"+server.MCPPath,
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{}}`))
			req.RemoteAddr = remote
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", rev2025)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w.Result()
		}
	}
	// A 401 (which over OAuth carries the challenge a 429 drops), not 429.
	challenged := func(t *testing.T, what string, resp *http.Response) {
		t.Helper()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: %d, want 401", what, resp.StatusCode)
		}
	}

	t.Run("one /64 is one source", func(t *testing.T) {
		send := newHandler(t)
		for i := range per {
			challenged(t, "within the limit", send(fmt.Sprintf("[2001:db8:1:2::%x]:4000", i+1)))
		}
		if resp := send("[2001:db8:1:2:ffff:ffff:ffff:ffff]:4000"); resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("another address of the same /64 over the limit: %d, want 429", resp.StatusCode)
		}
		challenged(t, "the next /64", send("[2001:db8:1:3::1]:4000"))
	})

	t.Run("a full table locks no new source out", func(t *testing.T) {
		send := newHandler(t)
		for i := range 4096 + 2*per { // 4,106 /64s: more than the table holds
			send(fmt.Sprintf("[2001:db8:%x:%x::1]:4000", i>>16, i&0xffff))
		}
		for i := range 2 * per {
			challenged(t, "a new source after the spray", send(fmt.Sprintf("203.0.113.%d:5555", i+1)))
		}
	})
}

// A principal beyond its rate limit is refused with 429, recorded once per
// window and otherwise counted (found by probe: each of 298 refusals of one
// token in a retry loop was an fsync'd record of its own).
func TestRateLimitedRefusalsAreAggregated(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) {
		c.RateLimit = server.RateLimit{PerSecond: 0.001, Burst: 1}
		c.Refusals = server.RefusalLimits{Window: time.Hour}
	}})
	h, hs := f.httpHandler("clinician")
	sub := f.identity("clinician").Principal.Sub
	before := len(f.records())
	const n = 40
	codes := map[int]int{}
	for range n {
		req := httptest.NewRequest(http.MethodPost, "https://custos.test"+server.MCPPath, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.RemoteAddr = "192.0.2.7:4000"
		req.Header.Set("Authorization", "Bearer "+hs.tokens["clinician"])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", rev2025)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		codes[w.Code]++
	}
	if codes[http.StatusTooManyRequests] != n-1 {
		t.Fatalf("answers %v, want one served and %d × 429", codes, n-1)
	}
	var limited []audit.Record
	for _, r := range f.records()[before:] {
		if r.Action == server.ActionRateLimited {
			limited = append(limited, r)
		}
	}
	if len(limited) != 1 || limited[0].Reason != server.ReasonRateLimited+tenantSuffix(f, "clinician") || limited[0].Principal.Sub != sub {
		t.Fatalf("%d http/rate_limited records before the window ended, want the first alone: %+v", len(limited), limited)
	}
	before = len(f.records())
	f.srv.Close(context.Background())
	recs := f.records()[before:]
	prefix := server.ReasonRateLimited + tenantSuffix(f, "clinician") + ",aggregate,count=" + fmt.Sprint(n-2) + ",window="
	if len(recs) != 1 || recs[0].Action != server.ActionRateLimited || recs[0].Principal.Sub != sub || !strings.HasPrefix(recs[0].Reason, prefix) {
		t.Fatalf("Close wrote %+v, want one aggregate %s… by %q", recs, prefix, sub)
	}
}

// At the end of each window the aggregates are written without a
// shutdown, and a new window records the first refusal of a kind again.
func TestRefusalWindowFlushes(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) {
		c.Refusals = server.RefusalLimits{Window: 300 * time.Millisecond}
	}})
	hs := f.serveHTTP("clinician")
	for range 3 {
		postList(t, hs.url, nil)
	}
	deadline := time.Now().Add(5 * time.Second)
	var reasons []string
	for time.Now().Before(deadline) {
		reasons = reasons[:0]
		for _, r := range f.records() {
			reasons = append(reasons, r.Reason)
		}
		if len(reasons) == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(reasons) != 2 || reasons[0] != "http_401,no_token" || !strings.HasPrefix(reasons[1], "http_401,no_token,aggregate,count=2,") {
		t.Fatalf("records %q, want the first refusal and one aggregate of 2", reasons)
	}
	postList(t, hs.url, nil) // a new window: recorded on its own again
	if recs := f.records(); len(recs) != 3 || recs[2].Reason != "http_401,no_token" {
		t.Fatalf("the first refusal of a new window was not recorded on its own")
	}
}

// An aggregate that cannot be written is logged and counted; the requests
// were refused, so nothing was released.
func TestUnwrittenAggregateIsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newServerFixture(t, fixtureOptions{tune: withMetrics(reg, nil)})
	hs := f.serveHTTP("clinician")
	postList(t, hs.url, nil)
	postList(t, hs.url, nil)
	if err := f.log.Close(); err != nil {
		t.Fatal(err)
	}
	f.srv.Close(context.Background())
	if got := metric(t, reg, "custos_refusal_aggregates_unwritten_total", ""); got != 1 {
		t.Fatalf("custos_refusal_aggregates_unwritten_total = %v, want 1", got)
	}
}

// A request naming another principal's session, or coming from another
// origin, is recorded with the principal of its own token.
func TestHijackAttemptIsRecordedWithTheCaller(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician", "billing")
	victim := hs.connect(t, "clinician", rev2025)
	if victim.ID() == "" {
		t.Fatal("no session")
	}
	attacker := f.identity("billing").Principal.Sub
	for _, tc := range []struct {
		name   string
		header map[string]string
		reason string
		sub    string
	}{
		{"another principal's session", map[string]string{"Authorization": "Bearer " + hs.tokens["billing"], "Mcp-Session-Id": victim.ID()},
			"http_403,session_mismatch" + tenantSuffix(f, "billing") + ",owner_sub=" + strconv.Quote(f.identity("clinician").Principal.Sub), attacker},
		{"cross-origin with a token", map[string]string{"Authorization": "Bearer " + hs.tokens["billing"], "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, "http_403,cross_origin" + tenantSuffix(f, "billing"), attacker},
		{"cross-origin without one", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, "http_403,cross_origin", ""},
	} {
		before := len(f.records())
		if status, _ := postList(t, hs.url, tc.header); status != http.StatusForbidden {
			t.Fatalf("%s: %d, want 403", tc.name, status)
		}
		recs := f.records()[before:]
		if len(recs) != 1 || recs[0].Action != server.ActionAuthReject || recs[0].Reason != tc.reason || recs[0].Principal.Sub != tc.sub {
			t.Fatalf("%s: recorded %+v, want %s by %q", tc.name, recs, tc.reason, tc.sub)
		}
	}
	// The victim's session still works.
	if _, err := victim.ListResources(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

func TestSessionsPerPrincipalAreCapped(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newServerFixture(t, fixtureOptions{tune: withMetrics(reg, func(c *server.Config) {
		c.MaxSessions = 2
		c.SessionTimeout = 400 * time.Millisecond
	})})
	hs := f.serveHTTP("clinician", "billing")
	a := hs.connect(t, "clinician", rev2025)
	hs.connect(t, "clinician", rev2025)
	if _, err := hs.tryConnect(t, "clinician", rev2025); err == nil {
		t.Fatal("a third session was opened with a cap of 2")
	}
	hs.connect(t, "billing", rev2025) // another principal has slots of its own
	if got := metric(t, reg, "custos_rate_limited_total", ops.LimitSessions); got != 1 {
		t.Errorf("custos_rate_limited_total{sessions} = %v, want 1", got)
	}
	var refusals []audit.Record
	for _, r := range f.records() {
		if r.Action == server.ActionRateLimited {
			refusals = append(refusals, r)
		}
	}
	if len(refusals) != 1 || refusals[0].Reason != server.ReasonSessionLimit+tenantSuffix(f, "clinician") || refusals[0].Principal.Sub != f.identity("clinician").Principal.Sub {
		t.Fatalf("session-limit refusals recorded as %+v", refusals)
	}

	// Ending a session (DELETE) gives its slot back.
	a.Close()
	if !eventually(func() bool { _, err := hs.tryConnect(t, "clinician", rev2025); return err == nil }) {
		t.Fatal("a slot was not released when its session ended")
	}
	// Idle sessions time out and give their slots back.
	time.Sleep(600 * time.Millisecond)
	for range 2 {
		if !eventually(func() bool { _, err := hs.tryConnect(t, "clinician", rev2025); return err == nil }) {
			t.Fatal("slots were not released when their sessions idled out")
		}
	}
}

// eventually polls cond for up to 5 s.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// While the audit volume is down to its reserve, new requests are refused
// with disk_low, recorded once per kind and window and then counted; once
// space is back they are served again.
func TestAuditVolumeReserveRefusesRequests(t *testing.T) {
	var free atomic.Uint64
	free.Store(10 << 30)
	reg := prometheus.NewRegistry()
	m := ops.New(reg)
	vol, err := ops.NewDiskWatch(ops.DiskOptions{Dir: t.TempDir(), Watermark: 2 << 30, Reserve: 1 << 30, Metrics: m,
		Free: func(string) (uint64, error) { return free.Load(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) { c.Volume, c.Metrics = vol, m }})
	cs := f.connect(f.identity("clinician"))
	list := func() error { _, err := cs.ListResources(context.Background(), nil); return err }
	if err := list(); err != nil {
		t.Fatal(err)
	}

	free.Store(1<<30 + 1) // low: an alert, requests still served
	vol.Sample()
	if err := list(); err != nil || !vol.Low() || metric(t, reg, "custos_audit_volume_low", "") != 1 {
		t.Fatalf("below the watermark: list %v, low %v", err, vol.Low())
	}

	free.Store(1<<30 - 1) // in the reserve
	vol.Sample()
	before := len(f.records())
	for range 3 {
		if err := list(); err == nil || !strings.Contains(err.Error(), "audit volume low") {
			t.Fatalf("a list in the reserve answered %v", err)
		}
	}
	recs := f.records()[before:]
	if len(recs) != 1 || recs[0].Reason != server.ReasonDiskLow || recs[0].Outcome != audit.OutcomeError {
		t.Fatalf("refusals in the reserve recorded as %+v, want one disk_low", recs)
	}

	free.Store(10 << 30)
	vol.Sample()
	if err := list(); err != nil {
		t.Fatalf("space is back but the list was refused: %v", err)
	}
	before = len(f.records())
	f.srv.Close(context.Background())
	if recs := f.records()[before:]; len(recs) != 1 || !strings.HasPrefix(recs[0].Reason, "disk_low,aggregate,count=2,") {
		t.Fatalf("Close wrote %+v, want the aggregate of the 2 other refusals", recs)
	}
}

// tryConnect is httpServer.connect returning the error; a session opened
// is closed when the test ends.
func (hs *httpServer) tryConnect(t *testing.T, persona, rev string) (*mcp.ClientSession, error) {
	tr := &mcp.StreamableClientTransport{Endpoint: hs.url, HTTPClient: &http.Client{Transport: bearer{hs.tokens[persona]}}, DisableStandaloneSSE: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// A dev token's 401 carries a Bearer challenge (RFC 9110 §15.5.2, RFC 6750
// §3), with or without a token, as an OAuth 401 does; the go-sdk writes
// none without a resource metadata URL.
func TestDevTokenUnauthorizedCarriesAChallenge(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	for _, tok := range []string{"", "not-a-token"} {
		st, hdr, _ := post(t, hs.url, tok, nil, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if ch := hdr.Get("WWW-Authenticate"); st != http.StatusUnauthorized || !strings.HasPrefix(ch, "Bearer") {
			t.Errorf("token %q: status %d, WWW-Authenticate %q; want 401 and a Bearer challenge", tok, st, ch)
		}
	}
}

// A 2025-11-25 session is bound to the principal that opened it, not to
// its subject alone: a verified token with the same sub but another
// tenant or another client (azp) is another principal, and may neither
// send requests in the session, nor take its SSE stream (where the
// subscription notifications decided for the owner arrive), nor end it.
// Found by probing the built binary: the go-sdk binds a session to
// TokenInfo.UserID, the sub, and such tokens were served 200 in it and
// their DELETE ended the owner's session.
func TestSessionIsBoundToItsPrincipalNotItsSubject(t *testing.T) {
	f, url, mint, owner := ownerSession(t)
	sid := owner.ID()
	send := func(method, tok string) int { return inSession(t, url, method, tok, sid) }
	before := len(f.records())
	for _, tc := range []struct {
		name  string
		extra map[string]any
	}{
		{"the same sub of another tenant", map[string]any{"tenant": "other-hospital"}},
		{"the same sub through another client", map[string]any{"azp": "other-assistant"}},
	} {
		tok := mint("clinician", sessionScope, tc.extra)
		for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			if got := send(m, tok); got != http.StatusForbidden {
				t.Errorf("%s: %s in the owner's session answered %d, want 403", tc.name, m, got)
			}
		}
	}
	// The owner's session survived and still serves its owner.
	if _, err := owner.ListResources(context.Background(), nil); err != nil {
		t.Fatalf("the owner's session after the attempts: %v", err)
	}
	// The attempts are refusals of their own callers: the first of each
	// client on its own record, the others counted in the aggregate.
	var clients []string
	for _, r := range f.records()[before:] {
		if r.Action == server.ActionAuthReject && strings.HasPrefix(r.Reason, "http_403,session_mismatch,") && r.Principal.Sub == f.identity("clinician").Principal.Sub {
			clients = append(clients, r.Principal.ClientID)
		}
	}
	sort.Strings(clients)
	if want := []string{f.identity("clinician").Principal.ClientID, "other-assistant"}; strings.Join(clients, " ") != strings.Join(want, " ") {
		t.Errorf("session_mismatch records by the clients %v, want %v", clients, want)
	}
}

// A refusal's kind is its whole recorded principal (sub, client, roles),
// not its sub alone: refusals of the same sub through another client are
// recorded under that client, never counted into the aggregate record of
// the first client's. Found while probing the session binding: the
// session_mismatch attempts of one sub through two clients were written as
// one aggregate naming only the first client.
func TestRefusalKindsTellClientsApart(t *testing.T) {
	f := newFixture(t, "")
	url, mint := f.oauthServerWith(t)
	sub := f.identity("clinician").Principal.Sub
	read := `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"x"}}`
	before := len(f.records())
	for _, client := range []string{"assistant-a", "assistant-b", "assistant-b"} {
		tok := mint("clinician", "resources:list", map[string]any{"azp": client})
		if status, _, _ := post(t, url, tok, map[string]string{"Mcp-Protocol-Version": rev2025}, read); status != http.StatusForbidden {
			t.Fatalf("read with a list-only token through %s: %d, want 403", client, status)
		}
	}
	f.srv.Close(context.Background()) // writes the aggregates
	var got []string
	for _, r := range f.records()[before:] {
		if r.Action == server.ActionAuthReject && r.Principal.Sub == sub {
			reason, _, _ := strings.Cut(r.Reason, ",window=")
			got = append(got, r.Principal.ClientID+" "+reason)
		}
	}
	sort.Strings(got)
	want := []string{
		"assistant-a http_403,insufficient_scope" + tenantSuffix(f, "clinician"),
		"assistant-b http_403,insufficient_scope" + tenantSuffix(f, "clinician"),
		"assistant-b http_403,insufficient_scope" + tenantSuffix(f, "clinician") + ",aggregate,count=1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The session cap counts per principal as the session binding defines it
// (sub, tenant and client), not per sub: the same sub of another tenant or
// through another client, which may not use the owner's sessions, used up
// the owner's slots, so that its own initialize was refused 429 (found
// reviewing b6003b8: the binding moved to the whole principal, the count
// stayed on ti.UserID).
func TestSessionCapCountsPerBoundPrincipal(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) { c.MaxSessions = 1 }})
	url, mint := f.oauthServerWith(t)
	const scope = "resources:list resources:read"
	hs := &httpServer{url: url, tokens: map[string]string{
		"owner":         mint("clinician", scope, nil),
		"other-tenant":  mint("clinician", scope, map[string]any{"tenant": "other-hospital"}),
		"other-client":  mint("clinician", scope, map[string]any{"azp": "other-assistant"}),
		"owner-renewed": mint("clinician", "resources:list", nil),
	}}
	hs.connect(t, "other-tenant", rev2025)
	hs.connect(t, "other-client", rev2025)
	owner := hs.connect(t, "owner", rev2025) // refused 429 when the count was per sub
	if _, err := owner.ListResources(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// The owner's own cap still holds, whatever token of it asks.
	if _, err := hs.tryConnect(t, "owner-renewed", rev2025); err == nil {
		t.Fatal("a second session of the owner was opened with a cap of 1")
	}
}

// A request naming another principal's session is recorded with the
// caller's tenant and with what of the owner's principal differs. The
// record's principal has no tenant: the attempt of the owner's own sub and
// client from another tenant was recorded as "http_403,session_mismatch"
// by a principal identical to the owner's.
func TestSessionMismatchNamesBothTenants(t *testing.T) {
	f, url, mint, owner := ownerSession(t)
	me := f.identity("clinician").Principal
	if me.Tenant == "" {
		t.Fatal("the clinician fixture has no tenant")
	}
	for _, tc := range []struct {
		name   string
		extra  map[string]any
		reason string
	}{
		{"the same sub of another tenant", map[string]any{"tenant": "other-hospital"},
			`http_403,session_mismatch,tenant="other-hospital",owner_tenant=` + strconv.Quote(me.Tenant)},
		{"the same sub through another client", map[string]any{"azp": "other-assistant"},
			`http_403,session_mismatch,tenant=` + strconv.Quote(me.Tenant) + `,owner_client=` + strconv.Quote(me.ClientID)},
	} {
		before := len(f.records())
		if got := inSession(t, url, http.MethodPost, mint("clinician", sessionScope, tc.extra), owner.ID()); got != http.StatusForbidden {
			t.Fatalf("%s: %d, want 403", tc.name, got)
		}
		recs := f.records()[before:]
		if len(recs) != 1 || recs[0].Action != server.ActionAuthReject || recs[0].Reason != tc.reason || recs[0].Principal.Sub != me.Sub {
			t.Errorf("%s: recorded %+v, want reason %s", tc.name, recs, tc.reason)
		}
	}
}

// tenantSuffix is what an HTTP refusal recorded with the principal of the
// fixture's persona name adds to its reason: ",tenant=" and its tenant,
// Go-quoted.
func tenantSuffix(f *fixture, name string) string {
	return ",tenant=" + strconv.Quote(f.identity(name).Principal.Tenant)
}

// inSession sends a resources/list (a POST) or a body-less method to url in
// the 2025-11-25 session sid with the bearer token tok, and returns the
// status.
func inSession(t *testing.T, url, method, tok, sid string) int {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"resources/list","params":{}}`)
	}
	req, _ := http.NewRequest(method, url, body)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", rev2025)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // a GET that was served is an open SSE stream
	return resp.StatusCode
}

// sessionScope is the scope of ownerSession's tokens.
const sessionScope = "resources:list resources:read"

// ownerSession serves a fixture with OAuth and opens a 2025-11-25 session
// as the clinician with a token of sessionScope; mint makes more tokens.
func ownerSession(t *testing.T) (f *fixture, url string, mint func(persona, scope string, extra map[string]any) string, owner *mcp.ClientSession) {
	t.Helper()
	f = newFixture(t, "")
	url, mint = f.oauthServerWith(t)
	hs := &httpServer{url: url, tokens: map[string]string{"owner": mint("clinician", sessionScope, nil)}}
	owner = hs.connect(t, "owner", rev2025)
	if owner.ID() == "" {
		t.Fatal("no session")
	}
	return f, url, mint, owner
}
