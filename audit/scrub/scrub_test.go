package scrub_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/scrub"
)

func entry(i int) audit.Entry {
	return audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow, Reason: "clinician_care_team",
		Principal: audit.Principal{Sub: "dr-" + string(rune('a'+i%26))}, PurposeOfUse: "TREAT"}
}

func appendN(t *testing.T, l *audit.Log, n int) {
	t.Helper()
	for i := range n {
		if _, err := l.Append(context.Background(), entry(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// roots is the stored root at each of sizes: anchored checkpoints of an
// intact log.
func roots(t *testing.T, l *audit.Log, sizes ...int64) map[int64]tlog.Hash {
	t.Helper()
	m := map[int64]tlog.Hash{}
	for _, s := range sizes {
		h, err := l.TreeHash(s)
		if err != nil {
			t.Fatal(err)
		}
		m[s] = h
	}
	return m
}

func newScrubber(t *testing.T, c scrub.Config) *scrub.Scrubber {
	t.Helper()
	s, err := scrub.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPassIntact: a pass over an intact log with anchored roots verifies
// every record.
func TestPassIntact(t *testing.T) {
	l, _ := audittest.Open(t, audit.Options{})
	appendN(t, l, 40)
	anchored := roots(t, l, 10, 20, 40)
	s := newScrubber(t, scrub.Config{Log: l, Rate: 1 << 20,
		Anchored: func(context.Context) (map[int64]tlog.Hash, error) { return anchored, nil }})
	p := s.Pass(context.Background())
	if !p.OK() || p.Broken() || p.Size != 40 || p.Records != 40 || p.Reason() != "" {
		t.Fatalf("pass = %+v", p)
	}
}

// TestPassFindsAnEditedRecord: a byte flipped in the middle of a stopped
// log (behind every anchored checkpoint, where startup does not look) is
// found and named by the next pass, and so is a fork of an anchored root.
func TestPassFindsAnEditedRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := audit.Open(path, audit.Options{Node: "test"})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 30)
	anchored := roots(t, l, 10, 30)
	l.Close()
	audittest.FlipRecord(t, path, 17)

	l, err = audit.Open(path, audit.Options{Node: "test"}) // the head is intact: Open accepts it
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := newScrubber(t, scrub.Config{Log: l, Rate: 1 << 20,
		Anchored: func(context.Context) (map[int64]tlog.Hash, error) { return anchored, nil }})
	p := s.Pass(context.Background())
	if !p.Broken() || p.OK() || p.Err != nil {
		t.Fatalf("pass = %+v", p)
	}
	var got []string
	for _, pr := range p.Problems {
		got = append(got, pr.Kind)
		if pr.Seq != 17 && pr.Seq != 30 {
			t.Errorf("problem blames seq %d: %s", pr.Seq, pr)
		}
	}
	slices.Sort(got)
	if want := []string{"checkpoint_mismatch", "hash_mismatch", "tree_mismatch", "tree_root_mismatch"}; !slices.Equal(got, want) {
		t.Errorf("problems %v, want %v", got, want)
	}
	if r := p.Reason(); r != "kind=hash_mismatch,seq=17,problems=4,size=30" {
		t.Errorf("reason %q", r)
	}
}

// TestPassFindsAnEditedRecordInASealedSegment: the pass spans every
// segment: a byte flipped in the middle sealed segment of a stopped log is
// named by the next pass.
func TestPassFindsAnEditedRecordInASealedSegment(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := audit.Open(path, audit.Options{Node: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		appendN(t, l, 10)
		if ok, err := l.Roll(ctx); !ok || err != nil {
			t.Fatalf("Roll: %v %v", ok, err)
		}
	}
	appendN(t, l, 5)
	anchored := roots(t, l, 10, 35)
	l.Close()
	audittest.FlipRecord(t, path, 17) // in sealed segment 2 (11..20)

	l, err = audit.Open(path, audit.Options{Node: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := newScrubber(t, scrub.Config{Log: l, Rate: 1 << 20,
		Anchored: func(context.Context) (map[int64]tlog.Hash, error) { return anchored, nil }})
	p := s.Pass(ctx)
	if !p.Broken() || p.Size != 35 || p.Records != 35 {
		t.Fatalf("pass = %+v", p)
	}
	if r := p.Reason(); !strings.HasPrefix(r, "kind=hash_mismatch,seq=17,") {
		t.Errorf("reason %q", r)
	}
}

// TestPassAnchors: an anchor error matching audit.ErrCorrupt is a finding
// with its seq and kind; any other error stops the pass without one.
func TestPassAnchors(t *testing.T) {
	l, _ := audittest.Open(t, audit.Options{})
	appendN(t, l, 5)
	var anchorErr error
	s := newScrubber(t, scrub.Config{Log: l,
		Anchored: func(context.Context) (map[int64]tlog.Hash, error) { return nil, anchorErr }})

	anchorErr = &audit.CorruptError{Seq: 4, Kind: audit.KindCheckpointMismatch, Detail: "two roots for size 4"}
	p := s.Pass(context.Background())
	if !p.Broken() || p.Problems[0].Seq != 4 || p.Problems[0].Kind != audit.KindCheckpointMismatch {
		t.Fatalf("fork: %+v", p)
	}

	anchorErr = errors.New("anchor directory unreadable")
	p = s.Pass(context.Background())
	if p.Broken() || p.OK() || !strings.Contains(p.Err.Error(), "unreadable") {
		t.Fatalf("unreadable anchors: %+v", p)
	}
}

// TestPassRate: a pass checks at most Rate records per second.
func TestPassRate(t *testing.T) {
	l, _ := audittest.Open(t, audit.Options{})
	appendN(t, l, 300)
	s := newScrubber(t, scrub.Config{Log: l, Rate: 1000})
	start := time.Now()
	p := s.Pass(context.Background())
	if !p.OK() {
		t.Fatalf("pass = %+v", p)
	}
	if took := time.Since(start); took < 280*time.Millisecond {
		t.Errorf("300 records at 1000/s took %v", took)
	}
}

// TestRunSchedules: Run passes at once and then every Interval, each over
// the records there are when it starts, and stops with its ctx.
func TestRunSchedules(t *testing.T) {
	l, _ := audittest.Open(t, audit.Options{})
	appendN(t, l, 3)
	var mu sync.Mutex
	var sizes []int64
	ctx, cancel := context.WithCancel(context.Background())
	s := newScrubber(t, scrub.Config{Log: l, Interval: 30 * time.Millisecond, OnPass: func(p scrub.Pass) {
		if !p.OK() {
			t.Errorf("pass = %+v", p)
		}
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, p.Size)
		if len(sizes) == 1 { // not t.Fatal: this is Run's goroutine
			for i := range 2 {
				if _, err := l.Append(context.Background(), entry(i)); err != nil {
					t.Error(err)
				}
			}
		}
		if len(sizes) == 3 {
			cancel()
		}
	}})
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not make three passes and stop")
	}
	if !slices.Equal(sizes, []int64{3, 5, 5}) {
		t.Errorf("pass sizes %v", sizes)
	}
}

// TestEntryIsAValidRecord: the audit record of a broken pass appends.
func TestEntryIsAValidRecord(t *testing.T) {
	l, _ := audittest.Open(t, audit.Options{})
	p := scrub.Pass{Size: 9, Found: 2, Problems: []audit.Problem{{Seq: 7, Kind: audit.KindHashMismatch}}}
	rec, err := l.Append(context.Background(), p.Entry())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Action != "audit/integrity" || rec.Outcome != audit.OutcomeError || rec.Reason != "kind=hash_mismatch,seq=7,problems=2,size=9" {
		t.Errorf("record %+v", rec)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := scrub.New(scrub.Config{}); err == nil {
		t.Error("no Log accepted")
	}
	l, _ := audittest.Open(t, audit.Options{})
	if _, err := scrub.New(scrub.Config{Log: l, Rate: -1}); err == nil {
		t.Error("negative rate accepted")
	}
}
