package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store"
)

// The decision step of the request path (see doc.go): after a request is
// admitted (server.go) and before anything is fetched (resources.go), every
// request about resources is decided here, and every decision is recorded
// before it has any effect.
//
// Invariant: policy decision, then durable audit record, only then fetch.
// decideResource returns allow only for an allowed decision whose record is
// durable; a caller fetches a payload only after that, and a denial, a
// missing URI, a policy error or an audit failure fetches nothing. Denied
// and not found are alike to the caller (callers answer both notFound);
// only the record says which it was.

// Snapshotter is implemented by a Decider whose policy can be replaced
// while serving (policy.Reloader is one). Current returns the engine in
// force now. When Config.Policy is a Snapshotter, the server calls Current
// once as it admits a request and decides the whole request with that
// engine: a list page never mixes two policy revisions, and the audit
// record names the revision that decided. A Decider that is not a
// Snapshotter (a *policy.Engine) decides every request itself.
type Snapshotter interface {
	Current() *policy.Engine
}

// The deciders custos serves with.
var (
	_ Decider     = (*policy.Engine)(nil)
	_ Decider     = (*policy.Reloader)(nil)
	_ Snapshotter = (*policy.Reloader)(nil)
)

// snapshotOf is how New pins the policy of a request: for a Snapshotter,
// its engine in force when called; otherwise the Decider itself.
func snapshotOf(d Decider) func() Decider {
	if sn, ok := d.(Snapshotter); ok {
		return func() Decider { return sn.Current() }
	}
	return func() Decider { return d }
}

// decCtxKey carries the Decider that decides one request.
type decCtxKey struct{}

// withDecider pins the policy for the request in ctx (s.snapshot).
func (s *Server) withDecider(ctx context.Context) context.Context {
	return context.WithValue(ctx, decCtxKey{}, s.snapshot())
}

// decider is the Decider pinned for the request in ctx; outside a request
// (policy and grant events) the configured Decider.
func (s *Server) decider(ctx context.Context) Decider {
	if d, ok := ctx.Value(decCtxKey{}).(Decider); ok {
		return d
	}
	return s.cfg.Policy
}

// policyRevision names the policy in force for the request: its revision
// and, when it came from a signed bundle, " bundle=" and the bundle digest.
func (s *Server) policyRevision(ctx context.Context, rev string) string {
	d := s.decider(ctx)
	if rev == "" {
		rev = d.Revision()
	}
	if b := d.BundleDigest(); b != "" {
		return rev + " bundle=" + b
	}
	return rev
}

// visibility is implemented by a Decider whose policy can say that nothing
// is visible to a caller (*policy.Engine, *policy.Reloader).
type visibility interface {
	// NothingVisible is true when no resource can be allowed to in's
	// principal for in's purpose; the policy then denies every list and
	// read decision for them (policy.Engine.NothingVisible).
	NothingVisible(ctx context.Context, in policy.Input) (bool, error)
}

var (
	_ visibility = (*policy.Engine)(nil)
	_ visibility = (*policy.Reloader)(nil)
)

// nothingVisible asks the policy pinned for the request whether nothing
// is visible to id for its purpose; false when the Decider cannot say.
// It is not a second decision: the engine enforces the answer inside the
// one decision function, so while it is true every item a list would scan
// is denied, and answering an empty page instead changes no page. (The
// tenant boundary, finishDecision, only ever turns allows into denials.)
//
// subj is id.Principal converted once per request (policy.NewSubject).
func (s *Server) nothingVisible(ctx context.Context, id Identity, subj *policy.Subject) (bool, error) {
	v, ok := s.decider(ctx).(visibility)
	if !ok {
		return false, nil
	}
	t0 := time.Now()
	nv, err := v.NothingVisible(ctx, policy.Input{Subject: subj, PurposeOfUse: id.PurposeOfUse, Action: policy.ActionList})
	s.cfg.Metrics.ObservePolicy(time.Since(t0))
	return nv, err
}

// verdict is the outcome of decideResource: allow, or the error to return
// (nil for a plain denial, which callers answer as not found).
type verdict struct {
	allow bool
	err   error
	rec   audit.Record    // the durable record of the decision
	e     audit.Entry     // that record's entry, for a follow-up failure record
	r     store.Resource  // the resource decided on
	d     policy.Decision // the decision
}

// decideURI decides whether id may read uri now and commits the audit
// record of that decision under action (subscribe or notify); see
// decideResource.
func (s *Server) decideURI(ctx context.Context, id Identity, uri, action string) verdict {
	u, err := store.ParseURI(uri)
	if err != nil { // callers pass canonical URIs
		return verdict{err: invalidParams("invalid resource uri")}
	}
	// A notification record is kept small: the decision input is recorded
	// with the subscription, not with every notification.
	return s.decideResource(ctx, id, s.entry(ctx, id, action), u, 0, action != ActionNotify)
}

// decideResource is the one lookup → decision → durable record step of
// every request about one resource (a read, a ranged read, a subscription,
// a notification), under e's action: it looks up u's metadata, decides as
// a read, and commits e with the outcome (the decision input too when
// withInput) before returning; only an allowed decision with a durable
// record returns allow. A missing URI is decided as if it existed with the
// labels of its URI, then denied as not_found, so neither the answer nor
// its timing says whether it exists. page > 0 names the page of a ranged
// read in every reason (",page=N").
func (s *Server) decideResource(ctx context.Context, id Identity, e audit.Entry, u store.URI, page int, withInput bool) verdict {
	uri := u.String()
	e.URIs = []string{uri}
	e.DecisionID = uuid.NewString()

	r, err := s.cfg.Catalog.Get(uri)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		e.Patients = patientList(s.patientOf(u))
		return verdict{err: s.catalogFailed(ctx, e, withPage(ReasonCatalogUnavailable, page), err)}
	}
	if found {
		e.Patients = patientList(r.Labels.Patient)
		e.Digests = []string{digestRef(r)}
	} else {
		// Decided as a resource of the patient its URI names, by the id
		// resources name that patient by (patientOf), so that the record
		// names the patient as a found resource's would.
		r = store.Resource{URI: uri, MIMEType: u.MIMEType(), Labels: store.Labels{Tenant: u.Tenant, Patient: s.patientOf(u), Type: u.Type}}
		e.Patients = patientList(r.Labels.Patient)
	}
	in := policy.Input{Subject: policy.NewSubject(id.Principal), PurposeOfUse: id.PurposeOfUse, Action: policy.ActionRead, Resource: resourceInput(r),
		BreakGlass: s.breakGlass(id, r.Labels.Tenant, r.Labels.Patient)}
	d, derr := s.decideInput(ctx, in, r, id.Principal.Tenant)
	// The input as evaluated, recorded (pseudonymized) with the decision
	// for replay against a candidate policy (custos policy impact).
	in.Principal, in.Subject = id.Principal, nil
	if d.ID != "" {
		e.DecisionID = d.ID
	}
	if d.Revision != "" {
		e.PolicyRevision = d.Revision
	}
	e.Reason = strings.Join(d.Reasons, ",")
	var rec *policy.Input
	if withInput {
		rec = &in
	}
	switch {
	case clientCancelled(ctx, derr):
		return verdict{err: s.undecidedCancelled(e.Action)}
	case derr != nil:
		reason := cmp.Or(e.Reason, ReasonPolicyError)
		if !found {
			reason += "," + ReasonNotFound
		}
		s.log.Error("policy could not decide; request refused", "action", e.Action, "decision", d.ID, "err", derr)
		return verdict{err: s.refuseInput(ctx, e, rec, audit.OutcomeError, withPage(reason, page), undecided())}
	case !found:
		e.Outcome, e.Reason = audit.OutcomeDeny, ReasonNotFound
	case !d.Allow:
		e.Outcome = audit.OutcomeDeny
		if e.Reason == "" {
			e.Reason = ReasonDenied
		}
	default:
		e.Outcome = audit.OutcomeAllow
		for _, o := range d.Obligations {
			e.Obligations = append(e.Obligations, o.String())
		}
	}
	e.Reason = withPage(e.Reason, page)
	saved, aerr := s.commitInput(ctx, e, rec)
	if aerr != nil {
		return verdict{err: aerr}
	}
	if e.Outcome != audit.OutcomeAllow {
		return verdict{}
	}
	var grants grantsRelied
	grants.add(grantRelied(in.BreakGlass, d))
	s.recordUses(grants, saved)
	return verdict{allow: true, rec: saved, e: e, r: r, d: d}
}

// resourceInput is the policy view of a catalog entry.
func resourceInput(r store.Resource) *policy.Resource {
	return &policy.Resource{
		URI: r.URI, Type: r.Labels.Type, Patient: r.Labels.Patient, Tenant: r.Labels.Tenant,
		Sensitivity: nonNil(r.Labels.Sensitivity), Consent: nonNil(r.Labels.Consent),
	}
}

// decide asks the policy about one resource. It is the single decision
// function behind both list and read. It also returns the id of the
// break-the-glass grant an allowed decision relied on ("" if none).
//
// subj is id.Principal converted once per request (policy.NewSubject).
func (s *Server) decide(ctx context.Context, id Identity, subj *policy.Subject, action policy.Action, r store.Resource) (policy.Decision, string, error) {
	bg := s.breakGlass(id, r.Labels.Tenant, r.Labels.Patient)
	d, err := s.decideInput(ctx, policy.Input{
		Subject: subj, PurposeOfUse: id.PurposeOfUse, Action: action, Resource: resourceInput(r), BreakGlass: bg,
	}, r, id.Principal.Tenant)
	return d, grantRelied(bg, d), err
}

// decideInput is decide on an input already built from r, for a caller of
// tenant.
func (s *Server) decideInput(ctx context.Context, in policy.Input, r store.Resource, tenant string) (policy.Decision, error) {
	t0 := time.Now()
	d, err := s.decider(ctx).Decide(ctx, in)
	s.cfg.Metrics.ObservePolicy(time.Since(t0))
	return s.finishDecision(ctx, d, err, r, tenant)
}

// decideBatch decides a list page of rs in one policy evaluation; each
// decision is finished exactly as decideInput finishes a read's. grants[i]
// is the id of the break-the-glass grant ds[i] relied on ("" if none).
func (s *Server) decideBatch(ctx context.Context, id Identity, subj *policy.Subject, rs []store.Resource) (ds []policy.Decision, grants []string, err error) {
	items := make([]policy.Item, len(rs))
	for i, r := range rs {
		items[i] = policy.Item{Resource: resourceInput(r), BreakGlass: s.breakGlass(id, r.Labels.Tenant, r.Labels.Patient)}
	}
	t0 := time.Now()
	ds, err = s.decider(ctx).DecideBatch(ctx, policy.Input{Subject: subj, PurposeOfUse: id.PurposeOfUse, Action: policy.ActionList}, items)
	s.cfg.Metrics.ObservePolicy(time.Since(t0))
	if err == nil && len(ds) != len(rs) {
		err = fmt.Errorf("policy: %d decisions for %d items", len(ds), len(rs))
	}
	if err != nil {
		return nil, nil, err
	}
	grants = make([]string, len(ds))
	for i := range ds {
		ds[i], _ = s.finishDecision(ctx, ds[i], nil, rs[i], id.Principal.Tenant)
		grants[i] = grantRelied(items[i].BreakGlass, ds[i])
	}
	return ds, grants, nil
}

// finishDecision names the bundle in force in d's revision and applies the
// server's own rules: the tenant boundary and the rule for binaries.
//
// The tenant boundary: a resource is released only to a caller of its
// tenant (tenant is the caller's, never ""). It repeats what the default
// policy decides (tenant_mismatch), so that it never changes a decision of
// that policy; it makes the boundary hold whatever policy is loaded, which
// is what lets a list scan only the caller's tenant (store.Index) without
// a second decision: every item of every list and every read still passes
// the one policy decision, then this rule, in this function.
func (s *Server) finishDecision(ctx context.Context, d policy.Decision, err error, r store.Resource, tenant string) (policy.Decision, error) {
	if d.Revision != "" {
		d.Revision = s.policyRevision(ctx, d.Revision)
	}
	if err != nil {
		d.Allow = false
		return d, err
	}
	return policy.Enforce(d, tenant, r.Labels.Tenant, minimize.IsBinary(r.MIMEType)), nil
}
