package app_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit/audittest"
)

// TestPolicyStateInMetrics: an operator sees on /metrics which policy is
// in force and that the candidate rolled out last was refused (by class),
// while /readyz stays ready (the last good policy serves); the exposition
// passes promtool check metrics. Before custos_policy_* the state was in
// the log only, and /readyz said "policy":"ok" after every rejection.
func TestPolicyStateInMetrics(t *testing.T) {
	f := newFixture(t)
	audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
	k := newRollbackKit(t)
	path := filepath.Join(k.dir, "policy.tar.gz")
	b2, d2 := k.bundle(2, "r2")
	b1, _ := k.bundle(1, "r1")
	b3, d3 := k.bundle(3, "r3")
	k.put(path, b2)
	o := integrityOptions(t, f)
	o.Policy = app.PolicyOptions{Bundle: path, Keys: []app.PolicyKey{{ID: "team", File: k.pub}}}
	a, err := app.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Serve(ctx)

	metric := func(body, series string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no series %s in /metrics:\n%s", series, grepLines(body, "custos_policy_"))
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	scrape := func() string {
		t.Helper()
		code, body := get(t, a.OpsURL()+"/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		return body
	}
	body := scrape()
	info := grepLines(body, "custos_policy_info{")
	if strings.Count(info, "\n") != 1 || !strings.Contains(info, `bundle="`+d2+`"`) || !strings.Contains(info, `sequence="2"`) || !strings.HasSuffix(info, " 1\n") {
		t.Fatalf("custos_policy_info after the first load:\n%s", info)
	}
	if metric(body, "custos_policy_loads_total") != 1 || metric(body, "custos_policy_last_rejection_timestamp_seconds") != 0 ||
		metric(body, "custos_policy_last_load_timestamp_seconds") == 0 {
		t.Fatalf("after the first load:\n%s", grepLines(body, "custos_policy_"))
	}

	// An older bundle, then a file that is no bundle: both refused, 2
	// keeps serving, and readiness does not change.
	for _, data := range [][]byte{b1, []byte("not a bundle")} {
		k.put(path, data)
		if _, err := a.ReloadPolicy(context.Background()); err == nil {
			t.Fatal("a bad candidate loaded")
		}
	}
	body = scrape()
	if info2 := grepLines(body, "custos_policy_info{"); info2 != info {
		t.Errorf("custos_policy_info changed on rejections:\n%s\nwas\n%s", info2, info)
	}
	if metric(body, `custos_policy_rejections_total{reason="rollback"}`) < 1 || metric(body, `custos_policy_rejections_total{reason="bundle"}`) < 1 ||
		metric(body, `custos_policy_rejections_total{reason="compile"}`) != 0 {
		t.Errorf("rejections by class:\n%s", grepLines(body, "custos_policy_rejections_total"))
	}
	if metric(body, "custos_policy_last_rejection_timestamp_seconds") <= metric(body, "custos_policy_last_load_timestamp_seconds") {
		t.Errorf("the last rejection is not after the last load:\n%s", grepLines(body, "custos_policy_last"))
	}
	if code, ready := get(t, a.OpsURL()+"/readyz"); code != 200 || !strings.Contains(ready, `"policy":"ok"`) {
		t.Errorf("/readyz after rejections (the last good policy serves): %d %s", code, ready)
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	} else if os.Getenv("CI") == "true" {
		t.Errorf("promtool is not installed (make ops-deps): %v (CI=true: a missing dependency fails)", err)
	}

	// 3 loads: one info series, for 3.
	k.put(path, b3)
	ev, err := a.ReloadPolicy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	body = scrape()
	info = grepLines(body, "custos_policy_info{")
	if strings.Count(info, "\n") != 1 || !strings.Contains(info, `bundle="`+d3+`"`) || !strings.Contains(info, `sequence="3"`) ||
		!strings.Contains(info, `revision="`+ev.Revision+`"`) {
		t.Errorf("custos_policy_info after 3 loaded:\n%s", info)
	}
	if metric(body, "custos_policy_loads_total") < 2 || metric(body, "custos_policy_last_load_timestamp_seconds") <= metric(body, "custos_policy_last_rejection_timestamp_seconds") {
		t.Errorf("after 3 loaded:\n%s", grepLines(body, "custos_policy_"))
	}
}

// grepLines are the lines of s that start with prefix, each with its newline.
func grepLines(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
