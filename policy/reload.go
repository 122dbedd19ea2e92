package policy

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Source is where a [Reloader] gets candidate policies from.
type Source interface {
	// Load reads, compiles and tests a candidate policy and returns its
	// Engine, or an error (a [*CandidateError] for the sources of this
	// package) if the candidate must not serve. It runs off the request path
	// and may take as long as compiling and testing the policy takes.
	Load(ctx context.Context) (*Engine, error)
	// Describe names the source for logs and audit records, e.g.
	// "dir:/etc/custos/policy". It never contains a secret.
	Describe() string
}

// Fingerprinter is implemented by sources that [Reloader.Watch] can poll. The
// fingerprint changes whenever a load could give a different result.
type Fingerprinter interface {
	Fingerprint() (string, error)
}

// DirSource loads the .rego files of a policy directory (development). Every
// load reads all the files once, compiles the policy modules and runs the
// *_test.rego tests on those same bytes.
type DirSource struct {
	Dir     string
	Options Options // for the engines it loads
	// AllowNoTests accepts a directory without any *_test.rego file. By
	// default such a directory is rejected (ErrTestsFailed), as a bundle is.
	AllowNoTests bool
}

// Describe implements [Source]: "dir:" + Dir.
func (s DirSource) Describe() string { return "dir:" + s.Dir }

// Load implements [Source]. Errors are a [*CandidateError] whose Digest is
// the directory's content digest (see [DirSource.Fingerprint]).
func (s DirSource) Load(ctx context.Context) (*Engine, error) {
	opts := s.Options
	if err := opts.validate(); err != nil {
		return nil, err
	}
	files, err := allRegoFiles(os.DirFS(s.Dir))
	if err != nil {
		return nil, &CandidateError{Err: fmt.Errorf("%w: %w", ErrCompile, err)}
	}
	digest := revision(files)
	e, err := vet(ctx, files, opts, !s.AllowNoTests)
	if err != nil {
		policies, _ := splitTests(files)
		return nil, &CandidateError{Digest: digest, Revision: revision(policies), Err: err}
	}
	e.candidateDigest = digest
	return e, nil
}

// Fingerprint implements [Fingerprinter]: the content digest of the
// directory, "sha256:" + hex(SHA-256 of (path NUL content NUL) for every
// .rego file, tests included, sorted by path). Any .rego file changed, added
// or removed changes it. Reading a policy directory's few kilobytes each
// poll is cheaper and more reliable than comparing modification times
// (which coarse-grained file systems and copy tools can leave unchanged).
func (s DirSource) Fingerprint() (string, error) {
	files, err := allRegoFiles(os.DirFS(s.Dir))
	if err != nil {
		return "", err
	}
	return revision(files), nil
}

// BundleSource loads a signed bundle file with [LoadBundle] (production).
// Replace the file atomically (write a temporary file, then rename it over
// Path): a half-written bundle is rejected and retried only when it changes
// again.
type BundleSource struct {
	Path string
	Keys []VerificationKey
	// LoadKeys, when set, is called at every load for the keys the
	// candidate may be signed with, instead of Keys: keys kept where they
	// can change while the server runs (the versions of a Vault Transit
	// key) are then those of the moment, so a bundle signed with a rotated
	// key loads and one signed with a withdrawn version is refused
	// without a restart. An error refuses the candidate (ErrKey).
	LoadKeys func(ctx context.Context) ([]VerificationKey, error)
	Options  Options // for the engines it loads
}

// Describe implements [Source]: "bundle:" + Path.
func (s BundleSource) Describe() string { return "bundle:" + s.Path }

// Load implements [Source] with [LoadBundle], verifying with Keys or, when
// set, with what LoadKeys returns now.
func (s BundleSource) Load(ctx context.Context) (*Engine, error) {
	return s.loadGated(ctx, nil)
}

// gatedSource is a [Source] that can refuse a candidate by its signed
// sequence claim before compiling and testing it (BundleSource): the
// Reloader's rollback check, when armed, then costs no compile and no
// test run.
type gatedSource interface {
	loadGated(ctx context.Context, gate sequenceGate) (*Engine, error)
}

// loadGated is Load, refusing with gate's error (gate may be nil) a bundle
// whose signature verified but whose claim gate refuses, before its policy
// is compiled and tested.
func (s BundleSource) loadGated(ctx context.Context, gate sequenceGate) (*Engine, error) {
	keys := s.Keys
	if s.LoadKeys != nil {
		var err error
		if keys, err = s.LoadKeys(ctx); err != nil {
			digest, _ := s.Fingerprint()
			return nil, &CandidateError{Digest: digest, Err: fmt.Errorf("%w: reading the verification keys: %w", ErrKey, err)}
		}
	}
	e, _, err := loadBundle(ctx, s.Path, keys, s.Options, gate)
	return e, err
}

// Fingerprint implements [Fingerprinter]: the bundle digest,
// "sha256:" + hex(SHA-256 of the file), the same value as
// [Engine.BundleDigest]. Hashing a bundle of a few hundred kilobytes each
// poll costs well under a millisecond.
func (s BundleSource) Fingerprint() (string, error) {
	data, err := readBundleFile(s.Path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Event kinds, as written to the audit log.
const (
	EventLoaded   = "policy_loaded"
	EventRejected = "policy_rejected"
)

// Event is a policy load or rejection, for the operational log and the audit
// log. It never holds a secret or PHI.
type Event struct {
	Kind   string    // EventLoaded or EventRejected
	Time   time.Time // when the load attempt finished
	Source string    // Source.Describe()
	// Revision and BundleDigest are the policy in force after the event: the
	// new policy for EventLoaded, the last good one (which keeps serving) for
	// EventRejected ("" when the initial load of New failed). BundleDigest is
	// "" for a directory.
	Revision     string
	BundleDigest string
	// PreviousRevision is the revision in force before a load ("" for the
	// initial load and for rejections).
	PreviousRevision string
	// Sequence is the signed sequence claim of the bundle in force after the
	// event (0: none, or a directory); see CheckSequence.
	Sequence uint64
	// KeyID is the id of the key whose signature verified the bundle in
	// force after the event ("" for a directory): after a signing key may
	// have leaked, the audit log says which loads it signed.
	KeyID string
	// RollbackOverride is set on the load of a bundle that did not advance
	// the high-water mark and loaded only because the operator said so
	// ([Reloader.Arm] with allowRollback): the refusal that was overridden.
	RollbackOverride string
	// Rollback is the evidence of a rollback refusal (a rejection) or of
	// the refusal overridden (RollbackOverride): the claims and digests,
	// for the record to carry as they are; nil for any other event.
	Rollback *RollbackError
	// CandidateDigest names the candidate that was loaded or rejected: the
	// bundle file digest, or the directory content digest; "" if the
	// candidate could not be read.
	CandidateDigest string
	// CandidateRevision, CandidateSequence and CandidateKeyID are a
	// rejected candidate's own policy revision, signed sequence claim and
	// signing key, as far as they are known ([CandidateError]): none for a
	// bundle whose signature did not verify, only the revision for a
	// directory. Revision, Sequence and KeyID name the policy in force
	// instead. Unset for EventLoaded (the candidate is then in force).
	CandidateRevision string
	CandidateSequence uint64
	CandidateKeyID    string
	// Reason says why a candidate was rejected (at most 1 KiB; it quotes
	// compile errors, failing test names or the verification failure, never
	// key material). "" for EventLoaded.
	Reason string
	// Err is the candidate's error for EventRejected (Reason is its text,
	// truncated), for callers that branch on its cause with errors.Is
	// (ErrCompile, ErrTestsFailed, ErrRollback...): to count rejections by
	// class, for example. nil for EventLoaded.
	Err error
	// Late is set on a rejection offered to OnEvent again after OnEvent
	// failed to record it (Watch retries it at a later poll): its record
	// is written after Time, which the record must then name besides its
	// own commit time.
	Late bool
}

// DefaultPollInterval is the interval [Reloader.Watch] uses when given zero.
const DefaultPollInterval = time.Second

// DefaultWarmUp is how long a candidate spends at most, when
// ReloaderOptions.WarmUp is zero, re-deciding the serving engine's most
// recent inputs before it is swapped in (see Engine.Warm).
const DefaultWarmUp = 250 * time.Millisecond

// ReloaderOptions configures a [Reloader]. The zero value is valid.
type ReloaderOptions struct {
	// WarmUp bounds how long a good candidate spends, off the request path
	// and before it is swapped in, re-deciding the inputs the serving
	// engine decided last ([Engine.Warm]), so that a reload does not make
	// every principal's next decision a first one. Zero means
	// DefaultWarmUp; negative disables it.
	WarmUp time.Duration
	// Logger receives one line per load and per rejection. Nil discards.
	Logger *slog.Logger
	// Rollback turns on rollback protection (for a BundleSource): once
	// [Reloader.Arm] has given the high-water mark, a candidate that does not
	// advance it ([CheckSequence]) is rejected with ErrRollback and the last
	// good policy keeps serving. The initial load of New is not checked: the
	// caller checks it with Arm before serving.
	Rollback bool
	// MinSequence is the lowest sequence claim accepted (the operator's
	// floor, [CheckMinSequence]); 0: none. It needs Rollback, and it is
	// checked with the high-water mark, at Arm (where no override lowers
	// it) and at every reload.
	MinSequence uint64
	// OnEvent, if set, is called for every Event, synchronously and with
	// reloads serialized (it must not call Reload). For EventLoaded it is
	// called BEFORE the new engine is swapped in, and an error vetoes the
	// swap (the candidate is rejected with ErrEventHook): this is where the
	// load is written to the audit log, so that no decision is made by a
	// policy whose load is not on record. Errors for EventRejected are
	// logged, and Watch calls it again with the same Event, Late set, at
	// its next polls until it returns nil or an error wrapping
	// ErrEventRecorded (the record was appended: Reloader.Watch).
	OnEvent func(Event) error
}

// Reloader serves the current policy [Engine] and replaces it, off the
// request path, when its [Source] yields a new one that compiles and passes
// its tests.
//
// # Invariants
//
//   - A request never sees a half-loaded policy: a candidate is compiled and
//     tested completely before one atomic pointer store publishes it, and
//     engines are immutable.
//   - The last good policy keeps serving: a candidate that fails to read,
//     verify, compile or pass its tests is dropped, with an EventRejected.
//   - Reloads are serialized, so an older candidate never replaces a newer
//     one.
//   - With rollback protection armed (ReloaderOptions.Rollback,
//     [Reloader.Arm]), a bundle whose signed sequence claim does not advance
//     the high-water mark is rejected like a bundle that fails its tests.
//   - No request is dropped or blocked by a reload: in-flight decisions
//     finish on the engine they started with.
//
// Request handlers call [Reloader.Current] once per request and use that
// engine for every decision of the request: a resources/list page decides
// all its items with one engine, so the page, and its audit record, reflect
// a single policy revision. [Reloader.Decide] and [Reloader.Revision]
// (which satisfy an interface like server.Decider) each load the current
// engine anew, so two calls may straddle a reload.
type Reloader struct {
	src      Source
	log      *slog.Logger
	onEvent  func(Event) error
	warmUp   time.Duration
	rollback bool
	minSeq   uint64 // the floor (ReloaderOptions.MinSequence)

	cur atomic.Pointer[Engine]

	mu         sync.Mutex // serializes loads; guards lastFP, retryAfter, armed, hw and pending
	lastFP     string     // source fingerprint taken before the last load attempt
	retryAfter time.Time  // a good candidate whose load could not be recorded is retried from then
	armed      bool       // rollback protection armed: every candidate is checked against hw
	hw         HighWater  // the rollback high-water mark, once armed
	// pending are the rejections OnEvent failed to record (a full disk, a
	// closed audit log), oldest first: Watch records them at its next
	// polls, each once, before anything else (recordPendingLocked).
	pending []Event
}

// maxPendingRejections bounds Reloader.pending: beyond it the oldest
// unrecorded rejection is dropped, with an error in the operational log.
const maxPendingRejections = 64

// HookRetryInterval is how long Watch waits before it loads again a good
// candidate that was refused only because OnEvent failed (the load could
// not be audited, e.g. while the audit log or its keys are unavailable).
const HookRetryInterval = 5 * time.Second

var hookRetryInterval = HookRetryInterval // shortened by tests

// New loads the initial policy from src and returns a Reloader serving it.
// The initial load must succeed (and, with OnEvent set, be recorded):
// otherwise New returns the error and the server must not start.
func New(ctx context.Context, src Source, opts ReloaderOptions) (*Reloader, error) {
	if opts.MinSequence != 0 && !opts.Rollback {
		return nil, errors.New("policy: ReloaderOptions.MinSequence needs Rollback")
	}
	if opts.MinSequence > MaxSequence {
		return nil, fmt.Errorf("policy: minimum sequence %d is above %d", opts.MinSequence, uint64(MaxSequence))
	}
	r := &Reloader{src: src, log: opts.Logger, onEvent: opts.OnEvent, warmUp: cmp.Or(opts.WarmUp, DefaultWarmUp), rollback: opts.Rollback, minSeq: opts.MinSequence}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.reloadLocked(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Current returns the engine in force. It is one atomic load: call it once
// per request.
func (r *Reloader) Current() *Engine { return r.cur.Load() }

// Arm gives a Reloader made with ReloaderOptions.Rollback the high-water
// mark hw (from durable storage: custos derives it from the audit log) and
// checks the policy in force against it with [CheckSequence]. If that
// policy does not advance hw, Arm returns the [*RollbackError] and, unless
// allowRollback, leaves protection unarmed: the caller must not serve it.
// With allowRollback (an operator's explicit override) the error is
// returned as well, for the record, but the policy in force becomes the
// mark; a bundle without a claim is refused even then (as the mark it
// would disarm the protection). From then on every candidate is checked,
// and each load moves the mark to its bundle. Arm without
// ReloaderOptions.Rollback is an error. A policy under the floor
// (ReloaderOptions.MinSequence) is refused whatever allowRollback says.
func (r *Reloader) Arm(hw HighWater, allowRollback bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.rollback {
		return errors.New("policy: Arm on a Reloader without rollback protection")
	}
	cur := r.cur.Load()
	if err := CheckMinSequence(r.minSeq, cur.BundleSequence(), cur.BundleDigest()); err != nil {
		return err
	}
	err := CheckSequence(hw, cur.BundleSequence(), cur.BundleDigest())
	// A bundle without a claim is never forced: as the mark it would
	// disarm the protection (any claim passes a mark of 0).
	if err != nil && (!allowRollback || cur.BundleSequence() == 0) {
		return err
	}
	r.armed = true
	r.hw = hw
	r.advance(cur)
	return err
}

// advance moves the high-water mark to e's bundle, which passed
// CheckSequence. r.mu is held.
func (r *Reloader) advance(e *Engine) {
	if !r.armed {
		return
	}
	if e.BundleSequence() == 0 && r.hw.Sequence == 0 {
		r.log.Warn("policy bundle has no sequence claim: nothing protects this deployment from an older bundle put back at the path; build bundles with a sequence (custos policy bundle --sequence N)",
			"source", r.src.Describe(), "bundle_digest", e.BundleDigest())
	}
	r.hw = HighWater{Sequence: e.BundleSequence(), Digest: e.BundleDigest()}
}

// HighWater returns the rollback high-water mark, and false while
// rollback protection is not armed.
func (r *Reloader) HighWater() (HighWater, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hw, r.armed
}

// Decide is Current().Decide. See the type documentation for why a request
// deciding several items should call Current once instead.
func (r *Reloader) Decide(ctx context.Context, in Input) (Decision, error) {
	return r.Current().Decide(ctx, in)
}

// DecideBatch is Current().DecideBatch: the whole batch is decided by one
// engine snapshot, so a list page never mixes two policy revisions.
func (r *Reloader) DecideBatch(ctx context.Context, in Input, items []Item) ([]Decision, error) {
	return r.Current().DecideBatch(ctx, in, items)
}

// NothingVisible is Current().NothingVisible. A list that skips its scan
// on its word consults no other engine for that page.
func (r *Reloader) NothingVisible(ctx context.Context, in Input) (bool, error) {
	return r.Current().NothingVisible(ctx, in)
}

// Revision is Current().Revision().
func (r *Reloader) Revision() string { return r.Current().Revision() }

// BundleDigest is Current().BundleDigest().
func (r *Reloader) BundleDigest() string { return r.Current().BundleDigest() }

// Reload loads a candidate from the source now (on SIGHUP, for example). On
// success the candidate is swapped in and the EventLoaded is returned with a
// nil error. On failure the current engine keeps serving and the
// EventRejected is returned with the candidate's error. A reload of an
// unchanged policy succeeds and is reported as a load. A load interrupted
// because ctx is done returns a zero Event and an error, and no event is
// emitted.
func (r *Reloader) Reload(ctx context.Context) (Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reloadLocked(ctx)
}

// Watch polls the source every interval (DefaultPollInterval when zero) and
// reloads when its fingerprint changes, until ctx is done; it then returns
// ctx.Err(). The source must implement [Fingerprinter] (DirSource and
// BundleSource do). Polling is used instead of file system notifications to
// stay dependency-free and to behave the same on every file system,
// including network and container-mounted ones (a Kubernetes ConfigMap
// update swaps a symlink, which inotify watchers commonly miss). A rejected
// candidate is not retried until the fingerprint changes again, except one
// refused only because OnEvent failed: it is retried every
// HookRetryInterval until its load is recorded. A source whose fingerprint
// cannot be taken is rejected (EventRejected) once per distinct error. A
// rejection OnEvent failed to record (the audit log full or closed) is
// offered to OnEvent again at every poll, before anything else, with Late
// set, until it is recorded (OnEvent returns nil, or an error wrapping
// ErrEventRecorded), and then never again (at most 64 wait; beyond, the oldest
// is dropped with an error in the operational log).
func (r *Reloader) Watch(ctx context.Context, interval time.Duration) error {
	fp, ok := r.src.(Fingerprinter)
	if !ok {
		return fmt.Errorf("policy: source %s cannot be watched (no Fingerprint method)", r.src.Describe())
	}
	if interval < 0 {
		return fmt.Errorf("policy: negative poll interval %v", interval)
	}
	if interval == 0 {
		interval = DefaultPollInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		r.mu.Lock()
		r.recordPendingLocked()
		f, err := fp.Fingerprint()
		switch {
		case err != nil:
			// A candidate that cannot be read (a bundle over MaxBundleSize,
			// a FIFO or a directory at the path, a file removed) is refused
			// like any other, and every refusal is recorded: once per
			// distinct error, through a load that fails the same way (or
			// loads, if the source changed in between) and emits the
			// EventRejected. Logging it alone left no policy/reject record.
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				r.log.Warn("policy source unreadable; keeping the current policy",
					"source", r.src.Describe(), "err", msg)
				r.reloadLocked(ctx) //nolint:errcheck // reported by event and log
			}
		case f != r.lastFP && !time.Now().Before(r.retryAfter):
			lastErr = ""
			r.reloadLocked(ctx) //nolint:errcheck // reported by event and log
		default:
			lastErr = ""
		}
		r.mu.Unlock()
	}
}

// reloadLocked loads a candidate and swaps it in if it is good. r.mu is held.
func (r *Reloader) reloadLocked(ctx context.Context) (Event, error) {
	desc := r.src.Describe()
	r.lastFP = ""
	if fp, ok := r.src.(Fingerprinter); ok {
		// Taken before the load: if the source changes during the load, the
		// next poll sees a new fingerprint and loads again.
		if f, err := fp.Fingerprint(); err == nil {
			r.lastFP = f
		}
	}
	prev := r.cur.Load()
	var e *Engine
	var err error
	if gs, ok := r.src.(gatedSource); ok && r.armed {
		// The signed claim is checked once the signature verifies, before
		// the candidate is compiled and tested: a rollback put at the path
		// costs no test run (it was refused after one, seconds later).
		e, err = gs.loadGated(ctx, r.checkSequenceLocked)
	} else {
		e, err = r.src.Load(ctx)
	}
	if err == nil && e == nil {
		err = errors.New("policy: source returned no engine")
	}
	if err == nil && r.armed {
		// Again on the engine, for a source that cannot check earlier.
		if rerr := r.checkSequenceLocked(e.BundleSequence(), e.BundleDigest()); rerr != nil {
			err = e.candidateError(rerr)
		}
	}
	if err == nil {
		ev := Event{
			Kind: EventLoaded, Time: time.Now().UTC(), Source: desc,
			Revision: e.Revision(), BundleDigest: e.BundleDigest(), CandidateDigest: e.candidateDigest,
			Sequence: e.BundleSequence(), KeyID: e.BundleKeyID(),
		}
		if prev != nil {
			ev.PreviousRevision = prev.Revision()
		}
		if prev != nil && r.warmUp > 0 {
			// Before the load is recorded, so that the swap follows its
			// record closely.
			wctx, cancel := context.WithTimeout(ctx, r.warmUp)
			start := time.Now()
			n := e.Warm(wctx, prev)
			cancel()
			r.log.Debug("policy candidate warmed", "source", desc, "evaluations", n, "took", time.Since(start))
		}
		if r.onEvent != nil {
			if herr := r.onEvent(ev); herr != nil {
				err = e.candidateError(fmt.Errorf("%w: %w", ErrEventHook, herr))
				// Nothing is wrong with the candidate: forget its
				// fingerprint so that Watch tries again (not at once).
				r.lastFP, r.retryAfter = "", time.Now().Add(hookRetryInterval)
			}
		}
		if err == nil {
			r.cur.Store(e)
			r.advance(e)
			r.log.Info("policy loaded", "source", desc, "revision", ev.Revision,
				"bundle_digest", ev.BundleDigest, "bundle_sequence", ev.Sequence, "key_id", ev.KeyID, "previous_revision", ev.PreviousRevision)
			return ev, nil
		}
	}
	if ctx.Err() != nil {
		// Interrupted (shutdown), not rejected: nothing to record.
		r.log.Info("policy load interrupted", "source", desc, "err", ctx.Err())
		return Event{}, err
	}
	ev := Event{Kind: EventRejected, Time: time.Now().UTC(), Source: desc, Reason: truncateReason(err.Error()), Err: err}
	if ce, ok := errors.AsType[*CandidateError](err); ok {
		ev.CandidateDigest, ev.CandidateRevision, ev.CandidateSequence, ev.CandidateKeyID = ce.Digest, ce.Revision, ce.Sequence, ce.KeyID
	}
	if re, ok := errors.AsType[*RollbackError](err); ok {
		ev.Rollback = re
	}
	if prev != nil {
		ev.Revision, ev.BundleDigest, ev.Sequence, ev.KeyID = prev.Revision(), prev.BundleDigest(), prev.BundleSequence(), prev.BundleKeyID()
	}
	r.log.Warn("policy candidate rejected; the last good policy keeps serving", "source", desc,
		"reason", ev.Reason, "candidate_digest", ev.CandidateDigest, "revision", ev.Revision)
	if r.onEvent == nil {
		return ev, err
	}
	if herr := r.recordRejection(ev); herr != nil {
		r.log.Error("policy rejection not recorded; Watch retries it at its next poll", "source", desc, "err", herr)
		if len(r.pending) == maxPendingRejections {
			r.log.Error("policy rejection dropped unrecorded: too many rejections await recording",
				"source", r.pending[0].Source, "time", r.pending[0].Time, "candidate_digest", r.pending[0].CandidateDigest)
			r.pending = slices.Delete(r.pending, 0, 1)
		}
		late := ev
		late.Late = true
		r.pending = append(r.pending, late)
	}
	return ev, err
}

// checkSequenceLocked refuses a candidate claiming seq (0: none) with
// bundle digest digest that is under the floor ([CheckMinSequence]) or does
// not advance the high-water mark ([CheckSequence]). r.mu is held and
// protection is armed.
func (r *Reloader) checkSequenceLocked(seq uint64, digest string) error {
	if err := CheckMinSequence(r.minSeq, seq, digest); err != nil {
		return err
	}
	return CheckSequence(r.hw, seq, digest)
}

// recordRejection offers ev to OnEvent and returns nil when ev is on
// record: OnEvent succeeded, or failed after its record was appended
// ([ErrEventRecorded]: offered again, it would be recorded twice, at
// every poll while the failure lasts). Else it returns OnEvent's error.
func (r *Reloader) recordRejection(ev Event) error {
	err := r.onEvent(ev)
	if err != nil && errors.Is(err, ErrEventRecorded) {
		r.log.Error("policy rejection recorded, but its record could not be completed; it is not recorded again",
			"source", ev.Source, "time", ev.Time, "candidate_digest", ev.CandidateDigest, "err", err)
		return nil
	}
	return err
}

// recordPendingLocked records the rejections OnEvent failed to record, in
// order, until one fails again (it stays, for the next poll). A recorded
// one (OnEvent succeeded, or failed after appending its record:
// recordRejection) is forgotten, so no rejection is recorded twice. r.mu
// is held.
func (r *Reloader) recordPendingLocked() {
	for len(r.pending) > 0 {
		ev := r.pending[0]
		if err := r.recordRejection(ev); err != nil {
			r.log.Debug("policy rejection still not recorded", "source", ev.Source, "err", err)
			return
		}
		r.log.Info("policy rejection recorded late", "source", ev.Source, "time", ev.Time, "candidate_digest", ev.CandidateDigest)
		r.pending = slices.Delete(r.pending, 0, 1)
	}
}

// Describe names the Reloader's source ([Source.Describe]).
func (r *Reloader) Describe() string { return r.src.Describe() }
