package btg

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/store"
	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// DefaultMaxTTL caps how long a grant may last unless configured otherwise.
const DefaultMaxTTL = 4 * time.Hour

// CeilingTTL is the longest MaxTTL a deployment may configure:
// break-the-glass is emergency access, not a standing permission.
const CeilingTTL = 24 * time.Hour

// Event kinds, also the audit actions the server writes for them.
const (
	KindGrant  = "btg/grant"
	KindRevoke = "btg/revoke"
	KindExpire = "btg/expire"
	KindReview = "btg/review"
	// KindRefuse: the server refused a grant it found in the file that
	// breaks its Rules (TTL above the cap, operator role not allowed). The
	// grant never takes effect.
	KindRefuse = "btg/refuse"
)

// Refusal codes: why the server refused a grant (Grant.Refused, the
// refused= part of a btg/refuse record).
const (
	RefusedTTL  = "ttl_over_cap"
	RefusedRole = "role_not_allowed"
	// RefusedNoTenant: the grant names no tenant (written by a custos
	// before grants named their tenant, or an edited file). Patient ids
	// are unique within a tenant only, so such a grant cannot say whose
	// records it opens: it applies nowhere (Grant.Active), and the server
	// refuses it while it would still be in force.
	RefusedNoTenant = "no_tenant"
	// RefusedBadTenant: the grant's tenant is no tenant name (an edited
	// file: 'btg grant' writes none such), e.g. one with a space, a
	// control character or over 63 bytes. No URI names such a tenant, so
	// the grant covers nothing (Active is false); the server refuses it
	// like one without a tenant.
	RefusedBadTenant = "bad_tenant"
)

// Review verdicts.
const (
	VerdictAppropriate   = "appropriate"
	VerdictInappropriate = "inappropriate"
)

var (
	// ErrBadGrant is returned for a grant, revocation or review that is
	// incomplete or not allowed (no reason, TTL above the cap, unknown
	// verdict). Nothing is written.
	ErrBadGrant = errors.New("btg: invalid")
	// ErrNotFound is returned for an unknown grant id.
	ErrNotFound = errors.New("btg: no such grant")
	// ErrLocked is returned when another process holds the file longer
	// than the timeout.
	ErrLocked = errors.New("btg: grants file is locked by another process")
)

// Grant is one break-the-glass authorization.
type Grant struct {
	ID      string `json:"id"`
	Sub     string `json:"sub"`
	Patient string `json:"patient"`
	// Tenant is the tenant of the patient: the grant covers only that
	// tenant's resources of Patient (patient ids are unique within a
	// tenant, not across tenants). "" only in grants written before
	// grants named their tenant (or in an edited file): such a grant
	// covers nothing (Active is false) and the server refuses it
	// (RefusedNoTenant); the operator grants again with the tenant.
	Tenant string `json:"tenant,omitempty"`
	Reason string `json:"reason"`
	By     string `json:"by"`
	// ByRole is the operator's role that allowed the grant (one of
	// Rules.GrantRoles); "" when the rules name no roles.
	ByRole  string    `json:"by_role,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	Revoked time.Time `json:"revoked,omitzero"`
	// RevokedBy is the OS account that revoked the grant (Actor.Account);
	// RevokedByClaimed whom that account named (Actor.Claimed), if anyone.
	RevokedBy        string `json:"revoked_by,omitempty"`
	RevokedByClaimed string `json:"revoked_by_claimed,omitempty"`
	RevokeReason     string `json:"revoke_reason,omitempty"`
	ExpiryEvent      bool   `json:"expiry_event,omitempty"` // the expiry has been put in the outbox
	// Refused is set by the server when the grant breaks its Rules
	// (RefusedTTL, RefusedRole): the grant never takes effect.
	Refused string   `json:"refused,omitempty"`
	Uses    []Use    `json:"uses,omitempty"`
	Reviews []Review `json:"reviews,omitempty"`
}

// Active reports whether g authorizes access at t. A grant without a
// tenant, or whose tenant is no tenant name, never does: it cannot say
// which tenant's patient it names.
func (g Grant) Active(t time.Time) bool {
	return validTenant(g.Tenant) && g.Revoked.IsZero() && g.Refused == "" && !t.Before(g.Created) && t.Before(g.Expires)
}

// InForceWithoutTenant counts the grants of gs that name no tenant and
// would be in force at t but for that (not revoked, not refused for
// another reason, not expired): grants an operator may believe open a
// patient's records while they open nothing. 'custos btg list', 'btg
// review' and serve's start-up warn with this count (no id, no patient).
func InForceWithoutTenant(gs []Grant, t time.Time) int {
	n := 0
	for _, g := range gs {
		if g.Tenant == "" && g.Revoked.IsZero() && (g.Refused == "" || g.Refused == RefusedNoTenant) && t.Before(g.Expires) {
			n++
		}
	}
	return n
}

// TTL is the grant's duration: its expiry minus its creation.
func (g Grant) TTL() time.Duration { return g.Expires.Sub(g.Created) }

// MarshalJSON adds the grant's duration ("ttl", a Go duration) to its
// fields, so that every rendering of a grant carries its expiry and
// duration. The duration is derived, never read back: Expires and Created
// are the record.
func (g Grant) MarshalJSON() ([]byte, error) {
	type fields Grant
	return json.Marshal(struct {
		fields
		TTL string `json:"ttl"`
	}{fields(g), g.TTL().String()})
}

// Rules are a deployment's break-the-glass rules. They are server
// configuration (serve's btg.max_ttl and btg.grant_roles; docs/policy.md,
// "Break-the-glass"), never an argument of the granting command: the
// server publishes them in the grants file (Store.Publish) for the CLI to
// enforce, and checks every grant it finds against its own copy.
type Rules struct {
	// MaxTTL caps grant durations; 0 means DefaultMaxTTL.
	MaxTTL time.Duration `json:"max_ttl"`
	// GrantRoles are the operator roles allowed to grant (the operator's
	// roles are the OS groups of the account running 'custos btg grant');
	// empty means any operator who can write the grants file.
	GrantRoles []string `json:"grant_roles,omitempty"`
}

// DefaultRules apply where no rules were configured or published.
func DefaultRules() Rules { return Rules{MaxTTL: DefaultMaxTTL} }

func (r Rules) maxTTL() time.Duration {
	if r.MaxTTL <= 0 {
		return DefaultMaxTTL
	}
	return r.MaxTTL
}

// Refusal says why g breaks r (RefusedTTL, RefusedRole), or "" when it
// does not. It is the server's check of every grant it finds in the file,
// however it got there (an older CLI, an edited file).
func (r Rules) Refusal(g Grant) string {
	if ttl := g.TTL(); ttl <= 0 || ttl > r.maxTTL() {
		return RefusedTTL
	}
	if len(r.GrantRoles) > 0 && !slices.Contains(r.GrantRoles, g.ByRole) {
		return RefusedRole
	}
	return ""
}

// grantingRole is the first of roles (sorted) that r allows to grant; ""
// and true when r names no roles.
func (r Rules) grantingRole(roles []string) (string, bool) {
	if len(r.GrantRoles) == 0 {
		return "", true
	}
	for _, role := range slices.Sorted(slices.Values(roles)) {
		if slices.Contains(r.GrantRoles, role) {
			return role, true
		}
	}
	return "", false
}

// Reviewed reports whether every use has been signed off (a grant with no
// use needs no review).
func (g Grant) Reviewed() bool {
	if len(g.Uses) == 0 {
		return true
	}
	last := g.Uses[len(g.Uses)-1].Time
	for _, r := range g.Reviews {
		if !r.Time.Before(last) {
			return true
		}
	}
	return false
}

// Use is one audited access made under a grant.
type Use struct {
	EventID string    `json:"event_id"`      // the audit record's event id
	Seq     uint64    `json:"seq,omitempty"` // the audit record's seq
	Time    time.Time `json:"time"`
	Action  string    `json:"action"`
	Outcome string    `json:"outcome"`
}

// Review is the privacy officer's sign-off on a grant's uses.
type Review struct {
	// Reviewer is the OS account that signed off (Actor.Account);
	// ReviewerClaimed whom that account named (Actor.Claimed), if anyone.
	Reviewer        string    `json:"reviewer"`
	ReviewerClaimed string    `json:"reviewer_claimed,omitempty"`
	Verdict         string    `json:"verdict"`
	Note            string    `json:"note"`
	Time            time.Time `json:"time"`
}

// Actor is who revokes or signs off a grant: Account is the OS account
// running the command, the identity the OS vouches for (as for a grant's
// operator); Claimed is whom the operator says they act as or for
// (--by, --reviewer), recorded as given beside the account and never in
// its place ("" when they name no one).
type Actor struct {
	Account, Claimed string
}

// Event is a change waiting to be written to the audit log. Its fields are
// structured: what custos produced (ids, times, durations, counts) is kept
// as it is, and the one free-text field, Text, was scrubbed of identifiers
// (minimize.ScrubString) before the event was stored. AuditReason renders
// the event for the audit record without scrubbing anything again.
type Event struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	GrantID string `json:"grant_id"`
	Sub     string `json:"sub"`              // the grantee
	Tenant  string `json:"tenant,omitempty"` // the grant's tenant (Grant.Tenant)
	Patient string `json:"patient"`          // opaque id; pseudonymized in the audit log
	Actor   string `json:"actor"`            // who acted: the operator's or reviewer's OS account, "custos" for expiry
	// Claimed is whom the acting account named (Actor.Claimed; revoke and
	// review events): a claim, never the actor.
	Claimed string `json:"claimed,omitempty"`
	// Expires and TTL are the grant's expiry and duration (grant and
	// expiry events).
	Expires time.Time     `json:"expires,omitzero"`
	TTL     time.Duration `json:"ttl,omitempty"`
	// ByRole is the operator role that allowed the grant (grant events).
	ByRole string `json:"by_role,omitempty"`
	// Refused and MaxTTL: why the server refused the grant, and the cap
	// it applied (refuse events).
	Refused string        `json:"refused,omitempty"`
	MaxTTL  time.Duration `json:"max_ttl,omitempty"`
	Verdict string        `json:"verdict,omitempty"` // review events
	Uses    int           `json:"uses,omitempty"`    // uses recorded so far (review, expiry)
	// Text is the operator's free text: the grant or revocation reason, the
	// review note. Scrubbed before it was stored.
	Text string `json:"text,omitempty"`
	// Detail is the pre-structured form an older custos left in the outbox:
	// free text mixed with values. Only such legacy events carry it, and
	// AuditReason scrubs it as that version did.
	Detail string    `json:"detail,omitempty"`
	Time   time.Time `json:"time"`
}

// AuditReason is the reason of the event's audit record:
//
//	grant=<id> grantee=<sub> [tenant=<tenant>] [expires=<RFC3339> ttl=<duration>] [by_role=<role>] [refused=<code> [max_ttl=<duration>]] [verdict=<v>] [uses=<n>] [claimed_by=<quoted name>] [reason=<quoted text>|note=<quoted text>]
//
// The expiry, duration and refusal are custos's own values and appear
// verbatim; the quoted text was scrubbed when it was stored. claimed_by is
// whom the acting OS account (the record's principal) named, Go-quoted as
// given: a claim beside the account. The grant id, grantee and role come
// from grants.db, which can be edited: each is verbatim when plain (as
// 'btg grant' writes them), else Go-quoted (quotedUnlessPlain); the tenant
// is verbatim when it is a tenant name, else Go-quoted.
func (e Event) AuditReason() string {
	parts := []string{"grant=" + quotedUnlessPlain(e.GrantID), "grantee=" + quotedUnlessPlain(e.Sub)}
	if e.Detail != "" && e.Text == "" && e.Expires.IsZero() && e.Verdict == "" {
		// Legacy outbox event: its detail was never scrubbed at intake.
		return strings.Join(append(parts, minimize.ScrubString(e.Detail)), " ")
	}
	if e.Tenant != "" {
		// Verbatim when it is a tenant name ('btg grant' writes no other);
		// Go-quoted otherwise: grants.db can be edited, and a stored
		// tenant with a space or a quote must not pass for further fields
		// (`a claimed_by="…"`) of the record.
		t := e.Tenant
		if !validTenant(t) {
			t = strconv.Quote(t)
		}
		parts = append(parts, "tenant="+t)
	}
	if !e.Expires.IsZero() {
		parts = append(parts, "expires="+e.Expires.UTC().Format(time.RFC3339))
	}
	if e.TTL != 0 {
		parts = append(parts, "ttl="+e.TTL.String())
	}
	if e.ByRole != "" {
		parts = append(parts, "by_role="+quotedUnlessPlain(e.ByRole))
	}
	if e.Refused != "" {
		parts = append(parts, "refused="+e.Refused)
		if e.MaxTTL > 0 {
			parts = append(parts, "max_ttl="+e.MaxTTL.String())
		}
	}
	if e.Verdict != "" {
		parts = append(parts, "verdict="+e.Verdict)
	}
	if e.Kind == KindReview || e.Kind == KindExpire {
		parts = append(parts, "uses="+strconv.Itoa(e.Uses))
	}
	if e.Claimed != "" {
		parts = append(parts, "claimed_by="+strconv.Quote(e.Claimed))
	}
	if e.Text != "" {
		key := "reason="
		if e.Kind == KindReview {
			key = "note="
		}
		parts = append(parts, key+strconv.Quote(e.Text))
	}
	return strings.Join(parts, " ")
}

// quotedUnlessPlain is s verbatim when it has no space, quote, control or
// invisible character (every grant id, grantee and role 'btg grant'
// writes), else Go-quoted: the grant id, grantee and role of a revoke,
// review, expiry or refusal event come from grants.db, which can be
// edited, and a value such as `dr claimed_by="x"` must not pass for
// further fields of the record.
func quotedUnlessPlain(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '"' || !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// scrubText trims operator free text and removes identifiers from it
// before it is stored: a reason or note is outside text, and the grants
// file and the audit log must not keep an MRN or phone number typed there.
// ScrubString, not ScrubReason: the operator may type a telephone number in
// a UUID's or a digest's shape, which ScrubReason would keep.
func scrubText(s string) string {
	return minimize.ScrubString(strings.TrimSpace(s))
}

// Options configure Open.
type Options struct {
	// Timeout for the file lock (default 2 s).
	Timeout time.Duration
	// Rules, if not nil, are the rules to apply: the server's configured
	// ones (and tests'). nil means the rules the server published in the
	// file (Publish), or DefaultRules if it never did: what the CLI uses.
	Rules *Rules
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Store is the grants file. Each method opens and closes it.
type Store struct {
	path string
	opts Options
}

var (
	bucketGrants = []byte("grants")
	bucketOutbox = []byte("outbox")
	metaSeq      = []byte("outbox_seq")
	metaRules    = []byte("rules")
	bucketMeta   = []byte("meta")
)

// New returns the store at path (created on first write, mode 0600).
func New(path string, opts Options) *Store {
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{path: path, opts: opts}
}

// open opens the file for one operation, mapping a lock timeout to
// ErrLocked.
func (s *Store) open(readOnly bool) (*bolt.DB, error) {
	db, err := bolt.Open(s.path, 0o600, &bolt.Options{Timeout: s.opts.Timeout, ReadOnly: readOnly})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("btg: opening %s: %w", s.path, err)
	}
	return db, nil
}

func (s *Store) update(fn func(tx *bolt.Tx) error) error {
	db, err := s.open(false)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketGrants, bucketOutbox, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return fn(tx)
	})
}

func (s *Store) view(fn func(tx *bolt.Tx) error) error {
	if _, err := os.Stat(s.path); errors.Is(err, os.ErrNotExist) {
		return nil // no grant was ever made
	}
	db, err := s.open(true)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketGrants) == nil {
			return nil
		}
		return fn(tx)
	})
}

func putGrant(tx *bolt.Tx, g Grant) error {
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketGrants).Put([]byte(g.ID), b)
}

func getGrant(tx *bolt.Tx, id string) (Grant, error) {
	v := tx.Bucket(bucketGrants).Get([]byte(id))
	if v == nil {
		return Grant{}, ErrNotFound
	}
	var g Grant
	if err := json.Unmarshal(v, &g); err != nil {
		return Grant{}, fmt.Errorf("btg: grant %s is corrupt: %w", id, err)
	}
	return g, nil
}

func enqueue(tx *bolt.Tx, e Event) error {
	meta := tx.Bucket(bucketMeta)
	var seq uint64
	if v := meta.Get(metaSeq); len(v) == 8 {
		seq = binary.BigEndian.Uint64(v)
	}
	seq++
	k := binary.BigEndian.AppendUint64(nil, seq)
	if err := meta.Put(metaSeq, k); err != nil {
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketOutbox).Put(k, b)
}

// rules returns the rules in force for this store: Options.Rules, else
// those published in the file, else DefaultRules.
func (s *Store) rules(tx *bolt.Tx) (Rules, error) {
	if s.opts.Rules != nil {
		return *s.opts.Rules, nil
	}
	if b := tx.Bucket(bucketMeta); b != nil {
		if v := b.Get(metaRules); v != nil {
			var r Rules
			if err := json.Unmarshal(v, &r); err != nil {
				return Rules{}, fmt.Errorf("btg: the published rules are corrupt: %w", err)
			}
			return r, nil
		}
	}
	return DefaultRules(), nil
}

// Publish records r in the file as the rules in force (the server's
// configuration), for the CLI to enforce. It writes only when they changed.
func (s *Store) Publish(r Rules) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	same := false
	if err := s.view(func(tx *bolt.Tx) error {
		if m := tx.Bucket(bucketMeta); m != nil {
			same = string(m.Get(metaRules)) == string(b)
		}
		return nil
	}); err != nil {
		return err
	}
	if same {
		return nil
	}
	return s.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaRules, b) })
}

// Rules returns the rules a grant made now must meet, and whether a server
// published them (false: DefaultRules, or Options.Rules).
func (s *Store) Rules() (Rules, bool, error) {
	if s.opts.Rules != nil {
		return *s.opts.Rules, false, nil
	}
	r, published := DefaultRules(), false
	err := s.view(func(tx *bolt.Tx) error {
		if m := tx.Bucket(bucketMeta); m == nil || m.Get(metaRules) == nil {
			return nil
		}
		published = true
		var err error
		r, err = s.rules(tx)
		return err
	})
	return r, published, err
}

// Request is what `custos btg grant` asks for.
type Request struct {
	Sub, Patient, Reason string
	// Tenant is the patient's tenant (the catalog's labels.tenant):
	// required, so that a grant never covers another tenant's patient of
	// the same id.
	Tenant string
	// By is the operator; Roles are the operator's roles (the OS groups of
	// the account running the command), checked against Rules.GrantRoles.
	By    string
	Roles []string
	TTL   time.Duration
}

// MinReasonLen is the fewest characters a grant's reason may have, once
// trimmed and scrubbed: enough to say why (CheckReason).
const MinReasonLen = 10

// CheckReason returns nil when reason says why enough for a grant: at
// least MinReasonLen characters (not bytes) as Grant stores it, trimmed
// and scrubbed of identifiers (scrubText: a telephone number becomes
// "[PHONE]"), not counting the tokens the scrub put in their place
// (minimize.ScrubTokens): a reason that was identifiers alone ("555-867-5309
// a@b.io", stored "[PHONE] [EMAIL]") says nothing of why, however long.
// Otherwise it returns an ErrBadGrant error giving the count, never the
// reason. It is the one rule: Grant applies it, and a caller that checks a
// reason before it opens anything (custos btg grant) calls it rather than
// a rule of its own.
func CheckReason(reason string) error {
	if n := reasonLen(scrubText(reason)); n < MinReasonLen {
		return fmt.Errorf("%w: the reason is required and must say why in at least %d characters once trimmed and scrubbed of identifiers, the identifiers' placeholders not counted, got %d",
			ErrBadGrant, MinReasonLen, n)
	}
	return nil
}

// reasonLen is the length in characters of the scrubbed reason s without
// the scrub's tokens, trimmed.
func reasonLen(s string) int {
	for _, t := range scrubTokens {
		s = strings.ReplaceAll(s, t, "")
	}
	return utf8.RuneCountInString(strings.TrimSpace(s))
}

// scrubTokens are minimize.ScrubTokens, once.
var scrubTokens = minimize.ScrubTokens()

// Grant records a new grant and its event. The reason is required, the TTL
// may not exceed the rules' MaxTTL and, when the rules name roles allowed
// to grant, the operator must hold one (checked in the transaction that
// writes the grant, against the rules in force; see Options.Rules).
func (s *Store) Grant(r Request) (Grant, error) {
	if r.Sub == "" || r.Patient == "" || r.Tenant == "" || r.By == "" {
		return Grant{}, fmt.Errorf("%w: a grant needs the user, the patient, the patient's tenant and the operator", ErrBadGrant)
	}
	if err := CheckReason(r.Reason); err != nil {
		return Grant{}, err
	}
	r.Reason = scrubText(r.Reason)
	switch {
	case r.TTL <= 0:
		return Grant{}, fmt.Errorf("%w: the TTL must be positive", ErrBadGrant)
	}
	if !validTenant(r.Tenant) {
		return Grant{}, fmt.Errorf("%w: the tenant must be a tenant name ([a-z0-9][a-z0-9-]{0,62})", ErrBadGrant)
	}
	if !validPatientID(r.Patient) {
		return Grant{}, fmt.Errorf("%w: the patient must be a patient id (a FHIR id: letters, digits, '-' and '.', at most 64)", ErrBadGrant)
	}
	now := s.opts.Now().UTC()
	g := Grant{ID: uuid.NewString(), Sub: r.Sub, Patient: r.Patient, Tenant: r.Tenant, Reason: r.Reason, By: r.By,
		Created: now, Expires: now.Add(r.TTL)}
	err := s.update(func(tx *bolt.Tx) error {
		rules, err := s.rules(tx)
		if err != nil {
			return err
		}
		if r.TTL > rules.maxTTL() {
			return fmt.Errorf("%w: TTL %s exceeds the maximum %s (the server's btg.max_ttl)", ErrBadGrant, r.TTL, rules.maxTTL())
		}
		role, ok := rules.grantingRole(r.Roles)
		if !ok {
			return fmt.Errorf("%w: operator %s holds none of the roles allowed to grant (the server's btg.grant_roles: %s)",
				ErrBadGrant, r.By, strings.Join(rules.GrantRoles, ", "))
		}
		g.ByRole = role
		if err := putGrant(tx, g); err != nil {
			return err
		}
		return enqueue(tx, Event{ID: uuid.NewString(), Kind: KindGrant, GrantID: g.ID, Sub: g.Sub, Tenant: g.Tenant, Patient: g.Patient,
			Actor: r.By, Expires: g.Expires, TTL: g.TTL(), ByRole: g.ByRole, Text: g.Reason, Time: now})
	})
	if err != nil {
		return Grant{}, err
	}
	return g, nil
}

// validPatientID reports whether s has the form of a patient id a
// resource's labels name: custos's own data names patients by UUID, FHIR
// input by the source Patient id, a FHIR id ([A-Za-z0-9\-\.]{1,64}),
// which a UUID is too.
func validPatientID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validTenant reports whether s is a tenant name: the rule of the URIs'
// authority, [a-z0-9][a-z0-9-]{0,62} (store.ValidTenant, docs/uris.md).
func validTenant(s string) bool { return store.ValidTenant(s) }

// Revoke ends a grant now. by.Account is the OS account revoking.
func (s *Store) Revoke(id string, by Actor, reason string) (Grant, error) {
	if by.Account == "" || strings.TrimSpace(reason) == "" {
		return Grant{}, fmt.Errorf("%w: a revocation needs the operator and a reason", ErrBadGrant)
	}
	now := s.opts.Now().UTC()
	var g Grant
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		if g, err = getGrant(tx, id); err != nil {
			return err
		}
		if !g.Revoked.IsZero() {
			return fmt.Errorf("%w: grant %s was already revoked at %s", ErrBadGrant, id, g.Revoked.Format(time.RFC3339))
		}
		g.Revoked, g.RevokedBy, g.RevokedByClaimed, g.RevokeReason = now, by.Account, by.Claimed, scrubText(reason)
		if err := putGrant(tx, g); err != nil {
			return err
		}
		return enqueue(tx, Event{ID: uuid.NewString(), Kind: KindRevoke, GrantID: g.ID, Sub: g.Sub, Tenant: g.Tenant, Patient: g.Patient,
			Actor: by.Account, Claimed: by.Claimed, Text: g.RevokeReason, Time: now})
	})
	return g, err
}

// ReviewGrant records the privacy officer's sign-off on a grant's uses.
// reviewer.Account is the OS account signing off.
func (s *Store) ReviewGrant(id string, reviewer Actor, verdict, note string) (Grant, error) {
	if reviewer.Account == "" {
		return Grant{}, fmt.Errorf("%w: the reviewer is required", ErrBadGrant)
	}
	if verdict != VerdictAppropriate && verdict != VerdictInappropriate {
		return Grant{}, fmt.Errorf("%w: verdict must be %s or %s", ErrBadGrant, VerdictAppropriate, VerdictInappropriate)
	}
	now := s.opts.Now().UTC()
	var g Grant
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		if g, err = getGrant(tx, id); err != nil {
			return err
		}
		if len(g.Uses) == 0 {
			return fmt.Errorf("%w: grant %s has no recorded use to review", ErrBadGrant, id)
		}
		g.Reviews = append(g.Reviews, Review{Reviewer: reviewer.Account, ReviewerClaimed: reviewer.Claimed, Verdict: verdict, Note: scrubText(note), Time: now})
		if err := putGrant(tx, g); err != nil {
			return err
		}
		return enqueue(tx, Event{ID: uuid.NewString(), Kind: KindReview, GrantID: g.ID, Sub: g.Sub, Tenant: g.Tenant, Patient: g.Patient,
			Actor: reviewer.Account, Claimed: reviewer.Claimed, Verdict: verdict, Uses: len(g.Uses), Text: scrubText(note), Time: now})
	})
	return g, err
}

// All returns every grant, newest first.
func (s *Store) All() ([]Grant, error) {
	var out []Grant
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketGrants).ForEach(func(k, v []byte) error {
			var g Grant
			if err := json.Unmarshal(v, &g); err != nil {
				return fmt.Errorf("btg: grant %s is corrupt: %w", k, err)
			}
			out = append(out, g)
			return nil
		})
	})
	slices.SortFunc(out, func(a, b Grant) int { return b.Created.Compare(a.Created) })
	return out, err
}

// Sync is the server's periodic step, in one transaction: it records the
// uses made since the last step, refuses every grant that breaks the rules
// in force (Options.Rules; a btg/refuse event, once, and the grant never
// takes effect), queues an expiry event for every grant whose expiry has
// passed, and returns the grants active now and the events waiting to be
// audited (with their outbox keys, for Delivered).
func (s *Store) Sync(uses map[string][]Use) (active []Grant, pending []Event, keys [][]byte, err error) {
	now := s.opts.Now().UTC()
	if len(uses) == 0 {
		// The common case, once a second: nothing to record. Read only, and
		// write only if a grant must be refused, an expiry announced or
		// events are waiting.
		busy := false
		err = s.view(func(tx *bolt.Tx) error {
			if k, _ := tx.Bucket(bucketOutbox).Cursor().First(); k != nil {
				busy = true
				return nil
			}
			rules, err := s.rules(tx)
			if err != nil {
				return err
			}
			return tx.Bucket(bucketGrants).ForEach(func(_, v []byte) error {
				var g Grant
				if err := json.Unmarshal(v, &g); err != nil {
					return err
				}
				switch classify(g, rules, now) {
				case grantActive:
					active = append(active, g)
				case grantRefuse, grantExpire:
					busy = true
				}
				return nil
			})
		})
		if err != nil || !busy {
			return active, nil, nil, err
		}
		active = nil
	}
	err = s.update(func(tx *bolt.Tx) error {
		for id, us := range uses {
			g, err := getGrant(tx, id)
			if err != nil {
				return err
			}
			g.Uses = append(g.Uses, us...)
			if err := putGrant(tx, g); err != nil {
				return err
			}
		}
		rules, err := s.rules(tx)
		if err != nil {
			return err
		}
		var changed []Grant
		err = tx.Bucket(bucketGrants).ForEach(func(_, v []byte) error {
			var g Grant
			if err := json.Unmarshal(v, &g); err != nil {
				return err
			}
			switch classify(g, rules, now) {
			case grantActive:
				active = append(active, g)
			case grantRefuse, grantExpire:
				changed = append(changed, g)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, g := range changed {
			ev := Event{ID: uuid.NewString(), GrantID: g.ID, Sub: g.Sub, Tenant: g.Tenant, Patient: g.Patient,
				Actor: "custos", Expires: g.Expires, TTL: g.TTL(), Uses: len(g.Uses), Time: now}
			if code := refusal(g, rules, now); code != "" {
				g.Refused, ev.Kind, ev.Refused, ev.ByRole = code, KindRefuse, code, g.ByRole
				if code == RefusedTTL {
					ev.MaxTTL = rules.maxTTL()
				}
			} else {
				g.ExpiryEvent, ev.Kind = true, KindExpire
			}
			if err := putGrant(tx, g); err != nil {
				return err
			}
			if err := enqueue(tx, ev); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketOutbox).ForEach(func(k, v []byte) error {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			pending = append(pending, e)
			keys = append(keys, slices.Clone(k))
			return nil
		})
	})
	return active, pending, keys, err
}

// What Sync does with a grant.
const (
	grantIdle   = iota // nothing: revoked, refused, announced, or not yet started
	grantActive        // in force now
	grantRefuse        // breaks the rules: refuse it
	grantExpire        // its expiry passed: announce it
)

// classify says what Sync does with g under rules at now. A grant is
// checked against the rules until it is revoked, refused or its expiry
// is announced, so that a grant that breaks them is refused even if it
// was written while no server ran.
func classify(g Grant, rules Rules, now time.Time) int {
	switch {
	case !g.Revoked.IsZero() || g.Refused != "" || g.ExpiryEvent:
		return grantIdle
	case refusal(g, rules, now) != "":
		return grantRefuse
	case g.Active(now):
		return grantActive
	case !now.Before(g.Expires):
		return grantExpire
	}
	return grantIdle
}

// refusal says why the server refuses g at now: a break of the rules
// (Rules.Refusal), or, for a grant that has not expired, RefusedNoTenant
// when it names no tenant and RefusedBadTenant when its tenant is no
// tenant name (one that expired is announced as expired: it was in force
// under the custos that wrote it, and its uses stay its own).
func refusal(g Grant, rules Rules, now time.Time) string {
	if code := rules.Refusal(g); code != "" {
		return code
	}
	switch {
	case !now.Before(g.Expires):
	case g.Tenant == "":
		return RefusedNoTenant
	case !validTenant(g.Tenant):
		return RefusedBadTenant
	}
	return ""
}

// Delivered removes audited events from the outbox.
func (s *Store) Delivered(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	return s.update(func(tx *bolt.Tx) error {
		for _, k := range keys {
			if err := tx.Bucket(bucketOutbox).Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}
