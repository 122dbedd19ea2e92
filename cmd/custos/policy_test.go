package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/policy/impact"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

// The recorded policy of the impact test is a frozen copy of the default
// policy, and the candidate the same with billing's grant removed and one
// research obligation dropped (package policy/impact's testdata).
const (
	baselinePolicy  = "../../policy/impact/testdata/baseline"
	candidatePolicy = "../../policy/impact/testdata/candidate"
)

// TestPolicyImpactEndToEnd serves real reads through package server (real
// catalog, real audit log, dev keys), then runs `custos policy impact` on
// the data directory and checks what it reports.
func TestPolicyImpactEndToEnd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	seedDir := filepath.Join(dir, "synthetic")
	if _, err := synth.Generate(ctx, seedDir, synth.Options{Patients: 4, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	d := dataDir(dir)
	st, err := store.Open(d.catalog(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(ctx, seedDir, nil); err != nil {
		t.Fatal(err)
	}
	log := audittest.OpenPath(t, d.audit(), audit.Options{Node: "test"})
	eng, err := policy.LoadDir(ctx, baselinePolicy, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewDev()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Catalog: st, Policy: eng, Audit: log, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, u := range mustPage(t, st) {
		uris = append(uris, u.URI)
	}
	reads := map[string]int{}
	for _, persona := range []string{"clinician", "billing", "researcher"} {
		id, err := server.LoadPrincipalFile(filepath.Join(seedDir, "principals", persona+".json"))
		if err != nil {
			t.Fatal(err)
		}
		cs, stop := connect(t, srv, id)
		if _, err := cs.ListResources(ctx, nil); err != nil {
			t.Fatal(err)
		}
		for _, u := range uris {
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: u}); err == nil {
				reads[persona]++
			}
		}
		stop()
	}
	if reads["billing"] == 0 || reads["researcher"] == 0 {
		t.Fatalf("allowed reads %v: the fixture must give billing and research access", reads)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	st.Close()

	var stdout, stderr bytes.Buffer
	code := run([]string{"policy", "impact", "--purpose", "HOPERAT", "--candidate", candidatePolicy, "--data-dir", dir, "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("policy impact exited %d: %s", code, stderr.String())
	}
	var rep impact.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout.String())
	}
	if rep.Replayed != 3*len(uris) {
		t.Errorf("replayed %d decisions, want %d reads", rep.Replayed, 3*len(uris))
	}
	// The 3 list records, and the access record of this replay
	// (policy/impact), which is the end of the view it read.
	if rep.Skipped != 4 {
		t.Errorf("skipped %d, want the 3 list records and the access record", rep.Skipped)
	}
	if rep.Counts.AllowToDeny != reads["billing"] || rep.Counts.DenyToAllow != 0 || rep.Counts.ReplayError != 0 {
		t.Errorf("counts %+v: want every one of the %d allowed billing reads allow→deny", rep.Counts, reads["billing"])
	}
	if rep.Counts.ObligationsChanged == 0 {
		t.Errorf("counts %+v: research reads of clinical types keep /note under the candidate", rep.Counts)
	}
	for _, r := range rep.Rows {
		if (r.Change == impact.ChangeAllowToDeny) != strings.Contains(r.User, "billing") {
			t.Errorf("row %d: %s for %s", r.Seq, r.Change, r.User)
		}
	}

	// The signed bundle of the same candidate, the artifact a rollout
	// installs, gives the same report; it is verified as a server verifies
	// it, so it needs the keys a server trusts.
	bundle, pub := signedCandidate(t, candidatePolicy)
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"policy", "impact", "--purpose", "HOPERAT", "--candidate", bundle, "--key", "team=" + pub, "--data-dir", dir, "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("policy impact of the bundle exited %d: %s", code, stderr.String())
	}
	var fromBundle impact.Report
	if err := json.Unmarshal(stdout.Bytes(), &fromBundle); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout.String())
	}
	// The second run also replays the first's access record, skipped.
	if fromBundle.Replayed != rep.Replayed || fromBundle.Counts != rep.Counts || fromBundle.Skipped != rep.Skipped+1 {
		t.Errorf("impact of the bundle: replayed %d, skipped %d, counts %+v; of the directory: %d, %d, %+v",
			fromBundle.Replayed, fromBundle.Skipped, fromBundle.Counts, rep.Replayed, rep.Skipped, rep.Counts)
	}
	stdout.Reset()
	if code := run([]string{"policy", "impact", "--purpose", "HOPERAT", "--candidate", bundle, "--key", "team=" + pub, "--data-dir", dir}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "candidate "+bundle+" (revision ") || !strings.Contains(stdout.String(), "signed by team)") {
		t.Errorf("table of the bundle's impact: exit %d\n%s", code, stdout.String())
	}
	_, otherPub := signedCandidate(t, candidatePolicy)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--candidate", bundle}, 2, "is a bundle file: give --key ID=PUBPEM"},
		{[]string{"--candidate", bundle, "--key", "team=" + otherPub}, 1, "signature"},
		{[]string{"--candidate", candidatePolicy, "--key", "team=" + pub}, 2, "is a directory"},
	} {
		stdout.Reset()
		stderr.Reset()
		code := run(append([]string{"policy", "impact", "--purpose", "HOPERAT", "--data-dir", dir}, tc.args...), &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("policy impact %v: exit %d, want %d naming %q:\n%s", tc.args, code, tc.code, tc.want, stderr.String())
		}
	}

	// The table, and the time filter: nothing is replayed before the reads.
	stdout.Reset()
	if code := run([]string{"policy", "impact", "--purpose", "HOPERAT", "--candidate", candidatePolicy, "--data-dir", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("table: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "allow→deny") || !strings.Contains(stdout.String(), "HPAYMT") {
		t.Errorf("table output:\n%s", stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"policy", "impact", "--purpose", "HOPERAT", "--candidate", candidatePolicy, "--data-dir", dir, "--until", "2000-01-01", "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--until: exit %d: %s", code, stderr.String())
	}
	var none impact.Report
	if err := json.Unmarshal(stdout.Bytes(), &none); err != nil || none.Replayed != 0 || none.InRange != 0 {
		t.Errorf("--until 2000-01-01 replayed %d of %d: %v", none.Replayed, none.InRange, err)
	}

	// No stored input holds a raw patient id.
	raw, err := os.ReadFile(d.audit())
	if err != nil {
		t.Fatal(err)
	}
	st2, err := store.Open(d.catalog(), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	for _, r := range mustPage(t, st2) {
		// A payer's Organization (synthetic data since h-views) concerns
		// no patient: "" is in every file.
		if r.Labels.Patient != "" && bytes.Contains(raw, []byte(r.Labels.Patient)) {
			t.Fatal("audit.db holds a raw patient id")
		}
	}
}

// signedCandidate bundles the policy directory src, with a test of its own
// (a bundle needs one), signed under the id "team" by a new ES256 key with
// custos policy bundle; it returns the bundle file and the public key's
// PEM file.
func signedCandidate(t *testing.T, src string) (bundle, pub string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "p"), os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p", "custos", "authz_test.rego"), []byte("package custos.authz_test\n\nimport data.custos.authz\n\ntest_decision_is_an_object if is_object(authz.decision) with input as {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	privPEM, pubPEM := es256KeyPEMs(t)
	priv, pub, bundle := filepath.Join(dir, "key.pem"), filepath.Join(dir, "key.pub.pem"), filepath.Join(dir, "policy.tar.gz")
	if err := os.WriteFile(priv, privPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"policy", "bundle", filepath.Join(dir, "p"), "-o", bundle, "--key", "team=" + priv, "--sequence", "1"}, &stdout, &stderr); code != 0 {
		t.Fatalf("policy bundle: exit %d: %s", code, stderr.String())
	}
	return bundle, pub
}

func mustPage(t *testing.T, st *store.Store) []store.Resource {
	t.Helper()
	rs, err := st.Page("", 1000)
	if err != nil || len(rs) == 0 {
		t.Fatalf("catalog: %d resources, %v", len(rs), err)
	}
	return rs
}

// connect serves srv to id over an in-memory transport.
func connect(t *testing.T, srv *server.Server, id server.Identity) (*mcp.ClientSession, func()) {
	t.Helper()
	ct, stt := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeStdio(ctx, stt, id)
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, func() { cs.Close(); cancel(); <-done }
}

// TestPolicyCheckSaysHowDecisionsAreCached: `policy check` tells a policy
// author what their policy's shape means for serving: the default policy
// is memoized per feature combination, one that reads the URI per
// resource, one that reads the clock not at all.
func TestPolicyCheckSaysHowDecisionsAreCached(t *testing.T) {
	write := func(src string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name, dir, want string
		caching         policy.Caching
	}{
		{"default", "../../rego/custos", "per principal, purpose and resource features",
			policy.Caching{Decisions: true, WithoutURI: true, Subjects: true}},
		{"reads the URI", write("package custos.authz\n\ndecision := {\"allow\": input.resource.uri == \"x\", \"reasons\": [\"uri\"], \"obligations\": []}\n"),
			"memoized per resource", policy.Caching{Decisions: true, ItemsCarryURI: true, Subjects: true,
				URIReadBy: "authz.rego:3: reads input.resource.uri, which can be a resource's uri"}},
		{"a list rule reads an item's uri", write("package custos.authz\n\ndecision := {\"allow\": true, \"reasons\": [], \"obligations\": []}\n\ndecisions := [{\"allow\": startswith(item.resource.uri, \"x\"), \"reasons\": [], \"obligations\": []} | some item in input.items]\n"),
			"memoized per resource", policy.Caching{Decisions: true, ItemsCarryURI: true, Subjects: true,
				URIReadBy: "authz.rego:5: reads _.resource.uri, which can be a resource's uri"}},
		{"reads the clock", write("package custos.authz\n\ndecision := {\"allow\": time.now_ns() < 0, \"reasons\": [\"clock\"], \"obligations\": []}\n"),
			"the policy calls time.now_ns", policy.Caching{ItemsCarryURI: true, Nondeterministic: "time.now_ns"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			run([]string{"policy", "check", tc.dir}, &out, &errb)
			if !strings.Contains(out.String(), "caching: ") || !strings.Contains(out.String(), tc.want) {
				t.Errorf("policy check printed:\n%s%s\nwant a caching line with %q", out.String(), errb.String(), tc.want)
			}
			out.Reset()
			run([]string{"policy", "check", "--json", tc.dir}, &out, &errb)
			var got struct {
				Caching policy.Caching `json:"caching"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Caching != tc.caching {
				t.Errorf("policy check --json caching = %+v (%v), want %+v\n%s", got.Caching, err, tc.caching, out.String())
			}
		})
	}
}

// TestPolicyEvalUnreadableInputIsNotAVerdict: eval's exit 1 means the
// policy could not decide the input (the server would deny), so an input
// that was never decided (a --input file that does not exist or is not a
// policy input, a --policy-dir that does not exist) is bad usage, exit 2,
// naming the flag. All three exited 1, and a script reading 1 as "would
// deny" took a typo in a path for a verdict.
func TestPolicyEvalUnreadableInputIsNotAVerdict(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(`{"principal":{"sub":"a","roles":["clinician"],"client_id":"c","tenant":"t","patients":[]},"purpose_of_use":"TREAT","action":"templates"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"principal": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCustos("policy", "eval", "--input", good); code != 0 {
		t.Fatalf("eval of a good input: exit %d: %s", code, stderr)
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--input", filepath.Join(dir, "missing.json")}, "--input"},
		{[]string{"--input", bad}, "--input"},
		{[]string{"--input", good, "--policy-dir", filepath.Join(dir, "missing")}, "--policy-dir"},
	} {
		code, stdout, stderr := runCustos(append([]string{"policy", "eval"}, c.args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.flag) {
			t.Errorf("policy eval %v: exit %d, stdout %q, stderr %q; want 2 naming %s", c.args, code, stdout, stderr, c.flag)
		}
	}
}
