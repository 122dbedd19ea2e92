package app

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/server"
)

// TestPolicyStatusReasonIsTheRecords: 'custos policy status' shows a
// refusal's reason as its policy/reject record has it: the policy
// author's text scrubbed strictly, and the digests the refusal names
// whole. It was scrubbed with minimize.ScrubString, which took each run
// of ten digits of a digest for a telephone number ("sha256:9a[PHONE]
// bcdef[PHONE]…"), so the status named a candidate that neither the
// record nor the candidate_digest field beside it names.
func TestPolicyStatusReasonIsTheRecords(t *testing.T) {
	cand := "sha256:9a1234567890bcdef1234567890abcdef1234567890abcdef1234567890abcd"
	high := "sha256:1234567890ab1234567890ab1234567890ab1234567890ab1234567890ab"
	re := &policy.RollbackError{Sequence: 1, Digest: cand, HighWater: policy.HighWater{Sequence: 3, Digest: high}}
	ev := policy.Event{Kind: policy.EventRejected, Time: time.Now().UTC(), CandidateDigest: cand, Rollback: re, Err: re,
		// The policy author's text: a telephone number in a test's name.
		Reason: fmt.Sprintf("test_call_617-555-0123 failed; %v (candidate %s)", re, cand)}
	var s policyState
	s.rejectedEvent(ev)
	got := s.rejected.Reason
	if want := server.PolicyEventReason(ev); got != want {
		t.Errorf("status reason\n%s\nwant the record's\n%s", got, want)
	}
	for _, d := range []string{cand, high} {
		if strings.Count(got, d) != strings.Count(ev.Reason, d) {
			t.Errorf("status reason %q does not keep %s whole", got, d)
		}
	}
	if strings.Contains(got, "617-555-0123") {
		t.Errorf("status reason %q keeps the telephone number", got)
	}
}
