package audittest_test

import (
	"context"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
)

// recorder is a testing.TB that records failures instead of failing, so the
// helper's own check can be shown to fail.
type recorder struct {
	testing.TB
	failed   bool
	cleanups []func()
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Cleanup(f func())      { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Helper()               {}

func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func TestCleanupVerifiesAGoodLog(t *testing.T) {
	r := &recorder{TB: t}
	l, _ := audittest.Open(r, audit.Options{})
	if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow,
		Reason: "ok", Principal: audit.Principal{Sub: "a"}, PurposeOfUse: "TREAT"}); err != nil {
		t.Fatal(err)
	}
	r.runCleanups()
	if r.failed {
		t.Fatal("a good log was reported broken")
	}
}

// TestCleanupFailsOnABrokenLog edits a committed record behind the log's
// back: the cleanup must fail the test.
func TestCleanupFailsOnABrokenLog(t *testing.T) {
	r := &recorder{TB: t}
	l, path := audittest.Open(r, audit.Options{})
	for range 3 {
		if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow,
			Reason: "ok", Principal: audit.Principal{Sub: "a"}, PurposeOfUse: "TREAT"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
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
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	r.runCleanups()
	if !r.failed {
		t.Fatal("an edited record passed the cleanup check")
	}
}
