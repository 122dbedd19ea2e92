package bundle_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/bundle"
)

// TestAuditLogUsesAreTheAccessActions: the FHIR export types an auditor's
// access record as DICOM 110101 Audit Log Used by its action, which
// audit/access defines; the two lists must not drift apart.
func TestAuditLogUsesAreTheAccessActions(t *testing.T) {
	want := []string{access.ActionVerify, access.ActionExport, access.ActionReport, access.ActionProve,
		access.ActionHash, access.ActionPolicyImpact, access.ActionComplianceReport}
	got := slices.Clone(bundle.AuditLogUses)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Audit Log Used actions %v, audit/access's %v", got, want)
	}
	for _, a := range want {
		r := audit.Record{Seq: 1, EventID: "e1", Node: "n1", Entry: audit.Entry{Action: a, Outcome: audit.OutcomeAllow,
			Principal: audit.Principal{Sub: "auditor-1", ClientID: "custos-cli"}, PurposeOfUse: "HOPERAT", Source: "cli"}}
		evs, err := bundle.FHIRAuditEvents(r)
		if err != nil || len(evs) != 1 {
			t.Fatalf("%s: %d events, %v", a, len(evs), err)
		}
		var ev struct {
			Type   struct{ System, Code string }
			Action string
		}
		if err := json.Unmarshal(evs[0], &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type.System != "http://dicom.nema.org/resources/ontology/DCM" || ev.Type.Code != "110101" || ev.Action != "R" {
			t.Errorf("%s: type %s#%s action %s, want DCM#110101 R", a, ev.Type.System, ev.Type.Code, ev.Action)
		}
	}
}
