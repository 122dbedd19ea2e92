package app_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/server"
)

// The volume part of the abuse target of issue 16 (docs/benchmarks.md,
// "Unauthenticated flood"): 20,000 unauthenticated requests from 64
// loopback source addresses grow the audit volume by less than 1 MB, and
// every one of them is on record, one by one or counted in an aggregate.
// The volume is measured exactly: the server is started and stopped once
// on a new log (the "before"), then started, flooded and stopped (which
// writes the pending aggregates); the growth is the flood's records and
// one start's and stop's own. The clinician's latency under a flood is a
// benchmark: go run ./bench/load -flood.
func TestUnauthenticatedFloodSparesTheAuditVolume(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 requests: not in -short")
	}
	const (
		flood   = 20000
		sources = 64 // 127.0.0.2 … 127.0.0.65
		workers = 16
	)
	f := newFixture(t)
	dbPath := filepath.Join(f.data, app.AuditFile)
	audittest.VerifyOnCleanup(t, dbPath)
	// serve starts the server on the log; stop stops it and closes the
	// log, so that the bytes it uses (bbolt's high-water mark, not the
	// file, which grows by doubling) can be read.
	serve := func() (a *app.App, stop func()) {
		a, err := app.Open(context.Background(), app.Options{
			DataDir: f.data, Dev: true, Node: "test", Version: "test",
			HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: f.tokens(t)},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- a.Serve(ctx) }()
		return a, func() {
			cancel()
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil { // writes the pending aggregates
				t.Fatal(err)
			}
		}
	}

	_, stop := serve()
	stop()
	used0, n0 := usedBytes(t, dbPath)
	_, stop = serve()
	stop()
	used1, n1 := usedBytes(t, dbPath)
	startStop := n1 - n0 // the records of one start and stop

	served := time.Now()
	a, stop := serve()
	clients := make([]*http.Client, sources)
	for i := range clients {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}}
		clients[i] = &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}}
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{}}`
	statuses := make([]map[int]int, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		statuses[w] = map[int]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := w; j < flood; j += workers {
				req, _ := http.NewRequest("POST", a.URL(), strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				if j%2 == 1 {
					req.Header.Set("Authorization", fmt.Sprintf("Bearer forged-%d", j))
				}
				resp, err := clients[j%sources].Do(req)
				if err != nil {
					statuses[w][0]++
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses[w][resp.StatusCode]++
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	// The aggregation windows the flood touched: they tick from the
	// server's start (server.DefaultRefusalWindow). While every refused
	// request's connection was closed (h-edge4 to 8947c7f), each was a new
	// connection, and under -race on a loaded machine the flood outlasted
	// one window (71 s: two windows, four records a source); a slow
	// machine can do the same.
	windows := int(time.Since(served)/server.DefaultRefusalWindow) + 1
	stop()
	used2, n2 := usedBytes(t, dbPath)

	total := map[int]int{}
	for _, s := range statuses {
		for k, v := range s {
			total[k] += v
		}
	}
	if total[401]+total[429] != flood {
		t.Fatalf("answers %v, want %d refusals (401 or 429)", total, flood)
	}
	rejects, aggregates, aggregated, rejectBytes := 0, 0, 0, 0
	var buf bytes.Buffer
	if _, err := audit.ExportFile(context.Background(), dbPath, &buf, audit.FormatJSONL, audit.Filter{}); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		r, err := audit.Decode(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if r.Action != "auth/reject" {
			continue
		}
		rejects++
		rejectBytes += len(sc.Bytes())
		if _, n, ok := strings.Cut(r.Reason, ",aggregate,count="); ok {
			aggregates++
			var c int
			fmt.Sscanf(n, "%d", &c)
			aggregated += c
		}
	}
	growth := used2 - used1
	t.Logf("flood: %d requests from %d addresses in %s (%.0f/s), answers %v", flood, sources, elapsed.Round(time.Millisecond), float64(flood)/elapsed.Seconds(), total)
	t.Logf("audit: %d auth/reject records (%d aggregates counting %d refusals; %d bytes as JSONL) and %d of the start and stop; audit.db in use %d → %d bytes: the flood grew it by %d bytes",
		rejects, aggregates, aggregated, rejectBytes, n2-n1-uint64(rejects), used1, used2, growth)

	// Every refusal is on record, one by one or counted in an aggregate.
	if individual := rejects - aggregates; individual+aggregated != flood {
		t.Errorf("%d records + %d counted in aggregates = %d, want every one of the %d refusals", individual, aggregated, individual+aggregated, flood)
	}
	if rejects > 2*sources*windows {
		t.Errorf("%d auth/reject records in %d aggregation window(s), want at most 2 per source address a window (the first, then one aggregate)", rejects, windows)
	}
	// The growth is the flood's: besides its records, only a start's and a
	// stop's, as many as an idle start and stop wrote.
	if others := n2 - n1 - uint64(rejects); others != startStop {
		t.Errorf("%d records besides the flood's, want %d (a start and a stop)", others, startStop)
	}
	if growth >= 1_000_000 || rejectBytes >= 1_000_000 {
		t.Errorf("the flood grew the audit volume by %d bytes (%d bytes of records), want < 1 MB", growth, rejectBytes)
	}
	if used1 < used0 || growth <= 0 {
		t.Errorf("audit volume in use %d → %d → %d bytes: want it to grow with the records", used0, used1, used2)
	}
}

// usedBytes is the space the closed bbolt file at path uses (its
// high-water mark: pages × page size) and the records it holds.
func usedBytes(t *testing.T, path string) (int64, uint64) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var used int64
	db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	sum, err := audit.VerifyFile(context.Background(), path, func(p audit.Problem) { t.Errorf("verify: %s", p) })
	if err != nil {
		t.Fatal(err)
	}
	return used, sum.Records
}

// A watermark and reserve above the free space: /readyz is not ready, the
// alert gauge is 1, and requests are refused and recorded as disk_low.
func TestAuditVolumeWatermarkIsWired(t *testing.T) {
	f := newFixture(t)
	dbPath := filepath.Join(f.data, app.AuditFile)
	audittest.VerifyOnCleanup(t, dbPath)
	a, err := app.Open(context.Background(), app.Options{
		DataDir: f.data, Dev: true, Node: "test", Version: "test",
		AuditDisk: app.AuditDiskOptions{LowWatermark: 1 << 62, Reserve: 1 << 62},
		HTTP:      &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: f.tokens(t)},
		Ops:       app.OpsOptions{Listen: "127.0.0.1:0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()
	get := func(path string) (int, string) {
		resp, err := http.Get(a.OpsURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"disk":"audit volume in reserve: requests refused"`) {
		t.Errorf("/readyz: %d %s", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "\ncustos_audit_volume_low 1\n") || !strings.Contains(body, "\ncustos_audit_disk_free_bytes ") {
		t.Error("/metrics lacks custos_audit_volume_low 1 or custos_audit_disk_free_bytes")
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "clinician", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: a.URL(), HTTPClient: &http.Client{Transport: bearer{"clinician-token"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListResources(ctx, nil); err == nil || !strings.Contains(err.Error(), "audit volume low") {
		t.Fatalf("a list in the reserve answered %v", err)
	}
	cs.Close()
	cancel()
	<-served
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := audit.ExportFile(context.Background(), dbPath, &buf, audit.FormatJSONL, audit.Filter{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"reason":"disk_low"`) {
		t.Error("no disk_low record")
	}
}
