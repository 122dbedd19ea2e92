package server_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
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
	dir := b.TempDir()
	seed := filepath.Join(dir, "synthetic")
	if _, err := synth.Generate(context.Background(), seed, synth.Options{Patients: 10_000, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "catalog.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Import(context.Background(), seed, nil); err != nil {
		b.Fatal(err)
	}
	n, _ := st.Count()
	b.Logf("catalog: %d resources", n)
	log, err := audit.Open(filepath.Join(dir, "audit.db"), audit.Options{Node: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	eng, err := policy.Default(context.Background(), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	keys, _ := secrets.NewDev()
	srv, err := server.New(server.Config{Catalog: st, Policy: eng, Audit: log, Keys: keys})
	if err != nil {
		b.Fatal(err)
	}
	for _, persona := range []string{"clinician", "researcher"} {
		b.Run(persona, func(b *testing.B) {
			id, err := server.LoadPrincipalFile(filepath.Join(seed, "principals", persona+".json"))
			if err != nil {
				b.Fatal(err)
			}
			ct, stt := mcp.NewInMemoryTransports()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go srv.ServeStdio(ctx, stt, id)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
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
