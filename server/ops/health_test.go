package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// scrape GETs /metrics from h and returns the body.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	code, body := get(t, h, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d: %s", code, body)
	}
	return body
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func ok(context.Context) error { return nil }

// slow blocks until ctx is done, as a hung dependency that honours ctx.
func slow(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

// TestReadyz runs under -race (tools/racetests): Ready runs every check on its own goroutine.
//
//custos:race
func TestReadyz(t *testing.T) {
	const secret = "vault token hvs.CAESIJ at https://vault.internal/v1/secret"
	tests := []struct {
		name     string
		checks   map[string]Check
		wantCode int
		want     map[string]string
		failing  []string
	}{
		{"no checks", nil, 200, map[string]string{}, nil},
		{"all ok", map[string]Check{"audit": ok, "policy": ok, "keys": ok}, 200,
			map[string]string{"audit": "ok", "policy": "ok", "keys": "ok"}, nil},
		{"one failing, text hidden", map[string]Check{"audit": ok, "keys": func(context.Context) error { return errors.New(secret) }}, 503,
			map[string]string{"audit": "ok", "keys": "failing"}, []string{"keys"}},
		{"safe error shown", map[string]Check{"policy": func(context.Context) error {
			return fmt.Errorf("loading %s: %w", secret, NewSafeError("policy not loaded"))
		}}, 503, map[string]string{"policy": "policy not loaded"}, []string{"policy"}},
		{"slow check times out", map[string]Check{"audit": ok, "keys": slow}, 503,
			map[string]string{"audit": "ok", "keys": "timeout"}, []string{"keys"}},
		{"ctx-ignoring check times out", map[string]Check{"audit": func(context.Context) error {
			time.Sleep(2 * time.Second)
			return nil
		}}, 503, map[string]string{"audit": "timeout"}, []string{"audit"}},
		{"panicking check fails", map[string]Check{"audit": func(context.Context) error { panic(secret) }}, 503,
			map[string]string{"audit": "failing"}, []string{"audit"}},
		{"two failing, sorted", map[string]Check{"zeta": slow, "alpha": func(context.Context) error { return io.EOF }}, 503,
			map[string]string{"zeta": "timeout", "alpha": "failing"}, []string{"alpha", "zeta"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := New(reg)
			h := &Health{Timeout: 100 * time.Millisecond}
			for n, c := range tc.checks {
				h.AddCheck(n, c)
			}
			code, body := get(t, Handler(h, m, reg), "/readyz")
			if code != tc.wantCode {
				t.Fatalf("code = %d, want %d; body %s", code, tc.wantCode, body)
			}
			if strings.Contains(body, "hvs.") || strings.Contains(body, "vault") {
				t.Fatalf("readyz leaks error text: %s", body)
			}
			var rep Report
			if err := json.Unmarshal([]byte(body), &rep); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			wantStatus := "ready"
			if tc.wantCode != 200 {
				wantStatus = "not_ready"
			}
			if rep.Status != wantStatus || fmt.Sprint(rep.Checks) != fmt.Sprint(tc.want) || fmt.Sprint(rep.Failing) != fmt.Sprint(tc.failing) {
				t.Fatalf("report = %+v, want status %s checks %v failing %v", rep, wantStatus, tc.want, tc.failing)
			}
			for n, s := range tc.want {
				want := 0.0
				if s == StatusOK {
					want = 1
				}
				if got := testutil.ToFloat64(m.readiness.WithLabelValues(n)); got != want {
					t.Errorf("custos_ready_check{check=%q} = %v, want %v", n, got, want)
				}
			}
		})
	}
}

func TestReadyUsesDefaultTimeoutAndCallerContext(t *testing.T) {
	var h Health
	var deadline time.Time
	h.AddCheck("audit", func(ctx context.Context) error {
		deadline, _ = ctx.Deadline()
		return nil
	})
	start := time.Now()
	if rep := h.Ready(context.Background()); !rep.Ready() {
		t.Fatalf("not ready: %+v", rep)
	}
	if d := deadline.Sub(start); d <= DefaultTimeout-time.Second || d > DefaultTimeout+time.Second {
		t.Fatalf("check deadline %v after start, want about %v", d, DefaultTimeout)
	}
	// A cancelled caller context ends the probe: slow checks report timeout.
	h.AddCheck("keys", slow)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if rep := h.Ready(ctx); rep.Ready() || rep.Checks["keys"] != StatusTimeout {
		t.Fatalf("report = %+v", rep)
	}
}

func TestAddCheckValidates(t *testing.T) {
	for _, name := range []string{"", "Audit", "custos://t1/patients/P1", "a b", strings.Repeat("a", 33)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AddCheck(%q) did not panic", name)
				}
			}()
			var h Health
			h.AddCheck(name, ok)
		}()
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("AddCheck with nil check did not panic")
			}
		}()
		var h Health
		h.AddCheck("audit", nil)
	}()
	// Re-adding replaces.
	var h Health
	h.AddCheck("audit", func(context.Context) error { return io.EOF })
	h.AddCheck("audit", ok)
	if rep := h.Ready(context.Background()); !rep.Ready() || len(rep.Checks) != 1 {
		t.Fatalf("report = %+v", rep)
	}
}

func TestSafeErrorTruncated(t *testing.T) {
	long := strings.Repeat("x", 500)
	if got := describe(NewSafeError(long)); len(got) != MaxSafeLen {
		t.Fatalf("len = %d", len(got))
	}
	if got := describe(NewSafeError("")); got != StatusFailing {
		t.Fatalf("empty safe text = %q", got)
	}
}

func TestHandlerRoutes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.ObserveRequest(MethodRead, OutcomeDeny, time.Millisecond)
	h := &Health{}
	h.AddCheck("audit", func(context.Context) error { return io.EOF })
	hd := Handler(h, m, reg)

	if code, body := get(t, hd, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, _ := get(t, hd, "/readyz"); code != 503 {
		t.Errorf("/readyz = %d", code)
	}
	body := scrape(t, hd)
	for _, want := range []string{
		`custos_requests_total{method="resources/read",outcome="deny"} 1`,
		`custos_ready_check{check="audit"} 0`,
		"custos_keys_stale 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, _ := get(t, hd, "/"); code != 404 {
		t.Errorf("/ = %d, want 404", code)
	}
	if code, _ := get(t, hd, "/debug/pprof/"); code != 404 {
		t.Errorf("/debug/pprof/ = %d, want 404", code)
	}
	rec := httptest.NewRecorder()
	hd.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/healthz", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz = %d", rec.Code)
	}
	// Liveness does not depend on readiness checks, nor on a nil Health.
	if code, _ := get(t, Handler(nil, nil, reg), "/healthz"); code != 200 {
		t.Errorf("/healthz with nil Health = %d", code)
	}
	if s := NewHTTPServer(":0", hd); s.ReadHeaderTimeout == 0 || s.Handler == nil {
		t.Errorf("NewHTTPServer = %+v", s)
	}
}

// TestReadyzDetails: details are shown beside the checks, do not decide
// readiness, and a failing or panicking one shows "unavailable", never
// its error's text.
func TestReadyzDetails(t *testing.T) {
	const secret = "hvs.CAESIJsecret"
	h := &Health{}
	h.AddCheck("audit", ok)
	h.AddDetail("audit_retention", func(context.Context) (any, error) {
		return map[string]any{"period": "52596h0m0s", "oldest_record_age_days": 3}, nil
	})
	h.AddDetail("broken", func(context.Context) (any, error) { return nil, errors.New(secret) })
	h.AddDetail("panics", func(context.Context) (any, error) { panic(secret) })
	code, body := get(t, Handler(h, nil, prometheus.NewRegistry()), "/readyz")
	if code != 200 || strings.Contains(body, secret) {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	var rep struct {
		Status  string
		Details map[string]any
	}
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	ret, _ := rep.Details["audit_retention"].(map[string]any)
	if rep.Status != "ready" || ret["period"] != "52596h0m0s" || rep.Details["broken"] != DetailUnavailable || rep.Details["panics"] != DetailUnavailable {
		t.Fatalf("report %+v", rep)
	}
	defer func() {
		if recover() == nil {
			t.Error("AddDetail accepted a bad name")
		}
	}()
	h.AddDetail("Bad Name", func(context.Context) (any, error) { return 1, nil })
}
