package oauth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-mcp/custos/policy"
)

// Claims is what a verified access token says.
type Claims struct {
	// Principal is the caller as the policy sees it. Roles and Patients are
	// never nil. ClientID is azp, else client_id, else act.sub.
	Principal policy.Principal
	Issuer    string
	Subject   string
	Audience  []string
	ID        string // jti, "" if absent
	Expiry    time.Time
	NotBefore time.Time // zero if absent
	IssuedAt  time.Time // zero if absent
	// Scopes from "scope" (space-separated) or, if absent, "scp" (array or
	// space-separated string). Never nil.
	Scopes []string
	// AuthorizedParty (azp), ClientIDClaim (client_id) and Actor (act.sub,
	// RFC 8693) as found in the token; "" if absent.
	AuthorizedParty string
	ClientIDClaim   string
	Actor           string
	// PurposeOfUse is the purpose claim as found, not yet validated: use
	// Verifier.PurposeOfUse.
	PurposeOfUse string
}

// HasScope reports whether the token grants scope s.
func (c *Claims) HasScope(s string) bool { return slices.Contains(c.Scopes, s) }

// claimNames are the configurable claim names.
type claimNames struct {
	roles, tenant, patients, purpose string
}

// parseClaims decodes a verified JWT payload. It checks types and required
// claims only; iss, aud and times are checked by the caller. Errors wrap
// ErrInvalid and name the claim, never its value.
func parseClaims(payload []byte, n claimNames) (Claims, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil || raw == nil {
		return Claims{}, fmt.Errorf("%w: payload is not a JSON object", ErrInvalid)
	}
	var c Claims
	bad := func(name string) error { return fmt.Errorf("%w: claim %q has the wrong type", ErrInvalid, name) }
	str := func(name string, dst *string) error {
		if v, ok := raw[name]; ok && !isNull(v) {
			if s, ok := plainString(v); ok {
				*dst = s
				return nil
			}
			if json.Unmarshal(v, dst) != nil {
				return bad(name)
			}
		}
		return nil
	}
	strs := func(name string, dst *[]string) error {
		if v, ok := raw[name]; ok && !isNull(v) {
			if json.Unmarshal(v, dst) != nil {
				return bad(name)
			}
		}
		return nil
	}
	date := func(name string, dst *time.Time) error {
		v, ok := raw[name]
		if !ok || isNull(v) {
			return nil
		}
		// v is a JSON value already validated by the map decode: a number
		// is exactly what ParseFloat accepts, anything else fails both.
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1<<40 {
			return bad(name)
		}
		*dst = time.Unix(int64(f), 0)
		return nil
	}
	var scope, scpString string
	var scp []string
	var act struct {
		Sub string `json:"sub"`
	}
	for _, err := range []error{
		str("iss", &c.Issuer), str("sub", &c.Subject), str("jti", &c.ID),
		audience(raw["aud"], &c.Audience),
		date("exp", &c.Expiry), date("nbf", &c.NotBefore), date("iat", &c.IssuedAt),
		str("azp", &c.AuthorizedParty), str("client_id", &c.ClientIDClaim),
		str("scope", &scope),
		str(n.tenant, &c.Principal.Tenant), str(n.purpose, &c.PurposeOfUse),
		strs(n.roles, &c.Principal.Roles), strs(n.patients, &c.Principal.Patients),
	} {
		if err != nil {
			return Claims{}, err
		}
	}
	if v, ok := raw["scp"]; ok && !isNull(v) {
		if json.Unmarshal(v, &scp) != nil && json.Unmarshal(v, &scpString) != nil {
			return Claims{}, bad("scp")
		}
	}
	if v, ok := raw["act"]; ok && !isNull(v) {
		if json.Unmarshal(v, &act) != nil {
			return Claims{}, bad("act")
		}
		c.Actor = act.Sub
	}
	switch {
	case scope != "":
		c.Scopes = strings.Fields(scope)
	case scp != nil:
		c.Scopes = scp
	default:
		c.Scopes = strings.Fields(scpString)
	}
	if c.Scopes == nil {
		c.Scopes = []string{}
	}
	if c.Principal.Roles == nil {
		c.Principal.Roles = []string{}
	}
	if c.Principal.Patients == nil {
		c.Principal.Patients = []string{}
	}
	c.Principal.Sub = c.Subject
	c.Principal.ClientID = cmpOr(c.AuthorizedParty, c.ClientIDClaim, c.Actor)
	switch {
	case c.Subject == "":
		return Claims{}, fmt.Errorf("%w: claim \"sub\" is missing", ErrInvalid)
	case c.Expiry.IsZero():
		return Claims{}, fmt.Errorf("%w: claim \"exp\" is missing", ErrInvalid)
	case c.Principal.Tenant == "":
		return Claims{}, fmt.Errorf("%w: claim %q is missing", ErrInvalid, n.tenant)
	case c.Principal.ClientID == "":
		return Claims{}, fmt.Errorf("%w: no client identity (azp, client_id or act.sub)", ErrInvalid)
	}
	return c, nil
}

func cmpOr(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// plainString returns the value of a JSON string token without escapes,
// taken from a document json.Unmarshal has already validated (so it has no
// raw control characters); ok is false for anything else (escapes, invalid
// UTF-8, other types), which the caller decodes the slow way.
func plainString(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return "", false
	}
	return string(s), true
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// audience decodes "aud": a string or an array of strings (RFC 7519 §4.1.3).
func audience(v json.RawMessage, dst *[]string) error {
	if v == nil || isNull(v) {
		return nil
	}
	var one string
	if json.Unmarshal(v, &one) == nil {
		*dst = []string{one}
		return nil
	}
	if json.Unmarshal(v, dst) != nil {
		return fmt.Errorf("%w: claim \"aud\" has the wrong type", ErrInvalid)
	}
	return nil
}
