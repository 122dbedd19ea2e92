package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAuditEventsSearchedInAFHIRServer is what an auditor or a privacy
// officer does with an export's auditevent.ndjson: load it into a FHIR
// server and search it with R4's AuditEvent search parameters
// (hl7.org/fhir/R4/auditevent.html#search; docs/audit-format.md,
// "Searching the export in a FHIR server"). The log is a realistic one,
// written by the real binary: a clinician's list and reads, a biller's
// minimized and denied reads, a researcher's de-identified read, an
// outsider's denials, an emergency (ETREAT) read under a break-the-glass
// grant, a request with no token, a policy reload, and auditors' reads of
// the log (a patient lookup, exports). The FHIR server is Medplum's FHIR router
// and in-memory repository (e2e/fhirserver, npm; CI=true: a missing
// package fails). Each search's expected set is derived from the
// bundle's records.jsonl, which 'custos audit verify --bundle' verified,
// and, where custos has a report for it, checked against 'custos audit
// report' too.
//
// Before h-auditfhir the patient entity named the patient by identifier
// only and the user agent had no name: patient= and agent-name= found no
// event at all.
func TestAuditEventsSearchedInAFHIRServer(t *testing.T) {
	fhir := startFHIRServer(t, fhirServerConfig{Bulk: "none", Seed: map[string]int{"resources": 2},
		SearchParameters: []json.RawMessage{json.RawMessage(purposeSearchParameter)}})
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	policyDir := t.TempDir()
	for _, f := range []string{"authz.rego", "authz_test.rego"} {
		b, err := os.ReadFile(filepath.Join(repo, "rego", "custos", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(policyDir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The principals: the seed's, and an emergency-department clinician.
	er := filepath.Join(t.TempDir(), "er.json")
	b, _ := json.Marshal(map[string]any{"sub": "dr-er", "roles": []string{"clinician"}, "client_id": "ed-assistant",
		"tenant": "general-hospital", "patients": []string{}, "purpose_of_use": "ETREAT"})
	os.WriteFile(er, b, 0o600)
	tok := map[string]string{"er": newToken(t, er, tokens)}
	for _, p := range []string{"clinician", "billing", "researcher", "outsider"} {
		tok[p] = newToken(t, d.principal(p), tokens)
	}
	cfg := filepath.Join(t.TempDir(), "custos.yaml")
	os.WriteFile(cfg, []byte("btg:\n  max_ttl: 1h\n  grant_roles: ["+osGroup(t)+"]\n"), 0o600)
	srv := serve(t, d, nil, "--config", cfg, "--dev", "--listen", loopback, "--tokens", tokens, "--page-size", "20",
		"--policy-dir", policyDir)
	ctx := context.Background()
	sess := map[string]*mcp.ClientSession{}
	for p, tk := range tok {
		sess[p] = connect(t, srv.url, tk)
	}
	read := func(who, uri string) error {
		_, err := sess[who].ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		return err
	}

	// A patient of the clinician's care team, a resource of each kind of
	// theirs, and a resource of a patient outside it with no special
	// handling (TestBreakTheGlass's).
	var pf struct{ Patients []string }
	b, _ = os.ReadFile(d.principal("clinician"))
	json.Unmarshal(b, &pf)
	special := map[string]bool{}
	for _, p := range d.summary.EdgeCases {
		special[p] = true
	}
	patient := "" // as TestAuditorWorkflow's: not opted out, no sensitive category
	for _, p := range pf.Patients {
		if p != d.summary.EdgeCases["opted_out"] && p != d.summary.EdgeCases["hiv"] && p != d.summary.EdgeCases["sud"] {
			patient = p
			break
		}
	}
	uri := map[string]string{} // type -> a URI of the patient's
	other := ""                // a FHIR resource of a patient outside the care team
	for _, l := range d.lines(t) {
		switch {
		case patient != "" && l.Labels.Patient == patient && len(l.Labels.Sensitivity) == 0 && uri[l.Labels.Type] == "":
			uri[l.Labels.Type] = l.URI
		case other == "" && l.Labels.Patient != "" && !special[l.Labels.Patient] && !slices.Contains(pf.Patients, l.Labels.Patient) &&
			strings.HasPrefix(l.URI, "fhir://") && len(l.Labels.Sensitivity) == 0:
			other = l.URI
		}
	}
	if patient == "" || uri["patient"] == "" || uri["coverage"] == "" || uri["note"] == "" || uri["observation"] == "" || other == "" {
		t.Fatalf("no suitable patient: %q %v %q", patient, uri, other)
	}

	// The requests.
	if _, err := sess["clinician"].ListResources(ctx, &mcp.ListResourcesParams{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"patient", "observation", "note"} {
		if err := read("clinician", uri[k]); err != nil {
			t.Fatalf("clinician read %s: %v", k, err)
		}
	}
	if err := read("billing", uri["coverage"]); err != nil {
		t.Fatalf("biller read of a coverage: %v", err)
	}
	if read("billing", uri["note"]) == nil {
		t.Fatal("the biller read a clinical note")
	}
	if err := read("researcher", uri["observation"]); err != nil {
		t.Fatalf("researcher read: %v", err)
	}
	for _, k := range []string{"patient", "observation"} {
		if read("outsider", uri[k]) == nil {
			t.Fatal("the outsider read a record")
		}
	}
	if read("er", other) == nil {
		t.Fatal("an ETREAT read without a grant was allowed")
	}
	otherPatient := strings.Split(other, "/")[4]
	mustCustos(t, "btg", "grant", "--data-dir", d.data, "--sub", "dr-er", "--patient", otherPatient,
		"--reason", "unconscious patient in ED", "--ttl", "30m", "--json")
	poll(t, "the server to have the grant", func() bool { return read("er", other) == nil })
	// A request with no token: auth/reject.
	if resp, err := http.Get(srv.url); err == nil {
		resp.Body.Close()
	}
	// A policy reload: a new revision of the same rules.
	rego := filepath.Join(policyDir, "authz.rego")
	b, _ = os.ReadFile(rego)
	os.WriteFile(rego+".new", append(b, "\n# revision 2\n"...), 0o600)
	if err := os.Rename(rego+".new", rego); err != nil {
		t.Fatal(err)
	}
	poll(t, "the policy reload (a second load)", func() bool {
		loads := 0
		for _, r := range d.records(t) {
			if r.Action == "policy/load" && r.Outcome == audit.OutcomeAllow {
				loads++
			}
		}
		return loads == 2
	})
	if err := read("clinician", uri["patient"]); err != nil { // decided by the new revision
		t.Fatal(err)
	}
	// The auditor: the patient's lookup value (through the server, which
	// records it and signs a checkpoint over it), the export, its
	// verification.
	hash := strings.Fields(mustCustos(t, "audit", "hash", patient, "--dev", "--purpose", "PATRQT", "--data-dir", d.data))[0]
	if err := srv.stop(t); err != nil {
		t.Fatalf("serve: %v", err)
	}
	bdir := filepath.Join(t.TempDir(), "bundle")
	mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--out", bdir)
	vkeys := filepath.Join(t.TempDir(), "custos.vkeys")
	mustCustos(t, "audit", "pubkey", "--data-dir", d.data, "--dev", "-o", vkeys)
	if tr := mustCustos(t, "audit", "verify", "--bundle", bdir, "--pubkey", vkeys); !strings.Contains(tr, "VERIFIED") {
		t.Fatalf("the bundle does not verify:\n%s", tr)
	}
	recs := bundleRecords(t, filepath.Join(bdir, "records.jsonl"))
	last := recs[len(recs)-1].Seq

	// Load: one batch Bundle of PUTs, so each event keeps its id.
	events := loadAuditEvents(t, fhir.url, filepath.Join(bdir, "auditevent.ndjson"))

	seqs := func(keep func(audit.Record) bool) []uint64 {
		var out []uint64
		for _, r := range recs {
			if keep(r) {
				out = append(out, r.Seq)
			}
		}
		return out
	}
	reported := func(args ...string) []uint64 { // a report's rows within the bundle
		var rep struct{ Rows []struct{ Seq uint64 } }
		out := mustCustos(t, append([]string{"audit", "report", "--data-dir", d.data, "--dev", "--purpose", "HOPERAT", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		var s []uint64
		for _, r := range rep.Rows {
			if r.Seq <= last {
				s = append(s, r.Seq)
			}
		}
		return s
	}
	clinSub := subOf(t, d.principal("clinician"))
	for _, c := range []struct {
		name, query string
		want        []uint64
		report      []uint64 // the same question asked of custos, when it has a report for it
	}{
		{"every access to the patient (accounting of disclosures)", "patient=Patient/" + hash,
			seqs(func(r audit.Record) bool { return slices.Contains(r.Patients, hash) }),
			reported("--patient", patient)},
		{"the same, by id alone (patient has one target type)", "patient=" + hash,
			seqs(func(r audit.Record) bool { return slices.Contains(r.Patients, hash) }), nil},
		{"the same under two key versions' lookup values", "patient=Patient/" + hash + ",Patient/hk1-00000000000000000000000000000000",
			seqs(func(r audit.Record) bool { return slices.Contains(r.Patients, hash) }), nil},
		{"what the clinician did", "agent-name:exact=" + url.QueryEscape(clinSub),
			seqs(func(r audit.Record) bool { return r.Principal.Sub == clinSub }),
			reported("--user", clinSub)},
		{"what the clinician read of the patient", "agent-name:exact=" + url.QueryEscape(clinSub) + "&patient=Patient/" + hash + "&subtype=read&outcome=0",
			seqs(func(r audit.Record) bool {
				return r.Principal.Sub == clinSub && slices.Contains(r.Patients, hash) && r.Action == audit.ActionResourcesRead && r.Outcome == audit.OutcomeAllow
			}), nil},
		{"every denied request", "outcome=4",
			seqs(func(r audit.Record) bool { return r.Outcome == audit.OutcomeDeny }), nil},
		{"every emergency access (break-the-glass)", "purpose=ETREAT&outcome=0&subtype=read",
			seqs(func(r audit.Record) bool {
				return r.PurposeOfUse == "ETREAT" && r.Outcome == audit.OutcomeAllow && r.Action == audit.ActionResourcesRead
			}), nil},
		{"everything for payment", "purpose=http://terminology.hl7.org/CodeSystem/v3-ActReason|HPAYMT",
			seqs(func(r audit.Record) bool { return r.PurposeOfUse == "HPAYMT" }), nil},
		{"every list", "subtype=search",
			seqs(func(r audit.Record) bool {
				return r.Action == audit.ActionResourcesList || r.Action == audit.ActionResourcesTemplatesList
			}), nil},
		{"every request refused before authentication", "type=http://dicom.nema.org/resources/ontology/DCM|110114",
			seqs(func(r audit.Record) bool { return r.Action == "auth/reject" }), nil},
		{"every use of the audit log", "entity-role=13&entity-name=Security%20Audit%20Log",
			seqs(func(r audit.Record) bool { return slices.Contains(audit.LogUseActions, r.Action) }), nil},
		{"custos's own acts (the policy loads)", "agent-name:exact=custos",
			seqs(func(r audit.Record) bool { return r.Principal.Sub == "custos" }), nil},
		{"every read", "action=R&type=rest",
			seqs(func(r audit.Record) bool { return r.Action == audit.ActionResourcesRead }), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if len(c.want) == 0 {
				t.Fatalf("the log holds no record for %q: the fixture does not exercise it", c.query)
			}
			got := searchSeqs(t, fhir.url, c.query)
			t.Logf("%s: %d of %d records", c.query, len(got), len(recs))
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: the FHIR server found records %v, the log holds %v", c.query, got, c.want)
			}
			if c.report != nil && !slices.Equal(c.report, c.want) {
				t.Errorf("custos audit report names records %v, the log %v", c.report, c.want)
			}
		})
	}

	// Date ranges: the events recorded at or after a time between two
	// records (whole milliseconds: servers compare instants at that
	// precision or coarser).
	t.Run("date range", func(t *testing.T) {
		i := 1
		for ; i < len(recs) && !recs[i].Time.Truncate(time.Millisecond).After(recs[i-1].Time.Truncate(time.Millisecond).Add(time.Millisecond)); i++ {
		}
		if i == len(recs) {
			t.Fatal("no two records a millisecond apart")
		}
		cut := recs[i].Time.Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
		want := seqs(func(r audit.Record) bool { return !r.Time.Before(recs[i].Time.Truncate(time.Millisecond)) })
		if got := searchSeqs(t, fhir.url, "date=ge"+cut); !slices.Equal(got, want) {
			t.Errorf("date=ge%s: found records %v, the log holds %v", cut, got, want)
		}
		before := seqs(func(r audit.Record) bool { return r.Time.Before(recs[i].Time.Truncate(time.Millisecond)) })
		if got := searchSeqs(t, fhir.url, "date=lt"+cut); !slices.Equal(got, before) {
			t.Errorf("date=lt%s: found records %v, the log holds %v", cut, got, before)
		}
	})

	// Newest first, a page at a time: every event once, in order.
	t.Run("_sort=-date paged", func(t *testing.T) {
		page := searchPages(t, fhir.url, "_sort=-date&_count=7")
		if len(page) != len(events) {
			t.Fatalf("paging returned %d events, %d were loaded", len(page), len(events))
		}
		seen := map[string]bool{}
		for i, ev := range page {
			if seen[ev.ID] {
				t.Fatalf("event %s returned twice", ev.ID)
			}
			seen[ev.ID] = true
			if i > 0 && ev.recorded().After(page[i-1].recorded()) {
				t.Fatalf("event %d (%s) is newer than the one before it", i, ev.Recorded)
			}
		}
	})
}

// poll waits up to 15 s for cond, calling it every 250 ms: each call
// writes records (a denied read, an auditor's export), which a log an
// auditor searches should not hold by the dozen.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 60 {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// purposeSearchParameter is R5's AuditEvent purpose search parameter,
// which R4 does not define, on R4's elements (docs/audit-format.md,
// "Searching the export in a FHIR server").
const purposeSearchParameter = `{"resourceType":"SearchParameter","id":"AuditEvent-purpose",
"url":"http://hl7.org/fhir/SearchParameter/AuditEvent-purpose","name":"purpose","status":"active",
"description":"The reason the activity took place","code":"purpose","base":["AuditEvent"],"type":"token",
"expression":"AuditEvent.purposeOfEvent | AuditEvent.agent.purposeOfUse"}`

// auditEvent is a searched AuditEvent, as far as these tests read it.
type auditEvent struct {
	ID        string `json:"id"`
	Recorded  string `json:"recorded"`
	Extension []struct {
		URL       string `json:"url"`
		Extension []struct {
			URL         string `json:"url"`
			ValueString string `json:"valueString"`
		} `json:"extension"`
	} `json:"extension"`
}

func (e auditEvent) recorded() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, e.Recorded)
	return t
}

// seq is the seq of the record the event renders (custos's extension).
func (e auditEvent) seq() uint64 {
	for _, x := range e.Extension {
		for _, s := range x.Extension {
			if s.URL == "seq" {
				n, _ := strconv.ParseUint(s.ValueString, 10, 64)
				return n
			}
		}
	}
	return 0
}

// loadAuditEvents loads the events of the ndjson file into the FHIR
// server at base as one batch Bundle of PUTs and returns them.
func loadAuditEvents(t *testing.T, base, file string) []auditEvent {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		Resource json.RawMessage   `json:"resource"`
		Request  map[string]string `json:"request"`
	}
	batch := struct {
		ResourceType string  `json:"resourceType"`
		Type         string  `json:"type"`
		Entry        []entry `json:"entry"`
	}{ResourceType: "Bundle", Type: "batch"}
	var events []auditEvent
	for _, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
		batch.Entry = append(batch.Entry, entry{Resource: line, Request: map[string]string{"method": "PUT", "url": "AuditEvent/" + ev.ID}})
	}
	body, _ := json.Marshal(batch)
	resp, err := http.Post(base+"/", "application/fhir+json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Entry []struct{ Response struct{ Status string } }
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 || len(out.Entry) != len(events) {
		t.Fatalf("batch load: HTTP %d, %d of %d entries: %v\n%.2000s", resp.StatusCode, len(out.Entry), len(events), err, b)
	}
	for i, e := range out.Entry {
		if !strings.HasPrefix(e.Response.Status, "20") {
			t.Fatalf("batch load: event %s: status %s\n%.2000s", events[i].ID, e.Response.Status, b)
		}
	}
	return events
}

// searchPages runs GET base/AuditEvent?query and follows the searchset's
// next links, returning every event in the order served.
func searchPages(t *testing.T, base, query string) []auditEvent {
	t.Helper()
	var out []auditEvent
	next := base + "/AuditEvent?" + query
	for pages := 0; next != ""; pages++ {
		if pages > 1000 {
			t.Fatalf("%s: more than 1000 pages", query)
		}
		resp, err := http.Get(next)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var bundle struct {
			ResourceType string
			Link         []struct{ Relation, URL string }
			Entry        []struct{ Resource auditEvent }
		}
		if err := json.Unmarshal(b, &bundle); err != nil || resp.StatusCode != 200 || bundle.ResourceType != "Bundle" {
			t.Fatalf("%s: HTTP %d: %v\n%.2000s", query, resp.StatusCode, err, b)
		}
		for _, e := range bundle.Entry {
			out = append(out, e.Resource)
		}
		next = ""
		for _, l := range bundle.Link {
			if l.Relation == "next" {
				next = l.URL
			}
		}
	}
	return out
}

// searchSeqs runs the search and returns the seqs of the records whose
// events it found, sorted, each once (a record of several patients has an
// event for each).
func searchSeqs(t *testing.T, base, query string) []uint64 {
	t.Helper()
	var seqs []uint64
	for _, ev := range searchPages(t, base, query+"&_count=100") {
		seqs = append(seqs, ev.seq())
	}
	slices.Sort(seqs)
	return slices.Compact(seqs)
}
