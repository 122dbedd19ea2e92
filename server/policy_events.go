package server

import (
	"context"
	"fmt"
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
// candidate's digest and, for a rejection, why. It is the OnEvent hook of a
// policy.Reloader: a load whose record cannot be written is not swapped in.
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
	parts := []string{"candidate=" + ev.CandidateDigest}
	if ev.PreviousRevision != "" {
		parts = append(parts, "previous="+ev.PreviousRevision)
	}
	if ev.Reason != "" {
		parts = append(parts, ev.Reason)
	}
	e.Reason = minimize.ScrubString(strings.Join(parts, " "))
	if _, err := s.commit(ctx, e); err != nil {
		return fmt.Errorf("auditing %s: %w", action, err)
	}
	return nil
}
