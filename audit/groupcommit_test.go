package audit

import (
	"errors"
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
	// A long fixed window, so that the three calls share one batch.
	b := &batcher{db: db, minDelay: 200 * time.Millisecond, maxDelay: 200 * time.Millisecond, maxSize: 3}
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
