package fhirsync

import (
	"errors"
	"net/http"
	"strings"
	"testing"
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
