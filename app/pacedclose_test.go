package app_test

import (
	"context"
	"fmt"
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
	f := newFixture(t)
	path := filepath.Join(f.data, app.AuditFile)
	audittest.VerifyOnCleanup(t, path)
	l := audittest.OpenPath(t, path, audit.Options{Node: "test"})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < 12000; i += 16 {
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

// serveWithAdmin opens an App on f's data directory with o (dev keys,
// node "test", HTTP on a free port, tokens of f), serves it, and dials
// its admin socket; cleanup stops serving and closes the App.
func serveWithAdmin(t *testing.T, f fixture, o app.Options) (*app.App, *admin.Client) {
	t.Helper()
	o.DataDir, o.Dev, o.Node, o.Version = f.data, true, "test", "test"
	o.HTTP = &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: f.tokens(t)}
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
	ac, err := admin.Dial(ctx, admin.Path(f.data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ac.Close)
	return a, ac
}
