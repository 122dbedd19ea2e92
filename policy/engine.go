package policy

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/custos-mcp/custos/internal/regularfile"
	"github.com/custos-mcp/custos/minimize"
	custosrego "github.com/custos-mcp/custos/rego"
)

// Query is the Rego query every decision evaluates.
const Query = "data.custos.authz.decision"

// BatchQuery is the Rego query [Engine.DecideBatch] evaluates, once per
// batch, when the policy defines it (rule decisions in package
// custos.authz); without it, DecideBatch evaluates [Query] per item.
const BatchQuery = "data.custos.authz.decisions"

// NothingVisibleQuery is the Rego query [Engine.NothingVisible]
// evaluates when the policy defines it (rule nothing_visible in package
// custos.authz, with a default, reading only the principal and the
// purpose; checked at load): true when no resource
// can be allowed to the principal for the purpose. When it is defined, the
// engine evaluates it with every decision, in the same evaluation, and
// enforces it: a list or read decision made while it holds denies (reason
// [ReasonNothingVisible] added to an allow it overrides), so that skipping
// a list scan on its word is exactly scanning and denying every item.
const NothingVisibleQuery = "data.custos.authz.nothing_visible"

// ReasonNothingVisible is the reason the engine adds to a list or read
// decision the policy allowed although its rule nothing_visible held for
// the principal and purpose: the engine denies it (see
// [NothingVisibleQuery]). A policy whose rules imply nothing_visible, like
// the default policy, never meets it.
const ReasonNothingVisible = "nothing_visible"

// DefaultTimeout bounds one evaluation when Options.Timeout is zero. It is a
// guard against a runaway policy, not a latency target (a decision takes
// ~100 µs): under CPU contention (64 concurrent requests on 2 cores) a
// decision can wait tens of milliseconds for a core, and a 50 ms deadline
// denied legitimate requests in the parallel read-path benchmark.
const DefaultTimeout = time.Second

// Options configures an Engine. The zero value is valid.
type Options struct {
	// Logger receives operational events (load, decision failures). It never
	// receives input values. Nil discards.
	Logger *slog.Logger
	// Timeout bounds each evaluation; zero means DefaultTimeout. Negative is
	// an error.
	Timeout time.Duration
	// DecisionCache is how many decisions the engine memoizes (only for a
	// deterministic policy; see decisionCache); zero means
	// DefaultDecisionCache, negative disables the cache.
	DecisionCache int
	// SubjectCache is how many values of subject-level rules the engine
	// keeps across evaluations, in all (only for a deterministic policy;
	// see subjectcache.go); zero means DefaultSubjectCache, negative
	// disables it.
	SubjectCache int
}

func (o *Options) validate() error {
	if o.Timeout < 0 {
		return fmt.Errorf("policy: negative Options.Timeout %v", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Decision is the outcome of one policy evaluation.
type Decision struct {
	ID          string                // fresh random UUID, recorded in the audit log
	Allow       bool                  // false unless the policy allowed and everything checked out
	Reasons     []string              // short snake_case codes; never empty for a denial
	Obligations []minimize.Obligation // minimizations to apply before release; nil when denied
	Revision    string                // revision of the policy that made the decision
}

// Engine evaluates one compiled policy revision. It is safe for concurrent use.
type Engine struct {
	query rego.PreparedEvalQuery
	batch *rego.PreparedEvalQuery // nil: the policy has no rule decisions
	// nothing evaluates NothingVisibleQuery alone; nil when the policy
	// does not define it. When it is not nil, query and batch evaluate
	// [decision(s), nothing_visible] (withNothingVisible).
	nothing  *rego.PreparedEvalQuery
	revision string
	timeout  time.Duration
	log      *slog.Logger

	// bundleDigest is the digest of the signed bundle file the engine was
	// loaded from ("" unless loaded by LoadBundle); candidateDigest is the
	// digest of whatever the engine was loaded from (the bundle file, or the
	// .rego files of a DirSource), for load events.
	bundleDigest    string
	candidateDigest string
	// bundleSequence is the bundle's signed sequence claim (0: none, or not
	// a bundle).
	bundleSequence uint64
	// bundleKeyID is the id of the key whose signature verified the bundle
	// ("" for a policy not loaded from a bundle).
	bundleKeyID string
	// policies are the policy modules the engine was compiled from (tests
	// excluded), for CheckBatch.
	policies []regoFile

	cache    *decisionCache // nil: every decision is evaluated
	keyURI   bool           // the cache keys include the resource's URI (analysis.readsURI)
	nondet   string         // the nondeterministic builtin that turned the caches off, if any
	subjects *subjectCaches // nil: no value outlives its evaluation
	recent   *recent        // the inputs decided last, for Warm; nil without subjects

	// itemURI: batch items carry their resource's URI. False only when
	// no rule can read a resource's URI, of input.resource or of a list
	// item (readsURI), cache or not: a list decision is then a
	// function of the URI-free input like a read's, which the cache keys
	// rely on, and leaving the URI out (batchValue) keeps it so should the
	// analysis miss a read. When in doubt (the analysis cannot prove that
	// no rule reads it, or fails), items carry it and the cache keys on it.
	itemURI bool
	// uriReadBy is analysis.why when the cache keys or list items carry
	// the URI because some rule can read it.
	uriReadBy string
}

// Load compiles every *.rego file under fsys except *_test.rego into one
// prepared query for [Query]. Failures wrap [ErrCompile]. Load does not run
// the Rego tests; [LoadBundle] and the [Reloader] sources do.
func Load(ctx context.Context, fsys fs.FS, opts Options) (*Engine, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	files, err := regoFiles(fsys, false)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	e, err := compile(ctx, files, opts)
	if err != nil {
		return nil, err
	}
	e.log.Info("policy loaded", "revision", e.revision, "modules", len(files))
	return e, nil
}

// compile builds an Engine from the policy modules files (no tests). opts
// must have been validated.
func compile(ctx context.Context, files []regoFile, opts Options) (*Engine, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no .rego policy modules found", ErrCompile)
	}
	// The lock-down (capabilities, strict builtin errors, Rego v1) is the
	// same for both queries.
	regoOpts := []func(*rego.Rego){
		rego.Capabilities(lockedCapabilities()),
		rego.StrictBuiltinErrors(true),
		rego.SetRegoVersion(ast.RegoV1),
		// Hand back OPA's own value; parseDecision reads it without first
		// converting it to Go maps.
		rego.GenerateJSON(func(t *ast.Term, _ *rego.EvalContext) (any, error) { return t.Value, nil }),
	}
	hasDecision, hasBatch, hasNothing, nothingDefault := false, false, false, false
	var modules []*ast.Module
	for _, f := range files {
		m, err := ast.ParseModuleWithOpts(f.path, string(f.content), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCompile, err)
		}
		if m.Package.Path.String() == "data.custos.authz" {
			for _, r := range m.Rules {
				switch r.Head.Ref().String() {
				case "decision":
					hasDecision = true
				case "decisions":
					hasBatch = true
				case "nothing_visible":
					hasNothing = true
					nothingDefault = nothingDefault || r.Default
				}
			}
		}
		regoOpts = append(regoOpts, rego.ParsedModule(m))
		modules = append(modules, m)
	}
	if !hasDecision {
		return nil, fmt.Errorf("%w: no rule %s is defined", ErrCompile, Query)
	}
	// The static analysis of the caches, made at most once.
	var (
		found             analysis
		foundOK, analyzed bool
	)
	analysed := func() (analysis, bool) {
		if !analyzed {
			found, foundOK = analyse(modules)
			analyzed = true
		}
		return found, foundOK
	}
	// nothing_visible is used only with a default (an undefined value
	// would make every decision undefined) and only if it reads nothing
	// but the principal and the purpose (NothingVisible evaluates it on
	// them alone: a rule reading the resource would answer there what no
	// decision answers).
	var nothing *rego.PreparedEvalQuery
	query, batchQuery := Query, BatchQuery
	if hasNothing && !nothingDefault {
		opts.Logger.Info("policy defines nothing_visible without a default; it is ignored and lists are scanned")
	}
	if hasNothing && nothingDefault {
		if a, ok := analysed(); !ok || !a.levels.refLevel(nothingVisibleRef) {
			opts.Logger.Info("policy's nothing_visible reads more than the principal and the purpose; it is ignored and lists are scanned")
			hasNothing = false
		}
	}
	if hasNothing && nothingDefault {
		nq, err := rego.New(slices.Concat(regoOpts, []func(*rego.Rego){rego.Query(NothingVisibleQuery)})...).PrepareForEval(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCompile, err)
		}
		nothing = &nq
		query, batchQuery = withNothingVisible(Query), withNothingVisible(BatchQuery)
	}
	pq, err := rego.New(slices.Concat(regoOpts, []func(*rego.Rego){rego.Query(query)})...).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	var batch *rego.PreparedEvalQuery
	if hasBatch {
		bq, err := rego.New(slices.Concat(regoOpts, []func(*rego.Rego){rego.Query(batchQuery)})...).PrepareForEval(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCompile, err)
		}
		batch = &bq
	}
	e := &Engine{
		query:    pq,
		batch:    batch,
		nothing:  nothing,
		revision: revision(files),
		timeout:  opts.Timeout,
		log:      opts.Logger,
		policies: files,
	}
	if batch != nil {
		a, _ := analysed()
		e.itemURI = a.readsURI
		if a.readsURI {
			e.uriReadBy = a.why
			opts.Logger.Info("a policy rule can read a resource's uri; list items carry it and decisions are cached per URI", "where", a.why)
		}
	}
	det, builtin := deterministic(modules)
	if !det {
		opts.Logger.Info("policy calls a nondeterministic builtin; decisions are not cached", "builtin", builtin)
		e.nondet = builtin
	}
	if det && opts.DecisionCache >= 0 {
		e.cache = newDecisionCache(cmp.Or(opts.DecisionCache, DefaultDecisionCache))
		a, _ := analysed()
		e.keyURI = a.readsURI
		if a.readsURI {
			e.uriReadBy = a.why
		}
	}
	if det && opts.SubjectCache >= 0 {
		if a, ok := analysed(); ok {
			e.subjects = newSubjectCaches(a.levels, cmp.Or(opts.SubjectCache, DefaultSubjectCache))
			e.recent = &recent{}
		}
	}
	return e, nil
}

// LoadDir is Load over os.DirFS(dir); it is what custos serve --policy-dir uses.
func LoadDir(ctx context.Context, dir string, opts Options) (*Engine, error) {
	return Load(ctx, os.DirFS(dir), opts)
}

// Default loads the default policy embedded in package rego.
func Default(ctx context.Context, opts Options) (*Engine, error) {
	return Load(ctx, custosrego.FS, opts)
}

// Revision returns "sha256:" + hex digest identifying the policy modules.
// It depends only on the policy modules (paths and contents, not the tests),
// so a directory and a bundle built from it have the same revision.
func (e *Engine) Revision() string { return e.revision }

// Caching says how an Engine memoizes, for policy authors (custos policy
// check): what their policy's shape costs at serving time.
type Caching struct {
	Decisions bool `json:"decisions"` // whole decisions are memoized (the policy is deterministic)
	// WithoutURI: the decision cache's keys leave out the resource's URI, so
	// one evaluation answers every resource with the same features; false
	// when some rule can read a resource's URI, input.resource.uri or a
	// list item's (readsURI), or the analysis cannot tell.
	WithoutURI bool `json:"without_uri"`
	// ItemsCarryURI: list items are decided with their "uri" (given to the
	// decisions rule with it, or, for a policy without one, decided one by
	// one as reads); false when no rule can read it (see WithoutURI).
	ItemsCarryURI bool `json:"items_carry_uri"`
	// URIReadBy names the first read of a resource's uri (input.resource's
	// or a list item's) that the analysis found (file:line and what), or
	// what it could not prove free of one; "" if none, or if neither the
	// cache nor list items are concerned.
	URIReadBy string `json:"uri_read_by,omitempty"`
	Subjects  bool   `json:"subjects"` // subject-level rule values outlive an evaluation
	// Nondeterministic names the builtin (time.now_ns, ...) that turned
	// both caches off; "" if none did.
	Nondeterministic string `json:"nondeterministic,omitempty"`
}

// Caching returns how e memoizes its decisions.
func (e *Engine) Caching() Caching {
	return Caching{Decisions: e.cache != nil, WithoutURI: e.cache != nil && !e.keyURI, ItemsCarryURI: e.batch == nil || e.itemURI,
		URIReadBy: e.uriReadBy, Subjects: e.subjects != nil, Nondeterministic: e.nondet}
}

// BundleDigest returns "sha256:" + hex(SHA-256 of the bundle file) when the
// engine was loaded from a signed bundle by [LoadBundle], and "" when it was
// loaded from a directory, an fs.FS or the embedded default policy. Audit
// records name it next to [Engine.Revision].
func (e *Engine) BundleDigest() string { return e.bundleDigest }

// BundleSequence is the signed sequence claim of the bundle the engine was
// loaded from (see [CheckSequence]); 0 when the bundle had none, or for a
// policy not loaded from a bundle.
func (e *Engine) BundleSequence() uint64 { return e.bundleSequence }

// HasBatch reports whether the policy defines the rule decisions
// ([BatchQuery]), which decides list pages in one evaluation.
func (e *Engine) HasBatch() bool { return e.batch != nil }

// BundleKeyID is the id of the key whose signature verified the bundle the
// engine was loaded from (the JWS "kid", one of the configured
// [VerificationKey] ids); "" for a policy not loaded from a bundle.
func (e *Engine) BundleKeyID() string { return e.bundleKeyID }

// Decide evaluates the policy for in. It is fail-closed: unless the returned
// error is nil, the Decision denies, has a reason code and no obligations.
// The Decision always has an ID and a Revision.
func (e *Engine) Decide(ctx context.Context, in Input) (Decision, error) {
	d := Decision{ID: uuid.NewString(), Revision: e.revision}
	if err := in.validate(); err != nil {
		return e.fail(d, "bad_input", err)
	}
	// OPA notices cancellation only at its periodic checks, so a short
	// evaluation can finish on a context that is already done; refuse it
	// here so that a cancelled request is always a denial.
	if err := ctx.Err(); err != nil {
		return e.fail(d, "policy_error", fmt.Errorf("%w: %w", ErrEvaluation, err))
	}
	if e.recent != nil {
		e.recent.remember(&in, nil)
	}
	var key [32]byte
	if e.cache != nil {
		key = cacheKey(&in, e.keyURI)
		if c, ok := e.cache.get(key); ok {
			d.Allow, d.Reasons, d.Obligations = c.allow, slices.Clone(c.reasons), slices.Clone(c.obs)
			if e.log.Enabled(ctx, slog.LevelDebug) {
				e.log.Debug("policy decision", "decision_id", d.ID, "revision", d.Revision, "cached", true,
					"action", string(in.Action), "allow", d.Allow, "reasons", d.Reasons, "obligations", len(d.Obligations))
			}
			return d, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	opts, succeeded, release := e.evalOptions(&in, in.value())
	rs, err := evaluations.eval(ctx, &e.query, opts...)
	if err == nil {
		succeeded()
	}
	release()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			reason := "policy_error"
			if errors.Is(ctxErr, context.DeadlineExceeded) {
				reason = "policy_timeout"
			}
			// Wrapped so callers can tell a timeout or cancellation apart.
			return e.fail(d, reason, fmt.Errorf("%w: %w", ErrEvaluation, ctxErr))
		}
		return e.fail(d, "policy_error", fmt.Errorf("%w: %s", ErrEvaluation, evalErrorDetail(err)))
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return e.fail(d, "policy_undefined", ErrUndefined)
	}
	if len(rs) > 1 {
		return e.fail(d, "policy_bad_shape", fmt.Errorf("%w: %d results", ErrBadShape, len(rs)))
	}
	val, ok := rs[0].Expressions[0].Value.(ast.Value)
	if !ok {
		return e.fail(d, "policy_bad_shape", fmt.Errorf("%w: result is %T", ErrBadShape, rs[0].Expressions[0].Value))
	}
	val, nothingVisible, err := e.splitNothingVisible(val)
	if err != nil {
		return e.fail(d, "policy_bad_shape", err)
	}
	allow, reasons, obs, err := parseDecision(val)
	if err != nil {
		reason := "policy_bad_shape"
		if errors.Is(err, ErrBadObligation) {
			reason = "unknown_obligation"
		}
		return e.fail(d, reason, err)
	}
	d.Allow = allow
	d.Reasons = reasons
	if allow {
		d.Obligations = obs
	} else if len(d.Reasons) == 0 {
		d.Reasons = []string{"denied"}
	}
	if nothingVisible && (in.Action == ActionList || in.Action == ActionRead) {
		withhold(&d)
	}
	if e.cache != nil {
		e.cache.put(key, d)
	}
	// Guarded: the arguments alone cost allocations, even when discarded.
	if e.log.Enabled(ctx, slog.LevelDebug) {
		e.log.Debug("policy decision", "decision_id", d.ID, "revision", d.Revision,
			"action", string(in.Action), "allow", d.Allow, "reasons", d.Reasons, "obligations", len(d.Obligations))
	}
	return d, nil
}

var nothingVisibleRef = ast.MustParseRef(NothingVisibleQuery)

// withNothingVisible is query evaluated together with NothingVisibleQuery,
// in one evaluation: an array [query's value, nothing_visible].
func withNothingVisible(query string) string {
	return "[" + query + ", " + NothingVisibleQuery + "]"
}

// splitNothingVisible splits the value of a query built by
// withNothingVisible into the decision (or decisions) and nothing_visible,
// which must be a boolean. Without nothing_visible (e.nothing is nil) it
// returns v and false.
func (e *Engine) splitNothingVisible(v ast.Value) (ast.Value, bool, error) {
	if e.nothing == nil {
		return v, false, nil
	}
	arr, ok := v.(*ast.Array)
	if !ok || arr.Len() != 2 {
		return nil, false, fmt.Errorf("%w: result is %s, want [decision, nothing_visible]", ErrBadShape, valueName(v))
	}
	b, ok := arr.Elem(1).Value.(ast.Boolean)
	if !ok {
		return nil, false, fmt.Errorf("%w: nothing_visible is %s, want boolean", ErrBadShape, valueName(arr.Elem(1).Value))
	}
	return arr.Elem(0).Value, bool(b), nil
}

// withhold enforces nothing_visible on a list or read decision d: an allow
// becomes a denial (reason ReasonNothingVisible added, no obligations); a
// denial is left as it is.
func withhold(d *Decision) {
	if d.Allow {
		d.Allow, d.Obligations = false, nil
		d.Reasons = append(d.Reasons, ReasonNothingVisible)
	}
}

// NothingVisible reports whether the policy says that no resource can be
// allowed to in's principal for in's purpose, whatever the resource and
// grant (rule nothing_visible, [NothingVisibleQuery]). in.Action must be
// list or read, and in.Resource and in.BreakGlass nil. It is false, with
// a nil error, when the policy does not define the rule or the engine does
// not use it (see NothingVisibleQuery): the caller then decides every
// resource.
//
// True is safe to act on without deciding any resource: while it holds,
// every list and read decision of this engine for in's principal and
// purpose denies (Decide and DecideBatch enforce it). A non-nil error
// means the policy could not say; the result is then false and the caller
// must refuse the request (fail closed), as it would on a failed decision.
func (e *Engine) NothingVisible(ctx context.Context, in Input) (bool, error) {
	if e.nothing == nil {
		return false, nil
	}
	if err := in.validateBatch(nil); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("%w: %w", ErrEvaluation, err)
	}
	if in.Subject == nil {
		in.Subject = NewSubject(in.Principal)
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	opts, succeeded, release := e.evalOptions(&in, in.value())
	rs, err := evaluations.eval(ctx, e.nothing, opts...)
	defer release()
	switch {
	case err != nil && ctx.Err() != nil:
		return false, fmt.Errorf("%w: %w", ErrEvaluation, ctx.Err())
	case err != nil:
		return false, fmt.Errorf("%w: %s", ErrEvaluation, evalErrorDetail(err))
	case len(rs) != 1 || len(rs[0].Expressions) == 0:
		return false, fmt.Errorf("%w: nothing_visible has %d results", ErrBadShape, len(rs))
	}
	succeeded()
	b, ok := rs[0].Expressions[0].Value.(ast.Boolean)
	if !ok {
		v, _ := rs[0].Expressions[0].Value.(ast.Value)
		return false, fmt.Errorf("%w: nothing_visible is %s, want boolean", ErrBadShape, valueName(v))
	}
	return bool(b), nil
}

// fail turns d into a denial with reason and logs err, which must not hold PHI.
func (e *Engine) fail(d Decision, reason string, err error) (Decision, error) {
	d.Allow = false
	d.Reasons = []string{reason}
	d.Obligations = nil
	e.log.Warn("policy decision failed closed", "decision_id", d.ID, "revision", d.Revision,
		"reason", reason, "err", err)
	return d, err
}

// evalErrorDetail describes an evaluation error by OPA error code and policy
// location only. OPA messages can quote operand values, which may come from
// the input (patient ids, subjects), so they are left out.
func evalErrorDetail(err error) string {
	var parts []string
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case rego.Errors:
			for _, x := range e {
				walk(x)
			}
		case ast.Errors:
			for _, x := range e {
				parts = append(parts, locDetail(x.Code, x.Location))
			}
		case *ast.Error:
			parts = append(parts, locDetail(e.Code, e.Location))
		default:
			if te, ok := errors.AsType[*topdown.Error](err); ok {
				parts = append(parts, locDetail(te.Code, te.Location))
				return
			}
			parts = append(parts, fmt.Sprintf("%T", err))
		}
	}
	walk(err)
	return strings.Join(parts, "; ")
}

func locDetail(code string, loc *ast.Location) string {
	if loc == nil {
		return code
	}
	return fmt.Sprintf("%s at %s:%d", code, loc.File, loc.Row)
}

// lockedCapabilities is OPA's builtin set for this version without network
// access and without runtime introspection (which exposes environment and
// configuration). Policies calling them fail to compile.
var lockedCapabilities = sync.OnceValue(func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(slices.Clone(c.Builtins), func(b *ast.Builtin) bool {
		return b.Name == "http.send" || b.Name == "opa.runtime" || strings.HasPrefix(b.Name, "net.")
	})
	return c
})

type regoFile struct {
	path    string
	content []byte
}

// regoFiles returns the .rego files under fsys, sorted by path: the test
// modules (*_test.rego) when tests is true, the policy modules otherwise.
func regoFiles(fsys fs.FS, tests bool) ([]regoFile, error) {
	all, err := allRegoFiles(fsys)
	if err != nil {
		return nil, err
	}
	policies, testFiles := splitTests(all)
	if tests {
		return testFiles, nil
	}
	return policies, nil
}

// allRegoFiles reads every .rego file under fsys (policy modules and tests)
// in one walk, sorted by path.
//
// Hidden files and directories (a name beginning with ".") are not part of
// a policy: a Kubernetes ConfigMap or Secret volume holds each file twice,
// as a symbolic link (authz.rego -> ..data/authz.rego) and as the file it
// points to under a hidden, timestamped directory (..2026_12_05_…/), and
// reading both would define every rule twice; editors leave hidden lock
// files (.#authz.rego). A .rego entry that is not a regular file (followed
// through symbolic links) is an error naming it: reading a FIFO would block
// the load, and with it every reload, for good. So is a symbolic link to a
// directory: the walk does not follow it, and the modules in it, a deny
// rule among them, must not be left out without a word.
func allRegoFiles(fsys fs.FS) ([]regoFile, error) {
	var files []regoFile
	err := fs.WalkDir(fsys, ".", func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != "." && strings.HasPrefix(de.Name(), ".") {
			if de.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if de.Type()&fs.ModeSymlink != 0 {
			if fi, err := fs.Stat(fsys, path); err == nil && fi.IsDir() {
				return fmt.Errorf("%s is a %w: copy the directory in, or link its files one by one", path, ErrLinkedDir)
			}
		}
		if de.IsDir() || !strings.HasSuffix(path, ".rego") {
			return nil
		}
		fi, err := fs.Stat(fsys, path)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return &regularfile.NotRegularError{Path: path, Kind: regularfile.Kind(fi.Mode())}
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		files = append(files, regoFile{path: path, content: b})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b regoFile) int { return strings.Compare(a.path, b.path) })
	return files, nil
}

// splitTests splits sorted files into policy modules and test modules
// (*_test.rego), keeping the order.
func splitTests(files []regoFile) (policies, tests []regoFile) {
	for _, f := range files {
		if strings.HasSuffix(f.path, "_test.rego") {
			tests = append(tests, f)
		} else {
			policies = append(policies, f)
		}
	}
	return policies, tests
}

// revision is "sha256:" + hex(SHA-256(path_1 || 0x00 || content_1 || 0x00 || ...))
// over files sorted by path.
func revision(files []regoFile) string {
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f.path))
		h.Write([]byte{0})
		h.Write(f.content)
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// sortFiles sorts files by path, as regoFiles returns them.
func sortFiles(files []regoFile) []regoFile {
	slices.SortFunc(files, func(a, b regoFile) int { return strings.Compare(a.path, b.path) })
	return files
}

// evalOptions are the options of one evaluation of in, whose input document
// is value, the function to call once that evaluation has succeeded (it
// publishes the subject-level values the evaluation computed), and the one
// to call, if at all, once the evaluation has returned and its results are
// read: it gives the evaluation's virtual cache back for reuse.
func (e *Engine) evalOptions(in *Input, value ast.Value) (opts []rego.EvalOption, succeeded, release func()) {
	opts = make([]rego.EvalOption, 0, 3)
	opts = append(opts, rego.EvalParsedInput(value), noMetrics)
	if e.subjects == nil {
		vc := newFlatCache()
		return append(opts, rego.EvalVirtualCache(vc)), func() {}, vc.release
	}
	vc := e.subjects.forInput(in)
	return append(opts, rego.EvalVirtualCache(vc)), vc.commit, vc.release
}

// noMetrics turns metrics off: custos reads none, and OPA's default times
// every evaluation phase into a fresh map.
var noMetrics = rego.EvalMetrics(metrics.NoOp())

// analysis is what the static analysis of a policy found.
type analysis struct {
	levels ruleLevels // the subject-level rules (subjectcache.go)
	// readsURI: some rule can read a resource's URI, of input.resource
	// or of a list item (uriread.go): decisions are then cached per URI
	// and list items carry it. why names the first such read found.
	readsURI bool
	why      string
}

// analyse compiles modules on their own to find their subject-level rules
// and whether they can read a resource's URI; false (no subject cache,
// cache keys with the URI) if that compilation fails.
func analyse(modules []*ast.Module) (analysis, bool) {
	mods := make(map[string]*ast.Module, len(modules))
	for i, m := range modules {
		mods[fmt.Sprintf("%d", i)] = m.Copy()
	}
	c := ast.NewCompiler().WithCapabilities(lockedCapabilities()).WithDefaultRegoVersion(ast.RegoV1)
	if c.Compile(mods); c.Failed() {
		return analysis{readsURI: true, why: "the policy could not be analysed on its own"}, false
	}
	reads, why := readsURI(c)
	return analysis{levels: subjectLevelRules(c), readsURI: reads, why: why}, true
}
