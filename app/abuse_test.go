package app_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
)

// The abuse target of issue 16 (docs/benchmarks.md, "Abuse"): 20,000
// unauthenticated requests from 64 loopback source addresses (2,000/s by
// default, CUSTOS_ABUSE_RATE) grow the audit volume by less than 1 MB,
// while a clinician keeps reading. The
// clinician's p99 under the flood is compared with an unloaded p99
// measured first in the same run; it is reported (-v, and
// CUSTOS_ABUSE_REPORT=FILE appends a JSON line), not asserted.
func TestUnauthenticatedFloodSparesTheAuditVolume(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 requests: not in -short")
	}
	const (
		flood    = 20000
		sources  = 64 // 127.0.0.2 … 127.0.0.65
		workers  = 16
		baseline = 300 // unloaded reads
	)
	// The flood's pace: CUSTOS_ABUSE_RATE requests per second (0: as fast
	// as 16 workers go, which on a small machine mostly measures the
	// flood client and the server competing for the same cores).
	rate := 2000
	if v := os.Getenv("CUSTOS_ABUSE_RATE"); v != "" {
		if _, err := fmt.Sscanf(v, "%d", &rate); err != nil || rate < 0 {
			t.Fatalf("CUSTOS_ABUSE_RATE=%q: want requests per second, 0 for unpaced", v)
		}
	}
	f := newFixture(t)
	dbPath := filepath.Join(f.data, app.AuditFile)
	audittest.VerifyOnCleanup(t, dbPath)
	// The server is opened three times: empty, for the unloaded reads, for
	// the flood. Between runs the log is closed, so that the bytes it uses
	// (bbolt's high-water mark, not the file, which grows by doubling) can
	// be read, and what the clinician's reads cost be taken off the flood's.
	serve := func() (a *app.App, cs *mcp.ClientSession, uris []string, stop func()) {
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
		cs, err = mcp.NewClient(&mcp.Implementation{Name: "clinician", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: a.URL(), HTTPClient: &http.Client{Transport: bearer{"clinician-token"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		page, err := cs.ListResources(ctx, nil)
		if err != nil || len(page.Resources) == 0 {
			t.Fatalf("list: %v", err)
		}
		for _, r := range page.Resources {
			uris = append(uris, r.URI)
		}
		return a, cs, uris, func() {
			cs.Close()
			cancel()
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil { // writes the pending aggregates
				t.Fatal(err)
			}
		}
	}
	read := func(cs *mcp.ClientSession, uris []string, i int) time.Duration {
		t0 := time.Now()
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uris[i%len(uris)]}); err != nil {
			t.Errorf("clinician read refused: %v", err)
		}
		return time.Since(t0)
	}

	_, _, _, stop := serve()
	stop()
	used0, n0 := usedBytes(t, dbPath)

	// Unloaded: the clinician alone.
	_, cs, uris, stop := serve()
	var unloaded []time.Duration
	for i := range baseline {
		unloaded = append(unloaded, read(cs, uris, i))
	}
	stop()
	used1, n1 := usedBytes(t, dbPath)
	size1 := fileSize(t, dbPath)
	perRecord := float64(used1-used0) / float64(n1-n0) // a clinician's read (and the list and policy load of a start)

	a, cs, uris, stop := serve()
	// The flood, while the clinician reads.
	clients := make([]*http.Client, sources)
	for i := range clients {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}}
		clients[i] = &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}}
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{}}`
	statuses := make([]map[int]int, workers)
	var wg sync.WaitGroup
	done := make(chan struct{})
	start := time.Now()
	for w := range workers {
		statuses[w] = map[int]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := w; j < flood; j += workers {
				if rate > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(j) * time.Second / time.Duration(rate))))
				}
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
	var loaded []time.Duration
	reads := make(chan struct{})
	go func() {
		defer close(reads)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			loaded = append(loaded, read(cs, uris, i))
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	close(done)
	<-reads
	stop()
	used2, n2 := usedBytes(t, dbPath)
	size2 := fileSize(t, dbPath)

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
	// The clinician's records during the flood (reads, and the list and
	// policy load of the start) cost what they cost unloaded.
	others := int64(n2-n1) - int64(rejects)
	othersCost := int64(perRecord * float64(others))
	floodGrowth := used2 - used1 - othersCost
	p99u, p99l := p99(unloaded), p99(loaded)
	t.Logf("flood: %d requests from %d addresses in %s (%.0f/s), answers %v", flood, sources, elapsed.Round(time.Millisecond), float64(flood)/elapsed.Seconds(), total)
	t.Logf("audit: %d auth/reject records (%d aggregates counting %d refusals; %d bytes as JSONL); audit.db used %d → %d bytes (file %d → %d), of which %d for %d other records at %.0f bytes each (measured unloaded): flood growth %d bytes",
		rejects, aggregates, aggregated, rejectBytes, used1, used2, size1, size2, othersCost, others, perRecord, floodGrowth)
	t.Logf("clinician p99: unloaded %s (%d reads), under the flood %s (%d reads): ratio %.2f",
		p99u, len(unloaded), p99l, len(loaded), float64(p99l)/float64(p99u))
	if path := os.Getenv("CUSTOS_ABUSE_REPORT"); path != "" {
		line := fmt.Sprintf(`{"rate":%d,"requests":%d,"seconds":%.2f,"auth_reject_records":%d,"auth_reject_jsonl_bytes":%d,"audit_db_used_growth_bytes":%d,"flood_growth_bytes":%d,"p99_unloaded_ms":%.3f,"p99_loaded_ms":%.3f,"loaded_reads":%d}`+"\n",
			rate, flood, elapsed.Seconds(), rejects, rejectBytes, used2-used1, floodGrowth, ms(p99u), ms(p99l), len(loaded))
		if fh, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fh.WriteString(line)
			fh.Close()
		}
	}

	// Every refusal is on record, one by one or counted in an aggregate.
	if individual := rejects - aggregates; individual+aggregated != flood {
		t.Errorf("%d records + %d counted in aggregates = %d, want every one of the %d refusals", individual, aggregated, individual+aggregated, flood)
	}
	if rejects > 2*sources {
		t.Errorf("%d auth/reject records, want at most 2 per source address (the first, then one aggregate)", rejects)
	}
	if floodGrowth >= 1_000_000 || rejectBytes >= 1_000_000 {
		t.Errorf("the flood grew the audit volume by %d bytes (%d bytes of records), want < 1 MB", floodGrowth, rejectBytes)
	}
	if len(loaded) == 0 {
		t.Error("the clinician made no read during the flood")
	}
	// The p99 ratio is not asserted: on a shared 2-core machine the
	// unloaded p99 alone varies tenfold between runs. The figures are in
	// docs/benchmarks.md; here the clinician's reads must go on, unrefused
	// (read fails the test on a refusal).
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

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func p99(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

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
