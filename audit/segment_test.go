package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// rollOrFail seals the live segment and fails t unless it did.
func rollOrFail(t testing.TB, l *Log) {
	t.Helper()
	ok, err := l.Roll(context.Background())
	if err != nil || !ok {
		t.Fatalf("Roll = %v, %v", ok, err)
	}
}

// segmentedLog writes a log of len(sizes) segments, sizes[i] records in
// segment i+1 (the last one live), and returns it open with its path.
func segmentedLog(t *testing.T, opts Options, sizes ...int) (*Log, string) {
	t.Helper()
	l, path := mustOpen(t, opts)
	for i, n := range sizes {
		appendN(t, l, n)
		if i < len(sizes)-1 {
			rollOrFail(t, l)
		}
	}
	return l, path
}

// writeSegmented writes a log of len(sizes) segments into a fresh
// directory, closes it and returns its path: for tests that then damage it
// (no verification on cleanup).
func writeSegmented(t *testing.T, sizes ...int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := Open(path, Options{Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		appendN(t, l, n)
		if i < len(sizes)-1 {
			rollOrFail(t, l)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// memTree recomputes the Merkle tree of canonical records independently
// of the log's storage: tlog.StoredHashes into a map.
type memTree map[int64]tlog.Hash

func (m memTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		h, ok := m[x]
		if !ok {
			return nil, fmt.Errorf("index %d missing", x)
		}
		out[i] = h
	}
	return out, nil
}

func (m memTree) add(t testing.TB, n int64, canon []byte) {
	hs, err := tlog.StoredHashes(n, canon, m)
	if err != nil {
		t.Fatal(err)
	}
	for j, h := range hs {
		m[tlog.StoredHashIndex(0, n)+int64(j)] = h
	}
}

// TestSegmentsContinueChainAndTree writes four segments (three sealed) and
// checks that seq, chain and Merkle tree are one across them: the tree
// root is the root of every record recomputed independently; every
// record's inclusion proof and the consistency proofs between the seals'
// trees check; Records, Export and VerifyRange span the segments; each
// sealed segment verifies alone; sealed files are read-only.
func TestSegmentsContinueChainAndTree(t *testing.T) {
	ctx := context.Background()
	l, path := segmentedLog(t, Options{}, 5, 8, 1, 6) // sealed 1..5, 6..13, 14..14; live 15..20
	segs := l.segments()
	if len(segs) != 4 {
		t.Fatalf("%d segments, want 4", len(segs))
	}
	size, root, err := l.TreeHead(ctx)
	if err != nil || size != 20 {
		t.Fatalf("TreeHead = %d, %v", size, err)
	}
	mt := memTree{}
	prev := ZeroHash
	var canons [][]byte
	if err := l.Records(ctx, 1, 20, func(seq uint64, c []byte) error {
		r, err := Decode(c)
		if err != nil {
			return err
		}
		if r.Seq != seq || r.PrevHash != prev {
			return fmt.Errorf("record %d: seq %d prev %s, want prev %s", seq, r.Seq, r.PrevHash, prev)
		}
		prev = r.Hash
		mt.add(t, int64(seq)-1, c)
		canons = append(canons, bytes.Clone(c))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want, err := tlog.TreeHash(20, mt)
	if err != nil || want != root {
		t.Fatalf("tree root %x, recomputed %x (%v)", root, want, err)
	}
	for seq := uint64(1); seq <= 20; seq++ {
		p, err := l.ProveRecord(seq, 20)
		if err != nil {
			t.Fatalf("ProveRecord(%d): %v", seq, err)
		}
		if err := tlog.CheckRecord(p, 20, root, int64(seq)-1, LeafHash(canons[seq-1])); err != nil {
			t.Errorf("inclusion of %d: %v", seq, err)
		}
	}
	// The seals' trees are prefixes of one another and of the head.
	var seals []Seal
	for _, s := range segs[:3] {
		seals = append(seals, *s.seal.Load())
		if fi, err := os.Stat(s.path); err != nil || fi.Mode().Perm() != 0o400 {
			t.Errorf("sealed %s: mode %v, %v", filepath.Base(s.path), fi.Mode().Perm(), err)
		}
		text, err := os.ReadFile(sealNotePath(s.path))
		if err != nil {
			t.Fatalf("seal note: %v", err)
		}
		if got, err := ParseSeal(text, nil); err != nil || got != *s.seal.Load() {
			t.Errorf("seal note of %d = %+v, %v", s.no, got, err)
		}
	}
	sizes := []int64{5, 13, 14, 20}
	roots := []tlog.Hash{seals[0].Root, seals[1].Root, seals[2].Root, root}
	for i := 0; i+1 < len(sizes); i++ {
		if seals[i].Last != uint64(sizes[i]) || (i > 0 && seals[i].PrevHash != seals[i-1].HeadHash) || (i > 0 && seals[i].PrevRoot != seals[i-1].Root) {
			t.Errorf("seal %d does not link: %+v", i+1, seals[i])
		}
		p, err := l.ProveTree(sizes[i], sizes[i+1])
		if err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckTree(p, sizes[i+1], roots[i+1], sizes[i], roots[i]); err != nil {
			t.Errorf("consistency %d -> %d: %v", sizes[i], sizes[i+1], err)
		}
	}
	var out bytesBuffer
	if n, err := l.Export(ctx, &out, FormatJSONL, Filter{}); err != nil || n != 20 {
		t.Fatalf("Export = %d, %v", n, err)
	}
	for i, line := range out.lines() {
		if !bytes.Equal(line, canons[i]) {
			t.Errorf("export line %d differs from record %d", i+1, i+1)
		}
	}
	sum, err := l.VerifyRange(ctx, RangeOptions{From: 3, To: 17, Chunk: 2, Roots: map[int64]tlog.Hash{5: seals[0].Root, 13: seals[1].Root}}, func(p Problem) { t.Error(p) })
	if err != nil || sum.Records != 15 || sum.TreeRoot != mustTreeHash(t, l, 17) {
		t.Errorf("VerifyRange = %+v, %v", sum, err)
	}
	if sum, err := l.Verify(ctx, func(p Problem) { t.Error(p) }); err != nil || sum.Records != 20 || sum.TreeRoot != root {
		t.Errorf("Verify = %+v, %v", sum, err)
	}
	for _, s := range segs[:3] {
		if _, err := VerifySegment(ctx, s.path, func(p Problem) { t.Errorf("%s alone: %s", filepath.Base(s.path), p) }); err != nil {
			t.Error(err)
		}
	}
	// Reopened, the log goes on from its head in the live segment.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpenPath(t, path, Options{})
	r, err := l2.Append(ctx, sampleEntry(99))
	if err != nil || r.Seq != 21 || r.PrevHash != prev {
		t.Fatalf("append after reopen = seq %d prev %s, %v", r.Seq, r.PrevHash, err)
	}
}

func mustTreeHash(t *testing.T, l *Log, n int64) tlog.Hash {
	t.Helper()
	h, err := l.TreeHash(n)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestRollBySize seals the live segment once its file reaches RollSize
// (the background roller runs too).
//
//custos:race
func TestRollBySize(t *testing.T) {
	l, path := mustOpen(t, Options{RollSize: 64 << 10})
	ctx := context.Background()
	rolled := 0
	for i := 0; i < 600 && rolled < 2; i++ {
		if _, err := l.Append(ctx, sampleEntry(i)); err != nil {
			t.Fatal(err)
		}
		// The background roller may have sealed already; RollIfDue is
		// what it runs.
		if ok, err := l.RollIfDue(ctx); err != nil {
			t.Fatal(err)
		} else if ok {
			rolled++
		}
		rolled = max(rolled, len(l.segments())-1)
	}
	if rolled < 2 {
		t.Fatalf("no two rolls by size in 600 records")
	}
	files, err := sealedFiles(path, "")
	if err != nil || len(files) < 2 {
		t.Fatalf("sealed files %v, %v", files, err)
	}
	for _, f := range files {
		var size int64
		db, err := bolt.Open(f, 0, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
		db.Close()
		if size < 64<<10 || size > 128<<10 {
			t.Errorf("%s: %d bytes, want about RollSize", filepath.Base(f), size)
		}
	}
}

// rollAt sets the fake clock to when and calls RollIfDue, and reports
// whether the live segment was sealed, by this call or by the log's own
// roller, which polls too and may win the race once the clock says a roll
// is due (then this call finds an empty live segment, which is not due).
// The segments are counted before the clock moves, when no roll is due.
func rollAt(ctx context.Context, t *testing.T, l *Log, set func(time.Time), when time.Time) bool {
	t.Helper()
	before := len(l.segments())
	set(when)
	ok, err := l.RollIfDue(ctx)
	if err != nil {
		t.Fatalf("RollIfDue: %v", err)
	}
	return ok || len(l.segments()) > before
}

// TestRollByTime seals monthly and by period, judged by the injected
// clock (the background roller runs too).
//
//custos:race
func TestRollByTime(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 30, 23, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	ctx := context.Background()

	l, _ := mustOpen(t, Options{RollMonthly: true, Now: clock})
	if due, _ := l.RollDue(); due {
		t.Fatal("an empty segment is due")
	}
	appendN(t, l, 3)
	set(time.Date(2026, 1, 31, 23, 59, 59, 0, time.UTC))
	if ok, err := l.RollIfDue(ctx); ok || err != nil {
		t.Fatalf("rolled within the month: %v %v", ok, err)
	}
	if !rollAt(ctx, t, l, set, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatal("no roll at the new month")
	}
	appendN(t, l, 2)
	// A later year, an earlier month number.
	if !rollAt(ctx, t, l, set, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatal("no roll in the next year")
	}

	set(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	p, _ := mustOpen(t, Options{RollPeriod: time.Hour, Now: clock})
	appendN(t, p, 1)
	set(clock().Add(59 * time.Minute))
	if due, _ := p.RollDue(); due {
		t.Fatal("due before the period")
	}
	if !rollAt(ctx, t, p, set, clock().Add(time.Minute)) {
		t.Fatal("no roll after the period")
	}
}

// flipSealed rewrites record seq of sealed segment file path with one byte
// changed, as an attacker with write access to the file would.
func flipSealed(t *testing.T, path string, seq uint64) {
	t.Helper()
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRecords)
		v := bytes.Clone(b.Get(seqKey(seq)))
		i := bytes.Index(v, []byte("user-"))
		v[i+5] ^= 1
		return b.Put(seqKey(seq), v)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o400)
}

// TestFlippedRecordInSealedSegment: a record edited in a sealed segment is
// named by VerifyFile, by VerifySegment and by VerifyRange (what the
// scrubber runs on an open log).
func TestFlippedRecordInSealedSegment(t *testing.T) {
	ctx := context.Background()
	path := writeSegmented(t, 4, 4, 2)
	seg2 := filepath.Join(SealedDir(path), SegmentFile(2))
	flipSealed(t, seg2, 6)

	named := func(ps []Problem) bool {
		for _, p := range ps {
			if p.Seq == 6 && p.Kind == KindHashMismatch {
				return true
			}
		}
		return false
	}
	ps, _ := collect(t, path)
	if !named(ps) {
		t.Errorf("VerifyFile did not name seq 6: %v", ps)
	}
	var alone []Problem
	if _, err := VerifySegment(ctx, seg2, func(p Problem) { alone = append(alone, p) }); err != nil || !named(alone) {
		t.Errorf("VerifySegment did not name seq 6: %v %v", alone, err)
	}
	// The server still opens (only the head is checked at open); the
	// scrubber's walk finds it.
	l, err := Open(path, Options{Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var ranged []Problem
	if _, err := l.VerifyRange(ctx, RangeOptions{From: 1, To: 10}, func(p Problem) { ranged = append(ranged, p) }); err != nil || !named(ranged) {
		t.Errorf("VerifyRange did not name seq 6: %v %v", ranged, err)
	}
}

// TestMissingMiddleSegment: a sealed segment removed from the middle is
// reported by VerifyFile, and the writer refuses to open the log.
func TestMissingMiddleSegment(t *testing.T) {
	path := writeSegmented(t, 3, 3, 3, 1)
	seg2 := filepath.Join(SealedDir(path), SegmentFile(2))
	if err := os.Rename(seg2, seg2+".gone"); err != nil {
		t.Fatal(err)
	}
	ps, sum := collect(t, path)
	found := false
	for _, p := range ps {
		if p.Kind == KindSegmentMissing && p.Seq == 4 {
			found = true
		}
	}
	if !found {
		t.Errorf("VerifyFile did not report segment 2 missing: %v", ps)
	}
	if sum.Records != 7 {
		t.Errorf("records walked %d, want 7 (the other segments, still checked)", sum.Records)
	}
	if _, err := Open(path, Options{Node: "n"}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), KindSegmentMissing) {
		t.Errorf("Open with a missing segment = %v, want segment_missing", err)
	}
	// Read-only, the log opens and Verify reports it.
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var ps2 []Problem
	if _, err := ro.Verify(context.Background(), func(p Problem) { ps2 = append(ps2, p) }); err != nil || len(ps2) == 0 {
		t.Errorf("read-only Verify = %v, %v", ps2, err)
	}
}

// TestSealedReadWhileAppending reads sealed segments (records, proofs,
// verification) while writers append and the log rolls.
func TestSealedReadWhileAppending(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	ctx := context.Background()
	appendN(t, l, 10)
	rollOrFail(t, l)
	stop := make(chan struct{})
	wait := appendUntil(t, l, 4, stop)
	rolled := make(chan struct{})
	go func() {
		defer close(rolled)
		for range 5 {
			time.Sleep(20 * time.Millisecond)
			if _, err := l.Roll(ctx); err != nil {
				t.Error(err)
			}
		}
	}()
	for i, done := 0, false; i < 20 || !done; i++ {
		select {
		case <-rolled:
			done = true
		default:
		}
		size, root, err := l.TreeHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p, err := l.ProveRecord(3, size)
		if err != nil {
			t.Fatal(err)
		}
		var leaf tlog.Hash
		if err := l.Records(ctx, 3, 3, func(_ uint64, c []byte) error { leaf = LeafHash(c); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckRecord(p, size, root, 2, leaf); err != nil {
			t.Errorf("inclusion at size %d: %v", size, err)
		}
		if _, err := l.Verify(ctx, func(p Problem) { t.Error(p) }); err != nil {
			t.Fatal(err)
		}
		if _, err := l.VerifyRange(ctx, RangeOptions{From: 1, To: uint64(size)}, func(p Problem) { t.Error(p) }); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wait()
	if n := len(l.segments()); n < 3 {
		t.Errorf("%d segments after the rolls", n)
	}
}

// TestCrashDuringSeal stops a seal after each of its steps, as a kill
// would, and reopens: before the commit point the seal is rolled back,
// after it the seal is completed; no record is lost either way and the
// log verifies. A seal completed so leaves its sealed file as one that
// ran to its end does: trimmed to its pages in use and read-only. Until
// h-audit7 the completion kept the file as it was, 16 MiB for 32 KiB of
// pages here (bbolt's preallocation and the live segment's zero tail), in
// every case past the commit point.
func TestCrashDuringSeal(t *testing.T) {
	for _, c := range []struct {
		step    int
		renamed bool // the state the earlier sealing left: the live file renamed away
	}{{3, false}, {4, false}, {5, false}, {5, true}, {sealRenamed, false}} {
		step := c.step
		name := fmt.Sprint("step", step)
		if c.renamed {
			name += "-renamed"
		}
		if step == sealRenamed {
			name = "renamed-over" // the next segment in place, the sealed file not yet trimmed
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "audit.db")
			l, recs := sealedOnceThenThree(t, path)
			if err := l.Broken(); err != nil {
				t.Fatalf("Broken before the failed seal: %v", err)
			}
			sealCrash = killAt(step)
			_, err := l.Roll(ctx)
			sealCrash = nil
			if err == nil {
				t.Fatal("Roll survived its kill")
			}
			if _, err := l.Append(ctx, sampleEntry(1)); err == nil {
				t.Error("append after an interrupted seal succeeded")
			}
			if err := l.Broken(); err == nil {
				t.Error("Broken is nil after an interrupted seal")
			}
			if step == 5 {
				// The sealed file has its sealed name and still its live
				// one: the live path is never missing.
				a, errA := os.Stat(path)
				b, errB := os.Stat(filepath.Join(SealedDir(path), SegmentFile(2)))
				if errA != nil || errB != nil || !os.SameFile(a, b) {
					t.Errorf("after step 5 the live path and the sealed name are not the one file: %v, %v", errA, errB)
				}
			}
			l.Close()
			if c.renamed {
				// The earlier sealing renamed the live file away before
				// the next segment took its place: P missing, P.next there.
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			}
			if step == 4 {
				// The next segment may be lost too: Open recreates it.
				os.Remove(path + nextSuffix)
			}
			l2 := mustOpenPath(t, path, Options{})
			seq, hash := l2.Head()
			if seq != 7 || hash != recs[2].Hash {
				t.Fatalf("head after recovery = %d %s, want 7 %s", seq, hash, recs[2].Hash)
			}
			segs := l2.segments()
			wantSegs := 2
			if step > 3 {
				wantSegs = 3
			}
			if len(segs) != wantSegs {
				t.Errorf("%d segments after recovery, want %d", len(segs), wantSegs)
			}
			if _, err := os.Stat(path + nextSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("next segment left behind: %v", err)
			}
			if step > 3 {
				checkSealedTrimmed(t, filepath.Join(SealedDir(path), SegmentFile(2)))
			}
			r, err := l2.Append(ctx, sampleEntry(8))
			if err != nil || r.Seq != 8 || r.PrevHash != hash {
				t.Fatalf("append after recovery = %d, %v", r.Seq, err)
			}
			rollOrFail(t, l2)
		})
	}
}

// TestVerifyWhereASealStopped: VerifyFile and ExportFile read a log as a
// kill during a seal left it, before anything completes the seal (an
// auditor's verify of a copy of the data directory, read-only). Stopped
// after step 5 linked the sealed file and before the next segment
// replaced it at the live path, the one file has both names: it was
// walked twice, 10 records of 7, a segment_missing problem for a log that
// had lost nothing, and its records exported twice.
func TestVerifyWhereASealStopped(t *testing.T) {
	for _, step := range []int{3, 4, 5, sealRenamed} {
		t.Run(fmt.Sprint("step", step), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.db")
			l, _ := sealedOnceThenThree(t, path)
			sealCrash = killAt(step)
			_, err := l.Roll(context.Background())
			sealCrash = nil
			if err == nil {
				t.Fatal("Roll survived its kill")
			}
			l.Close()
			if sum := mustVerify(t, path); sum.Records != 7 || sum.HeadSeq != 7 {
				t.Errorf("verify: %d records, head %d; want 7, 7", sum.Records, sum.HeadSeq)
			}
			var out bytes.Buffer
			if n, err := ExportFile(context.Background(), path, &out, FormatJSONL, Filter{}); err != nil || n != 7 {
				t.Errorf("export: %d records, %v; want 7", n, err)
			}
			if lines := bytes.Count(out.Bytes(), []byte("\n")); lines != 7 {
				t.Errorf("export: %d lines, want 7", lines)
			}
		})
	}
}

// killAt is a sealCrash that stops the seal (or its completion) at step.
func killAt(step int) func(int) error {
	return func(s int) error {
		if s == step {
			return errors.New("killed")
		}
		return nil
	}
}

// sealedOnceThenThree opens a new log at path (closed by the caller, not
// verified: a test may leave it interrupted) with 4 records sealed in
// segment 1 and 3 more, which it returns, in the live segment 2.
func sealedOnceThenThree(t *testing.T, path string) (*Log, []Record) {
	t.Helper()
	l, err := Open(path, Options{Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 4)
	rollOrFail(t, l)
	return l, appendN(t, l, 3)
}

// checkSealedTrimmed fails t unless the sealed segment file is read-only
// and exactly as long as its pages in use (tx.Size()).
func checkSealedTrimmed(t *testing.T, sealed string) {
	t.Helper()
	fi, err := os.Stat(sealed)
	if err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(sealed, 0, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	db.Close()
	if fi.Size() != used {
		t.Errorf("sealed segment %s: %d bytes on disk, %d in use: not trimmed", filepath.Base(sealed), fi.Size(), used)
	}
	if fi.Mode().Perm() != 0o400 {
		t.Errorf("sealed segment %s: mode %v, want 0400", filepath.Base(sealed), fi.Mode().Perm())
	}
}

// TestLivePathNeverMissingDuringSeal: while the log rolls, the live path
// always names a file, so that a reader looking at the data directory
// during a seal (an auditor's command checking --data-dir) never finds it
// empty. The old sealing renamed the live file away before the next
// segment took its place.
func TestLivePathNeverMissingDuringSeal(t *testing.T) {
	l, path := mustOpen(t, Options{})
	var missing, looks atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			looks.Add(1)
			if _, err := os.Stat(path); err != nil {
				missing.Add(1)
			}
		}
	}()
	stopLooking := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLooking() // also when a seal fails the test (t.Fatal)
	for range 20 {
		appendN(t, l, 2)
		rollOrFail(t, l)
	}
	stopLooking()
	if n := missing.Load(); n > 0 {
		t.Fatalf("the live path was missing %d times in %d looks during 20 seals", n, looks.Load())
	}
	if n := len(l.segments()); n != 21 {
		t.Fatalf("%d segments after 20 seals", n)
	}
	// The live path is the live segment, none of the sealed files (its
	// link to the last one has gone with the next segment's rename).
	live, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(SealedDir(path), "*.db"))
	if len(files) != 20 {
		t.Fatalf("%d sealed files after 20 seals", len(files))
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil || os.SameFile(live, fi) {
			t.Errorf("%s is still the live path (%v)", filepath.Base(f), err)
		}
	}
}

// TestSingleFileLogBecomesFirstSegment: a log written by the code before
// segments (the v1 fixture) is the first segment: it rolls, and the whole
// log verifies with the fixture's records intact.
func TestSingleFileLogBecomesFirstSegment(t *testing.T) {
	path, lines := copyV1Fixture(t)
	l := mustOpenPath(t, path, Options{})
	appendN(t, l, 2)
	rollOrFail(t, l)
	appendN(t, l, 2)
	var out bytesBuffer
	n, err := l.Export(context.Background(), &out, FormatJSONL, Filter{})
	if err != nil || n != 9 {
		t.Fatalf("Export = %d, %v", n, err)
	}
	for i, line := range lines {
		if !bytes.Equal(out.lines()[i], line) {
			t.Errorf("fixture record %d changed", i+1)
		}
	}
	seg1 := filepath.Join(SealedDir(path), SegmentFile(1))
	if _, err := VerifySegment(context.Background(), seg1, func(p Problem) { t.Error(p) }); err != nil {
		t.Fatal(err)
	}
}

// TestArchiveDir: sealed segments move to the archive directory with
// their seal notes; readers given only the live path find them there.
//
//custos:race
func TestArchiveDir(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "archive")
	l, path := mustOpen(t, Options{ArchiveDir: archive})
	appendN(t, l, 3)
	rollOrFail(t, l)
	appendN(t, l, 3)
	rollOrFail(t, l)
	appendN(t, l, 1)
	for _, no := range []uint64{1, 2} {
		for _, f := range []string{SegmentFile(no), sealNotePath(SegmentFile(no))} {
			if fi, err := os.Stat(filepath.Join(archive, f)); err != nil || fi.Mode().Perm() != 0o400 {
				t.Errorf("archive %s: %v", f, err)
			}
			if _, err := os.Stat(filepath.Join(SealedDir(path), f)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still in the sealed directory", f)
			}
		}
	}
	// An archive file of another log under the same name is never
	// replaced: archiving the next segment 3 fails and leaves it.
	foreign := filepath.Join(archive, SegmentFile(3))
	if err := os.WriteFile(foreign, []byte("another log's segment"), 0o400); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1)
	if ok, err := l.Roll(context.Background()); !ok || err != nil {
		t.Fatalf("Roll: %v %v", ok, err)
	}
	if b, _ := os.ReadFile(foreign); string(b) != "another log's segment" {
		t.Error("archiving replaced a foreign archive file")
	}
	if _, err := os.Stat(filepath.Join(SealedDir(path), SegmentFile(3))); err != nil {
		t.Errorf("segment 3 left the sealed directory although its archive copy failed: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(foreign) // readers prefer the sealed directory's copy anyway
	if sum := mustVerify(t, path); sum.Records != 8 {
		t.Errorf("VerifyFile walked %d records, want 8", sum.Records)
	}
	var out bytes.Buffer
	if n, err := ExportFile(context.Background(), path, &out, FormatJSONL, Filter{}); err != nil || n != 8 {
		t.Errorf("ExportFile = %d, %v", n, err)
	}
}

// archivedLog writes a closed log of two segments whose first, sealed,
// is in the archive directory archive.
func archivedLog(t *testing.T) (path, archive string) {
	t.Helper()
	archive = filepath.Join(t.TempDir(), "archive")
	l, path := mustOpen(t, Options{ArchiveDir: archive})
	appendN(t, l, 2)
	rollOrFail(t, l)
	appendN(t, l, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path, archive
}

// TestMissingArchiveIsNamed: when the archive directory the sealed
// directory records is not there (not mounted), a read-write Open is
// refused naming it, not only as an anonymous missing segment.
func TestMissingArchiveIsNamed(t *testing.T) {
	path, archive := archivedLog(t)
	if err := os.Rename(archive, archive+".unmounted"); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{Node: "node-test"})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Kind != KindSegmentMissing || !strings.Contains(err.Error(), "archive directory "+archive+" ") ||
		!strings.Contains(err.Error(), "mount it") {
		t.Fatalf("Open with the archive missing: %v", err)
	}
	if err := os.Rename(archive+".unmounted", archive); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, path)
}

// TestOtherArchiveDirKeepsTheRecordedOne: a log opened read-write with
// another archive directory than the one its sealed directory records, one
// that lacks the archived segments (a new mount, a typo), is refused naming
// both, and the record of where the segments are is not overwritten:
// readers given only the data directory still find them.
func TestOtherArchiveDirKeepsTheRecordedOne(t *testing.T) {
	path, archive := archivedLog(t)
	other := t.TempDir()
	_, err := Open(path, Options{Node: "node-test", ArchiveDir: other})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "records the archive directory "+archive+", not "+other) {
		t.Fatalf("Open with another archive directory: %v", err)
	}
	if got := archiveDirOf(SealedDir(path)); got != archive {
		t.Fatalf("the recorded archive directory is now %q, want %q", got, archive)
	}
	mustVerify(t, path)
}

// TestSupersededArchivedSegmentsAreNamed: after a rollback (a restore of
// an earlier state), the archive still holds the later segments of the
// history that was rolled back, numbered like the restored log's next
// ones. Open refuses, as before, but names them and says what they are.
func TestSupersededArchivedSegmentsAreNamed(t *testing.T) {
	path, archive := archivedLog(t)
	// The earlier state: segment 1 archived, segment 2 live.
	restored := filepath.Join(t.TempDir(), "audit.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(restored, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The history goes on: segments 2 and 3 are archived too.
	l := mustOpenPath(t, path, Options{ArchiveDir: archive})
	rollOrFail(t, l)
	appendN(t, l, 1)
	rollOrFail(t, l)
	appendN(t, l, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(restored, Options{Node: "node-test", ArchiveDir: archive})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "sealed segments 2 to 3 ("+archive+") are numbered from the live segment 2 on") {
		t.Fatalf("Open of the earlier state with the archive of the later one: %v", err)
	}
}

// TestSealSigned: with a SealSigner, the seal note carries a signature its
// verifier accepts.
func TestSealSigned(t *testing.T) {
	skey, vkey, err := note.GenerateKey(nil, "custos-test-seal")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	l, path := mustOpen(t, Options{SealSigner: signer})
	appendN(t, l, 2)
	rollOrFail(t, l)
	text, err := os.ReadFile(filepath.Join(SealedDir(path), "000001.seal"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSeal(text, note.VerifierList(verifier))
	if err != nil || s.Last != 2 {
		t.Fatalf("ParseSeal = %+v, %v", s, err)
	}
	if ps := l.CheckSeals(note.VerifierList(verifier)); len(ps) != 0 {
		t.Errorf("CheckSeals of a good note: %v", ps)
	}
	text[5] ^= 1
	if _, err := ParseSeal(text, note.VerifierList(verifier)); err == nil {
		t.Error("a changed seal note verified")
	}
	notePath := filepath.Join(SealedDir(path), "000001.seal")
	os.Chmod(notePath, 0o600)
	if err := os.WriteFile(notePath, text, 0o400); err != nil {
		t.Fatal(err)
	}
	if ps := l.CheckSeals(note.VerifierList(verifier)); len(ps) != 1 || ps[0].Kind != KindSealMismatch || ps[0].Seq != 1 {
		t.Errorf("CheckSeals of a changed note: %v", ps)
	}
	os.Remove(notePath)
	if ps := l.CheckSeals(note.VerifierList(verifier)); len(ps) != 1 || !strings.Contains(ps[0].Detail, "missing") {
		t.Errorf("CheckSeals of a missing note: %v", ps)
	}
}

// TestParseSealCanonical: a seal parses back from its body, and any other
// spelling of the same fields is refused.
func TestParseSealCanonical(t *testing.T) {
	root, _ := tlog.TreeHash(0, nil)
	s := Seal{Segment: 2, First: 6, Last: 13, PrevHash: strings.Repeat("ab", 32), PrevRoot: root,
		HeadHash: strings.Repeat("0f", 32), Root: tlog.Hash{1, 2, 3},
		FirstTime: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), LastTime: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}
	body := s.Body()
	if got, err := ParseSeal(body, nil); err != nil || got != s {
		t.Fatalf("ParseSeal(Body) = %+v, %v", got, err)
	}
	for name, bad := range map[string]string{
		"extra space":   strings.Replace(string(body), "records 6", "records  6", 1),
		"upper hex":     strings.Replace(string(body), strings.Repeat("ab", 32), strings.Repeat("AB", 32), 1),
		"short hash":    strings.Replace(string(body), strings.Repeat("0f", 32), "0f", 1),
		"last mismatch": strings.Replace(string(body), "head 13", "head 12", 1),
		"prev mismatch": strings.Replace(string(body), "prev 5", "prev 4", 1),
		"other header":  strings.Replace(string(body), "seal v1", "seal v2", 1),
		"trailing line": string(body) + "x\n",
		"no final LF":   strings.TrimSuffix(string(body), "\n"),
		"leading zero":  strings.Replace(string(body), "segment 2", "segment 02", 1),
		"zero segment":  strings.Replace(string(body), "segment 2", "segment 0", 1),
	} {
		if _, err := ParseSeal([]byte(bad), nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestSealVerifyRate: the verification before the writer's lock keeps to
// SealVerifyRate; appends are not held meanwhile.
func TestSealVerifyRate(t *testing.T) {
	l, _ := mustOpen(t, Options{SealVerifyRate: 100})
	appendN(t, l, 50) // one chunk: a pause of 0.5 s
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		// Not rollOrFail: t.Fatal on this goroutine would end it without
		// a send, and the test would wait on done until its timeout.
		if ok, err := l.Roll(context.Background()); err != nil || !ok {
			t.Errorf("Roll = %v, %v", ok, err)
		}
		done <- time.Since(start)
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := l.Append(context.Background(), sampleEntry(1)); err != nil {
		t.Fatal(err)
	}
	appended := time.Since(start)
	if el := <-done; el < 450*time.Millisecond || appended > 400*time.Millisecond {
		t.Errorf("seal took %s (want >= 0.5 s at 100 records/s), an append during it %s", el, appended)
	}
	if seq, _ := l.Head(); seq != 51 || len(l.segments()) != 2 {
		t.Errorf("head %d, %d segments", seq, len(l.segments()))
	}
}

// TestLinkSealedNeverReplacesAnotherFile: a sealed name that already holds
// another file is refused and left as it was; one that is already the
// sealed file (a link made before a crash) is accepted.
func TestLinkSealedNeverReplacesAnotherFile(t *testing.T) {
	l, _ := mustOpen(t, Options{})
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "live.db"), filepath.Join(dir, "000001.db")
	if err := os.WriteFile(src, []byte("sealed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("another log's segment"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := l.linkSealed(src, dst); err == nil || !strings.Contains(err.Error(), "another file") {
		t.Fatalf("linkSealed over another file = %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "another log's segment" {
		t.Fatalf("the other file changed: %q", b)
	}
	os.Remove(dst)
	for range 2 { // the second time the link is there already
		if err := l.linkSealed(src, dst); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(dst); string(b) != "sealed" {
		t.Fatalf("sealed name holds %q", b)
	}
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("the live name went away: %v", err)
	}
}

// TestSealWithoutHardLinks: on a file system that refuses hard links the
// seal renames the file instead, as before, and completes: the segments
// verify and appends go on in the next one.
func TestSealWithoutHardLinks(t *testing.T) {
	linkFile = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	defer func() { linkFile = os.Link }()
	l, path := mustOpen(t, Options{})
	for range 3 {
		appendN(t, l, 2)
		rollOrFail(t, l)
	}
	appendN(t, l, 1)
	if n := len(l.segments()); n != 4 {
		t.Fatalf("%d segments after 3 seals", n)
	}
	for no := uint64(1); no <= 3; no++ {
		f := filepath.Join(SealedDir(path), SegmentFile(no))
		if _, err := VerifySegment(context.Background(), f, func(p Problem) { t.Error(p) }); err != nil {
			t.Fatal(err)
		}
	}
	if seq, _ := l.Head(); seq != 7 {
		t.Fatalf("head %d, want 7", seq)
	}
}

// TestCheckSealsDuringARoll: an auditor's verify (CheckSeals, through the
// server) may run between the moment a segment shows as sealed and the end
// of the roll, and must find the seal note then (it looked beside the live
// path, the next segment's by then, and reported the note missing); and a
// note whose segment the server archived after CheckSeals listed it is
// read from the archive.
func TestCheckSealsDuringARoll(t *testing.T) {
	l, path := mustOpen(t, Options{})
	appendN(t, l, 3)
	ctx := context.Background()
	l.roll.mu.Lock()
	live := l.live()
	w := &segmentWalk{v: &verifier{}, s: live, alone: true}
	if err := w.run(ctx); err != nil {
		t.Fatal(err)
	}
	_, dst, err := l.sealLocked(ctx, live, w)
	if err != nil {
		t.Fatal(err)
	}
	// Steps 2 to 5 are done; finishSealed has not run yet.
	for _, p := range l.CheckSeals(nil) {
		if strings.Contains(p.Detail, "missing") {
			t.Errorf("CheckSeals between the seal and the end of the roll: %v", p)
		}
	}
	if err := l.finishSealed(live, dst); err != nil {
		t.Fatal(err)
	}
	l.roll.mu.Unlock()

	// The sealed note gone (archived by the server after this log listed
	// the segment): the archive's copy is read.
	archive := t.TempDir()
	sealed := filepath.Join(SealedDir(path), "000001.seal")
	text, err := os.ReadFile(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(archive, "000001.seal"), text, 0o400); err != nil {
		t.Fatal(err)
	}
	os.Remove(sealed)
	l.opts.ArchiveDir = archive
	for _, p := range l.CheckSeals(nil) {
		if strings.Contains(p.Detail, "missing") {
			t.Errorf("CheckSeals with the note archived: %v", p)
		}
	}
	l.opts.ArchiveDir = ""
	if ps := l.CheckSeals(nil); len(ps) != 1 || !strings.Contains(ps[0].Detail, "missing") {
		t.Errorf("CheckSeals with the note nowhere: %v, want it missing", ps)
	}
}

// TestSnapshotDuringRollDoesNotBlockAppends: a backup (WriteSnapshot, whose
// writer is slow: an auditor's download) that is running when the
// log rolls must not stop appends: every list and read appends a record.
// (A roll once took a segment's lock while it held the segments' lock;
// found by review.)
func TestSnapshotDuringRollDoesNotBlockAppends(t *testing.T) {
	ctx := context.Background()
	l, _ := mustOpen(t, Options{Node: "n"})
	appendN(t, l, 5)
	release := holdSnapshot(t, l)
	rollDone := make(chan error, 1)
	go func() { _, err := l.Roll(ctx); rollDone <- err }()
	time.Sleep(500 * time.Millisecond)
	appended := make(chan error, 1)
	go func() { _, err := l.Append(ctx, sampleEntry(99)); appended <- err }()
	select {
	case err := <-appended:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(3 * time.Second):
		t.Error("Append blocked for 3s: a roll waits for the snapshot's reader while it holds the segments' lock")
		defer func() { <-appended }()
	}
	release()
	if err := <-rollDone; err != nil {
		t.Error(err)
	}
}

// TestSegmentFailuresAreReported: a rollover step that fails and is left
// to a retry is reported to Options.OnSegmentFailure (custos counts it in
// a metric operators alert on), not only logged. Here the archive already
// holds a different file of the segment's name, which is never replaced.
func TestSegmentFailuresAreReported(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "archive")
	var mu sync.Mutex
	var steps []string
	l, path := mustOpen(t, Options{ArchiveDir: archive, OnSegmentFailure: func(step string) {
		mu.Lock()
		steps = append(steps, step)
		mu.Unlock()
	}})
	appendN(t, l, 2)
	if err := os.MkdirAll(archive, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(archive, SegmentFile(1)), []byte("another log's segment"), 0o400); err != nil {
		t.Fatal(err)
	}
	rollOrFail(t, l)
	appendN(t, l, 1)
	// The roll's own archive copy fails and is reported; the roller's
	// first pass over the pending segments, which the append may wake
	// before or after this check, may fail and report it again (seen
	// "archive,archive" under load): one or more, each the archive step.
	mu.Lock()
	got := slices.Clone(steps)
	mu.Unlock()
	if len(got) == 0 || slices.ContainsFunc(got, func(s string) bool { return s != SegmentArchive }) {
		t.Fatalf("failures reported: %q, want one or more %q", got, SegmentArchive)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, path)
}

// TestArchiveIsRetried: a sealed segment whose archive copy failed is
// tried again while the server runs (not only at the next open), each
// failure reported, and archived once the cause is gone.
func TestArchiveIsRetried(t *testing.T) {
	defer func(d time.Duration) { archiveRetryInterval = d }(archiveRetryInterval)
	archiveRetryInterval = 20 * time.Millisecond
	archive := filepath.Join(t.TempDir(), "archive")
	var failures atomic.Int32
	l, path := mustOpen(t, Options{ArchiveDir: archive, OnSegmentFailure: func(step string) {
		if step == SegmentArchive {
			failures.Add(1)
		}
	}})
	appendN(t, l, 2)
	blocker := filepath.Join(archive, SegmentFile(1))
	if err := os.MkdirAll(archive, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blocker, []byte("another log's segment"), 0o600); err != nil {
		t.Fatal(err)
	}
	rollOrFail(t, l)
	// Appends kick the roller, which retries after the interval.
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for i := 0; !ok(); i++ {
			if i == 400 {
				t.Fatalf("%s: still not after 400 appends (%d archive failures)", what, failures.Load())
			}
			appendN(t, l, 1)
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("a retried archive copy", func() bool { return failures.Load() >= 3 })
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	waitFor("the segment archived", func() bool {
		_, err := os.Stat(filepath.Join(archive, SegmentFile(1)))
		return err == nil
	})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, path)
}

// TestSnapshotWhileTheFileGrowsDoesNotBlockAppends: a backup (WriteSnapshot,
// one long read transaction, written to an auditor's slow download) must not
// stop appends while the live file grows. bbolt remaps its file when a
// commit needs pages past the mapping, and a remap waits for every read
// transaction to end; a new file's mapping starts at 32 KiB and doubles, so
// an unprepared live segment remaps a dozen times in its first GiB, and each
// time a running backup held every list and read for the rest of its copy.
func TestSnapshotWhileTheFileGrowsDoesNotBlockAppends(t *testing.T) {
	ctx := context.Background()
	l, _ := mustOpen(t, Options{Node: "n"})
	appendN(t, l, 5)
	release := holdSnapshot(t, l)
	used := func() int64 {
		var n int64
		if err := l.view(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
			t.Error(err)
		}
		return n
	}
	start := used()
	// Append until the log uses 4 MiB more: past several doublings of a
	// mapping that began at the file's size.
	appended := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			if _, err := l.Append(ctx, sampleEntry(i)); err != nil {
				appended <- err
				return
			}
			if i%64 == 63 && used() >= start+4<<20 {
				appended <- nil
				return
			}
		}
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(20 * time.Second):
		t.Error("appends blocked while a snapshot's read transaction was open: the live file's remap waits for it")
		defer func() { <-appended }()
	}
	release()
}

// holdSnapshot starts a backup's copy (WriteSnapshot) of l whose writer
// waits, as an auditor's slow download does, and returns once its read
// transaction is open; release lets it finish and checks its result.
func holdSnapshot(t *testing.T, l *Log) (release func()) {
	t.Helper()
	inWrite, done := make(chan struct{}), make(chan struct{})
	result := make(chan error, 1)
	go func() {
		_, err := l.WriteSnapshot(func(Snapshot) (io.Writer, error) {
			close(inWrite)
			<-done
			return io.Discard, nil
		})
		result <- err
	}()
	<-inWrite
	return func() {
		t.Helper()
		close(done)
		if err := <-result; err != nil {
			t.Error(err)
		}
	}
}

// TestSealTimesAreTheRecords: a seal states the times of its first and
// last records (docs/audit-format.md, section 17), and an auditor reads a
// segment's period from it; a seal whose time line is not its records'
// is a seal_mismatch like one whose head is not, for every verifying walk.
// Found by probe-verify's docs-only verifier, which checks the line;
// VerifyFile did not, and VerifyRange checked no seal at all.
func TestSealTimesAreTheRecords(t *testing.T) {
	ctx := context.Background()
	for _, which := range []string{"first", "last"} {
		t.Run(which, func(t *testing.T) {
			path := writeSegmented(t, 4, 4, 2)
			seg2 := filepath.Join(SealedDir(path), SegmentFile(2))
			os.Chmod(seg2, 0o600)
			db, err := bolt.Open(seg2, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				meta := tx.Bucket(bucketMeta)
				s, err := ParseSeal(meta.Get(metaSeal), nil)
				if err != nil {
					return err
				}
				if which == "first" {
					s.FirstTime = s.FirstTime.Add(-time.Hour)
				} else {
					s.LastTime = s.LastTime.Add(time.Hour)
				}
				return meta.Put(metaSeal, s.Body())
			})
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			os.Chmod(seg2, 0o400)
			named := func(ps []Problem) bool {
				for _, p := range ps {
					if p.Kind == KindSealMismatch && strings.Contains(p.Detail, "segment 2") && strings.Contains(p.Detail, which) {
						return true
					}
				}
				return false
			}
			if ps, _ := collect(t, path); !named(ps) {
				t.Errorf("VerifyFile does not name segment 2's seal time: %v", ps)
			}
			var alone []Problem
			if _, err := VerifySegment(ctx, seg2, func(p Problem) { alone = append(alone, p) }); err != nil || !named(alone) {
				t.Errorf("VerifySegment does not name segment 2's seal time: %v %v", alone, err)
			}
			// The scrubber's and the startup check's walk (section 17:
			// "crosses segments the same way"), over the whole log and
			// over a range that starts inside the segment.
			l, err := Open(path, Options{Node: "n"})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, from := range []uint64{1, 6} {
				var ranged []Problem
				if _, err := l.VerifyRange(ctx, RangeOptions{From: from, To: 10}, func(p Problem) { ranged = append(ranged, p) }); err != nil || !named(ranged) {
					t.Errorf("VerifyRange from %d does not name segment 2's seal time: %v %v", from, ranged, err)
				}
			}
			var clean []Problem
			if _, err := l.VerifyRange(ctx, RangeOptions{From: 1, To: 6}, func(p Problem) { clean = append(clean, p) }); err != nil || len(clean) != 0 {
				t.Errorf("VerifyRange ending inside segment 2 reports its seal: %v %v", clean, err)
			}
		})
	}
}

// TestCrashWhileRecreatingTheNextSegment: a seal past its commit point
// whose next segment was lost (a failed commit's clean-up removes it)
// is completed at the next open, which creates the next segment afresh;
// killed while it did so, that open leaves audit.db.next empty (the file
// made, bbolt's first pages not written) or initialized without the
// segment's buckets (bbolt's pages written, the segment's first
// transaction not). The open after it must create it again: the live
// path holds a sealed segment, so audit.db.next has held no record. It
// renamed the broken file over the live path instead, and the log could
// not be opened again: an empty one was segment_damaged, an initialized
// one a new log that did not follow the sealed segments.
func TestCrashWhileRecreatingTheNextSegment(t *testing.T) {
	for _, c := range []struct {
		name  string
		leave func(t *testing.T, next string)
	}{
		{"empty", func(t *testing.T, next string) {
			if err := os.WriteFile(next, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"no-buckets", func(t *testing.T, next string) {
			db, err := bolt.Open(next, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "audit.db")
			l := mustOpenPath(t, path, Options{Node: "n"})
			appendN(t, l, 4)
			rollOrFail(t, l)
			recs := appendN(t, l, 3)
			sealCrash = killAt(4)
			_, err := l.Roll(ctx)
			sealCrash = nil
			if err == nil {
				t.Fatal("Roll survived its kill")
			}
			l.Close()
			if err := os.Remove(path + nextSuffix); err != nil {
				t.Fatal(err)
			}
			c.leave(t, path+nextSuffix)
			l2, err := Open(path, Options{Node: "n"})
			if err != nil {
				t.Fatalf("open after a crash while the next segment was recreated: %v", err)
			}
			defer l2.Close()
			if seq, hash := l2.Head(); seq != 7 || hash != recs[2].Hash {
				t.Fatalf("head after recovery = %d %s, want 7 %s", seq, hash, recs[2].Hash)
			}
			if n := len(l2.segments()); n != 3 {
				t.Errorf("%d segments after recovery, want 3", n)
			}
			r, err := l2.Append(ctx, sampleEntry(8))
			if err != nil || r.Seq != 8 {
				t.Fatalf("append after recovery = %d, %v", r.Seq, err)
			}
			if _, err := l2.Verify(ctx, func(p Problem) { t.Error(p) }); err != nil {
				t.Fatal(err)
			}
		})
	}
}
