package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server/ops"
	"github.com/custos-mcp/custos/store"
)

// Catalog is the read side of the resource store the server needs.
type Catalog interface {
	// Get returns the current metadata of uri, or an error wrapping
	// store.ErrNotFound.
	Get(uri string) (store.Resource, error)
	// Page returns up to limit resources with URI > after, in URI order.
	Page(after string, limit int) ([]store.Resource, error)
	// Blob returns the content with the given digest, verified.
	Blob(ctx context.Context, digest string) ([]byte, error)
}

// Decider is the policy decision point. A non-nil error means the policy
// could not decide; the returned Decision is then a denial.
type Decider interface {
	Decide(ctx context.Context, in policy.Input) (policy.Decision, error)
	// DecideBatch decides one list page: decisions[i] is what Decide would
	// answer for items[i] (the policy's batch rule evaluates the same
	// function as a read). A non-nil error denies every item.
	DecideBatch(ctx context.Context, in policy.Input, items []policy.Item) ([]policy.Decision, error)
	Revision() string
}

// AuditLog appends a record and returns only once it is durable.
type AuditLog interface {
	Append(ctx context.Context, e audit.Entry) (audit.Record, error)
}

// Keys supplies the cursor keys and says whether keys are fresh and
// whether they are dev keys.
type Keys interface {
	// CursorKeys returns the cursor keys held, newest first: cursors are
	// sealed with the first and opened with any (a rotation does not break
	// cursors already issued).
	CursorKeys(ctx context.Context) ([]secrets.Key, error)
	// Check reports, without a round trip to the key source, whether the
	// keys are fresh enough to serve; an error refuses the request.
	Check() error
	// KeyIDs names the key versions in force, recorded in every audit
	// record (never key bytes).
	KeyIDs() []string
	// AuditKey returns the newest audit keyed-hash key: patient ids in
	// audit records are written as audit.Pseudonym(key, id).
	AuditKey(ctx context.Context) (secrets.Key, error)
	// Dev reports whether the keys are ephemeral development keys.
	Dev() bool
}

// Config wires a Server. Catalog, Policy, Audit and Keys are required.
type Config struct {
	Catalog Catalog
	Policy  Decider
	Audit   AuditLog
	Keys    Keys
	// PageSize is the number of resources per resources/list page; 0 means
	// DefaultPageSize. Clients cannot choose it.
	PageSize int
	// ScanLimit bounds how many catalog entries one list request examines;
	// a page may come back short (even empty) with a cursor to continue.
	// 0 means DefaultScanLimit.
	ScanLimit int
	// Logger receives operational logs (no PHI, no payloads, no secrets).
	// nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Version is reported as the MCP server implementation version.
	Version string
	// RateLimit bounds each principal's HTTP requests (zero: unlimited).
	RateLimit RateLimit
	// Metrics, if not nil, counts requests by method and outcome and times
	// requests, audit appends and policy evaluations.
	Metrics *ops.Metrics
	// SessionTimeout closes a 2025-11-25 session idle this long (automatic
	// logoff); 0 means the SessionTimeout constant (30 min).
	SessionTimeout time.Duration
	// Grants enables break-the-glass: reads with purpose ETREAT are decided
	// with the active grant covering the caller and the patient, if any.
	// nil means no grant ever applies.
	Grants Grants
	// Resources tunes templates paging, ranged reads and cache hints (see
	// ResourceOptions; the zero value means the defaults).
	Resources ResourceOptions
}

const (
	// DefaultPageSize is the resources/list page size.
	DefaultPageSize = 50
	// DefaultScanLimit is the number of catalog entries one list request
	// examines at most.
	DefaultScanLimit = 2000
)

// Server answers the MCP Resources methods through policy, audit and
// minimization. It is safe for concurrent use.
type Server struct {
	cfg  Config
	log  *slog.Logger
	now  func() time.Time
	subs subscriptions // resource subscriptions (subscribe.go)

	pseudonyms pseudonymCache
	aliases    aliases // research aliases (research.go)
}

// New validates cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Catalog == nil:
		return nil, fmt.Errorf("%w: Catalog is required", ErrBadConfig)
	case cfg.Policy == nil:
		return nil, fmt.Errorf("%w: Policy is required", ErrBadConfig)
	case cfg.Audit == nil:
		return nil, fmt.Errorf("%w: Audit is required", ErrBadConfig)
	case cfg.Keys == nil:
		return nil, fmt.Errorf("%w: Keys is required", ErrBadConfig)
	case cfg.PageSize < 0 || cfg.PageSize > 500:
		return nil, fmt.Errorf("%w: PageSize must be between 1 and 500", ErrBadConfig)
	case cfg.ScanLimit < 0:
		return nil, fmt.Errorf("%w: ScanLimit must not be negative", ErrBadConfig)
	case cfg.SessionTimeout < 0:
		return nil, fmt.Errorf("%w: SessionTimeout must not be negative", ErrBadConfig)
	}
	if _, err := cfg.Resources.validate(); err != nil {
		return nil, err
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.ScanLimit == 0 {
		cfg.ScanLimit = DefaultScanLimit
	}
	if cfg.ScanLimit < cfg.PageSize {
		cfg.ScanLimit = cfg.PageSize
	}
	s := &Server{cfg: cfg, log: cfg.Logger, now: cfg.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// newMCPServer builds the go-sdk server whose Resources methods are all
// answered by the middleware below; nothing is registered with the SDK's
// own resource list.
func (s *Server) newMCPServer(ident identityFunc) *mcp.Server {
	version := s.cfg.Version
	if version == "" {
		version = "dev"
	}
	ms := mcp.NewServer(&mcp.Implementation{Name: "custos", Title: "custos — audited PHI resources", Version: version}, &mcp.ServerOptions{
		Logger:       sdkLogger(s.log),
		Capabilities: &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true}, Completions: &mcp.CompletionCapabilities{}},
		Instructions: "custos exposes protected health information as read-only resources. Every list and read is decided by policy and durably audited; results are minimized to what your role and purpose of use permit.",
		// Decided and audited in subscribe.go; the SDK keeps the listen
		// request ids and sends the notifications.
		SubscribeHandler:   s.onSubscribe,
		UnsubscribeHandler: s.onUnsubscribe,
	})
	s.subs.attach(ms)
	ms.AddReceivingMiddleware(s.middleware(ident))
	return ms
}

// middleware routes every resources/* method to the decision point and
// lets all other methods (initialize, ping, ...) through.
func (s *Server) middleware(ident identityFunc) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch {
			case method == "resources/subscribe" || method == "resources/unsubscribe" || method == "subscriptions/listen":
				// Decided and audited in subscribe.go.
				start := time.Now()
				res, err := s.subscription(ctx, ident, method, req, next)
				s.cfg.Metrics.ObserveRequest(method, outcomeOf(err), time.Since(start))
				return forRevision(req, res, err)
			case method == "completion/complete":
				// Policy-filtered suggestions, in complete.go.
				start := time.Now()
				res, err := s.complete(ctx, ident, req)
				s.cfg.Metrics.ObserveRequest(method, outcomeOf(err), time.Since(start))
				return forRevision(req, res, err)
			case !strings.HasPrefix(method, "resources/"):
				return next(ctx, method, req)
			}
			start := time.Now()
			res, err := s.handle(ctx, ident, method, req)
			s.cfg.Metrics.ObserveRequest(method, outcomeOf(err), time.Since(start))
			return forRevision(req, res, err)
		}
	}
}

// forRevision adapts an answer to the protocol revision of the request. On
// 2026-07-28 (stateless) "not found" is -32602 with data.uri (SEP-2164),
// where 2025-11-25 used -32002, and a read result carries resultType
// "complete". The go-sdk sets resultType only on results of its own read
// handler, which custos does not use, and TypeScript SDK v2 clients refuse
// a 2026-07-28 read result without it.
func forRevision(req mcp.Request, res mcp.Result, err error) (mcp.Result, error) {
	if !modernRequest(req) {
		return res, err
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code == CodeResourceNotFound {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: je.Message, Data: je.Data}
	}
	if r, ok := res.(*mcp.ReadResourceResult); ok && err == nil {
		return completeRead{r}, nil
	}
	return res, err
}

// modernRequest reports whether req follows revision 2026-07-28 or later:
// by the protocol version in its _meta (stateless requests carry it) or
// by the version its session negotiated.
func modernRequest(req mcp.Request) bool {
	if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() && statelessRevision(p.GetMeta()) {
		return true
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		if ip := ss.InitializeParams(); ip != nil {
			return ip.ProtocolVersion >= ProtocolStateless
		}
	}
	return false
}

// completeRead is a read result marked resultType "complete" on the wire.
type completeRead struct{ *mcp.ReadResourceResult }

// MarshalJSON writes the read result with "resultType":"complete" first.
func (r completeRead) MarshalJSON() ([]byte, error) {
	b, err := r.ReadResourceResult.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("server: read result is not a JSON object")
	}
	if bytes.Contains(b, []byte(`"resultType":`)) {
		return b, nil // set by the SDK (not today); keep its value
	}
	out := []byte(`{"resultType":"complete"`)
	if b[1] != '}' {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}

// outcomeOf classifies a request's result for metrics (a fixed set).
func outcomeOf(err error) string {
	var je *jsonrpc.Error
	switch {
	case err == nil:
		return ops.OutcomeAllow
	case errors.As(err, &je) && je.Code == CodeResourceNotFound:
		return ops.OutcomeNotFound // denied and missing alike, as the client sees them
	case errors.As(err, &je) && je.Code == jsonrpc.CodeInternalError:
		return ops.OutcomeRefused
	case errors.As(err, &je) && (je.Code == jsonrpc.CodeInvalidParams || je.Code == jsonrpc.CodeInvalidRequest):
		return ops.OutcomeDeny
	}
	return ops.OutcomeError
}

// admit is the first step of every request the server decides: identify
// the caller (a request without an identity, e.g. an OAuth token whose
// purpose of use is unknown, is refused and recorded under action without a
// principal), refuse it while keys are stale (recorded), and pin the policy
// engine that decides it.
func (s *Server) admit(ctx context.Context, ident identityFunc, action string, req mcp.Request) (context.Context, Identity, error) {
	id, err := ident(req)
	if err != nil {
		e := s.entry(ctx, Identity{Source: "unidentified"}, action)
		return ctx, id, s.refuse(ctx, e, audit.OutcomeDeny, ReasonNoIdentity,
			&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "unauthenticated request (or unknown purpose of use)"})
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		id.session = ss.ID()
	}
	if err := s.cfg.Keys.Check(); err != nil {
		return ctx, id, s.refuseStale(ctx, id, action, req, err)
	}
	return s.withDecider(ctx), id, nil
}

// handle is the decision point of one resources/* request.
func (s *Server) handle(ctx context.Context, ident identityFunc, method string, req mcp.Request) (mcp.Result, error) {
	ctx, id, err := s.admit(ctx, ident, method, req)
	if err != nil {
		return nil, err
	}
	switch r := req.(type) {
	case *mcp.ListResourcesRequest:
		return s.list(ctx, id, r.Params)
	case *mcp.ReadResourceRequest:
		return s.read(ctx, id, r.Params)
	case *mcp.ListResourceTemplatesRequest:
		return s.templates(ctx, id, r.Params)
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not supported: " + method}
	}
}

// decCtxKey carries the policy engine that decides one request.
type decCtxKey struct{}

// currentEngine is a Decider that can change while serving (a
// policy.Reloader); each request is decided by one snapshot of it, so a
// list page never mixes two policy revisions.
type currentEngine interface{ Current() *policy.Engine }

// withDecider pins the policy engine for the request in ctx.
func (s *Server) withDecider(ctx context.Context) context.Context {
	if c, ok := s.cfg.Policy.(currentEngine); ok {
		return context.WithValue(ctx, decCtxKey{}, Decider(c.Current()))
	}
	return ctx
}

// decider is the engine deciding the request in ctx.
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
	if b, ok := d.(interface{ BundleDigest() string }); ok && b.BundleDigest() != "" {
		return rev + " bundle=" + b.BundleDigest()
	}
	return rev
}

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

// pseudonymize replaces every patient id in e (the patients list and the
// patient segment of each URI) with audit.Pseudonym under the newest audit
// key, and names that key's version in e.Keys. If the key is unavailable it
// returns e with no identifiers at all, outcome error and (unless e was
// already a refusal with its own reason) reason audit_key_unavailable, and
// the error: the caller writes that record and refuses the request.
//
// If in is not nil (a read or templates request that reached a decision),
// e.Input becomes the JSON of in with every patient id replaced under the
// same key (see pseudonymInput), for replay by custos policy impact; without
// the key no input is recorded.
func (s *Server) pseudonymize(ctx context.Context, e audit.Entry, in *policy.Input) (audit.Entry, error) {
	e.Input = nil
	k, err := s.cfg.Keys.AuditKey(ctx)
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
		us[i] = pseudonymURI(pseudonym, raw)
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

// pseudonymInput is the policy input in as recorded for replay: the
// principal's attributes in full (Subject, which has no JSON form, is
// replaced by Principal), with every patient id — principal.patients,
// resource.patient and the patient segment of resource.uri — replaced by
// pseudonym(id) (audit.Pseudonym under one key). The same key maps equal
// ids to equal pseudonyms, so the policy's equality tests (care
// relationship) decide a replayed input as they decided the original. Nil
// lists become [], as the policy saw them.
func pseudonymInput(pseudonym func(string) string, in policy.Input) policy.Input {
	out := policy.Input{Principal: pseudonymPrincipal(pseudonym, in.Principal), PurposeOfUse: in.PurposeOfUse, Action: in.Action}
	if r := in.Resource; r != nil {
		rc := *r
		rc.Sensitivity, rc.Consent = nonNil(r.Sensitivity), nonNil(r.Consent)
		rc.URI = pseudonymURI(pseudonym, r.URI)
		if r.Patient != "" {
			rc.Patient = pseudonym(r.Patient)
			rc.URI = strings.ReplaceAll(rc.URI, r.Patient, rc.Patient)
		}
		out.Resource = &rc
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

// pseudonymURI is uri with every occurrence of its patient id (the
// patient segment, and the resource id of a FHIR Patient resource, which
// is the patient id) replaced by the keyed hash. Other resource ids stay:
// they are opaque ids of resources, not of people. A URI that does not
// parse (never stored by the server) is recorded as "invalid".
func pseudonymURI(pseudonym func(string) string, uri string) string {
	u, err := store.ParseURI(uri)
	if err != nil {
		return "invalid"
	}
	return strings.ReplaceAll(uri, u.Patient, pseudonym(u.Patient))
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
			e.URIs, e.Patients = []string{u.String()}, []string{u.Patient}
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
	e, kerr := s.pseudonymize(ctx, e, in)
	t0 := time.Now()
	rec, err := s.cfg.Audit.Append(ctx, e)
	s.cfg.Metrics.ObserveAudit(time.Since(t0))
	if err == nil && kerr != nil {
		// The refusal itself is on record (without identifiers).
		s.log.Error("audit keyed-hash key unavailable; request refused", "action", e.Action, "err", kerr)
		return rec, refused("keys unavailable: request refused, nothing released")
	}
	if err != nil {
		s.log.Error("audit append failed; request refused", "action", e.Action, "outcome", e.Outcome, "err", err)
		return rec, refused("audit log unavailable: request refused, nothing released")
	}
	s.log.Debug("audited", "action", e.Action, "outcome", e.Outcome, "seq", rec.Seq, "decision", e.DecisionID)
	return rec, nil
}

// auditFailure records a request that failed after its allow record was
// written (payload unreadable, minimization failed). Its own failure is
// logged; the client gets err either way.
func (s *Server) auditFailure(ctx context.Context, e audit.Entry, reason string, err error) error {
	e.Outcome = audit.OutcomeError
	e.Reason = reason
	e, _ = s.pseudonymize(ctx, e, nil) // without the key: recorded without identifiers; the decision's input is on the allow record
	if _, aerr := s.cfg.Audit.Append(ctx, e); aerr != nil {
		s.log.Error("audit append of failure record failed", "action", e.Action, "reason", reason, "err", aerr)
	}
	return err
}

// resourceInput is the policy view of a catalog entry.
func resourceInput(r store.Resource) *policy.Resource {
	return &policy.Resource{
		URI: r.URI, Type: r.Labels.Type, Patient: r.Labels.Patient, Tenant: r.Labels.Tenant,
		Sensitivity: nonNil(r.Labels.Sensitivity), Consent: nonNil(r.Labels.Consent),
	}
}

// decide asks the policy about one resource. It is the single decision
// function behind both list and read.
//
// subj is id.Principal converted once per request (policy.NewSubject).
func (s *Server) decide(ctx context.Context, id Identity, subj *policy.Subject, action policy.Action, r store.Resource) (policy.Decision, error) {
	return s.decideInput(ctx, policy.Input{
		Subject: subj, PurposeOfUse: id.PurposeOfUse, Action: action, Resource: resourceInput(r),
		BreakGlass: s.breakGlass(id, r.Labels.Patient),
	}, r)
}

// decideInput is decide on an input already built from r.
func (s *Server) decideInput(ctx context.Context, in policy.Input, r store.Resource) (policy.Decision, error) {
	t0 := time.Now()
	d, err := s.decider(ctx).Decide(ctx, in)
	s.cfg.Metrics.ObservePolicy(time.Since(t0))
	return s.finishDecision(ctx, d, err, r)
}

// decideBatch decides a list page of rs in one policy evaluation; each
// decision is finished exactly as decideInput finishes a read's.
func (s *Server) decideBatch(ctx context.Context, id Identity, subj *policy.Subject, rs []store.Resource) ([]policy.Decision, error) {
	items := make([]policy.Item, len(rs))
	for i, r := range rs {
		items[i] = policy.Item{Resource: resourceInput(r), BreakGlass: s.breakGlass(id, r.Labels.Patient)}
	}
	t0 := time.Now()
	ds, err := s.decider(ctx).DecideBatch(ctx, policy.Input{Subject: subj, PurposeOfUse: id.PurposeOfUse, Action: policy.ActionList}, items)
	s.cfg.Metrics.ObservePolicy(time.Since(t0))
	if err == nil && len(ds) != len(rs) {
		err = fmt.Errorf("policy: %d decisions for %d items", len(ds), len(rs))
	}
	if err != nil {
		return nil, err
	}
	for i := range ds {
		ds[i], _ = s.finishDecision(ctx, ds[i], nil, rs[i])
	}
	return ds, nil
}

// finishDecision names the bundle in force in d's revision and applies the
// server's own rule for binaries.
func (s *Server) finishDecision(ctx context.Context, d policy.Decision, err error, r store.Resource) (policy.Decision, error) {
	if d.Revision != "" {
		d.Revision = s.policyRevision(ctx, d.Revision)
	}
	if err != nil {
		d.Allow = false
		return d, err
	}
	if d.Allow && len(d.Obligations) > 0 && isBinary(r.MIMEType) {
		// Binary is released whole or not at all: a demanded minimization
		// that cannot be applied makes the decision a denial.
		d.Allow = false
		d.Reasons = append(d.Reasons, ReasonBinaryNotMinimizable)
	}
	return d, nil
}

func newNonce() ([]byte, error) {
	n := make([]byte, 12)
	_, err := rand.Read(n)
	return n, err
}
