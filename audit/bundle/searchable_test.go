package bundle

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"

	"github.com/custos-mcp/custos/audit"
)

// fhirID is FHIR R4's id datatype: what may follow "Patient/" in a
// literal reference.
var fhirID = regexp.MustCompile(`^[A-Za-z0-9\-.]{1,64}$`)

// searchRecords are records whose events an auditor searches for by
// patient and user: the golden records, the records of
// TestEveryActionIsExportedAndValidated's realistic log kinds that name a
// principal, and a read of three patients.
func searchRecords() map[string]audit.Record {
	recs := goldenRecords()
	three := testRecord(40, audit.ZeroHash)
	three.Patients = []string{"hk1-00000000000000000000000000000041", "hk1-00000000000000000000000000000042", "hk1-00000000000000000000000000000043"}
	recs["three"] = three
	return recs
}

// TestAuditEventsCarryWhatR4SearchIndexes: the elements R4's AuditEvent
// search parameters index hold what an auditor searches by
// (hl7.org/fhir/R4/auditevent.html#search), as a FHIR server loaded with
// auditevent.ndjson finds them (e2e TestAuditEventsSearchedInAFHIRServer,
// Medplum):
//
//   - patient (AuditEvent.entity.what.where(resolve() is Patient)): every
//     patient entity's what is the literal reference Patient/<the
//     record's patient value>, which resolve() can type; an identifier
//     alone is typed by no server's resolve();
//   - agent-name (AuditEvent.agent.name): the principal's agent (the
//     user, or custos's application agent) names the principal's sub, as
//     BALP says (agent[user].name "here is searchable"); who.identifier is
//     found only by the :identifier modifier, which Medplum's in-memory
//     search does not implement;
//
// The policy revision is not in agent.policy, which R4's policy parameter
// reads: BALP prohibits it on the user agent of the profiles custos claims
// (agent[human].policy 0..0, reserved for an access token's id).
//
// Before this change the patient entity had type and identifier only and
// the user agent no name: patient= and agent-name= found nothing.
func TestAuditEventsCarryWhatR4SearchIndexes(t *testing.T) {
	for name, r := range searchRecords() {
		lines, err := FHIRAuditEvents(r)
		if err != nil {
			t.Fatal(err)
		}
		var named []string // the patients the events name
		for _, line := range lines {
			var ev struct {
				Agent  []searchAgent `json:"agent"`
				Entity []struct {
					What *struct {
						Reference  string `json:"reference"`
						Identifier struct{ Value string }
					} `json:"what"`
					Role *fhirCoding `json:"role"`
				} `json:"entity"`
			}
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatal(err)
			}
			for _, e := range ev.Entity {
				if e.Role == nil || e.Role.Code != "1" || e.What == nil {
					continue
				}
				p := e.What.Identifier.Value
				named = append(named, p)
				want := ""
				if fhirID.MatchString(p) {
					want = "Patient/" + p
				}
				if e.What.Reference != want {
					t.Errorf("%s: patient entity %q: reference %q, want %q", name, p, e.What.Reference, want)
				}
			}
			if r.Principal.Sub == "" {
				continue
			}
			i := slices.IndexFunc(ev.Agent, searchAgent.principals)
			if i < 0 {
				t.Errorf("%s: no agent of the principal", name)
				continue
			}
			a := ev.Agent[i]
			if sub := fhirRequired(r.Principal.Sub); a.Name != sub {
				t.Errorf("%s: the principal's agent is named %q, want %q (agent-name)", name, a.Name, sub)
			}
		}
		for _, p := range r.Patients {
			if p != "" && !slices.Contains(named, p) {
				t.Errorf("%s: patient %q is in no event", name, p)
			}
		}
	}
}

// searchAgent is an AuditEvent's agent, as far as these searches read it.
type searchAgent struct {
	Type fhirConcept `json:"type"`
	Name string      `json:"name"`
}

// principals reports whether a is the agent of the record's principal: the
// user (IRCP) or, for custos's own acts, the application (DCM 110150).
func (a searchAgent) principals() bool {
	return len(a.Type.Coding) > 0 && (a.Type.Coding[0].Code == "IRCP" || a.Type.Coding[0] == agentApplication)
}
