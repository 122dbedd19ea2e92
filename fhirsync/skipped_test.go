package fhirsync

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/fhirin"
)

// TestResultCountsSkipped: Result.Skipped counts the search outcomes of
// the REST pages once each, though a search of two pages is paged twice,
// adds what the importer left out (Imported.Skipped), and holds the
// pages' outcomes of an increment that found no change too, which
// imports nothing.
func TestResultCountsSkipped(t *testing.T) {
	const warning = `{"resource":{"resourceType":"OperationOutcome","issue":[{"severity":"information","code":"informational"}]},"search":{"mode":"outcome"}}`
	patient := string(corpus(t, "patient.json"))
	// An Organization the server added beside the matches (custos asks for
	// no _include): left out, counted, never staged as a Patient.
	included := `{"resource":{"resourceType":"Organization","id":"org-1","name":"General"},"search":{"mode":"include"}}`
	changed := true // the search finds the Patient: a full sync, then none: an increment of no change
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/metadata"):
			writeJSON(w, "application/fhir+json", []byte(capREST("Patient")))
			return
		case !changed:
			writeJSON(w, "application/fhir+json", []byte(`{"resourceType":"Bundle","type":"searchset","entry":[`+warning+`]}`))
			return
		}
		entries, next := `{"resource":`+patient+`,"search":{"mode":"match"}},`+warning+`,`+included, `,"link":[{"relation":"next","url":"/fhir/Patient?page=2"}]`
		if r.URL.Query().Get("page") == "2" {
			entries, next = warning+`,`+included+`,`+included, ""
		}
		writeJSON(w, "application/fhir+json", []byte(`{"resourceType":"Bundle","type":"searchset","entry":[`+entries+`]`+next+`}`))
	}))
	defer srv.Close()
	o, _, _ := probeOptions(t, srv.URL+"/fhir", false)
	imports := 0
	o.Importer = ImporterFunc(func(context.Context, string, bool) (Imported, error) {
		imports++
		return Imported{Skipped: fhirin.Skipped{Reads: 3, Outcomes: 1}}, nil
	})
	res, err := runProbe(t, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Skipped{Skipped: fhirin.Skipped{Reads: 3, Outcomes: 2 + 1}, Includes: 3}); res.Skipped != want || imports != 1 {
		t.Errorf("full sync of two pages, each with an outcome, three included entries: skipped %+v (%d imports), want %+v", res.Skipped, imports, want)
	}
	if res.Resources != 1 || res.Types["Organization"] != 0 {
		t.Errorf("staged %d resources, types %v: want the one Patient, no included Organization", res.Resources, res.Types)
	}
	rec := o.Recorder.(*probeRecorder)
	if end := rec.events[len(rec.events)-1]; end.Phase != "end" || end.Skipped != res.Skipped {
		t.Errorf("the sync's end event: phase %q, skipped %+v, want the result's %+v", end.Phase, end.Skipped, res.Skipped)
	}
	changed = false
	res, err = runProbe(t, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Skipped{Skipped: fhirin.Skipped{Outcomes: 1}}); res.Full || res.Skipped != want || imports != 1 {
		t.Errorf("increment of no change: full %v, skipped %+v (%d imports), want %+v and no import", res.Full, res.Skipped, imports, want)
	}
}

// TestSyncEndRecordNamesSkipped: the sync/end audit record's reason says
// how many entries the sync left out on purpose, by kind, when it left
// out some (an auditor reading the log alone learns of them, as the
// report's reader does), and reads as before when it left out none.
func TestSyncEndRecordNamesSkipped(t *testing.T) {
	e := Event{Phase: "end", Base: "https://fhir.example/r4", Full: true, Mode: "rest", Resources: 2, Requests: 3}
	if r := AuditEntry(e, auditPrincipal, false, nil).Reason; strings.Contains(r, "skipped") {
		t.Errorf("a sync that left out nothing: reason %q names skipped entries", r)
	}
	e.Skipped = Skipped{Includes: 4}
	if r := AuditEntry(e, auditPrincipal, false, nil).Reason; !strings.HasSuffix(r, " search_includes_skipped=4") || strings.Contains(r, "read_requests") {
		t.Errorf("a sync that left out included entries alone: reason %q, want it to end in search_includes_skipped=4 and name no other kind", r)
	}
	e.Skipped = Skipped{Skipped: fhirin.Skipped{Reads: 2, Outcomes: 1}}
	ent := AuditEntry(e, auditPrincipal, false, nil)
	if want := " read_requests_skipped=2 search_outcomes_skipped=1"; !strings.Contains(ent.Reason, want) || strings.Contains(ent.Reason, "includes") {
		t.Errorf("sync/end reason %q, want it to hold %q and no includes", ent.Reason, want)
	}
	if ent.Action != ActionSyncEnd || ent.Outcome != audit.OutcomeAllow {
		t.Errorf("action %q outcome %q, want %q allow", ent.Action, ent.Outcome, ActionSyncEnd)
	}
}
