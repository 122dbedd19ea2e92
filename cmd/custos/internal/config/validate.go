package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/custos-mcp/custos/audit/checkpoint"
)

// Options control Validate.
type Options struct {
	// Complete requires a configuration serve can start from on its own:
	// data_dir, exactly one of stdio.enabled and http.listen, an identity
	// source, and without dev Vault (address from the file or $VAULT_ADDR)
	// and audit.anchor_dir. 'custos config check' sets it; serve does not,
	// because its own checks cover what may also come from the environment.
	Complete bool
	// CheckFiles checks that every file and directory named exists and is
	// of the right kind. It never reads them.
	CheckFiles bool
	// Getenv reads $VAULT_ADDR for Complete; nil means os.Getenv.
	Getenv func(string) string
}

// Limits of the values Validate accepts.
const (
	MaxPageSize           = 500     // server.Config.PageSize
	MaxHeaderBytesLimit   = 1 << 20 // http.max_header_bytes
	MinHeaderBytes        = 4 << 10
	MaxRequestBodyLimit   = 1 << 20 // the MCP handler's own body cap
	MinRequestBodyBytes   = 4 << 10
	MaxOAuthClaimNameSize = 256
)

// Validate checks ranges, formats and combinations, and with
// Options.CheckFiles the files named; it returns Problems listing every
// problem, or nil. Unset fields take the flag defaults and are not
// themselves reported unless Options.Complete requires them.
func (f *File) Validate(o Options) error {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	v := &validator{f: f, o: o}
	v.top()
	v.transport()
	v.tls()
	v.oauth()
	v.policy()
	v.audit()
	v.vault()
	v.log()
	v.ops()
	return v.ps.orNil()
}

type validator struct {
	f  *File
	o  Options
	ps Problems
}

// add reports a problem with the field at path: under its flag's name when
// the value came from the command line, else with the file's line.
func (v *validator) add(path, format string, args ...any) {
	p := Problem{Field: path, Message: fmt.Sprintf(format, args...)}
	if fl, ok := FlagFor(path); ok {
		p.Flag = "--" + fl
	}
	if v.f.fromFlag[path] {
		p.fromFlag = true
	} else {
		p.File, p.Line = v.f.name, v.f.lines[path]
	}
	v.ps = append(v.ps, p)
}

// ref names a field in a message: its flag when it came from the command
// line or there is no file, its path when it is in the file or only the
// file is in play, both when it is unset and settings are mixed.
func (v *validator) ref(path string) string {
	fl, _ := FlagFor(path)
	switch {
	case v.f.fromFlag[path] || v.f.name == "":
		return "--" + fl
	case v.f.lines[path] > 0 || len(v.f.fromFlag) == 0:
		return path
	}
	return path + " (--" + fl + ")"
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func boolean(p *bool) bool { return p != nil && *p }

func (v *validator) dev() bool { return boolean(v.f.Dev) }

func (v *validator) listen() string { return str(v.f.HTTP.Listen) }

func (v *validator) tlsOn() bool { return str(v.f.TLS.CertFile) != "" || str(v.f.TLS.KeyFile) != "" }

func (v *validator) nonEmpty(path string, p *string) {
	if p != nil && strings.TrimSpace(*p) == "" {
		v.add(path, "must not be empty (leave the field out for the default)")
	}
}

func (v *validator) file(path string, p *string) {
	v.nonEmpty(path, p)
	if p == nil || *p == "" || !v.o.CheckFiles {
		return
	}
	st, err := os.Stat(*p)
	switch {
	case err != nil:
		v.add(path, "%s", fileError(err))
	case st.IsDir():
		v.add(path, "is a directory, want a file")
	}
}

func (v *validator) dir(path string, p *string) {
	v.nonEmpty(path, p)
	if p == nil || *p == "" || !v.o.CheckFiles {
		return
	}
	st, err := os.Stat(*p)
	switch {
	case err != nil:
		v.add(path, "directory %s", strings.TrimPrefix(fileError(err), "file "))
	case !st.IsDir():
		v.add(path, "is not a directory")
	}
}

// parentDir checks that a file serve will write can be created.
func (v *validator) parentDir(path string, p *string) {
	v.nonEmpty(path, p)
	if p == nil || *p == "" || !v.o.CheckFiles {
		return
	}
	d := dirOf(*p)
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		v.add(path, "its directory does not exist")
	}
}

func dirOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	switch {
	case i < 0:
		return "."
	case i == 0:
		return "/"
	}
	return p[:i]
}

func (v *validator) positive(path string, p *time.Duration) {
	if p != nil && *p <= 0 {
		v.add(path, "must be more than 0, got %s", *p)
	}
}

func (v *validator) notNegative(path string, p *time.Duration) {
	if p != nil && *p < 0 {
		v.add(path, "must not be negative, got %s", *p)
	}
}

func (v *validator) hostPort(path, addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add(path, "want HOST:PORT, e.g. 127.0.0.1:8443")
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.add(path, "port must be a number from 0 to 65535")
		return false
	}
	if strings.ContainsAny(host, " /") {
		v.add(path, "the host is not a host name or IP address")
		return false
	}
	return true
}

func (v *validator) top() {
	f := v.f
	// serve itself explains a missing data directory (and how to create
	// one); config check looks for it.
	if v.o.Complete {
		v.dir("data_dir", f.DataDir)
	} else {
		v.nonEmpty("data_dir", f.DataDir)
	}
	if v.o.Complete && str(f.DataDir) == "" {
		v.add("data_dir", "required: the directory holding catalog.db and audit.db")
	}
	if f.PageSize != nil && (*f.PageSize < 1 || *f.PageSize > MaxPageSize) {
		v.add("page_size", "must be from 1 to %d, got %d", MaxPageSize, *f.PageSize)
	}
	v.nonEmpty("node", f.Node)
	v.nonEmpty("audit.deployment", f.Audit.Deployment)
	node, dep := str(f.Node), str(f.Audit.Deployment)
	if node != "" && !checkpoint.ValidOrigin("x/"+node+"/audit") || strings.Contains(node, "/") {
		v.add("node", "must not contain spaces, '+' or '/': it is part of the checkpoint origin <deployment>/<node>/audit")
	}
	if dep != "" && !checkpoint.ValidOrigin(dep+"/x/audit") {
		v.add("audit.deployment", "must not contain spaces or '+': it is part of the checkpoint origin <deployment>/<node>/audit")
	}
}

func (v *validator) transport() {
	f := v.f
	stdio := boolean(f.Stdio.Enabled)
	listen := v.listen()
	v.nonEmpty("http.listen", f.HTTP.Listen)
	switch {
	case stdio && listen != "":
		v.add("stdio.enabled", "choose exactly one of %s or %s", v.ref("stdio.enabled"), v.ref("http.listen"))
	case v.o.Complete && !stdio && listen == "":
		v.add("http.listen", "required: choose exactly one of http.listen (Streamable HTTP) or stdio.enabled")
	}
	v.file("stdio.principal_file", f.Stdio.PrincipalFile)
	if str(f.Stdio.PrincipalFile) != "" && !stdio {
		v.add("stdio.principal_file", "is only used with %s", v.ref("stdio.enabled"))
	}
	if stdio && v.o.Complete && str(f.Stdio.PrincipalFile) == "" && v.o.Getenv("CUSTOS_PRINCIPAL_FILE") == "" {
		v.add("stdio.principal_file", "required with stdio.enabled (or $CUSTOS_PRINCIPAL_FILE)")
	}
	if listen != "" && v.hostPort("http.listen", listen) {
		switch {
		case !v.tlsOn() && !isLoopback(listen):
			v.add("http.listen", "plain HTTP is only served on a loopback address (127.0.0.1:PORT or [::1]:PORT) and only with dev; set %s and %s", v.ref("tls.cert_file"), v.ref("tls.key_file"))
		case !v.tlsOn() && !v.dev():
			v.add("http.listen", "plain HTTP is only served with %s, on a loopback address; set %s and %s", v.ref("dev"), v.ref("tls.cert_file"), v.ref("tls.key_file"))
		}
	}
	h := f.HTTP
	if listen == "" {
		for _, e := range []struct {
			path string
			set  bool
		}{{"http.addr_file", h.AddrFile != nil}, {"http.tokens_file", h.TokensFile != nil}} {
			if e.set && stdio {
				v.add(e.path, "is only used with %s", v.ref("http.listen"))
			}
		}
	}
	v.parentDir("http.addr_file", h.AddrFile)
	v.file("http.tokens_file", h.TokensFile)
	if h.RateLimit != nil && (*h.RateLimit < 0 || *h.RateLimit != *h.RateLimit) {
		v.add("http.rate_limit", "must be 0 (off) or more, got %v", *h.RateLimit)
	}
	if h.RateBurst != nil && *h.RateBurst < 1 {
		v.add("http.rate_burst", "must be 1 or more, got %d", *h.RateBurst)
	}
	v.positive("http.read_header_timeout", h.ReadHeaderTimeout)
	v.positive("http.read_timeout", h.ReadTimeout)
	v.notNegative("http.write_timeout", h.WriteTimeout)
	v.positive("http.idle_timeout", h.IdleTimeout)
	v.positive("http.session_idle_timeout", h.SessionIdleTimeout)
	if h.ReadHeaderTimeout != nil && h.ReadTimeout != nil && *h.ReadTimeout > 0 && *h.ReadHeaderTimeout > *h.ReadTimeout {
		v.add("http.read_header_timeout", "must not exceed %s (%s)", v.ref("http.read_timeout"), *h.ReadTimeout)
	}
	if h.MaxHeaderBytes != nil && (*h.MaxHeaderBytes < MinHeaderBytes || *h.MaxHeaderBytes > MaxHeaderBytesLimit) {
		v.add("http.max_header_bytes", "must be from %d to %d, got %d", MinHeaderBytes, MaxHeaderBytesLimit, *h.MaxHeaderBytes)
	}
	if h.MaxRequestBodyBytes != nil && (*h.MaxRequestBodyBytes < MinRequestBodyBytes || *h.MaxRequestBodyBytes > MaxRequestBodyLimit) {
		v.add("http.max_request_body_bytes", "must be from %d to %d (the MCP handler's own limit), got %d", MinRequestBodyBytes, MaxRequestBodyLimit, *h.MaxRequestBodyBytes)
	}
}

func (v *validator) tls() {
	t := v.f.TLS
	v.file("tls.cert_file", t.CertFile)
	v.file("tls.key_file", t.KeyFile)
	cert, key := str(t.CertFile), str(t.KeyFile)
	switch {
	case cert != "" && key == "":
		v.add("tls.cert_file", "needs %s too", v.ref("tls.key_file"))
	case key != "" && cert == "":
		v.add("tls.key_file", "needs %s too", v.ref("tls.cert_file"))
	}
	if cert != "" && v.listen() == "" && boolean(v.f.Stdio.Enabled) {
		v.add("tls.cert_file", "is only used with %s", v.ref("http.listen"))
	}
	if mv := t.MinVersion; mv != nil && *mv != "1.2" && *mv != "1.3" {
		v.add("tls.min_version", "want \"1.3\" (default) or \"1.2\"")
	}
}

func (v *validator) oauth() {
	o := v.f.OAuth
	issuer, jwks, aud := str(o.Issuer), str(o.JWKSURL), str(o.Audience)
	any := issuer != "" || jwks != "" || aud != ""
	if any {
		for _, e := range []struct{ path, val string }{{"oauth.issuer", issuer}, {"oauth.jwks_url", jwks}, {"oauth.audience", aud}} {
			if e.val == "" {
				v.add(e.path, "required with the other oauth fields: OAuth needs oauth.issuer, oauth.jwks_url and oauth.audience")
			}
		}
		if str(v.f.HTTP.TokensFile) != "" {
			v.add("http.tokens_file", "choose %s (dev tokens) or oauth.* (an OAuth 2.1 issuer), not both", v.ref("http.tokens_file"))
		}
		if boolean(v.f.Stdio.Enabled) {
			v.add("oauth.issuer", "is only used with %s", v.ref("http.listen"))
		}
	} else if v.o.Complete && v.listen() != "" && str(v.f.HTTP.TokensFile) == "" {
		v.add("http.tokens_file", "required with http.listen: dev tokens (http.tokens_file, see 'custos token new') or oauth.issuer, oauth.jwks_url and oauth.audience")
	}
	v.url("oauth.issuer", issuer, true)
	v.url("oauth.jwks_url", jwks, true)
	if v.url("oauth.audience", aud, true) {
		if u, _ := url.Parse(aud); u.Fragment != "" || strings.HasSuffix(aud, "#") {
			v.add("oauth.audience", "must not have a fragment")
		}
	}
	for _, e := range []struct {
		path string
		p    *string
	}{
		{"oauth.scopes.list", o.Scopes.List}, {"oauth.scopes.read", o.Scopes.Read},
		{"oauth.claims.roles", o.Claims.Roles}, {"oauth.claims.tenant", o.Claims.Tenant},
		{"oauth.claims.patients", o.Claims.Patients}, {"oauth.claims.purpose_of_use", o.Claims.PurposeOfUse},
		{"oauth.purpose_header", o.PurposeHeader},
	} {
		path, p := e.path, e.p
		if p == nil {
			continue
		}
		switch s := *p; {
		case s == "" || len(s) > MaxOAuthClaimNameSize || strings.ContainsAny(s, " \t\r\n\""):
			v.add(path, "want a non-empty name without spaces or quotes")
		case !any:
			v.add(path, "is only used with oauth.issuer, oauth.jwks_url and oauth.audience")
		}
	}
}

// url checks an absolute http(s) URL without credentials; plain http only
// on a loopback host. It reports whether the URL parsed.
func (v *validator) url(path, s string, httpsUnlessLoopback bool) bool {
	if s == "" {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		v.add(path, "want an absolute https:// URL")
		return false
	}
	if u.User != nil {
		v.add(path, "must not carry credentials")
		return false
	}
	if httpsUnlessLoopback && u.Scheme == "http" && !isLoopback(net.JoinHostPort(u.Hostname(), "1")) {
		v.add(path, "plain http:// only on a loopback host; want https://")
	}
	return true
}

func (v *validator) policy() {
	p := v.f.Policy
	v.dir("policy.dir", p.Dir)
	v.file("policy.bundle", p.Bundle)
	dir, bundle := str(p.Dir), str(p.Bundle)
	if dir != "" && bundle != "" {
		v.add("policy.dir", "choose %s or %s, not both", v.ref("policy.dir"), v.ref("policy.bundle"))
	}
	if dir != "" && !v.dev() {
		v.add("policy.dir", "loads an unsigned policy, for development only (%s); in production use policy.bundle with policy.keys", v.ref("dev"))
	}
	if bundle != "" && len(p.Keys) == 0 && !boolean(p.VaultKey) {
		v.add("policy.bundle", "needs policy.keys or policy.vault_key: signature verification is mandatory")
	}
	if bundle == "" && (len(p.Keys) > 0 || boolean(p.VaultKey)) {
		path := "policy.keys"
		if len(p.Keys) == 0 {
			path = "policy.vault_key"
		}
		v.add(path, "is only used with %s", v.ref("policy.bundle"))
	}
	if boolean(p.VaultKey) && v.dev() {
		v.add("policy.vault_key", "needs Vault, not %s", v.ref("dev"))
	}
	ids := map[string]bool{}
	for i, k := range p.Keys {
		at := fmt.Sprintf("policy.keys[%d]", i)
		switch {
		case k.ID == "" || strings.ContainsAny(k.ID, "= \t"):
			v.addAt(at+".id", "policy.keys", "want a key id without '=' or spaces")
		case ids[k.ID]:
			v.addAt(at+".id", "policy.keys", "the key id appears twice")
		}
		ids[k.ID] = true
		if k.File == "" {
			v.addAt(at+".file", "policy.keys", "want the PEM file of the public key")
		} else if v.o.CheckFiles {
			if st, err := os.Stat(k.File); err != nil {
				v.addAt(at+".file", "policy.keys", "%s", fileError(err))
			} else if st.IsDir() {
				v.addAt(at+".file", "policy.keys", "is a directory, want a file")
			}
		}
	}
}

// addAt reports a problem at a path below a leaf (policy.keys[1].file),
// located at the leaf's line and flag.
func (v *validator) addAt(path, leaf, format string, args ...any) {
	v.add(leaf, format, args...)
	p := &v.ps[len(v.ps)-1]
	p.Field = path
	if l := v.f.lines[path]; l > 0 && !p.fromFlag {
		p.Line = l
	}
}

func (v *validator) audit() {
	a := v.f.Audit
	v.dir("audit.anchor_dir", a.AnchorDir)
	if v.o.Complete && !v.dev() && str(a.AnchorDir) == "" {
		v.add("audit.anchor_dir", "required without dev: signed checkpoints must also be written outside the data directory")
	}
	if a.AnchorDir != nil && v.f.DataDir != nil && strings.TrimRight(*a.AnchorDir, "/") == strings.TrimRight(*v.f.DataDir, "/") {
		v.add("audit.anchor_dir", "must not be the data directory: it is the copy a rollback of audit.db cannot reach")
	}
	if a.CheckpointEvery != nil && *a.CheckpointEvery < 1 {
		v.add("audit.checkpoint_every", "must be 1 or more, got %d", *a.CheckpointEvery)
	}
	v.positive("audit.checkpoint_interval", a.CheckpointInterval)
}

// vaultPaths are the Vault fields that only make sense without dev.
func (v *validator) vaultSet() []string {
	var set []string
	for _, fd := range schema() {
		if strings.HasPrefix(fd.Path, "vault.") && fd.isSet(v.f) {
			set = append(set, fd.Path)
		}
	}
	return set
}

func (v *validator) vault() {
	f := v.f.Vault
	if v.dev() {
		for _, path := range v.vaultSet() {
			v.add(path, "cannot be combined with %s: dev keys are ephemeral; drop dev to use Vault", v.ref("dev"))
		}
		return
	}
	addr := str(f.Address)
	if addr != "" {
		v.url("vault.address", addr, false)
	} else if v.o.Complete && v.o.Getenv("VAULT_ADDR") == "" {
		v.add("vault.address", "required without dev (or $VAULT_ADDR)")
	}
	v.file("vault.ca_cert_file", f.CACertFile)
	ar := f.AppRole
	v.file("vault.approle.role_id_file", ar.RoleIDFile)
	v.file("vault.approle.secret_id_file", ar.SecretIDFile)
	v.nonEmpty("vault.approle.mount", ar.Mount)
	role, secret := str(ar.RoleIDFile), str(ar.SecretIDFile)
	switch {
	case role != "" && secret == "":
		v.add("vault.approle.role_id_file", "AppRole needs both %s and %s", v.ref("vault.approle.role_id_file"), v.ref("vault.approle.secret_id_file"))
	case secret != "" && role == "":
		v.add("vault.approle.secret_id_file", "AppRole needs both %s and %s", v.ref("vault.approle.role_id_file"), v.ref("vault.approle.secret_id_file"))
	}
	if boolean(ar.SecretIDWrapped) && secret == "" {
		v.add("vault.approle.secret_id_wrapped", "needs %s", v.ref("vault.approle.secret_id_file"))
	}
	for _, e := range []struct {
		path string
		p    *string
	}{
		{"vault.kv_mount", f.KVMount}, {"vault.cursor_key", f.CursorKey}, {"vault.audit_key", f.AuditKey},
		{"vault.transit_mount", f.TransitMount}, {"vault.signing_key", f.SigningKey}, {"vault.blob_key", f.BlobKey},
	} {
		path, p := e.path, e.p
		if p == nil {
			continue
		}
		if s := *p; strings.TrimSpace(s) == "" || strings.ContainsAny(s, " \t\r\n") || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "..") {
			v.add(path, "want a Vault path such as custos/cursor-key: no spaces, no leading or trailing '/', no '..'")
		}
	}
	v.positive("vault.timeout", f.Timeout)
	v.positive("vault.key_refresh", f.KeyRefresh)
	v.positive("vault.key_max_staleness", f.KeyMaxStaleness)
	if f.KeyRefresh != nil && f.KeyMaxStaleness != nil && *f.KeyRefresh > 0 && *f.KeyRefresh >= *f.KeyMaxStaleness {
		v.add("vault.key_refresh", "must be shorter than %s (%s): keys must be re-read before they go stale", v.ref("vault.key_max_staleness"), *f.KeyMaxStaleness)
	}
}

func (v *validator) log() {
	if l := v.f.Log.Level; l != nil {
		switch strings.ToLower(*l) {
		case "debug", "info", "warn", "error":
		default:
			v.add("log.level", "want debug, info, warn or error")
		}
	}
	if l := v.f.Log.Format; l != nil && *l != "json" && *l != "text" {
		v.add("log.format", "want json (default) or text")
	}
}

func (v *validator) ops() {
	o := v.f.Ops
	v.nonEmpty("ops.listen", o.Listen)
	if l := str(o.Listen); l != "" {
		v.hostPort("ops.listen", l)
		// Port 0 picks a free port for each listener: the same string then
		// names two different addresses.
		if _, port, err := net.SplitHostPort(l); l == v.listen() && (err != nil || port != "0") {
			v.add("ops.listen", "must differ from %s: the ops endpoints have a listener of their own", v.ref("http.listen"))
		}
	}
	v.parentDir("ops.addr_file", o.AddrFile)
	if o.AddrFile != nil && str(o.Listen) == "" {
		v.add("ops.addr_file", "is only used with %s", v.ref("ops.listen"))
	}
}

// isLoopback reports whether addr ("host:port") names a loopback address:
// the rule of server.IsLoopback, repeated here so that checking a file does
// not need the server package.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
