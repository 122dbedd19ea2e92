package access_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
)

// TestCloseDuringPacedWalk: a paced verify or export rests between its
// chunks without holding the log: Close, called while the walk rests,
// returns at once (not after the walk's remaining rests), and the walk
// then ends with audit.ErrClosed, not a verdict. At a share of 0.1 % each
// rest is the quarter-second bound and a chunk takes milliseconds, so
// 100 ms into the walk it rests. Before, the walk held the log's read lock
// (Log.mu) through its rests: Close waited for the whole walk (5,000
// records, four rests: about a second). Close may still wait for a chunk
// being read (the lock is held while reading): under -race on a loaded
// CI machine one took 115 ms, so the bound is 500 ms, half of what the
// old code took.
func TestCloseDuringPacedWalk(t *testing.T) {
	for _, o := range pacedWalks {
		t.Run(o.name, func(t *testing.T) {
			l, _, done := startPacedWalk(t, o.op, o.req)
			start := time.Now()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el > 500*time.Millisecond {
				t.Errorf("Close during a paced %s took %v, want it not to wait for the walk's rests", o.name, el)
			}
			select {
			case err := <-done:
				if !errors.Is(err, audit.ErrClosed) {
					t.Errorf("paced %s after Close: %v, want audit.ErrClosed", o.name, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("paced %s did not end after Close", o.name)
			}
		})
	}
}

// pacedWalks are the operations whose walks the Close tests stop.
var pacedWalks = []struct {
	name string
	op   access.Op
	req  any
}{
	{"verify", access.OpVerify, access.VerifyRequest{Ask: access.Ask{Purpose: "HOPERAT"}}},
	{"export", access.OpExport, access.ExportRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Format: audit.FormatJSONL}},
}

// startPacedWalk runs op on a log of 5,000 records through a Service
// paced at 0.1 % and returns 100 ms later, while the walk rests (each
// rest is the quarter-second bound, a chunk takes milliseconds); done
// receives the operation's error.
func startPacedWalk(t *testing.T, op access.Op, req any) (*audit.Log, *access.Service, <-chan error) {
	t.Helper()
	l, dir := openLog(t)
	appendN(t, l, 5000)
	svc := access.New(l, nil, dir, nil)
	svc.Pace(0.001)
	done := make(chan error, 1)
	go func() {
		_, err := (access.Local{Service: svc, Caller: alice}).Do(context.Background(), op, req, access.Discard)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	return l, svc, done
}

// TestPacedVerifyAcrossARoll: a roll (the live segment sealed, a new one
// started) while a paced verify rests does not change its verdict: the
// walk goes on in the segment it was walking, now sealed, and the log is
// found intact.
func TestPacedVerifyAcrossARoll(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 5000)
	svc := access.New(l, nil, dir, nil)
	svc.Pace(0.001)
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		_, err := (access.Local{Service: svc, Caller: alice}).Do(context.Background(), access.OpVerify, access.VerifyRequest{Ask: access.Ask{Purpose: "HOPERAT"}},
			func(r io.Reader) error { _, err := io.Copy(&out, r); return err })
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if ok, err := l.Roll(context.Background()); err != nil || !ok {
		t.Fatalf("Roll = %v, %v", ok, err)
	}
	appendN(t, l, 10)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var res access.VerifyResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if !res.OK || len(res.Problems) != 0 || res.Summary.Records < 5001 {
		t.Errorf("paced verify across a roll: ok %v, %d records, problems %v", res.OK, res.Summary.Records, res.Problems)
	}
}

// TestServiceCloseEndsAPacedWalk: Service.Close (a server shutting down,
// before its admin socket waits for its requests) wakes a paced verify or
// export resting between chunks, and the walk ends at once with
// audit.ErrClosed, the log still open; an operation asked after Close is
// refused with audit.ErrClosed and records nothing. Before, Service had
// no Close and the walk went on to its end (a second for these 5,000
// records at a 0.1 % share; the server's admin socket waited up to 5 s
// for it).
func TestServiceCloseEndsAPacedWalk(t *testing.T) {
	for _, o := range pacedWalks {
		t.Run(o.name, func(t *testing.T) {
			l, svc, done := startPacedWalk(t, o.op, o.req)
			start := time.Now()
			svc.Close()
			select {
			case err := <-done:
				if el := time.Since(start); el > 500*time.Millisecond {
					t.Errorf("a paced %s ended %v after Service.Close, want at once", o.name, el)
				}
				if !errors.Is(err, audit.ErrClosed) {
					t.Errorf("paced %s after Service.Close: %v, want audit.ErrClosed", o.name, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("paced %s did not end after Service.Close", o.name)
			}
			head, _ := l.Head()
			_, err := (access.Local{Service: svc, Caller: alice}).Do(context.Background(), o.op, o.req, access.Discard)
			if !errors.Is(err, audit.ErrClosed) {
				t.Errorf("a %s after Service.Close: %v, want audit.ErrClosed", o.name, err)
			}
			if after, _ := l.Head(); after != head {
				t.Errorf("a %s refused after Service.Close recorded %d records", o.name, after-head)
			}
		})
	}
}

// receiveCounting reads an operation's output to its end in reads of at
// most size bytes, pausing after each, and counts the bytes in received.
func receiveCounting(received *atomic.Int64, size int, pause time.Duration) func(io.Reader) error {
	return func(r io.Reader) error {
		buf := make([]byte, size)
		for {
			n, err := r.Read(buf)
			received.Add(int64(n))
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			time.Sleep(pause)
		}
	}
}

// TestCloseEndsABackup: Close ends a backup in flight as it ends the
// walks: the copy stops at its next write (the audit log's tx.WriteTo
// included), the operation fails with audit.ErrClosed saying no backup
// was taken, and the receiver gets no complete stream. The receiver here
// reads 4 KiB every 2 ms (about 2 MB/s: a backup of a few MB takes
// seconds). Before, a backup was left to finish: Close returned, the
// backup went on to its end and succeeded, and a server's shutdown waited
// for it up to the admin socket's 5 s.
func TestCloseEndsABackup(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 5000)
	db, err := bolt.Open(filepath.Join(dir, "catalog.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	svc := access.New(l, nil, dir, nil)
	var received atomic.Int64
	done := make(chan error, 1)
	go func() {
		_, err := (access.Local{Service: svc, Caller: alice}).Do(context.Background(), access.OpBackup,
			access.BackupRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Out: "/b"}, receiveCounting(&received, 4<<10, 2*time.Millisecond))
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	svc.Close()
	closed := time.Now()
	select {
	case err := <-done:
		if el := time.Since(closed); el > 500*time.Millisecond {
			t.Errorf("the backup ended %v after Close, want at once", el)
		}
		if !errors.Is(err, audit.ErrClosed) || !strings.Contains(err.Error(), "no backup") {
			t.Errorf("backup after Close: %v (%d bytes received), want audit.ErrClosed saying no backup was taken", err, received.Load())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the backup did not end after Close")
	}
}

// TestCloseEndsABackupWaitingForTheCatalogLock: a backup that, past the
// audit log's copy, waits for catalog.db's lock (another process holds it
// exclusively: up to backup.DefaultTimeout, 5 s) ends at Close as one in
// the middle of a copy does, with audit.ErrClosed saying no backup was
// taken. Before, it waited the lock's timeout out (5 s after Close) and a
// server's shutdown waited with it.
func TestCloseEndsABackupWaitingForTheCatalogLock(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 10)
	held, err := bolt.Open(filepath.Join(dir, "catalog.db"), 0o600, nil) // the exclusive lock, held to the end
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	svc := access.New(l, nil, dir, nil)
	var received atomic.Int64
	done := make(chan error, 1)
	go func() {
		_, err := (access.Local{Service: svc, Caller: alice}).Do(context.Background(), access.OpBackup,
			access.BackupRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Out: "/b"}, receiveCounting(&received, 32<<10, 0))
		done <- err
	}()
	// The audit copy (tens of KiB) is long sent by then: the backup waits
	// for the catalog's lock.
	time.Sleep(500 * time.Millisecond)
	if received.Load() == 0 {
		t.Fatal("nothing received 500 ms into the backup: it is not waiting for the catalog's lock")
	}
	svc.Close()
	closed := time.Now()
	select {
	case err := <-done:
		if el := time.Since(closed); el > time.Second {
			t.Errorf("the backup ended %v after Close, want at once (it waited for the catalog's lock)", el)
		}
		if !errors.Is(err, audit.ErrClosed) || !strings.Contains(err.Error(), "no backup") {
			t.Errorf("backup after Close: %v, want audit.ErrClosed saying no backup was taken", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the backup did not end after Close")
	}
}
