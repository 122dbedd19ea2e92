package ops

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTestMetrics(t testing.TB) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return New(reg), reg
}

func TestRequestsByMethodAndOutcome(t *testing.T) {
	m, reg := newTestMetrics(t)
	m.ObserveRequest(MethodRead, OutcomeAllow, 3*time.Millisecond)
	m.ObserveRequest(MethodRead, OutcomeAllow, 7*time.Millisecond)
	m.ObserveRequest(MethodList, OutcomeRefused, 2*time.Second)
	m.ObserveRequest("tools/call", "weird", time.Millisecond)

	want := `
# HELP custos_requests_total MCP requests answered, by method and outcome.
# TYPE custos_requests_total counter
`
	for _, meth := range methods {
		for _, out := range outcomes {
			v := "0"
			switch {
			case meth == MethodRead && out == OutcomeAllow:
				v = "2"
			case meth == MethodList && out == OutcomeRefused, meth == Other && out == Other:
				v = "1"
			}
			want += `custos_requests_total{method="` + meth + `",outcome="` + out + `"} ` + v + "\n"
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "custos_requests_total"); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg, "custos_request_duration_seconds")
	if err != nil || n != len(methods) {
		t.Fatalf("duration series = %d, %v; want %d", n, err, len(methods))
	}
	// The read histogram holds two observations summing to 10 ms.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "custos_request_duration_seconds" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if mt.GetLabel()[0].GetValue() != MethodRead {
				continue
			}
			h := mt.GetHistogram()
			if h.GetSampleCount() != 2 || h.GetSampleSum() < 0.0099 || h.GetSampleSum() > 0.0101 {
				t.Fatalf("read histogram count=%d sum=%v", h.GetSampleCount(), h.GetSampleSum())
			}
			if got := len(h.GetBucket()); got != len(RequestBuckets) {
				t.Fatalf("buckets = %d, want %d", got, len(RequestBuckets))
			}
			if RequestBuckets[0] != 0.001 || RequestBuckets[len(RequestBuckets)-2] != 1 {
				t.Fatalf("request buckets do not span 1 ms - 1 s: %v", RequestBuckets)
			}
		}
	}
}

func TestSimpleMetrics(t *testing.T) {
	m, reg := newTestMetrics(t)
	m.ObserveAudit(2 * time.Millisecond)
	m.ObservePolicy(300 * time.Microsecond)
	m.ObservePolicy(400 * time.Microsecond)
	m.RateLimited(LimitPrincipal)
	m.RateLimited(LimitPrincipal)
	m.RateLimited("203.0.113.7") // not a reason: other
	m.AuthRejected(401)
	m.AuthRejected(403)
	m.AuthRejected(403)
	m.AuthRejected(500)
	m.SetCheckpointSize(1234)
	m.SetKeysStale(true)

	if got := testutil.ToFloat64(m.checkpoint); got != 1234 {
		t.Errorf("checkpoint size = %v", got)
	}
	if got := testutil.ToFloat64(m.keysStale); got != 1 {
		t.Errorf("keys stale = %v", got)
	}
	m.SetKeysStale(false)
	if got := testutil.ToFloat64(m.keysStale); got != 0 {
		t.Errorf("keys stale after fresh = %v", got)
	}
	if n := testutil.CollectAndCount(m.audit); n != 1 {
		t.Errorf("audit histogram series = %d", n)
	}
	want := `
# HELP custos_rate_limited_total Requests rejected by a rate limit, by the limit that rejected them.
# TYPE custos_rate_limited_total counter
custos_rate_limited_total{reason="client"} 0
custos_rate_limited_total{reason="concurrency"} 0
custos_rate_limited_total{reason="global"} 0
custos_rate_limited_total{reason="other"} 1
custos_rate_limited_total{reason="principal"} 2
custos_rate_limited_total{reason="sessions"} 0
custos_rate_limited_total{reason="source"} 0
# HELP custos_auth_rejections_total Requests rejected by authentication (401, or 400 for a malformed Authorization header) or authorization (403).
# TYPE custos_auth_rejections_total counter
custos_auth_rejections_total{status="400"} 0
custos_auth_rejections_total{status="401"} 1
custos_auth_rejections_total{status="403"} 2
custos_auth_rejections_total{status="other"} 1
# HELP custos_checkpoint_size Number of audit records covered by the newest signed checkpoint.
# TYPE custos_checkpoint_size gauge
custos_checkpoint_size 1234
# HELP custos_policy_eval_duration_seconds Time to evaluate one policy decision.
# TYPE custos_policy_eval_duration_seconds histogram
custos_policy_eval_duration_seconds_bucket{le="5e-05"} 0
custos_policy_eval_duration_seconds_bucket{le="0.0001"} 0
custos_policy_eval_duration_seconds_bucket{le="0.00025"} 0
custos_policy_eval_duration_seconds_bucket{le="0.0005"} 2
custos_policy_eval_duration_seconds_bucket{le="0.001"} 2
custos_policy_eval_duration_seconds_bucket{le="0.0025"} 2
custos_policy_eval_duration_seconds_bucket{le="0.005"} 2
custos_policy_eval_duration_seconds_bucket{le="0.01"} 2
custos_policy_eval_duration_seconds_bucket{le="0.025"} 2
custos_policy_eval_duration_seconds_bucket{le="0.05"} 2
custos_policy_eval_duration_seconds_bucket{le="0.1"} 2
custos_policy_eval_duration_seconds_bucket{le="0.25"} 2
custos_policy_eval_duration_seconds_bucket{le="+Inf"} 2
custos_policy_eval_duration_seconds_sum 0.0007
custos_policy_eval_duration_seconds_count 2
# HELP custos_audit_append_duration_seconds Time to durably append one audit record.
# TYPE custos_audit_append_duration_seconds histogram
custos_audit_append_duration_seconds_bucket{le="0.0001"} 0
custos_audit_append_duration_seconds_bucket{le="0.00025"} 0
custos_audit_append_duration_seconds_bucket{le="0.0005"} 0
custos_audit_append_duration_seconds_bucket{le="0.001"} 0
custos_audit_append_duration_seconds_bucket{le="0.0025"} 1
custos_audit_append_duration_seconds_bucket{le="0.005"} 1
custos_audit_append_duration_seconds_bucket{le="0.01"} 1
custos_audit_append_duration_seconds_bucket{le="0.025"} 1
custos_audit_append_duration_seconds_bucket{le="0.05"} 1
custos_audit_append_duration_seconds_bucket{le="0.1"} 1
custos_audit_append_duration_seconds_bucket{le="0.25"} 1
custos_audit_append_duration_seconds_bucket{le="0.5"} 1
custos_audit_append_duration_seconds_bucket{le="1"} 1
custos_audit_append_duration_seconds_bucket{le="+Inf"} 1
custos_audit_append_duration_seconds_sum 0.002
custos_audit_append_duration_seconds_count 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"custos_rate_limited_total", "custos_auth_rejections_total", "custos_checkpoint_size",
		"custos_policy_eval_duration_seconds", "custos_audit_append_duration_seconds"); err != nil {
		t.Fatal(err)
	}
}

// TestLabelHygiene feeds identifiers and secrets where label values go and
// checks that the exposition holds no trace of them.
func TestLabelHygiene(t *testing.T) {
	m, reg := newTestMetrics(t)
	secrets := []string{
		"custos://t1/patients/P-000123/Observation/obs-9.json",
		"P-000123",
		"Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
		"resources/read\n# injected",
		"resources/read ",
		"RESOURCES/READ",
	}
	for _, s := range secrets {
		m.ObserveRequest(s, s, time.Millisecond)
		m.ObserveRequest(MethodRead, s, time.Millisecond)
		m.RateLimited(s)
	}
	text := scrape(t, Handler(nil, m, reg))
	if !strings.Contains(text, `custos_requests_total{method="other",outcome="other"} 6`) {
		t.Fatalf("exposition lacks the other/other count:\n%s", text)
	}
	for _, bad := range []string{"custos://", "P-000123", "patients", "Bearer", "eyJ", "injected", "RESOURCES"} {
		if strings.Contains(text, bad) {
			t.Errorf("exposition contains %q:\n%s", bad, text)
		}
	}
	if got := testutil.ToFloat64(m.requests[len(methods)-1][len(outcomes)-1]); got != float64(len(secrets)) {
		t.Errorf("other/other = %v, want %d", got, len(secrets))
	}
	if got := testutil.ToFloat64(m.requests[methodIndex(MethodRead)][len(outcomes)-1]); got != float64(len(secrets)) {
		t.Errorf("read/other = %v, want %d", got, len(secrets))
	}
	// Label cardinality is fixed, whatever callers pass.
	n, err := testutil.GatherAndCount(reg, "custos_requests_total")
	if err != nil || n != len(methods)*len(outcomes) {
		t.Errorf("requests series = %d, %v; want %d", n, err, len(methods)*len(outcomes))
	}
}

// TestIntegrityMetrics: the names the Prometheus rules use, and their
// values after a clean pass, a failed one and a detected break.
func TestIntegrityMetrics(t *testing.T) {
	m, reg := newTestMetrics(t)
	m.SetAuditIntegrity(true)
	m.ScrubSucceeded(time.Unix(1700000000, 500_000_000))
	m.ScrubFailed()
	m.ScrubFailed()
	want := `
# HELP custos_audit_integrity_ok 1 while the audit log verifies (startup suffix check and every scrub pass so far), 0 once a record, the Merkle tree or an anchored checkpoint was found broken (reads are then refused).
# TYPE custos_audit_integrity_ok gauge
custos_audit_integrity_ok 1
# HELP custos_audit_scrub_failures_total Audit scrub passes that found an integrity problem or could not finish.
# TYPE custos_audit_scrub_failures_total counter
custos_audit_scrub_failures_total 2
# HELP custos_audit_scrub_last_success_timestamp_seconds Unix time at which the last scrub pass that verified the whole audit log ended (0: none yet).
# TYPE custos_audit_scrub_last_success_timestamp_seconds gauge
custos_audit_scrub_last_success_timestamp_seconds 1.7000000005e+09
`
	names := []string{"custos_audit_integrity_ok", "custos_audit_scrub_failures_total", "custos_audit_scrub_last_success_timestamp_seconds"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	m.SetAuditIntegrity(false)
	if got := testutil.ToFloat64(m.integrityOK); got != 0 {
		t.Errorf("integrity ok after a break = %v", got)
	}
}

// Every rollover step is exported from the start (an alert on it has a
// series to watch), and a failure counts under its step.
func TestSegmentFailureMetrics(t *testing.T) {
	m, reg := newTestMetrics(t)
	m.SegmentFailed("archive")
	m.SegmentFailed("archive")
	m.SegmentFailed("unknown") // counted, as a seal: never dropped
	want := `
# HELP custos_audit_segment_failures_total Failed steps of the audit log's background rollover, by step: seal (retried; appends continue in the live segment), seal_note (written at the next open), archive (retried every 5 minutes).
# TYPE custos_audit_segment_failures_total counter
custos_audit_segment_failures_total{step="archive"} 2
custos_audit_segment_failures_total{step="seal"} 1
custos_audit_segment_failures_total{step="seal_note"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "custos_audit_segment_failures_total"); err != nil {
		t.Fatal(err)
	}
}

func TestNilMetricsIsNoop(t *testing.T) {
	var m *Metrics
	m.ObserveRequest(MethodRead, OutcomeAllow, time.Millisecond)
	m.ObserveAudit(time.Millisecond)
	m.ObservePolicy(time.Millisecond)
	m.RateLimited(LimitGlobal)
	m.AuthRejected(401)
	m.SetCheckpointSize(1)
	m.SetKeysStale(true)
	m.setReady("audit", true)
	m.SetAuditIntegrity(false)
	m.ScrubFailed()
	m.ScrubSucceeded(time.Now())
	m.SegmentFailed("seal")
	if m != nil {
		t.Fatal("unreachable")
	}
}

func TestNewTwiceOnOneRegistryPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg)
	defer func() {
		if recover() == nil {
			t.Fatal("second New on the same registry did not panic")
		}
	}()
	New(reg)
}

func BenchmarkObserveRequest(b *testing.B) {
	m, _ := newTestMetrics(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveRequest(MethodRead, OutcomeAllow, 3*time.Millisecond)
		}
	})
}

func BenchmarkObserveRequestSerial(b *testing.B) {
	m, _ := newTestMetrics(b)
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveRequest(MethodRead, OutcomeAllow, 3*time.Millisecond)
	}
}

// TestPolicyMetrics: custos_policy_info holds one series, the policy in
// force; rejections are counted by a fixed class (anything else is
// "other"), all classes exported from the start; the timestamps follow.
func TestPolicyMetrics(t *testing.T) {
	m, reg := newTestMetrics(t)
	zero := `
# HELP custos_policy_rejections_total Candidate policies refused (the last good policy keeps serving), by class: compile, test, agreement, signature, key, bundle, rollback, hook, other.
# TYPE custos_policy_rejections_total counter
`
	for _, r := range PolicyRejectReasons {
		zero += `custos_policy_rejections_total{reason="` + r + `"} 0` + "\n"
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(zero), "custos_policy_rejections_total"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	m.PolicyLoaded("sha256:aa", "", 0, t0)
	m.PolicyLoaded("sha256:bb", "sha256:cc", 7, t0.Add(time.Minute))
	m.PolicyRejected(PolicyRejectRollback, t0.Add(2*time.Minute))
	m.PolicyRejected("a compile error at authz.rego:3", t0.Add(3*time.Minute))
	want := `
# HELP custos_policy_info 1 for the policy in force: its revision, its bundle digest ("" for the built-in policy or a directory) and its signed sequence claim ("0": none).
# TYPE custos_policy_info gauge
custos_policy_info{bundle="sha256:cc",revision="sha256:bb",sequence="7"} 1
# HELP custos_policy_loads_total Policies that took effect (the initial one included), each recorded in the audit log as policy/load.
# TYPE custos_policy_loads_total counter
custos_policy_loads_total 2
# HELP custos_policy_last_load_timestamp_seconds Unix time at which the policy in force took effect.
# TYPE custos_policy_last_load_timestamp_seconds gauge
custos_policy_last_load_timestamp_seconds 1.80000006e+09
# HELP custos_policy_last_rejection_timestamp_seconds Unix time at which the last candidate policy was refused (0: none since the start). Above custos_policy_last_load_timestamp_seconds: the candidate rolled out last is not serving.
# TYPE custos_policy_last_rejection_timestamp_seconds gauge
custos_policy_last_rejection_timestamp_seconds 1.80000018e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "custos_policy_info", "custos_policy_loads_total",
		"custos_policy_last_load_timestamp_seconds", "custos_policy_last_rejection_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
	for class, want := range map[string]float64{PolicyRejectRollback: 1, Other: 1, PolicyRejectCompile: 0} {
		if got := testutil.ToFloat64(m.polRejects.WithLabelValues(class)); got != want {
			t.Errorf("rejections{reason=%q} = %v, want %v", class, got, want)
		}
	}
	var nilM *Metrics
	nilM.PolicyLoaded("r", "", 0, t0)
	nilM.PolicyRejected(PolicyRejectTest, t0)
}
