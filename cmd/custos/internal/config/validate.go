package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	vault "github.com/hashicorp/vault/api"
	"github.com/spf13/pflag"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/oauth"
)

// Options control Validate.
type Options struct {
	// Complete requires a configuration serve can start from on its own:
	// every option app.Options requires (data_dir, a transport and its
	// identity, and without dev Vault and audit.anchor_dir), taking
	// $VAULT_ADDR and $CUSTOS_PRINCIPAL_FILE into account. serve and
	// 'custos config check' set it; without it only what is written is
	// checked.
	Complete bool
	// CheckFiles checks that every file and directory named exists and is
	// of the right kind. It never reads them.
	CheckFiles bool
	// Getenv reads the environment fallbacks; nil means os.Getenv.
	Getenv func(string) string
}

// Limits of the values Validate accepts (app's, for the flag defaults).
const (
	MaxPageSize         = app.MaxPageSize
	MaxRequestBodyLimit = app.MaxRequestBodyLimit
)

// Validate checks the settings and returns Problems listing every problem,
// or nil. The rules of what may be served are app.Options.Check's: the
// settings are mapped onto app.Options (AppOptions) and each problem found
// there is reported at the field's line, or under its flag for a value
// from the command line. Validate adds only the rules about the settings
// as written, which have no meaning once mapped: a field written empty, a
// field that has no effect without another (principal_file without
// stdio.enabled), tls.min_version and the log settings (cmd's own).
func (f *File) Validate(o Options) error {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	v := &validator{f: f, o: o}
	v.written()
	opts := f.AppOptions(o.Getenv)
	for _, p := range opts.Check(app.CheckOptions{Name: v.ref, Given: f.given, SkipFiles: !o.CheckFiles}) {
		if p.Missing && !o.Complete {
			continue
		}
		v.report(p)
	}
	return v.ps.orNil()
}

// given reports whether the settings set a field (written in the file or
// given as a flag), as opposed to leaving it at its default.
func (f *File) given(path string) bool {
	if f.set != nil {
		return f.set[path]
	}
	fd, ok := byPathField(path)
	return ok && fd.isSet(f)
}

func byPathField(path string) (*Field, bool) {
	schema()
	fd, ok := byPath[path]
	return fd, ok
}

type validator struct {
	f  *File
	o  Options
	ps Problems
}

// add reports a problem with the field at path: under its flag's name when
// the value came from the command line, else with the file's line.
func (v *validator) add(path, format string, args ...any) {
	v.addAt(path, path, format, args...)
}

// addAt reports a problem at a path below a leaf (policy.keys[1].file),
// located at the leaf's flag and at the line of the path, or the leaf's.
func (v *validator) addAt(path, leaf, format string, args ...any) {
	p := Problem{Field: path, Message: sprintf(format, args...)}
	if fl, ok := FlagFor(leaf); ok {
		p.Flag = "--" + fl
	}
	if v.f.fromFlag[leaf] {
		p.fromFlag = true
	} else {
		p.File, p.Line = v.f.name, v.f.lines[path]
		if p.Line == 0 {
			p.Line = v.f.lines[leaf]
		}
	}
	v.ps = append(v.ps, p)
}

// report adds a problem of app.Options.Check at its field. A problem of a
// whole section (vault) is reported at each field of the section that was
// set, or at dev when none was.
func (v *validator) report(p app.Problem) {
	leaf := p.Key
	if i := strings.IndexByte(leaf, '['); i >= 0 {
		leaf = leaf[:i]
	}
	if _, ok := FlagFor(leaf); !ok {
		var set []string
		for _, fd := range schema() {
			if strings.HasPrefix(fd.Path, p.Key+".") && v.f.given(fd.Path) {
				set = append(set, fd.Path)
			}
		}
		if len(set) == 0 {
			set = []string{"dev"}
		}
		for _, path := range set {
			v.add(path, "%s", p.Message)
		}
		return
	}
	v.addAt(p.Key, leaf, "%s", p.Message)
	v.ps[len(v.ps)-1].missing = p.Missing
}

// ref names a field in a message: its flag when it came from the command
// line or there is no file, its path when it is in the file or only the
// file is in play, both when it is unset and settings are mixed.
func (v *validator) ref(path string) string {
	fl, ok := FlagFor(path)
	switch {
	case !ok:
		return path
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

// written checks the rules about the settings as written.
func (v *validator) written() {
	f := v.f
	for _, path := range []string{
		"data_dir", "node", "audit.deployment", "http.listen", "ops.listen", "vault.approle.mount",
		"stdio.principal_file", "http.addr_file", "http.tokens_file", "tls.cert_file", "tls.key_file",
		"policy.dir", "policy.bundle", "audit.anchor_dir", "vault.ca_cert_file",
		"vault.approle.role_id_file", "vault.approle.secret_id_file", "ops.addr_file",
	} {
		fd, _ := byPathField(path)
		if p, ok := fd.value(f).Interface().(*string); ok && p != nil && strings.TrimSpace(*p) == "" && f.given(path) {
			v.add(path, "must not be empty (leave the field out for the default)")
		}
	}
	stdio, listen := boolean(f.Stdio.Enabled), str(f.HTTP.Listen)
	if str(f.Stdio.PrincipalFile) != "" && !stdio {
		v.add("stdio.principal_file", "is only used with %s", v.ref("stdio.enabled"))
	}
	if stdio && listen == "" {
		// Every HTTP, TLS and OAuth setting: a stdio server builds no HTTP
		// options, so none of them would even be checked (serve --stdio
		// --rate-limit -1 started).
		for _, fd := range schema() {
			if (strings.HasPrefix(fd.Path, "http.") || strings.HasPrefix(fd.Path, "tls.") || strings.HasPrefix(fd.Path, "oauth.")) &&
				fd.Path != "http.listen" && f.given(fd.Path) {
				v.add(fd.Path, "is only used with %s", v.ref("http.listen"))
			}
		}
	}
	o := f.OAuth
	if str(o.Issuer) == "" && str(o.JWKSURL) == "" && str(o.Audience) == "" {
		for _, path := range []string{"oauth.scopes.list", "oauth.scopes.read", "oauth.claims.roles", "oauth.claims.tenant",
			"oauth.claims.patients", "oauth.claims.purpose_of_use", "oauth.claims.client", "oauth.purpose_header",
			"oauth.jwks_max_staleness"} {
			if f.given(path) {
				v.add(path, "is only used with oauth.issuer, oauth.jwks_url and oauth.audience")
			}
		}
	}
	if mv := f.TLS.MinVersion; mv != nil && *mv != "1.2" && *mv != "1.3" {
		v.add("tls.min_version", "want \"1.3\" (default) or \"1.2\"")
	}
	if l := f.Log.Level; l != nil {
		switch strings.ToLower(*l) {
		case "debug", "info", "warn", "error":
		default:
			v.add("log.level", "want debug, info, warn or error")
		}
	}
	if l := f.Log.Format; l != nil && *l != "json" && *l != "text" {
		v.add("log.format", "want json (default) or text")
	}
}

// AppOptions maps the settings onto app.Options: a field not set takes
// app's zero value, which means the same default as the flag's. getenv
// supplies the environment fallbacks: $VAULT_ADDR, $VAULT_CACERT and
// $VAULT_TOKEN for Vault, $CUSTOS_PRINCIPAL_FILE for stdio. The Logger and
// Version are the caller's to set.
func (f *File) AppOptions(getenv func(string) string) app.Options {
	o := app.Options{
		DataDir:  str(f.DataDir),
		Dev:      boolean(f.Dev),
		Node:     str(f.Node),
		PageSize: intOf(f.PageSize),
		Policy: app.PolicyOptions{
			Dir: str(f.Policy.Dir), Bundle: str(f.Policy.Bundle), VaultKeys: boolean(f.Policy.VaultKey),
			MinSequence: int64Of(f.Policy.MinSequence),
		},
		Checkpoints: app.CheckpointOptions{
			Deployment: str(f.Audit.Deployment), AnchorDir: str(f.Audit.AnchorDir),
			Every: int64Of(f.Audit.CheckpointEvery), Interval: durOf(f.Audit.CheckpointInterval),
		},
		Ops:            app.OpsOptions{Listen: str(f.Ops.Listen), AddrFile: str(f.Ops.AddrFile)},
		BreakGlass:     app.BreakGlassOptions{MaxTTL: durOf(f.BTG.MaxTTL), GrantRoles: f.BTG.GrantRoles},
		AuditRetention: durOf(f.Audit.Retention),
		AuditDisk:      app.AuditDiskOptions{LowWatermark: int64Of(f.Audit.DiskLowWatermark), Reserve: int64Of(f.Audit.DiskReserve)},
		Scrub:          app.ScrubOptions{Interval: durOf(f.Audit.ScrubInterval), Rate: intOf(f.Audit.ScrubRate)},
		Sync: app.SyncOptions{
			FHIRBase: str(f.Sync.FHIRBase), Every: durOf(f.Sync.Every),
			ClientID: str(f.Sync.ClientID), Scope: str(f.Sync.Scope), Tenant: str(f.Sync.Tenant),
		},
		AuditSegments: app.AuditSegmentOptions{RollSize: int64Of(f.Audit.RollSize), RollPeriod: durOf(f.Audit.RollPeriod),
			ArchiveDir: str(f.Audit.ArchiveDir)},
	}
	if f.Audit.AuditorCPU != nil {
		o.Admin.AuditorCPU = *f.Audit.AuditorCPU
	}
	for _, k := range f.Policy.Keys {
		o.Policy.Keys = append(o.Policy.Keys, app.PolicyKey{ID: k.ID, File: k.File})
	}
	stdio, listen := boolean(f.Stdio.Enabled), str(f.HTTP.Listen)
	if stdio {
		pf := str(f.Stdio.PrincipalFile)
		if pf == "" {
			pf = getenv("CUSTOS_PRINCIPAL_FILE")
		}
		o.Stdio = &app.StdioOptions{PrincipalFile: pf}
	}
	if listen != "" || !stdio && f.givenUnder("http.", "tls.", "oauth.") {
		o.HTTP = f.httpOptions()
	}
	if !o.Dev || f.givenUnder("vault.") {
		o.Vault = f.vaultOptions(getenv)
	}
	return o
}

// givenUnder reports whether a field under one of the prefixes is set.
func (f *File) givenUnder(prefixes ...string) bool {
	for _, fd := range schema() {
		for _, p := range prefixes {
			if strings.HasPrefix(fd.Path, p) && f.given(fd.Path) {
				return true
			}
		}
	}
	return false
}

func (f *File) httpOptions() *app.HTTPOptions {
	h, t := f.HTTP, f.TLS
	o := &app.HTTPOptions{
		Listen: str(h.Listen), AddrFile: str(h.AddrFile), TokensFile: str(h.TokensFile),
		CertFile: str(t.CertFile), KeyFile: str(t.KeyFile), TLS12: str(t.MinVersion) == "1.2",
		Server: server.HTTPOptions{
			ReadHeaderTimeout: durOf(h.ReadHeaderTimeout), ReadTimeout: durOf(h.ReadTimeout),
			WriteTimeout: durOf(h.WriteTimeout), IdleTimeout: durOf(h.IdleTimeout),
			MaxHeaderBytes: intOf(h.MaxHeaderBytes), MaxRequestBodyBytes: int64Of(h.MaxRequestBodyBytes),
			MaxConnections: intOf(h.MaxConnections),
		},
		RateLimit:   server.RateLimit{Burst: intOf(h.RateBurst)},
		SessionIdle: durOf(h.SessionIdleTimeout),
		MaxSessions: intOf(h.MaxSessions),
		Refusals:    server.RefusalLimits{Window: durOf(h.RefusalWindow), PerSource: intOf(h.RefusalsPerSource)},

		TrustedProxyHeader: str(h.TrustedProxyHeader),
	}
	for _, p := range h.TrustedProxies {
		// --http-trusted-proxy 10.0.0.0/8,192.0.2.7 as well as repeated.
		for _, e := range strings.Split(p, ",") {
			o.TrustedProxies = append(o.TrustedProxies, strings.TrimSpace(e))
		}
	}
	if h.RateLimit != nil {
		o.RateLimit.PerSecond = *h.RateLimit
	}
	oa := f.OAuth
	if str(oa.Issuer) != "" || str(oa.JWKSURL) != "" || str(oa.Audience) != "" {
		o.OAuth = &oauth.Config{
			Issuer: str(oa.Issuer), JWKSURL: str(oa.JWKSURL), Audience: str(oa.Audience),
			ScopeList: str(oa.Scopes.List), ScopeRead: str(oa.Scopes.Read),
			RolesClaim: str(oa.Claims.Roles), TenantClaim: str(oa.Claims.Tenant),
			PatientsClaim: str(oa.Claims.Patients), PurposeClaim: str(oa.Claims.PurposeOfUse),
			ClientClaim:      str(oa.Claims.Client),
			PurposeHeader:    str(oa.PurposeHeader),
			JWKSMaxStaleness: durOf(oa.JWKSMaxStaleness),
		}
	}
	return o
}

func (f *File) vaultOptions(getenv func(string) string) *secrets.VaultOptions {
	v := f.Vault
	o := &secrets.VaultOptions{
		Address: str(v.Address),
		Layout: secrets.Layout{
			KVMount: str(v.KVMount), CursorKeyPath: str(v.CursorKey), AuditKeyPath: str(v.AuditKey),
			TransitMount: str(v.TransitMount), SigningKey: str(v.SigningKey), BlobKey: str(v.BlobKey),
		},
		RequestTimeout: durOf(v.Timeout), RefreshInterval: durOf(v.KeyRefresh), MaxStaleness: durOf(v.KeyMaxStaleness),
	}
	if o.Address == "" {
		o.Address = getenv("VAULT_ADDR")
	}
	ca := str(v.CACertFile)
	if ca == "" {
		ca = getenv("VAULT_CACERT")
	}
	if ca != "" {
		o.TLS = &vaultTLS{CACert: ca}
	}
	ar := v.AppRole
	if str(ar.RoleIDFile) != "" || str(ar.SecretIDFile) != "" || boolean(ar.SecretIDWrapped) {
		o.AppRole = &secrets.AppRole{RoleIDFile: str(ar.RoleIDFile), SecretIDFile: str(ar.SecretIDFile),
			Wrapped: boolean(ar.SecretIDWrapped), MountPath: str(ar.Mount)}
	} else {
		o.Token = getenv("VAULT_TOKEN")
	}
	return o
}

type vaultTLS = vault.TLSConfig

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func intOf(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func int64Of(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func durOf(p *time.Duration) time.Duration {
	if p == nil {
		return 0
	}
	return *p
}

// Snapshot returns the settings of fs as a File that sets every field to
// its flag's current value (default or not), for AppOptions; fields that
// eff (from Apply) sets count as given, and problems are located as eff
// locates them.
func Snapshot(fs *pflag.FlagSet, eff *File) (*File, error) {
	full := &File{name: eff.name, lines: eff.lines, fromFlag: eff.fromFlag, set: map[string]bool{}}
	var ps Problems
	for _, fd := range schema() {
		fl := fs.Lookup(fd.Flag)
		if fl == nil {
			continue
		}
		if err := fd.setFromFlag(full, fs, fl); err != nil {
			ps = append(ps, Problem{Field: fd.Path, Flag: "--" + fd.Flag, Message: err.Error(), fromFlag: true})
		}
		full.set[fd.Path] = fd.isSet(eff)
	}
	return full, ps.orNil()
}
