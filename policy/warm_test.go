package policy

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	custosrego "github.com/custos-mcp/custos/rego"
)

// warmInputs are reads by three principals and one list page: what an
// engine has decided before a reload.
func warmInputs() ([]Input, Input, []Item) {
	bob := clinician
	bob.Sub, bob.Patients = "dr.bob", []string{patientB}
	var reads []Input
	for _, p := range []Principal{clinician, bob, researcher} {
		purpose := "TREAT"
		if p.Sub == researcher.Sub {
			purpose = "HRESCH"
		}
		for _, typ := range []string{"observation", "note", "patient"} {
			reads = append(reads, Input{Subject: NewSubject(p), PurposeOfUse: purpose, Action: ActionRead, Resource: resource(typ, patientA)})
		}
	}
	_, page := listPage100()
	items := make([]Item, len(page))
	for i, r := range page {
		items[i] = Item{Resource: r}
	}
	return reads, Input{Principal: bob, PurposeOfUse: "TREAT", Action: ActionList}, items
}

// servedEngine is the default policy after deciding the reads of
// warmInputs and, with list, its page.
func servedEngine(t *testing.T, list bool) *Engine {
	t.Helper()
	ctx := context.Background()
	e, err := Default(ctx, Options{DecisionCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	reads, in, items := warmInputs()
	for _, r := range reads {
		if _, err := e.Decide(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if list {
		if _, err := e.DecideBatch(ctx, in, items); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// renamedDefault is the default policy with the care-team reason renamed,
// so that its decisions can not be mistaken for the default policy's.
func renamedDefault(t *testing.T) fstest.MapFS {
	t.Helper()
	src, err := fs.ReadFile(custosrego.FS, "custos/authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(src), `"clinician_care_team"`, `"care_team_v2"`)
	if s == string(src) {
		t.Fatal("the care-team reason is not in the default policy")
	}
	return fstest.MapFS{"custos/authz.rego": {Data: []byte(s)}}
}

// TestWarmFillsSubjectCache: a new engine that warms from the serving one
// has subject-level values before its first request, computed by its own
// policy, and decides afterwards exactly as a fresh evaluation of its own
// policy would.
func TestWarmFillsSubjectCache(t *testing.T) {
	ctx := context.Background()
	prev := servedEngine(t, true)
	reads, list, items := warmInputs()
	plain, err := Load(ctx, renamedDefault(t), Options{DecisionCache: -1, SubjectCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	next, err := Load(ctx, renamedDefault(t), Options{DecisionCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if n := storedValues(next.subjects); n != 0 {
		t.Fatalf("%d values before warming", n)
	}
	if n := next.Warm(ctx, prev); n != len(reads)+1 {
		t.Fatalf("Warm evaluated %d inputs, want %d", n, len(reads)+1)
	}
	if n := storedValues(next.subjects); n == 0 {
		t.Fatal("nothing kept by warming")
	}
	careTeam := 0
	for _, in := range reads {
		want, err := plain.Decide(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := next.Decide(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if !sameOutcome(got, nil, want, nil) {
			t.Fatalf("after warming: %+v, fresh evaluation %+v", got, want)
		}
		if strings.Contains(strings.Join(got.Reasons, ","), "care_team_v2") {
			careTeam++
		}
	}
	if careTeam == 0 {
		t.Fatal("no decision by the new policy's care-team grant: the comparison proves nothing")
	}
	want, err := plain.DecideBatch(ctx, list, items)
	if err != nil {
		t.Fatal(err)
	}
	got, err := next.DecideBatch(ctx, list, items)
	if err != nil {
		t.Fatal(err)
	}
	for i := range items {
		if !sameOutcome(got[i], nil, want[i], nil) {
			t.Fatalf("item %d after warming: %+v, fresh evaluation %+v", i, got[i], want[i])
		}
	}
}

// TestWarmStopsWithItsContext: a warm-up whose budget is spent evaluates
// nothing more.
func TestWarmStopsWithItsContext(t *testing.T) {
	ctx := context.Background()
	prev := servedEngine(t, false)
	next, err := Default(ctx, Options{DecisionCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if n := next.Warm(done, prev); n != 0 || storedValues(next.subjects) != 0 {
		t.Fatalf("a cancelled warm-up evaluated %d inputs, kept %d values", n, storedValues(next.subjects))
	}
}

// TestRecentInputsAreBounded: an engine remembers its last recentInputs
// inputs, newest first, as copies.
func TestRecentInputsAreBounded(t *testing.T) {
	ctx := context.Background()
	e, err := Default(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	subj := NewSubject(clinician)
	var last *Resource
	for i := range recentInputs + 10 {
		last = resource("note", patientA)
		last.URI = fmt.Sprint("custos://x/", i)
		if _, err := e.Decide(ctx, Input{Subject: subj, PurposeOfUse: "TREAT", Action: ActionRead, Resource: last}); err != nil {
			t.Fatal(err)
		}
	}
	got := e.recent.newestFirst()
	if len(got) != recentInputs {
		t.Fatalf("%d inputs remembered, want %d", len(got), recentInputs)
	}
	if got[0].in.Resource.URI != last.URI || got[len(got)-1].in.Resource.URI != fmt.Sprint("custos://x/", 10) {
		t.Fatalf("order: newest %s, oldest %s", got[0].in.Resource.URI, got[len(got)-1].in.Resource.URI)
	}
	last.URI = "changed by the caller"
	if e.recent.newestFirst()[0].in.Resource.URI == last.URI {
		t.Fatal("the remembered input shares the caller's resource")
	}
}

// TestReloaderWarmsTheCandidate: after a reload, the engine swapped in
// already holds values for the inputs its predecessor decided last; with
// WarmUp < 0 it holds none.
func TestReloaderWarmsTheCandidate(t *testing.T) {
	ctx := context.Background()
	src, err := fs.ReadFile(custosrego.FS, "custos/authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := fs.ReadFile(custosrego.FS, "custos/authz_test.rego")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		warmUp time.Duration
		warm   bool
	}{{0, true}, {-1, false}} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "custos/authz.rego"), string(src))
		writeFile(t, filepath.Join(dir, "custos/authz_test.rego"), string(tests))
		r, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{WarmUp: tc.warmUp})
		if err != nil {
			t.Fatal(err)
		}
		reads, _, _ := warmInputs()
		for _, in := range reads {
			if _, err := r.Decide(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		writeFile(t, filepath.Join(dir, "custos/authz.rego"), string(src)+"\n# changed\n")
		if _, err := r.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		if n := storedValues(r.Current().subjects); (n > 0) != tc.warm {
			t.Fatalf("WarmUp %v: %d values in the new engine before its first request", tc.warmUp, n)
		}
	}
}
