package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"
)

// Check reports whether one dependency is ready. It must honour ctx: a
// check still running when ctx is done is reported as "timeout" (and its
// result, when it comes, is discarded). The error's text is never shown
// unless the error implements SafeError.
type Check func(ctx context.Context) error

// Detail returns one piece of information shown in a readiness Report
// beside the checks (e.g. the audit retention period and the oldest
// record's age). It does not decide readiness. Its value is JSON-encoded
// as it is, so it must hold only custos's own values (durations, times,
// counts), never PHI, a payload or a secret. An error shows as
// "unavailable", never as its text.
type Detail func(ctx context.Context) (any, error)

// DetailUnavailable is the value shown for a Detail that failed.
const DetailUnavailable = "unavailable"

// DefaultTimeout bounds one readiness probe when Health.Timeout is 0.
const DefaultTimeout = 2 * time.Second

// Check results shown in a readiness Report.
const (
	StatusOK      = "ok"
	StatusFailing = "failing"
	StatusTimeout = "timeout"
)

// Report is the answer of a readiness probe: Status is "ready" or
// "not_ready"; Checks maps each check name to "ok", "timeout", "failing"
// or its SafeError text; Failing names the checks that did not pass,
// sorted; Details holds the value of each registered Detail.
type Report struct {
	Status  string            `json:"status"`
	Checks  map[string]string `json:"checks"`
	Failing []string          `json:"failing,omitempty"`
	Details map[string]any    `json:"details,omitempty"`
}

// Ready reports whether every check passed.
func (r Report) Ready() bool { return r.Status == "ready" }

// Health holds the readiness checks. The zero value is ready to use; it
// is safe for concurrent use.
type Health struct {
	// Timeout bounds one readiness probe (all checks run in parallel under
	// it); 0 means DefaultTimeout. Set it, and Metrics, before serving.
	Timeout time.Duration
	// Metrics, if not nil, records each check's result in
	// custos_ready_check{check}.
	Metrics *Metrics

	mu      sync.RWMutex
	names   []string
	checks  map[string]Check
	details map[string]Detail
}

// checkName is what a check may be called: it is a JSON key in /readyz
// and a metric label value.
var checkName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// AddCheck registers c under name, replacing any check of that name.
// name must match ^[a-z][a-z0-9_]{0,31}$ (e.g. "audit", "policy", "keys")
// and c must not be nil; AddCheck panics otherwise (a wiring bug).
func (h *Health) AddCheck(name string, c Check) {
	if !checkName.MatchString(name) {
		panic(fmt.Sprintf("ops: invalid check name %q", name))
	}
	if c == nil {
		panic("ops: nil check " + name)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.checks == nil {
		h.checks = make(map[string]Check)
	}
	if _, ok := h.checks[name]; !ok {
		h.names = append(h.names, name)
	}
	h.checks[name] = c
}

// AddDetail registers d under name (same rule for names as AddCheck),
// replacing any detail of that name. It panics on a bad name or a nil d.
func (h *Health) AddDetail(name string, d Detail) {
	if !checkName.MatchString(name) {
		panic(fmt.Sprintf("ops: invalid detail name %q", name))
	}
	if d == nil {
		panic("ops: nil detail " + name)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.details == nil {
		h.details = make(map[string]Detail)
	}
	h.details[name] = d
}

// Ready runs every check in parallel under Timeout (and ctx) and reports.
// With no checks registered it is ready.
func (h *Health) Ready(ctx context.Context) Report {
	h.mu.RLock()
	names := slices.Clone(h.names)
	checks := make([]Check, len(names))
	for i, n := range names {
		checks[i] = h.checks[n]
	}
	details := make(map[string]Detail, len(h.details))
	for n, d := range h.details {
		details[n] = d
	}
	timeout, metrics := h.Timeout, h.Metrics
	h.mu.RUnlock()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	results := make([]string, len(names))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runCheck(ctx, c)
		}()
	}
	wg.Wait()

	rep := Report{Status: "ready", Checks: make(map[string]string, len(names))}
	for i, n := range names {
		rep.Checks[n] = results[i]
		ok := results[i] == StatusOK
		metrics.setReady(n, ok)
		if !ok {
			rep.Failing = append(rep.Failing, n)
		}
	}
	if len(rep.Failing) > 0 {
		rep.Status = "not_ready"
		slices.Sort(rep.Failing)
	}
	if len(details) > 0 {
		rep.Details = make(map[string]any, len(details))
		for n, d := range details {
			rep.Details[n] = runDetail(ctx, d)
		}
	}
	return rep
}

// runDetail returns d's value, or DetailUnavailable when it fails or
// panics.
func runDetail(ctx context.Context, d Detail) (v any) {
	defer func() {
		if recover() != nil {
			v = DetailUnavailable
		}
	}()
	v, err := d(ctx)
	if err != nil {
		return DetailUnavailable
	}
	return v
}

// runCheck runs c and returns its result text; it returns when c does or
// when ctx is done, whichever is first. A panicking check is failing.
func runCheck(ctx context.Context, c Check) string {
	done := make(chan string, 1) // buffered: a late check does not leak blocked
	go func() {
		defer func() {
			if recover() != nil {
				done <- StatusFailing
			}
		}()
		done <- describe(c(ctx))
	}()
	select {
	case s := <-done:
		if s != StatusOK && ctx.Err() != nil {
			// The check gave up because the probe's deadline passed.
			return StatusTimeout
		}
		return s
	case <-ctx.Done():
		return StatusTimeout
	}
}

// describe is the readiness text of a check's error.
func describe(err error) string {
	if err == nil {
		return StatusOK
	}
	var se SafeError
	if errors.As(err, &se) {
		if s := se.Safe(); s != "" && s != StatusOK {
			if len(s) > MaxSafeLen {
				s = s[:MaxSafeLen]
			}
			return s
		}
	}
	return StatusFailing
}

// Healthz is the liveness probe: 200 "ok" whenever the process can answer
// HTTP at all. It checks no dependency.
func (h *Health) Healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok\n"))
}

// Readyz is the readiness probe: it runs Ready and answers 200 with the
// Report as JSON when every check passed, else 503 with the failing checks
// named, e.g.
//
//	{"status":"not_ready","checks":{"audit":"ok","keys":"timeout"},"failing":["keys"],
//	 "details":{"audit_retention":{"period":"52596h0m0s", ...}}}
func (h *Health) Readyz(w http.ResponseWriter, r *http.Request) {
	rep := h.Ready(r.Context())
	code := http.StatusOK
	if !rep.Ready() {
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(rep)
}
