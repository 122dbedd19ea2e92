package server_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store/synth"
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

// BenchmarkListPage100k lists one page (50 items) of a catalog of ~100,000
// resources (10,000 synthetic patients), for a clinician who may see about
// half of them and a researcher who sees the FHIR resources of most. Every
// page is decided item by item and audited durably.
func BenchmarkListPage100k(b *testing.B) {
	f := newServerFixture(b, fixtureOptions{
		seed: &synth.Options{Patients: 10_000, Seed: 1},
		tune: func(c *server.Config) { c.PageSize = 0 }, // the default page size
	})
	b.Logf("catalog: %d resources", len(f.allURIs()))
	for _, persona := range []string{"clinician", "researcher"} {
		b.Run(persona, func(b *testing.B) {
			ctx := context.Background()
			cs := f.connectFor(b, f.identity(persona), "")
			cursor := ""
			items := 0
			b.ResetTimer()
			for b.Loop() {
				res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
				if err != nil {
					b.Fatal(err)
				}
				items += len(res.Resources)
				cursor = res.NextCursor // walk the catalog; wrap around at the end
			}
			b.ReportMetric(float64(items)/float64(b.N), "items/page")
		})
	}
}
