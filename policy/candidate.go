package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// TestRunBudget bounds what a load runs of a candidate (vet: every server
// load, policy bundle, sign, verify and impact): its Rego tests, beyond
// TestCaseTimeout for each case, and then the agreement grid (agree.go),
// together. Both run in the server, on every core, and a reload (SIGHUP,
// the watcher) and a start wait for them. A run over it refuses the
// candidate (ErrTestsFailed). The default policy's tests take seconds, its
// grid a fraction of one.
const TestRunBudget = 5 * time.Minute

var testRunBudget = TestRunBudget // shortened by tests

// maxReasonLen bounds a rejection reason in logs and audit records; compile
// errors of a large policy can otherwise run to many kilobytes.
const maxReasonLen = 1024

// vet is the gate every candidate policy passes before it may serve: its
// policy modules compile into an Engine (as [Load] does) and its Rego tests
// pass. files are all the candidate's .rego files, read once, so that what is
// compiled, what is tested and what is digested are the same bytes. opts must
// have been validated. Errors wrap ErrCompile or ErrTestsFailed.
//
// With requireTests false a candidate without any *_test.rego is accepted
// untested; test modules that exist are always run.
func vet(ctx context.Context, files []regoFile, opts Options, requireTests bool) (*Engine, error) {
	policies, tests := splitTests(files)
	e, err := compile(ctx, policies, opts)
	if err != nil {
		return nil, err
	}
	if len(tests) == 0 && requireTests {
		return nil, fmt.Errorf("%w: no *_test.rego files: a policy must ship its tests", ErrTestsFailed)
	}
	// One budget for the tests and the agreement grid: the grid decides
	// ~800 items twice, each within Options.Timeout, so a candidate slow on
	// every item held a load for minutes after its tests.
	bctx, cancel := context.WithTimeout(ctx, testRunBudget)
	defer cancel()
	overBudget := func(err error) error {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && bctx.Err() != nil {
			return fmt.Errorf("%w: the Rego tests and the agreement check of decisions ran longer than %v (the limit of a load, TestRunBudget)", ErrTestsFailed, testRunBudget)
		}
		return nil
	}
	if len(tests) > 0 {
		sum, err := runTests(bctx, policies, tests, false)
		if err != nil {
			if berr := overBudget(err); berr != nil {
				return nil, berr
			}
			return nil, fmt.Errorf("%w: %w", ErrTestsFailed, err)
		}
		if sum.Failed > 0 {
			shown := sum.Failures
			if len(shown) > 5 {
				shown = shown[:5]
			}
			return nil, fmt.Errorf("%w: %d of %d Rego tests failed: %s", ErrTestsFailed,
				sum.Failed, sum.Failed+sum.Passed, strings.Join(shown, "; "))
		}
	}
	if err := vetBatch(bctx, e, policies, opts); err != nil {
		if berr := overBudget(err); berr != nil {
			return nil, berr
		}
		return nil, err
	}
	return e, nil
}

// vetBatch refuses a candidate whose decisions rule (list pages) disagrees
// with its decision rule (reads) on the agreement grid (agree.go), whatever
// its own tests say: a listing must never show what a read would deny.
//
// Policy files whose grid agreed once in this process are not decided
// again (agreedBefore): the grid and both decisions are a function of the
// files alone (the capabilities are fixed, the grid is synthetic), so the
// answer would be the same, and a server or a test that loads the same
// bundle again paid for the grid each time (about a second for the
// default policy, ten under the race detector). Only agreement is kept;
// a refusal is decided again at every load.
func vetBatch(ctx context.Context, e *Engine, policies []regoFile, opts Options) error {
	if e.batch == nil {
		return nil
	}
	key := revision(policies)
	if agreedBefore(key) {
		return nil
	}
	u, err := uncached(ctx, policies, opts)
	if err != nil {
		return err
	}
	if err := batchAgrees(ctx, u); err != nil {
		return fmt.Errorf("%w: %w", ErrTestsFailed, err)
	}
	rememberAgreed(key)
	return nil
}

// agreed holds the revisions (revision: the policy files' digest) whose
// agreement grid agreed in this process, at most maxAgreed of them.
var agreed struct {
	sync.Mutex
	revisions map[string]bool
}

// maxAgreed bounds agreed: a process that loads more distinct policies
// decides the grid of each one past it at every load.
const maxAgreed = 64

func agreedBefore(rev string) bool {
	agreed.Lock()
	defer agreed.Unlock()
	return agreed.revisions[rev]
}

func rememberAgreed(rev string) {
	agreed.Lock()
	defer agreed.Unlock()
	if agreed.revisions == nil {
		agreed.revisions = map[string]bool{}
	}
	if len(agreed.revisions) < maxAgreed {
		agreed.revisions[rev] = true
	}
}

// candidateError is err refusing e, a candidate that compiled and passed
// its tests (a rollback, a load whose record could not be written), named
// by e's identity.
func (e *Engine) candidateError(err error) *CandidateError {
	return &CandidateError{Digest: e.candidateDigest, Revision: e.revision, Sequence: e.bundleSequence, KeyID: e.bundleKeyID, Err: err}
}

// truncateReason shortens an error message for a log line or audit record.
func truncateReason(s string) string {
	if len(s) <= maxReasonLen {
		return s
	}
	// Cut on a rune boundary.
	cut := maxReasonLen
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
