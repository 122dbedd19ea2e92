package app

import (
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// fakeAuditLog answers the readiness check's two questions.
type fakeAuditLog struct{ broken, head error }

func (f fakeAuditLog) TreeHead(context.Context) (int64, tlog.Hash, error) {
	return 0, tlog.Hash{}, f.head
}
func (f fakeAuditLog) Broken() error { return f.broken }

// TestAuditReadyRefusesABrokenLog: a log latched by a failed seal refuses
// every append, so the server is not ready, whatever its tree head says
// (audit.TestCrashDuringSeal checks that Broken reports the latch).
func TestAuditReadyRefusesABrokenLog(t *testing.T) {
	ctx := context.Background()
	if err := auditReady(ctx, fakeAuditLog{}); err != nil {
		t.Fatalf("a sound log is not ready: %v", err)
	}
	err := auditReady(ctx, fakeAuditLog{broken: errors.New("audit: seal of segment 3: its commit failed")})
	if err == nil || !strings.Contains(err.Error(), "seal failed") {
		t.Fatalf("a broken log: %v", err)
	}
	if err := auditReady(ctx, fakeAuditLog{head: errors.New("closed")}); err == nil {
		t.Fatal("a log whose head does not read is ready")
	}
}
