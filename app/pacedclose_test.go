package app_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/app/admin"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
)

// TestCloseDuringAPacedWalkOverTheAdminSocket: a server's Close (what
// SIGTERM runs) while an auditor's paced verify rests between chunks
// returns at once: the Service is closed before the admin socket waits
// for its requests, the rest wakes, and the command fails with an error
// naming the closed log (audit.ErrClosed's text), not a verdict. At a
// share of 0.1 % every rest is the quarter-second bound, so 200 ms into
// the walk of 12,000 records it rests. Before, the admin socket's shutdown
// waited for the walk to its end (1.6 s for 5,000 records, so about 4 s
// here), up to its 5 s grace, and the command got its verdict. The bound,
// 1.5 s, leaves room for a chunk being read and the server closed under
// -race on a loaded machine (500 ms, the bound until 2026-12-06, was
// exceeded there: 790 ms at load 13); the error naming the closed log,
// not a verdict, is what tells the old behaviour apart.
func TestCloseDuringAPacedWalkOverTheAdminSocket(t *testing.T) {
	f := fixtureWithRecords(t, 12000)
	a, ac := serveWithAdmin(t, f, app.Options{Admin: app.AdminOptions{AuditorCPU: 0.001}})
	done := make(chan error, 1)
	go func() {
		_, err := ac.Do(context.Background(), access.OpVerify, access.VerifyRequest{Ask: access.Ask{Purpose: "HOPERAT"}}, access.Discard)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("Close during a paced verify over the admin socket took %v, want it not to wait for the walk", el)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), audit.ErrClosed.Error()) {
			t.Errorf("paced verify after Close: %v, want an error naming the closed log", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("paced verify did not end after Close")
	}
}

// fixtureWithRecords is a fixture whose audit log holds n records
// (appended from 16 goroutines, then closed) and is verified on cleanup.
func fixtureWithRecords(t *testing.T, n int) fixture {
	t.Helper()
	f := newFixture(t)
	path := filepath.Join(f.data, app.AuditFile)
	audittest.VerifyOnCleanup(t, path)
	l := audittest.OpenPath(t, path, audit.Options{Node: "test"})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow, Reason: fmt.Sprint("r", i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil || t.Failed() {
		t.Fatal(err)
	}
	return f
}

// TestCloseDuringAStalledBackupOverTheAdminSocket: a server's Close while
// a backup's receiver has stopped reading (a peer that asks for a backup
// over the admin socket and reads nothing past the status line, its
// socket buffers full, the server's write blocked inside the audit log's
// copy) returns at once: the blocked write ends at Close, as a backup
// that is still being read does, instead of holding the copy's read
// transaction, and Log.Close with it, until the admin socket's 5 s grace
// ran out and closed the connection (5.0 s before). The peer then finds
// the stream cut short, without a Custos-Result.
func TestCloseDuringAStalledBackupOverTheAdminSocket(t *testing.T) {
	f := fixtureWithRecords(t, 12000) // some MiB: more than the socket buffers hold
	a, _ := serveWithAdmin(t, f, app.Options{})
	conn, err := net.Dial("unix", admin.Path(f.data))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"purpose":"HOPERAT","out":"/backups/stalled"}`
	fmt.Fprintf(conn, "POST /v1/backup HTTP/1.1\r\nHost: custos-admin\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	if status, err := br.ReadString('\n'); err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("backup request: %q, %v", status, err)
	}
	time.Sleep(300 * time.Millisecond) // the socket buffers fill; the server's write blocks
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("Close during a stalled backup over the admin socket took %v, want it not to wait for the stalled receiver", el)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	rest, _ := io.ReadAll(br)
	if bytes.Contains(rest, []byte("\r\n"+admin.TrailerResult+":")) {
		t.Error("the backup cut off at Close ended with a Custos-Result")
	}
}

// serveWithAdmin serves an App (serveApp) and dials its admin socket.
func serveWithAdmin(t *testing.T, f fixture, o app.Options) (*app.App, *admin.Client) {
	t.Helper()
	a, ctx := serveApp(t, f, o)
	ac, err := admin.Dial(ctx, admin.Path(f.data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ac.Close)
	return a, ac
}

// serveApp opens an App on f's data directory with o (dev keys, node
// "test", HTTP on a free port with the tokens of f, the other fields of
// o.HTTP kept) and serves it until ctx, which cleanup cancels before it
// closes the App.
func serveApp(t *testing.T, f fixture, o app.Options) (a *app.App, ctx context.Context) {
	t.Helper()
	o.DataDir, o.Dev, o.Node, o.Version = f.data, true, "test", "test"
	var h app.HTTPOptions
	if o.HTTP != nil {
		h = *o.HTTP
	}
	h.Listen, h.Tokens = "127.0.0.1:0", f.tokens(t)
	o.HTTP = &h
	a, err := app.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-served
		a.Close()
	})
	return a, ctx
}
