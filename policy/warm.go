package policy

import (
	"context"
	"sync"
)

// Warming a new engine. Each Engine starts with an empty subject cache (see
// subjectcache.go), so right after a policy reload every principal's next
// decision would cost a first decision (two to three times a later one),
// all at once under load. An engine therefore remembers the last inputs it
// decided (recentInputs of them, single decisions and list pages), and the
// Reloader has a candidate decide them again, off the request path and
// within a time budget, before it swaps the candidate in.
//
// Warming only fills the candidate's subject cache, through the same
// evaluation and publication as a request (values computed by the
// candidate's own policy for the inputs evaluated, published only when the
// evaluation succeeds); it makes no decision anyone sees, writes no audit
// record and leaves the decision cache alone.

// recentInputs is how many recent inputs an Engine remembers for warming
// its successor.
const recentInputs = 64

// recent is a ring of the inputs an Engine decided last.
type recent struct {
	mu   sync.Mutex
	ring [recentInputs]warmInput
	next int
	n    int
}

// warmInput is one remembered request: a single decision (items nil) or a
// list page. Resources are copies, so that the caller's may change.
type warmInput struct {
	in    Input
	items []Item
}

// remember records a decision's input (after validation).
func (r *recent) remember(in *Input, items []Item) {
	w := warmInput{in: *in}
	if in.Resource != nil {
		res := *in.Resource
		w.in.Resource = &res
	}
	if in.BreakGlass != nil {
		bg := *in.BreakGlass
		w.in.BreakGlass = &bg
	}
	if items != nil {
		w.items = make([]Item, len(items))
		res := make([]Resource, len(items))
		for i, it := range items {
			res[i] = *it.Resource
			w.items[i] = Item{Resource: &res[i]}
			if it.BreakGlass != nil {
				bg := *it.BreakGlass
				w.items[i].BreakGlass = &bg
			}
		}
	}
	r.mu.Lock()
	r.ring[r.next] = w
	r.next = (r.next + 1) % recentInputs
	r.n = min(r.n+1, recentInputs)
	r.mu.Unlock()
}

// newestFirst returns the remembered inputs, the most recent first.
func (r *recent) newestFirst() []warmInput {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]warmInput, 0, r.n)
	for i := 1; i <= r.n; i++ {
		out = append(out, r.ring[(r.next-i+recentInputs)%recentInputs])
	}
	return out
}

// Warm has e evaluate again, most recent first, the inputs prev decided
// last, until they are done or ctx ends, filling e's subject cache; it
// returns how many evaluations succeeded. The results are dropped. Nothing
// happens when either engine has no subject cache (a nondeterministic
// policy, or Options.SubjectCache < 0).
func (e *Engine) Warm(ctx context.Context, prev *Engine) int {
	if e.subjects == nil || prev == nil || prev.recent == nil {
		return 0
	}
	done := 0
	for _, w := range prev.recent.newestFirst() {
		if ctx.Err() != nil {
			break
		}
		in := w.in
		if w.items == nil {
			if in.validate() != nil {
				continue // remembered after validation: cannot happen
			}
			ectx, cancel := context.WithTimeout(ctx, e.timeout)
			opts, succeeded, release := e.evalOptions(&in, in.value())
			_, err := evaluations.eval(ectx, &e.query, opts...)
			cancel()
			if err == nil {
				succeeded()
				done++
			}
			release()
			continue
		}
		if e.batch == nil || len(w.items) == 0 || in.validateBatch(w.items) != nil {
			continue
		}
		if in.Subject == nil {
			in.Subject = NewSubject(in.Principal)
		}
		todo := make([]int, len(w.items))
		for i := range todo {
			todo[i] = i
		}
		if _, err := e.evalBatch(ctx, &in, w.items, todo, make([]Decision, len(w.items))); err == nil {
			done++
		}
	}
	return done
}
