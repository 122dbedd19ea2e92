package policy

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCandidateTestsAreSandboxed: the Rego tests a candidate ships run in
// the server (every bundle and directory load runs them), so they run under
// the server's lock-down too. Before, they were compiled with OPA's full
// capabilities: a signed bundle whose test called http.send made the
// running server send that request at every load, from inside the hospital
// network (found probing the rollout with a bundle whose test fetched
// http://127.0.0.1:18099/exfil: the listener saw the request from
// `custos serve` and from `custos policy verify`, and the bundle loaded).
// Each case must be refused, naming the builtin, and the listener must see
// nothing.
func TestCandidateTestsAreSandboxed(t *testing.T) {
	ctx := context.Background()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{"ok": true}`))
	}))
	defer srv.Close()
	signer := newSigner(t, "k1")
	keys := []VerificationKey{signer.VerificationKey()}

	for name, body := range map[string]string{
		"http.send":          `test_calls_out if http.send({"method": "get", "url": "` + srv.URL + `/exfil"}).status_code == 200`,
		"net.lookup_ip_addr": `test_resolves if count(net.lookup_ip_addr("localhost")) >= 0`,
		"opa.runtime":        `test_reads_runtime if is_object(opa.runtime())`,
	} {
		t.Run(name, func(t *testing.T) {
			files := reasonPolicy("a")
			files["custos/escape_test.rego"] = "package custos.escape_test\n\n" + body + "\n"
			dir := writeDir(t, files)
			check := func(what string, err error, wantIs ...error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: a candidate whose test calls %s was accepted", what, name)
				}
				for _, w := range wantIs {
					if !errors.Is(err, w) {
						t.Errorf("%s: error %v, want %v", what, err, w)
					}
				}
				if !strings.Contains(err.Error(), name) {
					t.Errorf("%s: error does not name %s: %v", what, name, err)
				}
			}

			// A directory load (serve --dev --policy-dir), building a
			// bundle, and policy test.
			_, err := DirSource{Dir: dir}.Load(ctx)
			check("DirSource.Load", err, ErrTestsFailed)
			_, err = BuildBundle(ctx, dir, "r1")
			check("BuildBundle", err, ErrTestsFailed)
			_, err = RunTests(ctx, os.DirFS(dir))
			check("RunTests", err, ErrCompile)
			_, err = RunTestsCoverage(ctx, os.DirFS(dir))
			check("RunTestsCoverage", err, ErrCompile)

			// A signed bundle holding the test, as a server loads it
			// (signed without BuildBundle, which now refuses it).
			b := newBundle(filesOf(files), "r1")
			if err := SignBundle(ctx, b, signer); err != nil {
				t.Fatal(err)
			}
			path, _ := writeBundleFile(t, b)
			_, _, err = LoadBundle(ctx, path, keys, Options{})
			check("LoadBundle", err, ErrTestsFailed)
			check("CheckBundle", CheckBundle(ctx, b), ErrTestsFailed)
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the candidates' tests sent %d requests from the process loading them", n)
	}
}

// TestCandidateTestRunIsBounded: a load runs the candidate's Rego tests
// inside the server, on every core, and only each test case was bounded
// (TestCaseTimeout, a minute): a bundle of slow tests held every reload
// (and a start) for as long as they ran, and its CPU beside the requests.
// The whole run now has a budget (TestRunBudget, shortened here); a run
// over it refuses the candidate, saying so.
func TestCandidateTestRunIsBounded(t *testing.T) {
	old := testRunBudget
	testRunBudget = time.Second
	defer func() { testRunBudget = old }()
	files := reasonPolicy("a")
	// Nine million iterations without a solution: seconds of CPU, little
	// memory, and OPA checks for cancellation as it goes.
	files["custos/slow_test.rego"] = `package custos.slow_test

pair_found if {
	some i in numbers.range(1, 3000)
	some j in numbers.range(1, 3000)
	i * j == -1
}

test_slow if not pair_found
`
	dir := writeDir(t, files)
	start := time.Now()
	_, err := DirSource{Dir: dir}.Load(context.Background())
	took := time.Since(start)
	if err == nil || !errors.Is(err, ErrTestsFailed) || !strings.Contains(err.Error(), "longer than 1s") {
		t.Fatalf("a candidate whose tests outlast the budget: %v (after %v)", err, took)
	}
	if took > 30*time.Second {
		t.Errorf("the refusal took %v", took)
	}
}
