package server

import (
	"context"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/policy/btg"
)

// Grants is the break-the-glass view of the read path (btg.Cache): which
// active grant lets sub read patient now, and the uses made of grants.
type Grants interface {
	// Lookup returns the id of an active grant covering sub and patient.
	Lookup(sub, patient string, t time.Time) (string, bool)
	// Used records an audited read made under a grant.
	Used(grantID string, u btg.Use)
}

// PurposeEmergency is the HL7 purpose of use of break-the-glass reads.
const PurposeEmergency = "ETREAT"

// breakGlass returns the grant input for a decision about patient, when the
// caller asks with purpose ETREAT and an active grant covers them; nil
// otherwise. The policy decides what the grant permits.
func (s *Server) breakGlass(id Identity, patient string) *policy.BreakGlass {
	if s.cfg.Grants == nil || id.PurposeOfUse != PurposeEmergency || patient == "" {
		return nil
	}
	g, ok := s.cfg.Grants.Lookup(id.Principal.Sub, patient, s.now())
	if !ok {
		return nil
	}
	return &policy.BreakGlass{Grant: g, Patient: patient}
}

// AuditGrantEvent writes a break-the-glass event (grant, revoke, expiry,
// review sign-off) to the audit log: action btg/<kind>, the actor as
// principal, the patient keyed-hashed like every record, the outbox event
// id as decision id (so a record written twice after a crash is
// recognizable), and the event's structured reason (btg.Event.AuditReason:
// grant id, expiry and duration verbatim; the operator's free text was
// scrubbed when it was stored, and nothing is scrubbed again here).
func (s *Server) AuditGrantEvent(ctx context.Context, ev btg.Event) (audit.Record, error) {
	e := s.entry(ctx, Identity{Principal: policy.Principal{Sub: ev.Actor}, Source: "btg"}, ev.Kind)
	e.Outcome = audit.OutcomeAllow
	e.PurposeOfUse = PurposeEmergency
	e.DecisionID = ev.ID
	e.Reason = ev.AuditReason()
	if ev.Patient != "" {
		e.Patients = []string{ev.Patient}
	}
	return s.commit(ctx, e)
}
