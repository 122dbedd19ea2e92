package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/report"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

// uuidShapes returns grant ids of every shape a UUID's digits can take:
// each of the five groups all decimal digits or all hex letters (32
// combinations, so digit runs of every length and position that look like
// phone numbers, SSNs, MRNs or dates), and 256 random version-4 ids.
func uuidShapes() []string {
	groups := []int{8, 4, 4, 4, 12}
	var ids []string
	for mask := 0; mask < 1<<len(groups); mask++ {
		var parts []string
		for i, n := range groups {
			alphabet := "abcdef"
			if mask&(1<<i) != 0 {
				alphabet = "0123456789"
			}
			var b strings.Builder
			for j := 0; j < n; j++ {
				b.WriteByte(alphabet[(i*7+j*3+mask)%len(alphabet)])
			}
			parts = append(parts, b.String())
		}
		ids = append(ids, strings.Join(parts, "-"))
	}
	r := rand.New(rand.NewPCG(13, 17))
	for range 256 {
		var b [16]byte
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
		ids = append(ids, fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
	}
	return ids
}

// TestGrantEventsKeepCustosValuesVerbatim: the audit record of a grant event
// carries the grant id, the expiry and the duration exactly as custos made
// them, whatever digits the id happens to have; only the operator's free
// text is scrubbed, and it was scrubbed before it was stored. The scrubber
// that used to run over the whole reason turned ids such as
// f9711cdd-ad47-4631-a555-123456789012 into "…-a[PHONE]…".
func TestGrantEventsKeepCustosValuesVerbatim(t *testing.T) {
	f := newFixture(t, "")
	expires := time.Date(2026, 11, 25, 3, 4, 5, 0, time.UTC)
	for i, id := range uuidShapes() {
		ev := btg.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Kind: btg.KindGrant, GrantID: id,
			Sub: "dr-" + strconv.Itoa(i), Actor: "op-night", Expires: expires, TTL: 4 * time.Hour,
			Text: "trauma bay, unconscious", Time: expires.Add(-4 * time.Hour)}
		rec, err := f.srv.AuditGrantEvent(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		want := "grant=" + id + " grantee=dr-" + strconv.Itoa(i) + " expires=2026-11-25T03:04:05Z ttl=4h0m0s reason=\"trauma bay, unconscious\""
		if rec.Reason != want {
			t.Fatalf("grant id shape %s:\n got %q\nwant %q", id, rec.Reason, want)
		}
	}
}

// TestGrantFreeTextIsScrubbedAtIntake drives real grants through the grants
// file into the audit log: identifiers typed into a reason or note never
// reach the file or the log, and the structured values do, verbatim.
func TestGrantFreeTextIsScrubbedAtIntake(t *testing.T) {
	f := newFixture(t, "")
	now := time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC)
	st := btg.New(filepath.Join(t.TempDir(), "grants.db"), btg.Options{Now: func() time.Time { return now }})
	g, err := st.Grant(btg.Request{Sub: "dr-a", Patient: "6f1c0a52-5555-4123-8123-555123456789", Tenant: "general-hospital", By: "op",
		Reason: "called 555-123-4567, MRN-12345678 on 2026-11-24", TTL: 90 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(g.Reason, "0123456789") {
		t.Fatalf("stored reason keeps identifiers: %q", g.Reason)
	}
	if _, err := st.Revoke(g.ID, btg.Actor{Account: "op"}, "pt 555.123.4567 stable"); err != nil {
		t.Fatal(err)
	}
	_, pending, _, err := st.Sync(nil)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending %v err %v", pending, err)
	}
	var reasons []string
	for _, ev := range pending {
		rec, err := f.srv.AuditGrantEvent(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		reasons = append(reasons, rec.Reason)
	}
	wantGrant := "grant=" + g.ID + " grantee=dr-a tenant=general-hospital expires=2026-11-25T02:32:03Z ttl=1h30m0s reason=\"called [PHONE], [MRN] on [DATE]\""
	wantRevoke := "grant=" + g.ID + " grantee=dr-a tenant=general-hospital reason=\"pt [PHONE] stable\""
	if reasons[0] != wantGrant || reasons[1] != wantRevoke {
		t.Fatalf("reasons:\n got %q\nwant %q", reasons, []string{wantGrant, wantRevoke})
	}
}

// newBreakGlassFixture is a server whose break-the-glass grants come from
// grants (empty), the clinician asking with purpose ETREAT and no care
// relationship, and target, a FHIR resource with no sensitivity or consent
// label, whose patient a grant may name.
func newBreakGlassFixture(t *testing.T) (*fixture, *btg.Cache, server.Identity, store.URI) {
	t.Helper()
	grants := btg.NewCache()
	f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) { c.Grants = grants }})
	id := f.identity("clinician")
	id.PurposeOfUse, id.Principal.Patients = server.PurposeEmergency, []string{}
	for _, r := range f.allURIs() {
		if u, err := store.ParseURI(r.URI); err == nil && u.Scheme == "fhir" && r.Labels.Patient != "" && len(r.Labels.Sensitivity) == 0 && len(r.Labels.Consent) == 0 {
			return f, grants, id, u
		}
	}
	t.Fatal("no FHIR resource without labels in the fixture")
	return nil, nil, server.Identity{}, store.URI{}
}

// TestGrantUsesAreCountedPerRequest: every request that reveals a patient's
// resources under a break-the-glass grant — a read, a list page, a
// completion — is one use of the grant (however many of the patient's
// resources it showed), naming the request's action and its audit record;
// a request that did not rely on the grant is no use of it.
func TestGrantUsesAreCountedPerRequest(t *testing.T) {
	f, grants, id, target := newBreakGlassFixture(t)
	now := time.Now()
	cs := f.connect(id)
	ctx := context.Background()

	// A grant without a tenant (an older custos, an edited grants file)
	// covers no tenant's patient: not in a read, a list or a completion
	// (one decision, server.breakGlass), and it is no use of the grant.
	// It covered the patient id in every tenant.
	grants.Replace([]btg.Grant{{ID: "g-0", Sub: id.Principal.Sub, Patient: target.Patient,
		Created: now.Add(-time.Minute), Expires: now.Add(time.Hour)}})
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: target.String()}); err == nil {
		t.Error("a grant without a tenant let the read through")
	}
	for _, u := range listAll(t, cs) {
		if strings.Contains(u, "/patients/"+target.Patient+"/") {
			t.Errorf("a grant without a tenant lists %s", u)
		}
	}
	if ids := complete(t, cs, fhirTemplate, "id", "", map[string]string{"tenant": target.Tenant, "patient": target.Patient, "type": target.Type}); len(ids.Completion.Values) != 0 {
		t.Errorf("a grant without a tenant completes %v", ids.Completion.Values)
	}
	if u := grants.TakeUses(); len(u) != 0 {
		t.Errorf("uses of a grant without a tenant: %v", u)
	}

	grants.Replace([]btg.Grant{{ID: "g-1", Sub: id.Principal.Sub, Patient: target.Patient, Tenant: target.Tenant,
		Created: now.Add(-time.Minute), Expires: now.Add(time.Hour)}})

	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: target.String()}); err != nil {
		t.Fatal(err)
	}
	listed := listAll(t, cs)
	if len(listed) < 2 {
		t.Fatalf("the grant lists %d resources; the test needs a patient with several", len(listed))
	}
	ids := complete(t, cs, fhirTemplate, "id", "", map[string]string{"tenant": target.Tenant, "patient": target.Patient, "type": target.Type})
	if len(ids.Completion.Values) == 0 {
		t.Fatal("the completion under the grant suggested nothing")
	}
	// No use: a completion about another patient, which reveals nothing.
	complete(t, cs, fhirTemplate, "id", "", map[string]string{"tenant": target.Tenant, "patient": "00000000-0000-4000-8000-000000000000", "type": target.Type})

	k, _ := f.keys.AuditKey(ctx)
	pseud := audit.Pseudonym(k.Bytes, target.Patient)
	var want []btg.Use
	for _, r := range f.records() {
		if r.Outcome == audit.OutcomeAllow && slices.Contains(r.Patients, pseud) {
			want = append(want, btg.Use{EventID: r.EventID, Seq: r.Seq, Time: r.Time, Action: r.Action, Outcome: r.Outcome})
		}
	}
	got := grants.TakeUses()["g-1"]
	actions := map[string]int{}
	for _, u := range got {
		actions[u.Action]++
	}
	if actions[server.ActionRead] != 1 || actions[server.ActionList] < 1 || actions[server.ActionComplete] != 1 {
		t.Fatalf("uses by action %v, want one read, one per list page with the patient, one completion", actions)
	}
	if len(got) != len(want) {
		t.Fatalf("%d uses for %d requests that revealed the patient:\n got %+v\nwant %+v", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i].EventID != want[i].EventID || got[i].Seq != want[i].Seq || got[i].Action != want[i].Action ||
			!got[i].Time.Equal(want[i].Time) || got[i].Outcome != audit.OutcomeAllow {
			t.Fatalf("use %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// Each use's record names the grant in its reason, as the compliance
	// report reads it (a list page's and a completion's did not: the
	// report counted them as break-glass accesses without a grant).
	// And each is a break-the-glass access in the reports
	// (report.IsBreakGlass), by its reason's mark alone too: with its
	// purpose (ETREAT) set aside, a read's break_glass and a list page's
	// or a completion's grant= still count.
	for _, r := range f.records() {
		if r.Outcome != audit.OutcomeAllow || !slices.Contains(r.Patients, pseud) {
			continue
		}
		if !slices.Contains(strings.FieldsFunc(r.Reason, func(c rune) bool { return c == ' ' || c == ',' }), "grant=g-1") {
			t.Errorf("%s record %d: reason %q does not name grant=g-1", r.Action, r.Seq, r.Reason)
		}
		if !report.IsBreakGlass(r) {
			t.Errorf("%s record %d (purpose %s, reason %q) is not a break-the-glass access in the reports", r.Action, r.Seq, r.PurposeOfUse, r.Reason)
		}
		r.PurposeOfUse = ""
		if !report.IsBreakGlass(r) {
			t.Errorf("%s record %d: reason %q alone is not a break-the-glass mark", r.Action, r.Seq, r.Reason)
		}
	}
}
