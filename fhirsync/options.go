package fhirsync

import (
	"context"
	"crypto"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/custos-mcp/custos/fhirin"
)

// Importer loads a staging directory into the catalog, all or nothing.
//
// manifest is the path of the directory's manifest.json, a FHIR Bulk Data
// completion manifest whose output and deleted urls are file names
// relative to it: <Type>.NNN.ndjson (one resource per line, of the file's
// type) and deleted.NNN.ndjson (one Bundle per line whose entries carry
// request.method DELETE and request.url "Type/id"). Read the directory
// through the manifest: deleted files are not named by a resource type.
// full means the directory holds every resource the server has: resources
// of this FHIR base missing from it are retired. Import must return an
// error, and change nothing, if it cannot import everything; else what it
// did with the deletions.
type Importer interface {
	Import(ctx context.Context, manifest string, full bool) (Imported, error)
}

// Imported is what an import did with the staged deletions: the server
// lists a deletion whether or not custos ever held the resource (one of a
// type not synced, or created and deleted between two syncs), so the
// count staged says nothing of what left the catalog.
type Imported struct {
	// Deleted: deletions that retired a resource the catalog held.
	Deleted int
	// DeletesIgnored: deletions of resources the catalog did not hold
	// (never imported, or retired already): nothing changed for them.
	DeletesIgnored int
	// Skipped: the entries of the staged Bundles the import left out on
	// purpose (fhirin.Options.Skipped); they count in Result.Skipped.
	Skipped fhirin.Skipped
}

// BinaryCatalog may be implemented by an Importer that can tell which
// Binaries of this FHIR base are live in the catalog it imports into.
// LiveBinaries returns the ids (the server's Binary ids) of ids that are
// live there; an error fails the sync (ErrImport). An incremental sync
// asks it about the Binaries staged attachments name and the staged files
// lack, and fetches only those not live: the reader accepts a link to a
// Binary live in the linking resource's compartment (fhirin's
// Options.StoredBinary), and refuses, as before, one live elsewhere. A
// full sync fetches every such Binary again (the way to refresh a Binary
// changed on the server under the same id, which an export without
// Binaries never shows); so does every sync of an Importer without it.
type BinaryCatalog interface {
	LiveBinaries(ctx context.Context, ids []string) (map[string]bool, error)
}

// ImporterFunc adapts a function to Importer.
type ImporterFunc func(ctx context.Context, manifest string, full bool) (Imported, error)

// Import calls f.
func (f ImporterFunc) Import(ctx context.Context, dir string, full bool) (Imported, error) {
	return f(ctx, dir, full)
}

// Recorder writes the audit records of a sync and returns only when the
// record is durable. An error makes the sync fail closed (ErrNotRecorded).
type Recorder interface {
	RecordSync(ctx context.Context, e Event) error
}

// Progress is reported while a sync runs (for a progress line on stderr).
type Progress struct {
	Phase     string // "capability", "auth", "kick-off", "poll", "download", "search", "binaries", "import"
	Detail    string // e.g. the server's X-Progress, or the resource type
	Resources int    // resources fetched so far
}

// Defaults of Options.
const (
	DefaultPageSize      = 1000
	DefaultMaxAttempts   = 6
	DefaultBaseDelay     = 500 * time.Millisecond
	DefaultMaxDelay      = 30 * time.Second
	DefaultPollTimeout   = time.Hour
	DefaultMaxLine       = fhirin.DefaultMaxLine // what custos import reads: a 64 MiB blob in base64, with its resource
	DefaultHeaderTimeout = time.Minute
	DefaultBinaryFetches = 4
)

// Options configure a Syncer. Zero values take the defaults named.
type Options struct {
	// Base is the FHIR base URL (http(s)://host[:port]/path). It must not
	// carry user information, a query or a fragment. Required.
	Base string
	// Tenant is passed to the importer's caller only through the audit
	// record; "" means the default tenant.
	Tenant string
	// StateDir holds the state files (one per base) and, unless
	// StagingDir is set, the staging directories. Required.
	StateDir string
	// StagingDir is where staging directories are created; "" = StateDir.
	// A staging directory is removed when the sync ends.
	StagingDir string
	// ClientID is the SMART Backend Services client id. "" means the server
	// needs no authorization (its CapabilityStatement and smart
	// configuration name no token endpoint); a server that asks for one then
	// fails with ErrAuth.
	ClientID string
	// Key signs the client assertion: an ECDSA P-384 key (ES384) or an RSA
	// key (RS384), kept where it lives (Vault Transit, or a local key with
	// --dev). Required with ClientID.
	Key crypto.Signer
	// KeyID is the kid of the client assertion's header, as registered in
	// the server's JWKS for the client.
	KeyID string
	// Scope requested with the token (needs ClientID; ValidScope); "" =
	// SMART v1's "system/*.read", or v2's "system/*.rs" when the server's
	// smart-configuration shows it takes only v2 scopes
	// (smartConfiguration.defaultScope).
	Scope string
	// Importer receives the staging directory. Required.
	Importer Importer
	// Recorder audits each sync. Required.
	Recorder Recorder
	// Full forces a full sync (everything fetched; missing resources are
	// retired) even when a previous state exists.
	Full bool
	// Types restricts the sync to these resource types; empty = every type
	// the CapabilityStatement lists as searchable (REST) or everything the
	// export yields (Bulk). A restricted sync never retires anything (the
	// importer gets full=false: it cannot know what the server holds of
	// other types), a Bulk output of another type is refused, and its state
	// covers only these types: a later sync asking for others is full.
	Types []string
	// NoBulk forces the REST search even if the server offers $export.
	NoBulk bool
	// Group, when set and the server offers Group-level $export, exports
	// that Group (its patients' compartments) instead of the whole system.
	Group string
	// PageSize is the _count of REST searches; 0 = DefaultPageSize.
	PageSize int
	// MaxAttempts bounds the tries of one request (429/5xx/transport
	// errors); 0 = DefaultMaxAttempts.
	MaxAttempts int
	// BaseDelay and MaxDelay shape the backoff: attempt n waits a random
	// duration in [d/2, d] with d = min(BaseDelay·2^n, MaxDelay), or the
	// server's Retry-After if that is longer (capped at MaxDelay).
	BaseDelay, MaxDelay time.Duration
	// PollTimeout bounds how long a Bulk export may run; 0 =
	// DefaultPollTimeout. The status poll waits the server's Retry-After
	// whole (not capped at MaxDelay); a wait that would end past this
	// deadline fails the sync at once.
	PollTimeout time.Duration
	// MaxLine bounds one NDJSON line (one resource); 0 = DefaultMaxLine.
	MaxLine int
	// BinaryFetches is how many Binaries the staged attachments name but
	// the export lacks are fetched at once (fetchBinaries); 0 =
	// DefaultBinaryFetches. Each holds at most MaxLine bytes in memory
	// until it is staged.
	BinaryFetches int
	// HeaderTimeout bounds the wait for each response's headers (through
	// the transport, only when HTTPClient is nil) and, with any
	// HTTPClient, for each read of a response body: a body, such as a
	// large NDJSON file, streams as long as it flows, and one that sends
	// nothing for HeaderTimeout is abandoned (retried like a dropped
	// connection); 0 = DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// HTTPClient is the transport (TLS settings); nil = a client with
	// HeaderTimeout and the environment's proxy settings. The Syncer uses a
	// copy whose CheckRedirect refuses a redirect to another origin of a
	// request that carries a credential (see checkRedirect), then defers
	// to this client's own CheckRedirect.
	HTTPClient *http.Client
	// Logger receives the operational log (never a token or a payload);
	// nil discards.
	Logger *slog.Logger
	// Space, when set, is asked whether the volume has room for need more
	// bytes: with 0 before anything is staged and after every 16 MiB
	// staged, and with the bytes staged before the import (which writes
	// about as much again into the catalog while the staged files are
	// still there). An error stops the sync (ErrSpace), nothing is
	// imported and the staged files go. The staging directory shares the
	// audit log's volume; custos's check is its low watermark, so that a
	// large sync never eats the room the audit records need.
	Space func(need uint64) error
	// Progress, when set, is called as the sync advances.
	Progress func(Progress)
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

func (o *Options) validate() error {
	base, err := ParseBase(o.Base)
	if err != nil {
		return err
	}
	o.Base = base.String()
	switch {
	case o.StateDir == "":
		return fmt.Errorf("%w: no state directory", ErrBadConfig)
	case o.Importer == nil:
		return fmt.Errorf("%w: no importer", ErrBadConfig)
	case o.Recorder == nil:
		return fmt.Errorf("%w: no audit recorder", ErrBadConfig)
	case o.ClientID != "" && o.Key == nil:
		return fmt.Errorf("%w: client id %q without a signing key", ErrBadConfig, o.ClientID)
	case o.PageSize < 0 || o.MaxAttempts < 0 || o.BaseDelay < 0 || o.MaxDelay < 0 || o.PollTimeout < 0 || o.MaxLine < 0 || o.HeaderTimeout < 0 || o.BinaryFetches < 0:
		return fmt.Errorf("%w: negative option", ErrBadConfig)
	}
	if o.Key != nil {
		if _, err := assertionAlg(o.Key); err != nil {
			return err
		}
	}
	if o.Scope != "" {
		if o.ClientID == "" {
			return fmt.Errorf("%w: a scope without a client id (the scope is asked for with the token of --client-id)", ErrBadConfig)
		}
		if !ValidScope(o.Scope) {
			return fmt.Errorf("%w: the scope is not one or more scope tokens separated by single spaces (RFC 6749 section 3.3: printable ASCII, no quote or backslash)", ErrBadConfig)
		}
	}
	if strings.ContainsAny(o.Group, "/?#% ") {
		return fmt.Errorf("%w: group id %q is not a FHIR id", ErrBadConfig, o.Group)
	}
	for _, t := range o.Types {
		if !validType(t) {
			return fmt.Errorf("%w: %q is not a FHIR resource type name", ErrBadConfig, t)
		}
	}
	o.Types = slices.Compact(slices.Sorted(slices.Values(o.Types)))
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.BaseDelay, DefaultBaseDelay)
	def(&o.MaxDelay, DefaultMaxDelay)
	def(&o.PollTimeout, DefaultPollTimeout)
	def(&o.HeaderTimeout, DefaultHeaderTimeout)
	if o.PageSize == 0 {
		o.PageSize = DefaultPageSize
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxLine == 0 {
		o.MaxLine = DefaultMaxLine
	}
	if o.BinaryFetches == 0 {
		o.BinaryFetches = DefaultBinaryFetches
	}
	if o.StagingDir == "" {
		o.StagingDir = o.StateDir
	}
	if o.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = o.HeaderTimeout
		tr.MaxIdleConnsPerHost = max(tr.MaxIdleConnsPerHost, o.BinaryFetches) // the concurrent Binary reads reuse their connections
		o.HTTPClient = &http.Client{Transport: tr}
	}
	// A copy whose redirects never carry a credential to another origin
	// (checkRedirect); the caller's client is left as it was.
	hc := *o.HTTPClient
	hc.CheckRedirect = checkRedirect(o.HTTPClient.CheckRedirect)
	o.HTTPClient = &hc
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = func(Progress) {}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// ParseBase checks a FHIR base URL: http or https, a host, no user
// information, query or fragment (secrets never travel in URLs). The
// returned URL has no trailing slash.
func ParseBase(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: FHIR base must be http(s)://HOST[:PORT][/PATH]", ErrBadConfig)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return nil, fmt.Errorf("%w: FHIR base must not carry credentials, a query or a fragment", ErrBadConfig)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// validType reports whether t looks like a FHIR resource type name
// (an uppercase letter, then letters).
func validType(t string) bool {
	if t == "" || t[0] < 'A' || t[0] > 'Z' || len(t) > 64 {
		return false
	}
	for _, c := range t {
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

// ValidScope reports whether s is an OAuth scope (RFC 6749 section 3.3):
// scope tokens of printable ASCII other than space, '"' and '\\', separated
// by single spaces.
func ValidScope(s string) bool {
	for _, tok := range strings.Split(s, " ") {
		if tok == "" {
			return false
		}
		for _, c := range []byte(tok) {
			if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
				return false
			}
		}
	}
	return true
}
