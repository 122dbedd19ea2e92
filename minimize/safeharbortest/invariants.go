package safeharbortest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// An InvariantFailure is an invariant of FHIR R4 a resource breaks: the
// resource's index, the invariant's key ("age-1"), the path of the
// element that carries it and that element's type.
type InvariantFailure struct {
	Index int    `json:"index"`
	Key   string `json:"key"`
	Path  string `json:"path"`
	Type  string `json:"type"`
}

// Invariants evaluates the error-severity invariants of FHIR R4 over
// resources (invariants.cjs, with the FHIRPath engine of the packages
// `make validators` installs in e2e/validators): those of datatypes
// (age-1, qty-3, per-1, ...), which the validators of ValidateFHIR do not
// evaluate, and org-1, which Medplum's skips, as well as those of
// resources and backbones. Without node or the packages it skips the
// test, or fails it under CI=true, as ValidateFHIR does.
func Invariants(t testing.TB, resources [][]byte) []InvariantFailure {
	t.Helper()
	vdir := filepath.Join(Root(t), "e2e", "validators")
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "invariants.cjs")
	_, nodeErr := exec.LookPath("node")
	_, pkgErr := os.Stat(filepath.Join(vdir, "node_modules", "@medplum", "core", "package.json"))
	if nodeErr != nil || pkgErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("invariants: node or @medplum/core missing (run `make validators`): %v %v", nodeErr, pkgErr)
		}
		t.Skipf("invariants: node or @medplum/core missing (run `make validators`): %v %v", nodeErr, pkgErr) // counted as skipped, never as a pass
	}
	var in bytes.Buffer
	for i, r := range resources {
		if err := json.Compact(&in, r); err != nil {
			t.Fatalf("invariants: resource %d is not JSON: %v", i, err)
		}
		in.WriteByte('\n')
	}
	cmd := exec.Command("node", script, vdir, "-")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("invariants: %v\n%s", err, stderr.Bytes())
	}
	var found []InvariantFailure
	if err := json.Unmarshal(out, &found); err != nil {
		t.Fatalf("invariants: %v\n%s", err, out)
	}
	return found
}
