package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/server"
)

// TestKill9UnderLoadEveryReceivedResponseIsAudited drives a dev server with
// concurrent clients, kills it with SIGKILL mid-load, and after a restart
// reconciles: every response a client received carried the event id of its
// audit record (the receipt), and every one of those records is in the log,
// allowed, and the log verifies. A response is never released before its
// record is durable, so no receipt may be missing.
func TestKill9UnderLoadEveryReceivedResponseIsAudited(t *testing.T) {
	kill9UnderLoad(t, 1)
}

// TestKill9WhileSealingNothingIsLost is the same with a log that rolls
// over every 64 KiB (tens of records), killed and restarted three times
// under load: kills land between and inside seals, each restart completes
// or rolls back the seal it finds, and across all of them every received
// response is audited, the sealed segments link and the log verifies.
func TestKill9WhileSealingNothingIsLost(t *testing.T) {
	data := kill9UnderLoad(t, 3, "--audit-roll-size", "65536")
	sealed, _ := filepath.Glob(filepath.Join(audit.SealedDir(filepath.Join(data, "audit.db")), "*.db"))
	if len(sealed) < 3 {
		t.Fatalf("%d sealed segments, want several", len(sealed))
	}
	t.Logf("%d sealed segments", len(sealed))
}

// kill9UnderLoad runs the test above rounds times on one data directory,
// with extra serve arguments, and returns the data directory.
func kill9UnderLoad(t *testing.T, rounds int, serveArgs ...string) string {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	start := func() *served {
		return serve(t, d, nil, append([]string{"--dev", "--listen", loopback, "--tokens", tokens, "--rate-limit", "0"}, serveArgs...)...) // load test: unlimited
	}
	srv := start()
	url := srv.url

	uris := readableURIs(t, url, tok)

	var (
		mu       sync.Mutex
		receipts = map[string]string{} // event id → URI
	)
	for round := range rounds {
		if round > 0 {
			srv = start()
			url = srv.url
		}
		load(t, url, tok, uris, srv, &mu, receipts, 200*(round+1))
	}

	// Restart: the server starts on the killed data directory (its local
	// checkpoints are consistent with the tree), then stops cleanly.
	srv2 := start()
	c2 := connect(t, srv2.url, tok)
	if _, err := c2.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uris[0]}); err != nil {
		t.Fatalf("read after restart: %v", err)
	}
	c2.Close()
	if err := srv2.stop(t); err != nil {
		t.Fatalf("restarted server: %v\n%s", err, srv2.stderr)
	}

	audittest.Verify(t, d.audit())
	byEvent := map[string]audit.Record{}
	for _, r := range d.records(t) {
		byEvent[r.EventID] = r
	}
	for id := range receipts {
		r, ok := byEvent[id]
		if !ok {
			t.Errorf("a response was received whose audit record (event %s) is not in the log", id)
			continue
		}
		if r.Action != "resources/read" || r.Outcome != audit.OutcomeAllow {
			t.Errorf("receipt %s names record %d (%s %s), not an allowed read", id, r.Seq, r.Action, r.Outcome)
		}
	}
	t.Logf("%d responses received before SIGKILL, all audited; %d records in the log", len(receipts), len(byEvent))
	return d.data
}

// load reads with 8 clients through srv until receipts holds want
// responses (or 20 s passed), then kills srv with SIGKILL.
func load(t *testing.T, url, tok string, uris []string, srv *served, mu *sync.Mutex, receipts map[string]string, want int) {
	t.Helper()
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	for w := range 8 {
		wg.Go(func() { readUntilGone(ctx, url, tok, uris, w, mu, receipts) })
	}
	// Let the load run, then kill the server without warning.
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(receipts)
		mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.kill(t)
	cancel()
	wg.Wait()
	if len(receipts) < 50 {
		t.Fatalf("only %d responses before the kill; the test proves little", len(receipts))
	}
	if _, ok := receipts[""]; ok {
		t.Fatal("a response carried no audit receipt")
	}
}

// readableURIs lists the resources the token's principal may read on the
// server at url.
func readableURIs(t *testing.T, url, tok string) []string {
	t.Helper()
	cs := connect(t, url, tok)
	defer cs.Close()
	var uris []string
	for r, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	return uris
}

// readUntilGone reads uris (from the w-th on, round robin) through one
// client of url until ctx ends or the server is gone, and notes each
// response's receipt (its audit record's event id) in receipts.
func readUntilGone(ctx context.Context, url, tok string, uris []string, w int, mu *sync.Mutex, receipts map[string]string) {
	c, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-crash", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{tok}}, MaxRetries: -1}, nil)
	if err != nil {
		return
	}
	defer c.Close()
	for i := w; ctx.Err() == nil; i++ {
		uri := uris[i%len(uris)]
		res, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return // the server is gone
		}
		id, _ := res.Meta[server.ReceiptKey].(string)
		mu.Lock()
		receipts[id] = uri
		mu.Unlock()
	}
}
