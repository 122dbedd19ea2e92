package app

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/server"
)

// highWaterLog is a log of one policy/load of a bundle (claim 7) followed
// by n reads.
func highWaterLog(tb testing.TB, n int) *audit.Log {
	tb.Helper()
	l, _ := audittest.Open(tb, audit.Options{Node: "node-test"})
	ctx := context.Background()
	if _, err := l.Append(ctx, audit.Entry{Action: server.ActionPolicyLoad, Outcome: audit.OutcomeAllow,
		PolicyRevision: "r7 bundle=sha256:77", Reason: "candidate=sha256:77 sequence=7",
		Principal: audit.Principal{Sub: "custos"}}); err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 64 {
				// A read whose reason mentions a policy load in free text,
				// as a scrubbed reason may: never a mark.
				// Shaped like a served read's record (~800 bytes).
				if _, err := l.Append(ctx, audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow,
					Reason: `note "action":"policy/load"`, Principal: audit.Principal{Sub: "dr-alice@example.org", Roles: []string{"clinician"}, ClientID: "ehr-assistant"},
					PurposeOfUse: "TREAT", Source: "10.20.0.7:51234",
					URIs:           []string{fmt.Sprintf("custos://fhir/general-hospital/hk1-%032x/Observation/%032x", i, i)},
					Patients:       []string{fmt.Sprintf("hk1-%032x", i)},
					Digests:        []string{fmt.Sprintf("sha256:%064x", i)},
					DecisionID:     fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i),
					PolicyRevision: "custos-2026.12.05 bundle=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
					Obligations:    []string{"minimize:none"},
					Keys:           []string{"audit-hmac=vault:1", "cursor=vault:3", "signing=vault:2"}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
	return l
}

// TestPolicyHighWaterAfterManyRecords: the mark is found behind many
// records of other actions, whatever their text says.
func TestPolicyHighWaterAfterManyRecords(t *testing.T) {
	l := highWaterLog(t, 5000)
	hw, err := policyHighWater(context.Background(), l)
	if err != nil || hw != (policy.HighWater{Sequence: 7, Digest: "sha256:77"}) {
		t.Fatalf("high-water mark %+v, %v", hw, err)
	}
}

// BenchmarkPolicyHighWaterScan is the startup scan's cost per record read
// (ns/op is per record).
func BenchmarkPolicyHighWaterScan(b *testing.B) {
	const n = 100000
	l := highWaterLog(b, n)
	b.ResetTimer()
	for range b.N / n {
		if _, err := policyHighWater(context.Background(), l); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(b.N/n, 1)*n), "ns/record")
}

// TestIsPolicyLoadAgreesWithContains: the pre-filter looks only at the
// record's action member; the plain search for the marker anywhere in the
// record is its reference, and the two agree on every action a record can
// have and on reasons that quote the marker.
func TestIsPolicyLoadAgreesWithContains(t *testing.T) {
	marker := []byte(`"action":"` + server.ActionPolicyLoad + `"`)
	actions := []string{server.ActionPolicyLoad, server.ActionPolicyReject, "policy/impact", audit.ActionResourcesRead, "resources/list", "btg/grant", "audit/verify"}
	reasons := []string{"", `"action":"policy/load"`, `action policy/load`, "candidate=sha256:77 sequence=7"}
	for _, a := range actions {
		for _, reason := range reasons {
			c := audit.Encode(audit.Record{Node: `node"action":"x"`, Entry: audit.Entry{Action: a, Outcome: audit.OutcomeAllow, Reason: reason,
				Principal: audit.Principal{Sub: `sub "action":"policy/load"`}}})
			got, want := isPolicyLoad(c), bytes.Contains(c, marker) && a == server.ActionPolicyLoad
			if got != want || got != (a == server.ActionPolicyLoad) {
				t.Errorf("action %q reason %q: isPolicyLoad %v, reference %v", a, reason, got, want)
			}
		}
	}
}
