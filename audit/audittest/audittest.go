// Package audittest gives tests audit logs that check themselves: a log is
// opened on a real bbolt file in t.TempDir(), and on t.Cleanup it is closed
// and verified (hash chain, Merkle tree, canonical encoding) with
// audit.VerifyFile, failing the test on every problem found, the way
// bbolt's btesting.MustCreateDB runs its integrity check on cleanup.
//
// Every test outside package audit that writes an audit log uses Open or
// OpenPath; a test whose log is written by another process (a served
// custos binary, a CLI command) registers the file with VerifyOnCleanup.
// Package audit's own tests keep their internal copy (helpers_test.go),
// since they cannot import this package. Recorder lets a test show such a
// check failing.
package audittest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/audit"
)

// Open creates an audit log named audit.db in a fresh t.TempDir() and
// returns it with its path. An empty opts.Node becomes "test". On cleanup
// the log is closed and verified.
func Open(t testing.TB, opts audit.Options) (*audit.Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	return OpenPath(t, path, opts), path
}

// OpenPath is Open on a given path (a data directory's audit.db, or a log
// reopened after a restart). Closing the log earlier is allowed: the
// cleanup's second Close is harmless.
func OpenPath(t testing.TB, path string, opts audit.Options) *audit.Log {
	t.Helper()
	if opts.Node == "" && !opts.ReadOnly {
		opts.Node = "test"
	}
	l, err := audit.Open(path, opts)
	if err != nil {
		t.Fatalf("audittest: open %s: %v", filepath.Base(path), err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("audittest: close %s: %v", filepath.Base(path), err)
		}
		if !opts.ReadOnly {
			Verify(t, path)
		}
	})
	return l
}

// VerifyOnCleanup verifies the log at path when the test ends, if the file
// exists then (a test may end before a server wrote anything). Register it
// before starting whatever writes the log, so that the verification runs
// after that writer has been stopped (cleanups run last-in, first-out).
func VerifyOnCleanup(t testing.TB, path string) {
	t.Helper()
	t.Cleanup(func() {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return
		}
		Verify(t, path)
	})
}

// Verify runs audit.VerifyFile on path and fails t (without stopping it) on
// every problem reported and on an error. It returns the summary.
func Verify(t testing.TB, path string) audit.Summary {
	t.Helper()
	sum, err := audit.VerifyFile(context.Background(), path, func(p audit.Problem) {
		t.Errorf("audittest: verify %s: %s", filepath.Base(path), p)
	})
	if err != nil {
		t.Errorf("audittest: verify %s: %v", filepath.Base(path), err)
	}
	return sum
}

// Recorder is a testing.TB that records the failures (Errorf) and cleanups
// registered through it instead of acting on them, so that a test can show
// a fixture's own check failing: make the fixture with a Recorder, break
// what it checks, call RunCleanups and expect Failed. Everything else
// (Fatal, TempDir, Helper, Log) goes to the real test it wraps.
type Recorder struct {
	testing.TB
	failed   bool
	cleanups []func()
}

// NewRecorder wraps t.
func NewRecorder(t testing.TB) *Recorder { return &Recorder{TB: t} }

// Errorf records a failure.
func (r *Recorder) Errorf(string, ...any) { r.failed = true }

// Cleanup records f for RunCleanups.
func (r *Recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// RunCleanups runs the recorded cleanups, last-in first-out as testing does.
func (r *Recorder) RunCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.cleanups = nil
}

// Failed reports whether Errorf was called.
func (r *Recorder) Failed() bool { return r.failed }
