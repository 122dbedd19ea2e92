package policy

import (
	"context"
	"fmt"
	"runtime"

	"github.com/open-policy-agent/opa/v1/rego"
)

// evalPool runs OPA evaluations on a few long-lived goroutines. OPA's
// evaluator recurses deeply, so a fresh request goroutine (which starts with
// a small stack) grew and copied its stack on nearly every decision: under
// 64 concurrent reads that was a quarter of the server's CPU. A worker's
// stack stays grown between evaluations. The pool also bounds how many
// evaluations run at once to a small multiple of the CPUs, which is all the
// CPU-bound evaluator can use; callers wait their turn (or give up when
// their context ends).
type evalPool struct{ jobs chan func() }

// evaluations is the pool every Engine shares (engines come and go with
// policy reloads; the workers stay).
var evaluations = newEvalPool(2 * runtime.GOMAXPROCS(0))

func newEvalPool(n int) *evalPool {
	p := &evalPool{jobs: make(chan func())}
	for range n {
		go func() {
			for f := range p.jobs {
				f()
			}
		}()
	}
	return p
}

// eval runs q.Eval(ctx, opts...) on a worker and returns its result. A
// panic in the evaluator is returned as an error, not a crash: the caller
// fails closed.
func (p *evalPool) eval(ctx context.Context, q *rego.PreparedEvalQuery, opts ...rego.EvalOption) (rs rego.ResultSet, err error) {
	done := make(chan struct{})
	job := func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				rs, err = nil, fmt.Errorf("policy evaluation panicked: %v", r)
			}
		}()
		rs, err = q.Eval(ctx, opts...)
	}
	select {
	case p.jobs <- job:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-done
	return rs, err
}
