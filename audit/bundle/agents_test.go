package bundle

import (
	"encoding/json"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/scrub"
	"github.com/custos-mcp/custos/e2e/validators"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/policy/btg"
)

// TestSystemActorsAreApplicationAgents: a record of an act of custos
// itself (a URI retired from the catalog, a policy loaded or rejected, a
// break-the-glass grant expired, the audit log found broken: principal
// "custos"; a scheduled FHIR sync: principal "custos-serve") names custos
// as its agent with the type DICOM and IHE BALP give a software
// application, DCM 110150 "Application" (BALP IUA.71: agent[client].type),
// who a Device. It was exported as a user agent typed "information
// recipient" (IRCP): an auditor counting the people who received
// information counted custos among them. A person stays IRCP, whatever
// their sub: an OAuth subject "custos" reading a resource, an OS account
// that asked for a sync. Every event still passes the outside validators.
func TestSystemActorsAreApplicationAgents(t *testing.T) {
	hk := "hk1-0000000000000000000000000000000a"
	keys := []string{"audit-hmac=secret/custos/audit-hmac-key@2"}
	// A person whose OAuth subject happens to be "custos", and an OS
	// account's sync (app/sync.go, syncNow).
	person := audit.Principal{Sub: "custos", Roles: []string{"clinician"}, ClientID: "claude-desktop"}
	entries := append(realisticEntries(),
		audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow, Reason: "clinician_care_team", Principal: person, PurposeOfUse: "TREAT",
			Source: "10.0.0.5:51234", URIs: []string{"fhir://t/patients/" + hk + "/Observation/o-1"}, Patients: []string{hk}, Keys: keys},
		audit.Entry{Action: "complete", Outcome: audit.OutcomeAllow, Reason: "argument=id returned=0 denied=0 scanned=0", Principal: person, PurposeOfUse: "TREAT",
			Source: "10.0.0.5:51234", Keys: keys},
		fhirsync.AuditEntry(fhirsync.Event{Phase: "start", Base: "https://fhir.example.org/R4", Full: true},
			audit.Principal{Sub: "os:uid=1000(ops)", Roles: []string{"sync"}, ClientID: "custos-cli"}, false, keys),
		fhirsync.AuditEntry(fhirsync.Event{Phase: "start", Base: "https://fhir.example.org/R4", Full: true},
			audit.Principal{Sub: "custos-serve", Roles: []string{"sync"}, ClientID: "custos-sync"}, false, keys),
	)
	// What the test expects, from the writers' own names: the actions
	// custos records as its own acts, and the principal it records them under.
	own := map[string]string{"catalog/retire": "custos", "policy/load": "custos", "policy/reject": "custos",
		btg.KindExpire: "custos", scrub.Action: "custos", fhirsync.ActionSyncStart: "custos-serve", fhirsync.ActionSyncEnd: "custos-serve"}
	_, records := exportEntries(t, "custos-node-1", entries)
	var all [][]byte
	systems, people := map[string]int{}, 0
	for _, r := range records {
		evs, err := FHIRAuditEvents(r)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
		if r.Principal.Sub == "" {
			continue
		}
		for _, b := range evs {
			var ev auditEvent
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			apps, users := ev.agents("110150"), ev.agents("IRCP")
			if own[r.Action] == r.Principal.Sub {
				systems[r.Action]++
				if len(users) != 0 || len(apps) != 1 {
					t.Errorf("seq %d (%s by %s, custos's own act): %d IRCP user agents and %d DCM 110150 Application agents, want none and one", r.Seq, r.Action, r.Principal.Sub, len(users), len(apps))
					continue
				}
				a := apps[0]
				if c := a.Type.Coding[0]; c.System != fhirDICOM || c.Display != "Application" {
					t.Errorf("seq %d: application agent type %+v, want %s#110150 \"Application\"", r.Seq, c, fhirDICOM)
				}
				if a.Who == nil || a.Who.Type != "Device" || a.Who.Identifier == nil || a.Who.Identifier.Value != r.Principal.Sub || !a.Requestor {
					t.Errorf("seq %d: application agent %+v, want the requestor, who a Device %q", r.Seq, a, r.Principal.Sub)
				}
				continue
			}
			people++
			if len(apps) != 0 || len(users) != 1 || users[0].Who == nil || users[0].Who.Identifier.Value != r.Principal.Sub {
				t.Errorf("seq %d (%s by %q, a person): %d IRCP user agents and %d application agents, want the one user %q", r.Seq, r.Action, r.Principal.Sub, len(users), len(apps), r.Principal.Sub)
			}
		}
	}
	// Not vacuous: every kind of custos's own act, and people, were seen.
	for a := range own {
		if systems[a] == 0 {
			t.Errorf("no record of custos's own act %s was checked (seen: %v)", a, systems)
		}
	}
	if people == 0 {
		t.Error("no record of a person was checked")
	}
	t.Run("fhir-r4-outside-validators", func(t *testing.T) {
		rep := validators.FHIR(t, all)
		for _, inv := range rep.Invalid {
			t.Errorf("AuditEvent %d (id %s) is not valid FHIR R4 (%s): %s", inv.Index, inv.ID, inv.Validator, inv.Message)
		}
		t.Logf("%d AuditEvents checked by %v", rep.Validated, rep.Validators)
	})
}

// TestURIEntityClaimsURISystemOnlyForURIs: an entity's identifier is
// under the system urn:ietf:rfc:3986 only when its value is a URI. The
// server records a URI that does not parse as "invalid"
// (server/record.go, pseudonymURI: never one of its own, e.g. a catalog
// entry of a scheme no longer served, retired or listed); that was
// exported as the URI "invalid". It is exported with no system, as the
// record has it; real URIs keep theirs. Both outside validators pass.
func TestURIEntityClaimsURISystemOnlyForURIs(t *testing.T) {
	hk := "hk1-0000000000000000000000000000000b"
	good := "fhir://t/patients/" + hk + "/Observation/o-1"
	keys := []string{"audit-hmac=secret/custos/audit-hmac-key@2"}
	clin := audit.Principal{Sub: "dr-ada", Roles: []string{"clinician"}, ClientID: "claude-desktop"}
	entries := []audit.Entry{
		{Action: "catalog/retire", Outcome: audit.OutcomeAllow, Reason: "retired", Principal: audit.Principal{Sub: "custos", Roles: []string{}}, URIs: []string{"invalid"}, Keys: keys},
		{Action: "complete", Outcome: audit.OutcomeAllow, Reason: "argument=id returned=2 denied=0 scanned=2", Principal: clin, PurposeOfUse: "TREAT", Source: "10.0.0.5:1",
			URIs: []string{"invalid", good}, Patients: []string{hk}, Keys: keys},
		{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeError, Reason: "catalog_unavailable", Principal: clin, PurposeOfUse: "TREAT", Source: "10.0.0.5:1",
			URIs: []string{"invalid"}, Keys: keys},
		{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow, Reason: "clinician_care_team", Principal: clin, PurposeOfUse: "TREAT", Source: "10.0.0.5:1",
			URIs: []string{good}, Patients: []string{hk}, Keys: keys},
	}
	_, records := exportEntries(t, "custos-node-1", entries)
	var all [][]byte
	invalid, uris := 0, 0
	for _, r := range records {
		evs, err := FHIRAuditEvents(r)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
		for _, b := range evs {
			var ev auditEvent
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			for _, e := range ev.entities("2", "4") {
				id := e.What.Identifier
				switch id.Value {
				case "invalid":
					invalid++
					if id.System != "" {
						t.Errorf("seq %d (%s): the unparsable URI recorded as %q is exported under the identifier system %s", r.Seq, r.Action, id.Value, id.System)
					}
				case good:
					uris++
					if id.System != fhirURI {
						t.Errorf("seq %d (%s): URI %s under system %q, want %s", r.Seq, r.Action, id.Value, id.System, fhirURI)
					}
				default:
					t.Errorf("seq %d: unexpected entity %q", r.Seq, id.Value)
				}
			}
		}
	}
	if invalid != 3 || uris != 2 {
		t.Fatalf("%d entities \"invalid\" and %d URIs, want 3 and 2", invalid, uris)
	}
	t.Run("fhir-r4-outside-validators", func(t *testing.T) {
		rep := validators.FHIR(t, all)
		for _, inv := range rep.Invalid {
			t.Errorf("AuditEvent %d (id %s) is not valid FHIR R4 (%s): %s", inv.Index, inv.ID, inv.Validator, inv.Message)
		}
		t.Logf("%d AuditEvents checked by %v", rep.Validated, rep.Validators)
	})
}

// TestIsURI pins what counts as a URI for the identifier system
// urn:ietf:rfc:3986: RFC 3986's absolute form (a scheme, ":", URI
// characters only, "%" with two hex digits).
func TestIsURI(t *testing.T) {
	for _, c := range []struct {
		s  string
		ok bool
	}{
		{"fhir://t/patients/hk1-0123456789abcdef0123456789abcdef/Observation/o-1", true},
		{"phi://patients/6f1c2a44-3b1e-4c8a-9d2f-0a1b2c3d4e5f/summary", true},
		{"fhir://Organization/org-1", true},
		{"urn:oid:1.2.3", true},
		{"https://example.org/a%20b?x=1#f", true},
		{"invalid", false},
		{"", false},
		{":x", false},
		{"1http://x", false},
		{"phi://patients/{id}/summary", false}, // a URI template (RFC 6570), not a URI
		{"fhir://t/a b", false},
		{"fhir://t/a%2", false},
		{"fhir://t/a%zz", false},
		{"fhir://t/\u00e9", false},
		{"fhir://t/\ufffd", false},
	} {
		if got := isURI(c.s); got != c.ok {
			t.Errorf("isURI(%q) = %v, want %v", c.s, got, c.ok)
		}
	}
}
