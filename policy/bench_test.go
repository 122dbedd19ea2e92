package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func benchmarkDecide(b *testing.B, in Input, wantObligations bool) {
	e := mustDefault(b)
	ctx := context.Background()
	d, err := e.Decide(ctx, in)
	if err != nil || !d.Allow || (len(d.Obligations) > 0) != wantObligations {
		b.Fatalf("Decide = %+v, %v", d, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Decide(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideRead is a clinician reading a care-team patient's observation.
func BenchmarkDecideRead(b *testing.B) {
	benchmarkDecide(b, Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead,
		Resource: resource("observation", patientA)}, false)
}

// BenchmarkDecideResearcher is a researcher reading a Patient, which carries
// the largest obligation set.
func BenchmarkDecideResearcher(b *testing.B) {
	benchmarkDecide(b, Input{Principal: researcher, PurposeOfUse: "HRESCH", Action: ActionRead,
		Resource: resource("patient", patientB)}, true)
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
// policy: one engine and one Subject for the whole page, as a list request
// uses them. One op is the whole page (target ≤ 2 ms).
//
// cache=off evaluates every item (the first listing of a page by a
// principal); cache=warm repeats the page, so every decision comes from the
// engine's decision cache (later listings of the same page, and other
// sessions of the same principal).
func BenchmarkListFilter100(b *testing.B) {
	ctx := context.Background()
	warm := mustDefault(b)
	off, err := Default(ctx, Options{DecisionCache: -1})
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
