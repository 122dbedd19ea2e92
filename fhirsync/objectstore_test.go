package fhirsync

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestBulkFilesAsObjectStoresServeThem: Bulk output files as object
// stores serve them to a pre-signed URL (requiresAccessToken false):
// labelled binary/octet-stream (Amazon S3's and its SDKs' default for an
// object uploaded without a type, as application/octet-stream is other
// stores'), or written by Windows tools with a UTF-8 byte order mark and
// \r\n line ends (files concatenated: a mark on a later line too). Each
// is NDJSON that custos import takes from a file; the sync refused the
// first as a wrong content type and the second as "not a complete JSON
// value" at line 1 (found by probe-import2).
func TestBulkFilesAsObjectStoresServeThem(t *testing.T) {
	pat := `{"resourceType":"Patient","id":"p1"}`
	for name, tc := range map[string]struct{ typ, body string }{
		"binary/octet-stream":     {"binary/octet-stream", pat + "\n"},
		"a byte order mark, CRLF": {"application/fhir+ndjson", "\xef\xbb\xbf" + pat + "\r\n" + "\xef\xbb\xbf" + `{"resourceType":"Patient","id":"p2"}` + "\r\n"},
	} {
		t.Run(name, func(t *testing.T) {
			var srv *httptest.Server
			mux := http.NewServeMux()
			mux.HandleFunc("/fhir/metadata", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, "application/fhir+json", []byte(capBulk)) })
			mux.HandleFunc("/fhir/$export", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Location", "/fhir/status")
				w.WriteHeader(http.StatusAccepted)
			})
			mux.HandleFunc("/fhir/status", func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, "application/json", manifestOf(srv.URL, "Patient.ndjson"))
			})
			mux.HandleFunc("/fhir/files/", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, tc.typ, []byte(tc.body)) })
			srv = httptest.NewServer(mux)
			defer srv.Close()
			o, imp, _ := probeOptions(t, srv.URL+"/fhir", false)
			o.NoBulk = false
			if _, err := runProbe(t, o); err != nil || imp.calls != 1 || imp.lines["Patient"] == 0 {
				t.Fatalf("err = %v, imports %d, lines %v", err, imp.calls, imp.lines)
			}
		})
	}
}

// TestCheckResourceQuotesNoContent: a line of another type than its file
// is named by its resourceType only when that is an R4 type; anything else
// a server writes there is content, and errors quote none (it was quoted).
func TestCheckResourceQuotesNoContent(t *testing.T) {
	for line, want := range map[string]string{
		`{"resourceType":"Observation","id":"o1"}`:       `resourceType "Observation" in a file of type "Patient"`,
		`{"resourceType":"MRN 4711 Jane Doe","id":"o1"}`: `a resourceType that is no R4 type in a file of type "Patient"`,
	} {
		if err := checkResource([]byte(line), "Patient"); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", line, err, want)
		}
	}
}
