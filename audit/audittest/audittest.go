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
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

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

// FlipRecord edits record seq of the log at path behind its back, as an
// attacker with write access to the file would (in whichever segment
// holds it, a sealed one included): one byte inside the
// record's action string is flipped with a bbolt update of the records
// bucket, so the JSON stays well-formed but the record no longer hashes to
// its stored hash (nor to its Merkle leaf). No process may hold the log
// open. It is for tests of the checks that must catch such an edit; the
// file then fails Verify.
func FlipRecord(t testing.TB, path string, seq uint64) {
	t.Helper()
	files := []string{path}
	sealed, _ := filepath.Glob(filepath.Join(audit.SealedDir(path), "*.db"))
	files = append(files, sealed...)
	for _, f := range files {
		if flipIn(t, f, seq, f != path) {
			return
		}
	}
	t.Fatalf("audittest: flip record %d of %s: not in any segment", seq, filepath.Base(path))
}

// flipIn flips record seq in the segment file path if it holds it; a
// sealed (read-only) file is made writable for the edit and read-only
// again after.
func flipIn(t testing.TB, path string, seq uint64, sealed bool) bool {
	t.Helper()
	if sealed {
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(path, 0o400)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("audittest: flip record %d of %s: %v", seq, filepath.Base(path), err)
	}
	defer db.Close()
	found := false
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("records"))
		k := binary.BigEndian.AppendUint64(nil, seq)
		v := slices.Clone(b.Get(k))
		if v == nil {
			return nil
		}
		i := bytes.Index(v, []byte(`"action":"`))
		if i < 0 {
			return fmt.Errorf("record %d has no action", seq)
		}
		v[i+len(`"action":"`)+2] ^= 0x01
		found = true
		return b.Put(k, v)
	})
	if err != nil {
		t.Fatalf("audittest: flip record %d of %s: %v", seq, filepath.Base(path), err)
	}
	return found
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
