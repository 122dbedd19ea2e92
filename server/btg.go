package server

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/policy/btg"
)

// Grants is the break-the-glass view of the read path (btg.Cache): which
// active grant lets sub read patient now, and the uses made of grants.
type Grants interface {
	// Lookup returns the id of an active grant covering sub and tenant's
	// patient (patient ids are unique within a tenant only).
	Lookup(sub, tenant, patient string, t time.Time) (string, bool)
	// Used records an audited access made under a grant: one per request
	// (a read, a list page, a completion) per grant its decisions relied
	// on.
	Used(grantID string, u btg.Use)
}

// PurposeEmergency is the HL7 purpose of use of break-the-glass reads.
const PurposeEmergency = "ETREAT"

// breakGlass returns the grant input for a decision about a resource of
// tenant's patient, when the caller asks with purpose ETREAT and an active
// grant covers them; nil otherwise. The policy decides what the grant
// permits.
func (s *Server) breakGlass(id Identity, tenant, patient string) *policy.BreakGlass {
	if s.cfg.Grants == nil || id.PurposeOfUse != PurposeEmergency || patient == "" {
		return nil
	}
	g, ok := s.cfg.Grants.Lookup(id.Principal.Sub, tenant, patient, s.now())
	if !ok {
		return nil
	}
	return &policy.BreakGlass{Grant: g, Patient: patient}
}

// grantRelied returns the id of the grant d relied on: the policy allowed
// with reason break_glass and bg (the grant input of the decision) names
// it. "" otherwise.
func grantRelied(bg *policy.BreakGlass, d policy.Decision) string {
	if bg == nil || !d.Allow || !slices.Contains(d.Reasons, policyReasonBreakGlass) {
		return ""
	}
	return bg.Grant
}

// grantsRelied collects, in order and once each, the grants the allowed
// decisions of one request relied on.
type grantsRelied []string

func (g *grantsRelied) add(id string) {
	if id != "" && !slices.Contains(*g, id) {
		*g = append(*g, id)
	}
}

// reason is what a record's reason says of the grants (" grant=<id>" for
// each), so that the record of a list page or a completion names the
// grants it counts as a use of, as a read's does (its decision's reasons
// hold break_glass,grant=<id>): the compliance report and btg review count
// the same uses.
func (g grantsRelied) reason() string {
	var b strings.Builder
	for _, id := range g {
		b.WriteString(" grant=")
		b.WriteString(id)
	}
	return b.String()
}

// recordUses reports one use of each grant to Grants, naming the request's
// durable audit record rec: called only after rec was committed, so a use
// is never recorded for an access that was not.
func (s *Server) recordUses(grants grantsRelied, rec audit.Record) {
	for _, id := range grants {
		if id == "" || s.cfg.Grants == nil {
			continue
		}
		s.cfg.Grants.Used(id, btg.Use{EventID: rec.EventID, Seq: rec.Seq, Time: rec.Time, Action: rec.Action, Outcome: rec.Outcome})
	}
}

// AuditGrantEvent writes a break-the-glass event (grant, revoke, expiry,
// review sign-off, and with outcome deny a refusal) to the audit log: action btg/<kind>, the actor as
// principal, the patient keyed-hashed like every record, the outbox event
// id as decision id (so a record written twice after a crash is
// recognizable), and the event's structured reason (btg.Event.AuditReason:
// grant id, expiry and duration verbatim; the operator's free text was
// scrubbed when it was stored, and nothing is scrubbed again here).
func (s *Server) AuditGrantEvent(ctx context.Context, ev btg.Event) (audit.Record, error) {
	e := s.entry(ctx, Identity{Principal: policy.Principal{Sub: ev.Actor}, Source: "btg"}, ev.Kind)
	e.Outcome = audit.OutcomeAllow
	if ev.Kind == btg.KindRefuse {
		e.Outcome = audit.OutcomeDeny // the grant never takes effect
	}
	e.PurposeOfUse = PurposeEmergency
	e.DecisionID = ev.ID
	e.Reason = ev.AuditReason()
	if ev.Patient != "" {
		e.Patients = []string{ev.Patient}
	}
	return s.commit(ctx, e)
}
