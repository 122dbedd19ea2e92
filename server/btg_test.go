package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/policy/btg"
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
	g, err := st.Grant(btg.Request{Sub: "dr-a", Patient: "6f1c0a52-5555-4123-8123-555123456789", By: "op",
		Reason: "called 555-123-4567, MRN-12345678 on 2026-11-24", TTL: 90 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(g.Reason, "0123456789") {
		t.Fatalf("stored reason keeps identifiers: %q", g.Reason)
	}
	if _, err := st.Revoke(g.ID, "op", "pt 555.123.4567 stable"); err != nil {
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
	wantGrant := "grant=" + g.ID + " grantee=dr-a expires=2026-11-25T02:32:03Z ttl=1h30m0s reason=\"called [PHONE], [MRN] on [DATE]\""
	wantRevoke := "grant=" + g.ID + " grantee=dr-a reason=\"pt [PHONE] stable\""
	if reasons[0] != wantGrant || reasons[1] != wantRevoke {
		t.Fatalf("reasons:\n got %q\nwant %q", reasons, []string{wantGrant, wantRevoke})
	}
}
