package safeharbortest

import (
	"encoding/json"
	"github.com/custos-mcp/custos/e2e/validators"
	"os"
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

// ValidateFHIR runs the outside FHIR R4 validators over resources and
// returns the problems, by index (e2e/validators.FHIR).
func ValidateFHIR(t testing.TB, resources [][]byte) []validators.Invalid {
	t.Helper()
	return validators.FHIR(t, resources).Invalid
}
