package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// events collects Reloader events and lets a test wait for the next one.
type events struct {
	mu   sync.Mutex
	all  []Event
	next chan Event
}

func newEvents() *events { return &events{next: make(chan Event, 100)} }

func (ev *events) record(e Event) error {
	ev.mu.Lock()
	ev.all = append(ev.all, e)
	ev.mu.Unlock()
	ev.next <- e
	return nil
}

// wait returns the next event. The generous bound only keeps a broken
// implementation from hanging the test run; it is not a latency assertion.
func (ev *events) wait(t *testing.T) Event {
	t.Helper()
	select {
	case e := <-ev.next:
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("no reload event")
		return Event{}
	}
}

// swapped waits until r serves the engine of a policy_loaded event: OnEvent
// runs before the swap (so that it can veto it), so an event can arrive a
// moment before Current returns the new engine.
func swapped(t *testing.T, r *Reloader, e Event) {
	t.Helper()
	if e.Kind != EventLoaded {
		t.Fatalf("event %+v, want %s", e, EventLoaded)
	}
	for i := 0; r.Revision() != e.Revision || r.BundleDigest() != e.BundleDigest; i++ {
		if i == 30000 {
			t.Fatalf("event %+v: engine never swapped in", e)
		}
		time.Sleep(time.Millisecond)
	}
}

func decideReason(t *testing.T, e *Engine) string {
	t.Helper()
	d, err := e.Decide(context.Background(), readInput)
	if err != nil || len(d.Reasons) != 1 {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
	return d.Reasons[0]
}

func updatePolicy(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		writeFile(t, filepath.Join(dir, p), c)
	}
}

const brokenModule = "package custos.authz\n\ndecision := {\n"

func TestReloaderDirReload(t *testing.T) {
	ctx := context.Background()
	dir := writeDir(t, reasonPolicy("a"))
	ev := newEvents()
	r, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{OnEvent: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	first := ev.wait(t)
	revA := r.Revision()
	if first.Kind != EventLoaded || first.Revision != revA || first.PreviousRevision != "" ||
		first.Source != "dir:"+dir || first.CandidateDigest == "" || first.BundleDigest != "" {
		t.Errorf("initial event %+v", first)
	}

	updatePolicy(t, dir, reasonPolicy("b"))
	got, err := r.Reload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	revB := r.Revision()
	if revB == revA || got.Kind != EventLoaded || got.Revision != revB || got.PreviousRevision != revA {
		t.Errorf("reload event %+v (revA %s, revB %s)", got, revA, revB)
	}
	if e := ev.wait(t); e != got {
		t.Errorf("OnEvent got %+v, Reload returned %+v", e, got)
	}
	if reason := decideReason(t, r.Current()); reason != "b" {
		t.Errorf("after reload: reason %q, want b", reason)
	}

	// A broken candidate is rejected and b keeps serving.
	writeFile(t, filepath.Join(dir, "custos/authz.rego"), brokenModule)
	got, err = r.Reload(ctx)
	if !errors.Is(err, ErrCompile) {
		t.Fatalf("Reload of a broken policy: err = %v, want ErrCompile", err)
	}
	fp, _ := DirSource{Dir: dir}.Fingerprint()
	if got.Kind != EventRejected || got.Revision != revB || got.Reason == "" || got.CandidateDigest != fp {
		t.Errorf("rejection event %+v (fingerprint %s)", got, fp)
	}
	if e := ev.wait(t); e.Kind != EventRejected {
		t.Errorf("OnEvent got %+v", e)
	}
	if r.Revision() != revB || decideReason(t, r.Current()) != "b" {
		t.Errorf("after rejection: revision %s, want %s", r.Revision(), revB)
	}

	// A candidate whose tests fail is rejected too.
	bad := reasonPolicy("c")
	bad["custos/authz_test.rego"] = reasonPolicy("d")["custos/authz_test.rego"]
	updatePolicy(t, dir, bad)
	if _, err := r.Reload(ctx); !errors.Is(err, ErrTestsFailed) || r.Revision() != revB {
		t.Fatalf("Reload with failing tests: err = %v, revision %s", err, r.Revision())
	}

	// Fixed: loaded, and back to the first policy's revision.
	updatePolicy(t, dir, reasonPolicy("a"))
	if got, err = r.Reload(ctx); err != nil || got.Revision != revA || r.Revision() != revA {
		t.Fatalf("Reload after fix = %+v, %v", got, err)
	}
}

// watchPolicy has the reason code in authz.rego only, so that replacing that
// one file (atomically) changes the policy without an intermediate state.
func watchPolicy(reason string) string {
	return reasonPolicy(reason)["custos/authz.rego"]
}

func TestReloaderWatchDir(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	files := reasonPolicy("a")
	files["custos/authz_test.rego"] = "package custos.authz_test\n\nimport data.custos.authz\n\n" +
		"test_read_allowed if authz.decision.allow with input as {\"action\": \"read\"}\n"
	dir := writeDir(t, files)
	authz := filepath.Join(dir, "custos/authz.rego")
	ev := newEvents()
	r, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{OnEvent: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	ev.wait(t)
	revA := r.Revision()
	done := make(chan error, 1)
	go func() { done <- r.Watch(ctx, 5*time.Millisecond) }()

	replaceFile(t, authz, []byte(watchPolicy("b")))
	e := ev.wait(t)
	swapped(t, r, e)
	if e.PreviousRevision != revA || decideReason(t, r.Current()) != "b" {
		t.Fatalf("after change: event %+v", e)
	}
	revB := r.Revision()

	extra := filepath.Join(dir, "custos/extra.rego")
	replaceFile(t, extra, []byte("package custos.extra\n\nx := {\n"))
	if e := ev.wait(t); e.Kind != EventRejected || e.Revision != revB || r.Revision() != revB {
		t.Fatalf("after broken file added: event %+v", e)
	}
	if decideReason(t, r.Current()) != "b" {
		t.Fatal("the last good policy is not serving")
	}

	if err := os.Remove(extra); err != nil {
		t.Fatal(err)
	}
	// Removing the broken file restores revB's files; they are loaded again
	// (a new engine with the same revision).
	if e := ev.wait(t); e.Kind != EventLoaded || e.Revision != revB {
		t.Fatalf("after broken file removed: event %+v", e)
	}

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch returned %v", err)
	}
	select {
	case e := <-ev.next:
		t.Fatalf("unexpected extra event %+v", e)
	default:
	}
}

// replaceFile writes data to path atomically, as a deployment should.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestReloaderWatchBundle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signer := newSigner(t, "k1")
	bundleBytes := func(reason string, sign bool) ([]byte, string) {
		b := newBundle(filesOf(reasonPolicy(reason)), reason)
		if sign {
			if err := SignBundle(ctx, b, signer); err != nil {
				t.Fatal(err)
			}
		}
		p, digest := writeBundleFile(t, b)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return data, digest
	}
	path := filepath.Join(t.TempDir(), "policy.tar.gz")
	a, digestA := bundleBytes("a", true)
	replaceFile(t, path, a)

	ev := newEvents()
	src := BundleSource{Path: path, Keys: []VerificationKey{signer.VerificationKey()}}
	r, err := New(ctx, src, ReloaderOptions{OnEvent: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	if e := ev.wait(t); e.BundleDigest != digestA || e.CandidateDigest != digestA || r.BundleDigest() != digestA {
		t.Fatalf("initial event %+v", e)
	}
	go r.Watch(ctx, 5*time.Millisecond) //nolint:errcheck

	b, digestB := bundleBytes("b", true)
	replaceFile(t, path, b)
	e := ev.wait(t)
	swapped(t, r, e)
	if e.BundleDigest != digestB || decideReason(t, r.Current()) != "b" {
		t.Fatalf("after signed bundle b: event %+v", e)
	}

	unsigned, digestU := bundleBytes("c", false)
	replaceFile(t, path, unsigned)
	e = ev.wait(t)
	if e.Kind != EventRejected || e.CandidateDigest != digestU || e.BundleDigest != digestB ||
		r.BundleDigest() != digestB || decideReason(t, r.Current()) != "b" {
		t.Fatalf("after unsigned bundle: event %+v", e)
	}
	t.Logf("unsigned bundle: %s", e.Reason)

	// A half-written file is rejected, then the complete one loads.
	replaceFile(t, path, a[:len(a)/2])
	if e := ev.wait(t); e.Kind != EventRejected || r.BundleDigest() != digestB {
		t.Fatalf("after truncated bundle: event %+v", e)
	}
	replaceFile(t, path, a)
	e = ev.wait(t)
	swapped(t, r, e)
	if e.BundleDigest != digestA {
		t.Fatalf("after bundle a again: event %+v", e)
	}
}

func TestReloaderInitialLoadMustSucceed(t *testing.T) {
	ctx := context.Background()
	dir := writeDir(t, map[string]string{"custos/authz.rego": brokenModule})
	ev := newEvents()
	if r, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{OnEvent: ev.record}); r != nil || !errors.Is(err, ErrCompile) {
		t.Fatalf("New = %v, %v; want ErrCompile", r, err)
	}
	if e := ev.wait(t); e.Kind != EventRejected || e.Revision != "" {
		t.Fatalf("event %+v", e)
	}
	src := BundleSource{Path: filepath.Join(t.TempDir(), "none.tar.gz"), Keys: []VerificationKey{newSigner(t, "k").VerificationKey()}}
	if _, err := New(ctx, src, ReloaderOptions{}); !errors.Is(err, ErrBundle) {
		t.Fatalf("New with a missing bundle: %v", err)
	}
	if _, err := New(ctx, BundleSource{Path: src.Path}, ReloaderOptions{}); !errors.Is(err, ErrKey) {
		t.Fatalf("New with no keys: %v", err)
	}
}

func TestReloaderEventHookVeto(t *testing.T) {
	ctx := context.Background()
	dir := writeDir(t, reasonPolicy("a"))
	hookErr := errors.New("audit log unavailable")
	var fail atomic.Bool
	var kinds []string
	hook := func(e Event) error {
		kinds = append(kinds, e.Kind)
		if fail.Load() {
			return hookErr
		}
		return nil
	}
	fail.Store(true)
	if _, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{OnEvent: hook}); !errors.Is(err, ErrEventHook) || !errors.Is(err, hookErr) {
		t.Fatalf("New with a failing hook: %v", err)
	}
	fail.Store(false)
	r, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{OnEvent: hook})
	if err != nil {
		t.Fatal(err)
	}
	revA := r.Revision()
	updatePolicy(t, dir, reasonPolicy("b"))
	fail.Store(true)
	ev, err := r.Reload(ctx)
	if !errors.Is(err, ErrEventHook) || ev.Kind != EventRejected || r.Revision() != revA {
		t.Fatalf("Reload with a failing hook: %+v, %v; revision %s", ev, err, r.Revision())
	}
	want := []string{EventLoaded, EventRejected, EventLoaded, EventLoaded, EventRejected}
	if len(kinds) != len(want) {
		t.Fatalf("hook saw %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("hook saw %v, want %v", kinds, want)
		}
	}
}

// A good candidate refused only because its load could not be recorded
// (the audit log was unavailable) is loaded once recording works again,
// without another change to the source; while recording fails, the last
// good policy keeps serving.
func TestWatchRetriesCandidateVetoedByHook(t *testing.T) {
	defer func(d time.Duration) { hookRetryInterval = d }(hookRetryInterval)
	hookRetryInterval = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := writeDir(t, reasonPolicy("a"))
	var fail atomic.Bool
	var vetoed atomic.Int32
	hook := func(e Event) error {
		if fail.Load() && e.Kind == EventLoaded {
			vetoed.Add(1)
			return errors.New("audit log unavailable")
		}
		return nil
	}
	r, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{OnEvent: hook})
	if err != nil {
		t.Fatal(err)
	}
	revA := r.Revision()
	fail.Store(true)
	go r.Watch(ctx, 10*time.Millisecond)
	updatePolicy(t, dir, reasonPolicy("b"))
	deadline := time.Now().Add(10 * time.Second)
	for vetoed.Load() < 2 { // retried, not given up after the first veto
		if time.Now().After(deadline) {
			t.Fatalf("candidate vetoed %d times; want it retried", vetoed.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.Revision() != revA {
		t.Fatal("a candidate whose load was not recorded is serving")
	}
	fail.Store(false)
	for r.Revision() == revA {
		if time.Now().After(deadline) {
			t.Fatal("the candidate was never loaded after recording recovered")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatchNeedsFingerprinter(t *testing.T) {
	r, err := New(context.Background(), staticSource{}, ReloaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Watch(context.Background(), 0); err == nil {
		t.Fatal("Watch of a source without Fingerprint: want error")
	}
}

type staticSource struct{}

func (staticSource) Describe() string { return "static" }
func (staticSource) Load(ctx context.Context) (*Engine, error) {
	return Default(ctx, Options{})
}

// TestReloadUnderLoad swaps two policies 50 times while 8 goroutines decide
// continuously (run it with -race). Every decision must come whole from one
// of the two policies: its Revision and its reason code agree.
func TestReloadUnderLoad(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := writeDir(t, reasonPolicy("a"))
	r, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	revA := r.Revision()
	updatePolicy(t, dir, reasonPolicy("b"))
	if _, err := r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	revB := r.Revision()
	reasonOf := map[string]string{revA: "a", revB: "b"}

	const workers = 8
	var (
		wg       sync.WaitGroup
		stop     atomic.Bool
		total    atomic.Int64
		perRev   [2]atomic.Int64
		failures = make(chan string, workers)
	)
	for range workers {
		wg.Go(func() {
			n := 0
			for !stop.Load() || n == 0 {
				e := r.Current() // once per request
				d, err := e.Decide(ctx, readInput)
				switch {
				case err != nil:
					failures <- "decision error: " + err.Error()
					return
				case !d.Allow || len(d.Reasons) != 1:
					failures <- "unexpected decision " + d.Reasons[0]
					return
				case reasonOf[d.Revision] != d.Reasons[0] || d.Revision != e.Revision():
					failures <- "decision from a mixed policy: revision " + d.Revision + " reason " + d.Reasons[0]
					return
				}
				if d.Revision == revA {
					perRev[0].Add(1)
				} else {
					perRev[1].Add(1)
				}
				n++
			}
			total.Add(int64(n))
		})
	}
	for i := range 50 {
		reason := "a"
		if i%2 == 1 {
			reason = "b"
		}
		updatePolicy(t, dir, reasonPolicy(reason))
		if _, err := r.Reload(ctx); err != nil {
			stop.Store(true)
			t.Fatalf("reload %d: %v", i, err)
		}
		if want := map[string]string{"a": revA, "b": revB}[reason]; r.Revision() != want {
			t.Fatalf("reload %d: revision %s, want %s", i, r.Revision(), want)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	if perRev[0].Load() == 0 || perRev[1].Load() == 0 {
		t.Errorf("decisions per revision: a=%d b=%d; both policies should have served", perRev[0].Load(), perRev[1].Load())
	}
	if got := perRev[0].Load() + perRev[1].Load(); got != total.Load() {
		t.Errorf("%d decisions counted per revision, %d made", got, total.Load())
	}
	t.Logf("%d decisions during 50 reloads (a=%d, b=%d)", total.Load(), perRev[0].Load(), perRev[1].Load())
}

func TestReloadCancelledIsNotAnEvent(t *testing.T) {
	dir := writeDir(t, reasonPolicy("a"))
	ev := newEvents()
	r, err := New(context.Background(), DirSource{Dir: dir}, ReloaderOptions{OnEvent: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	ev.wait(t)
	rev := r.Revision()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	updatePolicy(t, dir, reasonPolicy("b"))
	got, err := r.Reload(ctx)
	if err == nil || got.Kind != "" || r.Revision() != rev {
		t.Fatalf("Reload with a cancelled context = %+v, %v; revision %s, want %s", got, err, r.Revision(), rev)
	}
	select {
	case e := <-ev.next:
		t.Fatalf("unexpected event %+v", e)
	default:
	}
}

// TestBundleSourceLoadKeysAtEveryLoad: with LoadKeys, each load verifies
// with the keys it returns then (a Vault key rotated or a version withdrawn
// while the server runs); an error refuses the candidate with ErrKey and
// the last good policy keeps serving.
func TestBundleSourceLoadKeysAtEveryLoad(t *testing.T) {
	ctx := context.Background()
	v1, v2 := newSigner(t, "k@v1"), newSigner(t, "k@v2")
	signed := func(reason string, s JWSSigner) []byte {
		t.Helper()
		return bundleBytes(t, reasonPolicy(reason), reason, 0, s)
	}
	path := filepath.Join(t.TempDir(), "policy.tar.gz")
	replaceFile(t, path, signed("a", v1))
	var keys []VerificationKey
	var keysErr error
	src := BundleSource{Path: path, LoadKeys: func(context.Context) ([]VerificationKey, error) { return keys, keysErr }}
	keys = []VerificationKey{v1.VerificationKey()}
	r, err := New(ctx, src, ReloaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Rotated: v2 is known now, and a bundle it signed loads.
	keys = []VerificationKey{v1.VerificationKey(), v2.VerificationKey()}
	replaceFile(t, path, signed("b", v2))
	if _, err := r.Reload(ctx); err != nil || decideReason(t, r.Current()) != "b" {
		t.Fatalf("bundle signed with the rotated key: %v", err)
	}
	// v1 withdrawn: a bundle it signed is refused.
	keys = []VerificationKey{v2.VerificationKey()}
	replaceFile(t, path, signed("c", v1))
	if _, err := r.Reload(ctx); !errors.Is(err, ErrSignature) || decideReason(t, r.Current()) != "b" {
		t.Fatalf("bundle signed with a withdrawn key: %v", err)
	}
	// The keys cannot be read: refused, naming the bundle.
	keys, keysErr = nil, errors.New("vault unreachable")
	replaceFile(t, path, signed("d", v2))
	ev, err := r.Reload(ctx)
	if !errors.Is(err, ErrKey) || ev.CandidateDigest == "" || decideReason(t, r.Current()) != "b" {
		t.Fatalf("keys unreadable: event %+v, %v", ev, err)
	}
}

// TestEventsNameTheSigningKey: an Event names the key whose signature
// verified the bundle in force after it (the new one on a load, the one
// that keeps serving on a rejection), for the audit record.
func TestEventsNameTheSigningKey(t *testing.T) {
	ctx := context.Background()
	k1, k2 := newSigner(t, "k1"), newSigner(t, "k2")
	bundleFile := func(reason string, s JWSSigner) []byte {
		t.Helper()
		return bundleBytes(t, reasonPolicy(reason), reason, 0, s)
	}
	path := filepath.Join(t.TempDir(), "policy.tar.gz")
	replaceFile(t, path, bundleFile("a", k1))
	ev := newEvents()
	r, err := New(ctx, BundleSource{Path: path, Keys: []VerificationKey{k1.VerificationKey(), k2.VerificationKey()}}, ReloaderOptions{OnEvent: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	if e := ev.wait(t); e.KeyID != "k1" || r.Current().BundleKeyID() != "k1" {
		t.Fatalf("initial load: %+v", e)
	}
	replaceFile(t, path, bundleFile("b", k2))
	if e, err := r.Reload(ctx); err != nil || e.KeyID != "k2" {
		t.Fatalf("load of a bundle signed by k2: %+v, %v", e, err)
	}
	ev.wait(t)
	replaceFile(t, path, bundleFile("c", nil))
	if e, err := r.Reload(ctx); err == nil || e.KeyID != "k2" {
		t.Fatalf("rejection of an unsigned bundle: %+v, %v", e, err)
	}
	dir := writeDir(t, reasonPolicy("d"))
	rd, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{})
	if err != nil || rd.Current().BundleKeyID() != "" {
		t.Fatalf("a directory names a key: %v", err)
	}
}

// TestWatchRecordsAnUnreadableCandidate: a bundle that cannot even be read
// as a candidate (larger than MaxBundleSize, or not a regular file) is a
// rollout the server refuses, and every refusal is an audit record. Watch
// found it only through Fingerprint, whose error it logged and nothing
// else: no EventRejected, so no policy/reject record, while a SIGHUP
// (Reload) of the same file recorded one. It is recorded once, not at
// every poll, and the next good bundle loads.
func TestWatchRecordsAnUnreadableCandidate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signer := newSigner(t, "k1")
	bundleBytes := func(reason string) []byte {
		b := newBundle(filesOf(reasonPolicy(reason)), reason)
		if err := SignBundle(ctx, b, signer); err != nil {
			t.Fatal(err)
		}
		p, _ := writeBundleFile(t, b)
		return mustRead(t, p)
	}
	path := filepath.Join(t.TempDir(), "policy.tar.gz")
	replaceFile(t, path, bundleBytes("a"))
	ev := newEvents()
	r, err := New(ctx, BundleSource{Path: path, Keys: []VerificationKey{signer.VerificationKey()}}, ReloaderOptions{OnEvent: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	ev.wait(t)
	digestA := r.BundleDigest()
	go r.Watch(ctx, 5*time.Millisecond) //nolint:errcheck

	replaceFile(t, path, make([]byte, MaxBundleSize+1))
	select {
	case e := <-ev.next:
		if e.Kind != EventRejected || e.BundleDigest != digestA || !strings.Contains(e.Reason, "larger than") {
			t.Fatalf("after an oversized bundle: event %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an oversized bundle was refused without an EventRejected (no policy/reject record)")
	}
	time.Sleep(100 * time.Millisecond) // about 20 polls of the same file
	select {
	case e := <-ev.next:
		t.Fatalf("the same refusal recorded again: %+v", e)
	default:
	}
	if r.BundleDigest() != digestA || decideReason(t, r.Current()) != "a" {
		t.Fatal("the last good policy is not serving")
	}
	replaceFile(t, path, bundleBytes("b"))
	e := ev.wait(t)
	swapped(t, r, e)
	if decideReason(t, r.Current()) != "b" {
		t.Fatalf("after bundle b: event %+v", e)
	}
}

// TestWatchRecordsALostRejectionLater: a rejection whose audit record
// could not be appended (the log full or closed: here an OnEvent that
// fails once) is recorded at a later poll, once, though the candidate does
// not change again. Until h-policy10 it was logged and never recorded: the
// watcher rejects a candidate once per fingerprint.
func TestWatchRecordsALostRejectionLater(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := writeDir(t, reasonPolicy("a"))
	var mu sync.Mutex
	var failed bool
	var recorded []Event
	hook := func(e Event) error {
		mu.Lock()
		defer mu.Unlock()
		if e.Kind == EventRejected && !failed {
			failed = true
			return errors.New("audit: append: no space left on device")
		}
		recorded = append(recorded, e)
		return nil
	}
	r, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{OnEvent: hook})
	if err != nil {
		t.Fatal(err)
	}
	revA := r.Revision()
	done := make(chan struct{})
	go func() { defer close(done); r.Watch(ctx, 5*time.Millisecond) }()
	updatePolicy(t, dir, map[string]string{"custos/authz.rego": brokenModule})
	rejections := func() (n int, first Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range recorded {
			if e.Kind == EventRejected {
				if n == 0 {
					first = e
				}
				n++
			}
		}
		return n, first
	}
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := rejections(); n == 0; n, _ = rejections() {
		if time.Now().After(deadline) {
			mu.Lock()
			f := failed
			mu.Unlock()
			t.Fatalf("the rejection was never recorded (first append failed: %v)", f)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // twenty polls more
	cancel()
	<-done
	n, e := rejections()
	if n != 1 {
		t.Errorf("the rejection was recorded %d times, want once", n)
	}
	if !strings.Contains(e.Reason, "compile") || e.Revision != revA || r.Revision() != revA {
		t.Errorf("recorded rejection %+v (serving %s, want %s)", e, r.Revision(), revA)
	}
}

// TestRejectionsNameTheCandidate: a rejection names the candidate's own
// identity, as far as it is known, beside the bundle in force: its policy
// revision, and for a bundle whose signature verified its signed sequence
// claim and the key that signed it. The Event carried only the bundle in
// force's (Sequence, KeyID), so the policy/reject record said
// "candidate=<digest> sequence=1 key=k1" of a candidate signed by k2
// claiming 2.
func TestRejectionsNameTheCandidate(t *testing.T) {
	ctx := context.Background()
	k1, k2 := newSigner(t, "k1"), newSigner(t, "k2")
	bundleFile := func(files map[string]string, seq uint64, s JWSSigner) []byte {
		t.Helper()
		return bundleBytes(t, files, "rev", seq, s)
	}
	// A policy whose tests fail: the modules of "b", the tests of "x".
	failing := reasonPolicy("b")
	failing["custos/authz_test.rego"] = reasonPolicy("x")["custos/authz_test.rego"]
	var modules []regoFile
	for _, f := range filesOf(failing) {
		if !strings.HasSuffix(f.path, "_test.rego") {
			modules = append(modules, f)
		}
	}
	wantRev := revision(modules)

	path := filepath.Join(t.TempDir(), "policy.tar.gz")
	replaceFile(t, path, bundleFile(reasonPolicy("a"), 1, k1))
	r, err := New(ctx, BundleSource{Path: path, Keys: []VerificationKey{k1.VerificationKey(), k2.VerificationKey()}}, ReloaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inForce := r.Revision()
	replaceFile(t, path, bundleFile(failing, 2, k2))
	e, err := r.Reload(ctx)
	if !errors.Is(err, ErrTestsFailed) {
		t.Fatalf("candidate with failing tests: %v", err)
	}
	if e.CandidateRevision != wantRev || e.CandidateSequence != 2 || e.CandidateKeyID != "k2" {
		t.Errorf("rejection names candidate revision %q sequence %d key %q, want %q 2 k2", e.CandidateRevision, e.CandidateSequence, e.CandidateKeyID, wantRev)
	}
	if e.Revision != inForce || e.Sequence != 1 || e.KeyID != "k1" {
		t.Errorf("rejection names the bundle in force as %q sequence %d key %q, want %q 1 k1", e.Revision, e.Sequence, e.KeyID, inForce)
	}
	// Unsigned: nothing of it is verified, so nothing but its digest is
	// named.
	replaceFile(t, path, bundleFile(failing, 2, nil))
	if e, err := r.Reload(ctx); !errors.Is(err, ErrSignature) || e.CandidateDigest == "" || e.CandidateRevision != "" || e.CandidateSequence != 0 || e.CandidateKeyID != "" {
		t.Errorf("unsigned candidate: %+v, %v; want its digest only", e, err)
	}
	// A directory: its revision.
	dir := writeDir(t, reasonPolicy("d"))
	rd, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updatePolicy(t, dir, failing)
	if e, err := rd.Reload(ctx); !errors.Is(err, ErrTestsFailed) || e.CandidateRevision != wantRev || e.CandidateKeyID != "" {
		t.Errorf("directory candidate: %+v, %v; want revision %s", e, err, wantRev)
	}
}

// bundleBytes is a bundle file of files with manifest revision rev, claim
// seq (none if 0), signed by s (unsigned if nil).
func bundleBytes(t *testing.T, files map[string]string, rev string, seq uint64, s JWSSigner) []byte {
	t.Helper()
	b := newBundle(filesOf(files), rev)
	if seq != 0 {
		if err := SetBundleSequence(b, seq); err != nil {
			t.Fatal(err)
		}
	}
	if s != nil {
		if err := SignBundle(context.Background(), b, s); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := writeBundleFile(t, b)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
