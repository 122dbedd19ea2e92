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
	// never nil. ClientID is azp, else client_id, else the configured client
	// claim (Config.ClientClaim), else act.sub.
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
	// AuthorizedParty (azp), ClientIDClaim (client_id), OtherClient (the
	// claim Config.ClientClaim names, e.g. Okta's cid) and Actor (act.sub,
	// RFC 8693) as found in the token; "" if absent.
	AuthorizedParty string
	ClientIDClaim   string
	OtherClient     string
	Actor           string
	// PurposeOfUse is the purpose claim as found, not yet validated: use
	// Verifier.PurposeOfUse.
	PurposeOfUse string
}

// HasScope reports whether the token grants scope s.
func (c *Claims) HasScope(s string) bool { return slices.Contains(c.Scopes, s) }

// claimNames are the configurable claim names. client may be "" (no such
// claim is read).
type claimNames struct {
	roles, tenant, patients, purpose, client string
}

// noClientIdentity is the error for a token that names no client.
func noClientIdentity(n claimNames) error {
	if n.client != "" {
		return fmt.Errorf("%w: no client identity (azp, client_id, %s or act.sub)", ErrInvalid, n.client)
	}
	return fmt.Errorf("%w: no client identity (azp, client_id or act.sub)", ErrInvalid)
}

// parseClaims decodes a verified JWT payload. It checks types and required
// claims only; iss, aud and times are checked by the caller. Errors wrap
// ErrInvalid and name the claim, never its value.
//
// It behaves exactly as decoding the payload into a
// map[string]json.RawMessage and each claim with json.Unmarshal
// (parseClaimsReference in claims_test.go), only faster: see scanClaims.
// Values take a fast path when they are plain strings or arrays of plain
// strings, and go through json.Unmarshal otherwise, so that error
// behaviour stays that of encoding/json.
func parseClaims(payload []byte, n claimNames) (Claims, error) {
	raw, ok := scanClaims(payload, n)
	if !ok {
		return Claims{}, fmt.Errorf("%w: payload is not a JSON object", ErrInvalid)
	}
	var c Claims
	bad := func(name string) error { return fmt.Errorf("%w: claim %q has the wrong type", ErrInvalid, name) }
	str := func(i int, name string, dst *string) error {
		if v := raw[i]; v != nil && !isNull(v) {
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
	strs := func(i int, name string, dst *[]string) error {
		if v := raw[i]; v != nil && !isNull(v) {
			if ss, ok := plainStrings(v); ok {
				*dst = ss
				return nil
			}
			if json.Unmarshal(v, dst) != nil {
				return bad(name)
			}
		}
		return nil
	}
	date := func(i int, name string, dst *time.Time) error {
		v := raw[i]
		if v == nil || isNull(v) {
			return nil
		}
		f, ok := smallInt(v)
		if !ok {
			// v is a JSON value from a validated document: a number is
			// exactly what ParseFloat accepts, anything else fails both.
			var err error
			if f, err = strconv.ParseFloat(string(v), 64); err != nil {
				return bad(name)
			}
		}
		if math.IsNaN(f) || f < 0 || f > 1<<40 {
			return bad(name)
		}
		*dst = time.Unix(int64(f), 0)
		return nil
	}
	var scope, scpString string
	var scp []string
	// All are decoded; the first error in this order wins.
	for _, err := range [...]error{
		str(claimIss, "iss", &c.Issuer), str(claimSub, "sub", &c.Subject), str(claimJti, "jti", &c.ID),
		audience(raw[claimAud], &c.Audience),
		date(claimExp, "exp", &c.Expiry), date(claimNbf, "nbf", &c.NotBefore), date(claimIat, "iat", &c.IssuedAt),
		str(claimAzp, "azp", &c.AuthorizedParty), str(claimClientID, "client_id", &c.ClientIDClaim),
		str(claimClient, n.client, &c.OtherClient),
		str(claimScope, "scope", &scope),
		str(claimTenant, n.tenant, &c.Principal.Tenant), str(claimPurpose, n.purpose, &c.PurposeOfUse),
		strs(claimRoles, n.roles, &c.Principal.Roles), strs(claimPatients, n.patients, &c.Principal.Patients),
	} {
		if err != nil {
			return Claims{}, err
		}
	}
	if v := raw[claimScp]; v != nil && !isNull(v) {
		if ss, ok := plainStrings(v); ok {
			scp = ss
		} else if s, ok := plainString(v); ok {
			scpString = s
		} else if json.Unmarshal(v, &scp) != nil && json.Unmarshal(v, &scpString) != nil {
			return Claims{}, bad("scp")
		}
	}
	if v := raw[claimAct]; v != nil && !isNull(v) {
		a, err := actorSub(v)
		if err != nil {
			return Claims{}, bad("act")
		}
		c.Actor = a
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
	c.Principal.ClientID = cmpOr(c.AuthorizedParty, c.ClientIDClaim, c.OtherClient, c.Actor)
	switch {
	case c.Subject == "":
		return Claims{}, fmt.Errorf("%w: claim \"sub\" is missing", ErrInvalid)
	case c.Expiry.IsZero():
		return Claims{}, fmt.Errorf("%w: claim \"exp\" is missing", ErrInvalid)
	case c.Principal.Tenant == "":
		return Claims{}, fmt.Errorf("%w: claim %q is missing", ErrInvalid, n.tenant)
	case c.Principal.ClientID == "":
		return Claims{}, noClientIdentity(n)
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
// taken from a document json.Valid has accepted (so it has no raw control
// characters); ok is false for anything else (escapes, invalid
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
	if s, ok := plainString(v); ok {
		*dst = []string{s}
		return nil
	}
	if ss, ok := plainStrings(v); ok {
		*dst = ss
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

// smallInt returns the value of a JSON number written as at most 15 decimal
// digits, which is exactly what strconv.ParseFloat gives for it; ok is
// false for anything else, which the caller parses with ParseFloat.
func smallInt(v []byte) (f float64, ok bool) {
	if len(v) == 0 || len(v) > 15 {
		return 0, false
	}
	var n int64
	for _, b := range v {
		if b < '0' || b > '9' {
			return 0, false
		}
		n = n*10 + int64(b-'0')
	}
	return float64(n), true
}

// actorSub returns the "sub" member of an "act" claim (RFC 8693 §4.1), ""
// if it has none or it is null. The member is matched exactly: decoding
// into a struct would take "SUB" or "Sub" for it, as encoding/json
// matches field names without regard to case.
func actorSub(v json.RawMessage) (string, error) {
	var act map[string]json.RawMessage
	if err := json.Unmarshal(v, &act); err != nil {
		return "", err
	}
	var sub string
	if s, ok := act["sub"]; ok && !isNull(s) {
		if err := json.Unmarshal(s, &sub); err != nil {
			return "", err
		}
	}
	return sub, nil
}
