package btg

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

const patient = "0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f"

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newStore(t *testing.T) (*Store, *clock) {
	c := &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	return New(filepath.Join(t.TempDir(), "grants.db"), Options{Rules: &Rules{MaxTTL: time.Hour}, Now: c.now}), c
}

func TestGrantValidation(t *testing.T) {
	s, _ := newStore(t)
	for _, tc := range []struct {
		name string
		r    Request
		want string
	}{
		{"no reason", Request{Sub: "dr", Patient: patient, Tenant: "general-hospital", By: "op", TTL: time.Minute}, "reason is required"},
		{"short reason", Request{Sub: "dr", Patient: patient, Tenant: "general-hospital", By: "op", Reason: "er", TTL: time.Minute}, "reason is required"},
		{"ttl over cap", Request{Sub: "dr", Patient: patient, Tenant: "general-hospital", By: "op", Reason: "cardiac arrest in ED", TTL: 2 * time.Hour}, "exceeds the maximum 1h0m0s (the server's btg.max_ttl)"},
		{"no ttl", Request{Sub: "dr", Patient: patient, Tenant: "general-hospital", By: "op", Reason: "cardiac arrest in ED"}, "must be positive"},
		{"not an id", Request{Sub: "dr", Patient: "Jane Doe", Tenant: "general-hospital", By: "op", Reason: "cardiac arrest in ED", TTL: time.Minute}, "must be a patient id"},
		{"no operator", Request{Sub: "dr", Patient: patient, Tenant: "general-hospital", Reason: "cardiac arrest in ED", TTL: time.Minute}, "operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Grant(tc.r); !errors.Is(err, ErrBadGrant) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if all, err := s.All(); err != nil || len(all) != 0 {
		t.Fatalf("refused grants were written: %v %v", all, err)
	}
}

func TestLifecycle(t *testing.T) {
	s, c := newStore(t)
	g, err := s.Grant(Request{Sub: "dr-a", Patient: patient, Tenant: "general-hospital", By: "op-1", Reason: "unconscious patient in ED", TTL: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	active, pending, keys, err := s.Sync(nil)
	if err != nil || len(active) != 1 || active[0].ID != g.ID || len(pending) != 1 || pending[0].Kind != KindGrant {
		t.Fatalf("after grant: active %v pending %v err %v", active, pending, err)
	}
	if err := s.Delivered(keys); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReviewGrant(g.ID, Actor{Account: "po"}, VerdictAppropriate, "ok"); !errors.Is(err, ErrBadGrant) {
		t.Fatalf("review without uses: %v", err)
	}
	c.t = c.t.Add(time.Minute)
	uses := map[string][]Use{g.ID: {{EventID: "e1", Time: c.t, Action: "resources/read", Outcome: "allow"}}}
	if _, pending, _, err = s.Sync(uses); err != nil || len(pending) != 0 {
		t.Fatalf("uses: %v %v", pending, err)
	}
	all, _ := s.All()
	if len(all[0].Uses) != 1 || all[0].Reviewed() {
		t.Fatalf("grant after a use: %+v", all[0])
	}
	// Expiry: one event, once.
	c.t = c.t.Add(30 * time.Minute)
	active, pending, keys, err = s.Sync(nil)
	if err != nil || len(active) != 0 || len(pending) != 1 || pending[0].Kind != KindExpire || !strings.Contains(pending[0].AuditReason(), "uses=1") {
		t.Fatalf("expiry: active %v pending %v err %v", active, pending, err)
	}
	s.Delivered(keys)
	if _, pending, _, _ = s.Sync(nil); len(pending) != 0 {
		t.Fatalf("expiry announced twice: %v", pending)
	}
	// Review.
	if _, err := s.ReviewGrant(g.ID, Actor{Account: "po"}, "fine", ""); !errors.Is(err, ErrBadGrant) {
		t.Fatalf("unknown verdict: %v", err)
	}
	if g2, err := s.ReviewGrant(g.ID, Actor{Account: "po"}, VerdictAppropriate, "documented in chart"); err != nil || !g2.Reviewed() {
		t.Fatalf("review: %v %+v", err, g2)
	}
	if _, pending, _, _ = s.Sync(nil); len(pending) != 1 || pending[0].Kind != KindReview || pending[0].Actor != "po" {
		t.Fatalf("review event: %v", pending)
	}
}

func TestRevoke(t *testing.T) {
	s, _ := newStore(t)
	g, _ := s.Grant(Request{Sub: "dr-a", Patient: patient, Tenant: "general-hospital", By: "op-1", Reason: "unconscious patient in ED", TTL: 30 * time.Minute})
	if _, err := s.Revoke(g.ID, Actor{Account: "op-2"}, ""); !errors.Is(err, ErrBadGrant) {
		t.Fatalf("revoke without reason: %v", err)
	}
	if _, err := s.Revoke(g.ID, Actor{Account: "op-2"}, "patient stable, regular access arranged"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(g.ID, Actor{Account: "op-2"}, "again"); !errors.Is(err, ErrBadGrant) {
		t.Fatalf("second revoke: %v", err)
	}
	active, pending, _, _ := s.Sync(nil)
	if len(active) != 0 || len(pending) != 2 || pending[1].Kind != KindRevoke {
		t.Fatalf("after revoke: active %v pending %v", active, pending)
	}
	if _, err := s.Revoke("nope", Actor{Account: "op"}, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown grant: %v", err)
	}
}

func TestLockedFile(t *testing.T) {
	s, _ := newStore(t)
	s.opts.Timeout = 100 * time.Millisecond
	db, err := bolt.Open(s.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := s.Grant(Request{Sub: "dr", Patient: patient, Tenant: "general-hospital", By: "op", Reason: "unconscious patient in ED", TTL: time.Minute}); !errors.Is(err, ErrLocked) {
		t.Fatalf("locked: %v", err)
	}
}

func TestCache(t *testing.T) {
	c := NewCache()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	if _, ok := c.Lookup("dr", "tenant-a", patient, now); ok {
		t.Fatal("empty cache grants access")
	}
	g := Grant{ID: "g1", Sub: "dr", Patient: patient, Tenant: "tenant-a", Created: now.Add(-time.Minute), Expires: now.Add(time.Minute)}
	c.Replace([]Grant{g})
	if id, ok := c.Lookup("dr", "tenant-a", patient, now); !ok || id != "g1" {
		t.Fatalf("lookup: %q %v", id, ok)
	}
	if _, ok := c.Lookup("dr", "tenant-a", patient, now.Add(2*time.Minute)); ok {
		t.Fatal("an expired grant still works between syncs")
	}
	if _, ok := c.Lookup("other", "tenant-a", patient, now); ok {
		t.Fatal("a grant for one user works for another")
	}
	// Patient ids are unique within a tenant only (FHIR source ids such as
	// "p1"): a grant for tenant-a's patient is no grant for tenant-b's
	// patient of the same id. Found by probe-btg: the grant named no
	// tenant, and a clinician of tenant-b read tenant-b's p1 under a grant
	// made from a URI of tenant-a.
	if _, ok := c.Lookup("dr", "tenant-b", patient, now); ok {
		t.Fatal("a grant for tenant-a's patient works for tenant-b's patient of the same id")
	}
	// A grant that names no tenant (written before grants named their
	// tenant, or an edited file) covers the patient in no tenant: a grant
	// for patient X of tenant-a let the clinician read tenant-b's X.
	c.Replace([]Grant{{ID: "g0", Sub: "dr", Patient: patient, Created: now.Add(-time.Minute), Expires: now.Add(time.Minute)}})
	for _, tenant := range []string{"tenant-a", "tenant-b", ""} {
		if id, ok := c.Lookup("dr", tenant, patient, now); ok {
			t.Fatalf("a grant without a tenant covers tenant %q's patient (%s)", tenant, id)
		}
	}
	c.Replace([]Grant{g})
	c.Used("g1", Use{EventID: "e1"})
	u := c.TakeUses()
	if len(u["g1"]) != 1 || len(c.TakeUses()) != 0 {
		t.Fatalf("uses: %v", u)
	}
	c.Return(u)
	if len(c.TakeUses()["g1"]) != 1 {
		t.Fatal("returned uses lost")
	}
}

// TestIdleSyncDoesNotWrite: the server's once-a-second Sync reads only when
// nothing changed (no fsync per second on an idle server).
func TestIdleSyncDoesNotWrite(t *testing.T) {
	s, _ := newStore(t)
	g, _ := s.Grant(Request{Sub: "dr-a", Patient: patient, Tenant: "general-hospital", By: "op-1", Reason: "unconscious patient in ED", TTL: 30 * time.Minute})
	_, _, keys, err := s.Sync(nil)
	if err != nil || s.Delivered(keys) != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(s.path)
	active, pending, _, err := s.Sync(nil)
	after, _ := os.ReadFile(s.path)
	if err != nil || len(active) != 1 || active[0].ID != g.ID || len(pending) != 0 {
		t.Fatalf("idle sync: %v %v %v", active, pending, err)
	}
	if string(before) != string(after) {
		t.Fatal("an idle sync rewrote the grants file")
	}
}

// TestRulesArePublishedByTheServer: a store without rules of its own (the
// CLI) enforces what the server published, and the defaults before that.
func TestRulesArePublishedByTheServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grants.db")
	cli := New(path, Options{})
	req := Request{Sub: "dr", Patient: patient, Tenant: "general-hospital", By: "op", Reason: "cardiac arrest in ED", TTL: 5 * time.Hour}
	if r, published, err := cli.Rules(); err != nil || published || r.MaxTTL != DefaultMaxTTL {
		t.Fatalf("rules before any server: %+v %v %v", r, published, err)
	}
	if _, err := cli.Grant(req); !errors.Is(err, ErrBadGrant) || !strings.Contains(err.Error(), "exceeds the maximum 4h0m0s") {
		t.Fatalf("5h grant under the default cap: %v", err)
	}
	server := New(path, Options{Rules: &Rules{MaxTTL: 30 * time.Minute, GrantRoles: []string{"btg-operator"}}})
	if err := server.Publish(*server.opts.Rules); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	if err := server.Publish(*server.opts.Rules); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); string(before) != string(after) {
		t.Fatal("publishing the same rules again rewrote the file")
	}
	if r, published, err := cli.Rules(); err != nil || !published || r.MaxTTL != 30*time.Minute {
		t.Fatalf("published rules: %+v %v %v", r, published, err)
	}
	req.TTL, req.Roles = time.Hour, []string{"btg-operator"}
	if _, err := cli.Grant(req); !errors.Is(err, ErrBadGrant) || !strings.Contains(err.Error(), "exceeds the maximum 30m0s") {
		t.Fatalf("1h grant under a published 30m cap: %v", err)
	}
	req.TTL, req.Roles = 20*time.Minute, []string{"staff", "wheel"}
	if _, err := cli.Grant(req); !errors.Is(err, ErrBadGrant) || !strings.Contains(err.Error(), "btg.grant_roles: btg-operator") {
		t.Fatalf("grant by an operator without an allowed role: %v", err)
	}
	req.Roles = []string{"staff", "btg-operator"}
	g, err := cli.Grant(req)
	if err != nil || g.ByRole != "btg-operator" {
		t.Fatalf("allowed grant: %+v %v", g, err)
	}
	_, pending, _, _ := server.Sync(nil)
	if len(pending) != 1 || !strings.Contains(pending[0].AuditReason(), "ttl=20m0s by_role=btg-operator") {
		t.Fatalf("grant event: %+v", pending)
	}
	b, _ := json.Marshal(g)
	if !strings.Contains(string(b), `"ttl":"20m0s"`) || !strings.Contains(string(b), `"expires":`) {
		t.Fatalf("grant JSON lacks its duration or expiry: %s", b)
	}
}

// TestServerRefusesGrantsBreakingItsRules: grants written past the rules
// (an older CLI, an edited file, a cap lowered since) never take effect;
// each is refused once, with an audit event naming why.
func TestServerRefusesGrantsBreakingItsRules(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "grants.db")
	old := New(path, Options{Rules: &Rules{MaxTTL: 720 * time.Hour}, Now: c.now}) // what `--max-ttl 1000h` used to allow
	long, err := old.Grant(Request{Sub: "dr-a", Patient: patient, Tenant: "general-hospital", By: "op", Reason: "unconscious patient in ED", TTL: 720 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	noRole, err := old.Grant(Request{Sub: "dr-b", Patient: patient, Tenant: "general-hospital", By: "op", Reason: "unconscious patient in ED", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	server := New(path, Options{Rules: &Rules{MaxTTL: 4 * time.Hour, GrantRoles: []string{"btg-operator"}}, Now: c.now})
	active, pending, keys, err := server.Sync(nil)
	if err != nil || len(active) != 0 {
		t.Fatalf("grants breaking the rules are active: %v %v", active, err)
	}
	reasons := map[string]string{}
	for _, e := range pending {
		if e.Kind == KindRefuse {
			reasons[e.GrantID] = e.AuditReason()
		}
	}
	if !strings.Contains(reasons[long.ID], "ttl=720h0m0s refused=ttl_over_cap max_ttl=4h0m0s") ||
		!strings.Contains(reasons[noRole.ID], "refused=role_not_allowed") {
		t.Fatalf("refusal events: %v", reasons)
	}
	server.Delivered(keys)
	if _, pending, _, _ = server.Sync(nil); len(pending) != 0 {
		t.Fatalf("refused twice: %v", pending)
	}
	all, _ := server.All()
	for _, g := range all {
		if g.Refused == "" || g.Active(c.t) {
			t.Fatalf("grant %s not marked refused: %+v", g.ID, g)
		}
	}
	// Past their expiry, refused grants are not announced as expired.
	c.t = c.t.Add(800 * time.Hour)
	if _, pending, _, _ = server.Sync(nil); len(pending) != 0 {
		t.Fatalf("refused grants expired: %v", pending)
	}
}

// TestServerRefusesGrantsWithoutATenant: a grant without a tenant (an
// older custos, an edited file) that is still in force is refused once
// (btg/refuse, refused=no_tenant) and never active, and counted for the
// operator's warning; one that expired before the server saw it is
// announced as expired (it was in force under the custos that wrote it),
// not refused.
func TestServerRefusesGrantsWithoutATenant(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	s := New(filepath.Join(t.TempDir(), "grants.db"), Options{Rules: &Rules{MaxTTL: 4 * time.Hour}, Now: c.now})
	legacy := Grant{ID: "g-live", Sub: "dr-a", Patient: patient, Reason: "unconscious patient in ED", By: "op",
		Created: c.t.Add(-time.Minute), Expires: c.t.Add(time.Hour)}
	gone := legacy
	gone.ID, gone.Created, gone.Expires = "g-gone", c.t.Add(-2*time.Hour), c.t.Add(-time.Hour)
	if err := s.update(func(tx *bolt.Tx) error {
		return errors.Join(putGrant(tx, legacy), putGrant(tx, gone))
	}); err != nil {
		t.Fatal(err)
	}
	all, _ := s.All()
	if n := InForceWithoutTenant(all, c.t); n != 1 {
		t.Errorf("InForceWithoutTenant = %d, want 1 (the live grant)", n)
	}
	active, pending, keys, err := s.Sync(nil)
	if err != nil || len(active) != 0 {
		t.Fatalf("a grant without a tenant is active: %v %v", active, err)
	}
	kinds := map[string]string{}
	for _, e := range pending {
		kinds[e.GrantID] = e.Kind + " " + e.AuditReason()
	}
	if !strings.HasPrefix(kinds["g-live"], KindRefuse+" ") || !strings.Contains(kinds["g-live"], "refused=no_tenant") ||
		!strings.HasPrefix(kinds["g-gone"], KindExpire+" ") {
		t.Fatalf("events: %v", kinds)
	}
	s.Delivered(keys)
	if _, pending, _, _ = s.Sync(nil); len(pending) != 0 {
		t.Fatalf("refused twice: %v", pending)
	}
	all, _ = s.All()
	if n := InForceWithoutTenant(all, c.t); n != 1 {
		t.Errorf("after the refusal InForceWithoutTenant = %d, want 1: the operator must still grant again", n)
	}
}

// TestAuditReasonGolden pins the reason of btg/* audit records (a hashed
// field of the record): the actor is the record's principal, the OS
// account; whom it named is claimed_by, Go-quoted as given, after uses=
// and before the free text. Without a claim the reason is as it was.
func TestAuditReasonGolden(t *testing.T) {
	const id = "6f1c0b1e-2d3a-4b5c-8d6e-7f8091a2b3c4"
	for _, tt := range []struct {
		ev   Event
		want string
	}{
		{Event{Kind: KindRevoke, GrantID: id, Sub: "dr-er", Tenant: "general-hospital", Actor: "alice", Claimed: "op-night",
			Text: "patient transferred"},
			`grant=6f1c0b1e-2d3a-4b5c-8d6e-7f8091a2b3c4 grantee=dr-er tenant=general-hospital claimed_by="op-night" reason="patient transferred"`},
		{Event{Kind: KindReview, GrantID: id, Sub: "dr-er", Tenant: "general-hospital", Actor: "bob", Claimed: "privacy officer \x1b[2K",
			Verdict: VerdictAppropriate, Uses: 2, Text: "documented"},
			`grant=6f1c0b1e-2d3a-4b5c-8d6e-7f8091a2b3c4 grantee=dr-er tenant=general-hospital verdict=appropriate uses=2 claimed_by="privacy officer \x1b[2K" note="documented"`},
		{Event{Kind: KindRevoke, GrantID: id, Sub: "dr-er", Tenant: "general-hospital", Actor: "alice", Text: "patient transferred"},
			`grant=6f1c0b1e-2d3a-4b5c-8d6e-7f8091a2b3c4 grantee=dr-er tenant=general-hospital reason="patient transferred"`},
		// A tenant edited into grants.db that is no tenant name is quoted:
		// it cannot pass for a claim (or any further field).
		// So is a grantee with a space, a quote or a control character.
		{Event{Kind: KindRevoke, GrantID: id, Sub: `dr claimed_by="po"` + "\x1b", Tenant: "a", Actor: "alice", Text: "patient transferred"},
			`grant=6f1c0b1e-2d3a-4b5c-8d6e-7f8091a2b3c4 grantee="dr claimed_by=\"po\"\x1b" tenant=a reason="patient transferred"`},
		{Event{Kind: KindRevoke, GrantID: id, Sub: "dr-er", Tenant: `a claimed_by="privacy-officer"`, Actor: "alice", Text: "patient transferred"},
			`grant=6f1c0b1e-2d3a-4b5c-8d6e-7f8091a2b3c4 grantee=dr-er tenant="a claimed_by=\"privacy-officer\"" reason="patient transferred"`},
	} {
		if got := tt.ev.AuditReason(); got != tt.want {
			t.Errorf("%s reason\n got %s\nwant %s", tt.ev.Kind, got, tt.want)
		}
	}
}

// TestEditedGrantCannotForgeReasonFields: the grant id and the operator's
// role of a btg/* reason come from grants.db, which can be edited, like
// the grantee and the tenant: a stored id or role with a space or a quote
// is Go-quoted, so that `x claimed_by="po"` cannot pass for a claim (or
// any further field) of the record. A revoke without --by names no one,
// and a refusal none at all.
func TestEditedGrantCannotForgeReasonFields(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	s := New(filepath.Join(t.TempDir(), "grants.db"), Options{Rules: &Rules{MaxTTL: 4 * time.Hour, GrantRoles: []string{"btg-operator"}}, Now: c.now})
	base := Grant{Sub: "dr-a", Tenant: "general-hospital", Patient: patient, Reason: "unconscious patient in ED", By: "op",
		ByRole: "btg-operator", Created: c.t.Add(-time.Minute), Expires: c.t.Add(time.Hour)}
	byID, byRole := base, base
	byID.ID = `g1 claimed_by="privacy-officer"`
	byRole.ID, byRole.ByRole = "g2", `nurse claimed_by="privacy-officer"`
	if err := s.update(func(tx *bolt.Tx) error {
		// Keyed as the file's editor pleases: revoke finds a grant by key.
		b, _ := json.Marshal(byID)
		return errors.Join(tx.Bucket(bucketGrants).Put([]byte("g1"), b), putGrant(tx, byRole))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke("g1", Actor{Account: "alice"}, "patient transferred"); err != nil {
		t.Fatal(err)
	}
	_, pending, _, err := s.Sync(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range pending {
		got[e.Kind] = e.AuditReason()
	}
	want := map[string]string{
		KindRevoke: `grant="g1 claimed_by=\"privacy-officer\"" grantee=dr-a tenant=general-hospital reason="patient transferred"`,
		KindRefuse: `grant=g2 grantee=dr-a tenant=general-hospital expires=2026-11-21T11:00:00Z ttl=1h1m0s by_role="nurse claimed_by=\"privacy-officer\"" refused=role_not_allowed`,
	}
	for kind, w := range want {
		if got[kind] != w {
			t.Errorf("%s reason\n got %s\nwant %s", kind, got[kind], w)
		}
	}
}

// TestGrantWithABadTenantIsNeverActive: a grant whose tenant is not empty
// but no tenant name (an edited grants.db) covers nothing, and the
// server's sync refuses it (refused=bad_tenant, its tenant Go-quoted)
// while it would be in force. Before, only an empty tenant was refused.
func TestGrantWithABadTenantIsNeverActive(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)}
	s := New(filepath.Join(t.TempDir(), "grants.db"), Options{Rules: &Rules{MaxTTL: 4 * time.Hour}, Now: c.now})
	g := Grant{ID: "g-bad", Sub: "dr-a", Patient: patient, Tenant: "gh\tx", Reason: "unconscious patient in ED", By: "op",
		Created: c.t.Add(-time.Minute), Expires: c.t.Add(time.Hour)}
	if g.Active(c.t) {
		t.Error("a grant with tenant \"gh\\tx\" is active")
	}
	if err := s.update(func(tx *bolt.Tx) error { return putGrant(tx, g) }); err != nil {
		t.Fatal(err)
	}
	active, pending, _, err := s.Sync(nil)
	if err != nil || len(active) != 0 || len(pending) != 1 {
		t.Fatalf("Sync: active %v, pending %v, %v", active, pending, err)
	}
	if r := pending[0].AuditReason(); pending[0].Kind != KindRefuse || !strings.Contains(r, `tenant="gh\tx"`) || !strings.Contains(r, "refused=bad_tenant") {
		t.Errorf("event %s %q, want a refusal with refused=bad_tenant", pending[0].Kind, r)
	}
}

// TestOperatorTextKeepsNoPhoneInATokenShape: the operator's free text (a
// grant's or revocation's reason, a review note, a legacy event's detail)
// is text from outside custos, scrubbed with minimize.ScrubString: a
// telephone number written in a UUID's or a digest's shape is replaced.
// From h-audit13 until h-scrub2 the scrub kept such machine tokens whole
// and the grants file and the audit log kept the number.
func TestOperatorTextKeepsNoPhoneInATokenShape(t *testing.T) {
	const (
		inUUID   = "aaaaaaaa-2024-0305-1234-5551234567ab"
		inHexRun = "5551234567abcdef5551234567abcdef"
		phone    = "5551234567"
	)
	s, c := newStore(t)
	g, err := s.Grant(Request{Sub: "dr-a", Patient: patient, Tenant: "general-hospital", By: "op-1", Reason: "callback " + inUUID, TTL: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(time.Minute)
	if _, _, _, err := s.Sync(map[string][]Use{g.ID: {{EventID: "e1", Time: c.t, Action: "resources/read", Outcome: "allow"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(g.ID, Actor{Account: "op-2"}, "family on "+inHexRun); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReviewGrant(g.ID, Actor{Account: "po"}, VerdictAppropriate, "called "+inUUID); err != nil {
		t.Fatal(err)
	}
	all, err := s.All()
	if err != nil || len(all) != 1 {
		t.Fatalf("grants %v, %v", all, err)
	}
	stored, _ := json.Marshal(all[0])
	if strings.Contains(string(stored), phone) {
		t.Errorf("the grants file keeps the telephone number: %s", stored)
	}
	_, pending, _, err := s.Sync(nil)
	if err != nil || len(pending) != 3 {
		t.Fatalf("pending %v, %v", pending, err)
	}
	legacy := Event{Kind: KindGrant, GrantID: g.ID, Sub: "dr-a", Detail: `reason="callback ` + inUUID + `" expires=2026-11-21T10:30:00Z`}
	for _, ev := range append(pending, legacy) {
		if r := ev.AuditReason(); strings.Contains(r, phone) || !strings.Contains(r, "[PHONE]") {
			t.Errorf("%s event's audit reason keeps the telephone number: %s", ev.Kind, r)
		}
	}
}

// reasonCases are reasons at MinReasonLen's boundary, and whether a grant
// takes them: the length is the reason's as stored, trimmed and scrubbed,
// in characters, the scrub's placeholders not counted. A reason of nine
// characters whose e-mail address the scrub replaces is two ("ab
// [EMAIL]"); a telephone number and an e-mail address are none ("[PHONE]
// [EMAIL]", fifteen characters, which h-tidy's rule took for a reason);
// five two-byte characters are five, not ten. custos btg grant checked
// len(strings.TrimSpace(reason)) (bytes, not scrubbed) and Grant
// len(scrubbed) (bytes): they disagreed on a telephone number alone, and
// both took identifiers alone.
var reasonCases = []struct {
	reason string
	ok     bool
}{
	{"  ab a@b.io  ", false}, // "ab [EMAIL]": two characters of reason
	{"555-867-5309", false},
	{"555-867-5309 a@b.io", false},                // "[PHONE] [EMAIL]": identifiers alone
	{"[PHONE] [EMAIL] [DATE]", false},             // the placeholders written out
	{"PID|1||58203391^^^SMH^MR||Doe^Jane", false}, // an HL7 segment, its fields replaced
	{"call a@b.io re chest pain", true},
	{"ééééé", false},
	{"éééééééééé", true},
	{"  chest pai  ", false},
	{" chest pain ", true},
}

// TestGrantReasonRule: Grant takes a reason exactly when CheckReason
// does, and that is reasonCases' verdict.
func TestGrantReasonRule(t *testing.T) {
	s, _ := newStore(t)
	for _, tc := range reasonCases {
		_, err := s.Grant(Request{Sub: "dr", Patient: patient, Tenant: "general-hospital", By: "op", Reason: tc.reason, TTL: time.Minute})
		if (err == nil) != tc.ok || err != nil && (!errors.Is(err, ErrBadGrant) || !strings.Contains(err.Error(), "reason")) {
			t.Errorf("Grant(reason %q) = %v, want ok %v", tc.reason, err, tc.ok)
		}
		if cerr := CheckReason(tc.reason); (cerr == nil) != tc.ok || (cerr == nil) != (err == nil) {
			t.Errorf("CheckReason(%q) = %v, Grant %v: want one verdict, ok %v", tc.reason, cerr, err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), strings.TrimSpace(tc.reason)) {
			t.Errorf("the refusal repeats the reason: %v", err)
		}
	}
}
