package fhirsync

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSyncLockIsNotASymlink: the sync lock file sits in the data
// directory, its owner's. Opened with O_CREATE, a symbolic link there had
// a sync run as root create the link's target. It is no longer followed,
// and the error says what is wrong. Found by review (h-review16), beside
// the audit lock file's.
func TestSyncLockIsNotASymlink(t *testing.T) {
	dir := t.TempDir()
	const base = "https://ehr.example/fhir"
	target := filepath.Join(t.TempDir(), "nologin")
	p := statePath(dir, base)
	if err := os.Symlink(target, strings.TrimSuffix(p, ".json")+".lock"); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockBase(dir, base)
	if err == nil {
		unlock()
		t.Errorf("lockBase took a lock file that is a symbolic link")
	} else if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("lockBase: %v, want ErrBadConfig saying the lock file is a symbolic link", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lockBase created the symbolic link's target (%v)", err)
	}
}

// refusedBase is a FHIR base on a loopback port where nothing listens
// (connection refused).
func refusedBase(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/fhir"
}

// dirEntries lists the names in dir.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestUnreachableSyncLeavesNoLock: a sync of a base that was never
// reached (connection refused) left sync-<id>.lock in the state directory
// (the data directory), one more per base ever tried. A sync that fails
// before doing anything leaves the directory as it found it; so does one
// that succeeds, apart from its state file. Fails on the old code (the
// lock file stays).
func TestUnreachableSyncLeavesNoLock(t *testing.T) {
	o, imp, _ := probeOptions(t, refusedBase(t), false)
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("sync of a refused base: %v, want ErrUnavailable", err)
	}
	if names := dirEntries(t, o.StateDir); len(names) != 0 || imp.calls != 0 {
		t.Errorf("after a sync that reached nothing the state directory holds %v (importer called %d times), want it as it was: empty", names, imp.calls)
	}
}

// TestSyncLockExcludesASecondSync: while a sync of a base runs (here,
// waiting for the server's CapabilityStatement), a second sync of that base
// is refused with ErrBusy and changes nothing; once the first ends, the
// lock file is gone and a new sync takes the lock again.
func TestSyncLockExcludesASecondSync(t *testing.T) {
	// entered holds the handler's signal until the test reads it: an
	// unbuffered channel lost it when the request came before the test
	// waited (the send has a default), and the test then hung (the
	// fresh-clone race run of b57ed4c waited 14 minutes there).
	entered, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	o, _, _ := probeOptions(t, srv.URL+"/fhir", false)
	o.MaxAttempts = 1
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { _, err := s.Run(context.Background()); first <- err }()
	<-entered
	lock := strings.TrimSuffix(statePath(o.StateDir, s.Base()), ".json") + ".lock"
	if _, err := os.Lstat(lock); err != nil {
		t.Fatalf("a running sync holds no lock file: %v", err)
	}
	if _, err := s.Run(context.Background()); !errors.Is(err, ErrBusy) {
		t.Errorf("a second sync while the first runs: %v, want ErrBusy", err)
	}
	if _, err := os.Lstat(lock); err != nil {
		t.Errorf("the refused second sync took the first one's lock file away: %v", err)
	}
	close(release)
	if err := <-first; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("first sync: %v, want ErrUnavailable (503)", err)
	}
	if names := dirEntries(t, o.StateDir); len(names) != 0 {
		t.Errorf("after both syncs the state directory holds %v, want nothing", names)
	}
	unlock, err := lockBase(o.StateDir, s.Base())
	if err != nil {
		t.Fatalf("lock after the first sync ended: %v", err)
	}
	unlock()
}

// TestSyncLockRemovedUnderAWaiter: a sync that opened the lock file just
// before the holder removed it, and flocks it after, holds the lock of a
// file no longer in the directory, while a third sync creates and locks a
// new one. holdLock sees the name now points elsewhere (errLockGone), and
// the new lock still excludes: the waiter, trying again, is refused.
func TestSyncLockRemovedUnderAWaiter(t *testing.T) {
	dir := t.TempDir()
	const base = "https://ehr.example/fhir"
	lock := strings.TrimSuffix(statePath(dir, base), ".json") + ".lock"
	unlockA, err := lockBase(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := os.OpenFile(lock, os.O_RDWR, 0) // the waiter's open, before A lets go
	if err != nil {
		t.Fatal(err)
	}
	unlockA()
	if _, err := os.Lstat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the lock file outlived its unlock: %v", err)
	}
	unlockC, err := lockBase(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	defer unlockC()
	if unlock, err := holdLock(stale, lock); !errors.Is(err, errLockGone) {
		if err == nil {
			unlock()
		}
		t.Fatalf("flocking the removed lock file: %v, want errLockGone", err)
	}
	if unlock, err := lockBase(dir, base); !errors.Is(err, ErrBusy) {
		if err == nil {
			unlock()
		}
		t.Errorf("a sync while the new lock is held: %v, want ErrBusy", err)
	}
}
