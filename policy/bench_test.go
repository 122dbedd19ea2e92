package policy

import (
	"context"
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
