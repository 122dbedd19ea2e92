package policy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
)

// A caller whose context ends while every worker is busy gives up (its
// deadline covers the wait), and the pool keeps serving afterwards.
func TestEvalPoolWaitEndsWithTheContext(t *testing.T) {
	p := newEvalPool(1)
	release := make(chan struct{})
	busy := make(chan struct{})
	go func() { p.jobs <- func() { close(busy); <-release } }()
	<-busy
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	q, err := rego.New(rego.Query("x := 1")).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.eval(ctx, &q); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued past its deadline: %v, want DeadlineExceeded", err)
	}
	close(release)
	rs, err := p.eval(context.Background(), &q)
	if err != nil || len(rs) != 1 || rs[0].Bindings["x"] == nil {
		t.Fatalf("after the worker freed: %v %v", rs, err)
	}
}

// A panic inside an evaluation is an error for that caller (who fails
// closed), not a crash, and the worker survives it.
func TestEvalPoolPanicIsAnError(t *testing.T) {
	p := newEvalPool(1)
	_, err := p.eval(context.Background(), nil) // a nil query panics in Eval
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("err = %v, want a panic turned into an error", err)
	}
	q, err := rego.New(rego.Query("x := 2")).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.eval(context.Background(), &q); err != nil {
		t.Fatalf("the worker did not survive the panic: %v", err)
	}
}
