package app_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/app/admin"
	"github.com/custos-mcp/custos/audit/audittest"
)

// TestPolicyStateInMetrics: an operator sees on /metrics which policy is
// in force and that the candidate rolled out last was refused (by class),
// while /readyz stays ready (the last good policy serves); the exposition
// passes promtool check metrics. Before custos_policy_* the state was in
// the log only, and /readyz said "policy":"ok" after every rejection.
//
// 'custos policy status' (GET /v1/policy on the admin socket) shows the
// same, with the refused candidate's identity and reason (policyStatus);
// until h-polstat nothing answered it.
func TestPolicyStateInMetrics(t *testing.T) {
	f := newFixture(t)
	audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
	k := newRollbackKit(t)
	path := filepath.Join(k.dir, "policy.tar.gz")
	b2, d2 := k.bundle(2, "r2")
	b1, d1 := k.bundle(1, "r1")
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
	ps := policyStatus(t, f.data)
	if ps.Source != "bundle" || ps.Path != path || ps.BundleDigest != d2 || ps.Sequence != 2 || ps.KeyID != "team" ||
		!strings.HasPrefix(ps.Revision, "sha256:") || ps.LoadedAt.IsZero() || ps.LastRejection != nil || ps.Pending {
		t.Fatalf("policy status after the first load: %+v", ps)
	}
	loaded := ps.LoadedAt
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
	for i, data := range [][]byte{b1, []byte("not a bundle")} {
		k.put(path, data)
		if _, err := a.ReloadPolicy(context.Background()); err == nil {
			t.Fatal("a bad candidate loaded")
		}
		// The refusal names the candidate as far as its signature
		// verified it: the rollback all of it, the file that is no
		// bundle its digest only.
		ps := policyStatus(t, f.data)
		r := ps.LastRejection
		if ps.BundleDigest != d2 || ps.Sequence != 2 || !ps.LoadedAt.Equal(loaded) || r == nil || !ps.Pending || r.At.Before(loaded) {
			t.Fatalf("policy status after refusal %d: %+v (%+v)", i, ps, r)
		}
		if i == 0 && (r.Class != "rollback" || r.CandidateDigest != d1 || r.CandidateSequence != 1 || r.CandidateKeyID != "team" ||
			r.CandidateRevision != ps.Revision || !strings.Contains(r.Reason, "claims sequence 1")) {
			t.Errorf("policy status after the rollback: %+v", r)
		}
		if i == 1 && (r.Class != "bundle" || !strings.HasPrefix(r.CandidateDigest, "sha256:") || r.CandidateRevision != "" || r.CandidateSequence != 0 || r.CandidateKeyID != "") {
			t.Errorf("policy status after a file that is no bundle: %+v", r)
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
	if ps := policyStatus(t, f.data); ps.BundleDigest != d3 || ps.Sequence != 3 || ps.Revision != ev.Revision || ps.LastRejection == nil || ps.Pending ||
		ps.LoadedAt.Before(ps.LastRejection.At) {
		t.Errorf("policy status after 3 loaded: %+v", ps)
	}
}

// policyStatus asks the server of data directory dir for its policy
// status over its admin socket, as 'custos policy status' does, and checks
// that the answer holds no key material.
func policyStatus(t *testing.T, dir string) app.PolicyStatus {
	t.Helper()
	ctx := context.Background()
	c, err := admin.Dial(ctx, admin.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var raw json.RawMessage
	if err := c.PolicyStatus(ctx, &raw); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "PRIVATE") || strings.Contains(string(raw), "BEGIN") {
		t.Errorf("policy status holds key material: %s", raw)
	}
	var ps app.PolicyStatus
	if err := json.Unmarshal(raw, &ps); err != nil {
		t.Fatal(err)
	}
	return ps
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
