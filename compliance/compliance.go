package compliance

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Namespace is the OSCAL property namespace of custos's own properties.
const Namespace = "https://github.com/custos-mcp/custos/ns/oscal"

// ModulePath is the Go module whose package directories test references
// are relative to.
const ModulePath = "github.com/custos-mcp/custos"

//go:embed component-definition.json
var definitionJSON []byte

// DefinitionJSON returns the embedded OSCAL document, as checked in.
func DefinitionJSON() []byte { return slices.Clone(definitionJSON) }

// Required lists the control ids the definition must map: the HIPAA Security
// Rule and Privacy Rule items and the NIST SP 800-53 rev5 controls custos is
// judged by (docs/compliance.md).
var Required = []string{
	"hipaa-164.308-a-1-ii-d", "hipaa-164.308-a-5-ii-c",
	"hipaa-164.312-a-1", "hipaa-164.312-a-2-i", "hipaa-164.312-a-2-ii", "hipaa-164.312-a-2-iii", "hipaa-164.312-a-2-iv",
	"hipaa-164.312-b", "hipaa-164.312-c-1", "hipaa-164.312-c-2", "hipaa-164.312-d", "hipaa-164.312-e-1", "hipaa-164.312-e-2",
	"hipaa-164.316-b-2",
	"hipaa-164.514-b-2", "hipaa-164.514-d", "hipaa-164.528",
	"ac-3", "ac-6", "au-2", "au-3", "au-6", "au-9", "au-9.3", "au-10", "au-11", "au-12",
	"ia-2", "sc-8", "sc-12", "sc-13", "sc-28", "si-7",
}

// TestRef names one Go test: its package directory relative to the module
// root ("audit/bundle") and its top-level test function ("TestVerifyTamper").
type TestRef struct {
	Dir, Name string
}

// String is the reference's form in the document: "audit/bundle#TestVerifyTamper".
func (r TestRef) String() string { return r.Dir + "#" + r.Name }

// ImportPath is the Go package import path of the test's package.
func (r TestRef) ImportPath() string { return ModulePath + "/" + r.Dir }

// ParseTestRef parses "dir#TestName".
func ParseTestRef(s string) (TestRef, error) {
	dir, name, ok := strings.Cut(s, "#")
	if !ok || dir == "" || !strings.HasPrefix(name, "Test") || strings.ContainsAny(name, "/# ") ||
		strings.HasPrefix(dir, "/") || strings.Contains(dir, "..") {
		return TestRef{}, fmt.Errorf("compliance: evidence test %q: want <package dir>#Test<Name>", s)
	}
	return TestRef{Dir: dir, Name: name}, nil
}

// Control is one implemented requirement: a control, how custos implements
// it, and the tests that prove it.
type Control struct {
	Catalog     string // the control implementation's source
	ID          string // OSCAL control id, e.g. "au-9.3", "hipaa-164.312-b"
	Title       string
	Description string
	Evidence    []TestRef
}

// Definition is the parsed component definition.
type Definition struct {
	Title    string
	Version  string
	Controls []Control
}

type oscalProp struct {
	Name  string `json:"name"`
	NS    string `json:"ns"`
	Value string `json:"value"`
}

type oscalDoc struct {
	CD struct {
		Metadata struct {
			Title   string `json:"title"`
			Version string `json:"version"`
		} `json:"metadata"`
		Components []struct {
			Title string `json:"title"`
			Impls []struct {
				Source string `json:"source"`
				Reqs   []struct {
					ControlID   string      `json:"control-id"`
					Description string      `json:"description"`
					Props       []oscalProp `json:"props"`
				} `json:"implemented-requirements"`
			} `json:"control-implementations"`
		} `json:"components"`
	} `json:"component-definition"`
}

// Load parses the embedded definition.
func Load() (*Definition, error) { return Parse(definitionJSON) }

// Parse reads a component definition in custos's use of OSCAL: the controls
// of every control implementation of every component, with their
// control-title and evidence-test properties. It reports a malformed
// evidence reference or a control mapped twice.
func Parse(data []byte) (*Definition, error) {
	var doc oscalDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("compliance: component definition: %w", err)
	}
	d := &Definition{Title: doc.CD.Metadata.Title, Version: doc.CD.Metadata.Version}
	seen := map[string]bool{}
	var errs []error
	for _, comp := range doc.CD.Components {
		for _, impl := range comp.Impls {
			for _, req := range impl.Reqs {
				c := Control{Catalog: impl.Source, ID: req.ControlID, Description: req.Description}
				if seen[c.ID] {
					errs = append(errs, fmt.Errorf("compliance: control %s is mapped twice", c.ID))
				}
				seen[c.ID] = true
				for _, p := range req.Props {
					if p.NS != Namespace {
						continue
					}
					switch p.Name {
					case "control-title":
						c.Title = p.Value
					case "evidence-test":
						ref, err := ParseTestRef(p.Value)
						if err != nil {
							errs = append(errs, fmt.Errorf("control %s: %w", c.ID, err))
							continue
						}
						c.Evidence = append(c.Evidence, ref)
					}
				}
				d.Controls = append(d.Controls, c)
			}
		}
	}
	return d, errors.Join(errs...)
}

// Problem is one finding of a check: the control, the test if one is
// concerned, and what is wrong.
type Problem struct {
	Control string
	Test    string // "" when the problem is the control's
	What    string
}

func (p Problem) String() string {
	if p.Test == "" {
		return p.Control + ": " + p.What
	}
	return p.Control + ": " + p.Test + ": " + p.What
}

// CheckCoverage reports every Required control that is not mapped and every
// mapped control without evidence.
func (d *Definition) CheckCoverage() []Problem {
	var ps []Problem
	byID := map[string]Control{}
	for _, c := range d.Controls {
		byID[c.ID] = c
		if len(c.Evidence) == 0 {
			ps = append(ps, Problem{Control: c.ID, What: "names no evidence test"})
		}
		if strings.TrimSpace(c.Description) == "" {
			ps = append(ps, Problem{Control: c.ID, What: "does not say how custos implements it"})
		}
	}
	for _, id := range Required {
		if _, ok := byID[id]; !ok {
			ps = append(ps, Problem{Control: id, What: "is required but not mapped"})
		}
	}
	return ps
}

// CheckTestsExist reports every evidence test that is not a top-level
// `func TestX(t *testing.T)` in a _test.go file of its package directory
// under root (the module root).
func (d *Definition) CheckTestsExist(root string) []Problem {
	funcs := map[string]map[string]bool{} // dir -> test names
	var ps []Problem
	for _, c := range d.Controls {
		for _, ref := range c.Evidence {
			names, ok := funcs[ref.Dir]
			if !ok {
				var err error
				if names, err = testFuncs(filepath.Join(root, filepath.FromSlash(ref.Dir))); err != nil {
					ps = append(ps, Problem{Control: c.ID, Test: ref.String(), What: err.Error()})
				}
				funcs[ref.Dir] = names
			}
			if !names[ref.Name] {
				ps = append(ps, Problem{Control: c.ID, Test: ref.String(), What: "no such test in " + ref.Dir})
			}
		}
	}
	return ps
}

// testFuncs returns the names of the top-level Test functions in dir's
// _test.go files.
func testFuncs(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return names, fmt.Errorf("parse %s: %w", filepath.Base(f), err)
		}
		for _, decl := range af.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				names[fn.Name.Name] = true
			}
		}
	}
	return names, nil
}

// Status is a test's outcome in a run.
type Status string

// Test outcomes, as `go test -json` names them.
const (
	StatusPass Status = "pass"
	StatusFail Status = "fail"
	StatusSkip Status = "skip"
)

// Results are the outcomes of top-level tests in one run, by reference.
type Results map[TestRef]Status

// ParseTestJSON reads `go test -json` output (test2json events) and returns
// the final outcome of every top-level test of the module's packages.
// Subtests are ignored: a top-level test fails when any subtest does.
func ParseTestJSON(r io.Reader) (Results, error) {
	res := Results{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 || b[0] != '{' {
			continue // build output interleaved by make
		}
		var ev struct {
			Action  string
			Package string
			Test    string
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			return nil, fmt.Errorf("compliance: test results line %d: %w", line, err)
		}
		if ev.Test == "" || strings.Contains(ev.Test, "/") || !strings.HasPrefix(ev.Package, ModulePath+"/") {
			continue
		}
		switch Status(ev.Action) {
		case StatusPass, StatusFail, StatusSkip:
			res[TestRef{Dir: strings.TrimPrefix(ev.Package, ModulePath+"/"), Name: ev.Test}] = Status(ev.Action)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("compliance: test results: %w", err)
	}
	return res, nil
}

// ControlStatus is one control's evidence in a run.
type ControlStatus struct {
	Control  Control
	Passed   []TestRef
	Failed   []TestRef // failed, skipped, or not run
	Evidence bool      // at least one test passed and none failed
}

// CheckEvidence judges every control against a run's results: a control has
// passing evidence when every test it names passed (a skipped or missing
// test is not evidence). It returns each control's status and a problem for
// every test that did not pass.
func (d *Definition) CheckEvidence(res Results) ([]ControlStatus, []Problem) {
	var out []ControlStatus
	var ps []Problem
	for _, c := range d.Controls {
		st := ControlStatus{Control: c}
		for _, ref := range c.Evidence {
			switch s, ok := res[ref]; {
			case !ok:
				st.Failed = append(st.Failed, ref)
				ps = append(ps, Problem{Control: c.ID, Test: ref.String(), What: "did not run"})
			case s != StatusPass:
				st.Failed = append(st.Failed, ref)
				ps = append(ps, Problem{Control: c.ID, Test: ref.String(), What: "result " + string(s)})
			default:
				st.Passed = append(st.Passed, ref)
			}
		}
		st.Evidence = len(st.Passed) > 0 && len(st.Failed) == 0
		out = append(out, st)
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Control < ps[j].Control })
	return out, ps
}

// ReadTestJSONFile is ParseTestJSON of a file.
func ReadTestJSONFile(path string) (Results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("compliance: %w", err)
	}
	defer f.Close()
	return ParseTestJSON(f)
}
