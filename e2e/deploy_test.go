package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The deployment files under deploy/ (docs/operations.md, "Install" and
// "Monitoring"): the systemd unit is scored and verified by systemd-analyze,
// the alert rules are checked and unit-tested by promtool, and every metric
// the rules and the Grafana dashboard query is one a served custos exports.
// systemd-analyze and promtool come from Debian (make ops-deps); a missing
// one fails the test under CI=true and skips it otherwise.

const (
	unitFile      = "deploy/systemd/custos.service"
	rulesFile     = "deploy/prometheus/custos-rules.yml"
	rulesTestFile = "deploy/prometheus/custos-rules_test.yml"
	dashboardFile = "deploy/grafana/custos-dashboard.json"

	// maxExposure is the highest `systemd-analyze security` exposure the
	// unit may have (0 = fully sandboxed, 10 = not at all).
	maxExposure = 2.0
)

// pendingMetrics are queried by the rules and the dashboard before custos
// exports them: they are being added on other branches of issue 16 under
// these agreed names. Each entry must go when its metric lands (the test
// fails while a listed metric is exported), so that a name that differs
// shows up as unknown.
var pendingMetrics = map[string]string{}

// prometheusMetrics are made by Prometheus itself, not by custos.
var prometheusMetrics = map[string]bool{"up": true}

// requireTool is the path of the command name, installed by make target.
// A missing command fails the test under CI=true and skips it otherwise.
func requireTool(t *testing.T, name, target string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		msg := fmt.Sprintf("%s is not installed (make %s): %v", name, target, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: a missing dependency fails)")
		}
		t.Skip(msg)
	}
	return path
}

// run runs a command in the repository root and returns its combined
// output and exit code.
func run(t *testing.T, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = repo
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return string(out), code
}

// TestSystemdUnitExposure: `systemd-analyze security --offline=true` scores
// the unit at most maxExposure, without complaints about the file.
func TestSystemdUnitExposure(t *testing.T) {
	sa := requireTool(t, "systemd-analyze", "ops-deps")
	threshold := strconv.Itoa(int(maxExposure * 10)) // its scale is 0-100
	out, code := run(t, sa, "security", "--offline=true", "--no-pager", "--threshold="+threshold, unitFile)
	m := regexp.MustCompile(`Overall exposure level for custos\.service: ([0-9]+(?:\.[0-9]+)?)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no overall exposure level in the output of systemd-analyze security (exit %d):\n%s", code, out)
	}
	level, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exposure level of %s: %.1f (at most %.1f)", unitFile, level, maxExposure)
	if level > maxExposure || code != 0 {
		var open []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "✗") {
				open = append(open, l)
			}
		}
		t.Errorf("exposure %.1f (exit %d), want at most %.1f; settings not hardened:\n%s", level, code, maxExposure, strings.Join(open, "\n"))
	}
	// A key systemd does not know (or not in that section) is only a
	// warning to systemd: the setting is silently dropped.
	if regexp.MustCompile(`custos\.service:\d+:`).MatchString(out) {
		t.Errorf("systemd-analyze complains about the unit file:\n%s", out)
	}
}

// TestSystemdUnitVerifies: `systemd-analyze verify` accepts the unit, with
// ExecStart= pointing at the custos binary under test (verify needs the
// binary to exist), and every flag ExecStart= gives is one `custos serve`
// has.
func TestSystemdUnitVerifies(t *testing.T) {
	sa := requireTool(t, "systemd-analyze", "ops-deps")
	raw, err := os.ReadFile(filepath.Join(repo, unitFile))
	if err != nil {
		t.Fatal(err)
	}
	var execStart []string
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			execStart = strings.Fields(v)
		}
	}
	if len(execStart) < 2 || execStart[0] != "/usr/bin/custos" || execStart[1] != "serve" {
		t.Fatalf("ExecStart= is %q, want /usr/bin/custos serve ...", execStart)
	}
	help := mustCustos(t, "serve", "--help")
	for _, a := range execStart[2:] {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			if !strings.Contains(help, "--"+name+" ") {
				t.Errorf("ExecStart= gives --%s, which custos serve does not have", name)
			}
		}
	}

	unit := filepath.Join(t.TempDir(), "custos.service")
	if err := os.WriteFile(unit, []byte(strings.Replace(string(raw), "ExecStart=/usr/bin/custos ", "ExecStart="+bin+" ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Any output is a problem: verify exits 0 on unknown keys and only
	// prints them.
	if out, code := run(t, sa, "verify", "--man=no", unit); code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: exit %d\n%s", code, out)
	}
}

// TestSystemdUsersAndDirs installs the sysusers and tmpfiles snippets into
// an empty root, as a package would: they create the custos account and
// /etc/custos readable by it and by no one else. systemd-tmpfiles must
// chown, so the test needs root.
func TestSystemdUsersAndDirs(t *testing.T) {
	requireTool(t, "systemd-sysusers", "ops-deps")
	requireTool(t, "systemd-tmpfiles", "ops-deps")
	if os.Geteuid() != 0 {
		t.Skip("systemd-tmpfiles --root must chown: needs root")
	}
	root := t.TempDir()
	for src, dst := range map[string]string{
		"deploy/systemd/custos.sysusers": "usr/lib/sysusers.d/custos.conf",
		"deploy/systemd/custos.tmpfiles": "usr/lib/tmpfiles.d/custos.conf",
	} {
		b, err := os.ReadFile(filepath.Join(repo, src))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"systemd-sysusers", "systemd-tmpfiles"} {
		args := []string{"--root=" + root}
		if c == "systemd-tmpfiles" {
			args = append(args, "--create")
		}
		if out, code := run(t, c, args...); code != 0 {
			t.Fatalf("%s: exit %d\n%s", c, code, out)
		}
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^custos:x:(\d+):(\d+):[^:]*:/var/lib/custos:/usr/sbin/nologin$`).FindStringSubmatch(string(passwd))
	if m == nil {
		t.Fatalf("no custos system account without login in /etc/passwd:\n%s", passwd)
	}
	gid, _ := strconv.Atoi(m[2])
	for _, d := range []string{"etc/custos", "etc/custos/tls", "etc/custos/vault", "etc/custos/policy-keys"} {
		var st os.FileInfo
		if st, err = os.Stat(filepath.Join(root, d)); err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		if st.Mode().Perm() != 0o750 {
			t.Errorf("/%s mode %v, want 0750", d, st.Mode().Perm())
		}
		if sys, ok := st.Sys().(interface{ GetGid() uint32 }); ok && int(sys.GetGid()) != gid {
			t.Errorf("/%s group %d, want custos (%d)", d, sys.GetGid(), gid)
		}
	}
}

// TestPrometheusRules: promtool checks the alert rules and runs their unit
// tests (every alert firing for the instance in trouble and not for a
// healthy one).
func TestPrometheusRules(t *testing.T) {
	promtool := requireTool(t, "promtool", "ops-deps")
	if out, code := run(t, promtool, "check", "rules", rulesFile); code != 0 {
		t.Errorf("promtool check rules: exit %d\n%s", code, out)
	}
	if out, code := run(t, promtool, "test", "rules", rulesTestFile); code != 0 {
		t.Errorf("promtool test rules: exit %d\n%s", code, out)
	}
	// Every alert has a test.
	tests, err := os.ReadFile(filepath.Join(repo, rulesTestFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alertNames(t) {
		if !strings.Contains(string(tests), "alertname: "+a+"\n") {
			t.Errorf("alert %s has no test in %s", a, rulesTestFile)
		}
	}
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert, Record, Expr string
		}
	}
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func alertNames(t *testing.T) []string {
	var names []string
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	if len(names) == 0 {
		t.Fatalf("no alerts in %s", rulesFile)
	}
	return names
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID    string
	Panels []struct {
		ID      int
		Type    string
		Title   string
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string
		}
	}
	Templating struct {
		List []struct {
			Name  string
			Type  string
			Query any
		}
	}
}

// dashboardExprs returns the dashboard's PromQL queries by panel and refId,
// with Grafana's variables replaced by values PromQL parses, and the
// metrics its template variables query.
func dashboardExprs(t *testing.T) (exprs map[string]string, varMetrics []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no uid or no panels", dashboardFile)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	exprs = map[string]string{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %q: a query without expr or refId", p.Title)
			}
			exprs[fmt.Sprintf("panel %d %q %s", p.ID, p.Title, tg.RefID)] = vars.Replace(tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		b, _ := json.Marshal(v.Query)
		m := regexp.MustCompile(`label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)`).FindSubmatch(b)
		if m == nil {
			t.Errorf("template variable %s: no label_values(metric, label) query", v.Name)
			continue
		}
		varMetrics = append(varMetrics, string(m[1]))
	}
	return exprs, varMetrics
}

// TestDashboardQueriesParse: every query of the Grafana dashboard is valid
// PromQL (promtool checks them as recording rules).
func TestDashboardQueriesParse(t *testing.T) {
	promtool := requireTool(t, "promtool", "ops-deps")
	exprs, _ := dashboardExprs(t)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	keys := slices.Sorted(maps.Keys(exprs))
	for i, k := range keys {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: exprs[k]})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run(t, promtool, "check", "rules", f); code != 0 {
		for i, k := range keys {
			out = strings.ReplaceAll(out, fmt.Sprintf("dashboard:query_%d", i), k)
		}
		t.Errorf("dashboard queries do not parse: exit %d\n%s", code, out)
	}
}

// TestMonitoringUsesExportedMetrics serves custos and checks that every
// metric the alert rules and the dashboard query is in its /metrics
// exposition (after a /readyz probe, which sets custos_ready_check), made
// by Prometheus itself (up), or listed in pendingMetrics; and that no
// pending metric is exported yet.
func TestMonitoringUsesExportedMetrics(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	newToken(t, d.principal("clinician"), tokens)
	opsFile := filepath.Join(t.TempDir(), "ops")
	srv := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--ops-listen", loopback, "--ops-addr-file", opsFile)
	opsURL := srv.waitAddr(t, opsFile)
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(opsURL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v\n%s", path, resp.StatusCode, err, b)
		}
		return string(b)
	}
	get("/readyz")
	exported := map[string]bool{}
	for _, l := range strings.Split(get("/metrics"), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		exported[l[:strings.IndexAny(l, "{ ")]] = true
	}

	used := map[string][]string{} // metric -> where
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			for _, m := range promqlMetrics(r.Expr) {
				used[m] = append(used[m], "rule "+r.Alert+r.Record)
			}
		}
	}
	exprs, varMetrics := dashboardExprs(t)
	for k, e := range exprs {
		for _, m := range promqlMetrics(e) {
			used[m] = append(used[m], "dashboard "+k)
		}
	}
	for _, m := range varMetrics {
		used[m] = append(used[m], "dashboard variable")
	}
	if len(used) < 10 {
		t.Fatalf("only %d metrics found in the rules and the dashboard: %v", len(used), used)
	}
	for _, m := range slices.Sorted(maps.Keys(used)) {
		switch {
		case exported[m] && pendingMetrics[m] != "":
			t.Errorf("%s is exported now: remove it from pendingMetrics (%s)", m, pendingMetrics[m])
		case exported[m], prometheusMetrics[m], pendingMetrics[m] != "":
		default:
			t.Errorf("%s is not a metric custos exports (used by %s)", m, strings.Join(used[m], "; "))
		}
	}
	for m, why := range pendingMetrics {
		if len(used[m]) == 0 {
			t.Errorf("pendingMetrics lists %s (%s), which nothing uses", m, why)
		}
	}
}

// promqlKeywords are PromQL words that are not metric names: aggregation
// operators (which may be followed by by/without before their parenthesis),
// binary operators and modifiers.
var promqlKeywords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true,
	"inf": true, "nan": true,
}

// promqlGrouping are the modifiers followed by a parenthesized label list.
var promqlGrouping = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// promqlMetrics returns the metric names expr selects, in order, without
// repeats (promqlSelectors).
func promqlMetrics(expr string) []string {
	var out []string
	for _, s := range promqlSelectors(expr) {
		if !slices.Contains(out, s.Metric) {
			out = append(out, s.Metric)
		}
	}
	return out
}

// selector is one vector selector of a PromQL expression: metric{Matchers},
// and, when it is a range selector (metric{...}[5m]), the function it is
// the argument of (Func, e.g. "rate").
type selector struct {
	Metric   string
	Matchers string // the text between the braces, "" without
	Func     string
}

// promqlSelectors returns the vector selectors of expr, in order:
// identifiers outside label matchers, strings, ranges and grouping label
// lists that are neither functions (followed by '('), keywords nor numbers,
// with the label matchers that follow them. Enough for the expressions of
// deploy/ (checked against promtool's parser by TestDashboardQueriesParse
// and TestPrometheusRules); {__name__=...} selectors are not supported.
func promqlSelectors(expr string) []selector {
	var out []selector
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
	}
	skipString := func(i int) int { // i at the opening quote; returns the index after the closing one
		q := expr[i]
		for i++; i < len(expr) && expr[i] != q; i++ {
			if expr[i] == '\\' && q != '`' {
				i++
			}
		}
		return i + 1
	}
	skipTo := func(i int, open, close byte) int { // i at open; returns the index after the matching close
		depth := 0
		for i < len(expr) {
			switch c := expr[i]; {
			case c == '"' || c == '\'' || c == '`':
				i = skipString(i)
				continue
			case c == open:
				depth++
			case c == close:
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	next := func(i int) int { // index of the next non-space byte at or after i
		for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
			i++
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '{':
			i = skipTo(i, '{', '}')
		case c == '[':
			i = skipTo(i, '[', ']')
		case c == '"' || c == '\'' || c == '`':
			i = skipString(i)
		case '0' <= c && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			word, k := expr[i:j], next(j)
			switch {
			case word == "offset":
				k = next(k)
				for k < len(expr) && (isIdent(expr[k], false) || expr[k] == '-') {
					k++
				}
				j = k
			case promqlGrouping[word]:
				if k < len(expr) && expr[k] == '(' {
					j = skipTo(k, '(', ')')
				}
			case promqlKeywords[strings.ToLower(word)], k < len(expr) && expr[k] == '(':
			default:
				sel := selector{Metric: word}
				if k < len(expr) && expr[k] == '{' {
					j = skipTo(k, '{', '}')
					sel.Matchers = strings.TrimSpace(expr[k+1 : j-1])
					k = next(j)
				}
				if k < len(expr) && expr[k] == '[' {
					// The function whose argument the range is: the
					// identifier before the '(' before the metric.
					b := strings.TrimRight(expr[:i], " \t\r\n")
					if f, ok := strings.CutSuffix(b, "("); ok {
						f = strings.TrimRight(f, " \t\r\n")
						s := len(f)
						for s > 0 && isIdent(f[s-1], false) {
							s--
						}
						sel.Func = f[s:]
					}
				}
				out = append(out, sel)
			}
			i = j
		default:
			i++
		}
	}
	return out
}

// TestPromQLMetrics: the metric-name extraction the monitoring checks rely
// on, on the constructs deploy/ uses.
func TestPromQLMetrics(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up{job="custos"} == 0`, []string{"up"}},
		{`sum by (job, instance) (rate(custos_requests_total{outcome="refused"}[5m])) > 0`, []string{"custos_requests_total"}},
		{`histogram_quantile(0.99, sum by (job, le) (rate(a_bucket[5m]))) > 0.25`, []string{"a_bucket"}},
		{`increase(a_count[10m]) > 0 unless changes(b[10m]) > 0`, []string{"a_count", "b"}},
		{`predict_linear(free[6h], 7 * 86400) < 0`, []string{"free"}},
		{"(\n  sum(rate(x{o=~\"deny|not_found\"}[15m])) / sum (rate(x[15m]))\n) > 0.25\nand sum without(m) (x offset 1h) > 1e-1", []string{"x"}},
		{`count(c{a="}", b='{'} == 0) or vector(0)`, []string{"c"}},
		{`a * on(instance) group_left(check) b`, []string{"a", "b"}},
	} {
		if got := promqlMetrics(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("promqlMetrics(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// TestPromQLSelectors: the selectors, their label matchers and the
// functions over their ranges, as the live monitoring check reads them.
func TestPromQLSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []selector
	}{
		{`sum by (job) (rate(a_total{outcome="refused"}[5m])) > 0`, []selector{{"a_total", `outcome="refused"`, "rate"}}},
		{`increase(a_count[10m]) > 0 unless changes( b {c="}"} [10m]) > 0`, []selector{{"a_count", "", "increase"}, {"b", `c="}"`, "changes"}}},
		{`predict_linear(free[6h], 7 * 86400) < 0`, []selector{{"free", "", "predict_linear"}}},
		{`count(c{a=~"x|y", b!="z"} == 0) or vector(0)`, []selector{{"c", `a=~"x|y", b!="z"`, ""}}},
	} {
		if got := promqlSelectors(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("promqlSelectors(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}
