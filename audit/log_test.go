package audit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAppendAssignsChain(t *testing.T) {
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	l, _ := mustOpen(t, Options{Node: "n1", Now: stepClock(start, time.Millisecond)})
	if seq, hash := l.Head(); seq != 0 || hash != ZeroHash {
		t.Fatalf("empty Head = %d %s", seq, hash)
	}
	recs := appendN(t, l, 5)
	prev := ZeroHash
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Errorf("record %d: Seq = %d", i, r.Seq)
		}
		if r.PrevHash != prev {
			t.Errorf("record %d: PrevHash = %s, want %s", i, r.PrevHash, prev)
		}
		if r.Hash != HashRecord(Encode(r)) {
			t.Errorf("record %d: Hash is not HashRecord(Encode(r))", i)
		}
		if r.Node != "n1" || r.EventID == "" || r.Time.Location() != time.UTC {
			t.Errorf("record %d: Node %q EventID %q loc %v", i, r.Node, r.EventID, r.Time.Location())
		}
		prev = r.Hash
	}
	if seq, hash := l.Head(); seq != 5 || hash != recs[4].Hash {
		t.Fatalf("Head = %d %s, want 5 %s", seq, hash, recs[4].Hash)
	}
}

// TestAppendWritesV2 checks that Append writes format version 2 with the
// caller's Keys sorted, leaves the caller's slice alone, and stores exactly
// the bytes of the Record it returns.
func TestAppendWritesV2(t *testing.T) {
	l, path := mustOpen(t, Options{})
	cases := []struct {
		name string
		keys []string
		want []string
	}{
		{"unsorted vault keys", []string{"cursor=secret/custos/cursor-key@3", "blob-kek=transit/custos-blob-kek@1", "audit-hmac=secret/custos/audit-hmac-key@2"},
			[]string{"audit-hmac=secret/custos/audit-hmac-key@2", "blob-kek=transit/custos-blob-kek@1", "cursor=secret/custos/cursor-key@3"}},
		{"dev keys", []string{"cursor=dev:ephemeral"}, []string{"cursor=dev:ephemeral"}},
		{"no keys", nil, nil},
		{"empty keys", []string{}, nil},
		{"byte order", []string{"b", "B", "a=é", "a=z"}, []string{"B", "a=z", "a=é", "b"}},
	}
	var recs []Record
	for _, c := range cases {
		e := sampleEntry(1)
		e.Keys = slices.Clone(c.keys)
		r, err := l.Append(context.Background(), e)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.V != FormatVersion || FormatVersion != 2 {
			t.Errorf("%s: V = %d", c.name, r.V)
		}
		if len(r.Keys) != len(c.want) || (len(c.want) > 0 && !slices.Equal(r.Keys, c.want)) {
			t.Errorf("%s: Keys = %q, want %q", c.name, r.Keys, c.want)
		}
		if !slices.Equal(e.Keys, c.keys) {
			t.Errorf("%s: Append reordered the caller's Keys: %q", c.name, e.Keys)
		}
		recs = append(recs, r)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var buf bytesBuffer
	if _, err := ExportFile(context.Background(), path, &buf, FormatJSONL, Filter{}); err != nil {
		t.Fatal(err)
	}
	lines := buf.lines()
	if len(lines) != len(cases) {
		t.Fatalf("%d records stored, want %d", len(lines), len(cases))
	}
	for i, line := range lines {
		if !bytes.Equal(line, Encode(recs[i])) {
			t.Errorf("%s: stored %s\nreturned record encodes to %s", cases[i].name, line, Encode(recs[i]))
		}
		if !bytes.HasPrefix(line, []byte(`{"v":2,`)) || !bytes.Contains(line, []byte(`,"keys":[`)) {
			t.Errorf("%s: stored record is not v2: %s", cases[i].name, line)
		}
		got, err := Decode(line)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Keys, cases[i].want) {
			t.Errorf("%s: decoded Keys = %q, want %q", cases[i].name, got.Keys, cases[i].want)
		}
	}
}

func TestAppendCopiesEntry(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	e := sampleEntry(1)
	r, err := l.Append(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	e.URIs[0] = "changed"
	e.Keys[0] = "changed"
	if r.URIs[0] == "changed" || slices.Contains(r.Keys, "changed") {
		t.Fatal("Record shares the caller's slice")
	}
}

func TestAppendRejectsBadEntry(t *testing.T) {
	l, path := mustOpen(t, Options{})
	bad := func(f func(*Entry)) Entry { e := sampleEntry(1); f(&e); return e }
	cases := []struct {
		name string
		e    Entry
	}{
		{"empty action", bad(func(e *Entry) { e.Action = "" })},
		{"empty outcome", bad(func(e *Entry) { e.Outcome = "" })},
		{"unknown outcome", bad(func(e *Entry) { e.Outcome = "maybe" })},
		{"invalid utf8 string", bad(func(e *Entry) { e.Principal.Sub = "\xff" })},
		{"invalid utf8 list", bad(func(e *Entry) { e.Patients = []string{"ok", "\xc3"} })},
		{"empty key", bad(func(e *Entry) { e.Keys = []string{"cursor=dev:ephemeral", ""} })},
		{"invalid utf8 key", bad(func(e *Entry) { e.Keys = []string{"cursor=secret/custos/\xffkey@3"} })},
		{"duplicate key", bad(func(e *Entry) {
			e.Keys = []string{"cursor=dev:ephemeral", "blob-kek=dev:ephemeral", "cursor=dev:ephemeral"}
		})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := l.Append(context.Background(), c.e)
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("Append = %v, want ErrBadEntry", err)
			}
		})
	}
	if seq, _ := l.Head(); seq != 0 {
		t.Fatalf("bad entries were written: head %d", seq)
	}
	_ = path
}

func TestAppendCanceledContext(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, sampleEntry(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append = %v, want context.Canceled", err)
	}
	if seq, _ := l.Head(); seq != 0 {
		t.Fatalf("head = %d after canceled Append", seq)
	}
}

func TestAppendAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := Open(path, Options{Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), sampleEntry(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if _, err := l.Verify(context.Background(), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Verify after Close = %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	mustVerify(t, path)
}

func TestOpenOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	if _, err := Open(path, Options{}); err == nil {
		t.Fatal("Open without Node succeeded")
	}
	if _, err := Open(path, Options{Node: "n", Timeout: -1}); err == nil {
		t.Fatal("Open with negative Timeout succeeded")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("invalid options created the file: %v", err)
	}
}

func TestFileMode(t *testing.T) {
	_, path := mustOpen(t, Options{})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		t.Fatalf("audit log mode %v, want 0600", perm)
	}
}

func TestTimeNeverRegresses(t *testing.T) {
	base := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	times := []time.Time{base, base.Add(time.Second), base.Add(-time.Hour), base.Add(2 * time.Second)}
	var i atomic.Int32
	now := func() time.Time { return times[int(i.Add(1)-1)%len(times)].In(time.FixedZone("X", 3600)) }
	l, _ := mustOpen(t, Options{Now: now})
	recs := appendN(t, l, 4)
	want := []time.Time{base, base.Add(time.Second), base.Add(time.Second), base.Add(2 * time.Second)}
	for i, r := range recs {
		if !r.Time.Equal(want[i]) || r.Time.Location() != time.UTC {
			t.Errorf("record %d time %v, want %v UTC", i+1, r.Time, want[i])
		}
	}
}

func TestAppendFailsClosedOnBadClock(t *testing.T) {
	var bad atomic.Bool
	now := func() time.Time {
		if bad.Load() {
			return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return time.Now()
	}
	l, _ := mustOpen(t, Options{Now: now})
	appendN(t, l, 2)
	bad.Store(true)
	if _, err := l.Append(context.Background(), sampleEntry(3)); err == nil {
		t.Fatal("Append with an unencodable time succeeded")
	}
	bad.Store(false)
	r, err := l.Append(context.Background(), sampleEntry(4))
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != 3 {
		t.Fatalf("after a failed append, Seq = %d, want 3 (no gap)", r.Seq)
	}
}

func TestReopenContinuesChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := Open(path, Options{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	first := appendN(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpenPath(t, path, Options{Node: "n2"})
	if seq, hash := l2.Head(); seq != 3 || hash != first[2].Hash {
		t.Fatalf("reopened Head = %d %s, want 3 %s", seq, hash, first[2].Hash)
	}
	more := appendN(t, l2, 2)
	if more[0].Seq != 4 || more[0].PrevHash != first[2].Hash || more[0].Node != "n2" {
		t.Fatalf("chain did not continue: %+v", more[0])
	}
	if more[0].Time.Before(first[2].Time) {
		t.Fatal("time regressed across reopen")
	}
}

func TestOpenLocked(t *testing.T) {
	l, path := mustOpen(t, Options{})
	_ = l
	start := time.Now()
	_, err := Open(path, Options{Node: "other", Timeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("ErrLocked after %v, Timeout was 100ms", d) // generous: only catches "waits forever"
	}
	if _, err := VerifyFile(context.Background(), path, nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("VerifyFile on a locked log = %v, want ErrLocked", err)
	}
}

func TestLogVerifyWhileOpen(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	appendN(t, l, 10)
	sum, err := l.Verify(context.Background(), func(p Problem) { t.Errorf("problem: %s", p) })
	if err != nil || sum.Records != 10 || sum.HeadSeq != 10 || sum.Problems != 0 {
		t.Fatalf("Verify = %+v, %v", sum, err)
	}
}

func TestOpenNotAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	if err := os.WriteFile(path, []byte("not a bbolt file at all, just text that is long enough......"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{Node: "n"}); err == nil {
		t.Fatal("Open of a non-bbolt file succeeded")
	}
	if _, err := VerifyFile(context.Background(), filepath.Join(t.TempDir(), "missing.db"), nil); err == nil {
		t.Fatal("VerifyFile of a missing file succeeded")
	}
}

// TestConcurrentAppend: 64 writers; seqs are gapless and unique, every
// returned record is the stored one, and the chain verifies (mustOpen's
// cleanup). Run under -race.
func TestConcurrentAppend(t *testing.T) {
	const writers, per = 64, 15
	l, path := mustOpen(t, Options{})
	seen := make([]atomic.Int32, writers*per+1)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				r, err := l.Append(context.Background(), sampleEntry(w*per+i))
				if err != nil {
					errs <- err
					return
				}
				if r.Seq == 0 || r.Seq > uint64(writers*per) {
					errs <- errors.New("seq out of range")
					return
				}
				seen[r.Seq].Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for seq := 1; seq <= writers*per; seq++ {
		if n := seen[seq].Load(); n != 1 {
			t.Errorf("seq %d returned %d times", seq, n)
		}
	}
	if seq, _ := l.Head(); seq != writers*per {
		t.Fatalf("Head = %d, want %d", seq, writers*per)
	}
	_ = path
}

// TestConcurrentAppendWithRetries makes some append functions fail inside the
// batch (the clock returns an unencodable time now and then), which makes
// bbolt rerun the rest of the batch and the failing function alone. Every
// Append that succeeded must be in the log exactly once, with no gaps.
func TestConcurrentAppendWithRetries(t *testing.T) {
	const writers, per = 32, 10
	var calls atomic.Int64
	now := func() time.Time {
		if calls.Add(1)%7 == 0 {
			return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return time.Now()
	}
	l, path := mustOpen(t, Options{Now: now})
	var ok, failed atomic.Int64
	var mu sync.Mutex
	ids := map[string]uint64{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				r, err := l.Append(context.Background(), sampleEntry(i))
				if err != nil {
					failed.Add(1)
					continue
				}
				ok.Add(1)
				mu.Lock()
				ids[r.EventID] = r.Seq
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	seq, _ := l.Head()
	if seq != uint64(ok.Load()) {
		t.Fatalf("head %d, but %d appends succeeded (%d failed)", seq, ok.Load(), failed.Load())
	}
	t.Logf("%d ok, %d failed, %d clock calls", ok.Load(), failed.Load(), calls.Load())
	if failed.Load() == 0 && calls.Load() <= writers*per {
		t.Fatal("no append function failed or was rerun: the test exercised nothing")
	}
	// Every successful record is stored with the seq Append reported.
	var buf bytesBuffer
	if _, err := l.Export(context.Background(), &buf, FormatJSONL, Filter{}); err != nil {
		t.Fatal(err)
	}
	stored := map[string]uint64{}
	for _, line := range buf.lines() {
		r, err := Decode(line)
		if err != nil {
			t.Fatal(err)
		}
		stored[r.EventID] = r.Seq
	}
	if len(stored) != len(ids) {
		t.Fatalf("%d records stored, %d appends succeeded", len(stored), len(ids))
	}
	for id, seq := range ids {
		if stored[id] != seq {
			t.Errorf("event %s: Append said seq %d, stored at %d", id, seq, stored[id])
		}
	}
	_ = path
}
