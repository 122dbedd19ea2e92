package oauth

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultSkew               = 60 * time.Second
	DefaultScopeList          = "resources:list"
	DefaultScopeRead          = "resources:read"
	DefaultRolesClaim         = "roles"
	DefaultTenantClaim        = "tenant"
	DefaultPatientsClaim      = "patients"
	DefaultPurposeClaim       = "purpose_of_use"
	DefaultPurposeHeader      = "X-Purpose-Of-Use"
	DefaultJWKSRefresh        = 5 * time.Minute
	DefaultJWKSMaxStaleness   = 24 * time.Hour
	DefaultMinRefreshInterval = 10 * time.Second
	DefaultResourceName       = "custos"
	DefaultCacheSize          = 10000

	// MaxSkew bounds Config.Skew: a larger tolerance would keep expired
	// tokens alive.
	MaxSkew = 5 * time.Minute
)

// DefaultKnownPurposes are the HL7 v3 PurposeOfUse (ActReason) codes the
// custos policy understands (rego/custos/authz.rego known_purposes).
var DefaultKnownPurposes = []string{
	"TREAT", "ETREAT", "HPAYMT", "HOPERAT", "HRESCH",
	"HMARKT", "COVERAGE", "PUBHLTH", "PATRQT",
}

// Config configures a Verifier. Zero fields take the documented default.
type Config struct {
	// Issuer is the authorization server's issuer identifier; "iss" must
	// equal it exactly. Required; https, or http on a loopback host.
	Issuer string
	// JWKSURL is where the issuer publishes its keys (the jwks_uri of its
	// metadata). Required and explicit: it is not discovered. https, or http
	// on a loopback host; a redirect is followed only to such a URL, and
	// never from https to http.
	JWKSURL string
	// Audience is this server's canonical resource URL (RFC 8707); "aud"
	// must contain it. Required; absolute https URL without fragment.
	Audience string
	// ResourceMetadataURL is advertised in WWW-Authenticate. Default: the
	// RFC 9728 §3.1 location derived from Audience, see MetadataPath.
	ResourceMetadataURL string
	// ResourceName is the metadata's resource_name. Default "custos".
	ResourceName string
	// Skew is the clock tolerance for exp, nbf and iat. Default 60 s; at
	// most MaxSkew; negative is invalid.
	Skew time.Duration
	// ScopeList and ScopeRead are the scopes resources/list (and
	// resources/templates/list) and resources/read require.
	ScopeList, ScopeRead string
	// Claim names of the principal's custom claims. RolesClaim and
	// PatientsClaim must be arrays of strings, TenantClaim and PurposeClaim
	// strings.
	RolesClaim, TenantClaim, PatientsClaim, PurposeClaim string
	// ClientClaim names one more string claim that may name the client
	// (OAuth client) when the token has neither azp nor client_id: Okta's
	// access tokens carry it as "cid", Entra ID's v1.0 tokens as "appid".
	// The client is azp, else client_id, else this claim, else act.sub.
	// Default "": none.
	ClientClaim string
	// PurposeHeader is the request header that may carry the purpose of use.
	PurposeHeader string
	// KnownPurposes are the accepted purpose-of-use codes. Default
	// DefaultKnownPurposes.
	KnownPurposes []string
	// JWKSRefresh is how old the cached JWKS may get before it is refetched
	// in the background, by the next Verify (a token from the verified-token
	// cache included). Default 5 min.
	JWKSRefresh time.Duration
	// JWKSMaxStaleness is how long the cached JWKS is trusted after the
	// last successful fetch: beyond it every token is refused
	// (ErrJWKSStale, 401 invalid_token) until a fetch succeeds, so that a
	// key the issuer revoked while its JWKS endpoint was unreachable (or
	// blocked) is not trusted for ever. Default DefaultJWKSMaxStaleness
	// (24 h); must exceed JWKSRefresh.
	JWKSMaxStaleness time.Duration
	// MinRefreshInterval is the least time between two JWKS fetches, both
	// forced (unknown kid) and periodic. Default 10 s.
	MinRefreshInterval time.Duration
	// CacheSize bounds the cache of verified tokens (by SHA-256 of the
	// token). A hit skips the signature check but rechecks exp, nbf, iat,
	// iss and aud, and counts only while the JWKS it was verified against is
	// current. Default DefaultCacheSize; negative disables the cache.
	CacheSize int
	// HTTPClient fetches the JWKS. Default: a client with a 10 s timeout.
	HTTPClient *http.Client
	// Logger receives operational events (JWKS refreshes and failures).
	// Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// withDefaults returns c with defaults applied; it does not validate.
func (c Config) withDefaults() Config {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&c.ResourceName, DefaultResourceName)
	def(&c.ScopeList, DefaultScopeList)
	def(&c.ScopeRead, DefaultScopeRead)
	def(&c.RolesClaim, DefaultRolesClaim)
	def(&c.TenantClaim, DefaultTenantClaim)
	def(&c.PatientsClaim, DefaultPatientsClaim)
	def(&c.PurposeClaim, DefaultPurposeClaim)
	def(&c.PurposeHeader, DefaultPurposeHeader)
	if c.Skew == 0 {
		c.Skew = DefaultSkew
	}
	if c.KnownPurposes == nil {
		c.KnownPurposes = DefaultKnownPurposes
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.JWKSRefresh == 0 {
		c.JWKSRefresh = DefaultJWKSRefresh
	}
	if c.MinRefreshInterval == 0 {
		c.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if c.JWKSMaxStaleness == 0 {
		c.JWKSMaxStaleness = DefaultJWKSMaxStaleness
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ResourceMetadataURL == "" && c.Audience != "" {
		if u, err := url.Parse(c.Audience); err == nil {
			c.ResourceMetadataURL = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: metadataPath(u.Path)}).String()
		}
	}
	return c
}

// metadataPath inserts the RFC 9728 well-known segment before the
// resource's path: /mcp -> /.well-known/oauth-protected-resource/mcp.
func metadataPath(resourcePath string) string {
	p := strings.TrimSuffix(resourcePath, "/")
	return "/.well-known/oauth-protected-resource" + p
}

// validate checks a defaulted Config; errors name the field.
func (c *Config) validate() error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s: %s", ErrBadConfig, field, why) }
	if err := checkURL(c.Issuer, true); err != nil {
		return bad("Issuer", err.Error())
	}
	if err := checkURL(c.JWKSURL, true); err != nil {
		return bad("JWKSURL", err.Error())
	}
	if err := checkURL(c.Audience, true); err != nil {
		return bad("Audience", err.Error())
	}
	if err := checkURL(c.ResourceMetadataURL, true); err != nil {
		return bad("ResourceMetadataURL", err.Error())
	}
	if c.Skew < 0 || c.Skew > MaxSkew {
		return bad("Skew", fmt.Sprintf("must be between 0 and %v", MaxSkew))
	}
	for _, f := range []struct{ name, v string }{
		{"ScopeList", c.ScopeList}, {"ScopeRead", c.ScopeRead},
	} {
		// RFC 6749 §3.3 scope-token: %x21 / %x23-5B / %x5D-7E.
		for _, r := range f.v {
			if r < 0x21 || r > 0x7e || r == '"' || r == '\\' {
				return bad(f.name, "not an RFC 6749 scope token")
			}
		}
	}
	if strings.ContainsAny(c.PurposeHeader, " :\t\r\n\"") {
		return bad("PurposeHeader", "not a header name")
	}
	if why := ClientClaimProblem(*c); why != "" {
		return bad("ClientClaim", why)
	}
	if len(c.KnownPurposes) == 0 {
		return bad("KnownPurposes", "empty")
	}
	for _, p := range c.KnownPurposes {
		if p == "" {
			return bad("KnownPurposes", "empty code")
		}
	}
	if c.JWKSRefresh < 0 {
		return bad("JWKSRefresh", "negative")
	}
	if c.MinRefreshInterval < 0 {
		return bad("MinRefreshInterval", "negative")
	}
	if c.JWKSMaxStaleness <= c.JWKSRefresh {
		return bad("JWKSMaxStaleness", fmt.Sprintf("must exceed JWKSRefresh (%v): the keys would be refused before a refresh was tried", c.JWKSRefresh))
	}
	return nil
}

// checkURL requires an absolute https URL without fragment or user info;
// if loopbackHTTP, http is also allowed for loopback hosts (local issuers,
// tests).
func checkURL(s string, loopbackHTTP bool) error {
	if s == "" {
		return fmt.Errorf("required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL")
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("must be an absolute URL")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("must not have a fragment")
	case u.User != nil:
		return fmt.Errorf("must not carry user info")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopbackHTTP && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("must be https")
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ClientClaimProblem says why c.ClientClaim cannot name the client, or "":
// a registered claim (sub would make every user its own client, and the
// rule that a token names a client a no-op), or a claim c maps to the
// principal (roles, tenant, patients, purpose of use). "" is no claim.
func ClientClaimProblem(c Config) string {
	c = c.withDefaults()
	switch n := c.ClientClaim; n {
	case "":
		return ""
	case "iss", "sub", "aud", "exp", "nbf", "iat", "jti", "scope", "scp", "act", "azp", "client_id", "cnf", "typ":
		return "a registered JWT claim cannot name the client"
	case c.RolesClaim, c.TenantClaim, c.PatientsClaim, c.PurposeClaim:
		return "a claim mapped to the principal cannot name the client"
	}
	return ""
}
