package bundle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/custos-mcp/custos/e2e/validators"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/scrub"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// realisticEntries are the records a serving custos writes
// (docs/audit-format.md, "What the server writes for each request"):
// reads allowed over HTTP, stdio and from an address, denied, not found,
// malformed, failed; a read of a resource concerning three patients; a
// list page of 60 URIs over 55 patients and its refusals; a templates
// list; HTTP refusals before authentication; a rate limit; break-the-glass
// grant, use, revoke, expiry and review; completion, subscription and
// notification; a policy load.
func realisticEntries() []audit.Entry {
	hk := func(i int) string { return fmt.Sprintf("hk1-%032x", i) }
	uri := func(p int, res string) string { return fmt.Sprintf("fhir://patients/%s/%s", hk(p), res) }
	clin := audit.Principal{Sub: "dr-ada", Roles: []string{"clinician", "cardiology"}, ClientID: "claude-desktop"}
	er := audit.Principal{Sub: "dr-bob", Roles: []string{"clinician", "emergency"}, ClientID: "claude-desktop"}
	out := audit.Principal{Sub: "mallory", Roles: []string{"billing"}, ClientID: "agent-x"}
	keys := []string{"audit-hmac=secret/custos/audit-hmac-key@2", "cursor=secret/custos/cursor-key@1"}
	read := func(p audit.Principal, pou, source, outcome, reason string, patients ...int) audit.Entry {
		e := audit.Entry{Action: audit.ActionResourcesRead, Outcome: outcome, Reason: reason, Principal: p, PurposeOfUse: pou,
			Session: "mcp-session-1", Source: source, DecisionID: "dec-" + reason, PolicyRevision: "rev-7", Keys: keys}
		if len(patients) > 0 {
			e.URIs = []string{uri(patients[0], "Observation/obs-1")}
			for _, p := range patients {
				e.Patients = append(e.Patients, hk(p))
			}
		}
		if outcome == audit.OutcomeAllow {
			e.Digests = []string{"sha256:9f2c@v3"}
			e.Obligations = []string{"remove:/name"}
		}
		return e
	}
	page := audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow, Reason: "returned=60 denied=4 scanned=64",
		Principal: clin, PurposeOfUse: "TREAT", Session: "mcp-session-1", Source: "stdio", DecisionID: "list-1", PolicyRevision: "rev-7", Keys: keys}
	for i := range 60 {
		p := 100 + i%55
		page.URIs = append(page.URIs, uri(p, fmt.Sprintf("Condition/c-%d", i)))
		if i < 55 {
			page.Patients = append(page.Patients, hk(p))
		}
		page.Digests = append(page.Digests, fmt.Sprintf("sha256:%04x@v1", i))
	}
	simple := func(action, outcome, reason string, p audit.Principal, source string) audit.Entry {
		return audit.Entry{Action: action, Outcome: outcome, Reason: reason, Principal: p, Source: source, Keys: keys}
	}
	entries := []audit.Entry{
		read(clin, "TREAT", "oauth", audit.OutcomeAllow, "clinician_care_team", 1),
		read(clin, "TREAT", "stdio", audit.OutcomeAllow, "clinician_care_team", 2),
		read(clin, "TREAT", "10.0.0.5:51234", audit.OutcomeAllow, "clinician_care_team", 3),
		read(clin, "TREAT", "[2001:db8::7]:443", audit.OutcomeAllow, "clinician_care_team", 3),
		read(out, "HPAYMT", "oauth", audit.OutcomeDeny, "not_care_team", 1),
		read(out, "HPAYMT", "oauth", audit.OutcomeDeny, "not_found", 9),
		read(out, "HPAYMT", "oauth", audit.OutcomeDeny, "bad_uri"),
		read(clin, "TREAT", "stdio", audit.OutcomeError, "policy_error", 2),
		read(clin, "TREAT", "stdio", audit.OutcomeAllow, "clinician_care_team", 4),
		read(clin, "TREAT", "stdio", audit.OutcomeError, "payload_unavailable", 4),
		read(clin, "TREAT", "stdio", audit.OutcomeAllow, "clinician_care_team", 5, 6, 7), // a resource of three patients
		{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow, Reason: "directory", Principal: clin, PurposeOfUse: "TREAT", Source: "stdio",
			URIs: []string{"fhir://Organization/org-1"}, Digests: []string{"sha256:77@v1"}, DecisionID: "dec-org", PolicyRevision: "rev-7", Keys: keys}, // a resource of no patient
		page,
		{Action: audit.ActionResourcesList, Outcome: audit.OutcomeDeny, Reason: "bad_cursor", Principal: clin, PurposeOfUse: "TREAT", Source: "oauth", DecisionID: "list-2", Keys: keys},
		{Action: audit.ActionResourcesList, Outcome: audit.OutcomeError, Reason: "policy_error returned=0 denied=0 scanned=3", Principal: clin, PurposeOfUse: "TREAT", Source: "oauth", DecisionID: "list-3", Keys: keys},
		{Action: audit.ActionResourcesTemplatesList, Outcome: audit.OutcomeAllow, Reason: "templates_no_phi", Principal: clin, PurposeOfUse: "TREAT", Source: "stdio", DecisionID: "tmpl-1", PolicyRevision: "rev-7", Keys: keys},
		simple("auth/reject", audit.OutcomeDeny, "http_401,no_token", audit.Principal{}, "198.51.100.23:40000"),
		simple("auth/reject", audit.OutcomeDeny, "http_401,invalid_token,expired", audit.Principal{}, "198.51.100.23:40001"),
		simple("auth/reject", audit.OutcomeDeny, "http_403,insufficient_scope", audit.Principal{}, "[2001:db8::9]:40002"),
		simple("auth/reject", audit.OutcomeDeny, "http_403,cross_origin", audit.Principal{}, "198.51.100.24:40003"),
		simple("http/rate_limited", audit.OutcomeDeny, "http_429,rate_limited", clin, "198.51.100.25:40004"),
		{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeDeny, Reason: "no_identity", Principal: clin, Source: "oauth", Keys: keys},
		simple("btg/grant", audit.OutcomeAllow, "grant=g-1 ttl=4h", er, "btg"),
		read(er, "ETREAT", "10.0.0.9:50000", audit.OutcomeAllow, "break_glass", 8),
		read(er, "ETREAT", "10.0.0.9:50000", audit.OutcomeAllow, "break_glass", 8, 9),
		simple("btg/revoke", audit.OutcomeAllow, "grant=g-1", audit.Principal{Sub: "privacy-officer", Roles: []string{"privacy"}}, "btg"),
		simple("btg/expire", audit.OutcomeAllow, "grant=g-2", audit.Principal{Sub: "custos"}, "btg"),
		simple("btg/review", audit.OutcomeAllow, "grant=g-1 reviewed", audit.Principal{Sub: "privacy-officer", Roles: []string{"privacy"}}, "btg"),
		{Action: "complete", Outcome: audit.OutcomeAllow, Reason: "argument=id returned=2 denied=0 scanned=2", Principal: clin, PurposeOfUse: "TREAT", Source: "stdio",
			URIs: []string{uri(10, "Patient/p"), uri(11, "Patient/p")}, Patients: []string{hk(10), hk(11)}, DecisionID: "cmp-1", Keys: keys},
		read(clin, "TREAT", "oauth", audit.OutcomeAllow, "clinician_care_team", 12), // subscribe is recorded like a read ...
		{Action: "subscribe", Outcome: audit.OutcomeAllow, Reason: "clinician_care_team", Principal: clin, PurposeOfUse: "TREAT", Source: "oauth",
			URIs: []string{uri(12, "Observation/obs-1")}, Patients: []string{hk(12)}, DecisionID: "sub-1", Keys: keys},
		{Action: "notify", Outcome: audit.OutcomeAllow, Reason: "clinician_care_team", Principal: clin, PurposeOfUse: "TREAT", Source: "oauth",
			URIs: []string{uri(12, "Observation/obs-1")}, Patients: []string{hk(12)}, Digests: []string{"sha256:aa@v4"}, DecisionID: "ntf-1", Keys: keys},
		{Action: "notify", Outcome: audit.OutcomeDeny, Reason: "token_expired", Principal: clin, PurposeOfUse: "TREAT", Source: "oauth",
			URIs: []string{uri(12, "Observation/obs-1")}, Patients: []string{hk(12)}, Keys: keys},
		{Action: "unsubscribe", Outcome: audit.OutcomeDeny, Reason: "not_subscribed", Principal: clin, PurposeOfUse: "TREAT", Source: "oauth", Keys: keys},
		simple("policy/load", audit.OutcomeAllow, "revision=rev-8", audit.Principal{Sub: "custos"}, "bundle"),
	}
	// The rest as a real server and CLI write them (shapes taken from a log
	// written by `custos demo`, `custos serve --dev` and the auditor,
	// break-the-glass, backup and restore commands; sync and integrity
	// records from their own constructors).
	system := audit.Principal{Sub: "custos", Roles: []string{}}
	osUser := audit.Principal{Sub: "os:uid=0(root)", Roles: []string{}, ClientID: "custos-cli"}
	access := func(action, reason, source, pou string, patients ...string) audit.Entry {
		return audit.Entry{Action: action, Outcome: audit.OutcomeAllow, Reason: reason, Principal: osUser, PurposeOfUse: pou, Source: source, Patients: patients, Keys: keys}
	}
	sync := func(ev fhirsync.Event) audit.Entry {
		return fhirsync.AuditEntry(ev, audit.Principal{Sub: "custos-serve", Roles: []string{}}, false, keys)
	}
	const rev = "sha256:c64a6bb8d42a38919f201fb9842c277e103e3c06e4c9071d81e51ce309c68362"
	entries = append(entries,
		audit.Entry{Action: "unsubscribe", Outcome: audit.OutcomeAllow, Reason: "unsubscribed", Principal: clin, PurposeOfUse: "TREAT", Source: "127.0.0.1:39140",
			URIs: []string{uri(12, "Observation/obs-1")}, Patients: []string{hk(12)}, Keys: keys},
		audit.Entry{Action: "catalog/retire", Outcome: audit.OutcomeAllow, Reason: "retired", Principal: system,
			URIs: []string{uri(13, "Observation/obs-9")}, Patients: []string{hk(13)}, PolicyRevision: rev, Keys: keys},
		audit.Entry{Action: "policy/load", Outcome: audit.OutcomeAllow, Reason: "candidate=" + rev + " previous=sha256:1693589d4bf9bb8142c3e94d1b806c0bc273934cf",
			Principal: system, Source: "dir:/etc/custos/policy", PolicyRevision: rev, Keys: keys},
		audit.Entry{Action: "policy/load", Outcome: audit.OutcomeAllow, Reason: "candidate=sha256:ab sequence=7", Principal: system, Source: "bundle:/etc/custos/policy.bundle",
			PolicyRevision: rev + " bundle=sha256:cd", Keys: keys},
		audit.Entry{Action: "policy/reject", Outcome: audit.OutcomeDeny, Reason: "candidate=sha256:93dd policy: compile failed: 1 error occurred: authz.rego:688: rego_parse_error: unexpected eof token",
			Principal: system, Source: "dir:/etc/custos/policy", PolicyRevision: rev, Keys: keys},
		audit.Entry{Action: "btg/refuse", Outcome: audit.OutcomeDeny, Reason: "grant=g-3 grantee=dr-bob ttl=3h0m0s refused=ttl_exceeds_max", Principal: audit.Principal{Sub: "root", Roles: []string{}},
			PurposeOfUse: "ETREAT", Source: "btg", Patients: []string{hk(14)}, DecisionID: "ev-3", Keys: keys},
		access("audit/verify", "by=auditor-1", "local", "HOPERAT"),
		access("audit/export", "by=auditor-1 bundle=1 formats=csv,fhir,ocsf", "admin.sock", "HOPERAT"),
		access("audit/report", "denials", "local", "HOPERAT"),
		access("audit/prove", "seq=3", "local", "HOPERAT"),
		access("audit/hash", "patient="+hk(1), "admin.sock", "PATRQT", hk(1)),
		access("policy/impact", "", "local", "HOPERAT"),
		access("compliance/report", "retention=52596h0m0s", "local", "HOPERAT"),
		access("backup", "by=ops out=/backup/custos-2026-12-05", "local", "HOPERAT"),
		access("backup/restore", "backup=/backup/custos-2026-12-05 head=21 head_hash=01290d6dcd064218374f6cd7089b5b6bca3fd633b053cabafdd80e247db67d5f", "local", "HOPERAT"),
		scrub.Pass{Size: 90, Problems: []audit.Problem{{Seq: 42, Kind: audit.KindHashMismatch}}, Found: 2}.Entry(),
		sync(fhirsync.Event{Phase: "start", Base: "https://fhir.example.org/R4", Tenant: "general-hospital", Full: true}),
		sync(fhirsync.Event{Phase: "end", Base: "https://fhir.example.org/R4", Tenant: "general-hospital", Full: true, Mode: "bulk",
			Resources: 12, Types: map[string]int{"Observation": 10, "Patient": 2}, Requests: 5, Duration: time.Second}),
		sync(fhirsync.Event{Phase: "end", Base: "https://fhir.example.org/R4", Since: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
			Err: errors.New("fhirsync: server: GET /R4/Observation: HTTP 500")}),
		simple("auth/reject", audit.OutcomeDeny, "http_401,invalid_token,aggregate,count=300,window=2026-12-05T13:12:53Z/2026-12-05T13:13:58Z", audit.Principal{Roles: []string{}}, "127.0.0.1"),
		simple("http/rate_limited", audit.OutcomeDeny, "http_429,rate_limited,aggregate,count=9,window=2026-12-05T13:16:25Z/2026-12-05T13:16:28Z", clin, "127.0.0.1"),
	)
	return entries
}

// exportRealistic writes realisticEntries to a real audit log and exports
// them, in every human format, as a verified bundle.
func exportRealistic(t *testing.T) (dir string, records []audit.Record) {
	t.Helper()
	return exportEntries(t, "custos-node-1", realisticEntries())
}

// exportEntries writes entries to a real audit log of node and exports
// them, in every human format, as a verified bundle.
func exportEntries(t *testing.T, node string, entries []audit.Entry) (dir string, records []audit.Record) {
	t.Helper()
	l, _ := audittest.Open(t, audit.Options{Node: node, MaxBatchDelay: time.Microsecond})
	for _, e := range entries {
		if _, err := l.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	size, _, err := l.TreeHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	k := newTestKey(t, testOrigin, 1)
	dir = filepath.Join(t.TempDir(), "bundle")
	if _, err := Write(context.Background(), dir, l, WriteOptions{From: 1, To: uint64(size), Checkpoints: checkpoints(t, k, l, size), Formats: Formats}); err != nil {
		t.Fatal(err)
	}
	if tr, err := Verify(dir, []byte(k.vkey)); err != nil {
		t.Fatalf("the bundle does not verify: %v\n%s", err, tr.Text())
	}
	for _, line := range lines(t, filepath.Join(dir, FileRecords)) {
		r, err := audit.Decode(line)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, r)
	}
	return dir, records
}

func lines(t *testing.T, path string) [][]byte {
	t.Helper()
	var out [][]byte
	for l := range bytes.Lines(mustRead(t, path)) {
		out = append(out, bytes.TrimSuffix(l, []byte("\n")))
	}
	return out
}

// TestExportsPassOutsideValidators exports a realistic log and checks every
// exported event against the standards it claims: each FHIR AuditEvent
// with HL7's FHIR R4 JSON schema and Medplum's R4 validator (npm, run by
// node from e2e/validators: `make validators`) and with the IHE BALP
// profile rules; each OCSF event with the OCSF 1.3.0 API Activity rules
// (testdata/ocsf). Every invalid event is named. Under CI=true a missing
// validator fails the test; otherwise only the node part is skipped.
func TestExportsPassOutsideValidators(t *testing.T) {
	dir, records := exportRealistic(t)
	bySeq := map[uint64]audit.Record{}
	for _, r := range records {
		bySeq[r.Seq] = r
	}
	fhirFile := filepath.Join(dir, FormatFHIR.FileName())
	fhirLines := lines(t, fhirFile)
	if len(fhirLines) <= len(records) {
		t.Fatalf("%d AuditEvents for %d records: the multi-patient read and list should give one event per patient", len(fhirLines), len(records))
	}

	t.Run("balp", func(t *testing.T) {
		claimed := map[string]int{}
		patientsSeen := map[uint64][]string{}
		for i, line := range fhirLines {
			var ev auditEvent
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			r, ok := bySeq[ev.seq()]
			if !ok {
				t.Fatalf("event %d (%s) names no record of the bundle", i, ev.ID)
			}
			for _, p := range ev.entities("1", "1") {
				patientsSeen[r.Seq] = append(patientsSeen[r.Seq], p.What.Identifier.Value)
			}
			for _, problem := range checkBALP(ev, r) {
				t.Errorf("AuditEvent %d (id %s, record seq %d, %s %s): %s", i, ev.ID, r.Seq, r.Action, r.Outcome, problem)
			}
			for _, p := range ev.Meta.Profile {
				claimed[p[strings.LastIndex(p, ".")+1:]]++
			}
		}
		// Every patient of every record is listed, in one event or another.
		for _, r := range records {
			if got := slices.Sorted(slices.Values(patientsSeen[r.Seq])); !slices.Equal(got, slices.Sorted(slices.Values(r.Patients))) {
				t.Errorf("record seq %d (%s): patients %v in its events, want %v", r.Seq, r.Action, got, r.Patients)
			}
		}
		// The profiles are claimed where the records allow it (not vacuous).
		for _, p := range []string{"PatientRead", "Read", "PatientQuery", "Query"} {
			if claimed[p] == 0 {
				t.Errorf("no event claims BALP %s (claimed: %v)", p, claimed)
			}
		}
		t.Logf("%d AuditEvents for %d records; BALP profiles claimed: %v", len(fhirLines), len(records), claimed)
	})

	t.Run("ocsf-1.3.0", func(t *testing.T) {
		schema := compileOCSFSchema(t)
		ocsfLines := lines(t, filepath.Join(dir, FormatOCSF.FileName()))
		if len(ocsfLines) != len(records) {
			t.Fatalf("%d OCSF events for %d records", len(ocsfLines), len(records))
		}
		for i, line := range ocsfLines {
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
			if err != nil {
				t.Fatalf("OCSF event %d: %v", i, err)
			}
			if err := schema.Validate(v); err != nil {
				t.Errorf("OCSF event %d (record seq %d, %s %s) is not valid OCSF 1.3.0 API Activity: %v", i, records[i].Seq, records[i].Action, records[i].Outcome, err)
			}
		}
	})

	t.Run("fhir-r4-outside-validators", func(t *testing.T) {
		rep := validators.FHIR(t, fhirLines)
		for _, inv := range rep.Invalid {
			t.Errorf("AuditEvent %d (id %s) is not valid FHIR R4 (%s): %s", inv.Index, inv.ID, inv.Validator, inv.Message)
		}
		t.Logf("%d AuditEvents checked by %v: %d problem(s)", rep.Validated, rep.Validators, len(rep.Invalid))
	})
}

func compileOCSFSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	const path = "testdata/ocsf/api_activity-1.3.0.schema.json"
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(path, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// auditEvent is the part of an exported AuditEvent the BALP rules read.
type auditEvent struct {
	ID   string `json:"id"`
	Meta struct {
		Profile []string `json:"profile"`
	} `json:"meta"`
	Extension []struct {
		URL       string `json:"url"`
		Extension []struct {
			URL         string `json:"url"`
			ValueString string `json:"valueString"`
		} `json:"extension"`
	} `json:"extension"`
	Type    fhirCoding   `json:"type"`
	Subtype []fhirCoding `json:"subtype"`
	Action  string       `json:"action"`
	Outcome string       `json:"outcome"`
	Agent   []fhirAgent  `json:"agent"`
	Entity  []fhirEntity `json:"entity"`
}

func (ev auditEvent) seq() uint64 {
	for _, e := range ev.Extension {
		for _, x := range e.Extension {
			if x.URL == "seq" {
				var s uint64
				fmt.Sscan(x.ValueString, &s)
				return s
			}
		}
	}
	return 0
}

// agents returns the agents whose type is the coding code.
func (ev auditEvent) agents(code string) []fhirAgent {
	var out []fhirAgent
	for _, a := range ev.Agent {
		if a.Type != nil && len(a.Type.Coding) > 0 && a.Type.Coding[0].Code == code {
			out = append(out, a)
		}
	}
	return out
}

// entities returns the entities of audit-entity-type typ (and object-role
// role, unless empty).
func (ev auditEvent) entities(typ, role string) []fhirEntity {
	var out []fhirEntity
	for _, e := range ev.Entity {
		if e.Type != nil && e.Type.Code == typ && (role == "" || (e.Role != nil && e.Role.Code == role)) {
			out = append(out, e)
		}
	}
	return out
}

// checkBALP checks ev, rendered from r, against the IHE BALP patterns
// (IHE.BasicAudit.Read / PatientRead, Query / PatientQuery:
// input/fsh/PatientRead.fsh and PatientQuery.fsh of IHE/ITI.BasicAudit):
// the pattern rules for every read and query event, and every rule of the
// profile an event claims. It returns the rules broken.
func checkBALP(ev auditEvent, r audit.Record) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	wantOutcome := map[string]string{audit.OutcomeAllow: "0", audit.OutcomeDeny: "4", audit.OutcomeError: "8"}[r.Outcome]
	if ev.Outcome != wantOutcome {
		fail("outcome %q, want %q for %s", ev.Outcome, wantOutcome, r.Outcome)
	}
	profile := ""
	if len(ev.Meta.Profile) > 0 {
		profile = ev.Meta.Profile[0]
	}
	if profile != "" && ev.Outcome != "0" {
		fail("a failure claims %s, whose outcome is fixed to 0 (success)", profile)
	}
	kind := balpKindOf(r.Action)
	if kind == kindOther {
		if profile != "" {
			fail("an action with no BALP pattern claims %s", profile)
		}
		return bad
	}
	// Agent roles: read client = Destination (110152), server = Source
	// (110153); query the other way round.
	clientCode, serverCode := "110153", "110152"
	if kind == kindRead {
		clientCode, serverCode = "110152", "110153"
	}
	clients, servers := ev.agents(clientCode), ev.agents(serverCode)
	if len(clients) != 1 || len(servers) != 1 {
		fail("%d agents %s (client) and %d agents %s (server), want one each", len(clients), clientCode, len(servers), serverCode)
		return bad
	}
	client, server := clients[0], servers[0]
	if r.Principal.ClientID != "" && (client.Who == nil || client.Who.Identifier.Value != r.Principal.ClientID) {
		fail("agent %s is not the client application %q (roles swapped?)", clientCode, r.Principal.ClientID)
	}
	if server.Who == nil || server.Who.Identifier.Value != r.Node {
		fail("agent %s is not the server %q (roles swapped?)", serverCode, r.Node)
	}
	users := ev.agents("IRCP")
	if r.Principal.Sub != "" && (len(users) != 1 || users[0].Who == nil || users[0].Who.Identifier.Value != r.Principal.Sub || !users[0].Requestor || users[0].Network != nil) {
		fail("user agent %+v, want one IRCP requestor %q without network", users, r.Principal.Sub)
	}
	patients := ev.entities("1", "1")
	if len(patients) > 1 {
		fail("%d patients in one event, want at most one (PatientRead/PatientQuery name one patient)", len(patients))
	}
	for _, p := range patients {
		if p.What == nil || p.What.Type != "Patient" || p.What.Identifier == nil {
			fail("patient entity without a Patient reference")
		}
	}
	objects := ev.entities("2", "") // the profiles slice entities by type: #2 is data (Read) or query (Query), one of them
	switch kind {
	case kindRead:
		if ev.Type.Code != "rest" || len(ev.Subtype) == 0 || ev.Subtype[0].Code != "read" || ev.Action != "R" {
			fail("type %s subtype %v action %s, want rest/read/R", ev.Type.Code, ev.Subtype, ev.Action)
		}
		if len(objects) != len(r.URIs) || len(objects) > 1 {
			fail("%d System Object entities, want the one data entity of the URI read", len(objects))
		}
		for _, o := range objects {
			if o.Role == nil || o.Role.Code != "4" || o.What == nil {
				fail("data entity role %v what %v, want Domain Resource (4) with what", o.Role, o.What)
			}
		}
	case kindQuery:
		if ev.Type.Code != "rest" || len(ev.Subtype) == 0 || ev.Subtype[0].Code != "search" || ev.Action != "E" {
			fail("type %s subtype %v action %s, want rest/search/E", ev.Type.Code, ev.Subtype, ev.Action)
		}
		if len(objects) != 1 || objects[0].Role == nil || objects[0].Role.Code != "24" || objects[0].What != nil {
			fail("entities of type System Object %+v, want exactly one: the query (role 24, no what)", objects)
		} else if q, err := base64.StdEncoding.DecodeString(objects[0].Query); err != nil || string(q) != r.Action {
			fail("entity.query %q is not base64 of the query %q", objects[0].Query, r.Action)
		}
	}
	// The profile is claimed exactly when the record allows it.
	knowsClient := r.Principal.ClientID != "" && client.Network != nil && server.Network != nil
	wantProfile := ""
	if r.Outcome == audit.OutcomeAllow && knowsClient && (kind == kindQuery || len(r.URIs) == 1) {
		switch {
		case kind == kindRead && len(patients) == 1:
			wantProfile = balpPatientRead
		case kind == kindRead:
			wantProfile = balpRead
		case len(patients) == 1:
			wantProfile = balpPatientQuery
		default:
			wantProfile = balpQuery
		}
	}
	if profile != wantProfile {
		fail("claims profile %q, want %q", profile, wantProfile)
	}
	if profile != "" && (client.Network == nil || client.Network.Address == "" || server.Network == nil || client.Who == nil) {
		fail("claims %s without client/server who and network (1..1)", profile)
	}
	if (r.Source == "stdio" || strings.Count(r.Source, ".") == 3 || strings.HasPrefix(r.Source, "[")) && client.Network == nil {
		fail("source %q gives no client network address", r.Source)
	}
	return bad
}

// hostileEntries are records holding what FHIR strings may not: text a
// principal, a client or a policy error can put into a record (no-break
// and ideographic spaces, line separators, a byte order mark, control
// characters, blanks, stray spaces around a purpose, more than 1 MiB).
func hostileEntries() []audit.Entry {
	odd := []string{"dr\u00a0ada", "山田\u3000太郎", "line\u2028sep", "\ufeffbom", "ctl\x01\x1f\x7f", " ", "tab\there", "\u0085nel", "para\u2029"}
	var out []audit.Entry
	for i, s := range odd {
		out = append(out, audit.Entry{
			Action: audit.ActionResourcesRead, Outcome: audit.OutcomeDeny, Reason: "policy rejected: " + s,
			Principal:    audit.Principal{Sub: s, Roles: []string{s, "clinician"}, ClientID: s},
			PurposeOfUse: []string{"TREAT ", " TREAT", "TREAT\n", "TREAT\u00a0", "ETREAT  X", " ", "HRESCH", "TREAT", "\ufeffTREAT"}[i],
			Source:       "10.0.0.5:51234", Session: s, DecisionID: "dec-" + s, PolicyRevision: s,
			URIs: []string{"fhir://patients/hk1-" + s + "/Observation/o"}, Patients: []string{"hk1-" + s},
		})
	}
	out = append(out, audit.Entry{Action: "policy/reject", Outcome: audit.OutcomeError,
		Reason: strings.Repeat("é", 600_000) + "\x00", Principal: audit.Principal{Sub: "custos"}, Source: "bundle"})
	return out
}

// TestFHIRExportOfHostileStrings: the AuditEvents of records holding text
// FHIR forbids pass HL7's schema and Medplum (the text made to fit FHIR's
// string and code rules), and every event still names its record.
func TestFHIRExportOfHostileStrings(t *testing.T) {
	dir, records := exportEntries(t, "node\u00a01", hostileEntries())
	fhirLines := lines(t, filepath.Join(dir, FormatFHIR.FileName()))
	if len(fhirLines) != len(records) {
		t.Fatalf("%d AuditEvents for %d records", len(fhirLines), len(records))
	}
	for i, line := range fhirLines {
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.seq() != records[i].Seq {
			t.Errorf("event %d names record %d, want %d", i, ev.seq(), records[i].Seq)
		}
	}
	rep := validators.FHIR(t, fhirLines)
	for _, inv := range rep.Invalid {
		t.Errorf("AuditEvent %d (record seq %d, reason %.40q) is not valid FHIR R4 (%s): %.300s", inv.Index, records[inv.Index].Seq, records[inv.Index].Reason, inv.Validator, inv.Message)
	}
	t.Logf("%d AuditEvents checked by %v", rep.Validated, rep.Validators)
}
