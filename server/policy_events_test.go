package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/server"
)

// TestPolicyHighWaterRoundTrip: the high-water mark a policy/load record
// carries is read back exactly from the record AuditPolicyEvent wrote,
// whatever the previous revision's free text says (a date-like sequence
// is not taken for an identifier by the scrubber).
func TestPolicyHighWaterRoundTrip(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{})
	ctx := context.Background()
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	events := []policy.Event{
		{Kind: policy.EventLoaded, Source: "bundle:/p", Revision: "r1", BundleDigest: digest, CandidateDigest: digest, Sequence: 2026120501,
			PreviousRevision: "r0 sequence=99", RollbackOverride: "policy: bundle rollback refused: ... sequence 2026120600"},
		{Kind: policy.EventLoaded, Source: "bundle:/p", Revision: "r2", BundleDigest: digest, CandidateDigest: digest},
		{Kind: policy.EventRejected, Source: "bundle:/p", Revision: "r2", BundleDigest: digest, CandidateDigest: "sha256:ff", Sequence: 7, Reason: "x"},
		{Kind: policy.EventLoaded, Source: "dir:/p", Revision: "dev", CandidateDigest: digest},
	}
	for _, ev := range events {
		if err := f.srv.AuditPolicyEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	var got []policy.HighWater
	var oks []bool
	for _, r := range f.records() {
		if !strings.HasPrefix(r.Action, "policy/") {
			continue
		}
		hw, ok, err := server.PolicyHighWater(r)
		if err != nil {
			t.Fatalf("record %d: %v", r.Seq, err)
		}
		got, oks = append(got, hw), append(oks, ok)
	}
	want := []policy.HighWater{{Sequence: 2026120501, Digest: digest}, {Digest: digest}, {}, {}}
	wantOK := []bool{true, true, false, false}
	if len(got) != len(want) {
		t.Fatalf("%d policy records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] || oks[i] != wantOK[i] {
			t.Errorf("record %d: %+v %v, want %+v %v", i, got[i], oks[i], want[i], wantOK[i])
		}
	}
	bad := audit.Record{Seq: 9, Entry: audit.Entry{Action: server.ActionPolicyLoad, PolicyRevision: "r bundle=" + digest, Reason: "candidate=" + digest + " sequence=x"}}
	if _, _, err := server.PolicyHighWater(bad); err == nil {
		t.Error("an unreadable sequence was accepted")
	}
}
