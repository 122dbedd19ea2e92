package app_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit/audittest"
)

// TestOpenInterruptedIsNotAnIntegrityAlarm: a serve stopped (SIGTERM,
// SIGINT) while it starts, after the audit log is open, must say that it
// was stopped, not that the log does not match its anchored checkpoints.
// probe-chaos saw `custos: the audit log does not match its anchored
// checkpoints; refusing to serve: checkpoint: local tree head: context
// canceled` from a serve stopped while starting on a sound log, which
// `custos audit verify` then passed: a false tamper alarm.
func TestOpenInterruptedIsNotAnIntegrityAlarm(t *testing.T) {
	f := newFixture(t)
	audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
	o := app.Options{DataDir: f.data, Dev: true, Node: "test", HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: f.tokens(t)}}
	// A first start, one list and a stop anchor a checkpoint: the next
	// start checks the log against it.
	a, err := app.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "app-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: a.URL(), HTTPClient: &http.Client{Transport: bearer{"clinician-token"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListResources(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	stop()
	<-served
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(f.data, "checkpoints.jsonl")); err != nil || len(b) == 0 {
		t.Fatalf("no anchored checkpoint after the first run (%v): the start below would check nothing", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal arrived while Open ran
	a, err = app.Open(ctx, o)
	if err == nil {
		a.Close()
		t.Fatal("Open succeeded with a canceled context: this test no longer reaches the interrupted start it checks")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Open = %v, want it to wrap context.Canceled", err)
	}
	for _, alarm := range []string{"does not match", "refusing to serve", "do not verify"} {
		if strings.Contains(err.Error(), alarm) {
			t.Errorf("Open, stopped while starting, says %q: %v", alarm, err)
		}
	}
	// The log is sound: the next start opens.
	a, err = app.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("the next start: %v", err)
	}
	a.Close()
}
