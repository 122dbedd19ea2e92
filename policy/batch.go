package policy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/google/uuid"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/custos-mcp/custos/minimize"
)

// Item is one resource of a batch decision ([Engine.DecideBatch]): the
// resource and, if any, the active break-the-glass grant that covers the
// principal and the resource's patient (what Input.Resource and
// Input.BreakGlass would be for a single decision).
type Item struct {
	Resource   *Resource
	BreakGlass *BreakGlass
}

var keyItems = ast.StringTerm("items")

// DecideBatch decides every item of a list page for one principal, purpose
// and action: decisions[i] is the decision [Engine.Decide] would return for
// in with Resource and BreakGlass set from items[i] (a fresh ID each, the
// engine's revision). in.Resource and in.BreakGlass must be nil; in.Action
// must be list or read.
//
// A policy that defines the rule decisions ([BatchQuery]) decides all the
// items the decision cache does not hold in one evaluation, whose input is
// in's document with "items": [{"resource": ..., "break_glass": ... or
// null}, ...] (see docs/policy.md, "Batch decisions"); the result must be an
// array with one well-formed decision per item, in order. A policy without
// it is evaluated per item with [Query]. The lock-down and the timeout are
// those of Decide; the timeout bounds the whole batch.
//
// It is fail-closed as a whole: unless the returned error is nil, every
// returned Decision denies, with a reason code and no obligations (bad
// input, an evaluation error or timeout, a result that is not one
// well-formed decision per item, or any item failing in the per-item
// fallback). A list built from the result can therefore never hold an item
// that a failed evaluation would have allowed.
func (e *Engine) DecideBatch(ctx context.Context, in Input, items []Item) ([]Decision, error) {
	ds := make([]Decision, len(items))
	ids := newIDs(len(items))
	for i := range ds {
		ds[i] = Decision{ID: ids[i], Revision: e.revision}
	}
	if err := in.validateBatch(items); err != nil {
		return e.failAll(ds, "bad_input", err)
	}
	if err := ctx.Err(); err != nil {
		return e.failAll(ds, "policy_error", fmt.Errorf("%w: %w", ErrEvaluation, err))
	}
	if len(items) == 0 {
		return ds, nil
	}
	if e.recent != nil {
		e.recent.remember(&in, items)
	}
	if in.Subject == nil {
		// Convert the principal once for the whole batch (term and cache
		// digest), as a list request does.
		in.Subject = NewSubject(in.Principal)
	}
	if e.batch == nil {
		return e.decideEach(ctx, in, items, ds)
	}

	// The decision cache is consulted and filled per item, exactly as
	// Decide does, so a page listed again costs no evaluation.
	var keys [][32]byte
	todo := make([]int, 0, len(items))
	if e.cache != nil {
		keys = make([][32]byte, len(items))
	}
	for i, it := range items {
		if e.cache != nil {
			x := in
			x.Resource, x.BreakGlass = it.Resource, it.BreakGlass
			keys[i] = cacheKey(&x, e.keyURI)
			if c, ok := e.cache.get(keys[i]); ok {
				ds[i].Allow, ds[i].Reasons, ds[i].Obligations = c.allow, slices.Clone(c.reasons), slices.Clone(c.obs)
				continue
			}
		}
		todo = append(todo, i)
	}
	if len(todo) > 0 {
		if reason, err := e.evalBatch(ctx, &in, items, todo, ds); err != nil {
			return e.failAll(ds, reason, err)
		}
		if e.cache != nil {
			for _, i := range todo {
				e.cache.put(keys[i], ds[i])
			}
		}
	}
	if e.log.Enabled(ctx, slog.LevelDebug) {
		for i := range ds {
			d := &ds[i]
			e.log.Debug("policy decision", "decision_id", d.ID, "revision", d.Revision, "batch", true,
				"cached", !slices.Contains(todo, i), "action", string(in.Action), "allow", d.Allow,
				"reasons", d.Reasons, "obligations", len(d.Obligations))
		}
	}
	return ds, nil
}

// evalBatch evaluates BatchQuery for items[todo] and fills ds[todo]. On
// error it returns the reason code for failAll.
func (e *Engine) evalBatch(ctx context.Context, in *Input, items []Item, todo []int, ds []Decision) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	opts, succeeded, release := e.evalOptions(in, in.batchValue(items, todo, e.itemURI))
	rs, err := evaluations.eval(ctx, e.batch, opts...)
	defer release()
	if err == nil {
		succeeded()
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			reason := "policy_error"
			if errors.Is(ctxErr, context.DeadlineExceeded) {
				reason = "policy_timeout"
			}
			return reason, fmt.Errorf("%w: %w", ErrEvaluation, ctxErr)
		}
		return "policy_error", fmt.Errorf("%w: %s", ErrEvaluation, evalErrorDetail(err))
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return "policy_undefined", ErrUndefined
	}
	if len(rs) > 1 {
		return "policy_bad_shape", fmt.Errorf("%w: %d results", ErrBadShape, len(rs))
	}
	v, _ := rs[0].Expressions[0].Value.(ast.Value)
	v, nothingVisible, err := e.splitNothingVisible(v)
	if err != nil {
		return "policy_bad_shape", err
	}
	arr, ok := v.(*ast.Array)
	if !ok {
		return "policy_bad_shape", fmt.Errorf("%w: decisions is %s, want array", ErrBadShape, valueName(v))
	}
	if arr.Len() != len(todo) {
		return "policy_bad_shape", fmt.Errorf("%w: %d decisions for %d items", ErrBadShape, arr.Len(), len(todo))
	}
	// Items with the same features usually share one result term (OPA
	// memoizes functions), so each distinct term is checked once.
	type parsed struct {
		allow   bool
		reasons []string
		obs     []minimize.Obligation
	}
	seen := map[ast.Value]parsed{}
	for j, i := range todo {
		v := arr.Elem(j).Value
		p, ok := seen[v]
		if !ok {
			allow, reasons, obs, err := parseDecision(v)
			if err != nil {
				reason := "policy_bad_shape"
				if errors.Is(err, ErrBadObligation) {
					reason = "unknown_obligation"
				}
				return reason, fmt.Errorf("decisions[%d]: %w", j, err)
			}
			p = parsed{allow, reasons, obs}
			if _, isObj := v.(ast.Object); isObj { // pointer identity; other kinds were rejected above
				seen[v] = p
			}
		}
		d := &ds[i]
		d.Allow = p.allow
		d.Reasons = slices.Clone(p.reasons)
		if p.allow {
			d.Obligations = slices.Clone(p.obs)
		} else if len(d.Reasons) == 0 {
			d.Reasons = []string{"denied"}
		}
		if nothingVisible {
			withhold(d)
		}
	}
	return "", nil
}

// decideEach is DecideBatch for a policy without a batch rule: Decide per
// item, and any failure fails the whole batch.
func (e *Engine) decideEach(ctx context.Context, in Input, items []Item, ds []Decision) ([]Decision, error) {
	for i, it := range items {
		x := in
		x.Resource, x.BreakGlass = it.Resource, it.BreakGlass
		d, err := e.Decide(ctx, x)
		if err != nil {
			return e.failAll(ds, d.Reasons[0], fmt.Errorf("item %d: %w", i, err))
		}
		d.ID = ds[i].ID
		ds[i] = d
	}
	return ds, nil
}

// failAll turns every decision of ds into a denial with reason and logs err
// once; err must not hold PHI.
func (e *Engine) failAll(ds []Decision, reason string, err error) ([]Decision, error) {
	for i := range ds {
		ds[i].Allow = false
		ds[i].Reasons = []string{reason}
		ds[i].Obligations = nil
	}
	first := ""
	if len(ds) > 0 {
		first = ds[0].ID
	}
	e.log.Warn("policy batch decision failed closed", "first_decision_id", first, "items", len(ds),
		"revision", e.revision, "reason", reason, "err", err)
	return ds, err
}

// validateBatch checks what the engine requires of a batch.
func (in *Input) validateBatch(items []Item) error {
	if in.Resource != nil || in.BreakGlass != nil {
		return fmt.Errorf("%w: a batch takes its resources and grants from the items", ErrBadInput)
	}
	if in.Action != ActionList && in.Action != ActionRead {
		return fmt.Errorf("%w: a batch decides list or read (%d bytes)", ErrBadInput, len(in.Action))
	}
	for i, it := range items {
		if it.Resource == nil {
			return fmt.Errorf("%w: item %d has no resource", ErrBadInput, i)
		}
	}
	x := *in
	x.Resource = &Resource{}
	return x.validate()
}

// batchValue is the input document of a batch over items[todo]: in's
// document with "items", each {"resource": ..., "break_glass": ... or null}
// (both keys always present, every resource field set but, unless withURI,
// "uri").
//
// withURI is false when no rule of the policy can read
// input.resource.uri nor a list item's uri (Engine.itemURI; readsURI):
// decisions are then cached without the URI, list decisions
// too. Leaving the URI out keeps a list decision a function of the
// URI-free input even should the analysis miss a read; a policy it finds
// reading an item's uri gets it (TestListRuleDenyingByItemURIDeniesOnList).
func (in *Input) batchValue(items []Item, todo []int, withURI bool) ast.Value {
	terms := make([]*ast.Term, len(todo))
	for j, i := range todo {
		bg := ast.NullTerm()
		if items[i].BreakGlass != nil {
			bg = breakGlassTerm(items[i].BreakGlass)
		}
		terms[j] = ast.ObjectTerm(
			ast.Item(keyResource, resourceFields(items[i].Resource, withURI)),
			ast.Item(keyBreakGlass, bg),
		)
	}
	return ast.NewObject(
		ast.Item(keyPrincipal, in.Subject.termOr(&in.Principal)),
		ast.Item(keyPurpose, ast.StringTerm(in.PurposeOfUse)),
		ast.Item(keyAction, ast.StringTerm(string(in.Action))),
		ast.Item(keyItems, ast.ArrayTerm(terms...)),
	)
}

// newIDs returns n fresh random (version 4) UUIDs, drawing the randomness
// for all of them in one read from crypto/rand.
func newIDs(n int) []string {
	ids := make([]string, n)
	buf := make([]byte, 16*n)
	if _, err := rand.Read(buf); err != nil {
		// crypto/rand.Read does not fail on supported platforms; fall back
		// to one read per id rather than reuse randomness.
		for i := range ids {
			ids[i] = uuid.NewString()
		}
		return ids
	}
	r := bytes.NewReader(buf)
	for i := range ids {
		u, err := uuid.NewRandomFromReader(r)
		if err != nil {
			u = uuid.New()
		}
		ids[i] = u.String()
	}
	return ids
}

// valueName is ast.ValueName, tolerating nil.
func valueName(v ast.Value) string {
	if v == nil {
		return "no value"
	}
	return ast.ValueName(v)
}
