package audit

import (
	"fmt"
	"math"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Group commit.
//
// Every Append waits for its record's commit (two fdatasyncs), and one
// commit runs at a time. The batcher is a leader/follower pipeline: an
// Append that finds no commit running and no batch waiting commits at once,
// alone (the leader): an idle server adds no window to a request's latency.
// Appends that arrive while a commit runs gather in the next batch (the
// followers), which commits when the running commit ends or when its window
// is over, whichever is later; a batch that reaches MaxBatchSize is closed
// and queued behind the running commit, and the next one gathers. Batched
// functions follow bbolt's DB.Batch rules (a failing function leaves the
// batch and is run alone by its caller).
//
// The window decides how large batches grow. While the process's goroutines
// get a CPU promptly, it is MinBatchDelay (default 0: the batch gathered
// during a commit commits the moment that commit ends, so its records wait
// at most for the rest of one commit and their own). When the CPU is
// saturated, each commit (page writes, spill, fdatasync) costs CPU that a
// longer window shares among more records, so the window grows to
// MaxBatchDelay, judged by the Go scheduler's latency (runtime/metrics
// /sched/latencies:seconds, the time a runnable goroutine waits to run),
// averaged over the interval since the previous sample (taken at most every
// 20 ms, when a batch starts; an interval over 250 ms starts afresh, and an
// interval without scheduling events counts as idle). A follower batch's
// window starts with its first call. Measured on the 2-core build machine
// (docs/benchmarks.md): ~0.1 ms mean at 8 concurrent readers, ~1 ms at 64.
//
// Invariant: a call's finish runs only after the transaction that ran it
// committed (or failed: then every call of that transaction gets the
// error, or the failing call is rerun alone); no call is in two committed
// transactions. TestGroupCommitMatchesTheLog checks the records returned
// against the records stored.

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

// batcher runs functions in shared read-write transactions, one commit at a
// time (see the top of this file). A batch is gathering (cur: calls join
// it), closed (full: queued behind the running commit), or committing; at
// most one commits.
type batcher struct {
	db       *bolt.DB
	tail     *zeroTail     // db's zero-filled tail (tail.go); nil: none
	copies   *atomic.Int64 // db's segment's copies in progress (segment.copies)
	minDelay time.Duration
	maxDelay time.Duration
	maxSize  int
	sched    schedSampler

	mu         sync.Mutex
	cur        *batchRun   // gathering, or nil
	full       []*batchRun // closed at maxSize, oldest first, waiting for the commit
	committing bool        // a batch is committing (guarded by mu)
	commits    uint64      // commits started (guarded by mu; for tests and figures)
}

type batchRun struct {
	calls []batchCall
	due   time.Time   // the end of its window: it commits at due or when the running commit ends, whichever is later
	timer *time.Timer // wakes the batcher at due while nothing commits
}

type batchCall struct {
	fn     func(*bolt.Tx) error
	finish func(error)
}

// submit queues fn to run in a transaction shared with the other functions
// given within one window, and returns at once. finish is called exactly
// once, by a goroutine of the batcher, with fn's error or the commit's,
// after the transaction that ran fn committed or failed: the caller waits
// for it without a goroutine of its own in between (one scheduling hop from
// the commit to the caller). Like DB.Batch, fn may run more than once:
// after another function of its batch failed, and alone, in a transaction
// of its own, after it failed itself (so that its error is its own).
func (b *batcher) submit(fn func(*bolt.Tx) error, finish func(error)) {
	now := time.Now()
	b.mu.Lock()
	if b.cur == nil {
		r := &batchRun{due: now} // leader: nothing commits or waits, so commit now
		if b.committing || len(b.full) > 0 {
			r.due = now.Add(b.window()) // follower: gathers for its window
		}
		b.cur = r
	}
	b.cur.calls = append(b.cur.calls, batchCall{fn: fn, finish: finish})
	if len(b.cur.calls) >= b.maxSize {
		b.full = append(b.full, b.cur)
		b.cur = nil
	}
	r := b.next(now)
	b.mu.Unlock()
	if r != nil {
		go b.commit(r) // the leader's: its caller may stop waiting (Append's ctx)
	}
}

// do is submit, waiting for fn's outcome.
func (b *batcher) do(fn func(*bolt.Tx) error) error {
	errCh := make(chan error, 1)
	b.submit(fn, func(err error) { errCh <- err })
	return <-errCh
}

// next, with b.mu held, picks the batch to commit now, if nothing commits:
// a full one, else the gathering one once its window is over. It marks the
// batcher committing; the caller must commit the batch it returns. If the
// gathering batch's window is not over, it arms the batch's timer instead.
func (b *batcher) next(now time.Time) *batchRun {
	if b.committing {
		return nil
	}
	var r *batchRun
	switch {
	case len(b.full) > 0:
		r, b.full = b.full[0], b.full[1:]
	case b.cur == nil:
		return nil
	case !now.Before(b.cur.due):
		r, b.cur = b.cur, nil
	default:
		if b.cur.timer == nil {
			b.cur.timer = time.AfterFunc(b.cur.due.Sub(now), b.wake)
		}
		return nil
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	b.committing = true
	b.commits++
	return r
}

// wake is a gathering batch's timer: its window is over.
func (b *batcher) wake() {
	b.mu.Lock()
	r := b.next(time.Now())
	b.mu.Unlock()
	if r != nil {
		b.commit(r)
	}
}

// window is the wait of a batch started now while a commit runs.
func (b *batcher) window() time.Duration {
	if b.maxDelay <= b.minDelay {
		return b.minDelay
	}
	return window(b.minDelay, b.maxDelay, b.sched.current(time.Now()))
}

// commit commits r, delivers every call's result, then hands the batcher
// on: the batch that gathered meanwhile commits at once, in this goroutine
// (always one of the batcher's: the leader's, a timer's), if its window is
// over (the pipeline), or later when its timer fires.
func (b *batcher) commit(r *batchRun) {
	for r != nil {
		// b.db and b.tail are read while r's records hold the segment
		// (Append's segMu): a roll switches them only when none is held.
		db, tail, copies := b.db, b.tail, b.copies
		hwm := b.commitOne(db, copies, r)
		tail.extend(db, hwm) // after the callers have their results
		b.mu.Lock()
		b.committing = false
		r = b.next(time.Now())
		b.mu.Unlock()
	}
}

// commitOne runs r's calls in one transaction of db and calls their
// finish. It returns the file's high-water mark when that transaction
// began. The transaction leaves out bbolt's freelist while copies says a
// backup copies db (copyLive).
func (b *batcher) commitOne(db *bolt.DB, copies *atomic.Int64, r *batchRun) (hwm int64) {
	calls := r.calls
	for len(calls) > 0 {
		failed := -1
		err := db.Update(func(tx *bolt.Tx) error {
			hwm = tx.Size()
			// Read by Commit under the writer's lock, which this holds.
			db.NoFreelistSync = copies != nil && copies.Load() > 0
			for i, c := range calls {
				if err := callSafely(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			// Out of the batch, to be run alone, beside the batcher; the
			// rest runs again in a new transaction.
			c := calls[failed]
			calls[failed], calls = calls[len(calls)-1], calls[:len(calls)-1]
			go func() { c.finish(db.Update(c.fn)) }()
			continue
		}
		for _, c := range calls {
			c.finish(err) // success, or bbolt's own commit error, to everyone
		}
		return hwm
	}
	return hwm
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
