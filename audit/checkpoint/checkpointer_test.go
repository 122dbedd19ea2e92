package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

type cpFixture struct {
	s          *Signer
	ks         *fakeKS
	tree       *memTree
	local, ext *Anchor
	c          *Checkpointer
}

func newCP(t *testing.T, tree *memTree, every int64, interval time.Duration) *cpFixture {
	t.Helper()
	s, ks, _ := testSigner(t)
	f := &cpFixture{s: s, ks: ks, tree: tree, local: &Anchor{Dir: t.TempDir()}, ext: &Anchor{Dir: t.TempDir()}}
	c, err := New(Config{Origin: testOrigin, Signer: s, Tree: tree, Anchors: []*Anchor{f.local, f.ext},
		Every: every, Interval: interval, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

// sizes returns the sizes in an anchor, failing on any read error.
func sizes(t *testing.T, a *Anchor) []int64 {
	t.Helper()
	es, err := a.All()
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range es {
		out = append(out, e.Size)
	}
	return out
}

func equalSizes(a []int64, b ...int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// waitFor polls cond; the long deadline only bounds a hung test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func lastSize(c *Checkpointer) int64 {
	e, ok := c.LastCheckpoint()
	if !ok {
		return -1
	}
	return e.Size
}

func startRun(t *testing.T, c *Checkpointer) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	waitFor(t, "Run to start", func() bool {
		c.lmu.Lock()
		defer c.lmu.Unlock()
		return c.running
	})
	return done
}

func TestCheckpointerEvery(t *testing.T) {
	f := newCP(t, &memTree{}, 10, time.Hour)
	done := startRun(t, f.c)

	f.tree.grow("rec", 10)
	f.c.Notify(10)
	waitFor(t, "checkpoint at 10", func() bool { return lastSize(f.c) == 10 && f.c.LastError() == nil })
	f.tree.grow("rec", 10)
	f.c.Notify(20)
	waitFor(t, "checkpoint at 20", func() bool { return lastSize(f.c) == 20 && f.c.LastError() == nil })

	if err := f.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	for _, a := range []*Anchor{f.local, f.ext} {
		if got := sizes(t, a); !equalSizes(got, 10, 20) {
			t.Fatalf("%s: sizes %v, want [10 20]", a.Dir, got)
		}
	}
	// Every anchored note verifies and matches the tree.
	es, _ := f.ext.All()
	verifiers, err := ParseVerifierFile([]byte(f.s.VerifierKey()))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckAgainst(context.Background(), f.tree, es, verifiers); err != nil {
		t.Fatalf("CheckAgainst anchored checkpoints: %v", err)
	}
}

func TestCheckpointerInterval(t *testing.T) {
	f := newCP(t, newTree("rec", 3), 1<<40, 5*time.Millisecond)
	done := startRun(t, f.c)
	waitFor(t, "checkpoint at 3", func() bool { return lastSize(f.c) == 3 })
	f.tree.grow("rec", 4) // no Notify: the ticker finds it
	waitFor(t, "checkpoint at 7", func() bool { return lastSize(f.c) == 7 && f.c.LastError() == nil })
	if err := f.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done
	if got := sizes(t, f.ext); got[len(got)-1] != 7 {
		t.Fatalf("sizes %v", got)
	}
}

func TestCheckpointerClose(t *testing.T) {
	f := newCP(t, &memTree{}, 1<<40, time.Hour)
	done := startRun(t, f.c)
	f.tree.grow("rec", 7)
	f.c.Notify(7) // below Every: no checkpoint due
	if err := f.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	for _, a := range []*Anchor{f.local, f.ext} {
		if got := sizes(t, a); !equalSizes(got, 7) {
			t.Fatalf("sizes %v, want [7]", got)
		}
	}
	if err := f.c.Close(context.Background()); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if err := f.c.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close = %v", err)
	}
	f.c.Notify(100) // must not block or panic
}

func TestCheckpointerCloseWithoutRunAndNoGrowth(t *testing.T) {
	f := newCP(t, newTree("rec", 4), 0, 0)
	if f.c.cfg.Every != DefaultEvery || f.c.cfg.Interval != DefaultInterval {
		t.Fatalf("defaults not applied: %+v", f.c.cfg)
	}
	ctx := context.Background()
	if err := f.c.step(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The head did not grow: no second line for size 4.
	if got := sizes(t, f.local); !equalSizes(got, 4) {
		t.Fatalf("sizes %v", got)
	}
}

func TestCheckpointerResumesFromAnchors(t *testing.T) {
	ctx := context.Background()
	f := newCP(t, newTree("rec", 5), 1, time.Hour)
	if err := f.c.step(ctx); err != nil {
		t.Fatal(err)
	}
	// A new process: same anchors, the tree grew.
	f.tree.grow("rec", 3)
	c2, err := New(Config{Origin: testOrigin, Signer: f.s, Tree: f.tree, Anchors: []*Anchor{f.local, f.ext}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sizes(t, f.ext); !equalSizes(got, 5, 8) {
		t.Fatalf("sizes %v", got)
	}
}

func TestCheckpointerIntegrity(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		tree Tree
		want error
	}{
		{"rolled back", newTree("rec", 6), ErrRolledBack},
		{"forked", func() *memTree { m := newTree("rec", 6); m.grow("evil", 4); return m }(), ErrFork},
		{"inconsistent", &lyingTree{memTree: newTree("rec", 20)}, ErrInconsistent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCP(t, newTree("rec", 10), 1, time.Hour)
			if err := f.c.Close(ctx); err != nil {
				t.Fatal(err)
			}
			// A new process on another tree, same anchors.
			c, err := New(Config{Origin: testOrigin, Signer: f.s, Tree: tc.tree, Anchors: []*Anchor{f.local, f.ext}, Interval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Run(ctx); !errors.Is(err, tc.want) {
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
			if !errors.Is(c.LastError(), tc.want) {
				t.Fatalf("LastError = %v", c.LastError())
			}
			for _, a := range []*Anchor{f.local, f.ext} {
				if got := sizes(t, a); !equalSizes(got, 10) {
					t.Fatalf("something was anchored: %v", got)
				}
			}
		})
	}
}

func TestCheckpointerRetries(t *testing.T) {
	ctx := context.Background()
	tree := newTree("rec", 3)
	s, ks, _ := testSigner(t)
	local := &Anchor{Dir: t.TempDir()}
	ext := &Anchor{Dir: filepath.Join(t.TempDir(), "mnt")} // not mounted yet
	c, err := New(Config{Origin: testOrigin, Signer: s, Tree: tree, Anchors: []*Anchor{local, ext}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.step(ctx); err == nil || c.LastError() == nil {
		t.Fatal("missing external anchor: no error")
	}
	if got := sizes(t, local); !equalSizes(got, 3) {
		t.Fatalf("local sizes %v", got)
	}
	// The external anchor appears: it receives the same signed checkpoint.
	if err := os.Mkdir(ext.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := c.step(ctx); err != nil {
		t.Fatal(err)
	}
	le, _ := local.All()
	ee, _ := ext.All()
	if len(ee) != 1 || string(ee[0].Note) != string(le[0].Note) {
		t.Fatalf("external anchor: %+v", ee)
	}

	// Signing fails: nothing anchored, error kept; then it recovers.
	tree.grow("rec", 2)
	ks.setSignErr(errors.New("vault sealed"))
	if err := c.step(ctx); err == nil || c.LastError() == nil {
		t.Fatal("sign failure not reported")
	}
	if got := sizes(t, local); !equalSizes(got, 3) {
		t.Fatalf("anchored despite sign failure: %v", got)
	}
	ks.setSignErr(nil)
	ks.rotate(9) // and the key rotates meanwhile
	if err := c.step(ctx); err != nil || c.LastError() != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if got := sizes(t, ext); !equalSizes(got, 3, 5) {
		t.Fatalf("sizes %v", got)
	}
	vkeys, err := VerifierKeys(testOrigin, ks)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseVerifierFile(FormatVerifierFile(vkeys))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := Load(local, ext)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckAgainst(ctx, tree, entries, v); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointerConcurrent(t *testing.T) {
	f := newCP(t, &memTree{}, 5, time.Millisecond)
	done := startRun(t, f.c)
	var wg sync.WaitGroup
	var mu sync.Mutex // serializes the appenders, like the audit log does
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				mu.Lock()
				f.tree.grow("rec", 1)
				n := f.tree.size()
				mu.Unlock()
				f.c.Notify(n)
				_, _ = f.c.LastCheckpoint()
				_ = f.c.LastError()
			}
		}()
	}
	wg.Wait()
	if err := f.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := sizes(t, f.ext)
	if len(got) == 0 || got[len(got)-1] != 100 {
		t.Fatalf("sizes %v, want last 100", got)
	}
	if err := CheckMonotonic(mustAll(t, f.ext)); err != nil {
		t.Fatal(err)
	}
	verifiers, _ := ParseVerifierFile([]byte(f.s.VerifierKey()))
	if err := CheckAgainst(context.Background(), f.tree, mustAll(t, f.local), verifiers); err != nil {
		t.Fatal(err)
	}
}

func mustAll(t *testing.T, a *Anchor) []Entry {
	t.Helper()
	es, err := a.All()
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestNewRejects(t *testing.T) {
	s, _, _ := testSigner(t)
	tree := newTree("rec", 1)
	a := []*Anchor{{Dir: t.TempDir()}}
	for name, cfg := range map[string]Config{
		"no origin":       {Signer: s, Tree: tree, Anchors: a},
		"no signer":       {Origin: testOrigin, Tree: tree, Anchors: a},
		"signer name":     {Origin: "custos.other/x/audit", Signer: s, Tree: tree, Anchors: a},
		"no tree":         {Origin: testOrigin, Signer: s, Anchors: a},
		"no anchors":      {Origin: testOrigin, Signer: s, Tree: tree},
		"empty dir":       {Origin: testOrigin, Signer: s, Tree: tree, Anchors: []*Anchor{{}}},
		"negative every":  {Origin: testOrigin, Signer: s, Tree: tree, Anchors: a, Every: -1},
		"negative period": {Origin: testOrigin, Signer: s, Tree: tree, Anchors: a, Interval: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}
