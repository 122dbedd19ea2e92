package e2e

import (
	"archive/tar"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custos-mcp/custos/app/admin"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/backup"
)

// TestKill9AtTheFreelistPoints kills the real `custos serve` with SIGKILL
// where a backup leaves bbolt's freelist out of the live segment
// (audit.Log.WriteSnapshot: the commits during the copy name no freelist;
// the first commit after it, a seal's commit and Close write it again),
// while clinicians read:
//
//   - in the middle of the audit log's copy (the backup's receiver has
//     read between 10 % and 80 % of audit.db, several MiB: more than the
//     socket buffers hold, so the server is still copying);
//   - just after the copy ends (its receiver has the whole audit.db;
//     0-20 ms later);
//   - at random moments (0.2-1.2 s in) while a backup runs on a log that
//     rolls every 64 KiB (seals, and the first of them seals the large
//     segment the copies above read).
//
// A kill during the copy must leave the live segment naming no freelist
// (most of them: the reads commit meanwhile), or the test missed its
// point. After the last kill the log is opened read-only (audittest.Verify),
// then read-write (`custos audit verify`, which appends its access
// record, exit 0), and every response a clinician received has its allow
// record in the log.
func TestKill9AtTheFreelistPoints(t *testing.T) {
	d := newDataset(t)
	// Several MiB of records before the first start, so that a copy
	// lasts longer than the socket buffers take to fill.
	l, err := audit.Open(d.audit(), audit.Options{Node: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	appendPadded(t, l, 4000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	start := func(extra ...string) *served {
		return serve(t, d, nil, append([]string{"--dev", "--node", "e2e", "--listen", loopback, "--tokens", tokens, "--rate-limit", "0"}, extra...)...)
	}
	srv := start()
	uris := readableURIs(t, srv.url, tok)
	srv.stop(t)

	var (
		mu       sync.Mutex
		receipts = map[string]string{}
		points   = map[string]int{}
		sealed   int
	)
	round := func(point string, extra []string, kill func(b *slowBackup)) {
		srv := start(extra...)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Go(func() { readUntilGone(ctx, srv.url, tok, uris, w, &mu, receipts) })
		}
		b := startSlowBackup(ctx, d.data)
		kill(b)
		srv.kill(t)
		cancel()
		wg.Wait()
		b.wait()
		points[point]++
		if namesNoFreelist(t, d.audit()) {
			points[point+", the file naming no freelist"]++
		}
		sealed += strings.Count(srv.stderr.String(), "audit segment sealed")
		points["an interrupted seal completed or rolled back at the start"] += strings.Count(srv.stderr.String(), "interrupted seal")
	}
	for i := range 12 {
		if i%2 == 0 {
			round("during the copy", nil, func(b *slowBackup) {
				if ok, err := b.waitCopied(0.1+0.7*rand.Float64(), 60*time.Second); !ok {
					t.Fatalf("round %d: the backup's audit copy did not get under way (the backup: %v)", i, err)
				}
			})
			continue
		}
		round("just after the copy", nil, func(b *slowBackup) {
			if ok, err := b.waitCopied(1, 60*time.Second); !ok {
				t.Fatalf("round %d: the backup's audit copy did not end (the backup: %v)", i, err)
			}
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		})
	}
	for range 8 {
		// Seals verify their segment first, at the scrub rate: the
		// first one's is thousands of records.
		round("at random, rolling every 64 KiB", []string{"--audit-roll-size", "65536", "--scrub-rate", "1000000"}, func(*slowBackup) {
			time.Sleep(time.Duration(200+rand.IntN(1000)) * time.Millisecond)
		})
	}
	t.Logf("kills: %v; %d segments sealed meanwhile; %d responses received", points, sealed, len(receipts))
	if sealed == 0 {
		t.Error("no segment was sealed: the kills proved nothing about seals")
	}
	// The reads commit during each copy, so a kill in the middle of one
	// leaves a live segment whose meta page names no freelist (18 of 18
	// in three runs): that is the point this test is about.
	if n := points["during the copy, the file naming no freelist"]; n < points["during the copy"]/2 {
		t.Errorf("%d of %d kills during the copy left a file naming no freelist: the kills missed the point", n, points["during the copy"])
	}

	audittest.Verify(t, d.audit()) // read-only, as the last kill left it
	if out, errOut, code := custos(t, nil, "audit", "verify", "--data-dir", d.data); code != 0 {
		t.Fatalf("audit verify after the kills: exit %d\n%s%s", code, out, errOut)
	}
	byEvent := map[string]audit.Record{}
	for _, r := range d.records(t) {
		byEvent[r.EventID] = r
	}
	for id := range receipts {
		if r, ok := byEvent[id]; !ok || r.Action != audit.ActionResourcesRead || r.Outcome != audit.OutcomeAllow {
			t.Errorf("a response was received (event %q) without its allow record (%+v, in the log: %v)", id, r, ok)
		}
	}
}

// appendPadded appends n read records of about 1 KiB each to l, 32 at a
// time (group commits).
func appendPadded(t *testing.T, l *audit.Log, n int) {
	t.Helper()
	pad := strings.Repeat("p", 900)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := g; i < n; i += 32 {
				if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow,
					Reason: fmt.Sprintf("prefill-%d-%s", i, pad)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// slowBackup is a backup taken over the admin socket by a receiver that
// reads audit.db's copy in 32 KiB pieces, a millisecond apart, and then
// the rest at once.
type slowBackup struct {
	mu     sync.Mutex
	copied float64 // the fraction of audit.db received
	err    error   // why the backup ended, once done is closed
	done   chan struct{}
}

func startSlowBackup(ctx context.Context, dir string) *slowBackup {
	b := &slowBackup{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		// The server is up when its HTTP listener is; its admin socket
		// may come a moment later on a loaded machine: dial until it is
		// there (or the round ends).
		c, err := admin.Dial(ctx, admin.Path(dir))
		for err != nil && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			c, err = admin.Dial(ctx, admin.Path(dir))
		}
		if err != nil {
			b.fail(fmt.Errorf("dial: %w", err))
			return
		}
		defer c.Close()
		_, err = c.Do(ctx, access.OpBackup, access.BackupRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Out: "/e2e/killed"}, func(r io.Reader) error {
			tr := tar.NewReader(r)
			h, err := tr.Next()
			if err != nil || h.Name != backup.FileAudit {
				return err
			}
			buf := make([]byte, 32<<10)
			var got int64
			for {
				n, err := tr.Read(buf)
				got += int64(n)
				b.mu.Lock()
				b.copied = float64(got) / float64(h.Size)
				b.mu.Unlock()
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				time.Sleep(time.Millisecond)
			}
			_, err = io.Copy(io.Discard, r)
			return err
		})
		b.fail(err)
	}()
	return b
}

func (b *slowBackup) fail(err error) {
	b.mu.Lock()
	b.err = err
	b.mu.Unlock()
}

// waitCopied waits until at least fraction of audit.db was received, for
// at most limit; it reports whether it was, and if not, why the backup
// ended (nil if it is still running).
func (b *slowBackup) waitCopied(fraction float64, limit time.Duration) (bool, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		c := b.copied
		b.mu.Unlock()
		if c >= fraction {
			return true, nil
		}
		select {
		case <-b.done:
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.copied >= fraction, b.err
		case <-time.After(time.Millisecond):
		}
	}
	return false, nil
}

// wait waits for the backup's receiver to end (the server killed).
func (b *slowBackup) wait() { <-b.done }

// namesNoFreelist reports whether the newest meta page of the bbolt file
// at path (the one with the larger txid of the two at offsets 0 and 4096,
// custos's page size; bbolt's layout: a 16-byte page header, then magic,
// version, page size, flags, the root bucket (16 bytes), the freelist's
// page, the high-water page, the txid) names no freelist, as the commits
// during a backup's copy leave it (audit.Log.WriteSnapshot).
func namesNoFreelist(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var txid, freelist uint64
	for _, off := range []int64{0, 4096} {
		m := make([]byte, 64)
		if _, err := f.ReadAt(m, off+16); err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint32(m) == 0xED0CDAED && binary.LittleEndian.Uint64(m[48:]) >= txid {
			txid, freelist = binary.LittleEndian.Uint64(m[48:]), binary.LittleEndian.Uint64(m[32:])
		}
	}
	return freelist == ^uint64(0)
}
