package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/store"
)

// The record step of the request path (see doc.go): every audit record the
// server writes is started by entry and written by commit (or refuse, for a
// refusal), which returns only once the record is durable, with every
// patient id replaced by its keyed hash (pseudonymize).

// entry starts an audit entry for id.
func (s *Server) entry(ctx context.Context, id Identity, action string) audit.Entry {
	return audit.Entry{
		Action: action,
		Principal: audit.Principal{
			Sub: id.Principal.Sub, Roles: nonNil(id.Principal.Roles), ClientID: id.Principal.ClientID,
		},
		PurposeOfUse:   id.PurposeOfUse,
		Session:        id.session,
		Source:         id.Source,
		PolicyRevision: s.policyRevision(ctx, ""),
		Dev:            s.cfg.Keys.Dev(),
		Keys:           s.cfg.Keys.KeyIDs(),
		URIs:           []string{},
		Patients:       []string{},
		Digests:        []string{},
		Obligations:    []string{},
	}
}

// withTenant suffixes the reason of an HTTP refusal recorded with the
// caller's principal (auth/reject, http/rate_limited) with the caller's
// tenant, ",tenant=…" Go-quoted (a token claim; quoted, a comma or quote
// in it cannot pass for another field): the record's principal has sub,
// roles and client only, and nothing else in such a record names a
// tenant, so refusals of one sub and client in two tenants were
// recorded alike. No field is added, so the format version is unchanged
// (docs/audit-format.md). A principal with no tenant adds nothing.
func withTenant(reason, tenant string) string {
	if tenant == "" {
		return reason
	}
	return reason + ",tenant=" + strconv.Quote(tenant)
}

// pseudonymize replaces every patient id in e (the patients list and the
// patient segment of each URI) with audit.Pseudonym under the newest audit
// key, and names that key's version in e.Keys. If the key is unavailable it
// returns e with no identifiers at all, outcome error and (unless e was
// already a refusal with its own reason) reason audit_key_unavailable, and
// the error: the caller writes that record and refuses the request. A
// policy record, which holds nothing the key would hide
// (holdsNoIdentifier), keeps its reason after "audit_key_unavailable ":
// the candidate's digest and why it was refused are the evidence.
//
// If in is not nil (a read or templates request that reached a decision),
// e.Input becomes the JSON of in with every patient id replaced under the
// same key (see pseudonymInput), for replay by custos policy impact; without
// the key no input is recorded.
//
// named, if not nil, maps a URI of e to the patient id its resource names
// (labels.patient) where the server knows it from elsewhere than the
// catalog now served (a retired resource's, from the catalog it left).
func (s *Server) pseudonymize(ctx context.Context, e audit.Entry, in *policy.Input, named map[string]string) (audit.Entry, error) {
	e.Input = nil
	k, err := s.cfg.Keys.AuditKey(ctx)
	if err != nil && holdsNoIdentifier(e, in) {
		// Its evidence is custos's own (digests, sequence numbers, key
		// ids): kept, after why the record is an error.
		e.Outcome, e.Reason = audit.OutcomeError, ReasonAuditKeyUnavailable+" "+e.Reason
		return e, err
	}
	if err != nil {
		e.URIs, e.Patients, e.Digests = []string{}, []string{}, []string{}
		if e.Outcome != audit.OutcomeError { // a refusal keeps its own reason
			e.Outcome, e.Reason = audit.OutcomeError, ReasonAuditKeyUnavailable
		}
		return e, err
	}
	pseudonym := s.pseudonyms.under(k)
	ps := make([]string, len(e.Patients))
	for i, p := range e.Patients {
		ps[i] = pseudonym(p)
	}
	us := make([]string, len(e.URIs))
	for i, raw := range e.URIs {
		patientOf := s.patientOf
		if p, ok := namedPatient(raw, in, named); ok {
			patientOf = func(store.URI) string { return p }
		}
		us[i] = pseudonymURI(pseudonym, raw, patientOf)
	}
	e.Patients, e.URIs = ps, us
	keys := make([]string, 0, len(e.Keys))
	for _, id := range e.Keys {
		if !strings.HasPrefix(id, "audit-hmac=") {
			keys = append(keys, id)
		}
	}
	e.Keys = append(keys, "audit-hmac="+k.ID)
	if in != nil {
		b, err := s.pseudonyms.inputJSON(k, pseudonym, *in)
		if err != nil { // cannot happen for strings and slices; record without it
			s.log.Error("cannot encode the decision input; recorded without it", "action", e.Action, "err", err)
		} else {
			e.Input = b
		}
	}
	return e, nil
}

// holdsNoIdentifier reports whether e needs no audit key: a policy/load
// or policy/reject record (its reason custos's digests, sequence numbers
// and key ids, then scrubbed text) with no patient, no URI and no decision
// input. Any other record is written without the key as it always was:
// with no identifier at all.
func holdsNoIdentifier(e audit.Entry, in *policy.Input) bool {
	return (e.Action == ActionPolicyLoad || e.Action == ActionPolicyReject) &&
		in == nil && len(e.Patients) == 0 && len(e.URIs) == 0
}

// namedPatient is the patient id the URI raw of a record names where the
// server holds the resource's own labels.patient: the resource decided
// (in, whose patient the decision saw and the record's patients name), or
// one that named maps. Otherwise the catalog resolves raw's patient
// segment (patientOf).
func namedPatient(raw string, in *policy.Input, named map[string]string) (string, bool) {
	if in != nil && in.Resource != nil && in.Resource.URI == raw && in.Resource.Patient != "" {
		return in.Resource.Patient, true
	}
	p, ok := named[raw]
	return p, ok && p != ""
}

// pseudonymInput is the policy input in as recorded for replay: the
// principal's attributes in full (Subject, which has no JSON form, is
// replaced by Principal), with every patient id — principal.patients,
// resource.patient, the patient segment of resource.uri and the patient of
// the break-the-glass grant (break_glass.patient) — replaced by
// pseudonym(id) (audit.Pseudonym under one key). The same key maps equal
// ids to equal pseudonyms, so the policy's equality tests (care
// relationship, the grant's patient) decide a replayed input as they
// decided the original. Nil
// lists become [], as the policy saw them. The URI's patient segment is
// the resource's patient (resource.patient), whatever form the segment
// has (a keyed id for FHIR input).
func pseudonymInput(pseudonym func(string) string, in policy.Input) policy.Input {
	out := policy.Input{Principal: pseudonymPrincipal(pseudonym, in.Principal), PurposeOfUse: in.PurposeOfUse, Action: in.Action}
	if r := in.Resource; r != nil {
		rc := *r
		rc.Sensitivity, rc.Consent = nonNil(r.Sensitivity), nonNil(r.Consent)
		rc.URI = pseudonymURI(pseudonym, r.URI, func(u store.URI) string { return cmp.Or(r.Patient, u.Patient) })
		if r.Patient != "" {
			rc.Patient = pseudonym(r.Patient)
		}
		out.Resource = &rc
	}
	if bg := in.BreakGlass; bg != nil {
		// The grant the decision relied on, its patient hashed like
		// resource.patient: the policy tests their equality (bg_ok), so a
		// replay (policy impact) decides it as the server did. Until
		// h-review52 it was left out, and every break-the-glass read
		// replayed as allow→deny (TestBreakGlassReadInputKeepsItsGrant).
		out.BreakGlass = &policy.BreakGlass{Grant: bg.Grant, Patient: pseudonym(bg.Patient)}
	}
	return out
}

// pseudonymPrincipal is p as recorded in a decision input: its care team
// pseudonymized, nil lists as [].
func pseudonymPrincipal(pseudonym func(string) string, p policy.Principal) policy.Principal {
	p.Roles = nonNil(p.Roles)
	ps := make([]string, len(p.Patients))
	for i, id := range p.Patients {
		ps[i] = pseudonym(id)
	}
	p.Patients = ps
	return p
}

// pseudonymURI is uri with every occurrence of its patient segment (and
// the resource id of a FHIR Patient resource, which is the same) replaced
// by the keyed hash of the patient's id, patientOf(u): the id resources
// and the record's patients name the patient by, so that a URI and the
// patients of a record agree. Other resource ids stay: they are opaque
// ids of resources, not of people. A URI that does not parse (never
// stored by the server) is recorded as "invalid".
func pseudonymURI(pseudonym func(string) string, uri string, patientOf func(store.URI) string) string {
	u, err := store.ParseURI(uri)
	if err != nil {
		return "invalid"
	}
	if u.Patient == "" {
		return uri // tenant-level reference data: no patient to hide
	}
	return strings.ReplaceAll(uri, u.Patient, pseudonym(patientOf(u)))
}

// maxPatientIDs bounds the memo of patientOf.
const maxPatientIDs = 1 << 16

// patientIDs memoizes patientOf for segments the catalog resolved.
type patientIDs struct {
	mu sync.RWMutex
	m  map[string]string // tenant NUL segment -> labels.patient
}

// patientOf returns the patient id u's patient segment stands for, as
// resources name their patient (labels.patient, the id a principal's
// care team and the record's patients use): for custos's own data the
// segment itself; for FHIR input, whose segment is a keyed id of the
// source Patient id (docs/uris.md, "Opaque ids"), the labels.patient of
// the resources the catalog holds in that compartment, whichever they are
// (its Patient resource, or only an Observation when the export had no
// Patient or the Patient was retired). When the catalog holds nothing
// under the segment (a URI naming no resource of a compartment it knows),
// the segment. "" when u names no patient. It is lookupPatientOf with two
// fast paths, which a test holds to it over catalogs of both kinds, with
// and without their Patient resources: a segment without the form of a
// keyed id (store.HasKeyedIDForm) is the patient itself, with no catalog
// lookup (custos's own data, whose labels.patient must equal the
// segment); and a resolved segment is memoized: under the catalog's
// never-rotated id key a segment always stands for the same id.
func (s *Server) patientOf(u store.URI) string {
	if u.Patient == "" {
		return ""
	}
	if !store.HasKeyedIDForm(u.Patient) {
		return u.Patient
	}
	key := u.Tenant + "\x00" + u.Patient
	s.patientIDs.mu.RLock()
	id, ok := s.patientIDs.m[key]
	s.patientIDs.mu.RUnlock()
	if ok {
		return id
	}
	id, found := s.lookupPatientOf(u)
	if !found {
		return id
	}
	s.patientIDs.mu.Lock()
	if s.patientIDs.m == nil || len(s.patientIDs.m) >= maxPatientIDs {
		s.patientIDs.m = make(map[string]string)
	}
	s.patientIDs.m[key] = id
	s.patientIDs.mu.Unlock()
	return id
}

// lookupPatientOf is patientOf without its fast paths: found, the one
// labels.patient of the current resources of u's tenant under u's patient
// segment (store.Index.SegmentPatient), over a catalog that keeps an index
// (store.Live, what custos serves); over one that keeps none, the
// labels.patient of the compartment's Patient resource. Not found, u's
// patient segment ("" when u names no patient).
func (s *Server) lookupPatientOf(u store.URI) (id string, found bool) {
	if u.Patient == "" {
		return "", false
	}
	if ix, err := s.catalogIndex(); err == nil && ix != nil {
		if p, ok := ix.SegmentPatient(u.Tenant, u.Patient); ok {
			return p, true
		}
		return u.Patient, false
	}
	pu := store.URI{Scheme: store.SchemeFHIR, Tenant: u.Tenant, Patient: u.Patient, Type: "patient", ID: u.Patient}
	r, err := s.cfg.Catalog.Get(pu.String())
	if err != nil || r.Labels.Patient == "" {
		return u.Patient, false
	}
	return r.Labels.Patient, true
}

// patientList is the audit record's Patients for one resource of patient
// p: none for tenant-level reference data (p == "").
func patientList(p string) []string {
	if p == "" {
		return nil
	}
	return []string{p}
}

// pseudonymCache memoizes audit.Pseudonym under the newest audit key: a
// read by a clinician with a care team of hundreds records every patient of
// the team in its decision input, and an HMAC per patient per read was a
// tenth of the server's CPU under load. It holds at most maxPseudonyms
// entries of one key version; a new key version, or a full cache, starts
// afresh. (It holds patient ids in memory, as the catalog does.)
type pseudonymCache struct {
	mu  sync.RWMutex
	key string // the key's id and bytes: a key is never confused with another
	m   map[string]string

	// principals holds the JSON of each recent principal as recorded in
	// decision inputs (pseudonymPrincipal), under the same key: the care
	// team of a clinician is encoded once, not on every read. Keyed by the
	// principal's memoized policy.Subject (one per distinct principal).
	pmu        sync.Mutex
	pkey       string
	principals map[*policy.Subject][]byte
}

const maxPrincipalJSON = 4096

// inputJSON is json.Marshal(pseudonymInput(pseudonym, in)) for pseudonym
// = c.under(k), with the principal's part taken from the memo.
func (c *pseudonymCache) inputJSON(k secrets.Key, pseudonym func(string) string, in policy.Input) ([]byte, error) {
	subj := policy.NewSubject(in.Principal)
	key := k.ID + "\x00" + string(k.Bytes)
	c.pmu.Lock()
	if c.pkey != key || len(c.principals) >= maxPrincipalJSON {
		c.pkey, c.principals = key, make(map[*policy.Subject][]byte)
	}
	pj, ok := c.principals[subj]
	c.pmu.Unlock()
	if !ok {
		var err error
		if pj, err = json.Marshal(pseudonymPrincipal(pseudonym, in.Principal)); err != nil {
			return nil, err
		}
		c.pmu.Lock()
		if c.pkey == key {
			c.principals[subj] = pj
		}
		c.pmu.Unlock()
	}
	rest := pseudonymInput(pseudonym, policy.Input{PurposeOfUse: in.PurposeOfUse, Action: in.Action, Resource: in.Resource, BreakGlass: in.BreakGlass})
	rj, err := json.Marshal(struct {
		PurposeOfUse string             `json:"purpose_of_use"`
		Action       policy.Action      `json:"action"`
		Resource     *policy.Resource   `json:"resource,omitempty"`
		BreakGlass   *policy.BreakGlass `json:"break_glass,omitempty"`
	}{rest.PurposeOfUse, rest.Action, rest.Resource, rest.BreakGlass})
	if err != nil {
		return nil, err
	}
	// The fields of policy.Input in order: principal, then the rest.
	out := make([]byte, 0, len(`{"principal":,`)+len(pj)+len(rj))
	out = append(out, `{"principal":`...)
	out = append(out, pj...)
	out = append(out, ',')
	return append(out, rj[1:]...), nil
}

const maxPseudonyms = 1 << 17

// under returns audit.Pseudonym(k.Bytes, ·), memoized.
func (c *pseudonymCache) under(k secrets.Key) func(string) string {
	key := k.ID + "\x00" + string(k.Bytes)
	return func(id string) string {
		c.mu.RLock()
		p, ok := c.m[id]
		same := c.key == key
		c.mu.RUnlock()
		if ok && same {
			return p
		}
		p = audit.Pseudonym(k.Bytes, id)
		c.mu.Lock()
		if c.key != key || len(c.m) >= maxPseudonyms {
			c.key, c.m = key, make(map[string]string)
		}
		c.m[id] = p
		c.mu.Unlock()
		return p
	}
}

// refuseStale audits and refuses a request that arrived while the keys
// are past their staleness limit: nothing is read, nothing released.
func (s *Server) refuseStale(ctx context.Context, id Identity, method string, req mcp.Request, cause error) error {
	e := s.entry(ctx, id, method)
	if r, ok := req.(*mcp.ReadResourceRequest); ok && r.Params != nil {
		if u, err := store.ParseURI(r.Params.URI); err == nil {
			e.URIs, e.Patients = []string{u.String()}, patientList(s.patientOf(u))
		}
	}
	s.log.Error("keys are stale; request refused", "action", method, "err", cause)
	return s.refuse(ctx, e, audit.OutcomeError, ReasonKeysStale,
		refused("keys unavailable: the server could not refresh its keys from the secrets provider within the staleness limit; request refused, nothing released"))
}

// commit appends e durably, with patient ids replaced by their keyed
// hashes (see pseudonymize). On failure it logs the cause (no PHI) and
// returns the error the client sees: nothing is released.
func (s *Server) commit(ctx context.Context, e audit.Entry) (audit.Record, error) {
	return s.commitInput(ctx, e, nil)
}

// commitInput is commit for a request that reached a policy decision on in:
// the record's decision input (Entry.Input) is in, pseudonymized.
func (s *Server) commitInput(ctx context.Context, e audit.Entry, in *policy.Input) (audit.Record, error) {
	return s.commitNamed(ctx, e, in, nil)
}

// commitNamed is commitInput with the patients of some URIs of e named
// (see pseudonymize).
func (s *Server) commitNamed(ctx context.Context, e audit.Entry, in *policy.Input, named map[string]string) (audit.Record, error) {
	if ctx.Err() != nil {
		// The caller went away (notifications/cancelled, an HTTP client
		// gone, the server stopping) before its record was appended:
		// nothing is on record and nothing is released. Not a failure of
		// the audit log, and not a refusal: counted as outcome "error",
		// not "refused", which CustosRequestsRefused pages on.
		s.log.Info("request cancelled before its audit record was appended; nothing released", "action", e.Action, "outcome", e.Outcome)
		return audit.Record{}, cancelled()
	}
	e, kerr := s.pseudonymize(ctx, e, in, named)
	t0 := time.Now()
	// The append is waited for even if the caller goes away meanwhile:
	// its commit goes on either way, and only its own result says whether
	// the audit log failed. Abandoned, a real failure (an fsync error)
	// came back as the caller's cancellation, was answered and counted as
	// one, and paged no one (TestAuditFailureAfterCancelIsARefusal).
	rec, err := s.cfg.Audit.Append(context.WithoutCancel(ctx), e)
	if err == nil {
		// Durable appends only: CustosCheckpointLag reads the count as
		// records appended, and a failed append is none (it is counted
		// as a refused request).
		s.cfg.Metrics.ObserveAudit(time.Since(t0))
	}
	if err == nil && kerr != nil {
		// The refusal itself is on record (without identifiers).
		s.log.Error("audit keyed-hash key unavailable; request refused", "action", e.Action, "err", kerr)
		return rec, refused("keys unavailable: request refused, nothing released")
	}
	if err != nil {
		s.log.Error("audit append failed; request refused", "action", e.Action, "outcome", e.Outcome, "err", err)
		if errors.Is(err, audit.ErrIntegrity) {
			return rec, refused("audit log integrity check failed: records can no longer be proven; request refused, nothing released")
		}
		return rec, refused("audit log unavailable: request refused, nothing released")
	}
	if ctx.Err() != nil {
		// The caller went away while its record was being committed: the
		// record is durable (an audited request that was not served is
		// harmless), nothing is released.
		s.log.Info("request cancelled while its audit record was committed; nothing released", "action", e.Action, "outcome", e.Outcome, "seq", rec.Seq)
		return rec, cancelled()
	}
	s.log.Debug("audited", "action", e.Action, "outcome", e.Outcome, "seq", rec.Seq, "decision", e.DecisionID)
	return rec, nil
}

// clientCancelled reports whether err, a policy evaluation's failure, is
// the request's own cancellation: its context is done and err is that
// context's error. A failure that merely wraps context.Canceled while the
// client is still there, or a policy timeout, is not.
func clientCancelled(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
}

// undecidedCancelled answers a request whose policy evaluation was cut
// short by its client's cancellation: nothing is recorded or released, and
// the policy did not fail, so no error is logged (any client could write
// "policy could not decide" error lines at will by cancelling its reads).
func (s *Server) undecidedCancelled(action string) error {
	s.log.Info("request cancelled during its policy decision; nothing released", "action", action)
	return cancelled()
}

// auditFailure records a request that failed after its allow record was
// written (payload unreadable, minimization failed). Its own failure is
// logged; the client gets err either way. The record is appended even if
// the client has gone meanwhile: without it the log holds an allow record
// for a request that released nothing (appended under the cancelled
// context, it was never attempted; TestReadCancelledDuringFetch).
func (s *Server) auditFailure(ctx context.Context, e audit.Entry, reason string, err error) error {
	ctx = context.WithoutCancel(ctx)
	e.Outcome = audit.OutcomeError
	e.Reason = reason
	e, _ = s.pseudonymize(ctx, e, nil, nil) // without the key: recorded without identifiers; the decision's input is on the allow record
	if _, aerr := s.cfg.Audit.Append(ctx, e); aerr != nil {
		s.log.Error("audit append of failure record failed", "action", e.Action, "reason", reason, "err", aerr)
	}
	return err
}

// refuse records a refusal, then answers: e is committed with outcome and
// reason, and answer is returned once the record is durable. It fails
// closed: if the record cannot be committed, the commit's error is returned
// instead (a refused() error saying the audit log or its key is
// unavailable), so the caller gets no data either way, and a clear error.
//
// answer is what the client gets for the refusal (invalidParams, notFound,
// refused(...), ...). It is nil only where the protocol answers an empty
// success to a refused request (an unsubscribe of a subscription not held)
// or where the answer is not an MCP error (an HTTP status written by the
// caller, a notification withheld): then the returned error is the commit's
// alone, for the caller to return or log.
func (s *Server) refuse(ctx context.Context, e audit.Entry, outcome, reason string, answer error) error {
	return s.refuseInput(ctx, e, nil, outcome, reason, answer)
}

// refuseInput is refuse for a request that reached a policy decision on in
// (recorded with it, as commitInput does).
func (s *Server) refuseInput(ctx context.Context, e audit.Entry, in *policy.Input, outcome, reason string, answer error) error {
	e.Outcome, e.Reason = outcome, reason
	if _, err := s.commitInput(ctx, e, in); err != nil {
		return err
	}
	return answer
}
