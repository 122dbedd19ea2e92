package audittest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
)

// appendThree appends three records to l.
func appendThree(t *testing.T, l *audit.Log) {
	t.Helper()
	for range 3 {
		if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow,
			Reason: "ok", Principal: audit.Principal{Sub: "a"}, PurposeOfUse: "TREAT"}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCleanupVerifiesAGoodLog(t *testing.T) {
	r := audittest.NewRecorder(t)
	l, _ := audittest.Open(r, audit.Options{})
	appendThree(t, l)
	r.RunCleanups()
	if r.Failed() {
		t.Fatal("a good log was reported broken")
	}
}

// TestCleanupFailsOnABrokenLog edits a committed record behind the log's
// back: the cleanup must fail the test.
func TestCleanupFailsOnABrokenLog(t *testing.T) {
	r := audittest.NewRecorder(t)
	l, path := audittest.Open(r, audit.Options{})
	appendThree(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	audittest.FlipRecord(t, path, 1)
	r.RunCleanups()
	if !r.Failed() {
		t.Fatal("an edited record passed the cleanup check")
	}
}

// TestVerifyOnCleanupChecksAnotherWritersLog: a log written and closed by
// someone else (a served binary, a CLI command) is verified on cleanup, and
// an edited record fails the test; a log that was never written is not an
// error (a test may end before a server wrote anything).
func TestVerifyOnCleanupChecksAnotherWritersLog(t *testing.T) {
	r := audittest.NewRecorder(t)
	path := filepath.Join(t.TempDir(), "audit.db")
	audittest.VerifyOnCleanup(r, path)
	l, err := audit.Open(path, audit.Options{Node: "other-process"})
	if err != nil {
		t.Fatal(err)
	}
	appendThree(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	audittest.Verify(t, path) // intact so far
	audittest.FlipRecord(t, path, 1)
	r.RunCleanups()
	if !r.Failed() {
		t.Fatal("an edited record passed VerifyOnCleanup")
	}

	missing := audittest.NewRecorder(t)
	audittest.VerifyOnCleanup(missing, filepath.Join(t.TempDir(), "audit.db"))
	missing.RunCleanups()
	if missing.Failed() {
		t.Fatal("VerifyOnCleanup failed on a log that was never written")
	}
}
