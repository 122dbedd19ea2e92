package ops

import (
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Method label values of custos_requests_total and
// custos_request_duration_seconds. Any other method is recorded as Other.
const (
	MethodList       = "resources/list"
	MethodRead       = "resources/read"
	MethodTemplates  = "resources/templates/list"
	MethodInitialize = "initialize"
	MethodPing       = "ping"
)

// Outcome label values of custos_requests_total. Any other outcome is
// recorded as Other.
const (
	// OutcomeAllow: the request was decided and allowed (a list page, even
	// an empty one, is allowed).
	OutcomeAllow = "allow"
	// OutcomeDeny: the policy denied the request or the input was invalid.
	OutcomeDeny = "deny"
	// OutcomeNotFound: a read answered "Resource not found" (which is also
	// what a denied read looks like to the client).
	OutcomeNotFound = "not_found"
	// OutcomeError: the request failed after it was accepted.
	OutcomeError = "error"
	// OutcomeRefused: the server failed closed (audit, keys, policy or
	// catalog unavailable) and released nothing.
	OutcomeRefused = "refused"
)

// Rate-limit reasons of custos_rate_limited_total: which limit rejected
// the request. Any other reason is recorded as Other.
const (
	LimitPrincipal   = "principal"   // per authenticated principal
	LimitClient      = "client"      // per OAuth client / API client id
	LimitSource      = "source"      // per source address
	LimitGlobal      = "global"      // server-wide request rate
	LimitConcurrency = "concurrency" // too many requests in flight
	LimitSessions    = "sessions"    // too many sessions held by one principal
)

// Failure label values of custos_auth_failures_total: why an HTTP request
// was refused before MCP saw it (the class of its audit reason). Any other
// value is recorded as Other.
const (
	FailureNoToken           = "no_token"
	FailureInvalidToken      = "invalid_token"
	FailureInsufficientScope = "insufficient_scope"
	FailureCrossOrigin       = "cross_origin"
	FailureSessionMismatch   = "session_mismatch"
	FailureInvalidRequest    = "invalid_request" // malformed Authorization (RFC 6750 §3.1): 400
	FailureInvalidHost       = "invalid_host"    // a non-loopback Host at a loopback listener: 403
)

// Reason label values of custos_policy_rejections_total: the class of
// why a candidate policy was refused (the last good policy keeps
// serving). The caller maps its error to one of them; any other value is
// recorded as Other. The reason itself (compile errors, failing tests) is
// in the log and the policy/reject audit record, never in a label.
const (
	PolicyRejectCompile   = "compile"   // a module does not parse or compile
	PolicyRejectTest      = "test"      // its Rego tests fail, are missing or overran their budget
	PolicyRejectAgreement = "agreement" // its list rule disagrees with its read rule
	PolicyRejectSignature = "signature" // the bundle signature does not verify
	PolicyRejectKey       = "key"       // the verification keys could not be read or are unusable
	PolicyRejectBundle    = "bundle"    // not a bundle custos accepts (unreadable, malformed, too large)
	PolicyRejectRollback  = "rollback"  // its signed sequence does not advance the high-water mark or is under the floor
	PolicyRejectHook      = "hook"      // a good candidate whose load could not be recorded in the audit log
)

// Other is the label value recorded for any method, outcome, reason or
// status outside the fixed sets above.
const Other = "other"

var (
	methods  = []string{MethodList, MethodRead, MethodTemplates, MethodInitialize, MethodPing, Other}
	outcomes = []string{OutcomeAllow, OutcomeDeny, OutcomeNotFound, OutcomeError, OutcomeRefused, Other}
	reasons  = []string{LimitPrincipal, LimitClient, LimitSource, LimitGlobal, LimitConcurrency, LimitSessions, Other}
	failures = []string{FailureNoToken, FailureInvalidToken, FailureInsufficientScope, FailureCrossOrigin, FailureSessionMismatch, FailureInvalidRequest, FailureInvalidHost, Other}
	statuses = []string{"401", "403", "400", Other}
	// PolicyRejectReasons are the reason label values of
	// custos_policy_rejections_total, all exported from the start at 0.
	PolicyRejectReasons = []string{PolicyRejectCompile, PolicyRejectTest, PolicyRejectAgreement, PolicyRejectSignature,
		PolicyRejectKey, PolicyRejectBundle, PolicyRejectRollback, PolicyRejectHook, Other}
)

// Histogram buckets, in seconds.
var (
	// RequestBuckets spans 1 ms to 1 s (a request includes a policy
	// evaluation and a durable audit append, so sub-millisecond answers are
	// not expected), with one overflow bucket at 2.5 s.
	RequestBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	// AuditBuckets spans 100 µs to 1 s: a bbolt commit with fsync.
	AuditBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
	// PolicyBuckets spans 50 µs to 250 ms: one prepared Rego evaluation.
	PolicyBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}
)

// Metrics holds the custos collectors. It is safe for concurrent use. A nil
// *Metrics is valid: every method is then a no-op.
type Metrics struct {
	requests    [][]prometheus.Counter // [method][outcome]
	latency     []prometheus.Observer  // [method]
	audit       prometheus.Histogram
	policy      prometheus.Histogram
	rateLimited []prometheus.Counter // [reason]
	authRejects []prometheus.Counter // [status]
	authFails   []prometheus.Counter // [failure]
	unwritten   prometheus.Counter
	diskFree    prometheus.Gauge
	volumeLow   prometheus.Gauge
	checkpoint  prometheus.Gauge
	keysStale   prometheus.Gauge
	keysFailing prometheus.Gauge
	readiness   *prometheus.GaugeVec
	integrityOK prometheus.Gauge
	scrubFailed prometheus.Counter
	segFailed   *prometheus.CounterVec
	scrubOK     prometheus.Gauge
	polInfo     *prometheus.GaugeVec
	polLoads    prometheus.Counter
	polRejects  *prometheus.CounterVec
	polLoadTS   prometheus.Gauge
	polRejTS    prometheus.Gauge
}

// New creates the custos metrics and registers them with reg:
//
//	custos_requests_total{method, outcome}        counter
//	custos_request_duration_seconds{method}       histogram (RequestBuckets)
//	custos_audit_append_duration_seconds          histogram (AuditBuckets)
//	custos_policy_eval_duration_seconds           histogram (PolicyBuckets)
//	custos_rate_limited_total{reason}             counter
//	custos_auth_rejections_total{status}          counter (status "401", "403", "400")
//	custos_auth_failures_total{reason}            counter (each refusal before MCP, by class: Failure*)
//	custos_refusal_aggregates_unwritten_total     counter (aggregate refusal records that could not be written)
//	custos_audit_disk_free_bytes                  gauge (free bytes on the audit log's volume, last sample)
//	custos_audit_volume_low                       gauge (1 while free space is below the low watermark, else 0)
//	custos_checkpoint_size                        gauge (audit records under the newest checkpoint)
//	custos_keys_stale                             gauge (1 while keys are past their staleness limit, else 0)
//	custos_keys_refresh_failing                   gauge (1 while the last key refresh from Vault failed, else 0)
//	custos_ready_check{check}                     gauge (1 if the named readiness check passed on the last /readyz, else 0)
//	custos_audit_integrity_ok                     gauge (1 while the audit log verifies, 0 once a check found it broken)
//	custos_audit_scrub_failures_total             counter (scrub passes that found a problem or could not finish)
//	custos_audit_scrub_last_success_timestamp_seconds gauge (Unix time of the end of the last clean scrub pass; 0: none yet)
//	custos_policy_info{revision, bundle, sequence} gauge (1, one series: the policy in force; bundle "" and sequence "0" without)
//	custos_policy_loads_total                     counter (policies that took effect, the first one included)
//	custos_policy_rejections_total{reason}        counter (candidates refused, by class: PolicyReject*)
//	custos_policy_last_load_timestamp_seconds     gauge (Unix time of the last load that took effect)
//	custos_policy_last_rejection_timestamp_seconds gauge (Unix time of the last refusal; 0: none yet)
//
// Every label value comes from a fixed set (see the Method*, Outcome*,
// Limit* constants and Other); all series of the labelled counters are
// created up front at 0, so rates and absent-series alerts work from the
// first scrape. The check label of custos_ready_check takes only names
// passed to Health.AddCheck by code.
//
// Use a registry of your own (prometheus.NewRegistry()), not the global
// default one. New panics if a collector is already registered with reg
// (as prometheus.MustRegister does): that is a wiring bug. A nil reg
// creates unregistered metrics (useful in tests of other packages).
func New(reg prometheus.Registerer) *Metrics {
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "custos_requests_total",
		Help: "MCP requests answered, by method and outcome.",
	}, []string{"method", "outcome"})
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "custos_request_duration_seconds",
		Help:    "Time to answer an MCP request, by method.",
		Buckets: RequestBuckets,
	}, []string{"method"})
	aud := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "custos_audit_append_duration_seconds",
		Help:    "Time to durably append one audit record.",
		Buckets: AuditBuckets,
	})
	pol := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "custos_policy_eval_duration_seconds",
		Help:    "Time to evaluate one policy decision.",
		Buckets: PolicyBuckets,
	})
	rl := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "custos_rate_limited_total",
		Help: "Requests rejected by a rate limit, by the limit that rejected them.",
	}, []string{"reason"})
	auth := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "custos_auth_rejections_total",
		Help: "Requests rejected by authentication (401, or 400 for a malformed Authorization header) or authorization (403).",
	}, []string{"status"})
	fails := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "custos_auth_failures_total",
		Help: "HTTP requests refused before MCP saw them (no or invalid token, insufficient scope, cross-origin, another principal's session, a malformed Authorization header), by reason; each one, recorded in the audit log individually or in aggregate.",
	}, []string{"reason"})
	unw := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "custos_refusal_aggregates_unwritten_total",
		Help: "Aggregate refusal records that could not be written to the audit log (the refusals they count were refused; nothing was released).",
	})
	free := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "custos_audit_disk_free_bytes",
		Help: "Free bytes on the audit log's volume (available to custos), at the last sample.",
	})
	low := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "custos_audit_volume_low",
		Help: "1 while free space on the audit log's volume is below the low watermark (/readyz not ready), else 0.",
	})
	cp := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "custos_checkpoint_size",
		Help: "Number of audit records covered by the newest signed checkpoint.",
	})
	ks := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "custos_keys_stale",
		Help: "1 while the keys are past their staleness limit (requests are refused), else 0.",
	})
	kf := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "custos_keys_refresh_failing",
		Help: "1 while the last refresh of the keys from Vault failed (the keys held serve until --key-max-staleness), else 0.",
	})
	rd := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "custos_ready_check",
		Help: "1 if the named readiness check passed on the last /readyz probe, else 0.",
	}, []string{"check"})
	iok := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "custos_audit_integrity_ok",
		Help: "1 while the audit log verifies (startup suffix check and every scrub pass so far), 0 once a record, the Merkle tree or an anchored checkpoint was found broken (reads are then refused).",
	})
	sf := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "custos_audit_scrub_failures_total",
		Help: "Audit scrub passes that found an integrity problem or could not finish.",
	})
	sok := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "custos_audit_scrub_last_success_timestamp_seconds",
		Help: "Unix time at which the last scrub pass that verified the whole audit log ended (0: none yet).",
	})
	seg := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "custos_audit_segment_failures_total",
		Help: "Failed steps of the audit log's background rollover, by step: seal (retried; appends continue in the live segment), seal_note (written at the next open), archive (retried every 5 minutes).",
	}, []string{"step"})
	for _, step := range SegmentSteps {
		seg.WithLabelValues(step) // every step exported from the start, at 0
	}
	pinfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "custos_policy_info",
		Help: "1 for the policy in force: its revision, its bundle digest (\"\" for the built-in policy or a directory) and its signed sequence claim (\"0\": none).",
	}, []string{"revision", "bundle", "sequence"})
	ploads := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "custos_policy_loads_total",
		Help: "Policies that took effect (the initial one included), each recorded in the audit log as policy/load.",
	})
	prej := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "custos_policy_rejections_total",
		Help: "Candidate policies refused (the last good policy keeps serving), by class: compile, test, agreement, signature, key, bundle, rollback, hook, other.",
	}, []string{"reason"})
	for _, r := range PolicyRejectReasons {
		prej.WithLabelValues(r) // every class exported from the start, at 0
	}
	pload := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "custos_policy_last_load_timestamp_seconds",
		Help: "Unix time at which the policy in force took effect.",
	})
	prejt := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "custos_policy_last_rejection_timestamp_seconds",
		Help: "Unix time at which the last candidate policy was refused (0: none since the start). Above custos_policy_last_load_timestamp_seconds: the candidate rolled out last is not serving.",
	})
	if reg != nil {
		reg.MustRegister(reqs, lat, aud, pol, rl, auth, fails, unw, free, low, cp, ks, kf, rd, iok, sf, sok, seg,
			pinfo, ploads, prej, pload, prejt)
	}

	m := &Metrics{audit: aud, policy: pol, unwritten: unw, diskFree: free, volumeLow: low, checkpoint: cp, keysStale: ks, keysFailing: kf, readiness: rd,
		integrityOK: iok, scrubFailed: sf, scrubOK: sok, segFailed: seg,
		polInfo: pinfo, polLoads: ploads, polRejects: prej, polLoadTS: pload, polRejTS: prejt}
	m.requests = make([][]prometheus.Counter, len(methods))
	m.latency = make([]prometheus.Observer, len(methods))
	for i, meth := range methods {
		m.latency[i] = lat.WithLabelValues(meth)
		m.requests[i] = make([]prometheus.Counter, len(outcomes))
		for j, out := range outcomes {
			m.requests[i][j] = reqs.WithLabelValues(meth, out)
		}
	}
	for _, r := range reasons {
		m.rateLimited = append(m.rateLimited, rl.WithLabelValues(r))
	}
	for _, s := range statuses {
		m.authRejects = append(m.authRejects, auth.WithLabelValues(s))
	}
	for _, f := range failures {
		m.authFails = append(m.authFails, fails.WithLabelValues(f))
	}
	return m
}

// methodIndex is the index of method in methods; Other for anything else.
func methodIndex(method string) int {
	switch method {
	case MethodList:
		return 0
	case MethodRead:
		return 1
	case MethodTemplates:
		return 2
	case MethodInitialize:
		return 3
	case MethodPing:
		return 4
	}
	return len(methods) - 1
}

func outcomeIndex(outcome string) int {
	switch outcome {
	case OutcomeAllow:
		return 0
	case OutcomeDeny:
		return 1
	case OutcomeNotFound:
		return 2
	case OutcomeError:
		return 3
	case OutcomeRefused:
		return 4
	}
	return len(outcomes) - 1
}

func reasonIndex(reason string) int {
	switch reason {
	case LimitPrincipal:
		return 0
	case LimitClient:
		return 1
	case LimitSource:
		return 2
	case LimitGlobal:
		return 3
	case LimitConcurrency:
		return 4
	case LimitSessions:
		return 5
	}
	return len(reasons) - 1
}

// ObserveRequest counts one answered request and records its latency.
// method and outcome outside the fixed sets are recorded as Other, so no
// caller can put a URI, an id or a token into a label.
func (m *Metrics) ObserveRequest(method, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	mi := methodIndex(method)
	m.requests[mi][outcomeIndex(outcome)].Inc()
	m.latency[mi].Observe(d.Seconds())
}

// ObserveAudit records the duration of one durable audit append.
func (m *Metrics) ObserveAudit(d time.Duration) {
	if m == nil {
		return
	}
	m.audit.Observe(d.Seconds())
}

// ObservePolicy records the duration of one policy evaluation.
func (m *Metrics) ObservePolicy(d time.Duration) {
	if m == nil {
		return
	}
	m.policy.Observe(d.Seconds())
}

// RateLimited counts one request rejected by the limit named reason (one
// of the Limit* constants; anything else is recorded as Other).
func (m *Metrics) RateLimited(reason string) {
	if m == nil {
		return
	}
	m.rateLimited[reasonIndex(reason)].Inc()
}

// AuthRejected counts one request rejected with HTTP status 401 or 403, or
// 400 for a malformed Authorization header; any other status is recorded
// as Other.
func (m *Metrics) AuthRejected(status int) {
	if m == nil {
		return
	}
	i := len(statuses) - 1
	switch status {
	case 401:
		i = 0
	case 403:
		i = 1
	case 400:
		i = 2
	}
	m.authRejects[i].Inc()
}

// SetCheckpointSize sets the number of audit records covered by the newest
// checkpoint (its tree size).
func (m *Metrics) SetCheckpointSize(n uint64) {
	if m == nil {
		return
	}
	m.checkpoint.Set(float64(n))
}

// SetKeysStale sets custos_keys_stale to 1 (stale) or 0 (fresh).
func (m *Metrics) SetKeysStale(stale bool) {
	if m == nil {
		return
	}
	m.keysStale.Set(gaugeBool(stale))
}

// SetKeysRefreshFailing sets custos_keys_refresh_failing to 1 (the last
// key refresh failed) or 0.
func (m *Metrics) SetKeysRefreshFailing(failing bool) {
	if m == nil {
		return
	}
	m.keysFailing.Set(gaugeBool(failing))
}

// SetAuditIntegrity sets custos_audit_integrity_ok to 1 (the audit log
// verifies) or 0 (a check found it broken).
func (m *Metrics) SetAuditIntegrity(ok bool) {
	if m == nil {
		return
	}
	m.integrityOK.Set(gaugeBool(ok))
}

// SegmentSteps are the step label values of
// custos_audit_segment_failures_total (audit.SegmentSeal, SegmentSealNote,
// SegmentArchive).
var SegmentSteps = []string{"seal", "seal_note", "archive"}

// SegmentFailed counts one failed rollover step
// (custos_audit_segment_failures_total{step}); a step outside SegmentSteps
// counts as "seal".
func (m *Metrics) SegmentFailed(step string) {
	if m == nil {
		return
	}
	if !slices.Contains(SegmentSteps, step) {
		step = "seal"
	}
	m.segFailed.WithLabelValues(step).Inc()
}

// ScrubFailed counts one scrub pass that found a problem or could not
// finish (custos_audit_scrub_failures_total).
func (m *Metrics) ScrubFailed() {
	if m == nil {
		return
	}
	m.scrubFailed.Inc()
}

// ScrubSucceeded records the end time of a scrub pass that verified the
// whole log (custos_audit_scrub_last_success_timestamp_seconds).
func (m *Metrics) ScrubSucceeded(end time.Time) {
	if m == nil {
		return
	}
	m.scrubOK.Set(unixSeconds(end))
}

// setReady records the result of the readiness check named check.
func (m *Metrics) setReady(check string, ok bool) {
	if m == nil {
		return
	}
	m.readiness.WithLabelValues(check).Set(gaugeBool(ok))
}

// AuthFailure counts one HTTP request refused before MCP saw it, by class
// (one of the Failure* constants; anything else is recorded as Other).
func (m *Metrics) AuthFailure(class string) {
	if m == nil {
		return
	}
	i := len(failures) - 1
	for j, f := range failures[:len(failures)-1] {
		if f == class {
			i = j
		}
	}
	m.authFails[i].Inc()
}

// AggregateUnwritten counts one aggregate refusal record that could not be
// written to the audit log.
func (m *Metrics) AggregateUnwritten() {
	if m == nil {
		return
	}
	m.unwritten.Inc()
}

// SetDisk sets custos_audit_disk_free_bytes and custos_audit_volume_low.
func (m *Metrics) SetDisk(free uint64, low bool) {
	if m == nil {
		return
	}
	m.diskFree.Set(float64(free))
	m.volumeLow.Set(gaugeBool(low))
}

// PolicyLoaded records a policy that took effect at t: it becomes the one
// series of custos_policy_info (revision, bundle digest, "" without, and
// sequence claim, 0 without), custos_policy_loads_total counts it and
// custos_policy_last_load_timestamp_seconds is t. The labels are the
// server's own digests and a number from a signed manifest: one series at
// a time, never PHI.
func (m *Metrics) PolicyLoaded(revision, bundle string, sequence uint64, t time.Time) {
	if m == nil {
		return
	}
	m.polInfo.Reset()
	m.polInfo.WithLabelValues(revision, bundle, strconv.FormatUint(sequence, 10)).Set(1)
	m.polLoads.Inc()
	m.polLoadTS.Set(unixSeconds(t))
}

// PolicyRejected counts a candidate policy refused at t, by class (one of
// the PolicyReject* constants; anything else is recorded as Other), and
// sets custos_policy_last_rejection_timestamp_seconds to t.
func (m *Metrics) PolicyRejected(class string, t time.Time) {
	if m == nil {
		return
	}
	if !slices.Contains(PolicyRejectReasons, class) {
		class = Other
	}
	m.polRejects.WithLabelValues(class).Inc()
	m.polRejTS.Set(unixSeconds(t))
}

// unixSeconds is t as a gauge value: Unix seconds with a fraction.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// gaugeBool is the gauge value of a condition: 1 or 0.
func gaugeBool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
