package audittest_test

import (
	"context"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

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
	editFirstRecord(t, path)
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
	editFirstRecord(t, path)
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

// editFirstRecord flips one bit in the middle of the first stored record,
// behind the log's back.
func editFirstRecord(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("records"))
		k, v := b.Cursor().First()
		edited := append([]byte(nil), v...)
		edited[len(edited)/2] ^= 1
		return b.Put(append([]byte(nil), k...), edited)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}
