package fhirsync

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
		entries, next := `{"resource":`+patient+`,"search":{"mode":"match"}},`+warning, `,"link":[{"relation":"next","url":"/fhir/Patient?page=2"}]`
		if r.URL.Query().Get("page") == "2" {
			entries, next = warning, ""
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
	if want := (fhirin.Skipped{Reads: 3, Outcomes: 2 + 1}); res.Skipped != want || imports != 1 {
		t.Errorf("full sync of two pages, each with an outcome: skipped %+v (%d imports), want %+v", res.Skipped, imports, want)
	}
	changed = false
	res, err = runProbe(t, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := (fhirin.Skipped{Outcomes: 1}); res.Full || res.Skipped != want || imports != 1 {
		t.Errorf("increment of no change: full %v, skipped %+v (%d imports), want %+v and no import", res.Full, res.Skipped, imports, want)
	}
}
