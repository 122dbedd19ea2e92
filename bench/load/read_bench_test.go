package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/server"
)

// BenchmarkAssemblyRead is one read on the harness's path, without the
// harness's clients, sockets or TLS: custos opened exactly as a stateless
// run opens it (openCustos: the -resources 1000 × -size 4096 catalog,
// 10 notes per patient, so the clinician's principal names 100 patients;
// the default policy, the audit log with its adaptive group commit and
// checkpoints every 1,000 records, the ops metrics; rate limit off), and one MCP 2026-07-28
// resources/read of a different note per op sent to App.Handler in
// process, as the go-sdk client sends it. It exists to count instructions
// per read under valgrind --tool=callgrind (docs/benchmarks.md, "Issue 17,
// twenty-fourth step"): run it with -test.benchtime Nx and 2Nx and
// subtract. Each op checks the answer names its note and the audit head
// grew by one record per read.
func BenchmarkAssemblyRead(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	logger := slog.New(slog.DiscardHandler)
	c, err := clinicianSetup(ctx, options{Resources: 1000, Size: 4096, PerPatient: 10}, dir, 1, logger)
	if err != nil {
		b.Fatal(err)
	}
	d := c.d
	// A checkpoint every checkpointEvery records only: at the harness's
	// 1,000-2,500 reads/s its 1 s interval comes about as often, but under
	// callgrind, ~100 times slower, it would sign a checkpoint every few reads.
	cs, err := startCustos(ctx, dir, c.tokens, c.tf, server.RateLimit{}, 0, c.tlsCfg, false, true, logger,
		func(o *app.Options) { o.Checkpoints.Interval = time.Hour })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cs.close(ctx); err != nil {
			b.Error(err)
		}
	})
	h := cs.app.Handler()
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"custos-load","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	read := func(i int) (string, *httptest.ResponseRecorder) {
		uri := d.uris[i%len(d.uris)]
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{%s,"uri":%q}}`, i+1, meta, uri)
		r := httptest.NewRequest("POST", server.MCPPath, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+cs.tokens[0])
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Protocol-Version", protocolVersion(true))
		r.Header.Set("Mcp-Method", "resources/read")
		r.Header.Set("Mcp-Name", uri)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"contents"`) || !strings.Contains(w.Body.String(), uri) {
			return uri, w
		}
		return uri, nil
	}
	// Warm-up, not measured: one read of each patient's notes, so that
	// the loop reads with the decisions cached, as the harness does after
	// its warm-up. Under callgrind on a loaded machine a first decision
	// can outlast the policy's 1 s timeout (answered -32603, recorded as
	// refused): a warm-up read is tried up to 5 times.
	for i := 0; i < len(d.uris); i += 10 {
		for try := 1; ; try++ {
			uri, fail := read(i)
			if fail == nil {
				break
			}
			if try == 5 {
				b.Fatalf("warm-up read %s: status %d: %.300s", uri, fail.Code, fail.Body)
			}
		}
	}
	before := cs.head()
	b.ReportAllocs()
	reads := 0
	for b.Loop() {
		if uri, fail := read(reads); fail != nil {
			b.Fatalf("read %s: status %d: %.300s", uri, fail.Code, fail.Body)
		}
		reads++
	}
	if got := cs.head() - before; got != uint64(reads) {
		b.Fatalf("audit head grew by %d for %d reads", got, reads)
	}
}
