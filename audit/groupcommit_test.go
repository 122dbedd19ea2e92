package audit

import (
	"bytes"
	"context"
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
// defaults (a lone MaxBatchDelay keeps the default minimum, 0: a batch
// gathered during a commit then commits when it ends while the CPU is idle);
// a lone MinBatchDelay above the default maximum is a fixed window.
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
	if err := o.validate(); err != nil || o.MinBatchDelay != 0 {
		t.Fatalf("lone MaxBatchDelay: MinBatchDelay %v %v, want 0 (the default)", o.MinBatchDelay, err)
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
	start := time.Now()
	if err := b.do(func(tx *bolt.Tx) error { return putKey(tx, "leader") }); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("an Append on an idle batcher took %v: it waited for its window", d)
	}

	// Followers: a batcher with a short window, a commit held open, four
	// Appends gathered behind it.
	b = &batcher{db: db, minDelay: 300 * time.Millisecond, maxDelay: 300 * time.Millisecond, maxSize: 64}
	gatherBehindACommit(t, b, 4)
}

// gatherBehindACommit holds a commit of b open, makes n calls, waits until
// they gathered behind it, releases it and fails t unless the n calls
// committed in one transaction.
func gatherBehindACommit(t *testing.T, b *batcher, n int) {
	t.Helper()
	release := holdCommit(t, b)
	txs := make([]*bolt.Tx, n)
	var wg sync.WaitGroup
	for i := range txs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.do(func(tx *bolt.Tx) error { txs[i] = tx; return putKey(tx, fmt.Sprint("f", i)) }); err != nil {
				t.Error(err)
			}
		}()
	}
	waitFollowers(t, b, n)
	release()
	wg.Wait()
	for i := range txs {
		if txs[i] != txs[0] {
			t.Fatalf("calls gathered during a commit committed in separate transactions (%p, %p)", txs[0], txs[i])
		}
	}
}

// TestPipelineCommitsTheGatheredBatchWhenTheCommitEnds: with a zero window
// (an idle CPU), the calls that arrive during a commit gather in one batch
// that commits, in one transaction, as soon as that commit ends. A batcher
// that started each of them on its own zero timer would commit them in
// separate transactions, each queued behind the last.
//
//custos:race
func TestPipelineCommitsTheGatheredBatchWhenTheCommitEnds(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := &batcher{db: db, maxSize: 64} // window 0
	gatherBehindACommit(t, b, 4)
	// The committer hands the batcher on (committing false) just after it
	// told the calls their outcome: wait for that, not for the calls.
	var commits uint64
	var committing, gathering bool
	var full int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		commits, committing, gathering, full = b.commits, b.committing, b.cur != nil, len(b.full)
		b.mu.Unlock()
		if !committing || time.Now().After(deadline) {
			break
		}
	}
	if commits != 2 || committing || gathering || full != 0 {
		t.Fatalf("after the held commit and one gathered batch: commits %d, committing %v, gathering %v, full %d; want 2, false, false, 0",
			commits, committing, gathering, full)
	}
}

// TestPipelineKeepsTheWindow: a batch gathered during a commit that ends
// before the batch's window is over waits for the rest of its window (the
// CPU-saturated case, where a longer window shares each commit's cost).
//
//custos:race
func TestPipelineKeepsTheWindow(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const win = 300 * time.Millisecond
	b := &batcher{db: db, minDelay: win, maxDelay: win, maxSize: 64}
	release := holdCommit(t, b)
	start := time.Now()
	done := make(chan time.Duration, 1)
	go func() {
		err := b.do(func(tx *bolt.Tx) error { return putKey(tx, "f") })
		if err != nil {
			t.Error(err)
		}
		done <- time.Since(start)
	}()
	waitFollowers(t, b, 1)
	release() // well within the window
	if d := <-done; d < win {
		t.Fatalf("a follower committed after %v, before its %v window was over", d, win)
	}
}

// TestPipelineQueuesFullBatches: calls beyond MaxBatchSize that arrive
// during a commit form further batches, committed one after the other,
// none larger than MaxBatchSize, every call exactly once.
//
//custos:race
func TestPipelineQueuesFullBatches(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := &batcher{db: db, maxSize: 2}
	release := holdCommit(t, b)
	const n = 5
	var mu sync.Mutex
	perTx := map[*bolt.Tx]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.do(func(tx *bolt.Tx) error {
				mu.Lock()
				perTx[tx]++
				mu.Unlock()
				return putKey(tx, fmt.Sprint("f", i))
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	// Two full batches queued and one gathering.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		full, gathering := len(b.full), b.cur != nil
		b.mu.Unlock()
		if full == 2 && gathering {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queued full batches %d, gathering %v; want 2, true", full, gathering)
		}
	}
	release()
	wg.Wait()
	total := 0
	for _, c := range perTx {
		if c > 2 {
			t.Errorf("a transaction ran %d calls, MaxBatchSize is 2", c)
		}
		total += c
	}
	if total != n || len(perTx) != 3 {
		t.Fatalf("%d calls in %d transactions, want %d in 3", total, len(perTx), n)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		if got := tx.Bucket([]byte("k")).Stats().KeyN; got != n {
			t.Errorf("%d keys committed, want %d", got, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommitMatchesTheLog: many concurrent Appends through the group
// commit (zero window, small batches, so that batches queue and the
// pipeline hands over often) each return exactly the record the log
// stores at its seq, seqs are dense and the log verifies. The fast path
// (a shared transaction) and the plain one (reading the log) agree.
//
//custos:race
func TestGroupCommitMatchesTheLog(t *testing.T) {
	l, _ := mustOpen(t, Options{MinBatchDelay: 0, MaxBatchDelay: 0, MaxBatchSize: 3})
	const writers, each = 16, 20
	recs := make(chan Record, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r, err := l.Append(context.Background(), sampleEntry(w*each+i))
				if err != nil {
					t.Error(err)
					return
				}
				recs <- r
			}
		}()
	}
	wg.Wait()
	close(recs)
	got := map[uint64]Record{}
	for r := range recs {
		if _, dup := got[r.Seq]; dup {
			t.Fatalf("seq %d returned twice", r.Seq)
		}
		got[r.Seq] = r
	}
	if len(got) != writers*each {
		t.Fatalf("%d records returned, want %d", len(got), writers*each)
	}
	err := l.Records(context.Background(), 1, writers*each, func(seq uint64, canonical []byte) error {
		stored, err := Decode(canonical)
		if err != nil {
			return err
		}
		r, ok := got[seq]
		if !ok {
			return fmt.Errorf("seq %d stored but returned to no caller", seq)
		}
		r.Input = nil // stored aside, not in the canonical record
		if !bytes.Equal(Encode(r), canonical) || r.Hash != stored.Hash {
			return fmt.Errorf("seq %d: the record returned to its caller is not the one stored", seq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func putKey(tx *bolt.Tx, k string) error {
	bk, err := tx.CreateBucketIfNotExists([]byte("k"))
	if err != nil {
		return err
	}
	return bk.Put([]byte(k), []byte{1})
}

// TestAbandonedAppendStillCommits: a caller whose ctx ends while its record
// waits behind a commit gets ctx's error at once; the record still commits
// with its batch, and Close waits for that commit.
//
//custos:race
func TestAbandonedAppendStillCommits(t *testing.T) {
	l, path := mustOpen(t, Options{})
	release := holdCommit(t, l.commits)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := l.Append(ctx, sampleEntry(1))
		errc <- err
	}()
	waitFollowers(t, l.commits, 1)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("abandoned Append = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Append did not return when its ctx ended")
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an abandoned record was still waiting for its commit", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if sum := mustVerify(t, path); sum.Records != 1 {
		t.Fatalf("%d records after the abandoned Append, want 1 (it commits all the same)", sum.Records)
	}
}
