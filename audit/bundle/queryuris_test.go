package bundle

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/e2e/validators"
)

// queryURIRecords are list pages whose result URIs do not all name one of
// the record's patients, as a real server writes them: a page holding
// tenant-level reference data (no patient segment) beside patients'
// resources; and a page of FHIR input whose compartments have no Patient
// resource in the catalog, where the server records each URI's patient
// segment as the keyed hash of the segment itself and the patients as
// the keyed hash of the source Patient id, so that no URI names a
// patient of the record (server.patientOf; seen with the outside Synthea
// DocumentReference and HL7's Consent and Observation examples of
// fhirin/testdata/outside, imported and listed by the real binary).
func queryURIRecords() []audit.Record {
	hk := func(i int) string { return fmt.Sprintf("hk1-%032x", i) }
	r := func(seq uint64, uris, patients []string) audit.Record {
		return audit.Record{V: 2, Seq: seq, EventID: fmt.Sprintf("00000000-0000-4000-8000-%012d", seq),
			Time: testEpoch.Add(time.Duration(seq) * time.Millisecond), Node: "custos-node-1", PrevHash: audit.ZeroHash,
			Entry: audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow, Reason: "returned=4 denied=0 scanned=4",
				Principal:    audit.Principal{Sub: "dr-ada", Roles: []string{"clinician"}, ClientID: "claude-desktop"},
				PurposeOfUse: "TREAT", Source: "127.0.0.1:43422", URIs: uris, Patients: patients,
				DecisionID: "list-1", PolicyRevision: "rev-7"}}
	}
	return []audit.Record{
		r(1, []string{"fhir://general-hospital/patients/" + hk(1) + "/observation/o-1",
			"fhir://general-hospital/organization/org-1"}, []string{hk(1)}),
		r(2, []string{"fhir://general-hospital/patients/" + hk(1) + "/observation/o-1",
			"fhir://general-hospital/patients/" + hk(2) + "/condition/c-1",
			"fhir://general-hospital/practitioner/pr-1"}, []string{hk(1), hk(2)}),
		r(3, []string{"attachment://outside-clinic/patients/" + hk(11) + "/attachments/a-1",
			"fhir://outside-clinic/patients/" + hk(11) + "/documentreference/d-1",
			"fhir://outside-clinic/patients/" + hk(12) + "/consent/c-1",
			"fhir://outside-clinic/patients/" + hk(12) + "/observation/o-1"}, []string{hk(21), hk(22)}),
	}
}

// TestQueryEventsKeepEveryResultURI: every result URI of a list record is
// in the custos extension of at least one of its AuditEvents, and the
// event of a patient names no URI of another patient of the record. The
// rendering named only the URIs holding the event's patient: a tenant's
// reference data listed beside a patient's resources, and every URI of a
// FHIR import whose catalog holds no Patient resource (each URI's patient
// hash differs from the record's), were in no event — the export of such
// a list showed a query that returned nothing. The events pass HL7's
// FHIR R4 schema and Medplum.
func TestQueryEventsKeepEveryResultURI(t *testing.T) {
	var all [][]byte
	for _, r := range queryURIRecords() {
		evs, err := FHIRAuditEvents(r)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
		seen := map[string]bool{}
		for _, b := range evs {
			var ev auditEvent
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			var patient string
			for _, e := range ev.Entity {
				if e.What != nil && e.What.Type == "Patient" {
					patient = e.What.Identifier.Value
				}
			}
			for _, x := range ev.Extension[0].Extension {
				if x.URL != "uri" {
					continue
				}
				seen[x.ValueString] = true
				for _, p := range r.Patients {
					if p != patient && strings.Contains(x.ValueString, p) {
						t.Errorf("seq %d: the event of patient %s names %s, a URI of patient %s", r.Seq, patient, x.ValueString, p)
					}
				}
				// A URI in a compartment that names none of the record's
				// patients is some patient's, and which one the record
				// does not say once it has several: no patient's event may
				// name it.
				if patient != "" && len(r.Patients) > 1 && strings.Contains(x.ValueString, "/patients/") && !strings.Contains(x.ValueString, patient) {
					t.Errorf("seq %d: the event of patient %s names %s, a URI of a patient the record does not tell", r.Seq, patient, x.ValueString)
				}
			}
		}
		for _, u := range r.URIs {
			if !seen[u] {
				t.Errorf("seq %d (%d patients, %d events): result URI %s is in no AuditEvent", r.Seq, len(r.Patients), len(evs), u)
			}
		}
		if got := len(seen); got != len(r.URIs) {
			t.Errorf("seq %d: the events name %d distinct URIs, the record %d", r.Seq, got, len(r.URIs))
		}
	}
	for _, inv := range validators.FHIR(t, all).Invalid {
		t.Errorf("AuditEvent %d (id %s) is not valid FHIR R4 (%s): %s", inv.Index, inv.ID, inv.Validator, inv.Message)
	}
	if !slices.ContainsFunc(all, func(b []byte) bool { return strings.Contains(string(b), "IHE.BasicAudit.PatientQuery") }) {
		t.Error("no event claims PatientQuery: the records are not the list pages they stand for")
	}
}
