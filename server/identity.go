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
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
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

	// The dev token the caller authenticated with (nil otherwise): a
	// subscription's notifications stop when it leaves the token file.
	tokens *Tokens
	cred   *tokenEntry
}

// revoked reports whether the dev token id authenticated with is no longer
// in its token file as it was (revoked, or its entry edited).
func (id Identity) revoked() bool {
	return id.tokens != nil && !id.tokens.holds(id.cred)
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

// Identity is the identity e stands for (principal and purpose of use),
// checked as a token file's entry is.
func (e TokenEntry) Identity() (Identity, error) {
	var p principalFile
	if err := decodeStrict(e.Principal, &p); err != nil {
		return Identity{}, fmt.Errorf("%w: principal: %v", ErrBadConfig, err)
	}
	return p.identity("")
}

// Expires is e's ExpiresAt as a time (zero: the token never expires).
func (e TokenEntry) Expires() (time.Time, error) { return parseExpiresAt(e.ExpiresAt) }

// MinTokenLength is the shortest bearer token accepted into a token file.
const MinTokenLength = 32

// HashToken returns the hex SHA-256 of a bearer token, as stored in a
// TokenFile.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Tokens verifies dev bearer tokens. Build it with LoadTokenFile (which
// reloads the file when it changes) or ParseTokenFile.
//
// Invariant: a request is verified against one token set, the file as it
// was at its last successful load; a reload replaces the set whole. A file
// that no longer loads (unreadable, or invalid after an edit) leaves the
// previous set in force and is logged at error level, once per change.
type Tokens struct {
	cur atomic.Pointer[tokenSet]
	now func() time.Time // the clock expiries are checked on
	src *tokenSource     // nil: not read from a file, never reloaded
}

// tokenSet is one load of a token file.
type tokenSet struct {
	byHash map[[32]byte]*tokenEntry
}

// tokenEntry is a validated TokenEntry. A reload keeps the *tokenEntry of
// an entry whose token, principal and expiry are unchanged, so that a
// credential (Identity.cred) stays current exactly as long as its entry
// stays in the file unchanged.
type tokenEntry struct {
	key       [32]byte
	raw       string // the principal as decoded, re-encoded
	principal principalFile
	expires   time.Time // zero: never
}

// tokenSource is the file a Tokens was loaded from, checked for a change at
// most once a second, on a request.
type tokenSource struct {
	path string
	log  *slog.Logger
	next atomic.Int64 // unix nanoseconds from which the next check is due

	mu       sync.Mutex // one check at a time
	stat     os.FileInfo
	failing  bool        // the last check could not load the file
	failStat os.FileInfo // the file as it was when that was logged (nil: no file)
}

// tokenCheckInterval is how often a served token file is checked for a
// change.
const tokenCheckInterval = time.Second

// Unexpiring is how many of the file's tokens have no expires_at: tokens
// that verify until they are removed from the file.
func (t *Tokens) Unexpiring() int {
	n := 0
	for _, e := range t.cur.Load().byHash {
		if e.expires.IsZero() {
			n++
		}
	}
	return n
}

// LoadTokenFile reads and validates a TokenFile. Every entry must be valid;
// an invalid file changes nothing and is reported with the entry's index.
// The Tokens it returns reloads the file when it changes (its modification
// time, size or inode; checked at most once a second, on a request, and at
// once by Reload), so that a token added or revoked ('custos token new',
// 'custos token revoke') takes effect without a restart. log (nil: quiet)
// hears of reloads and of a file that no longer loads.
func LoadTokenFile(path string, log *slog.Logger) (*Tokens, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fi, set, err := readTokenFile(path, nil)
	if err != nil {
		return nil, err
	}
	t := &Tokens{now: time.Now, src: &tokenSource{path: path, log: log, stat: fi}}
	t.cur.Store(set)
	t.src.next.Store(time.Now().Add(tokenCheckInterval).UnixNano())
	return t, nil
}

// readTokenFile stats and parses path; entries unchanged from prev keep
// their *tokenEntry.
func readTokenFile(path string, prev *tokenSet) (os.FileInfo, *tokenSet, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: token file: %v", ErrBadConfig, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: token file: %v", ErrBadConfig, err)
	}
	set, err := parseTokenSet(data, prev)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return fi, set, nil
}

// ParseTokenFile is LoadTokenFile on bytes, without reloading.
func ParseTokenFile(data []byte) (*Tokens, error) {
	set, err := parseTokenSet(data, nil)
	if err != nil {
		return nil, err
	}
	t := &Tokens{now: time.Now}
	t.cur.Store(set)
	return t, nil
}

func parseTokenSet(data []byte, prev *tokenSet) (*tokenSet, error) {
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
	set := &tokenSet{byHash: make(map[[32]byte]*tokenEntry, len(tf.Tokens))}
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
		if _, dup := set.byHash[key]; dup {
			return nil, fmt.Errorf("%w: token file: tokens[%d]: duplicate token", ErrBadConfig, i)
		}
		// The principal as decoded, encoded again: how the file spells it
		// (spacing, escapes, which 'custos token new' and 'revoke' change
		// when they write the file anew) does not make it an edit.
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("%w: token file: tokens[%d].principal: %v", ErrBadConfig, i, err)
		}
		entry := &tokenEntry{key: key, raw: string(raw), principal: p, expires: exp}
		if prev != nil {
			if old := prev.byHash[key]; old != nil && old.raw == entry.raw && old.expires.Equal(entry.expires) {
				entry = old
			}
		}
		set.byHash[key] = entry
	}
	return set, nil
}

// maybeReload checks the token file for a change once tokenCheckInterval
// has passed since the last check; one caller checks, the others go on
// with the current set.
func (t *Tokens) maybeReload() {
	src := t.src
	if src == nil {
		return
	}
	now := time.Now().UnixNano()
	next := src.next.Load()
	if now < next || !src.next.CompareAndSwap(next, now+int64(tokenCheckInterval)) {
		return
	}
	t.reload(false)
}

// Reload loads the token file now if it changed (SIGHUP). It returns the
// error that kept the previous tokens in force, nil if the file loaded or
// did not change; a Tokens not read from a file has nothing to reload.
func (t *Tokens) Reload() error {
	if t.src == nil {
		return nil
	}
	t.src.next.Store(time.Now().Add(tokenCheckInterval).UnixNano())
	return t.reload(true)
}

func (t *Tokens) reload(force bool) error {
	src := t.src
	src.mu.Lock()
	defer src.mu.Unlock()
	fi, err := os.Stat(src.path)
	if err == nil && sameStat(fi, src.stat) && !(force && src.failing) {
		return nil // unchanged
	}
	now := fi
	prev := t.cur.Load()
	var set *tokenSet
	if err == nil {
		fi, set, err = readTokenFile(src.path, prev)
	} else {
		err = fmt.Errorf("%w: token file: %v", ErrBadConfig, err)
	}
	if err != nil {
		if !src.failing || force || !sameStat(now, src.failStat) {
			// Once per change of the broken file. The error names the
			// file and the entry's index, never a digest or a principal.
			src.log.Error("token file changed but does not load; the tokens loaded before stay in force until it does", "file", src.path, "err", err)
		}
		src.failing, src.failStat = true, now
		return err
	}
	added, removed := 0, 0
	for k, e := range set.byHash {
		if prev.byHash[k] != e {
			added++
		}
	}
	for k, e := range prev.byHash {
		if set.byHash[k] != e {
			removed++
		}
	}
	src.stat, src.failing = fi, false
	t.cur.Store(set)
	if added+removed > 0 {
		src.log.Info("token file reloaded", "file", src.path, "tokens", len(set.byHash), "added_or_changed", added, "removed_or_changed", removed)
	}
	return nil
}

// sameStat reports whether a and b (nil: no file) describe the same file
// unchanged: the same inode, modification time and size.
func sameStat(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}

// holds reports whether e is still an entry of the current set, unchanged:
// false once its token was revoked or its principal or expiry edited.
func (t *Tokens) holds(e *tokenEntry) bool {
	t.maybeReload()
	return t.cur.Load().byHash[e.key] == e
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
	t.maybeReload()
	sum := sha256.Sum256([]byte(token))
	var found *tokenEntry
	for h, e := range t.cur.Load().byHash {
		if subtle.ConstantTimeCompare(h[:], sum[:]) == 1 {
			found = e
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
	id.expires = found.expires    // a subscription's notifications stop then too
	id.tokens, id.cred = t, found // and when the token is revoked
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
