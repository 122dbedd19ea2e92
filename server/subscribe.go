package server

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store"
)

// Audit actions of resource subscriptions.
const (
	// ActionSubscribe records the decision on one subscription request: a
	// resources/subscribe (2025-11-25) or one URI of a subscriptions/listen
	// (2026-07-28). It is decided exactly like a read of the URI.
	ActionSubscribe = "subscribe"
	// ActionUnsubscribe records a resources/unsubscribe request.
	ActionUnsubscribe = "unsubscribe"
	// ActionNotify records the decision to send (allow) or withhold (deny,
	// error) one notifications/resources/updated to one subscriber. The
	// notification tells the subscriber that a patient's record changed, so
	// it is a disclosure and is decided and audited before it is sent.
	ActionNotify = "notify"
	// ActionRetire records that a URI left the catalog (a deletion or a full
	// import retired it, or the replacing catalog no longer holds it), seen
	// when the server swapped the new catalog in. Principal "custos",
	// outcome allow, reason ReasonRetired; it names the URI (its patient
	// segment pseudonymized like every record's), never a source id.
	ActionRetire = "catalog/retire"
)

// listChangedURI is a placeholder resource added to the go-sdk server's own
// resource list each time the catalog changes: adding a
// resource is the SDK's only exported way to emit
// notifications/resources/list_changed (to legacy sessions and to
// subscriptions/listen streams that opted in). The SDK's list is never
// served: the middleware answers every resources/* request itself.
const listChangedURI = "custos-internal:catalog"

// subscriptions is the server's own registry of resource subscriptions:
// which session subscribed to which URI as whom. The go-sdk server keeps a
// parallel registry (it alone knows the subscriptions/listen request ids
// that 2026-07-28 notifications must carry) and sends the notifications;
// this registry decides, before each send, which of its entries may still
// receive them, and removes from the SDK's registry every one that may not.
//
// The zero value is ready to use.
type subscriptions struct {
	// round is held exclusively while a change is notified (decide, audit,
	// prune, send) and shared while a subscription is registered, so that a
	// session is never in the SDK's registry at send time without having
	// been decided and audited in this round.
	round sync.RWMutex

	mu       sync.Mutex
	servers  []*mcp.Server
	sessions map[*mcp.ServerSession]*subscriber
	// pruned are the subscriptions dropped in the last notification round.
	// The SDK registers a subscription just after onSubscribe returns; a
	// round that ran in between pruned it from this registry before the
	// SDK held it, so the SDK may hold it now. The next round drops each
	// again (unless it was decided and registered anew) before sending.
	pruned []target
}

// Bounds on what one client can make the server decide and keep.
const (
	// MaxListenURIs is the most resources one subscriptions/listen may
	// name (a URI named twice counts once and is decided once).
	MaxListenURIs = 100
	// MaxSessionSubscriptions is the most resource subscriptions one
	// session may hold.
	MaxSessionSubscriptions = 1000
)

// maxListenURIs is MaxListenURIs; tests lower it (export_test.go).
var maxListenURIs = MaxListenURIs

// subscriber is one session's subscriptions. The entry stays while the
// session lives (one watcher goroutine per session forgets it when the
// session closes), even when it holds no URI.
type subscriber struct {
	ms *mcp.Server // the SDK server the session belongs to
	// uris maps each subscribed URI to the identity that subscribed to
	// it, re-decided before each notification (the purpose of use may
	// differ from one request of a session to the next).
	uris map[string]Identity
	// drop removes the session's subscription to a URI from the SDK's
	// registry (the SDK's own resources/unsubscribe, called below the
	// middleware).
	drop mcp.MethodHandler
}

// subCtxKey carries the subscription call (identity, SDK handler) from the
// middleware to the SDK's SubscribeHandler and UnsubscribeHandler, which
// see neither the request's transport extra nor the middleware.
type subCtxKey struct{}

type subCall struct {
	id     Identity
	next   mcp.MethodHandler
	listen bool            // the call is a subscriptions/listen (its end unsubscribes)
	seen   map[string]bool // URIs this call already subscribed (the SDK calls onSubscribe once per URI, duplicates included)
}

// internalCtxKey marks an unsubscribe the server itself made (pruning a
// subscriber that may no longer be notified): it is not a client request
// and is not audited as one.
type internalCtxKey struct{}

// attach registers an SDK server built by newMCPServer, so that
// CatalogChanged can notify its sessions.
func (r *subscriptions) attach(ms *mcp.Server) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.servers = append(r.servers, ms)
}

// serverOf finds the SDK server ss belongs to.
func (r *subscriptions) serverOf(ss *mcp.ServerSession) *mcp.Server {
	r.mu.Lock()
	servers := slices.Clone(r.servers)
	r.mu.Unlock()
	for _, ms := range servers {
		for s := range ms.Sessions() {
			if s == ss {
				return ms
			}
		}
	}
	return nil
}

// add registers ss's subscription to uri as id. The first registration of a
// session starts a watcher that forgets the session when it closes.
func (r *subscriptions) add(ss *mcp.ServerSession, ms *mcp.Server, id Identity, uri string, drop mcp.MethodHandler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions == nil {
		r.sessions = map[*mcp.ServerSession]*subscriber{}
	}
	sub, ok := r.sessions[ss]
	if !ok {
		sub = &subscriber{uris: map[string]Identity{}}
		r.sessions[ss] = sub
		go func() {
			ss.Wait()
			r.forget(ss)
		}()
	}
	sub.ms, sub.drop = ms, drop
	sub.uris[uri] = id
}

// full reports whether ss holds MaxSessionSubscriptions subscriptions and
// uri is not one of them.
func (r *subscriptions) full(ss *mcp.ServerSession, uri string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sub, ok := r.sessions[ss]
	if !ok {
		return false
	}
	_, held := sub.uris[uri]
	return !held && len(sub.uris) >= MaxSessionSubscriptions
}

// remove drops ss's subscription to uri and reports whether it existed.
func (r *subscriptions) remove(ss *mcp.ServerSession, uri string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sub, ok := r.sessions[ss]
	if !ok {
		return false
	}
	if _, held := sub.uris[uri]; !held {
		return false
	}
	delete(sub.uris, uri)
	return true
}

// forget drops every subscription of a closed session.
func (r *subscriptions) forget(ss *mcp.ServerSession) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sessions, ss)
}

// target is one subscriber of one URI, as snapshotted for a notification.
type target struct {
	ss   *mcp.ServerSession
	id   Identity
	ms   *mcp.Server
	drop mcp.MethodHandler
	uri  string // set when pruned
}

// subscribersOf snapshots the subscribers of uri.
func (r *subscriptions) subscribersOf(uri string) []target {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []target
	for ss, sub := range r.sessions {
		if id, ok := sub.uris[uri]; ok {
			out = append(out, target{ss: ss, id: id, ms: sub.ms, drop: sub.drop})
		}
	}
	return out
}

// count is the number of (session, URI) subscriptions held.
func (r *subscriptions) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, sub := range r.sessions {
		n += len(sub.uris)
	}
	return n
}

// Subscriptions returns the number of resource subscriptions currently
// held (one per session and URI), for health reporting and tests.
func (s *Server) Subscriptions() int { return s.subs.count() }

// subscription answers resources/subscribe, resources/unsubscribe and
// subscriptions/listen. It identifies the caller like every resources/*
// request and passes the identity (in ctx) to the SDK, whose handlers call
// back into onSubscribe and onUnsubscribe: the SDK keeps the listen request
// id that 2026-07-28 notifications must carry, and calls onSubscribe once
// per URI of a listen.
func (s *Server) subscription(ctx context.Context, ident identityFunc, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	ctx, id, err := s.admit(ctx, ident, method, req)
	if err != nil {
		return nil, err
	}
	ctx = context.WithValue(ctx, subCtxKey{}, &subCall{id: id, next: next, listen: method == "subscriptions/listen"})
	return next(ctx, method, req)
}

// onSubscribe is the SDK's SubscribeHandler: it decides one subscription
// exactly as a read of the URI would be decided, audits the decision
// (action "subscribe") and, when allowed, registers the subscriber. A
// denied and a missing URI both answer -32002, like read. An error stops
// the SDK from registering the subscription (and fails a listen).
func (s *Server) onSubscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	call, ok := ctx.Value(subCtxKey{}).(*subCall)
	if !ok || req.Session == nil {
		// Every subscription passes the middleware; anything else is refused.
		return refused("subscription outside the decision point: refused")
	}
	raw := ""
	if req.Params != nil {
		raw = req.Params.URI
	}
	e := s.entry(ctx, call.id, ActionSubscribe)
	u, err := store.ParseURI(raw)
	if err != nil {
		return s.refuse(ctx, e, audit.OutcomeDeny, ReasonBadURI, badURI(err))
	}
	uri := u.String()
	if call.id.PurposeOfUse == ResearchPurpose {
		// The research view shows aliases, and a change feed of aliased
		// URIs is not offered: refused, and on record.
		e.URIs, e.Patients = []string{uri}, patientList(s.patientOf(u))
		return s.refuse(ctx, e, audit.OutcomeDeny, ReasonResearchNoSubscriptions, invalidParams("subscriptions are not offered for purpose of use %s (the research view shows aliased URIs and has no change feed)", ResearchPurpose))
	}
	if call.listen {
		if call.seen == nil {
			call.seen = map[string]bool{}
		}
		if call.seen[uri] {
			return nil // named twice in one listen: decided once
		}
		if len(call.seen) >= maxListenURIs {
			return invalidParams("too many resources in one subscriptions/listen: at most %d", maxListenURIs)
		}
		call.seen[uri] = true
	}
	if s.subs.full(req.Session, uri) {
		return invalidParams("too many subscriptions in this session: at most %d", MaxSessionSubscriptions)
	}

	// Shared with other subscriptions, exclusive with a notification
	// round: the SDK registers the session after this returns, and a round
	// that starts later sees it in this registry.
	s.subs.round.RLock()
	defer s.subs.round.RUnlock()

	v := s.decideURI(ctx, call.id, uri, ActionSubscribe)
	if v.err != nil {
		return v.err
	}
	if !v.allow {
		return notFound(uri)
	}
	ms := s.subs.serverOf(req.Session)
	if ms == nil {
		// Cannot happen for a session of a server built by newMCPServer.
		s.log.Error("subscription from a session of an unknown server; not registered")
		return refused("subscriptions unavailable: request refused")
	}
	s.subs.add(req.Session, ms, call.id, uri, call.next)
	return nil
}

// onUnsubscribe is the SDK's UnsubscribeHandler. A client's
// resources/unsubscribe is audited (action "unsubscribe"); the end of a
// subscriptions/listen and the server's own pruning are not requests and
// are not audited.
func (s *Server) onUnsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	if req.Session == nil || req.Params == nil {
		return nil
	}
	if ctx.Value(internalCtxKey{}) != nil {
		return nil // pruned by notify, already removed here
	}
	call, ok := ctx.Value(subCtxKey{}).(*subCall)
	if !ok {
		return refused("unsubscription outside the decision point: refused")
	}
	if call.listen {
		s.subs.remove(req.Session, req.Params.URI)
		return nil
	}
	e := s.entry(ctx, call.id, ActionUnsubscribe)
	u, err := store.ParseURI(req.Params.URI)
	if err != nil {
		return s.refuse(ctx, e, audit.OutcomeDeny, ReasonBadURI, badURI(err))
	}
	uri := u.String()
	if !s.subs.remove(req.Session, uri) {
		// Names no patient: the session held no such subscription, and
		// any well-formed URI could be named here.
		return s.refuse(ctx, e, audit.OutcomeDeny, ReasonNotSubscribed, nil)
	}
	e.URIs, e.Patients = []string{uri}, patientList(s.patientOf(u))
	e.Outcome, e.Reason = audit.OutcomeAllow, ReasonUnsubscribed
	_, err = s.commit(ctx, e)
	return err
}

// CatalogChanged notifies subscribers of a catalog change (a re-import
// swapped in by store.Live). For every updated or removed URI, each
// subscriber is decided again, as of now, with the identity it subscribed
// as and the resource's new metadata:
//
//   - allowed: an audit record (action "notify", allow) is committed, then
//     notifications/resources/updated is sent;
//   - anything else (denied, removed from the catalog, policy or audit
//     failure, stale keys): nothing is sent, the outcome is audited when it
//     can be, and the subscription is dropped (the SDK's registry can only
//     send to all of a URI's subscribers or remove one).
//
// When anything changed (a URI added, removed or given a new version, whose
// labels may add it to a caller's list or take it out),
// notifications/resources/list_changed is sent to every session that
// accepts it (it names no resource and is not audited). CatalogChanged blocks until every notification is sent; it is
// safe to call from any goroutine and calls are serialized.
func (s *Server) CatalogChanged(ctx context.Context, ch store.Change) {
	s.subs.round.Lock()
	defer s.subs.round.Unlock()
	ctx = s.withDecider(ctx)
	s.redropPruned(ctx)
	s.auditRetired(ctx, ch.Removed, ch.RemovedPatients)
	for _, uri := range slices.Concat(ch.Updated, ch.Removed) {
		targets := s.subs.subscribersOf(uri)
		send := map[*mcp.Server]bool{}
		var dropped []target
		for _, t := range targets {
			if s.notifyDecision(ctx, t, uri) {
				send[t.ms] = true
				continue
			}
			s.prune(ctx, t, uri)
			t.uri = uri
			dropped = append(dropped, t)
		}
		// Dropped once more just before sending: a subscription the SDK
		// registered after its prune (see subscriptions.pruned) must not
		// receive this notification either.
		for _, t := range dropped {
			s.dropFromSDK(ctx, t)
		}
		for ms := range send {
			if err := ms.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
				s.log.Warn("resource updated notification failed", "err", err)
			}
		}
	}
	// Any change, not only an added or removed URI: a new version may
	// carry new labels, which add a resource to some caller's list or take
	// one out of it, as an import that adds or removes the URI would. Sent
	// for adds and removes only, its absence told a caller whose list
	// gained or lost a resource that it had existed, hidden, all along, or
	// still existed (TestListChangedDoesNotTellHiddenFromMissing).
	if !ch.Empty() {
		s.subs.mu.Lock()
		servers := slices.Clone(s.subs.servers)
		s.subs.mu.Unlock()
		for _, ms := range servers {
			ms.AddResource(&mcp.Resource{URI: listChangedURI, Name: "catalog"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return nil, notFound(listChangedURI)
			})
		}
	}
	s.log.Info("catalog change notified", "updated", len(ch.Updated), "added", len(ch.Added), "removed", len(ch.Removed))
}

// auditRetired writes one ActionRetire record per URI that left the
// catalog, before any subscriber is told. A record that cannot be written
// is logged (the catalog has changed already; there is nothing to refuse).
// patients are the labels.patient of the removed resources in the catalog
// they left (store.Change.RemovedPatients): a record names the patient by
// them, as records of the resource did while it was served, even when the
// patient's whole compartment left and the catalog now served no longer
// says whom its segment stood for.
func (s *Server) auditRetired(ctx context.Context, removed []string, patients map[string]string) {
	// Up to retireAppends records in flight at once, so that the audit
	// log's group commit batches them: a full import that retires many
	// resources costs a few commits, not one fsync per URI while the
	// notifications wait. Every record is committed before this returns.
	const retireAppends = 64
	sem := make(chan struct{}, retireAppends)
	var wg sync.WaitGroup
	for _, uri := range removed {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			e := s.entry(ctx, Identity{Principal: policy.Principal{Sub: "custos"}}, ActionRetire)
			e.Outcome, e.Reason = audit.OutcomeAllow, ReasonRetired
			e.URIs = []string{uri}
			if u, err := store.ParseURI(uri); err == nil && u.Patient != "" {
				e.Patients = patientList(cmp.Or(patients[uri], s.patientOf(u)))
			}
			if _, err := s.commitNamed(ctx, e, nil, patients); err != nil {
				s.log.Error("auditing a retired resource failed", "err", err)
			}
		}()
	}
	wg.Wait()
}

// notifyDecision decides and audits one notification; true means it may be
// sent.
func (s *Server) notifyDecision(ctx context.Context, t target, uri string) bool {
	expired := !t.id.expires.IsZero() && !s.now().Before(t.id.expires)
	if expired || t.id.revoked() {
		// The access token the subscriber authenticated with has expired,
		// or was revoked (its dev token left the token file): its claims
		// (care team, roles) can no longer be trusted as current.
		e := s.entry(ctx, t.id, ActionNotify)
		if u, perr := store.ParseURI(uri); perr == nil {
			e.URIs, e.Patients = []string{uri}, patientList(s.patientOf(u))
		}
		reason := ReasonTokenExpired
		if !expired {
			reason = ReasonTokenRevoked
		}
		if err := s.refuse(ctx, e, audit.OutcomeDeny, reason, nil); err != nil {
			s.log.Error("auditing a withheld notification failed", "err", err)
		}
		return false
	}
	if err := s.cfg.Keys.Check(); err != nil {
		e := s.entry(ctx, t.id, ActionNotify)
		if u, perr := store.ParseURI(uri); perr == nil {
			e.URIs, e.Patients = []string{uri}, patientList(s.patientOf(u))
		}
		s.log.Error("keys are stale; notification withheld", "err", err)
		if err := s.refuse(ctx, e, audit.OutcomeError, ReasonKeysStale, nil); err != nil {
			s.log.Error("auditing a withheld notification failed", "err", err)
		}
		return false
	}
	v := s.decideURI(ctx, t.id, uri, ActionNotify)
	return v.allow
}

// prune drops t's subscription to uri from both registries.
func (s *Server) prune(ctx context.Context, t target, uri string) {
	s.subs.remove(t.ss, uri)
	t.uri = uri
	s.subs.mu.Lock()
	s.subs.pruned = append(s.subs.pruned, t)
	s.subs.mu.Unlock()
	s.dropFromSDK(ctx, t)
}

// dropFromSDK removes t's subscription from the SDK's registry.
func (s *Server) dropFromSDK(ctx context.Context, t target) {
	if t.drop == nil {
		return
	}
	ictx := context.WithValue(ctx, internalCtxKey{}, true)
	if _, err := t.drop(ictx, "resources/unsubscribe", &mcp.UnsubscribeRequest{Session: t.ss, Params: &mcp.UnsubscribeParams{URI: t.uri}}); err != nil {
		s.log.Warn("cannot drop a subscription from the SDK registry", "err", err)
	}
}

// redropPruned drops again, from the SDK's registry, every subscription the
// previous round pruned that has not been decided and registered anew since
// (see subscriptions.pruned). Called with round held exclusively.
func (s *Server) redropPruned(ctx context.Context) {
	s.subs.mu.Lock()
	pruned := s.subs.pruned
	s.subs.pruned = nil
	var again []target
	for _, t := range pruned {
		if sub, ok := s.subs.sessions[t.ss]; ok {
			if _, held := sub.uris[t.uri]; held {
				continue // subscribed again, with a decision of its own
			}
		}
		again = append(again, t)
	}
	s.subs.mu.Unlock()
	for _, t := range again {
		s.dropFromSDK(ctx, t)
	}
}
