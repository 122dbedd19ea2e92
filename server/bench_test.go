package server_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkReadPath measures one full resources/read through the MCP
// protocol layer (in-memory transport): URI validation, catalog lookup,
// policy decision, durable audit append (fsync), blob fetch, minimization.
func BenchmarkReadPath(b *testing.B) {
	for _, persona := range []string{"clinician", "researcher"} {
		b.Run(persona, func(b *testing.B) {
			f := newFixture(b, "")
			cs := f.connect(f.identity(persona))
			uris := listAll(b, cs)
			var uri string
			for _, u := range uris {
				if len(u) > 6 && u[:6] == "fhir:/" {
					uri = u
					break
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadPathParallel64 runs 64 concurrent clients, so audit appends
// are group-committed.
func BenchmarkReadPathParallel64(b *testing.B) {
	f := newFixture(b, "")
	id := f.identity("clinician")
	cs := f.connect(id)
	uris := listAll(b, cs)
	b.SetParallelism(32) // 2 cores × 32 = 64 goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uris[i%len(uris)]}); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}
