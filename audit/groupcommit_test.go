package audit

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestWindow(t *testing.T) {
	lo, hi := time.Millisecond, 5*time.Millisecond
	mid := (idleSchedLatency + saturatedSchedLatency) / 2
	for _, tc := range []struct {
		lo, hi, sched, want time.Duration
	}{
		{lo, hi, 0, lo},
		{lo, hi, idleSchedLatency, lo},
		{lo, hi, mid, 3 * time.Millisecond},
		{lo, hi, saturatedSchedLatency, hi},
		{lo, hi, time.Second, hi},
		{hi, hi, time.Second, hi}, // fixed window
		{hi, lo, time.Second, hi}, // inverted bounds: the lower one is lo
	} {
		if got := window(tc.lo, tc.hi, tc.sched); got != tc.want {
			t.Errorf("window(%v, %v, %v) = %v, want %v", tc.lo, tc.hi, tc.sched, got, tc.want)
		}
	}
}

// The sampler reads the Go scheduler's latency: with runnable goroutines
// queueing for the CPUs, the mean exceeds the idle threshold; within one
// sampling interval the value is not re-read; after a quiet spell the
// first sample starts afresh (idle), not averaged over the spell.
func TestSchedSamplerSeesQueueing(t *testing.T) {
	var s schedSampler
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	// Sample as batches would, until the queueing shows or 5 s pass: on a
	// machine loaded from outside, the process may get too little CPU in a
	// short fixed window for its spinners to queue measurably (a fixed
	// 300 ms window once saw 1.4 µs under load 14 on 2 cores).
	var mean time.Duration
	for end := time.Now().Add(5 * time.Second); mean <= idleSchedLatency && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		mean = max(mean, s.current(time.Now()))
	}
	close(stop)
	wg.Wait()
	if mean <= idleSchedLatency {
		t.Fatalf("mean scheduler latency with %d spinning goroutines on %d CPUs = %v, want > %v",
			4*runtime.GOMAXPROCS(0), runtime.GOMAXPROCS(0), mean, idleSchedLatency)
	}
	last := s.mean
	if again := s.current(s.at.Add(schedSampleInterval / 2)); again != last {
		t.Fatalf("re-read within the interval: %v, then %v", last, again)
	}
	if after := s.current(s.at.Add(schedSampleStale + time.Millisecond)); after != 0 {
		t.Fatalf("first sample after a quiet spell = %v, want 0 (a fresh interval)", after)
	}
}

// As with bbolt's DB.Batch: a function that fails leaves the batch and its
// caller runs it alone (getting its own error); the others commit together.
func TestBatcherRunsAFailingFunctionAlone(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A commit in flight (held open by a leader), so that the three calls
	// gather as followers and share one batch.
	b := &batcher{db: db, minDelay: 200 * time.Millisecond, maxDelay: 200 * time.Millisecond, maxSize: 64}
	release := holdCommit(t, b)
	boom := errors.New("boom")
	var runs [3]atomic.Int32
	put := func(i int, fail bool) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			runs[i].Add(1)
			if fail {
				return boom
			}
			bk, err := tx.CreateBucketIfNotExists([]byte("k"))
			if err != nil {
				return err
			}
			return bk.Put([]byte{byte('a' + i)}, []byte{1})
		}
	}
	var errs [3]error
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = b.do(put(i, i == 1)) }()
	}
	waitFollowers(t, b, 3)
	release()
	wg.Wait()
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], boom) {
		t.Fatalf("errors %v, want nil, boom, nil", errs)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("k"))
		if bk == nil || bk.Get([]byte("a")) == nil || bk.Get([]byte("c")) == nil || bk.Get([]byte("b")) != nil {
			t.Error("want keys a and c committed, b not")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The failing function ran in the batch and once alone; the others ran
	// once or, if they came before it in the batch, twice.
	if runs[1].Load() != 2 || runs[0].Load() < 1 || runs[2].Load() < 1 || runs[0].Load() > 2 || runs[2].Load() > 2 {
		t.Fatalf("runs = %d %d %d", runs[0].Load(), runs[1].Load(), runs[2].Load())
	}
}

// MinBatchDelay above MaxBatchDelay is refused; zero values take the
// defaults, a lone MaxBatchDelay below the default minimum is a fixed
// window.
func TestBatchDelayOptions(t *testing.T) {
	o := Options{Node: "n", MinBatchDelay: 3 * time.Millisecond, MaxBatchDelay: 2 * time.Millisecond}
	if err := o.validate(); err == nil {
		t.Fatal("MinBatchDelay > MaxBatchDelay accepted")
	}
	o = Options{Node: "n"}
	if err := o.validate(); err != nil || o.MinBatchDelay != DefaultMinBatchDelay || o.MaxBatchDelay != DefaultMaxBatchDelay {
		t.Fatalf("defaults: %v %v %v", o.MinBatchDelay, o.MaxBatchDelay, err)
	}
	o = Options{Node: "n", MaxBatchDelay: 500 * time.Microsecond}
	if err := o.validate(); err != nil || o.MinBatchDelay != 500*time.Microsecond {
		t.Fatalf("lone MaxBatchDelay: %v %v", o.MinBatchDelay, err)
	}
	o = Options{Node: "n", MinBatchDelay: 10 * time.Millisecond}
	if err := o.validate(); err != nil || o.MaxBatchDelay != 10*time.Millisecond {
		t.Fatalf("lone MinBatchDelay above the default maximum: %v %v", o.MaxBatchDelay, err)
	}
}

// holdCommit starts a leader whose transaction blocks until the returned
// release is called, so that calls made meanwhile gather as followers.
func holdCommit(t *testing.T, b *batcher) (release func()) {
	t.Helper()
	started, hold := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- b.do(func(*bolt.Tx) error { close(started); <-hold; return nil })
	}()
	<-started
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(hold)
			if err := <-done; err != nil {
				t.Errorf("the held commit: %v", err)
			}
		})
	}
	t.Cleanup(release) // a failed test must not leave the commit held
	return release
}

// waitFollowers waits until n calls have gathered in the next batch.
func waitFollowers(t *testing.T, b *batcher, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b.mu.Lock()
		got := 0
		if b.cur != nil {
			got = len(b.cur.calls)
		}
		b.mu.Unlock()
		if got >= n {
			return
		}
	}
	t.Fatalf("%d calls did not gather behind the running commit", n)
}

// TestLeaderCommitsAtOnce: with nothing committing, an Append does not wait
// for its window (here 10 s): the leader commits alone, at once. Appends
// that gather while a commit runs share one transaction, after their
// window.
func TestLeaderCommitsAtOnce(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := &batcher{db: db, minDelay: 10 * time.Second, maxDelay: 10 * time.Second, maxSize: 64}
	put := func(k string, tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists([]byte("k"))
		if err != nil {
			return err
		}
		return bk.Put([]byte(k), []byte{1})
	}
	start := time.Now()
	if err := b.do(func(tx *bolt.Tx) error { return put("leader", tx) }); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("an Append on an idle batcher took %v: it waited for its window", d)
	}

	// Followers: a batcher with a short window, a commit held open, four
	// Appends gathered behind it.
	b = &batcher{db: db, minDelay: 300 * time.Millisecond, maxDelay: 300 * time.Millisecond, maxSize: 64}
	release := holdCommit(t, b)
	var txs [4]*bolt.Tx
	var wg sync.WaitGroup
	start = time.Now()
	for i := range txs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.do(func(tx *bolt.Tx) error { txs[i] = tx; return put(fmt.Sprint("f", i), tx) }); err != nil {
				t.Error(err)
			}
		}()
	}
	waitFollowers(t, b, len(txs))
	release()
	wg.Wait()
	for i := range txs {
		if txs[i] != txs[0] {
			t.Fatalf("followers committed in separate transactions (%p, %p)", txs[0], txs[i])
		}
	}
}
