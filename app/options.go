package app

import (
	"crypto/tls"
	"log/slog"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/oauth"
	"github.com/custos-mcp/custos/store"
)

// Options configure an App. The comment of each field names its key: the
// dotted path of the serve configuration file (docs/config.example.yaml),
// which Problems use and the serve flags mirror. A zero value means the
// default stated in the comment; Check (with CheckOptions.Given) can tell a
// zero that was asked for from one that was left out.
type Options struct {
	// DataDir holds catalog.db (created by 'custos import'), audit.db and
	// grants.db. Required. Key data_dir.
	DataDir string
	// Dev serves with dev keys persisted in DataDir: every audit record is
	// marked dev=true, an encrypted catalog is refused. Never for real PHI.
	// Key dev.
	Dev bool
	// Vault opens the production keys. Required unless Dev; must be nil
	// with Dev. Keys vault.*.
	Vault *secrets.VaultOptions
	// Node names this server in audit records and in the checkpoint origin
	// <deployment>/<node>/audit. "" means the host name ("custos" if it has
	// none). Key node.
	Node string
	// PageSize is the number of resources per resources/list page, 1 to
	// MaxPageSize; 0 means server.DefaultPageSize. Key page_size.
	PageSize int
	// Policy chooses the Rego policy; the zero value is the built-in one.
	Policy PolicyOptions
	// Checkpoints configure the signed checkpoints of the audit log.
	Checkpoints CheckpointOptions
	// BreakGlass are the break-the-glass rules; the zero value is a 4-hour
	// maximum TTL and any operator who can write grants.db.
	BreakGlass BreakGlassOptions

	// AuditRetention is how long audit records must be kept: reported by
	// /readyz (with the oldest record's age) and by 'custos compliance
	// report'. custos never deletes a record, whatever its age; purging
	// past retention is the operator's (docs/operations.md). 0 means
	// DefaultRetention. Key audit.retention.
	AuditRetention time.Duration

	// AuditDisk watches the free space of the audit log's volume.
	AuditDisk AuditDiskOptions

	// Scrub configures the background re-verification of the audit log.
	Scrub ScrubOptions
	// AuditSegments configure the audit log's rollover into sealed
	// segments and their archive; the zero value seals monthly and keeps
	// sealed segments in DataDir/audit.sealed.
	AuditSegments AuditSegmentOptions
	// AuditBatchDelay, if not 0, fixes the audit log's group-commit window
	// (audit.Options MinBatchDelay = MaxBatchDelay); 0 leaves the audit
	// package's adaptive window, which serve uses. No key: for benchmarks.
	AuditBatchDelay time.Duration

	// Stdio serves one client on stdio (key stdio.enabled); HTTP serves
	// Streamable HTTP (key http.listen). Exactly one must be set.
	Stdio *StdioOptions
	HTTP  *HTTPOptions
	// Ops serves /healthz, /readyz and /metrics; the zero value serves
	// nothing (and keeps no metrics).
	Ops OpsOptions
	// Admin configures the admin socket DataDir/admin.sock, which is
	// always served (docs/audit-access.md).
	Admin AdminOptions
	// Sync pulls from a FHIR server on a schedule (package fhirsync); the
	// zero value runs no sync.
	Sync SyncOptions

	// Logger receives the operational log (never a secret, a payload or
	// PHI); nil discards.
	Logger *slog.Logger
	// Version is the MCP implementation version reported to clients; ""
	// means "dev".
	Version string
}

// PolicyOptions choose the policy: built-in (zero value), a directory
// (Dev only, unsigned) or a signed bundle.
type PolicyOptions struct {
	// Dir is a directory of Rego files, watched and reloaded. Key policy.dir.
	Dir string
	// Bundle is a signed OPA bundle, watched and reloaded; its signature
	// is checked against Keys and, with VaultKeys, the Vault policy key.
	// Key policy.bundle.
	Bundle string
	// Keys are ES256 public keys that may sign Bundle. Key policy.keys.
	Keys []PolicyKey
	// VaultKeys also accepts bundles signed by the Vault Transit key
	// custos-policy-signing (needs Vault). Key policy.vault_key.
	VaultKeys bool
	// AllowRollback lets the server start with a Bundle that does not
	// advance the rollback high-water mark (an older sequence claim, or
	// none after a bundle with one): the operator's override, recorded in
	// the policy/load record. Hot reloads are checked all the same. Flag
	// --policy-allow-rollback only (no configuration key: an override
	// left in a file would let the next restart roll back unnoticed).
	AllowRollback bool
	// MinSequence is the lowest sequence claim a Bundle may carry (0:
	// none): a floor for a new audit log, which holds no high-water mark
	// yet, and for every start and reload after it. No override lowers it
	// (--policy-allow-rollback neither): a bundle under it, or without a
	// claim, is refused. Key policy.min_sequence.
	MinSequence int64
}

// PolicyKey is one verification key of a policy bundle: an id and the PEM
// file of its public key.
type PolicyKey struct {
	ID, File string
}

// CheckpointOptions configure signed checkpoints of the audit tree.
type CheckpointOptions struct {
	// Deployment names the deployment in the checkpoint origin; "" means
	// DefaultDeployment. Key audit.deployment.
	Deployment string
	// AnchorDir is a directory on separate storage that receives every
	// signed checkpoint. Required without Dev. Key audit.anchor_dir.
	AnchorDir string
	// Every: a checkpoint after this many new records; 0 means
	// checkpoint.DefaultEvery. Key audit.checkpoint_every.
	Every int64
	// Interval: a checkpoint at least this often while records arrive; 0
	// means checkpoint.DefaultInterval. Key audit.checkpoint_interval.
	Interval time.Duration
}

// BreakGlassOptions are the deployment's break-the-glass rules (btg.Rules).
// They are server configuration, never an argument of 'custos btg grant':
// the App publishes them in grants.db for that command to enforce, and
// refuses (never applies, and audits as btg/refuse) any grant it finds
// there that breaks them.
type BreakGlassOptions struct {
	// MaxTTL caps how long a grant may last, up to btg.CeilingTTL; 0
	// means btg.DefaultMaxTTL (4h). Key btg.max_ttl.
	MaxTTL time.Duration
	// GrantRoles are the operator roles allowed to grant: the OS groups of
	// the account running 'custos btg grant'. Empty means any operator who
	// can write grants.db. Key btg.grant_roles.
	GrantRoles []string
}

// rules are o as btg.Rules.
func (o BreakGlassOptions) rules() btg.Rules {
	r := btg.DefaultRules()
	if o.MaxTTL != 0 {
		r.MaxTTL = o.MaxTTL
	}
	r.GrantRoles = slices.Sorted(slices.Values(o.GrantRoles))
	return r
}

// ScrubOptions configure the scrubber that re-verifies the whole audit
// log while serving (package audit/scrub; docs/operations.md, "Continuous
// integrity").
type ScrubOptions struct {
	// Interval is the time between the starts of two passes over the
	// whole log; the first starts with the server. 0 means
	// scrub.DefaultInterval (24h). Key audit.scrub_interval.
	Interval time.Duration
	// Rate is the number of records checked per second at most (about
	// 5 µs of CPU each); 0 means scrub.DefaultRate (10,000). Key
	// audit.scrub_rate.
	Rate int
}

// AuditSegmentOptions configure sealed segments of the audit log
// (docs/operations.md, "Sealed segments and archive"): the live segment
// DataDir/audit.db is sealed and a new one started when the first of the
// size and period limits is reached. Sealing verifies the segment at the
// scrubber's rate (ScrubOptions.Rate).
type AuditSegmentOptions struct {
	// RollSize seals the live segment once its pages in use reach this
	// many bytes (bbolt's tx.Size(); the file runs ahead of them), at least MinAuditRollSize; 0 means no size limit. Key
	// audit.roll_size.
	RollSize int64
	// RollPeriod seals it once its first record is this old, at least
	// MinAuditRollPeriod; 0 means monthly: in the first minute of a new
	// calendar month (UTC), or at the first record after it. Key
	// audit.roll_period.
	RollPeriod time.Duration
	// ArchiveDir is a directory on separate storage that receives every
	// sealed segment with its signed seal (copied, verified, then removed
	// from the data directory); "" keeps them in DataDir/audit.sealed.
	// Readers find archived segments there. Key audit.archive_dir.
	ArchiveDir string
}

// Limits of AuditSegmentOptions.
const (
	MinAuditRollSize   = 64 << 10
	MinAuditRollPeriod = time.Minute
)

// StdioOptions serve one client on stdin/stdout as one principal.
type StdioOptions struct {
	// PrincipalFile is the principal (JSON: sub, roles, client_id, tenant,
	// patients, purpose_of_use). Required. Key stdio.principal_file.
	PrincipalFile string
	// Transport carries the session; nil means stdin/stdout
	// (server.StdioTransport on os.Stdin and os.Stdout). Tests pass an in-memory transport.
	Transport mcp.Transport
}

// HTTPOptions serve MCP over Streamable HTTP at /mcp.
type HTTPOptions struct {
	// Listen is HOST:PORT (port 0 picks a free port; see App.URL). Plain
	// HTTP is served only with Dev and on a loopback address. Required.
	// Key http.listen.
	Listen string
	// AddrFile, if set, receives the MCP endpoint URL once Open has
	// started everything, the admin socket included. Key http.addr_file.
	AddrFile string
	// The identity of callers: exactly one of TokensFile (dev tokens, key
	// http.tokens_file), Tokens (dev tokens already loaded; no key) and
	// OAuth (an OAuth 2.1 issuer; keys oauth.*).
	TokensFile string
	Tokens     *server.Tokens
	OAuth      *oauth.Config
	// CertFile and KeyFile serve HTTPS with a certificate reloaded when the
	// files change (keys tls.cert_file, tls.key_file). TLSConfig is a TLS
	// configuration made by the caller instead (no key).
	CertFile, KeyFile string
	TLSConfig         *tls.Config
	// TLS12 also accepts TLS 1.2 with CertFile (default: TLS 1.3 only).
	// Key tls.min_version "1.2".
	TLS12 bool
	// Server holds the timeouts and limits of the http.Server (keys
	// http.read_header_timeout, http.read_timeout, http.write_timeout,
	// http.idle_timeout, http.max_header_bytes, http.max_request_body_bytes,
	// http.max_connections);
	// zero fields take server's defaults, and a zero MaxRequestBodyBytes
	// means MaxRequestBodyLimit. Its TLSConfig is ignored.
	Server server.HTTPOptions
	// RateLimit bounds each principal's requests (keys http.rate_limit,
	// http.rate_burst); the zero value is unlimited.
	RateLimit server.RateLimit
	// SessionIdle closes an idle 2025-11-25 session; 0 means
	// server.SessionTimeout. Key http.session_idle_timeout.
	SessionIdle time.Duration
	// MaxSessions caps the 2025-11-25 sessions one principal holds at
	// once; 0 means server.DefaultMaxSessions. Key
	// http.max_sessions_per_principal.
	MaxSessions int
	// Refusals bound what failed authentications cost the audit log: the
	// aggregation window (key http.refusal_window; 0 means
	// server.DefaultRefusalWindow) and the failures one source address may
	// make in a window before it is answered 429 (key
	// http.refusals_per_source; 0 means server.DefaultRefusalsPerSource).
	Refusals server.RefusalLimits
	// TrustedProxies are the IP addresses or CIDR prefixes of proxies (a
	// TLS-terminating load balancer) whose Forwarded or X-Forwarded-For
	// header names the caller: only a request whose TCP peer is one of them
	// has its source address taken from those headers (the right-most hop
	// that is not a trusted proxy; package server/clientaddr). Empty (the
	// default) reads no header. Key http.trusted_proxies.
	TrustedProxies []string
	// TrustedProxyHeader is the one forwarding header the trusted proxies
	// write: "forwarded" or "x-forwarded-for"; the other is then never
	// read, so a client cannot send it to be recorded as the proxy. ""
	// (the default) reads either, and both present must agree (else the
	// source is the proxy). Key http.trusted_proxy_header.
	TrustedProxyHeader string
}

// AuditDiskOptions watch the free space of the audit log's volume
// (sampled every ops.DefaultDiskInterval).
type AuditDiskOptions struct {
	// LowWatermark: below this many free bytes /readyz is not ready and
	// custos_audit_volume_low is 1 (an alert before the volume is full);
	// 0 means ops.DefaultDiskWatermark. Key audit.disk_low_watermark.
	LowWatermark int64
	// Reserve: below this many free bytes (at most LowWatermark) new
	// requests are refused (disk_low), keeping the rest for the records
	// that must be written; 0 means ops.DefaultDiskReserve (or
	// LowWatermark if smaller). Key audit.disk_reserve.
	Reserve int64
}

// OpsOptions serve the operations endpoints on a listener of their own.
type OpsOptions struct {
	// Listen is HOST:PORT of /healthz, /readyz and /metrics; "" serves
	// none. Key ops.listen.
	Listen string
	// AddrFile, if set, receives the ops base URL once Open has started
	// everything. Key ops.addr_file.
	AddrFile string
}

// AdminOptions configure the admin socket through which the auditor
// commands reach the running server (package app/admin).
type AdminOptions struct {
	// Groups are gids whose members (as their primary or effective group)
	// may use the socket besides the server's own uid and root; the socket
	// is then mode 0660 and owned by the first group. Empty: mode 0600.
	// Key admin.groups.
	Groups []uint32
	// AuditorCPU is the share of one CPU that the auditor operations'
	// walks of the log (verify, export, bundle, report, compliance report,
	// policy impact) may use together while the server serves, however
	// many run at once: they rest between chunks of records
	// (access.Service.Pace, one budget), so that auditors beside a serving
	// server leave the CPUs to clinicians' reads. 0 means
	// DefaultAuditorCPU; 1 or more, no pacing. Key audit.auditor_cpu.
	AuditorCPU float64
}

// DefaultAuditorCPU is AdminOptions.AuditorCPU's default: half of one CPU.
const DefaultAuditorCPU = 0.5

// auditorCPU is o's AuditorCPU with its default applied.
func (o AdminOptions) auditorCPU() float64 {
	if o.AuditorCPU == 0 {
		return DefaultAuditorCPU
	}
	return o.AuditorCPU
}

// SyncOptions run a sync from a live FHIR R4 server on a schedule, inside
// the server (which holds the audit log the sync records go to;
// docs/operations.md, "Scheduled FHIR sync"). The client key is the Vault
// Transit key Layout.FHIRClientKey, or with Dev the local key
// DataDir/sync-client-key.pem; it is loaded at Open, so a missing key stops
// the server from starting.
type SyncOptions struct {
	// FHIRBase is the server's FHIR base URL (http(s), no credentials,
	// query or fragment); "" means no scheduled sync. Key sync.fhir_base.
	FHIRBase string
	// Every is the time between the starts of two syncs; the first starts
	// with the server. 0 means DefaultSyncEvery; at least MinSyncEvery.
	// Key sync.every.
	Every time.Duration
	// ClientID is the SMART Backend Services client id; "" means the FHIR
	// server needs no authorization. Key sync.client_id.
	ClientID string
	// Scope is asked for with the client's token (fhirsync.Options.Scope);
	// "" means SMART's system/*.read (system/*.rs where the server lists
	// only v2 scopes). Needs ClientID. Key sync.scope.
	Scope string
	// Tenant receives the resources. Required with FHIRBase. Key
	// sync.tenant.
	Tenant string
	// Importer, if not nil, replaces the importer that loads what a sync
	// staged into the catalog; Open calls it with the App's blob data keys
	// (nil with Dev). nil means FHIRImporter into DataDir's catalog for
	// Tenant, under the source label of FHIRBase and the App's resource id
	// key. No key (tests only).
	Importer func(dataKeys store.DataKeys) fhirsync.Importer
}

// Defaults and limits of SyncOptions.
const (
	DefaultSyncEvery = time.Hour
	MinSyncEvery     = time.Minute
	// SyncKeyFile is the Dev client key of the scheduled sync (and of
	// 'custos sync --dev') in the data directory.
	SyncKeyFile = "sync-client-key.pem"
)

// Defaults and limits of Options.
const (
	// DefaultDeployment names a deployment that did not name itself.
	DefaultDeployment = "custos.local"
	// MaxPageSize is the largest PageSize.
	MaxPageSize = 500
	// MinHeaderBytes and MaxHeaderBytesLimit bound
	// HTTPOptions.Server.MaxHeaderBytes.
	MinHeaderBytes      = 4 << 10
	MaxHeaderBytesLimit = 1 << 20
	// MinRequestBodyBytes and MaxRequestBodyLimit bound
	// HTTPOptions.Server.MaxRequestBodyBytes; the upper limit is the MCP
	// handler's own.
	MinRequestBodyBytes = 4 << 10
	MaxRequestBodyLimit = 1 << 20
	// DefaultRetention is six years (6 × 365.25 days = 52596h): HIPAA
	// keeps required documentation six years (45 CFR 164.316(b)(2)).
	DefaultRetention = 52596 * time.Hour
	// MaxOAuthNameSize bounds an OAuth scope, claim or header name.
	MaxOAuthNameSize = 256
)

// Retention is the audit retention period in force: AuditRetention, or
// DefaultRetention when it is 0.
func (o *Options) Retention() time.Duration {
	if o.AuditRetention == 0 {
		return DefaultRetention
	}
	return o.AuditRetention
}

// origin is the checkpoint origin "<deployment>/<node>/audit".
func (o *Options) origin() string {
	dep := o.Checkpoints.Deployment
	if dep == "" {
		dep = DefaultDeployment
	}
	return dep + "/" + o.Node + "/audit"
}
