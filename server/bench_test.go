package server_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/policy"
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

// BenchmarkFirstListPage100k answers a caller's first resources/list page
// (no cursor) on a ~100,000-resource catalog served by store.Live, for
// every persona, through the indexed scan and through the plain scan of
// the whole catalog (the reference path: plainCatalog hides the index).
// cold: every op on a server with a freshly compiled default policy (no
// decision or subject cache) and new research aliases, as after a start;
// warm: the same server and session again. pages-to-end is how many pages
// a caller who sees nothing on the first needs to reach the end (walked
// once, outside the timer).
func BenchmarkFirstListPage100k(b *testing.B) {
	f := newServerFixture(b, fixtureOptions{
		seed: &synth.Options{Patients: 10_000, Seed: 1},
		live: true,
		tune: func(c *server.Config) { c.PageSize = 0 },
	})
	newServer := func(b *testing.B, catalog server.Catalog) *server.Server {
		eng, err := policy.Default(context.Background(), policy.Options{})
		if err != nil {
			b.Fatal(err)
		}
		cfg := f.config(eng)
		cfg.Catalog = catalog
		srv, err := server.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return srv
	}
	for _, path := range []struct {
		name    string
		catalog server.Catalog
	}{{"indexed", f.catalog}, {"plain", plainCatalog{f.catalog}}} {
		for _, persona := range []string{"clinician", "clinician-hiv", "billing", "researcher", "auditor", "outsider"} {
			for _, temp := range []string{"cold", "warm"} {
				b.Run(path.name+"/"+persona+"/"+temp, func(b *testing.B) {
					ctx := context.Background()
					f.srv = newServer(b, path.catalog)
					cs := f.connectFor(b, f.identity(persona), "")
					items := 0
					for b.Loop() {
						if temp == "cold" {
							b.StopTimer()
							f.srv = newServer(b, path.catalog)
							cs = f.connectFor(b, f.identity(persona), "")
							b.StartTimer()
						}
						res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{})
						if err != nil {
							b.Fatal(err)
						}
						items = len(res.Resources)
					}
					b.ReportMetric(float64(items), "items/page")
					if items == 0 && temp == "warm" {
						pages := 0
						for cursor := ""; ; {
							res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
							if err != nil {
								b.Fatal(err)
							}
							pages++
							if cursor = res.NextCursor; cursor == "" {
								break
							}
						}
						b.ReportMetric(float64(pages), "pages-to-end")
					}
				})
			}
		}
	}
}

// BenchmarkResearchFirstRead100k is a researcher's first resources/read
// (of an alias from an earlier listing) in a new session on a server that
// has not served a researcher yet (no research aliases, no policy
// caches), on a ~100,000-resource catalog, indexed and plain.
func BenchmarkResearchFirstRead100k(b *testing.B) {
	f := newServerFixture(b, fixtureOptions{
		seed: &synth.Options{Patients: 10_000, Seed: 1},
		live: true,
		tune: func(c *server.Config) { c.PageSize = 0 },
	})
	id := f.identity("researcher")
	ctx := context.Background()
	res, err := f.connectFor(b, id, "").ListResources(ctx, &mcp.ListResourcesParams{})
	if err != nil || len(res.Resources) == 0 {
		b.Fatalf("list: %v", err)
	}
	alias := res.Resources[len(res.Resources)-1].URI
	for _, path := range []struct {
		name    string
		catalog server.Catalog
	}{{"indexed", f.catalog}, {"plain", plainCatalog{f.catalog}}} {
		b.Run(path.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				eng, err := policy.Default(ctx, policy.Options{})
				if err != nil {
					b.Fatal(err)
				}
				cfg := f.config(eng)
				cfg.Catalog = path.catalog
				if f.srv, err = server.New(cfg); err != nil {
					b.Fatal(err)
				}
				cs := f.connectFor(b, id, "")
				b.StartTimer()
				r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: alias})
				if err != nil || r.Contents[0].URI != alias {
					b.Fatalf("read: %v", err)
				}
			}
		})
	}
}

// BenchmarkHTTPRead measures one resources/read through the real HTTP
// handler chain, in process (no socket): bearer token, Origin check,
// rate limit, the checks in front of the go-sdk (body memo, params,
// routing, sessions), the SDK's Streamable HTTP handler, the decision and
// the durable audit append: a 2025-11-25 read in its session (SSE answer)
// and a 2026-07-28 one (JSON answer).
func BenchmarkHTTPRead(b *testing.B) {
	f := newServerFixture(b, fixtureOptions{tune: func(c *server.Config) {
		c.RateLimit = server.RateLimit{PerSecond: 1e9, Burst: 1 << 20} // messagesIn runs, never refuses
	}})
	h, hs := f.httpHandler("clinician")
	tok := hs.tokens["clinician"]
	uri := listAll(b, f.connect(f.identity("clinician")))[0]
	do := func(hdr map[string]string, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", server.MCPPath, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	init := do(nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	sid := init.Header().Get("Mcp-Session-Id")
	if sid == "" {
		b.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	h25 := map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid}
	do(h25, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, c := range []struct {
		rev  string
		hdr  map[string]string
		body string
	}{
		{rev2025, h25, `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"` + uri + `"}}`},
		{rev2026, map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/read", "Mcp-Name": uri},
			`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{` + meta2026(`,"uri":"`+uri+`"`) + `}}`},
	} {
		b.Run(c.rev, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if w := do(c.hdr, c.body); w.Code != 200 || !strings.Contains(w.Body.String(), `"contents"`) {
					b.Fatalf("status %d: %.200s", w.Code, w.Body)
				}
			}
		})
	}
}
