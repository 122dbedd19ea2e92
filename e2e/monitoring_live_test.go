package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// The alert rules and the dashboard (deploy/) against what a served custos
// really exports, as an operator who deploys them would see it: not only
// the metric names (TestMonitoringUsesExportedMetrics) but the types their
// functions need, the label values they select, whether the paths they
// watch move them, and whether they stay quiet on a healthy server.

// notExercised are the counter selectors of the rules and the dashboard
// (metric{matchers}, without job and instance) that the live exercise of
// TestMonitoringAgainstLiveServer does not move, with the test that does.
// Every other counter or histogram a rule or panel selects must have moved:
// a selector that stays at 0 however custos is used (a method or outcome
// custos never counts) is an always-empty panel or an alert that cannot
// fire.
var notExercised = map[string]string{
	`custos_requests_total{outcome="refused"}`: "failing closed needs a broken audit log, stale keys or an undecidable policy (server, app and vault tests)",
	`custos_rate_limited_total`:                "a rate limit hit (TestRateLimitPerPrincipal)",
	`custos_audit_scrub_failures_total`:        "a broken audit log found by the scrubber (app/scrub_test.go)",
	`custos_audit_segment_failures_total`:      "a failed seal or archive copy (audit.TestSegmentFailuresAreReported, ops.TestSegmentFailureMetrics)",
}

// idleHorizon is how long the healthy scrape is held for promtool: longer
// than every rule's window plus its "for".
const idleHorizon = 90 // minutes

// TestMonitoringAgainstLiveServer serves custos on a new data set (a first
// start, as a new deployment has), drives each path the rules and the
// dashboard watch (a session, a ping, a list, an allowed, a missing and a
// malformed read, an unauthenticated request, a policy reload, a
// checkpoint, a /readyz probe), scrapes /metrics and checks that
//   - every selector of the rules, the dashboard and the rules' unit tests
//     names a metric custos exports, as the type its use needs (rate and
//     increase over a counter or a histogram's _bucket, _sum or _count;
//     delta, deriv and predict_linear over a gauge), with label matchers
//     some exported series satisfies;
//   - every counter or histogram selector of the rules and the dashboard
//     moved, unless notExercised says which test moves it;
//   - no alert fires on that scrape held for idleHorizon minutes: the
//     server is healthy and idle (promtool test rules).
func TestMonitoringAgainstLiveServer(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	opsFile := filepath.Join(t.TempDir(), "ops")
	srv := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens,
		"--policy-dir", filepath.Join(repo, "rego"), "--ops-listen", loopback, "--ops-addr-file", opsFile)
	opsURL := srv.waitAddr(t, opsFile)
	get := func(path string) (int, string) { t.Helper(); return httpGet(t, opsURL+path) }

	// A 2025-11-25 session: initialize, then ping, as raw JSON-RPC (the
	// go-sdk client speaks the stateless revision, which has neither).
	post := func(sid, body string) (sessionID string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 || strings.Contains(string(b), `"error"`) {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
		}
		return resp.Header.Get("Mcp-Session-Id")
	}
	sid := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e-monitoring","version":"1"}}}`)
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	post(sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)

	ctx := context.Background()
	cs := connect(t, srv.url, tok)
	page, err := cs.ListResources(ctx, nil)
	if err != nil || len(page.Resources) == 0 {
		t.Fatalf("list: %v", err)
	}
	uri := page.Resources[0].URI
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: missingURI(uri)}); err == nil {
		t.Fatal("a read of a missing resource succeeded")
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "no-scheme"}); err == nil {
		t.Fatal("a read of a malformed URI succeeded")
	}
	resp, err := http.Post(srv.url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request without a token: %d, want 401", resp.StatusCode)
	}
	srv.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, func() bool { return strings.Contains(srv.stderr.String(), "SIGHUP: policy reloaded") })

	// Every append anchored (the checkpointer signs within a second).
	var fams map[string]*dto.MetricFamily
	waitFor(t, func() bool {
		_, body := get("/metrics")
		fams = parseExposition(t, body)
		size, appends := value(fams["custos_checkpoint_size"]), fams["custos_audit_append_duration_seconds"]
		return appends != nil && size > 0 && size >= float64(appends.GetMetric()[0].GetHistogram().GetSampleCount())
	})
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	_, body := get("/metrics")
	fams = parseExposition(t, body)

	// Every selector of the rules, the dashboard and the rules' tests.
	type use struct {
		sel   selector
		where string
		moved bool // must have moved (not a promtool input series)
	}
	var uses []use
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			for _, s := range promqlSelectors(r.Expr) {
				uses = append(uses, use{s, "rule " + r.Alert + r.Record, true})
			}
		}
	}
	exprs, varMetrics := dashboardExprs(t)
	for _, k := range slices.Sorted(maps.Keys(exprs)) {
		for _, s := range promqlSelectors(exprs[k]) {
			uses = append(uses, use{s, "dashboard " + k, true})
		}
	}
	for _, m := range varMetrics {
		uses = append(uses, use{selector{Metric: m}, "dashboard variable", false})
	}
	for _, s := range rulesTestSeries(t) {
		uses = append(uses, use{s, rulesTestFile + " input series", false})
	}
	used := map[string]bool{}
	for _, u := range uses {
		if prometheusMetrics[u.sel.Metric] {
			continue
		}
		key := selectorKey(t, u.sel)
		problem, moved := checkSelector(fams, u.sel)
		switch {
		case problem != "":
			t.Errorf("%s: %s%s: %s", u.where, u.sel.Metric, braces(u.sel.Matchers), problem)
		case u.moved && moved == nil:
		case u.moved && !*moved && notExercised[key] == "":
			t.Errorf("%s: %s stayed at 0 while every path it watches was used: the panel is always empty, the alert cannot fire", u.where, key)
		case u.moved && notExercised[key] != "":
			used[key] = true
		}
	}
	for k, why := range notExercised {
		if !used[k] {
			t.Errorf("notExercised lists %s (%s), which no counter selector of the rules or the dashboard is", k, why)
		}
	}

	t.Run("idle healthy server fires no alert", func(t *testing.T) {
		if firing := firingAlerts(t, fams, fams); len(firing) > 0 {
			t.Errorf("alerts fire on a healthy idle custos: %s", strings.Join(firing, ", "))
		}
	})
}

func parseExposition(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// TestMonitoringAlertsOnAVolumeInReserve: the alerts an operator gets from
// a custos whose audit volume is down to its reserve, from two real
// scrapes with refused lists between them (firingAlerts): the volume is
// low, a readiness check fails, requests are refused; nothing else (the
// refusals are recorded and anchored: no checkpoint lag).
func TestMonitoringAlertsOnAVolumeInReserve(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	opsFile := filepath.Join(t.TempDir(), "ops")
	huge := strconv.FormatInt(1<<62, 10) // more than any volume holds
	srv := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--ops-listen", loopback, "--ops-addr-file", opsFile,
		"--audit-disk-low-watermark", huge, "--audit-disk-reserve", huge)
	opsURL := srv.waitAddr(t, opsFile)
	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		if code, body := httpGet(t, opsURL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"disk":"audit volume in reserve`) {
			t.Fatalf("/readyz: %d %s, want 503 naming the disk", code, body)
		}
		var fams map[string]*dto.MetricFamily
		waitFor(t, func() bool { // every append anchored
			_, body := httpGet(t, opsURL+"/metrics")
			fams = parseExposition(t, body)
			appends := fams["custos_audit_append_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount()
			return value(fams["custos_checkpoint_size"]) >= float64(appends)
		})
		return fams
	}
	before := scrape()
	cs := connect(t, srv.url, tok)
	for range 3 {
		if _, err := cs.ListResources(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "audit volume low") {
			t.Fatalf("a list in the reserve: %v, want refused", err)
		}
	}
	after := scrape()
	want := []string{"CustosAuditVolumeLow", "CustosNotReady", "CustosRequestsRefused"}
	if got := firingAlerts(t, before, after); !slices.Equal(got, want) {
		t.Errorf("alerts firing on a custos in its audit reserve: %q, want %q", got, want)
	}
}

// TestMonitoringAlertsOnABrokenAuditLog: the alerts of a custos whose
// scrubber found a record edited behind the last anchored checkpoint, from
// two real scrapes with refused lists between them (firingAlerts): the
// integrity is broken, a readiness check fails, requests are refused and
// the scrub failed (its first pass runs as the server starts: the failure
// is in the first scrape already, which increase() alone did not see).
// Not the checkpoint lag: the refused lists append nothing (each failed
// append was counted as one, and CustosCheckpointLag fired, blaming the
// anchor directory).
func TestMonitoringAlertsOnABrokenAuditLog(t *testing.T) {
	r := audittest.NewRecorder(t) // the log is broken on purpose
	d := newDataset(r)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	anchor := t.TempDir()
	devServe(t, d, tokens, tok, anchor, 3)
	audittest.FlipRecord(t, d.audit(), 2) // behind the last anchor: found by the scrubber

	opsFile := filepath.Join(t.TempDir(), "ops")
	srv := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--anchor-dir", anchor,
		"--checkpoint-interval", "50ms", "--node", "e2e", "--ops-listen", loopback, "--ops-addr-file", opsFile,
		"--scrub-interval", "1h")
	opsURL := srv.waitAddr(t, opsFile)
	waitFor(t, func() bool { code, _ := httpGet(t, opsURL+"/readyz"); return code == http.StatusServiceUnavailable })
	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		if code, body := httpGet(t, opsURL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"integrity":"audit log broken`) {
			t.Fatalf("/readyz: %d %s, want 503 naming the integrity", code, body)
		}
		var fams map[string]*dto.MetricFamily
		waitFor(t, func() bool { // the audit/integrity record anchored
			_, body := httpGet(t, opsURL+"/metrics")
			fams = parseExposition(t, body)
			return strings.Contains(srv.stderr.String(), "AUDIT LOG INTEGRITY FAILURE:") &&
				strings.Contains(srv.stderr.String(), `"msg":"audit checkpoint anchored"`)
		})
		return fams
	}
	before := scrape()
	cs := connect(t, srv.url, tok)
	for range 3 {
		if _, err := cs.ListResources(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "integrity check failed") {
			t.Fatalf("a list after the break: %v, want refused", err)
		}
	}
	after := scrape()
	want := []string{"CustosAuditIntegrityBroken", "CustosAuditScrubFailed", "CustosNotReady", "CustosRequestsRefused"}
	if got := firingAlerts(t, before, after); !slices.Equal(got, want) {
		t.Errorf("alerts firing on a custos whose audit log is broken: %q, want %q", got, want)
	}
	srv.stop(t)
	r.RunCleanups()
	if !r.Failed() {
		t.Error("the data set's cleanup check passed an edited audit log")
	}
}

// httpGet is the status and body of a GET of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// value is the value of a family's only series (0 without the family).
func value(f *dto.MetricFamily) float64 {
	if f == nil || len(f.GetMetric()) == 0 {
		return 0
	}
	return sampleValue(f.GetMetric()[0])
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

func braces(m string) string {
	if m == "" {
		return ""
	}
	return "{" + m + "}"
}

// labelMatcher is one label matcher of a selector: name op "value".
type labelMatcher struct{ name, op, value string }

var matcherRE = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`" + `)\s*(?:,|$)`)

// parseMatchers parses the text between a selector's braces.
func parseMatchers(s string) ([]labelMatcher, error) {
	var out []labelMatcher
	for rest := strings.TrimSpace(s); rest != ""; rest = strings.TrimSpace(rest) {
		m := matcherRE.FindStringSubmatch(rest)
		if m == nil {
			return nil, fmt.Errorf("cannot read the label matchers at %q", rest)
		}
		q := m[3]
		if q[0] == '\'' {
			q = `"` + strings.ReplaceAll(q[1:len(q)-1], `"`, `\"`) + `"`
		}
		v, err := strconv.Unquote(q)
		if err != nil {
			return nil, fmt.Errorf("label value %s: %v", m[3], err)
		}
		out = append(out, labelMatcher{m[1], m[2], v})
		rest = rest[len(m[0]):]
	}
	return out, nil
}

func (lm labelMatcher) matches(labels map[string]string) bool {
	v := labels[lm.name]
	switch lm.op {
	case "=":
		return v == lm.value
	case "!=":
		return v != lm.value
	}
	re, err := regexp.Compile("^(?:" + lm.value + ")$")
	if err != nil {
		return false
	}
	return re.MatchString(v) == (lm.op == "=~")
}

// scopeLabels are attached by Prometheus (the scrape's target), not by
// custos.
var scopeLabels = map[string]bool{"job": true, "instance": true}

// selectorKey is sel as notExercised names it: metric{matchers} without
// job and instance, in the order written.
func selectorKey(t *testing.T, sel selector) string {
	ms, err := parseMatchers(sel.Matchers)
	if err != nil {
		t.Fatalf("%s{%s}: %v", sel.Metric, sel.Matchers, err)
	}
	var parts []string
	for _, m := range ms {
		if !scopeLabels[m.name] {
			parts = append(parts, m.name+m.op+strconv.Quote(m.value))
		}
	}
	return sel.Metric + braces(strings.Join(parts, ", "))
}

// rangeOverCounter and rangeOverGauge are the range functions meant for
// one type only.
var (
	rangeOverCounter = map[string]bool{"rate": true, "irate": true, "increase": true, "resets": true}
	rangeOverGauge   = map[string]bool{"delta": true, "idelta": true, "deriv": true, "predict_linear": true, "holt_winters": true}
)

// checkSelector checks sel against the scrape: a problem ("" if none), and
// for a counter or histogram whether a matching series is above 0 (nil
// for a gauge, where 0 is a healthy value).
func checkSelector(fams map[string]*dto.MetricFamily, sel selector) (problem string, moved *bool) {
	name, part := sel.Metric, ""
	f := fams[name]
	if f == nil {
		for _, sfx := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, sfx); ok && fams[base] != nil {
				f, part = fams[base], sfx
			}
		}
	}
	if f == nil {
		return "not a metric custos exports", nil
	}
	typ := f.GetType()
	isHist := typ == dto.MetricType_HISTOGRAM || typ == dto.MetricType_GAUGE_HISTOGRAM
	switch {
	case isHist && part == "":
		return "a histogram: select its _bucket, _sum or _count", nil
	case part != "" && !isHist && !(typ == dto.MetricType_SUMMARY && part != "_bucket"):
		return fmt.Sprintf("%s is a %s, it has no %s series", f.GetName(), typ, part), nil
	case rangeOverCounter[sel.Func] && typ != dto.MetricType_COUNTER && !isHist:
		return fmt.Sprintf("%s() over a %s (a counter function)", sel.Func, typ), nil
	case rangeOverGauge[sel.Func] && typ != dto.MetricType_GAUGE:
		return fmt.Sprintf("%s() over a %s (a gauge function)", sel.Func, typ), nil
	}
	ms, err := parseMatchers(sel.Matchers)
	if err != nil {
		return err.Error(), nil
	}
	matched, above := matchSeries(f, part, ms)
	if !matched {
		var have []string
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			have = append(have, "{"+strings.Join(ls, ",")+"}")
		}
		return fmt.Sprintf("no exported series matches; custos exports %s", strings.Join(have, " ")), nil
	}
	// A regex of literal alternatives (outcome=~"deny|not_found"): each
	// one a value custos exports, or that part of the query is dead.
	for i, lm := range ms {
		if lm.op != "=~" || !literalAlternatives.MatchString(lm.value) {
			continue
		}
		for _, alt := range strings.Split(lm.value, "|") {
			one := slices.Clone(ms)
			one[i] = labelMatcher{lm.name, "=", alt}
			if ok, _ := matchSeries(f, part, one); !ok {
				return fmt.Sprintf("no exported series has %s=%q", lm.name, alt), nil
			}
		}
	}
	if typ == dto.MetricType_GAUGE {
		return "", nil
	}
	return "", &above
}

// literalAlternatives is a regex label value made of literal values
// only: a|b|c.
var literalAlternatives = regexp.MustCompile(`^[a-zA-Z0-9_/:.-]+(\|[a-zA-Z0-9_/:.-]+)+$`)

// matchSeries reports whether a series of f (its part: "", or _bucket,
// _sum, _count of a histogram) satisfies every matcher but job and
// instance, and whether one that does is above 0.
func matchSeries(f *dto.MetricFamily, part string, ms []labelMatcher) (matched, above bool) {
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		sets := []map[string]string{labels}
		if part == "_bucket" { // one series per bucket, by le
			sets = nil
			for _, b := range append(m.GetHistogram().GetBucket(), &dto.Bucket{UpperBound: ptr(math.Inf(1))}) {
				l := maps.Clone(labels)
				l["le"] = formatFloat(b.GetUpperBound())
				sets = append(sets, l)
			}
		}
		for _, l := range sets {
			ok := true
			for _, lm := range ms {
				if !scopeLabels[lm.name] && !lm.matches(l) {
					ok = false
				}
			}
			if ok {
				matched = true
				above = above || sampleValue(m) > 0
			}
		}
	}
	return matched, above
}

func ptr[T any](v T) *T { return &v }

// formatFloat writes a sample value or an le bound as Prometheus does.
func formatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// rulesTestSeries are the input series of the rules' unit tests, as
// selectors (their labels as equality matchers).
func rulesTestSeries(t *testing.T) []selector {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo, rulesTestFile))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tests []struct {
			InputSeries []struct {
				Series string
			} `yaml:"input_series"`
		}
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	var out []selector
	for _, tc := range f.Tests {
		for _, s := range tc.InputSeries {
			out = append(out, promqlSelectors(s.Series)...)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no input series in %s", rulesTestFile)
	}
	return out
}

// firingAlerts holds two scrapes of one server, before and after, for
// idleHorizon minutes, as Prometheus would have scraped them every minute
// (job "custos", instance "live:9090", up 1): each series moves by after -
// before a minute, from before, but custos_audit_disk_free_bytes, which
// stays at its value after (the test machine's other processes move it);
// process_start_time_seconds is the process's age at the first sample,
// before promtool's time 0. It runs the alert rules over that with
// promtool and returns the alerts that fire at minute 30 (in the
// process's first hour) or at the end, sorted.
func firingAlerts(t *testing.T, before, after map[string]*dto.MetricFamily) []string {
	t.Helper()
	promtool := requireTool(t, "promtool", "ops-deps")
	type series struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	}
	var in []series
	add := func(name string, labels map[string]string, from, to float64) {
		labels = maps.Clone(labels)
		labels["job"], labels["instance"] = "custos", "live:9090"
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			ls = append(ls, k+"="+strconv.Quote(labels[k]))
		}
		in = append(in, series{name + "{" + strings.Join(ls, ", ") + "}",
			fmt.Sprintf("%s+%sx%d", formatFloat(from), formatFloat(to-from), idleHorizon)})
	}
	add("up", map[string]string{}, 1, 1)
	if f := after["process_start_time_seconds"]; f != nil {
		age := float64(time.Now().UnixNano())/1e9 - value(f)
		add("process_start_time_seconds", map[string]string{}, -age, -age)
	}
	// samples are the series of a family as Prometheus names them.
	samples := func(f *dto.MetricFamily) map[string]float64 {
		out := map[string]float64{}
		if f == nil {
			return out
		}
		key := func(name string, labels map[string]string) string {
			b, _ := json.Marshal(labels) // sorted keys
			return name + "\x00" + string(b)
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			h := m.GetHistogram()
			if h == nil {
				out[key(f.GetName(), labels)] = sampleValue(m)
				continue
			}
			for _, b := range append(h.GetBucket(), &dto.Bucket{UpperBound: ptr(math.Inf(1)), CumulativeCount: ptr(h.GetSampleCount())}) {
				l := maps.Clone(labels)
				l["le"] = formatFloat(b.GetUpperBound())
				out[key(f.GetName()+"_bucket", l)] = float64(b.GetCumulativeCount())
			}
			out[key(f.GetName()+"_sum", labels)] = h.GetSampleSum()
			out[key(f.GetName()+"_count", labels)] = float64(h.GetSampleCount())
		}
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(after)) {
		if !strings.HasPrefix(name, "custos_") {
			continue
		}
		held := name == "custos_audit_disk_free_bytes"
		was, now := samples(before[name]), samples(after[name])
		for _, k := range slices.Sorted(maps.Keys(now)) {
			n, js, _ := strings.Cut(k, "\x00")
			var labels map[string]string
			if err := json.Unmarshal([]byte(js), &labels); err != nil {
				t.Fatal(err)
			}
			from := was[k]
			if held {
				from = now[k]
			}
			add(n, labels, from, now[k])
		}
	}
	// Every alert is expected not to fire: those that do are the failures.
	var checks []map[string]any
	for _, a := range alertNames(t) {
		for _, at := range []int{30, idleHorizon} {
			checks = append(checks, map[string]any{"eval_time": fmt.Sprintf("%dm", at), "alertname": a, "exp_alerts": []any{}})
		}
	}
	b, err := yaml.Marshal(map[string]any{
		"rule_files":          []string{filepath.Join(repo, rulesFile)},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"name": "live custos", "interval": "1m",
			"input_series": in, "alert_rule_test": checks,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "live_test.yml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, promtool, "test", "rules", f)
	var firing []string
	for _, m := range regexp.MustCompile(`alertname: (\w+), time:`).FindAllStringSubmatch(out, -1) {
		firing = append(firing, m[1])
	}
	slices.Sort(firing)
	firing = slices.Compact(firing)
	if (code == 0) != (len(firing) == 0) {
		t.Fatalf("promtool test rules: exit %d, alerts named in its output %q:\n%s", code, firing, out)
	}
	if len(firing) > 0 {
		t.Logf("firing on the scrapes of this server: %s\n%s", strings.Join(firing, ", "), out)
	}
	return firing
}
