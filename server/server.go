package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
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
	"github.com/custos-mcp/custos/server/clientaddr"
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

// Decider is the policy decision point (*policy.Engine, *policy.Reloader).
// A non-nil error means the policy could not decide; the returned Decision
// is then a denial. A Decider whose policy can change while serving also
// implements Snapshotter (decide.go), so that one request is decided by one
// policy.
type Decider interface {
	Decide(ctx context.Context, in policy.Input) (policy.Decision, error)
	// DecideBatch decides one list page: decisions[i] is what Decide would
	// answer for items[i] (the policy's batch rule evaluates the same
	// function as a read). A non-nil error denies every item.
	DecideBatch(ctx context.Context, in policy.Input, items []policy.Item) ([]policy.Decision, error)
	// Revision names the policy; it is recorded in every audit record.
	Revision() string
	// BundleDigest is the digest of the signed bundle the policy was
	// loaded from, "" if it was not; recorded after the revision
	// (" bundle=<digest>").
	BundleDigest() string
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
	// cursors already issued). The key of minimized entity tags is derived
	// from the first (entityTagKey); no other key is made from them.
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
	// Policy decides every request. If it is also a Snapshotter (as
	// *policy.Reloader is), each request is pinned to the engine in force
	// when it was admitted.
	Policy Decider
	Audit  AuditLog
	Keys   Keys
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
	// References names resources by the keyed ids of their URIs
	// (store.Referencer): the pseudonymize obligation renames a
	// view's id and references with it (readKeyID). nil names nothing, so
	// such a view keeps no id and only the type of its references.
	References Referencer
	// Resources tunes templates paging, ranged reads and cache hints (see
	// ResourceOptions; the zero value means the defaults).
	Resources ResourceOptions
	// Refusals bound what refusals anyone can cause cost the audit log
	// (refusals.go; the zero value means the defaults).
	Refusals RefusalLimits
	// MaxSessions caps the 2025-11-25 sessions one principal holds at once
	// over HTTP (sessions.go); 0 means DefaultMaxSessions.
	MaxSessions int
	// TrustedProxies are the proxies (a TLS-terminating load balancer)
	// whose Forwarded or X-Forwarded-For header names the caller's address
	// over HTTP: the source of audit records and of the limit on failed
	// authentications (package clientaddr). nil trusts no header: the
	// source is the TCP peer.
	TrustedProxies clientaddr.Proxies
	// Volume, if not nil, says when the audit volume is down to its
	// reserve: new requests are then refused (disk_low), so that the
	// records that must be written still fit.
	Volume Volume
}

// Referencer names the source resource typ/sourceID of tenant by the
// keyed id a streaming import gives its URI, whether or not the catalog
// holds it (store.Referencer); ok is false for what it cannot name (a type
// outside R4). The key it names them under never leaves it.
type Referencer interface {
	KeyedID(tenant, typ, sourceID string) (keyed string, ok bool)
}

// Volume reports the state of the audit log's volume (*ops.DiskWatch).
type Volume interface {
	// InReserve reports whether free space is below the reserve. It must
	// be cheap: it is asked on every request (sample the volume
	// periodically, not per call).
	InReserve() bool
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
	// snapshot returns the Decider that decides one request, called once
	// as the request is admitted (snapshotOf(cfg.Policy), decide.go).
	snapshot func() Decider

	pseudonyms pseudonymCache
	patientIDs patientIDs // patientOf's memo
	aliases    aliases    // research aliases (research.go)

	refusals  *refusals // aggregated refusals (refusals.go)
	closeOnce sync.Once

	// emptyURI stands in, over HTTP, for the empty uri of a 2026-07-28
	// read, or the empty name of a tool call or prompt get, which no
	// Mcp-Name header can match (emptyName): random per server, so no
	// client can name it.
	emptyURI string
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
	case cfg.MaxSessions < 0 || cfg.Refusals.PerSource < 0 || cfg.Refusals.Window < 0:
		return nil, fmt.Errorf("%w: MaxSessions and Refusals must not be negative", ErrBadConfig)
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
	s := &Server{cfg: cfg, log: cfg.Logger, now: cfg.Now, snapshot: snapshotOf(cfg.Policy)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.refusals = newRefusals(s, cfg.Refusals)
	if n, err := newNonce(); err == nil {
		s.emptyURI = fmt.Sprintf("custos-empty-uri:%x", n)
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
	caps := capabilities()
	ms := mcp.NewServer(&mcp.Implementation{Name: "custos", Title: "custos — audited PHI resources", Version: version}, &mcp.ServerOptions{
		Logger:       sdkLogger(s.log),
		Capabilities: caps,
		Instructions: "custos exposes protected health information as read-only resources. Every list and read is decided by policy and durably audited; results are minimized to what your role and purpose of use permit.",
		// Decided and audited in subscribe.go; the SDK keeps the listen
		// request ids and sends the notifications.
		SubscribeHandler:   s.onSubscribe,
		UnsubscribeHandler: s.onUnsubscribe,
	})
	s.subs.attach(ms)
	ms.AddReceivingMiddleware(undeclaredMethods(caps), s.middleware(ident))
	return ms
}

// middleware routes every resources/* method to the decision point and
// lets all other methods (initialize, ping, ...) through.
func (s *Server) middleware(ident identityFunc) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch {
			case method == "subscriptions/listen" && !modernRequest(req):
				// The go-sdk serves it in any session; it is a method of
				// 2026-07-28 only, as server/discover (which the SDK
				// refuses before 2026-07-28 in the same words).
				return nil, errListenNotInRevision
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
			case method == ops.MethodInitialize || method == ops.MethodPing:
				// Not decided, but counted: the dashboard's sessions
				// opened are custos_requests_total{method="initialize"}.
				start := time.Now()
				res, err := next(ctx, method, req)
				err = codedError(err) // a second initialize: the SDK's error has no code
				s.cfg.Metrics.ObserveRequest(method, outcomeOf(err), time.Since(start))
				return res, err
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

// errListenNotInRevision answers subscriptions/listen in a session of a
// revision before 2026-07-28 (which subscribes with resources/subscribe).
var errListenNotInRevision = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
	Message: `"subscriptions/listen" is only supported in protocol version >= ` + ProtocolStateless + " (this session subscribes with resources/subscribe)"}

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
// by the protocol version in its own _meta, which every request of those
// revisions carries (the go-sdk refuses one without it). A session opened
// by initialize never speaks them, whatever the client offered: the SDK
// negotiates 2025-11-25 or earlier for an offer of 2026-07-28, of a later
// date or of no date ("zzz"), and InitializeParams keeps the offer, not
// what was negotiated (judged by it, such a session was answered -32602
// for not found and served subscriptions/listen;
// TestSessionSpeaksTheNegotiatedRevision).
func modernRequest(req mcp.Request) bool {
	p := req.GetParams()
	return p != nil && !reflect.ValueOf(p).IsNil() && statelessRevision(p.GetMeta())
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
// the caller (a request without an identity is refused and recorded under
// action; with the principal and address of its token if that verified,
// e.g. an OAuth token whose purpose of use is unknown, else as
// "unidentified"), refuse it while the audit volume is down to its reserve
// (recorded in aggregate, refusals.go) or keys are stale (recorded), and
// pin the policy engine that decides it.
func (s *Server) admit(ctx context.Context, ident identityFunc, action string, req mcp.Request) (context.Context, Identity, error) {
	id, err := ident(req)
	if err != nil {
		who := Identity{Principal: id.Principal, Source: cmp.Or(id.Source, "unidentified")}
		e := s.entry(ctx, who, action)
		return ctx, Identity{}, s.refuse(ctx, e, audit.OutcomeDeny, ReasonNoIdentity,
			&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "unauthenticated request (or unknown purpose of use)"})
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		id.session = ss.ID()
	}
	if v := s.cfg.Volume; v != nil && v.InReserve() {
		// What is left of the volume is kept for the records that must be
		// written: these refusals (aggregated), policy loads, checkpoints.
		return ctx, id, s.refuseCounted(ctx, s.entry(ctx, id, action), audit.OutcomeError, ReasonDiskLow,
			refused("audit volume low: request refused, nothing released"))
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

func newNonce() ([]byte, error) {
	n := make([]byte, 12)
	_, err := rand.Read(n)
	return n, err
}
