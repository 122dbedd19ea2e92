package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"
)

// openRO opens path read-only for the test (closed on cleanup).
func openRO(t *testing.T, path string) *Log {
	t.Helper()
	l, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// allRoots is the stored root at every size 0..n: what anchored
// checkpoints of an intact log would say.
func allRoots(t *testing.T, l *Log, n int64) map[int64]tlog.Hash {
	t.Helper()
	roots := map[int64]tlog.Hash{}
	for s := int64(0); s <= n; s++ {
		h, err := l.TreeHash(s)
		if err != nil {
			t.Fatal(err)
		}
		roots[s] = h
	}
	return roots
}

// verifyRange runs VerifyRange and returns the problems as kind@seq.
func verifyRange(t *testing.T, l *Log, ro RangeOptions) ([]string, Summary) {
	t.Helper()
	var ps []Problem
	sum, err := l.VerifyRange(context.Background(), ro, func(p Problem) { ps = append(ps, p) })
	if err != nil {
		t.Fatalf("VerifyRange(%d..%d): %v", ro.From, ro.To, err)
	}
	if sum.Problems != len(ps) {
		t.Fatalf("Summary.Problems = %d, reported %d", sum.Problems, len(ps))
	}
	return kinds(ps), sum
}

// TestVerifyRangeIntact: every range of an intact log verifies against
// every root, and its summary names the range's last record and the
// stored root there.
func TestVerifyRangeIntact(t *testing.T) {
	l := openRO(t, newTenRecordLog(t))
	roots := allRoots(t, l, 10)
	for from := uint64(1); from <= 10; from++ {
		for to := from; to <= 10; to++ {
			got, sum := verifyRange(t, l, RangeOptions{From: from, To: to, Roots: roots, Chunk: 3})
			if len(got) != 0 {
				t.Fatalf("%d..%d: %v", from, to, got)
			}
			if sum.Records != to-from+1 || sum.HeadSeq != to || sum.TreeSize != int64(to) || sum.TreeRoot != roots[int64(to)] {
				t.Fatalf("%d..%d: summary %+v", from, to, sum)
			}
		}
	}
}

// TestFrontierAt: the frontier read from stored hashes has the stored
// root, at every size (crossing several levels).
func TestFrontierAt(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	appendN(t, l, 70)
	err := l.view(func(tx *bolt.Tx) error {
		r := txHashReader{tx.Bucket(bucketTree)}
		for n := int64(0); n <= 70; n++ {
			f, err := frontierAt(n, r)
			if err != nil {
				return err
			}
			want, err := tlog.TreeHash(n, r)
			if err != nil {
				return err
			}
			if f.root() != want {
				return fmt.Errorf("size %d: frontier root %x, stored %x", n, f.root(), want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestVerifyRangeTamper: an edit inside the range is found and named; an
// edit before it is found at the boundary record, or through the root
// expected where the range starts; an edit after it is not looked at.
func TestVerifyRangeTamper(t *testing.T) {
	flip5 := func(t *testing.T, r, h, m *bolt.Bucket) {
		v := get(r, 5)
		v[len(`{"v":2,"seq":5,"event_id":"`)] ^= 0x01
		put(t, r, 5, v)
	}
	cases := []struct {
		name     string
		tamper   func(t *testing.T, r, h, m *bolt.Bucket)
		from, to uint64
		roots    []int64 // sizes whose intact roots are expected
		want     []string
	}{
		{"flip inside", flip5, 1, 10, nil, []string{"hash_mismatch@5", "tree_mismatch@5", "tree_root_mismatch@10"}},
		{"flip inside, anchored roots", flip5, 1, 10, []int64{4, 5, 8},
			[]string{"checkpoint_mismatch@5", "checkpoint_mismatch@8", "hash_mismatch@5", "tree_mismatch@5", "tree_root_mismatch@10"}},
		{"flip at the boundary", flip5, 6, 10, []int64{5}, []string{"hash_mismatch@5"}},
		{"flip before the range", flip5, 7, 10, []int64{6}, nil},
		{"flip after the range", flip5, 1, 4, []int64{4}, nil},
		{"delete inside", func(t *testing.T, r, h, m *bolt.Bucket) { del(t, r, 7) }, 3, 10, []int64{2, 9},
			[]string{"chain_break@8", "seq_gap@7", "tree_root_mismatch@10"}},
		{"delete the last of the range", func(t *testing.T, r, h, m *bolt.Bucket) { del(t, r, 8) }, 3, 8, nil,
			[]string{"seq_gap@8", "tree_root_mismatch@8"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := newTenRecordLog(t)
			intact := openRO(t, path)
			all := allRoots(t, intact, 10)
			intact.Close()
			tamper(t, path, func(r, h, m *bolt.Bucket) { tc.tamper(t, r, h, m) })
			roots := map[int64]tlog.Hash{}
			for _, s := range tc.roots {
				roots[s] = all[s]
			}
			got, _ := verifyRange(t, openRO(t, path), RangeOptions{From: tc.from, To: tc.to, Roots: roots, Chunk: 2})
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems %v, want %v", got, tc.want)
			}
		})
	}
}

// TestVerifyRangeForkedTree: stored tree hashes rewritten consistently
// before the range (so the stored tree agrees with itself) are caught by
// the root expected where the range starts.
func TestVerifyRangeForkedTree(t *testing.T) {
	path := newTenRecordLog(t)
	intact := openRO(t, path)
	roots := allRoots(t, intact, 10)
	intact.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		// The subtree of leaves 0..3 (level 2, index 0), read by the
		// frontier of size 6.
		return tx.Bucket(bucketTree).Put(treeKey(tlog.StoredHashIndex(2, 0)), make([]byte, 32))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := verifyRange(t, openRO(t, path), RangeOptions{From: 7, To: 8, Roots: map[int64]tlog.Hash{6: roots[6]}})
	// Record 8 completes the subtree of leaves 0..7 from the forged one.
	if want := []string{"checkpoint_mismatch@6", "tree_mismatch@8", "tree_root_mismatch@8"}; !slices.Equal(got, want) {
		t.Errorf("problems %v, want %v", got, want)
	}
}

// TestVerifyRangeNextToTheWriter: the walk runs in short transactions
// while records are appended between them; records past To are not read
// and nothing is reported.
func TestVerifyRangeNextToTheWriter(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	appendN(t, l, 50)
	roots := allRoots(t, l, 50)
	chunks := 0
	pace := func(ctx context.Context, n int) error {
		chunks++
		if n > 7 {
			return fmt.Errorf("chunk of %d records", n)
		}
		_, err := l.Append(ctx, sampleEntry(chunks))
		return err
	}
	got, sum := verifyRange(t, l, RangeOptions{From: 1, To: 50, Roots: roots, Chunk: 7, Pace: pace})
	if len(got) != 0 || sum.Records != 50 || chunks != 8 {
		t.Fatalf("problems %v, summary %+v, %d chunks", got, sum, chunks)
	}
}

func TestVerifyRangeErrors(t *testing.T) {
	l := openRO(t, newTenRecordLog(t))
	ctx := context.Background()
	for _, r := range [][2]uint64{{0, 3}, {4, 3}, {1, 11}} {
		if _, err := l.VerifyRange(ctx, RangeOptions{From: r[0], To: r[1]}, nil); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("%v: %v, want ErrOutOfRange", r, err)
		}
	}
	stop := errors.New("stop")
	if _, err := l.VerifyRange(ctx, RangeOptions{From: 1, To: 10, Chunk: 2, Pace: func(context.Context, int) error { return stop }}, nil); err != stop {
		t.Errorf("Pace error: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.VerifyRange(cctx, RangeOptions{From: 1, To: 10}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	l.Close()
	if _, err := l.VerifyRange(ctx, RangeOptions{From: 1, To: 10}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("closed: %v", err)
	}
}

// BenchmarkVerifyRange: the cost per record of VerifyRange over a
// 20,000-record log (the scrubber's and the startup suffix check's work),
// with an expected root every 1,000 records (serve's checkpoint default).
func BenchmarkVerifyRange(b *testing.B) {
	const n = 20000
	l, _ := mustOpen(b, Options{})
	appendConcurrently(b, l, n)
	roots := map[int64]tlog.Hash{}
	for s := int64(1000); s <= n; s += 1000 {
		h, err := l.TreeHash(s)
		if err != nil {
			b.Fatal(err)
		}
		roots[s] = h
	}
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum, err := l.VerifyRange(context.Background(), RangeOptions{From: 1, To: n, Roots: roots}, nil)
		if err != nil || sum.Problems != 0 || sum.Records != n {
			b.Fatalf("VerifyRange = %+v, %v", sum, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/record")
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
}

// cpuTime is the process's user + system CPU time so far (the machine may
// be shared: wall time alone overstates the cost).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
