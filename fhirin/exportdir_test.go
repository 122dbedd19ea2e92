package fhirin

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportDirectoryErrorFile reads a Bulk Data export directory that
// holds the export's error file, OperationOutcome.ndjson, as a download of
// every file of an $export manifest does (h-outside5: HAPI's, Google
// Cloud Healthcare's and the Bulk Data reference server's exports write
// one). The file is read as the manifest's error[] files are: an issue of
// severity error or fatal refuses the import, naming the issue code and
// never the diagnostics; warnings and information do not; its
// OperationOutcomes are never imported as resources. Before, an
// OperationOutcome without an id (valid R4, as error files write them)
// refused the import as "missing or invalid id", and one with an id was
// imported as a tenant-level resource, diagnostics and all, while the
// export it reported incomplete imported as if complete.
func TestExportDirectoryErrorFile(t *testing.T) {
	patient := `{"resourceType":"Patient","id":"p1","gender":"female"}` + "\n"
	for _, tc := range []struct {
		name, file, outcome string
		wantErr             string // "" reads the Patient alone
	}{
		{name: "warning, no id", file: "OperationOutcome.ndjson",
			outcome: `{"resourceType":"OperationOutcome","issue":[{"severity":"warning","code":"informational","diagnostics":"Evander Delacorte-Winslow MRN 61840275 exported without his notes"}]}`},
		{name: "information with an id", file: "OperationOutcome.001.ndjson",
			outcome: `{"resourceType":"OperationOutcome","id":"oo1","issue":[{"severity":"information","code":"informational","diagnostics":"MRN 61840275"}]}`},
		{name: "error, no id", file: "OperationOutcome.ndjson",
			outcome: `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"processing","diagnostics":"Could not export Observation of MRN 61840275"}]}`,
			wantErr: "issue code processing"},
		{name: "fatal with an id, gzip", file: "OperationOutcome.ndjson.gz",
			outcome: `{"resourceType":"OperationOutcome","id":"oo2","issue":[{"severity":"warning","code":"informational"}]}` + "\n" +
				`{"resourceType":"OperationOutcome","id":"oo3","issue":[{"severity":"fatal","code":"exception","diagnostics":"MRN 61840275"}]}`,
			wantErr: "issue code exception"},
		{name: "not an OperationOutcome", file: "OperationOutcome.ndjson",
			outcome: `{"resourceType":"Patient","id":"p2"}`, wantErr: "line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "Patient.ndjson"), []byte(patient), 0o644); err != nil {
				t.Fatal(err)
			}
			body := []byte(tc.outcome + "\n")
			if strings.HasSuffix(tc.file, ".gz") {
				var b bytes.Buffer
				zw := gzip.NewWriter(&b)
				zw.Write(body)
				zw.Close()
				body = b.Bytes()
			}
			if err := os.WriteFile(filepath.Join(dir, tc.file), body, 0o644); err != nil {
				t.Fatal(err)
			}
			items, err := readAll(t, dir)
			if tc.wantErr != "" {
				var fe *Error
				if !errors.As(err, &fe) || !errors.Is(err, ErrValue) || fe.Where != tc.file || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Read: %v, want ErrValue in %s saying %q", err, tc.file, tc.wantErr)
				}
				if strings.Contains(err.Error(), "61840275") {
					t.Errorf("the error quotes the diagnostics: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if len(items) != 1 || items[0].Type != "Patient" {
				var got []string
				for _, it := range items {
					got = append(got, it.Type+"/"+it.ID)
				}
				t.Errorf("read %v, want the Patient alone", got)
			}
		})
	}
}

// TestManifestGzipErrorFile: an $export manifest whose files were
// downloaded gzipped (each *.ndjson.gz, as custos reads an output file
// so named) has its error[] file read as gzip too, as an export
// directory's OperationOutcome.ndjson.gz is (TestExportDirectoryErrorFile).
// Until h-review61 the manifest read the error file's compressed bytes as
// NDJSON and refused every such export ("line 1 of the export's outcome
// file is not an OperationOutcome"), while the directory holding the same
// files imported.
func TestManifestGzipErrorFile(t *testing.T) {
	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(s + "\n"))
		zw.Close()
		return b.Bytes()
	}
	manifest := `{"transactionTime":"2024-01-01T00:00:00Z","request":"https://ehr.example/fhir/$export",` +
		`"output":[{"type":"Patient","url":"Patient.ndjson.gz"}],"error":[{"type":"OperationOutcome","url":"OperationOutcome.ndjson.gz"}]}`
	for _, tc := range []struct{ name, outcome, wantErr string }{
		{"warning", `{"resourceType":"OperationOutcome","issue":[{"severity":"warning","code":"informational","diagnostics":"MRN 61840275"}]}`, ""},
		{"fatal", `{"resourceType":"OperationOutcome","issue":[{"severity":"fatal","code":"exception","diagnostics":"MRN 61840275"}]}`, "issue code exception"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readManifestCase(t, map[string][]byte{
				"manifest.json":              []byte(manifest),
				"Patient.ndjson.gz":          gz(`{"resourceType":"Patient","id":"p1","gender":"female"}`),
				"OperationOutcome.ndjson.gz": gz(tc.outcome),
			}, tc.wantErr)
		})
	}
}

// TestManifestOutcomeOutput: an $export manifest that lists its
// OperationOutcomes among its output files (type OperationOutcome, as some
// servers list their error file) has that file read as a file of error[]
// is: warnings skipped, an error refusing the import naming the issue
// code, never imported as data. Before, its OperationOutcomes were
// imported as tenant-level resources, diagnostics (a patient's MRN) and
// all, and an error in them did not stop the import of an incomplete
// export.
func TestManifestOutcomeOutput(t *testing.T) {
	for _, tc := range []struct{ name, outcome, wantErr string }{
		{"warning", `{"resourceType":"OperationOutcome","id":"oo1","issue":[{"severity":"warning","code":"informational","diagnostics":"MRN 61840275"}]}`, ""},
		{"error", `{"resourceType":"OperationOutcome","id":"oo2","issue":[{"severity":"error","code":"processing","diagnostics":"MRN 61840275"}]}`, "issue code processing"},
		{"only outcomes", "", "no output file of data (an OperationOutcome output is the export's report)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			output := `{"type":"Patient","url":"Patient.ndjson"},{"type":"OperationOutcome","url":"OperationOutcome.ndjson"}`
			outcome := tc.outcome
			if outcome == "" {
				output = `{"type":"OperationOutcome","url":"OperationOutcome.ndjson"}`
				outcome = `{"resourceType":"OperationOutcome","id":"oo3","issue":[{"severity":"information","code":"informational"}]}`
			}
			readManifestCase(t, map[string][]byte{
				"manifest.json":           []byte(`{"transactionTime":"2024-01-01T00:00:00Z","request":"https://ehr.example/fhir/$export","output":[` + output + `]}`),
				"Patient.ndjson":          []byte(`{"resourceType":"Patient","id":"p1","gender":"female"}` + "\n"),
				"OperationOutcome.ndjson": []byte(outcome + "\n"),
			}, tc.wantErr)
		})
	}
}

// readManifestCase writes files into a new directory and reads its
// manifest.json: with wantErr, the read must fail with ErrManifest saying
// wantErr and without the diagnostics' MRN; without, it must read the
// Patient alone.
func readManifestCase(t *testing.T, files map[string][]byte, wantErr string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	items, err := readAll(t, filepath.Join(dir, "manifest.json"))
	if wantErr != "" {
		if !errors.Is(err, ErrManifest) || !strings.Contains(fmt.Sprint(err), wantErr) || strings.Contains(fmt.Sprint(err), "61840275") {
			t.Fatalf("Read: %v, want ErrManifest saying %q, without the diagnostics", err, wantErr)
		}
		return
	}
	if err != nil || len(items) != 1 || items[0].Type != "Patient" {
		var got []string
		for _, it := range items {
			got = append(got, it.Type+"/"+it.ID)
		}
		t.Fatalf("Read: %v, %v; want the Patient alone", got, err)
	}
}
