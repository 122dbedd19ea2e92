package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// coldEngine is the default policy without a decision cache or a subject
// cache, so that every Decide evaluates everything: the cost of a
// principal's first decision (or of one whose cached values were evicted).
var coldEngine = sync.OnceValues(func() (*Engine, error) {
	return Default(context.Background(), Options{DecisionCache: -1, SubjectCache: -1})
})

// sessionEngine has the subject cache but no decision cache: the cost of a
// decision about a resource the engine has not decided before, for a
// principal it has (a clinician's next read in a session).
var sessionEngine = sync.OnceValues(func() (*Engine, error) {
	return Default(context.Background(), Options{DecisionCache: -1})
})

func mustCold(b *testing.B) *Engine {
	b.Helper()
	e, err := coldEngine()
	if err != nil {
		b.Fatal(err)
	}
	return e
}

func mustSession(b *testing.B) *Engine {
	b.Helper()
	e, err := sessionEngine()
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// benchmarkDecide measures the decisions of p with purpose about the
// resources of page, in turn, each under a URI never used before (so that
// no cache holds the resource): "first" without any cache (a principal's
// first decision under a policy nobody has used yet), "newcomer" with the
// engine's caches warmed by other principals' decisions but each op by a
// principal never seen before (a principal's first decision on a serving
// engine), "session" with the subject cache warmed by the earlier
// iterations (the principal's later decisions). wantObligations says
// whether the allowed decisions carry obligations.
func benchmarkDecide(b *testing.B, p Principal, purpose string, page []*Resource, wantObligations bool) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		e    *Engine
	}{{"first", mustCold(b)}, {"new-combination", mustSession(b)}, {"newcomer", mustSession(b)}, {"session", mustSession(b)}} {
		b.Run(tc.name, func(b *testing.B) {
			e := tc.e
			subj := NewSubject(p)
			allowed := 0
			for _, r := range page {
				d, err := e.Decide(ctx, Input{Subject: subj, PurposeOfUse: purpose, Action: ActionRead, Resource: r})
				if err != nil {
					b.Fatal(err)
				}
				if d.Allow {
					allowed++
					if (len(d.Obligations) > 0) != wantObligations {
						b.Fatalf("Decide = %+v", d)
					}
				}
			}
			if allowed == 0 {
				b.Fatal("nothing allowed")
			}
			i := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				r := *page[i%len(page)]
				r.URI = fmt.Sprintf("custos://bench/%d", i)
				i++
				s := subj
				switch tc.name {
				case "newcomer":
					q := p
					q.Sub = fmt.Sprintf("%s-%d", p.Sub, i)
					s = NewSubject(q)
				case "new-combination":
					// Roles and tenant never seen before (purpose is the
					// role's): nothing of the principal is cached, only what
					// depends on no input at all.
					q := p
					q.Sub = fmt.Sprintf("%s-%d", p.Sub, i)
					q.Roles = append(slices.Clone(p.Roles), fmt.Sprintf("team-%d", i))
					q.Tenant = fmt.Sprintf("tenant-%d", i)
					r.Tenant = q.Tenant
					s = NewSubject(q)
				}
				if _, err := e.Decide(ctx, Input{Subject: s, PurposeOfUse: purpose, Action: ActionRead, Resource: &r}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecideRead is a clinician reading the resources of listPage100
// (care-team and other patients, labels, opt-outs; target ≤ 100 µs).
func BenchmarkDecideRead(b *testing.B) {
	p, page := listPage100()
	benchmarkDecide(b, p, "TREAT", page, false)
}

// BenchmarkDecideResearcher is a researcher reading the same resources,
// with the largest obligation sets (Safe Harbor).
func BenchmarkDecideResearcher(b *testing.B) {
	p, page := listPage100()
	r := researcher
	r.Patients = p.Patients
	benchmarkDecide(b, r, "HRESCH", page, true)
}

func BenchmarkDecideParallel(b *testing.B) {
	e := mustDefault(b)
	in := Input{Principal: researcher, PurposeOfUse: "HRESCH", Action: ActionList, Resource: resource("condition", patientB)}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.Decide(context.Background(), in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// listPage100 is a realistic 100-item list page for a clinician with a care
// relationship to 40 patients in a tenant of 100: mixed resource types, some
// patients outside the care team, a few HIV- and VIP-labelled resources and
// opted-out patients, as the catalog scan in server/resources.go sees them.
func listPage100() (Principal, []*Resource) {
	types := []string{"patient", "observation", "observation", "condition", "medicationrequest",
		"encounter", "coverage", "note", "report", "image"}
	var patients, careTeam []string
	for i := range 100 {
		p := fmt.Sprintf("7d1a3c52-0b8e-4f57-9a77-%012d", i)
		patients = append(patients, p)
		if i%5 < 2 {
			careTeam = append(careTeam, p)
		}
	}
	var page []*Resource
	for i := range 100 {
		r := resource(types[i%len(types)], patients[(i*7)%len(patients)])
		r.URI = fmt.Sprintf("%s-%d", r.URI, i)
		switch {
		case i%17 == 0:
			r.Sensitivity = []string{"hiv"}
		case i%23 == 0:
			r.Sensitivity = []string{"vip"}
		case i%29 == 0:
			r.Consent = []string{"opt-out"}
		}
		page = append(page, r)
	}
	p := principal("dr.alice", "clinician")
	p.Patients = careTeam
	return p, page
}

// BenchmarkListFilter100 decides one 100-item list page with the default
// policy item by item with Decide: one engine and one Subject for the whole
// page, as a list request used them before DecideBatch (see
// BenchmarkDecideBatch100 for the batch). One op is the whole page.
//
// cache=off evaluates every item (the first listing of a page by a
// principal); cache=warm repeats the page, so every decision comes from the
// engine's decision cache (later listings of the same page, and other
// sessions of the same principal).
func BenchmarkListFilter100(b *testing.B) {
	ctx := context.Background()
	warm := mustDefault(b)
	off, err := Default(ctx, Options{DecisionCache: -1, SubjectCache: -1})
	if err != nil {
		b.Fatal(err)
	}
	p, page := listPage100()
	for _, tc := range []struct {
		name    string
		e       *Engine
		p       Principal
		purpose string
	}{
		{"clinician/cache=off", off, p, "TREAT"},
		{"clinician/cache=warm", warm, p, "TREAT"},
		{"researcher/cache=off", off, func() Principal { r := researcher; r.Patients = p.Patients; return r }(), "HRESCH"},
		{"researcher/cache=warm", warm, func() Principal { r := researcher; r.Patients = p.Patients; return r }(), "HRESCH"},
	} {
		e := tc.e
		b.Run(tc.name, func(b *testing.B) {
			allowed := 0
			for _, r := range page {
				d, err := e.Decide(ctx, Input{Subject: NewSubject(tc.p), PurposeOfUse: tc.purpose, Action: ActionList, Resource: r})
				if err != nil {
					b.Fatal(err)
				}
				if d.Allow {
					allowed++
				}
			}
			if allowed == 0 || allowed == len(page) {
				b.Fatalf("%d of %d allowed; the page should mix allowed and denied items", allowed, len(page))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				subj := NewSubject(tc.p)
				for _, r := range page {
					if _, err := e.Decide(ctx, Input{Subject: subj, PurposeOfUse: tc.purpose, Action: ActionList, Resource: r}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkDecideDuringReload measures decisions through a Reloader while
// another goroutine reloads the policy continuously.
func BenchmarkDecideDuringReload(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	dir := b.TempDir()
	for p, c := range defaultPolicyFilesTB(b) {
		path := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	// AllowNoTests is irrelevant here (the tests ship); the default policy's
	// tests are exercised by TestRegoUnitTests.
	r, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			r.Reload(ctx) //nolint:errcheck
		}
	}()
	in := Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("observation", patientA)}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Current().Decide(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cancel()
	<-done
}

// BenchmarkDecideBatch100 decides the 100-item page of listPage100 (target
// ≤ 2 ms; one op is the whole page) in one batch evaluation: "batch-first"
// without any cache (a principal's first page under a policy nobody has
// used yet), "batch-newcomer" with the engine's caches warmed by other
// principals but each op by a principal never seen before (a principal's
// first page on a serving engine), "batch-session" with the
// subject cache, each op under URIs never used before (a principal's next
// page), "batch-warm" answered by the decision cache (the same page again);
// and, in the same run, item by item with Decide without any cache
// ("per-item"), so that the ratios are visible.
func BenchmarkDecideBatch100(b *testing.B) {
	ctx := context.Background()
	p, page := listPage100()
	r := researcher
	r.Patients = p.Patients
	items := make([]Item, len(page))
	for i, res := range page {
		items[i] = Item{Resource: res}
	}
	// freshItems is page under URIs never used before.
	n := 0
	freshItems := func() []Item {
		out := make([]Item, len(page))
		for i, res := range page {
			r := *res
			r.URI = fmt.Sprintf("custos://bench/page/%d", n)
			n++
			out[i] = Item{Resource: &r}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		p       Principal
		purpose string
	}{{"clinician", p, "TREAT"}, {"researcher", r, "HRESCH"}} {
		in := Input{PurposeOfUse: tc.purpose, Action: ActionList}
		for _, mode := range []struct {
			name  string
			e     *Engine
			fresh bool
		}{{"batch-first", mustCold(b), true}, {"batch-newcomer", mustSession(b), true}, {"batch-session", mustSession(b), true}, {"batch-warm", mustDefault(b), false}} {
			b.Run(tc.name+"/"+mode.name, func(b *testing.B) {
				e := mode.e
				subj := NewSubject(tc.p)
				ds, err := e.DecideBatch(ctx, Input{Subject: subj, PurposeOfUse: tc.purpose, Action: ActionList}, items)
				if err != nil {
					b.Fatal(err)
				}
				allowed, obligated := 0, 0
				for _, d := range ds {
					if d.Allow {
						allowed++
					}
					if len(d.Obligations) > 0 {
						obligated++
					}
				}
				if allowed == 0 || allowed == len(page) || (tc.purpose == "HRESCH") != (obligated > 0) {
					b.Fatalf("%d of %d allowed, %d with obligations", allowed, len(page), obligated)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					page := items
					if mode.fresh {
						b.StopTimer()
						page = freshItems()
						b.StartTimer()
					}
					in.Subject = subj
					switch mode.name {
					case "batch-first":
						in.Subject = NewSubject(tc.p) // a new request's conversion, as before
					case "batch-newcomer":
						q := tc.p
						q.Sub = fmt.Sprintf("%s-%d", tc.p.Sub, n)
						in.Subject = NewSubject(q)
					}
					if _, err := e.DecideBatch(ctx, in, page); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(tc.name+"/per-item", func(b *testing.B) {
			e := mustCold(b)
			b.ReportAllocs()
			for b.Loop() {
				subj := NewSubject(tc.p)
				for _, it := range items {
					if _, err := e.Decide(ctx, Input{Subject: subj, PurposeOfUse: tc.purpose, Action: ActionList, Resource: it.Resource}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
