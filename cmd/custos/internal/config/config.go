package config

import "time"

// File is the schema of the configuration file. Every leaf is a pointer:
// nil means "not in the file" (the flag's default applies), so that a
// present zero value (rate_limit: 0) is told apart from an absent one. The
// `flag` tag names the serve flag a leaf stands for; every serve flag but
// --config has a field (TestEveryServeFlagHasAField in cmd/custos).
type File struct {
	// DataDir holds catalog.db, audit.db and grants.db.
	DataDir *string `yaml:"data_dir" flag:"data-dir"`
	// Dev serves with ephemeral dev keys; never for real PHI.
	Dev *bool `yaml:"dev" flag:"dev"`
	// Node names this server in audit records and checkpoint origins.
	Node *string `yaml:"node" flag:"node"`
	// PageSize is the number of resources per resources/list page.
	PageSize *int `yaml:"page_size" flag:"page-size"`

	Stdio  Stdio  `yaml:"stdio"`
	HTTP   HTTP   `yaml:"http"`
	TLS    TLS    `yaml:"tls"`
	OAuth  OAuth  `yaml:"oauth"`
	Policy Policy `yaml:"policy"`
	Audit  Audit  `yaml:"audit"`
	BTG    BTG    `yaml:"btg"`
	Vault  Vault  `yaml:"vault"`
	Log    Log    `yaml:"log"`
	Ops    Ops    `yaml:"ops"`
	Sync   Sync   `yaml:"sync"`

	name     string          // the file's name in Problems ("" for flags only)
	lines    map[string]int  // dotted path -> line of its key in the file
	fromFlag map[string]bool // dotted path -> the value came from the command line
	// set, if not nil, says which fields were given (Snapshot); nil means
	// the fields that are not nil.
	set map[string]bool
}

// Stdio serves one client on stdin/stdout as one principal.
type Stdio struct {
	Enabled       *bool   `yaml:"enabled" flag:"stdio"`
	PrincipalFile *string `yaml:"principal_file" flag:"principal-file"`
}

// HTTP is the Streamable HTTP listener and its limits.
type HTTP struct {
	Listen              *string        `yaml:"listen" flag:"listen"`
	AddrFile            *string        `yaml:"addr_file" flag:"addr-file"`
	TokensFile          *string        `yaml:"tokens_file" flag:"tokens"`
	RateLimit           *float64       `yaml:"rate_limit" flag:"rate-limit"`
	RateBurst           *int           `yaml:"rate_burst" flag:"rate-burst"`
	ReadHeaderTimeout   *time.Duration `yaml:"read_header_timeout" flag:"http-read-header-timeout"`
	ReadTimeout         *time.Duration `yaml:"read_timeout" flag:"http-read-timeout"`
	WriteTimeout        *time.Duration `yaml:"write_timeout" flag:"http-write-timeout"`
	IdleTimeout         *time.Duration `yaml:"idle_timeout" flag:"http-idle-timeout"`
	SessionIdleTimeout  *time.Duration `yaml:"session_idle_timeout" flag:"http-session-idle-timeout"`
	MaxHeaderBytes      *int           `yaml:"max_header_bytes" flag:"http-max-header-bytes"`
	MaxRequestBodyBytes *int64         `yaml:"max_request_body_bytes" flag:"http-max-body-bytes"`
	MaxSessions         *int           `yaml:"max_sessions_per_principal" flag:"http-max-sessions"`
	MaxConnections      *int           `yaml:"max_connections" flag:"http-max-connections"`
	RefusalWindow       *time.Duration `yaml:"refusal_window" flag:"http-refusal-window"`
	RefusalsPerSource   *int           `yaml:"refusals_per_source" flag:"http-refusals-per-source"`
	// TrustedProxies are IP addresses or CIDR prefixes of proxies whose
	// Forwarded or X-Forwarded-For header names the caller.
	TrustedProxies []string `yaml:"trusted_proxies" flag:"http-trusted-proxy"`
	// TrustedProxyHeader is the one header those proxies write
	// (forwarded or x-forwarded-for); unset: either.
	TrustedProxyHeader *string `yaml:"trusted_proxy_header" flag:"http-trusted-proxy-header"`
}

// TLS serves HTTPS. MinVersion is "1.3" (default) or "1.2"; it stands for
// --tls12.
type TLS struct {
	CertFile   *string `yaml:"cert_file" flag:"tls-cert"`
	KeyFile    *string `yaml:"key_file" flag:"tls-key"`
	MinVersion *string `yaml:"min_version" flag:"tls12"`
}

// OAuth verifies OAuth 2.1 access tokens (JWTs) instead of dev tokens.
type OAuth struct {
	Issuer        *string     `yaml:"issuer" flag:"oauth-issuer"`
	JWKSURL       *string     `yaml:"jwks_url" flag:"oauth-jwks"`
	Audience      *string     `yaml:"audience" flag:"oauth-audience"`
	Scopes        OAuthScopes `yaml:"scopes"`
	Claims        OAuthClaims `yaml:"claims"`
	PurposeHeader *string     `yaml:"purpose_header" flag:"oauth-purpose-header"`
	// JWKSMaxStaleness: beyond this long without a successful JWKS fetch,
	// every token is refused.
	JWKSMaxStaleness *time.Duration `yaml:"jwks_max_staleness" flag:"oauth-jwks-max-staleness"`
}

// OAuthScopes are the scopes each method requires.
type OAuthScopes struct {
	List *string `yaml:"list" flag:"oauth-scope-list"`
	Read *string `yaml:"read" flag:"oauth-scope-read"`
}

// OAuthClaims name the access token's custom claims.
type OAuthClaims struct {
	Roles        *string `yaml:"roles" flag:"oauth-roles-claim"`
	Tenant       *string `yaml:"tenant" flag:"oauth-tenant-claim"`
	Patients     *string `yaml:"patients" flag:"oauth-patients-claim"`
	PurposeOfUse *string `yaml:"purpose_of_use" flag:"oauth-purpose-claim"`
	Client       *string `yaml:"client" flag:"oauth-client-claim"`
}

// Policy chooses the Rego policy: built-in (nothing set), a directory (dev
// only) or a signed bundle.
type Policy struct {
	Dir      *string     `yaml:"dir" flag:"policy-dir"`
	Bundle   *string     `yaml:"bundle" flag:"policy-bundle"`
	Keys     []PolicyKey `yaml:"keys" flag:"policy-key"`
	VaultKey *bool       `yaml:"vault_key" flag:"policy-key-vault"`
	// MinSequence is the lowest sequence claim a bundle may carry.
	MinSequence *int64 `yaml:"min_sequence" flag:"policy-min-sequence"`
}

// PolicyKey is an ES256 public key that may sign the policy bundle; it
// stands for one --policy-key ID=FILE.
type PolicyKey struct {
	ID   string `yaml:"id"`
	File string `yaml:"file"`
}

// Audit configures signed checkpoints of the audit log, its retention
// period (reported, never enforced by deleting), the watch on its volume's
// free space, its scrubber and its sealed segments.
type Audit struct {
	Deployment         *string        `yaml:"deployment" flag:"deployment"`
	AnchorDir          *string        `yaml:"anchor_dir" flag:"anchor-dir"`
	CheckpointEvery    *int64         `yaml:"checkpoint_every" flag:"checkpoint-every"`
	CheckpointInterval *time.Duration `yaml:"checkpoint_interval" flag:"checkpoint-interval"`
	Retention          *time.Duration `yaml:"retention" flag:"audit-retention"`
	DiskLowWatermark   *int64         `yaml:"disk_low_watermark" flag:"audit-disk-low-watermark"`
	DiskReserve        *int64         `yaml:"disk_reserve" flag:"audit-disk-reserve"`
	ScrubInterval      *time.Duration `yaml:"scrub_interval" flag:"scrub-interval"`
	ScrubRate          *int           `yaml:"scrub_rate" flag:"scrub-rate"`
	AuditorCPU         *float64       `yaml:"auditor_cpu" flag:"auditor-cpu"`
	RollSize           *int64         `yaml:"roll_size" flag:"audit-roll-size"`
	RollPeriod         *time.Duration `yaml:"roll_period" flag:"audit-roll-period"`
	ArchiveDir         *string        `yaml:"archive_dir" flag:"audit-archive-dir"`
}

// BTG are the break-the-glass rules (app.BreakGlassOptions): server
// configuration, which 'custos btg grant' reads from what serve published
// in grants.db, never from flags of its own.
type BTG struct {
	MaxTTL     *time.Duration `yaml:"max_ttl" flag:"btg-max-ttl"`
	GrantRoles []string       `yaml:"grant_roles" flag:"btg-grant-role"`
}

// Vault is the production secrets provider. There is deliberately no token
// field: the token stays in $VAULT_TOKEN.
type Vault struct {
	Address         *string        `yaml:"address" flag:"vault-addr"`
	CACertFile      *string        `yaml:"ca_cert_file" flag:"vault-ca-cert"`
	AppRole         AppRole        `yaml:"approle"`
	KVMount         *string        `yaml:"kv_mount" flag:"vault-kv-mount"`
	CursorKey       *string        `yaml:"cursor_key" flag:"vault-cursor-key"`
	AuditKey        *string        `yaml:"audit_key" flag:"vault-audit-key"`
	TransitMount    *string        `yaml:"transit_mount" flag:"vault-transit-mount"`
	SigningKey      *string        `yaml:"signing_key" flag:"vault-signing-key"`
	BlobKey         *string        `yaml:"blob_key" flag:"vault-blob-key"`
	Timeout         *time.Duration `yaml:"timeout" flag:"vault-timeout"`
	KeyRefresh      *time.Duration `yaml:"key_refresh" flag:"key-refresh"`
	KeyMaxStaleness *time.Duration `yaml:"key_max_staleness" flag:"key-max-staleness"`
}

// AppRole logs in to Vault with ids read from files.
type AppRole struct {
	Mount           *string `yaml:"mount" flag:"vault-approle-mount"`
	RoleIDFile      *string `yaml:"role_id_file" flag:"vault-role-id-file"`
	SecretIDFile    *string `yaml:"secret_id_file" flag:"vault-secret-id-file"`
	SecretIDWrapped *bool   `yaml:"secret_id_wrapped" flag:"vault-secret-id-wrapped"`
}

// Log is the operational log on stderr (never the audit log).
type Log struct {
	Level  *string `yaml:"level" flag:"log-level"`
	Format *string `yaml:"format" flag:"log-format"`
}

// Ops serves /healthz, /readyz and /metrics on a listener of its own.
type Ops struct {
	Listen   *string `yaml:"listen" flag:"ops-listen"`
	AddrFile *string `yaml:"addr_file" flag:"ops-addr-file"`
}

// Sync pulls from a live FHIR R4 server on a schedule (app.SyncOptions).
type Sync struct {
	FHIRBase *string        `yaml:"fhir_base" flag:"sync-fhir-base"`
	Every    *time.Duration `yaml:"every" flag:"sync-every"`
	ClientID *string        `yaml:"client_id" flag:"sync-client-id"`
	Scope    *string        `yaml:"scope" flag:"sync-scope"`
	Tenant   *string        `yaml:"tenant" flag:"sync-tenant"`
}
