package fhirsync

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// phiText is what a remote server's free text may hold: a patient's name,
// telephone number and medical record number.
const phiText = "Jane Doe 555-123-4567 MRN-12345678"

// phiParts are parts of phiText none of which may leave a sync, in any
// case ("doe" alone would be found in custos's "does").
var phiParts = []string{"jane", "555-123-4567", "12345678"}

// TestRemoteTextNeverInMessages: what a FHIR server answers is its own
// text, which may hold PHI (an OperationOutcome's diagnostics, a
// Content-Type's parameters, a header line, a manifest's output type, an
// issue code of the code's form, X-Progress). None of it reaches the
// sync's error (stderr), its sync/end audit record, a log line or a
// progress report: they hold custos's words, the codes and types FHIR
// defines, and text scrubbed with minimize.ScrubString. The content type,
// the output type, the header line and an issue code that is a name in
// lowercase were copied into the error and the sync/end record.
func TestRemoteTextNeverInMessages(t *testing.T) {
	patient := corpus(t, "patient.json")
	outcome := func(code string) []byte {
		return []byte(`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"` + code + `","diagnostics":"` + phiText + `","details":{"text":"` + phiText + `"}}]}`)
	}
	for _, tc := range []answerCase{
		{"HTTP 400 with an OperationOutcome", false, func(w http.ResponseWriter, r *http.Request, _ string) {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write(outcome("invalid"))
		}, ErrServer},
		{"HTTP 500 with an OperationOutcome", false, func(w http.ResponseWriter, r *http.Request, _ string) {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.WriteHeader(http.StatusInternalServerError)
			w.Write(outcome("exception"))
		}, ErrUnavailable},
		{"an OperationOutcome in the search", false, func(w http.ResponseWriter, r *http.Request, _ string) {
			writeJSON(w, "application/fhir+json", searchset("", patient, outcome("jane-doe")))
		}, ErrServer},
		{"content type", false, func(w http.ResponseWriter, r *http.Request, _ string) {
			writeJSON(w, `text/html; note="`+phiText+`"`, searchset("", patient))
		}, ErrServer},
		{"content type of a name", false, func(w http.ResponseWriter, r *http.Request, _ string) {
			writeJSON(w, "jane/doe", searchset("", patient))
		}, ErrServer},
		{"charset", false, func(w http.ResponseWriter, r *http.Request, _ string) {
			writeJSON(w, "application/fhir+json; charset=jane-doe", searchset("", patient))
		}, ErrServer},
		{"malformed header line", false, func(w http.ResponseWriter, r *http.Request, _ string) {
			answerHeaderLine(w, phiText)
		}, ErrUnavailable},
		{"a next link with a query", false, func(w http.ResponseWriter, r *http.Request, _ string) {
			if r.URL.RawQuery == "" {
				writeJSON(w, "application/fhir+json", searchset("/fhir/Patient?name=Jane+Doe&phone=555-123-4567&identifier=MRN-12345678", patient))
				return
			}
			http.Error(w, phiText, http.StatusBadRequest)
		}, ErrServer},
		{"a next link whose path holds numbers", false, func(w http.ResponseWriter, r *http.Request, _ string) {
			// Answered 404 by the mux: the error names the path, scrubbed.
			writeJSON(w, "application/fhir+json", searchset("/fhir/Patient/555-123-4567/MRN-12345678", patient))
		}, ErrServer},
		{"manifest output type", true, func(w http.ResponseWriter, r *http.Request, _ string) {
			writeJSON(w, "application/json", []byte(`{"transactionTime":"2026-12-01T12:00:00Z","request":"x","requiresAccessToken":true,"output":[{"type":"`+phiText+`","url":"/fhir/files/x"}],"error":[]}`))
		}, ErrServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := answeringServer(t, tc.bulk, func(string) string { return "50% of " + phiText }, tc.serve)
			imports, seen, err := runAnswered(t, base, tc.bulk)
			if !errors.Is(err, tc.want) || imports != 0 {
				t.Fatalf("err = %v, imports %d; want %v", err, imports, tc.want)
			}
			if seen["audit record"] == "" {
				t.Fatal("no audit record of the failed sync")
			}
			for what, msg := range seen {
				if what == "progress" {
					// X-Progress is shown scrubbed: a name in it is not
					// a pattern minimize knows.
					for _, p := range phiParts[1:] {
						if strings.Contains(msg, p) {
							t.Errorf("progress holds %q: %s", p, msg)
						}
					}
					continue
				}
				for _, p := range phiParts {
					if strings.Contains(strings.ToLower(msg), p) {
						t.Errorf("%s holds %q: %s", what, p, msg)
					}
				}
			}
		})
	}
}

// TestRemotePathsInLogLinesAreScrubbed: the paths a Bulk Data server
// chooses (its status URL's Content-Location, an output file's and an
// outcome file's url) are its text, and the log lines that name them
// scrub them as the sync's error does (quietErr): the manifest's
// transactionTime after its Date, an outcome file of warnings, a download
// that broke off and a failed DELETE of the job each logged the path
// unscrubbed, a telephone number and a record number in it.
func TestRemotePathsInLogLinesAreScrubbed(t *testing.T) {
	const held = "/555-123-4567/MRN-12345678"
	patient := append(corpus(t, "patient.json"), '\n')
	warning := []byte(`{"resourceType":"OperationOutcome","issue":[{"severity":"warning","code":"informational"}]}` + "\n")
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("/fhir/metadata", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, "application/fhir+json", []byte(capBulk))
	})
	mux.HandleFunc("/fhir/$export", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Location", "/fhir/status"+held)
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("/fhir/status/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			// Cut off: the DELETE's transport error is logged.
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		// A transactionTime after the Date header (within the clock
		// skew margin) is logged and clamped.
		tt := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
		writeJSON(w, "application/json", []byte(`{"transactionTime":"`+tt+`","request":"`+srv.URL+`/fhir/$export","requiresAccessToken":false,`+
			`"output":[{"type":"Patient","url":"`+srv.URL+`/fhir/files`+held+`.ndjson"}],`+
			`"error":[{"type":"OperationOutcome","url":"`+srv.URL+`/fhir/files`+held+`-outcomes.ndjson"}]}`))
	})
	var downloads atomic.Int32
	mux.HandleFunc("/fhir/files/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "-outcomes.ndjson") {
			writeJSON(w, "application/fhir+ndjson", warning)
			return
		}
		w.Header().Set("Content-Type", "application/fhir+ndjson")
		if downloads.Add(1) == 1 {
			// The first download breaks off: it is retried, and logged.
			w.Header().Set("Content-Length", strconv.Itoa(2*len(patient)))
			w.Write(patient[:len(patient)/2])
			return
		}
		w.Write(patient)
	})
	o, imp, logs := probeOptions(t, srv.URL+"/fhir", false)
	o.NoBulk = false
	if _, err := runProbe(t, o); err != nil || imp.calls != 1 {
		t.Fatalf("err %v, imports %d; want a sync", err, imp.calls)
	}
	for _, line := range []string{"transactionTime is after", "warnings or information", "download broke off", "deleting the finished export job"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("no log line %q (the test no longer reaches it):\n%s", line, logs)
		}
	}
	for _, p := range phiParts[1:] {
		if strings.Contains(logs.String(), p) {
			t.Errorf("the log holds %q:\n%s", p, logs)
		}
	}
}
