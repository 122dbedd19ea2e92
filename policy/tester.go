package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestSummary is the outcome of [RunTests].
type TestSummary struct {
	Passed   int
	Failed   int      // failed, errored or skipped (todo_test_) tests
	Failures []string // one line per failed test: "package.name: FAIL|ERROR ... (file:line)"
}

// TestCaseTimeout bounds one Rego test case in RunTests and
// RunTestsCoverage. OPA's tester defaults to 5 s, which the default policy's
// table tests (every principal × purpose × page item) exceed on a loaded
// 2-core machine, turning a correct policy into a failed test. The caller's
// context still bounds the whole run.
const TestCaseTimeout = time.Minute

// newTestRunner returns OPA's test runner as custos runs a policy's tests:
// Rego v1, strict builtin errors, TestCaseTimeout per test case, and the
// engine's capabilities (lockedCapabilities: no http.send, net.* or
// opa.runtime; calling one is a compile error). The tests a candidate
// ships are run by the server at every load (vet), inside its network, so
// they get no more than the policy does: with OPA's full capabilities, a
// signed bundle's test could make the server send requests to any host it
// can reach.
func newTestRunner() *tester.Runner {
	return tester.NewRunner().
		SetCompiler(ast.NewCompiler().WithCapabilities(lockedCapabilities()).WithDefaultRegoVersion(ast.RegoV1)).
		SetDefaultRegoVersion(ast.RegoV1).
		SetTimeout(TestCaseTimeout).
		RaiseBuiltinErrors(true)
}

// RunTests runs the Rego unit tests (rules named test_* in *_test.rego files)
// under fsys against the policy modules under fsys, with OPA's tester. It
// returns an error if the modules do not compile or if no test was found;
// failing tests are reported in the summary, not as an error.
//
// Tests are compiled and run under the production lock-down (see
// newTestRunner): a server runs a candidate's tests at every load.
func RunTests(ctx context.Context, fsys fs.FS) (TestSummary, error) {
	var sum TestSummary
	policies, err := regoFiles(fsys, false)
	if err != nil {
		return sum, err
	}
	tests, err := regoFiles(fsys, true)
	if err != nil {
		return sum, err
	}
	return runTests(ctx, policies, tests, false)
}

// runTests is RunTests over files already read. With firstFailure it stops
// at the first test that fails: the summary then holds that failure and the
// tests that passed before it, which is all a caller asking "does any test
// fail?" needs (the mutation test of the default policy).
func runTests(ctx context.Context, policies, tests []regoFile, firstFailure bool) (TestSummary, error) {
	var sum TestSummary
	if len(tests) == 0 {
		return sum, errors.New("policy: no *_test.rego files found")
	}
	modules := make(map[string]*ast.Module, len(policies)+len(tests))
	for _, f := range slices.Concat(policies, tests) {
		m, err := ast.ParseModuleWithOpts(f.path, string(f.content), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return sum, fmt.Errorf("%w: %w", ErrCompile, err)
		}
		modules[f.path] = m
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ch, err := newTestRunner().SetModules(modules).RunTests(runCtx, nil)
	if err != nil {
		return sum, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	stopped := false
	for r := range ch {
		if stopped {
			continue // cancelled after the first failure
		}
		if r.Pass() {
			sum.Passed++
			continue
		}
		sum.Failed++
		outcome := "FAIL"
		switch {
		case r.Skip:
			outcome = "SKIPPED"
		case r.Error != nil:
			outcome = "ERROR " + r.Error.Error()
		}
		loc := ""
		if r.Location != nil {
			loc = fmt.Sprintf(" (%s:%d)", r.Location.File, r.Location.Row)
		}
		sum.Failures = append(sum.Failures, r.Package+"."+r.Name+": "+outcome+loc)
		if firstFailure {
			stopped = true
			stop()
		}
	}
	slices.Sort(sum.Failures)
	if sum.Passed+sum.Failed == 0 {
		return sum, errors.New("policy: no Rego tests (test_* rules) found")
	}
	return sum, ctx.Err()
}
