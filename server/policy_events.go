package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
)

// Audit actions of policy lifecycle events.
const (
	ActionPolicyLoad   = "policy/load"
	ActionPolicyReject = "policy/reject"
)

// AuditPolicyEvent writes a policy load or rejection to the audit log: the
// revision (and bundle digest) in force after it, the source, the
// candidate's digest and, for a rejection, why (and, recorded late, when:
// rejected_at). It is the OnEvent hook of a policy.Reloader: a load whose
// record cannot be written is not swapped in; an error after the record was
// appended wraps policy.ErrEventRecorded.
func (s *Server) AuditPolicyEvent(ctx context.Context, ev policy.Event) error {
	action, outcome := ActionPolicyLoad, audit.OutcomeAllow
	if ev.Kind == policy.EventRejected {
		action, outcome = ActionPolicyReject, audit.OutcomeDeny
	}
	e := s.entry(ctx, Identity{Principal: policy.Principal{Sub: "custos"}, Source: ev.Source}, action)
	e.Outcome = outcome
	e.PolicyRevision = ev.Revision
	if ev.BundleDigest != "" {
		e.PolicyRevision += " bundle=" + ev.BundleDigest
	}
	// The sequence is written outside the scrubbed text: it is a number
	// custos parsed from a signed manifest (never PHI), and PolicyHighWater
	// reads it back; the scrubber could take a long one for an identifier.
	head := "candidate=" + ev.CandidateDigest
	if ev.Sequence != 0 {
		head += " sequence=" + strconv.FormatUint(ev.Sequence, 10)
	}
	// The key that verified the bundle in force: an id from the server's
	// own configuration (--policy-key ID, or the Vault key's version), not
	// PHI, and written as it is (the scrubber could take an id for an
	// identifier); quoted when it could not be read back as one field.
	if ev.KeyID != "" {
		head += " key=" + policyKeyField(ev.KeyID)
	}
	// A rejected candidate's own identity, as far as it is verified
	// (policy.CandidateError): sequence= and key= above name the bundle in
	// force, which keeps serving. Written as they are: a revision custos
	// computed ("sha256:" + hex), a number from a signed manifest, a key id
	// of the server's configuration (quoted as key= is).
	if ev.Kind == policy.EventRejected {
		if ev.CandidateRevision != "" {
			head += " candidate_revision=" + ev.CandidateRevision
		}
		if ev.CandidateSequence != 0 {
			head += " candidate_sequence=" + strconv.FormatUint(ev.CandidateSequence, 10)
		}
		if ev.CandidateKeyID != "" {
			head += " candidate_key=" + policyKeyField(ev.CandidateKeyID)
		}
	}
	// A rejection recorded late (its first record could not be appended)
	// names when it happened: the record's time is when it was written.
	if ev.Kind == policy.EventRejected && ev.Late {
		head += " rejected_at=" + ev.Time.UTC().Format(audit.TimeLayout)
	}
	if re := ev.Rollback; re != nil {
		// The evidence of a rollback refusal (or of the one overridden), as
		// the record must name it: custos's own numbers and digests, which
		// the scrubber below could take for identifiers.
		if re.MinSequence != 0 {
			head += fmt.Sprintf(" rollback_claim=%d rollback_bundle=%s min_sequence=%d", re.Sequence, re.Digest, re.MinSequence)
		} else {
			head += fmt.Sprintf(" rollback_claim=%d rollback_bundle=%s high_water=%d high_water_bundle=%s",
				re.Sequence, re.Digest, re.HighWater.Sequence, re.HighWater.Digest)
		}
	}
	var parts []string
	if ev.PreviousRevision != "" {
		parts = append(parts, "previous="+ev.PreviousRevision)
	}
	if ev.RollbackOverride != "" {
		parts = append(parts, "rollback_override: "+ev.RollbackOverride)
	}
	e.Reason = head
	if len(parts) > 0 {
		// custos's own text (revisions, the rollback refusal overridden):
		// ScrubReason keeps its digests and ids whole, where ScrubString
		// could take ten digits of one for a telephone number.
		e.Reason += " " + minimize.ScrubReason(strings.Join(parts, " "))
	}
	if ev.Reason != "" {
		e.Reason += " " + PolicyEventReason(ev)
	}
	rec, err := s.commit(ctx, e)
	if err != nil && rec.Seq != 0 {
		// Appended, but not completed (without the audit key it is written
		// as an error): on record all the same, which the Reloader must
		// know so as not to record a rejection again.
		return fmt.Errorf("auditing %s: %w (record %d): %w", action, policy.ErrEventRecorded, rec.Seq, err)
	}
	if err != nil {
		return fmt.Errorf("auditing %s: %w", action, err)
	}
	return nil
}

// PolicyEventReason is ev.Reason as a policy/reject record has it, after
// the fields AuditPolicyEvent writes before it. A rejection's error quotes
// the candidate's own text (a compile error quotes the Rego line it stopped
// at, a failing test its name): a policy author's, scrubbed strictly,
// keeping whole only the digests the event names, as "(candidate
// sha256:…)" ends it (TestPolicyRejectionScrubsThePolicyAuthorsText).
// 'custos policy status' shows the same text (app.PolicyStatus).
func PolicyEventReason(ev policy.Event) string {
	keep := []string{ev.CandidateDigest, ev.BundleDigest}
	if re := ev.Rollback; re != nil {
		keep = append(keep, re.Digest, re.HighWater.Digest)
	}
	return minimize.ScrubKeeping(ev.Reason, keep...)
}

// policyKeyField is id as one space-separated field of a policy record's
// reason: as it is when it is printable ASCII without a space or a quote,
// else Go-quoted.
func policyKeyField(id string) string {
	for _, c := range id {
		if c <= ' ' || c > '~' || c == '"' {
			return strconv.Quote(id)
		}
	}
	return id
}

// PolicyHighWater returns the rollback high-water mark a policy/load record
// r of a bundle sets (see policy.CheckSequence): the bundle digest from
// its policy_revision (after " bundle=") and the sequence from its reason
// ("candidate=<digest> sequence=<n> ...", as AuditPolicyEvent writes it;
// 0 when the reason has no sequence). ok is false when r is not a
// policy/load of a bundle that took effect: a record whose outcome is not
// allow (the load was refused because its record could not be completed,
// e.g. with the audit key unavailable, which rewrites it as an error) sets
// no mark. An unreadable sequence is an error: the caller must not guess
// the mark.
func PolicyHighWater(r audit.Record) (hw policy.HighWater, ok bool, err error) {
	if r.Action != ActionPolicyLoad || r.Outcome != audit.OutcomeAllow {
		return hw, false, nil
	}
	_, digest, isBundle := strings.Cut(r.PolicyRevision, " bundle=")
	if !isBundle || digest == "" {
		return hw, false, nil
	}
	hw.Digest = digest
	f := strings.Fields(r.Reason)
	if len(f) >= 2 && strings.HasPrefix(f[0], "candidate=") {
		if n, found := strings.CutPrefix(f[1], "sequence="); found {
			if hw.Sequence, err = strconv.ParseUint(n, 10, 64); err != nil || hw.Sequence == 0 {
				return policy.HighWater{}, false, fmt.Errorf("policy/load record %d: unreadable sequence %.30q", r.Seq, n)
			}
		}
	}
	return hw, true, nil
}
