package audit

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestMeasureSegments measures, on an audit log written by a server
// (CUSTOS_MEASURE_AUDIT=path, e.g. the audit.db that `go run ./bench/load
// -data DIR` keeps), the bytes per record of that log and of the same
// entries (with their decision inputs) re-appended into a log that rolls
// every CUSTOS_MEASURE_ROLL bytes (default 8 MiB), and the verification
// speed of both (records per second, every segment; three runs). It is the source of
// the capacity table in docs/operations.md; without the variable it runs
// on a small synthetic log of its own.
func TestMeasureSegments(t *testing.T) {
	src := os.Getenv("CUSTOS_MEASURE_AUDIT")
	roll := int64(8 << 20)
	if src == "" {
		// Every test run: the harness on a small synthetic log of its own,
		// rolled every 64 KiB, so that the multi-segment path it measures
		// is exercised (and verified) too.
		src = filepath.Join(t.TempDir(), "source.db")
		writeSyntheticLog(t, src, 2000)
		roll = 64 << 10
	}
	if v := os.Getenv("CUSTOS_MEASURE_ROLL"); v != "" {
		var err error
		if roll, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	in, err := Open(src, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := in.Head()
	inputs := map[uint64][]byte{}
	if err := in.Inputs(ctx, 1, n, func(seq uint64, b []byte) error { inputs[seq] = b; return nil }); err != nil {
		t.Fatal(err)
	}
	var entries []Entry
	var canonBytes int64
	if err := in.Records(ctx, 1, n, func(seq uint64, c []byte) error {
		r, err := Decode(c)
		if err != nil {
			return err
		}
		canonBytes += int64(len(c))
		e := r.Entry
		e.Input = inputs[seq]
		entries = append(entries, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	in.Close()
	// CUSTOS_MEASURE_TIMES=k appends the server's entries k times over,
	// for a log large enough to time its verification.
	if v := os.Getenv("CUSTOS_MEASURE_TIMES"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		one := entries
		for range k - 1 {
			entries = append(entries, one...)
		}
	}
	fi, _ := os.Stat(src)
	t.Logf("source: %d records, %d with a decision input; file %d bytes = %.0f B/record; canonical records alone %.0f B/record",
		n, len(inputs), fi.Size(), float64(fi.Size())/float64(n), float64(canonBytes)/float64(n))
	start := time.Now()
	sum, err := VerifyFile(ctx, src, nil)
	el := time.Since(start)
	if err != nil || sum.Problems != 0 {
		t.Fatalf("verify source: %v, %d problems", err, sum.Problems)
	}
	t.Logf("source: VerifyFile %d records in %s = %.0f records/s", sum.Records, el, float64(sum.Records)/el.Seconds())

	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := Open(path, Options{Node: "measure", RollSize: roll})
	if err != nil {
		t.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(entries)) {
					return
				}
				if _, err := l.Append(ctx, entries[i]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for { // the last roll may still be under way
		if ok, err := l.RollIfDue(ctx); err != nil || !ok {
			break
		}
	}
	segs := len(l.segments())
	l.Close()
	if os.Getenv("CUSTOS_MEASURE_AUDIT") == "" && segs < 2 {
		t.Fatalf("the synthetic log rolled into %d segment(s), want several", segs)
	}
	var total int64
	files := []string{path}
	sealed, _ := filepath.Glob(filepath.Join(SealedDir(path), "*.db"))
	files = append(files, sealed...)
	var used int64
	for _, f := range files {
		fi, _ := os.Stat(f)
		total += fi.Size()
		db, err := bolt.Open(f, 0, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		db.View(func(tx *bolt.Tx) error { used += tx.Size(); return nil })
		db.Close()
	}
	t.Logf("segmented (roll %d bytes): %d records, %d segments, files %d bytes = %.0f B/record (pages in use %.0f B/record)",
		roll, len(entries), segs, total, float64(total)/float64(len(entries)), float64(used)/float64(len(entries)))
	for range 3 {
		start = time.Now()
		sum, err = VerifyFile(ctx, path, nil)
		el = time.Since(start)
		if err != nil || sum.Problems != 0 || sum.Records != uint64(len(entries)) {
			t.Fatalf("verify segmented: %v, %d problems, %d of %d records", err, sum.Problems, sum.Records, len(entries))
		}
		t.Logf("segmented: VerifyFile %d records across %d segments in %s = %.0f records/s", sum.Records, segs, el, float64(sum.Records)/el.Seconds())
	}
}
