package bundle

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/scrub"
	"github.com/custos-mcp/custos/e2e/validators"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/santhosh-tekuri/jsonschema/v6"
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
	own := ownActsByWriters()
	_, records := exportEntries(t, "custos-node-1", actorEntries())
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

// ownActsByWriters is what the actor tests expect, from the writers' own
// names: the actions custos records as its own acts, and the principal it
// records them under.
func ownActsByWriters() map[string]string {
	return map[string]string{"catalog/retire": "custos", "policy/load": "custos", "policy/reject": "custos",
		btg.KindExpire: "custos", scrub.Action: "custos", fhirsync.ActionSyncStart: "custos-serve", fhirsync.ActionSyncEnd: "custos-serve"}
}

// actorEntries are realisticEntries (every one of custos's own acts among
// them) and people whose principal looks like custos's: a person whose
// OAuth subject happens to be "custos", an OS account's sync (app/sync.go,
// syncNow), and a sync by "custos-serve" through a client.
func actorEntries() []audit.Entry {
	hk := "hk1-0000000000000000000000000000000a"
	keys := []string{"audit-hmac=secret/custos/audit-hmac-key@2"}
	person := audit.Principal{Sub: "custos", Roles: []string{"clinician"}, ClientID: "claude-desktop"}
	return append(realisticEntries(),
		audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow, Reason: "clinician_care_team", Principal: person, PurposeOfUse: "TREAT",
			Source: "10.0.0.5:51234", URIs: []string{"fhir://t/patients/" + hk + "/Observation/o-1"}, Patients: []string{hk}, Keys: keys},
		audit.Entry{Action: "complete", Outcome: audit.OutcomeAllow, Reason: "argument=id returned=0 denied=0 scanned=0", Principal: person, PurposeOfUse: "TREAT",
			Source: "10.0.0.5:51234", Keys: keys},
		fhirsync.AuditEntry(fhirsync.Event{Phase: "start", Base: "https://fhir.example.org/R4", Full: true},
			audit.Principal{Sub: "os:uid=1000(ops)", Roles: []string{"sync"}, ClientID: "custos-cli"}, false, keys),
		fhirsync.AuditEntry(fhirsync.Event{Phase: "start", Base: "https://fhir.example.org/R4", Full: true},
			audit.Principal{Sub: "custos-serve", Roles: []string{"sync"}, ClientID: "custos-sync"}, false, keys),
	)
}

// TestOCSFSystemActorsAreSystemUsers: in OCSF, a record of an act of
// custos itself (the same acts the FHIR export gives a DCM 110150
// Application agent: ownActs) has actor.user typed as the system account
// it is, type_id 3 "System" (OCSF 1.3.0 user.type_id: 0 Unknown, 1 User,
// 2 Admin, 3 System, 99 Other), with uid the principal. It was exported as
// a bare {uid}: a SIEM filtering actor.user.type_id to tell people from
// the system counted custos among the users. A person keeps no type (the
// record does not say whether they are a user or an admin), whatever
// their sub; an unauthenticated request keeps type_id 0. Every event
// passes the OCSF 1.3.0 API Activity schema.
func TestOCSFSystemActorsAreSystemUsers(t *testing.T) {
	own := ownActsByWriters()
	dir, records := exportEntries(t, "custos-node-1", actorEntries())
	schema := compileOCSFSchema(t)
	type user struct {
		UID    string `json:"uid"`
		Name   string `json:"name"`
		TypeID *int   `json:"type_id"`
		Type   string `json:"type"`
	}
	systems, people := map[string]int{}, 0
	for i, line := range lines(t, filepath.Join(dir, FormatOCSF.FileName())) {
		r := records[i]
		var ev struct {
			Actor struct {
				User    *user  `json:"user"`
				AppName string `json:"app_name"`
			} `json:"actor"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(v); err != nil {
			t.Errorf("seq %d (%s): not valid OCSF 1.3.0 API Activity: %v", r.Seq, r.Action, err)
		}
		u := ev.Actor.User
		if u == nil {
			t.Errorf("seq %d (%s): no actor.user", r.Seq, r.Action)
			continue
		}
		switch {
		case r.Principal.Sub == "":
			if u.TypeID == nil || *u.TypeID != 0 {
				t.Errorf("seq %d (%s, no principal): actor.user %+v, want type_id 0 Unknown", r.Seq, r.Action, u)
			}
		case own[r.Action] == r.Principal.Sub:
			systems[r.Action]++
			if u.TypeID == nil || *u.TypeID != 3 || u.Type != "System" || u.UID != r.Principal.Sub {
				t.Errorf("seq %d (%s by %s, custos's own act): actor.user %s, want uid %q, type_id 3, type \"System\"", r.Seq, r.Action, r.Principal.Sub, mustJSON(t, u), r.Principal.Sub)
			}
			if ev.Actor.AppName != r.Principal.ClientID {
				t.Errorf("seq %d: actor.app_name %q, want the client_id %q", r.Seq, ev.Actor.AppName, r.Principal.ClientID)
			}
		default:
			people++
			if u.TypeID != nil || u.Type != "" || u.UID != r.Principal.Sub {
				t.Errorf("seq %d (%s by %q, a person): actor.user %s, want uid %q and no type", r.Seq, r.Action, r.Principal.Sub, mustJSON(t, u), r.Principal.Sub)
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
	// The schema holds type to its type_id's caption (not vacuous).
	line := lines(t, filepath.Join(dir, FormatOCSF.FileName()))[0]
	for i, bad := range []string{`{"uid":"custos","type_id":3,"type":"System"}`, `{"uid":"custos","type_id":3,"type":"User"}`, `{"uid":"custos","type_id":4,"type":"Service"}`} {
		var ev map[string]any
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		var u any
		json.Unmarshal([]byte(bad), &u)
		ev["actor"].(map[string]any)["user"] = u
		switch err := schema.Validate(ev); {
		case i == 0 && err != nil: // the control: only the user differs
			t.Errorf("the OCSF 1.3.0 schema rejects actor.user %s: %v", bad, err)
		case i > 0 && err == nil:
			t.Errorf("the OCSF 1.3.0 schema accepts actor.user %s", bad)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
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
