package app

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/internal/regularfile"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/clientaddr"
	"github.com/custos-mcp/custos/server/oauth"
	"github.com/custos-mcp/custos/server/ops"
)

// ErrInvalid is matched (errors.Is) by every Problems value: the Options
// cannot be served. Open returns Problems before it opens anything; the
// caller shows them (each names its option) and should not retry.
var ErrInvalid = errors.New("app: invalid options")

// Problem is one thing wrong with Options.
type Problem struct {
	// Key names the option: the dotted path of the configuration file
	// (http.listen, policy.keys[1].file), or a section ("vault") when the
	// problem is the section as a whole.
	Key string
	// Message says what is wrong and how to fix it. It never holds a
	// configured value that could be a secret.
	Message string
	// Missing reports that a required option is unset (as opposed to set
	// to something wrong).
	Missing bool
}

func (p Problem) String() string { return p.Key + ": " + p.Message }

// Problems is every problem Check found. As an error it matches ErrInvalid.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	if len(ps) == 1 {
		return lines[0]
	}
	return fmt.Sprintf("%d problems:\n  %s", len(ps), strings.Join(lines, "\n  "))
}

// Is makes errors.Is(ps, ErrInvalid) true.
func (ps Problems) Is(target error) bool { return target == ErrInvalid }

// CheckOptions control Check.
type CheckOptions struct {
	// Name names another option inside a message, given its key (a flag
	// such as --listen, or the key as the user wrote it). nil: the key.
	Name func(key string) string
	// Given reports whether an option was given explicitly: a given zero
	// is then checked like any other value instead of meaning "the
	// default". nil: nothing was given explicitly.
	Given func(key string) bool
	// SkipFiles skips checking that the files and directories named exist
	// and that this account may use them (for checking a configuration
	// away from its host).
	SkipFiles bool
}

// Validate checks o as Open does and returns Problems listing every
// problem, or nil.
func (o *Options) Validate() error {
	if ps := o.Check(CheckOptions{}); len(ps) > 0 {
		return ps
	}
	return nil
}

// Check returns every problem with o: ranges, formats, combinations,
// required options and (unless SkipFiles) the files and directories named:
// that they exist and that this process's account may read the files and
// write in the data, anchor and archive directories, as serve running as
// that account will. It opens nothing.
func (o *Options) Check(co CheckOptions) Problems {
	if co.Name == nil {
		co.Name = func(k string) string { return k }
	}
	if co.Given == nil {
		co.Given = func(string) bool { return false }
	}
	c := &checker{o: o, co: co}
	c.top()
	c.transport()
	c.policy()
	c.checkpoints()
	c.vault()
	c.ops()
	return c.ps
}

type checker struct {
	o  *Options
	co CheckOptions
	ps Problems
}

func (c *checker) add(key, format string, args ...any) {
	c.ps = append(c.ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) missing(key, format string, args ...any) {
	c.ps = append(c.ps, Problem{Key: key, Message: fmt.Sprintf(format, args...), Missing: true})
}

func (c *checker) name(key string) string { return c.co.Name(key) }

// set reports whether a numeric option is to be checked: not zero, or a
// zero that was asked for.
func (c *checker) set(key string, zero bool) bool { return !zero || c.co.Given(key) }

// StatError says why a path could not be used ("not found", "permission
// denied", the system's reason), without the path: problems name the option
// or the file, never echo a value. cmd's configuration layer words its own
// file problems with it too.
func StatError(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "not found"
	case errors.Is(err, os.ErrPermission):
		return "permission denied"
	}
	var nr *regularfile.NotRegularError
	if errors.As(err, &nr) {
		return "is " + nr.Kind + ", not a regular file"
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// file checks a file serve reads: it exists, is not a directory, and this
// process's account may read it (run as the service account, 'config
// check' said "valid" for a root-owned 0400 secret id file that serve then
// could not read).
func (c *checker) file(key, path string) {
	if path == "" || c.co.SkipFiles {
		return
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		c.add(key, "file %s", StatError(err))
	case st.IsDir():
		c.add(key, "is a directory, want a file")
	case denied(path, reads) != nil:
		c.add(key, "file not readable by this account (%s), which serve running as it could not read: "+
			"give its group read access (root:custos, mode 0640 or 0440, as in docs/operations.md)", account())
	}
}

// dir checks a directory serve reads (want lists) or creates files in
// (writesIn), as file does.
func (c *checker) dir(key, path string, want uint32) {
	if path == "" || c.co.SkipFiles {
		return
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		c.add(key, "directory %s", StatError(err))
	case !st.IsDir():
		c.add(key, "is not a directory")
	default:
		switch err := denied(path, want); {
		case err == nil:
		case errors.Is(err, syscall.EROFS) && want == writesIn:
			c.add(key, "directory on a read-only file system, where serve writes: mount it read-write "+
				"(under deploy/systemd, a drop-in with ReadWritePaths= for it)")
		case want == writesIn:
			c.add(key, "directory not writable by this account (%s), where serve running as it writes: "+
				"make it the account's (install -d -m 0700 -o custos -g custos, as in docs/operations.md)", account())
		default:
			c.add(key, "directory not readable by this account (%s), which serve running as it reads", account())
		}
	}
}

// account names this process's account in a problem.
func account() string { return fmt.Sprintf("uid %d", os.Geteuid()) }

// parentDir checks that a file the App will write can be created.
func (c *checker) parentDir(key, path string) {
	if path == "" || c.co.SkipFiles {
		return
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		c.add(key, "its directory does not exist")
	}
}

func (c *checker) positive(key string, d time.Duration) {
	if c.set(key, d == 0) && d <= 0 {
		c.add(key, "must be more than 0, got %s", d)
	}
}

func (c *checker) notNegative(key string, d time.Duration) {
	if d < 0 {
		c.add(key, "must not be negative, got %s", d)
	}
}

func (c *checker) hostPort(key, addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		c.add(key, "want HOST:PORT, e.g. 127.0.0.1:8443")
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		c.add(key, "port must be a number from 0 to 65535")
		return false
	}
	if strings.ContainsAny(host, " /") {
		c.add(key, "the host is not a host name or IP address")
		return false
	}
	return true
}

// url checks an absolute http(s) URL without credentials; with
// httpsUnlessLoopback, plain http only on a loopback host. It reports
// whether the URL parsed.
func (c *checker) url(key, s string, httpsUnlessLoopback bool) bool {
	if s == "" {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		c.add(key, "want an absolute https:// URL")
		return false
	}
	if u.User != nil {
		c.add(key, "must not carry credentials")
		return false
	}
	if httpsUnlessLoopback && u.Scheme == "http" && !server.IsLoopback(net.JoinHostPort(u.Hostname(), "1")) {
		c.add(key, "plain http:// only on a loopback host; want https://")
	}
	return true
}

func (c *checker) top() {
	o := c.o
	if o.DataDir == "" {
		c.missing("data_dir", "required: the directory holding catalog.db and audit.db")
	}
	if !c.co.SkipFiles && o.DataDir != "" {
		if _, err := os.Stat(o.DataDir); errors.Is(err, os.ErrNotExist) {
			c.add("data_dir", "directory not found; create it with 'custos import --data-dir DIR PATH'")
		} else {
			c.dir("data_dir", o.DataDir, writesIn)
		}
	}
	if c.set("page_size", o.PageSize == 0) && (o.PageSize < 1 || o.PageSize > MaxPageSize) {
		c.add("page_size", "must be from 1 to %d, got %d", MaxPageSize, o.PageSize)
	}
	if bg := o.BreakGlass; c.set("btg.max_ttl", bg.MaxTTL == 0) && (bg.MaxTTL <= 0 || bg.MaxTTL > btg.CeilingTTL) {
		c.add("btg.max_ttl", "must be more than 0 and at most %s (break-the-glass is emergency access), got %s", btg.CeilingTTL, bg.MaxTTL)
	}
	for i, role := range o.BreakGlass.GrantRoles {
		if role == "" || strings.ContainsAny(role, " \t,") {
			c.add(fmt.Sprintf("btg.grant_roles[%d]", i), "want a role (an OS group name) without spaces or commas")
		}
	}
	node, dep := o.Node, o.Checkpoints.Deployment
	if node != "" && !checkpoint.ValidOrigin("x/"+node+"/audit") || strings.Contains(node, "/") {
		c.add("node", "must not contain spaces, '+' or '/': it is part of the checkpoint origin <deployment>/<node>/audit")
	}
	if dep != "" && !checkpoint.ValidOrigin(dep+"/x/audit") {
		c.add("audit.deployment", "must not contain spaces or '+': it is part of the checkpoint origin <deployment>/<node>/audit")
	}
}

func (c *checker) transport() {
	o := c.o
	switch {
	case o.Stdio != nil && o.HTTP != nil:
		c.add("stdio.enabled", "choose exactly one of %s or %s", c.name("stdio.enabled"), c.name("http.listen"))
	case o.Stdio == nil && o.HTTP == nil:
		c.missing("http.listen", "required: choose exactly one of %s (Streamable HTTP) or %s", c.name("http.listen"), c.name("stdio.enabled"))
	}
	if s := o.Stdio; s != nil {
		if s.PrincipalFile == "" {
			c.missing("stdio.principal_file", "required with %s (or $CUSTOS_PRINCIPAL_FILE)", c.name("stdio.enabled"))
		}
		c.file("stdio.principal_file", s.PrincipalFile)
	}
	if o.HTTP != nil {
		c.http(o.HTTP)
	}
}

func (c *checker) http(h *HTTPOptions) {
	tlsOn := h.CertFile != "" || h.KeyFile != "" || h.TLSConfig != nil
	if h.Listen == "" {
		c.missing("http.listen", "required: HOST:PORT, e.g. 127.0.0.1:8443")
	} else if c.hostPort("http.listen", h.Listen) {
		switch {
		case !tlsOn && !server.IsLoopback(h.Listen):
			c.add("http.listen", "plain HTTP is only served on a loopback address (127.0.0.1:PORT or [::1]:PORT) and only with dev; set %s and %s", c.name("tls.cert_file"), c.name("tls.key_file"))
		case !tlsOn && !c.o.Dev:
			c.add("http.listen", "plain HTTP is only served with %s, on a loopback address; set %s and %s", c.name("dev"), c.name("tls.cert_file"), c.name("tls.key_file"))
		}
	}
	c.parentDir("http.addr_file", h.AddrFile)

	// Identity: exactly one source.
	tokens := h.TokensFile != "" || h.Tokens != nil
	switch {
	case tokens && h.OAuth != nil:
		c.add("http.tokens_file", "choose %s (dev tokens) or oauth.* (an OAuth 2.1 issuer), not both", c.name("http.tokens_file"))
	case !tokens && h.OAuth == nil:
		c.missing("http.tokens_file", "required with %s: dev tokens (%s, see 'custos token new') or oauth.issuer, oauth.jwks_url and oauth.audience", c.name("http.listen"), c.name("http.tokens_file"))
	case h.TokensFile != "" && h.Tokens != nil:
		c.add("http.tokens_file", "set either a token file or loaded tokens, not both")
	}
	c.file("http.tokens_file", h.TokensFile)
	if h.OAuth != nil {
		c.oauth(h)
	}

	// TLS.
	c.file("tls.cert_file", h.CertFile)
	c.file("tls.key_file", h.KeyFile)
	switch {
	case h.CertFile != "" && h.KeyFile == "":
		c.add("tls.cert_file", "needs %s too", c.name("tls.key_file"))
	case h.KeyFile != "" && h.CertFile == "":
		c.add("tls.key_file", "needs %s too", c.name("tls.cert_file"))
	}
	if h.TLSConfig != nil && h.CertFile != "" {
		c.add("tls.cert_file", "set either certificate files or a TLS configuration, not both")
	}

	// Limits.
	if r := h.RateLimit.PerSecond; r < 0 || math.IsNaN(r) {
		c.add("http.rate_limit", "must be 0 (off) or more, got %v", r)
	}
	if b := h.RateLimit.Burst; c.set("http.rate_burst", b == 0) && b < 1 {
		c.add("http.rate_burst", "must be 1 or more, got %d", b)
	}
	if n := h.MaxSessions; c.set("http.max_sessions_per_principal", n == 0) && n < 1 {
		c.add("http.max_sessions_per_principal", "must be 1 or more, got %d", n)
	}
	if n := h.Refusals.PerSource; c.set("http.refusals_per_source", n == 0) && n < 1 {
		c.add("http.refusals_per_source", "must be 1 or more, got %d", n)
	}
	c.positive("http.refusal_window", h.Refusals.Window)
	if _, err := clientaddr.ParseProxies(h.TrustedProxies); err != nil {
		c.add("http.trusted_proxies", "%s", strings.TrimPrefix(err.Error(), clientaddr.ErrBadProxy.Error()+": "))
	}
	if _, err := clientaddr.ParseHeader(h.TrustedProxyHeader); err != nil {
		c.add("http.trusted_proxy_header", "%s", strings.TrimPrefix(err.Error(), "clientaddr: "))
	} else if h.TrustedProxyHeader != "" && len(h.TrustedProxies) == 0 {
		c.add("http.trusted_proxy_header", "is only used with %s", c.name("http.trusted_proxies"))
	}
	s := h.Server
	c.positive("http.read_header_timeout", s.ReadHeaderTimeout)
	c.positive("http.read_timeout", s.ReadTimeout)
	c.notNegative("http.write_timeout", s.WriteTimeout)
	c.positive("http.idle_timeout", s.IdleTimeout)
	c.positive("http.session_idle_timeout", h.SessionIdle)
	if s.ReadHeaderTimeout > 0 && s.ReadTimeout > 0 && s.ReadHeaderTimeout > s.ReadTimeout {
		c.add("http.read_header_timeout", "must not exceed %s (%s)", c.name("http.read_timeout"), s.ReadTimeout)
	}
	if n := s.MaxHeaderBytes; c.set("http.max_header_bytes", n == 0) && (n < MinHeaderBytes || n > MaxHeaderBytesLimit) {
		c.add("http.max_header_bytes", "must be from %d to %d, got %d", MinHeaderBytes, MaxHeaderBytesLimit, n)
	}
	if n := s.MaxConnections; c.set("http.max_connections", n == 0) && n < 1 {
		c.add("http.max_connections", "must be 1 or more, got %d", n)
	}
	if n := s.MaxRequestBodyBytes; c.set("http.max_request_body_bytes", n == 0) && (n < MinRequestBodyBytes || n > MaxRequestBodyLimit) {
		c.add("http.max_request_body_bytes", "must be from %d to %d (the MCP handler's own limit), got %d", MinRequestBodyBytes, MaxRequestBodyLimit, n)
	}
}

func (c *checker) oauth(h *HTTPOptions) {
	oc := h.OAuth
	for _, e := range []struct{ key, val string }{{"oauth.issuer", oc.Issuer}, {"oauth.jwks_url", oc.JWKSURL}, {"oauth.audience", oc.Audience}} {
		if e.val == "" {
			c.add(e.key, "required with the other oauth fields: OAuth needs %s, %s and %s (this server's canonical URL, e.g. https://HOST:PORT/mcp)",
				c.name("oauth.issuer"), c.name("oauth.jwks_url"), c.name("oauth.audience"))
		}
	}
	c.url("oauth.issuer", oc.Issuer, true)
	c.url("oauth.jwks_url", oc.JWKSURL, true)
	if c.url("oauth.audience", oc.Audience, true) {
		if u, _ := url.Parse(oc.Audience); u.Fragment != "" || strings.HasSuffix(oc.Audience, "#") {
			c.add("oauth.audience", "must not have a fragment")
		}
	}
	for _, e := range []struct{ key, val string }{
		{"oauth.scopes.list", oc.ScopeList}, {"oauth.scopes.read", oc.ScopeRead},
		{"oauth.claims.roles", oc.RolesClaim}, {"oauth.claims.tenant", oc.TenantClaim},
		{"oauth.claims.patients", oc.PatientsClaim}, {"oauth.claims.purpose_of_use", oc.PurposeClaim},
		{"oauth.purpose_header", oc.PurposeHeader},
	} {
		if !c.set(e.key, e.val == "") {
			continue
		}
		if e.val == "" || len(e.val) > MaxOAuthNameSize || strings.ContainsAny(e.val, " \t\r\n\"") {
			c.add(e.key, "want a non-empty name without spaces or quotes")
		}
	}
	if d := oc.JWKSMaxStaleness; c.set("oauth.jwks_max_staleness", d == 0) && d <= cmp.Or(oc.JWKSRefresh, oauth.DefaultJWKSRefresh) {
		c.add("oauth.jwks_max_staleness", "must be more than the JWKS refresh interval (%s), got %s: the keys would be refused before a refresh was tried",
			cmp.Or(oc.JWKSRefresh, oauth.DefaultJWKSRefresh), d)
	}
	// Optional: "" reads no such claim.
	if v := oc.ClientClaim; len(v) > MaxOAuthNameSize || strings.ContainsAny(v, " \t\r\n\"") {
		c.add("oauth.claims.client", "want a name without spaces or quotes, or nothing")
	} else if why := oauth.ClientClaimProblem(*oc); why != "" {
		c.add("oauth.claims.client", "%s", why)
	}
}

func (c *checker) policy() {
	o, p := c.o, c.o.Policy
	c.dir("policy.dir", p.Dir, lists)
	c.file("policy.bundle", p.Bundle)
	if p.Dir != "" && p.Bundle != "" {
		c.add("policy.dir", "choose %s or %s, not both", c.name("policy.dir"), c.name("policy.bundle"))
	}
	if p.Dir != "" && !o.Dev {
		c.add("policy.dir", "loads an unsigned policy, for development only (%s); in production use %s with %s", c.name("dev"), c.name("policy.bundle"), c.name("policy.keys"))
	}
	if p.Bundle != "" && len(p.Keys) == 0 && !p.VaultKeys {
		c.add("policy.bundle", "needs %s or %s: signature verification is mandatory", c.name("policy.keys"), c.name("policy.vault_key"))
	}
	if p.Bundle == "" && (len(p.Keys) > 0 || p.VaultKeys) {
		key := "policy.keys"
		if len(p.Keys) == 0 {
			key = "policy.vault_key"
		}
		c.add(key, "is only used with %s", c.name("policy.bundle"))
	}
	if p.MinSequence != 0 && p.Bundle == "" {
		c.add("policy.min_sequence", "is only used with %s (a directory policy has no sequence claim)", c.name("policy.bundle"))
	}
	if p.MinSequence < 0 || p.MinSequence > policy.MaxSequence {
		c.add("policy.min_sequence", "want a whole number from 1 to %d (the largest sequence claim), or 0 for no floor; not %d", int64(policy.MaxSequence), p.MinSequence)
	}
	if p.VaultKeys && o.Dev {
		c.add("policy.vault_key", "needs Vault, not %s", c.name("dev"))
	}
	ids := map[string]bool{}
	for i, k := range p.Keys {
		at := fmt.Sprintf("policy.keys[%d]", i)
		switch {
		case k.ID == "" || strings.ContainsAny(k.ID, "= \t"):
			c.add(at+".id", "want a key id without '=' or spaces")
		case ids[k.ID]:
			c.add(at+".id", "the key id appears twice")
		}
		ids[k.ID] = true
		if k.File == "" {
			c.add(at+".file", "want the PEM file of the public key")
		}
		c.file(at+".file", k.File)
	}
}

func (c *checker) checkpoints() {
	o, cp := c.o, c.o.Checkpoints
	c.dir("audit.anchor_dir", cp.AnchorDir, writesIn)
	if !o.Dev && cp.AnchorDir == "" {
		c.missing("audit.anchor_dir", "required without %s: signed checkpoints must also be written outside the data directory, so that a rolled-back audit.db is caught at startup", c.name("dev"))
	}
	if cp.AnchorDir != "" && o.DataDir != "" && filepath.Clean(cp.AnchorDir) == filepath.Clean(o.DataDir) {
		c.add("audit.anchor_dir", "must not be the data directory: it is the copy a rollback of audit.db cannot reach")
	}
	if c.set("audit.checkpoint_every", cp.Every == 0) && cp.Every < 1 {
		c.add("audit.checkpoint_every", "must be 1 or more, got %d", cp.Every)
	}
	c.positive("audit.checkpoint_interval", cp.Interval)
	c.positive("audit.retention", o.AuditRetention)
	d := c.o.AuditDisk
	if c.set("audit.disk_low_watermark", d.LowWatermark == 0) && d.LowWatermark < 1 {
		c.add("audit.disk_low_watermark", "must be 1 byte or more, got %d", d.LowWatermark)
	}
	if c.set("audit.disk_reserve", d.Reserve == 0) && d.Reserve < 1 {
		c.add("audit.disk_reserve", "must be 1 byte or more, got %d", d.Reserve)
	}
	if w := cmpOr(d.LowWatermark, ops.DefaultDiskWatermark); d.Reserve > w {
		c.add("audit.disk_reserve", "must not exceed %s (%d bytes): requests are refused below the reserve, and the alert must come first", c.name("audit.disk_low_watermark"), w)
	}
	c.scrub()
	if c.set("audit.auditor_cpu", c.o.Admin.AuditorCPU == 0) && !(c.o.Admin.AuditorCPU > 0) {
		c.add("audit.auditor_cpu", "must be more than 0 (a share of one CPU; 1 or more: not paced), got %g", c.o.Admin.AuditorCPU)
	}
	c.sync()
	c.segments()
}

// sync checks the scheduled FHIR sync.
func (c *checker) sync() {
	sy := c.o.Sync
	if sy.FHIRBase == "" {
		for _, k := range []string{"sync.every", "sync.client_id", "sync.scope", "sync.tenant"} {
			if c.co.Given(k) {
				c.add(k, "needs %s", c.name("sync.fhir_base"))
			}
		}
		return
	}
	if sy.Tenant == "" {
		c.missing("sync.tenant", "required with %s: the tenant the synced resources belong to", c.name("sync.fhir_base"))
	}
	if _, err := fhirsync.ParseBase(sy.FHIRBase); err != nil {
		c.add("sync.fhir_base", "want http(s)://HOST[:PORT][/PATH] without credentials, a query or a fragment")
	}
	if c.set("sync.every", sy.Every == 0) && sy.Every < MinSyncEvery {
		c.add("sync.every", "must be %s or more, got %s", MinSyncEvery, sy.Every)
	}
	if sy.Scope != "" {
		switch {
		case sy.ClientID == "":
			c.add("sync.scope", "needs %s: the scope is asked for with the client's token", c.name("sync.client_id"))
		case !fhirsync.ValidScope(sy.Scope):
			c.add("sync.scope", "want scope tokens (printable ASCII, no quote or backslash) separated by single spaces")
		}
	}
}

// segments checks the audit log's rollover limits and its archive
// directory: separate from the data and anchor directories.
func (c *checker) segments() {
	sg := c.o.AuditSegments
	if sg.RollSize != 0 && sg.RollSize < MinAuditRollSize {
		c.add("audit.roll_size", "must be %d bytes or more, got %d", MinAuditRollSize, sg.RollSize)
	}
	if sg.RollPeriod != 0 && sg.RollPeriod < MinAuditRollPeriod {
		c.add("audit.roll_period", "must be %s or more, got %s", MinAuditRollPeriod, sg.RollPeriod)
	}
	c.dir("audit.archive_dir", sg.ArchiveDir, writesIn)
	if sg.ArchiveDir != "" {
		a := filepath.Clean(sg.ArchiveDir)
		switch {
		case c.o.DataDir != "" && (a == filepath.Clean(c.o.DataDir) || a == filepath.Clean(audit.SealedDir(filepath.Join(c.o.DataDir, AuditFile)))):
			c.add("audit.archive_dir", "must not be the data directory or its audit.sealed: the archive is separate storage")
		case c.o.Checkpoints.AnchorDir != "" && a == filepath.Clean(c.o.Checkpoints.AnchorDir):
			c.add("audit.archive_dir", "must not be the anchor directory")
		}
	}
}

// scrub checks the scrubber's schedule: a pass at most every second, and
// a positive rate.
func (c *checker) scrub() {
	sc := c.o.Scrub
	if c.set("audit.scrub_interval", sc.Interval == 0) && sc.Interval < time.Second {
		c.add("audit.scrub_interval", "must be 1s or more, got %s", sc.Interval)
	}
	if c.set("audit.scrub_rate", sc.Rate == 0) && sc.Rate < 1 {
		c.add("audit.scrub_rate", "must be 1 or more records per second, got %d", sc.Rate)
	}
}

func cmpOr(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

func (c *checker) vault() {
	o, v := c.o, c.o.Vault
	switch {
	case o.Dev && v != nil:
		c.add("vault", "cannot be combined with %s: dev keys are ephemeral; drop %s to use Vault", c.name("dev"), c.name("dev"))
		return
	case o.Dev:
		return
	case v == nil || v.Address == "":
		c.missing("vault.address", "required without %s (or $VAULT_ADDR): the keys come from Vault", c.name("dev"))
		if v == nil {
			return
		}
	default:
		c.url("vault.address", v.Address, true)
	}
	if v.TLS != nil {
		c.file("vault.ca_cert_file", v.TLS.CACert)
	}
	if ar := v.AppRole; ar != nil {
		c.file("vault.approle.role_id_file", ar.RoleIDFile)
		c.file("vault.approle.secret_id_file", ar.SecretIDFile)
		if mode, exposed := secrets.SecretFileExposed(ar.SecretIDFile); exposed && !c.co.SkipFiles {
			c.add("vault.approle.secret_id_file", "readable by every local user (mode %s): whoever reads it logs in to Vault as custos; "+
				"make it readable by custos only (chmod 0440, owner root:custos)", mode)
		}
		both := fmt.Sprintf("AppRole needs both %s and %s", c.name("vault.approle.role_id_file"), c.name("vault.approle.secret_id_file"))
		switch {
		case ar.RoleIDFile != "" && ar.SecretIDFile == "":
			c.add("vault.approle.role_id_file", "%s", both)
		case ar.SecretIDFile != "" && ar.RoleIDFile == "":
			c.add("vault.approle.secret_id_file", "%s", both)
		}
		if ar.Wrapped && ar.SecretIDFile == "" {
			c.add("vault.approle.secret_id_wrapped", "needs %s", c.name("vault.approle.secret_id_file"))
		}
	}
	l := v.Layout
	for _, e := range []struct{ key, val string }{
		{"vault.kv_mount", l.KVMount}, {"vault.cursor_key", l.CursorKeyPath}, {"vault.audit_key", l.AuditKeyPath},
		{"vault.transit_mount", l.TransitMount}, {"vault.signing_key", l.SigningKey}, {"vault.blob_key", l.BlobKey},
	} {
		if !c.set(e.key, e.val == "") {
			continue
		}
		if s := e.val; strings.TrimSpace(s) == "" || strings.ContainsAny(s, " \t\r\n") || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "..") {
			c.add(e.key, "want a Vault path such as custos/cursor-key: no spaces, no leading or trailing '/', no '..'")
		}
	}
	c.positive("vault.timeout", v.RequestTimeout)
	c.positive("vault.key_refresh", v.RefreshInterval)
	c.positive("vault.key_max_staleness", v.MaxStaleness)
	if v.RefreshInterval > 0 && v.MaxStaleness > 0 && v.RefreshInterval >= v.MaxStaleness {
		c.add("vault.key_refresh", "must be shorter than %s (%s): keys must be re-read before they go stale", c.name("vault.key_max_staleness"), v.MaxStaleness)
	}
}

func (c *checker) ops() {
	o := c.o.Ops
	if o.Listen != "" {
		c.hostPort("ops.listen", o.Listen)
		// Port 0 picks a free port for each listener: the same string then
		// names two different addresses.
		if h := c.o.HTTP; h != nil && o.Listen == h.Listen {
			if _, port, err := net.SplitHostPort(o.Listen); err != nil || port != "0" {
				c.add("ops.listen", "must differ from %s: the ops endpoints have a listener of their own", c.name("http.listen"))
			}
		}
	} else if o.AddrFile != "" {
		c.add("ops.addr_file", "is only used with %s", c.name("ops.listen"))
	}
	c.parentDir("ops.addr_file", o.AddrFile)
}
