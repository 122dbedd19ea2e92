package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
)

// TestResult is the outcome of one Rego test (custos policy test).
type TestResult struct {
	Package  string        `json:"package"` // e.g. "data.custos.authz_test"
	Name     string        `json:"name"`    // e.g. "test_missing_purpose_denied"
	Outcome  string        `json:"outcome"` // "PASS", "FAIL", "ERROR" or "SKIPPED"
	Error    string        `json:"error,omitempty"`
	Location string        `json:"location,omitempty"` // "file:row"
	Duration time.Duration `json:"duration_ns"`
}

// TestReport is the outcome of [RunTestsCoverage].
type TestReport struct {
	Results []TestResult `json:"results"` // sorted by package, then name
	Passed  int          `json:"passed"`
	Failed  int          `json:"failed"` // failed, errored or skipped
	// Coverage is the percentage of the policy modules' lines (tests
	// excluded) that the tests evaluated, as OPA's cover package counts
	// them; Files gives it per policy module.
	Coverage float64            `json:"coverage"`
	Files    map[string]float64 `json:"files"`
}

// RunTestsCoverage is [RunTests] with a result per test and line coverage
// of the policy modules (github.com/open-policy-agent/opa/v1/cover). It
// returns an error if the modules do not compile or no test was found;
// failing tests are reported in the results.
func RunTestsCoverage(ctx context.Context, fsys fs.FS) (TestReport, error) {
	rep := TestReport{Results: []TestResult{}, Files: map[string]float64{}}
	all, err := allRegoFiles(fsys)
	if err != nil {
		return rep, err
	}
	policies, tests := splitTests(all)
	if len(tests) == 0 {
		return rep, errors.New("policy: no *_test.rego files found")
	}
	modules := make(map[string]*ast.Module, len(all))
	for _, f := range all {
		m, err := ast.ParseModuleWithOpts(f.path, string(f.content), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return rep, fmt.Errorf("%w: %w", ErrCompile, err)
		}
		modules[f.path] = m
	}
	cov := cover.New()
	ch, err := newTestRunner().
		SetCoverageQueryTracer(cov).
		SetCoverageRuns([]cover.Kind{}).
		SetModules(modules).
		RunTests(ctx, nil)
	if err != nil {
		return rep, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	for r := range ch {
		tr := TestResult{Package: r.Package, Name: r.Name, Outcome: "PASS", Duration: r.Duration}
		if r.Location != nil {
			tr.Location = fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
		}
		switch {
		case r.Pass():
			rep.Passed++
		case r.Skip:
			tr.Outcome = "SKIPPED"
		case r.Error != nil:
			tr.Outcome, tr.Error = "ERROR", r.Error.Error()
		default:
			tr.Outcome = "FAIL"
		}
		if tr.Outcome != "PASS" {
			rep.Failed++
		}
		rep.Results = append(rep.Results, tr)
	}
	slices.SortFunc(rep.Results, func(a, b TestResult) int {
		return cmpOr(strings.Compare(a.Package, b.Package), strings.Compare(a.Name, b.Name))
	})
	if len(rep.Results) == 0 {
		return rep, errors.New("policy: no Rego tests (test_* rules) found")
	}
	report := cov.Report(modules)
	covered, notCovered := 0, 0
	for _, f := range policies {
		fr := report.Files[f.path]
		if fr == nil {
			rep.Files[f.path] = 0
			continue
		}
		covered += fr.CoveredLines
		notCovered += fr.NotCoveredLines
		rep.Files[f.path] = fr.Coverage
	}
	if covered+notCovered > 0 {
		rep.Coverage = 100 * float64(covered) / float64(covered+notCovered)
	}
	return rep, ctx.Err()
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// CheckExample is a built-in policy input that custos policy check decides
// with a candidate policy. The examples cover every action and the main
// roles; they carry synthetic identifiers only.
type CheckExample struct {
	Name  string `json:"name"`
	Input Input  `json:"input"`
}

// CheckExamples returns the built-in examples (a fresh copy each call).
func CheckExamples() []CheckExample {
	const (
		tenant  = "general-hospital"
		patient = "7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01"
	)
	res := func(scheme, typ, seg string) *Resource {
		return &Resource{
			URI:  scheme + "://" + tenant + "/patients/" + patient + "/" + seg + "/3f0c8a2e-6b1d-4c5e-9a7f-1e2d3c4b5a69",
			Type: typ, Patient: patient, Tenant: tenant, Sensitivity: []string{}, Consent: []string{},
		}
	}
	who := func(sub, role string, patients ...string) Principal {
		return Principal{Sub: sub, Roles: []string{role}, ClientID: "assistant", Tenant: tenant, Patients: append([]string{}, patients...)}
	}
	clinician := who("dr.alice", "clinician", patient)
	return []CheckExample{
		{"clinician read (care team)", Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead, Resource: res("fhir", "observation", "observation")}},
		{"clinician list (care team)", Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionList, Resource: res("fhir", "condition", "condition")}},
		{"clinician read of a note", Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead, Resource: res("note", "note", "notes")}},
		{"billing read (coverage)", Input{Principal: who("bob.billing", "billing"), PurposeOfUse: "HPAYMT", Action: ActionRead, Resource: res("fhir", "coverage", "coverage")}},
		{"researcher read (observation)", Input{Principal: who("rita.research", "researcher"), PurposeOfUse: "HRESCH", Action: ActionRead, Resource: res("fhir", "observation", "observation")}},
		{"outsider read", Input{Principal: Principal{Sub: "olga.outsider", Roles: []string{}, ClientID: "assistant", Tenant: "other-clinic", Patients: []string{}}, PurposeOfUse: "TREAT", Action: ActionRead, Resource: res("fhir", "patient", "patient")}},
		{"templates", Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionTemplates}},
		{"missing purpose", Input{Principal: clinician, Action: ActionRead, Resource: res("fhir", "observation", "observation")}},
	}
}

// CheckResult is the outcome of deciding one CheckExample.
type CheckResult struct {
	Example     string   `json:"example"`
	OK          bool     `json:"ok"`              // Decide returned no error: the decision has the schema the server accepts
	Error       string   `json:"error,omitempty"` // why not (shape, undefined, evaluation error, unknown obligation)
	Allow       bool     `json:"allow"`
	Reasons     []string `json:"reasons"`
	Obligations []string `json:"obligations"` // compact form, "remove:/name"
}

// Check decides every CheckExamples input with e and reports, per example,
// whether the decision has the schema the server accepts (see [ErrBadShape],
// [ErrBadObligation], [ErrUndefined], [ErrEvaluation]). A denial is fine; an
// error is not.
func Check(ctx context.Context, e *Engine) []CheckResult {
	var out []CheckResult
	for _, ex := range CheckExamples() {
		d, err := e.Decide(ctx, ex.Input)
		r := CheckResult{Example: ex.Name, OK: err == nil, Allow: d.Allow, Reasons: nonNilStrings(d.Reasons), Obligations: []string{}}
		if err != nil {
			r.Error = err.Error()
		}
		for _, o := range d.Obligations {
			r.Obligations = append(r.Obligations, o.String())
		}
		out = append(out, r)
	}
	return out
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
