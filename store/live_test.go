package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// pages is a pager over an in-memory sorted list, to test diff's merge.
type pages []Resource

func (p pages) Page(after string, limit int) ([]Resource, error) {
	var out []Resource
	for _, r := range p {
		if r.URI > after && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func TestDiff(t *testing.T) {
	r := func(uri string, v int, etag string) Resource { return Resource{URI: uri, Version: v, Digest: etag} }
	many := func(prefix string, n int) pages {
		var out pages
		for i := range n {
			out = append(out, r(prefix+strings.Repeat("x", 1)+string(rune('a'+i/676))+string(rune('a'+i/26%26))+string(rune('a'+i%26)), 1, "e"))
		}
		return out
	}
	big := many("k", diffPage*2+3)
	bigChanged := slices.Clone(big)
	bigChanged[diffPage] = r(big[diffPage].URI, 2, "f")
	tests := []struct {
		name     string
		old, new pages
		want     Change
	}{
		{"both empty", nil, nil, Change{}},
		{"all added", nil, pages{r("a", 1, "x"), r("b", 1, "y")}, Change{Added: []string{"a", "b"}}},
		{"all removed", pages{r("a", 1, "x")}, nil, Change{Removed: []string{"a"}}},
		{"removed with its patient", pages{r("a", 1, "x"), {URI: "b", Version: 1, Digest: "y", Labels: Labels{Patient: "MRN-1"}}}, pages{r("a", 1, "x")},
			Change{Removed: []string{"b"}, RemovedPatients: map[string]string{"b": "MRN-1"}}},
		{"unchanged", pages{r("a", 1, "x")}, pages{r("a", 1, "x")}, Change{}},
		{"new version", pages{r("a", 1, "x")}, pages{r("a", 2, "x")}, Change{Updated: []string{"a"}}},
		{"new etag", pages{r("a", 1, "x")}, pages{r("a", 1, "y")}, Change{Updated: []string{"a"}}},
		{"interleaved", pages{r("a", 1, "x"), r("c", 1, "x"), r("e", 1, "x")}, pages{r("b", 1, "x"), r("c", 2, "z"), r("d", 1, "x")},
			Change{Updated: []string{"c"}, Added: []string{"b", "d"}, Removed: []string{"a", "e"}}},
		{"across pages", big, bigChanged, Change{Updated: []string{big[diffPage].URI}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := diff(tc.old, tc.new)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Updated, tc.want.Updated) || !slices.Equal(got.Added, tc.want.Added) || !slices.Equal(got.Removed, tc.want.Removed) {
				t.Fatalf("diff = %+v, want %+v", got, tc.want)
			}
			if got.ListChanged() != (len(tc.want.Added)+len(tc.want.Removed) > 0) || got.Empty() != tc.want.Empty() {
				t.Fatalf("ListChanged/Empty wrong for %+v", got)
			}
		})
	}
}

// liveSetup imports a fixture into dir/catalog.db with ImportStaged.
func liveSetup(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t)
	f.addN(9)
	f.writeManifest()
	path := filepath.Join(t.TempDir(), "catalog.db")
	rep, err := ImportStaged(context.Background(), path, f.dir, Options{Timeout: 200 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Created != 9 {
		t.Fatalf("first staged import: %+v", rep)
	}
	t.Cleanup(func() { checkDB(t, path) })
	return f, path
}

func sameInode(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(fa, fb)
}

// scratchFiles lists leftover scratch files next to path.
func scratchFiles(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".import-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestImportStagedWhileServing(t *testing.T) {
	f, path := liveSetup(t)
	var (
		mu      sync.Mutex
		changes []Change
	)
	l, err := OpenLive(path, LiveOptions{Options: Options{Timeout: 200 * time.Millisecond}, OnChange: func(c Change) {
		mu.Lock()
		changes = append(changes, c)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	changed := f.entries[1]
	old, err := l.Get(changed.URI)
	if err != nil {
		t.Fatal(err)
	}
	oldData := f.readFile(changed.File)

	// Nothing replaced yet: Reload is a no-op.
	if _, swapped, err := l.Reload(); err != nil || swapped {
		t.Fatalf("Reload before any import = %v, %v", swapped, err)
	}

	// The live catalog holds a shared lock; the staged import does not need
	// the write lock on it.
	f.writeFile(changed.File, content(mustParse(t, changed.URI), "version two"))
	f.add("note")
	f.writeManifest()
	rep, err := ImportStaged(context.Background(), path, f.dir, Options{Timeout: 200 * time.Millisecond}, nil)
	if err != nil {
		t.Fatalf("ImportStaged while a Live holds the catalog: %v", err)
	}
	if rep.Updated != 1 || rep.Created != 1 {
		t.Fatalf("report = %+v", rep)
	}
	if left := scratchFiles(t, path); len(left) != 0 {
		t.Fatalf("scratch files left: %v", left)
	}
	// Still the old catalog until Reload.
	if r, _ := l.Get(changed.URI); r.Version != 1 {
		t.Fatalf("before Reload: version %d", r.Version)
	}
	ch, swapped, err := l.Reload()
	if err != nil || !swapped {
		t.Fatalf("Reload = %v, %v", swapped, err)
	}
	if !slices.Equal(ch.Updated, []string{changed.URI}) || len(ch.Added) != 1 || len(ch.Removed) != 0 {
		t.Fatalf("change = %+v", ch)
	}
	mu.Lock()
	if len(changes) != 1 || !slices.Equal(changes[0].Updated, ch.Updated) {
		t.Fatalf("OnChange calls = %+v", changes)
	}
	mu.Unlock()
	cur, err := l.Get(changed.URI)
	if err != nil || cur.Version != 2 || cur.Digest == old.Digest {
		t.Fatalf("after Reload: %+v, %v", cur, err)
	}
	// A digest read before the swap is still served after it.
	if b, err := l.Blob(context.Background(), old.Digest); err != nil || !bytes.Equal(b, oldData) {
		t.Fatalf("old blob after swap: %v", err)
	}
	if n, err := l.Count(); err != nil || n != 10 {
		t.Fatalf("Count = %d, %v", n, err)
	}
	// An import that changes nothing does not replace the file.
	before, _ := os.Stat(path)
	if _, err := ImportStaged(context.Background(), path, f.dir, Options{Timeout: 200 * time.Millisecond}, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) {
		t.Fatal("an unchanged import replaced the catalog file")
	}
}

func TestImportStagedAllOrNothing(t *testing.T) {
	f, path := liveSetup(t)
	ref := filepath.Join(t.TempDir(), "ref")
	if err := os.Link(path, ref); err != nil {
		t.Fatal(err)
	}
	lines := f.lines()
	lines = append(lines, `{"uri":"not a uri"}`)
	f.writeManifest(lines...)
	_, err := ImportStaged(context.Background(), path, f.dir, Options{Timeout: 200 * time.Millisecond}, nil)
	if !errors.Is(err, ErrBadManifest) {
		t.Fatalf("bad manifest: err = %v", err)
	}
	if !sameInode(t, path, ref) {
		t.Fatal("a failed import replaced the catalog")
	}
	if left := scratchFiles(t, path); len(left) != 0 {
		t.Fatalf("scratch files left: %v", left)
	}
	// A plaintext catalog refuses data keys: the mode checks of Open apply
	// to the staged copy.
	f.writeManifest()
	_, err = ImportStaged(context.Background(), path, f.dir, Options{Timeout: 200 * time.Millisecond, DataKeys: newFakeKeys(testKEK)}, nil)
	if !errors.Is(err, ErrPlaintext) {
		t.Fatalf("import with data keys into a plaintext catalog: err = %v", err)
	}
	if !sameInode(t, path, ref) || len(scratchFiles(t, path)) != 0 {
		t.Fatal("a refused import left traces")
	}
}

func TestImportStagedSerialized(t *testing.T) {
	f, path := liveSetup(t)
	unlock, err := lockFile(path+".import.lock", path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ImportStaged(context.Background(), path, f.dir, Options{Timeout: 100 * time.Millisecond}, nil)
	unlock()
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("import while another holds the import lock: err = %v", err)
	}
	if _, err := ImportStaged(context.Background(), path, f.dir, Options{Timeout: 100 * time.Millisecond}, nil); err != nil {
		t.Fatalf("after the lock is released: %v", err)
	}
}

func TestLiveKeepsServingWhenReplacementFails(t *testing.T) {
	f, path := liveSetup(t)
	l, err := OpenLive(path, LiveOptions{Options: Options{Timeout: 200 * time.Millisecond}, OnChange: func(Change) { t.Error("OnChange called for a bad file") }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	keep := filepath.Join(t.TempDir(), "keep.db")
	if err := os.Link(path, keep); err != nil {
		t.Fatal(err)
	}
	junk := path + ".junk"
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not a bbolt file "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(junk, path); err != nil {
		t.Fatal(err)
	}
	if _, swapped, err := l.Reload(); err == nil || swapped {
		t.Fatalf("Reload of a junk file = %v, %v; want an error and no swap", swapped, err)
	}
	if _, err := l.Get(f.entries[0].URI); err != nil {
		t.Fatalf("old catalog no longer served: %v", err)
	}
	// The same bad file is not retried.
	if _, swapped, err := l.Reload(); err != nil || swapped {
		t.Fatalf("second Reload of the same bad file = %v, %v", swapped, err)
	}
	// Once a good file (a copy: another inode) is back it is swapped in.
	data, err := os.ReadFile(keep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(junk, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(junk, path); err != nil {
		t.Fatal(err)
	}
	if ch, swapped, err := l.Reload(); err != nil || !swapped || !ch.Empty() {
		t.Fatalf("Reload of a good file = %+v, %v, %v", ch, swapped, err)
	}
}

func TestLiveClose(t *testing.T) {
	f, path := liveSetup(t)
	l, err := OpenLive(path, LiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Get(f.entries[0].URI); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, _, err := l.Reload(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reload after Close: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { l.Watch(ctx); close(done) }()
	<-done // Watch returns by itself once the catalog is closed
}

func TestLiveWatchSwaps(t *testing.T) {
	f, path := liveSetup(t)
	got := make(chan Change, 1)
	l, err := OpenLive(path, LiveOptions{Interval: 10 * time.Millisecond, OnChange: func(c Change) { got <- c }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Watch(ctx)
	f.entries[2].Title = "Retitled"
	f.writeManifest()
	if _, err := ImportStaged(context.Background(), path, f.dir, Options{}, nil); err != nil {
		t.Fatal(err)
	}
	c := <-got
	if !slices.Equal(c.Updated, []string{f.entries[2].URI}) {
		t.Fatalf("change = %+v", c)
	}
}

// Calls in flight while catalogs are swapped finish on the catalog they
// started on, and no call sees a closed catalog (run with -race).
func TestLiveSwapUnderLoad(t *testing.T) {
	f, path := liveSetup(t)
	l, err := OpenLive(path, LiveOptions{Options: Options{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first, err := l.Get(f.entries[0].URI)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := l.Blob(context.Background(), first.Digest); err != nil {
					errs <- err
					return
				}
				if _, err := l.Page("", 5); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 5 {
		f.entries[3].Title = "Title " + strings.Repeat("x", i+1)
		f.writeManifest()
		if _, err := ImportStaged(context.Background(), path, f.dir, Options{Timeout: time.Second}, nil); err != nil {
			t.Fatal(err)
		}
		if _, swapped, err := l.Reload(); err != nil || !swapped {
			t.Fatalf("Reload %d = %v, %v", i, swapped, err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call during swaps: %v", err)
	}
	if r, _ := l.Get(f.entries[3].URI); r.Version != 6 {
		t.Fatalf("after 5 swaps: version %d, want 6", r.Version)
	}
}

// A catalog file that disappears while serving (deleted by mistake) does
// not stop the open catalog, and the failure is logged once, not at every
// poll.
func TestLiveKeepsServingWhenTheFileIsRemoved(t *testing.T) {
	_, path, l, logs, before := logLive(t)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, swapped, err := l.Reload(); err == nil || swapped {
			t.Fatalf("Reload of a removed file: swapped=%v err=%v", swapped, err)
		}
	}
	if n := strings.Count(logs.String(), "catalog file cannot be examined"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, logs.String())
	}
	if after, err := l.Count(); err != nil || after != before {
		t.Fatalf("the open catalog stopped serving: %d, %v (had %d)", after, err, before)
	}
}

// A catalog file whose labels an older custos left unsettled
// (testdata/catalog-ac158dd: FHIR input imported by ac158dd, no label
// indexes), put in place of the one serving, is not swapped in
// (ErrUnsettledLabels): the open catalog keeps serving, the failure is
// logged once, and the file is not tried again until it is replaced. The
// check OpenLive makes at the start (app#TestServeRefusesACatalogWithUnsettledLabels)
// is made for every file Reload would swap in.
func TestLiveDoesNotSwapInACatalogWithUnsettledLabels(t *testing.T) {
	f, path, l, logs, before := logLive(t)
	old, err := os.ReadFile(filepath.Join("testdata", "catalog-ac158dd", "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".new", old, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if _, swapped, err := l.Reload(); !errors.Is(err, ErrUnsettledLabels) || swapped || !strings.Contains(err.Error(), "optout") {
		t.Fatalf("Reload of ac158dd's catalog: swapped=%v err=%v; want ErrUnsettledLabels naming optout", swapped, err)
	}
	for range 2 {
		if _, swapped, err := l.Reload(); err != nil || swapped {
			t.Fatalf("Reload of the file again: swapped=%v err=%v; want it not tried again", swapped, err)
		}
	}
	if n := strings.Count(logs.String(), "replaced catalog file does not open"); n != 1 || !strings.Contains(logs.String(), "optout") {
		t.Fatalf("logged %d times, want once naming optout:\n%s", n, logs.String())
	}
	if after, err := l.Count(); err != nil || after != before {
		t.Fatalf("the open catalog stopped serving: %d, %v (had %d)", after, err, before)
	}
	if r, err := l.Get(f.entries[0].URI); err != nil || r.URI != f.entries[0].URI {
		t.Fatalf("Get on the open catalog: %v", err)
	}
}

// logLive serves a catalog of three manifest entries (f's) at path with
// Live l, logging to logs; before is its Count.
func logLive(t *testing.T) (f *fixture, path string, l *Live, logs *bytes.Buffer, before int) {
	t.Helper()
	f = newFixture(t)
	f.addN(3)
	f.writeManifest()
	path = filepath.Join(t.TempDir(), "catalog.db")
	if _, err := ImportStaged(context.Background(), path, f.dir, Options{Timeout: 200 * time.Millisecond}, nil); err != nil {
		t.Fatal(err)
	}
	logs = new(bytes.Buffer)
	l, err := OpenLive(path, LiveOptions{Options: Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if before, err = l.Count(); err != nil {
		t.Fatal(err)
	}
	return f, path, l, logs, before
}
