package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/server/clientaddr"
)

// Identity is who is asking and why: the authenticated principal and the
// purpose of use (an HL7 v3 ActReason code such as TREAT or HPAYMT).
type Identity struct {
	Principal    policy.Principal
	PurposeOfUse string
	// Source is "stdio" or the remote address of an HTTP request.
	Source string

	session string    // MCP session id of the request being served
	expires time.Time // when the credential expires (OAuth exp); zero: never
}

// principalFile is the on-disk form of an identity, shared by the stdio
// principal file and the entries of the dev token file.
type principalFile struct {
	Sub          string   `json:"sub"`
	Roles        []string `json:"roles"`
	ClientID     string   `json:"client_id"`
	Tenant       string   `json:"tenant"`
	Patients     []string `json:"patients"`
	PurposeOfUse string   `json:"purpose_of_use"`
}

func (p principalFile) identity(source string) (Identity, error) {
	switch {
	case p.Sub == "":
		return Identity{}, fmt.Errorf("%w: principal: sub is required", ErrBadConfig)
	case p.Tenant == "":
		return Identity{}, fmt.Errorf("%w: principal %q: tenant is required", ErrBadConfig, p.Sub)
	case p.ClientID == "":
		return Identity{}, fmt.Errorf("%w: principal %q: client_id is required", ErrBadConfig, p.Sub)
	}
	return Identity{
		Principal: policy.Principal{
			Sub: p.Sub, Roles: nonNil(p.Roles), ClientID: p.ClientID,
			Tenant: p.Tenant, Patients: nonNil(p.Patients),
		},
		PurposeOfUse: p.PurposeOfUse, // a missing purpose is the policy's to deny
		Source:       source,
	}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// LoadPrincipalFile reads the identity a stdio server runs as: a JSON object
// {"sub","roles","client_id","tenant","patients","purpose_of_use"}.
func LoadPrincipalFile(path string) (Identity, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: principal file: %v", ErrBadConfig, err)
	}
	var p principalFile
	if err := decodeStrict(data, &p); err != nil {
		return Identity{}, fmt.Errorf("%w: principal file %s: %v", ErrBadConfig, path, err)
	}
	return p.identity("stdio")
}

// TokenFile is the development bearer-token file: it maps the SHA-256 of a
// token to the identity it stands for, and optionally to when it expires.
// Tokens themselves are never stored.
//
//	{"tokens":[{"token_sha256":"<hex>","principal":{...principal file...},"expires_at":"2027-01-06T03:00:00Z"}]}
type TokenFile struct {
	Tokens []TokenEntry `json:"tokens"`
}

// TokenEntry is one token of a TokenFile.
type TokenEntry struct {
	TokenSHA256 string          `json:"token_sha256"`
	Principal   json.RawMessage `json:"principal"`
	// ExpiresAt, if set, is when the token stops verifying: RFC 3339 in
	// UTC ("Z"), whole seconds, as 'custos token new --ttl' writes it.
	// Empty: the token never expires.
	ExpiresAt string `json:"expires_at,omitempty"`
}

// MinTokenLength is the shortest bearer token accepted into a token file.
const MinTokenLength = 32

// HashToken returns the hex SHA-256 of a bearer token, as stored in a
// TokenFile.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Tokens verifies dev bearer tokens. Build it with LoadTokenFile.
type Tokens struct {
	byHash map[[32]byte]tokenEntry
	now    func() time.Time // the clock expiries are checked on
}

// tokenEntry is a validated TokenEntry.
type tokenEntry struct {
	principal principalFile
	expires   time.Time // zero: never
}

// Unexpiring is how many of the file's tokens have no expires_at: tokens
// that verify until they are removed from the file.
func (t *Tokens) Unexpiring() int {
	n := 0
	for _, e := range t.byHash {
		if e.expires.IsZero() {
			n++
		}
	}
	return n
}

// LoadTokenFile reads and validates a TokenFile. Every entry must be valid;
// an invalid file changes nothing and is reported with the entry's index.
func LoadTokenFile(path string) (*Tokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: token file: %v", ErrBadConfig, err)
	}
	t, err := ParseTokenFile(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// ParseTokenFile is LoadTokenFile on bytes.
func ParseTokenFile(data []byte) (*Tokens, error) {
	var tf TokenFile
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w: token file: empty (want {\"tokens\": [...]}, as custos token new writes it)", ErrBadConfig)
	}
	if err := decodeStrict(data, &tf); err != nil {
		return nil, fmt.Errorf("%w: token file: %v", ErrBadConfig, err)
	}
	if len(tf.Tokens) == 0 {
		return nil, fmt.Errorf("%w: token file: no tokens", ErrBadConfig)
	}
	// An "expires_at" given empty is refused, not read as "never": whoever
	// wrote the key meant an expiry.
	var keys struct{ Tokens []map[string]json.RawMessage }
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("%w: token file: %v", ErrBadConfig, err)
	}
	t := &Tokens{byHash: map[[32]byte]tokenEntry{}, now: time.Now}
	for i, e := range tf.Tokens {
		h, err := hex.DecodeString(e.TokenSHA256)
		if err != nil || len(h) != 32 {
			return nil, fmt.Errorf("%w: token file: tokens[%d].token_sha256: want 64 hex digits", ErrBadConfig, i)
		}
		var p principalFile
		if err := decodeStrict(e.Principal, &p); err != nil {
			return nil, fmt.Errorf("%w: token file: tokens[%d].principal: %v", ErrBadConfig, i, err)
		}
		if _, err := p.identity(""); err != nil {
			return nil, fmt.Errorf("token file: tokens[%d]: %w", i, err)
		}
		exp, err := parseExpiresAt(e.ExpiresAt)
		if _, given := keys.Tokens[i]["expires_at"]; given && e.ExpiresAt == "" {
			err = errors.New("empty (omit the key for a token that never expires)")
		}
		if err != nil {
			return nil, fmt.Errorf("%w: token file: tokens[%d].expires_at: %v", ErrBadConfig, i, err)
		}
		key := [32]byte(h)
		if _, dup := t.byHash[key]; dup {
			return nil, fmt.Errorf("%w: token file: tokens[%d]: duplicate token", ErrBadConfig, i)
		}
		t.byHash[key] = tokenEntry{principal: p, expires: exp}
	}
	return t, nil
}

// parseExpiresAt parses a TokenEntry's ExpiresAt: empty is never (the zero
// time); anything else must be RFC 3339 in UTC with whole seconds, the one
// form 'custos token new' writes, so that a file reads the same to every
// reader (no offsets, no fractions to round).
func parseExpiresAt(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil || t.Location() != time.UTC || t.Format(time.RFC3339) != s {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time in UTC with whole seconds (e.g. 2027-01-06T03:00:00Z)", s)
	}
	return t, nil
}

// tokenInfoKey is the TokenInfo.Extra key under which the verifier stores
// the caller's Identity.
const tokenInfoKey = "custos.identity"

// Verify is an auth.TokenVerifier: it maps a bearer token to its Identity.
// The comparison is made on SHA-256 digests in constant time per entry.
// A token at or past its expires_at is refused as an unknown one is
// (auth.ErrInvalidToken, the same 401 and challenge); only the request's
// auth/reject record tells it apart, as "http_401,invalid_token,expired"
// (an OAuth token's expiry is recorded alike).
func (t *Tokens) Verify(_ context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
	sum := sha256.Sum256([]byte(token))
	var found *tokenEntry
	for h, e := range t.byHash {
		if subtle.ConstantTimeCompare(h[:], sum[:]) == 1 {
			found = &e
		}
	}
	if found == nil {
		return nil, auth.ErrInvalidToken
	}
	if !found.expires.IsZero() && !t.now().Before(found.expires) {
		if r != nil {
			if c := callerOf(r); c != nil {
				c.expired = true
			}
		}
		return nil, auth.ErrInvalidToken
	}
	id, err := found.principal.identity(clientaddr.Of(r))
	if err != nil {
		return nil, auth.ErrInvalidToken
	}
	id.expires = found.expires // a subscription's notifications stop then too
	exp := found.expires
	if exp.IsZero() {
		exp = t.now().Add(time.Hour) // a token without expires_at never expires; the SDK requires a value
	}
	return &auth.TokenInfo{
		UserID:     id.Principal.Sub,
		Expiration: exp,
		Extra:      map[string]any{tokenInfoKey: id},
	}, nil
}

// identityFunc extracts the caller of one MCP request. With an error, the
// Identity it returns may still name who made the request (the principal
// of a token that verified, and its source address) for the refusal's
// record only; it never decides anything.
type identityFunc func(req mcp.Request) (Identity, error)

// fixedIdentity is the stdio identity: one principal for the whole process.
func fixedIdentity(id Identity) identityFunc {
	return func(mcp.Request) (Identity, error) { return id, nil }
}

// bearerIdentity reads the Identity the token verifier attached.
func bearerIdentity(req mcp.Request) (Identity, error) {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return Identity{}, ErrNoIdentity
	}
	id, ok := extra.TokenInfo.Extra[tokenInfoKey].(Identity)
	if !ok {
		return Identity{}, ErrNoIdentity
	}
	id.Principal.Roles = slices.Clone(id.Principal.Roles)
	return id, nil
}
