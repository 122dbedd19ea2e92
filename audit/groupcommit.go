package audit

import (
	"errors"
	"fmt"
	"math"
	"runtime/metrics"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Group commit.
//
// Every Append waits for its record's commit (two fdatasyncs). An Append
// that finds no commit running and no batch gathering commits at once,
// alone (the leader): an idle server adds no window to a request's latency.
// Appends that arrive while a commit runs gather in the next batch, which
// waits for its window. Appends that gather share one commit: the batcher
// below is
// bbolt's DB.Batch (same retry rules) with a window chosen per batch
// instead of fixed. On an idle server the window is pure waiting, added to
// every request's latency; on a server whose CPU is saturated, each commit
// (page writes, spill, fdatasync) costs CPU that a longer window shares
// among more records. The batcher therefore waits MinBatchDelay while the
// process's goroutines get a CPU promptly and up to MaxBatchDelay when they
// queue for one, judged by the Go scheduler's latency (runtime/metrics
// /sched/latencies:seconds, the time a runnable goroutine waits to run),
// averaged over the interval since the previous sample (taken at most every
// 20 ms, when a batch starts; an interval over 250 ms starts afresh, and an
// interval without scheduling events counts as idle). Measured on the 2-core build machine
// (docs/benchmarks.md): ~0.1 ms mean at 8 concurrent readers, ~1 ms at 64.

// Scheduler latencies (mean over a sampling interval) at and below which
// the window is MinBatchDelay, and at and above which it is MaxBatchDelay;
// linear in between.
const (
	idleSchedLatency      = 200 * time.Microsecond
	saturatedSchedLatency = 800 * time.Microsecond
	schedSampleInterval   = 20 * time.Millisecond
	// An interval longer than this (no batch for a while) says nothing
	// about now: the sample after it starts afresh.
	schedSampleStale = 250 * time.Millisecond
)

// window maps a mean scheduler latency to a group-commit window in
// [lo, hi]. It is pure.
func window(lo, hi, sched time.Duration) time.Duration {
	switch {
	case hi <= lo || sched <= idleSchedLatency:
		return lo
	case sched >= saturatedSchedLatency:
		return hi
	}
	f := float64(sched-idleSchedLatency) / float64(saturatedSchedLatency-idleSchedLatency)
	return lo + time.Duration(f*float64(hi-lo))
}

// schedSampler keeps the mean scheduler latency of the last sampling
// interval. Reads are rate-limited to one per schedSampleInterval.
type schedSampler struct {
	mu          sync.Mutex
	sample      []metrics.Sample
	prev        []uint64
	at          time.Time
	mean        time.Duration
	unsupported bool // the runtime has no such metric: behave as idle
}

const schedMetric = "/sched/latencies:seconds"

// current returns the latest mean, refreshing it if the interval passed.
func (s *schedSampler) current(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unsupported || (!s.at.IsZero() && now.Sub(s.at) < schedSampleInterval) {
		return s.mean
	}
	if s.sample == nil {
		s.sample = []metrics.Sample{{Name: schedMetric}}
	}
	metrics.Read(s.sample)
	if s.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		s.unsupported, s.mean = true, 0
		return 0
	}
	h := s.sample[0].Value.Float64Histogram()
	// Only a recent interval says anything about now: after a quiet spell
	// (no batch for a while) start a fresh interval rather than average
	// over the whole spell; an interval without scheduling events is idle.
	fresh := !s.at.IsZero() && now.Sub(s.at) <= schedSampleStale
	s.mean = 0
	if fresh && len(s.prev) == len(h.Counts) {
		var n uint64
		var sum float64
		for i, c := range h.Counts {
			lo, hi := h.Buckets[i], h.Buckets[i+1]
			if math.IsInf(lo, 0) || math.IsInf(hi, 0) {
				continue
			}
			d := c - s.prev[i]
			n += d
			sum += float64(d) * (lo + hi) / 2
		}
		if n > 0 {
			s.mean = time.Duration(sum / float64(n) * float64(time.Second))
		}
	}
	s.prev = append(s.prev[:0], h.Counts...)
	s.at = now
	return s.mean
}

// errTrySolo tells a caller that its function failed inside a batch and
// must be run again alone, so that its error is its own.
var errTrySolo = errors.New("audit: batch function failed; run it alone")

// batcher runs functions in shared read-write transactions (bbolt's
// DB.Batch with a window per batch, see above).
type batcher struct {
	db       *bolt.DB
	minDelay time.Duration
	maxDelay time.Duration
	maxSize  int
	sched    schedSampler

	mu       sync.Mutex
	cur      *batchRun
	inflight int // batches started and not yet committed (guarded by mu)
}

type batchRun struct {
	b     *batcher
	timer *time.Timer
	start sync.Once
	calls []batchCall
}

type batchCall struct {
	fn  func(*bolt.Tx) error
	err chan<- error
}

// do runs fn in a transaction shared with the other functions given within
// one window, and returns fn's error or the commit's. Like DB.Batch, fn may
// run more than once: after another function of its batch failed, and
// alone after it failed itself.
func (b *batcher) do(fn func(*bolt.Tx) error) error {
	errCh := make(chan error, 1)
	b.mu.Lock()
	var lead *batchRun
	if b.cur == nil || len(b.cur.calls) >= b.maxSize {
		r := &batchRun{b: b}
		if b.inflight == 0 {
			lead = r // leader: nothing is committing, so commit now
		} else {
			r.timer = time.AfterFunc(b.window(), r.trigger)
		}
		b.cur = r
	}
	b.cur.calls = append(b.cur.calls, batchCall{fn: fn, err: errCh})
	if len(b.cur.calls) >= b.maxSize {
		go b.cur.trigger()
	}
	b.mu.Unlock()
	if lead != nil {
		lead.trigger() // in this goroutine: its result is already in errCh after
	}
	err := <-errCh
	if err == errTrySolo {
		err = b.db.Update(fn)
	}
	return err
}

// window is the wait of a batch started now.
func (b *batcher) window() time.Duration {
	if b.maxDelay <= b.minDelay {
		return b.minDelay
	}
	return window(b.minDelay, b.maxDelay, b.sched.current(time.Now()))
}

func (r *batchRun) trigger() { r.start.Do(r.run) }

func (r *batchRun) run() {
	r.b.mu.Lock()
	if r.timer != nil {
		r.timer.Stop()
	}
	if r.b.cur == r {
		r.b.cur = nil // no call joins this batch any more
	}
	r.b.inflight++
	r.b.mu.Unlock()
	defer r.b.committed()
	for len(r.calls) > 0 {
		failed := -1
		err := r.b.db.Update(func(tx *bolt.Tx) error {
			for i, c := range r.calls {
				if err := callSafely(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			// Out of the batch, to be run alone by its caller; the rest
			// runs again in a new transaction.
			c := r.calls[failed]
			r.calls[failed], r.calls = r.calls[len(r.calls)-1], r.calls[:len(r.calls)-1]
			c.err <- errTrySolo
			continue
		}
		for _, c := range r.calls {
			c.err <- err // success, or bbolt's own commit error, to everyone
		}
		return
	}
}

// committed ends a batch. The batch that gathered meanwhile keeps its
// window: starting it at once would make batches smaller when the CPU is
// saturated, and each commit costs CPU (measured: 64 clients lost a fifth
// of their throughput that way, docs/benchmarks.md).
func (b *batcher) committed() {
	b.mu.Lock()
	b.inflight--
	b.mu.Unlock()
}

// callSafely runs fn, turning a panic into an error (the transaction is
// then rolled back and fn's caller retries it alone).
func callSafely(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("audit: append panicked: %v", p)
		}
	}()
	return fn(tx)
}
