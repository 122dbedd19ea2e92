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
// audit/access defines (every Action constant of it, a backup's copy of
// the log included); the two lists must not drift apart. Each such event
// has the one participant object DICOM PS3.15 A.5.3.2 makes mandatory,
// the identity of the audit log: a System Object (audit-entity-type 2)
// in role Security Resource (object-role 13), named "Security Audit Log",
// identified by the node whose log it is; and its OCSF event is a Read
// (activity_id 2), as the AuditEvent's action is R.
func TestAuditLogUsesAreTheAccessActions(t *testing.T) {
	want := []string{access.ActionVerify, access.ActionExport, access.ActionReport, access.ActionProve,
		access.ActionHash, access.ActionPolicyImpact, access.ActionComplianceReport, access.ActionBackup}
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
			Entity []struct {
				What *struct {
					Identifier struct{ System, Value string }
				}
				Type, Role struct{ System, Code, Display string }
				Name       string
			}
		}
		if err := json.Unmarshal(evs[0], &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type.System != "http://dicom.nema.org/resources/ontology/DCM" || ev.Type.Code != "110101" || ev.Action != "R" {
			t.Errorf("%s: type %s#%s action %s, want DCM#110101 R", a, ev.Type.System, ev.Type.Code, ev.Action)
		}
		logs := 0
		for _, e := range ev.Entity {
			if e.Role.Code != "13" {
				continue
			}
			logs++
			if e.Type.System != "http://terminology.hl7.org/CodeSystem/audit-entity-type" || e.Type.Code != "2" ||
				e.Role.System != "http://terminology.hl7.org/CodeSystem/object-role" || e.Role.Display != "Security Resource" ||
				e.Name != "Security Audit Log" || e.What == nil ||
				e.What.Identifier.System != "https://github.com/custos-mcp/custos/fhir/NamingSystem/audit-log" || e.What.Identifier.Value != "n1" {
				t.Errorf("%s: audit log entity %+v, want System Object, Security Resource, named Security Audit Log, the log of node n1", a, e)
			}
		}
		if logs != 1 {
			t.Errorf("%s: %d audit log entities (object-role 13), want 1 (DICOM PS3.15 A.5.3.2: Identity of the audit log, mandatory)", a, logs)
		}
		// OCSF says what FHIR says: a read (of the audit log).
		b, err := bundle.OCSFAPIActivity(r)
		if err != nil {
			t.Fatal(err)
		}
		var oc struct {
			ActivityID   int    `json:"activity_id"`
			ActivityName string `json:"activity_name"`
			TypeUID      int    `json:"type_uid"`
			API          struct{ Operation string }
		}
		if err := json.Unmarshal(b, &oc); err != nil {
			t.Fatal(err)
		}
		if oc.ActivityID != 2 || oc.ActivityName != "Read" || oc.TypeUID != 600302 || oc.API.Operation != a {
			t.Errorf("%s: OCSF activity %d %q type_uid %d operation %q, want 2 Read 600302 %q (the AuditEvent's action R)", a, oc.ActivityID, oc.ActivityName, oc.TypeUID, oc.API.Operation, a)
		}
	}
}
