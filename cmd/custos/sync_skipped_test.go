package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/fhirsync"
)

// skippedServer is a FHIR server (REST search only) whose Patient search
// holds a Patient, a search outcome (a warning) and an Organization the
// server included beside the match (search.mode include), and whose Bundle search
// holds a batch Bundle the server stores as a resource: two read requests
// (GET, HEAD) without a resource and a Patient to create.
func skippedServer(t *testing.T) *httptest.Server {
	t.Helper()
	const (
		capability = `{"resourceType":"CapabilityStatement","status":"active","kind":"instance","fhirVersion":"4.0.1","format":["json"],"date":"2026-12-01",` +
			`"rest":[{"mode":"server","resource":[{"type":"Bundle","interaction":[{"code":"search-type"}]},{"type":"Patient","interaction":[{"code":"search-type"}]}]}]}`
		outcome = `{"resource":{"resourceType":"OperationOutcome","issue":[{"severity":"warning","code":"informational","diagnostics":"search truncated to 1000"}]},"search":{"mode":"outcome"}}`
		patient = `{"resource":{"resourceType":"Patient","id":"p1","meta":{"lastUpdated":"2026-12-01T10:00:00Z"},"gender":"female"},"search":{"mode":"match"}}`
		include = `{"resource":{"resourceType":"Organization","id":"o1","name":"General"},"search":{"mode":"include"}}`
		batch   = `{"resource":{"resourceType":"Bundle","id":"b1","meta":{"lastUpdated":"2026-12-01T10:00:00Z"},"type":"batch","entry":[` +
			`{"request":{"method":"GET","url":"Patient/p1"}},{"request":{"method":"HEAD","url":"Patient/p1"}},` +
			`{"fullUrl":"urn:uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e0","resource":{"resourceType":"Patient","gender":"male"},"request":{"method":"POST","url":"Patient"}}]},"search":{"mode":"match"}}`
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body string
		switch r.URL.Path {
		case "/fhir/metadata":
			body = capability
		case "/fhir/Patient":
			body = `{"resourceType":"Bundle","type":"searchset","entry":[` + patient + `,` + outcome + `,` + include + `]}`
		case "/fhir/Bundle":
			body = `{"resourceType":"Bundle","type":"searchset","entry":[` + batch + `]}`
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/fhir+json")
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSyncReportsSkippedEntries: what a sync leaves out on purpose is in its
// report as in an import's (text '; skipped: ...', --json "skipped"): the
// search outcome and the included entry of a REST page, which the sync
// drops itself, and the read
// requests of a Bundle the server holds as a resource, which the import
// leaves out. Before, the sync imported the rest and said nothing of them.
func TestSyncReportsSkippedEntries(t *testing.T) {
	t.Setenv("VAULT_ADDR", "") // the dev id key of the data directory
	srv := skippedServer(t)
	for _, asJSON := range []bool{true, false} {
		args := []string{"sync", "--data-dir", filepath.Join(t.TempDir(), "data"), "--tenant", "t", "--fhir-base", srv.URL + "/fhir"}
		if asJSON {
			args = append(args, "--json")
		}
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("custos %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
		}
		if !asJSON {
			const want = " requests; skipped: 2 read requests (GET/HEAD), 1 search outcome, 1 included entry (search.mode include)\n"
			if got := out.String(); !strings.HasPrefix(got, "synced 2 resources") || !strings.HasSuffix(got, want) {
				t.Errorf("custos sync said %q, want 'synced 2 resources ...%s'", got, want)
			}
			continue
		}
		var rep fhirsync.Result
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("custos sync --json: report %q: %v", out.String(), err)
		}
		if rep.Resources != 2 {
			t.Errorf("custos sync --json: %d resources synced, want 2 (the Patient and the Bundle)", rep.Resources)
		}
		checkSkippedJSON(t, "custos sync --json", out.Bytes(), 2, 1)
		if rep.Skipped.Includes != 1 || !bytes.Contains(out.Bytes(), []byte(`"search_includes": 1`)) {
			t.Errorf("custos sync --json: skipped %+v in %s, want search_includes 1", rep.Skipped, out.Bytes())
		}
	}
}
