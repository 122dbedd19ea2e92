package rego_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/rego"
	"github.com/open-policy-agent/opa/v1/ast"
)

// comparisons are the builtins a `with` value must not be: in
// `f(x) with input as y == v` the comparison binds to the value, so the
// expression tests `f(x)` under the input `y == v` (a boolean) and holds
// whatever v is.
var comparisons = map[string]bool{"eq": true, "equal": true, "neq": true, "lt": true, "lte": true, "gt": true, "gte": true}

// withComparisons returns the `with` values of m that are comparisons, as
// "row: text".
func withComparisons(m *ast.Module) []string {
	var found []string
	ast.WalkExprs(m, func(e *ast.Expr) bool {
		for _, w := range e.With {
			if call, ok := w.Value.Value.(ast.Call); ok && len(call) > 0 {
				if ref, ok := call[0].Value.(ast.Ref); ok && comparisons[ref.String()] {
					found = append(found, w.Location.String()+": "+w.String())
				}
			}
		}
		return false
	})
	return found
}

// TestNoComparisonAsWithValue: no Rego module of the default policy (its
// tests above all) compares under a `with` by mistake (such a test cannot
// fail).
func TestNoComparisonAsWithValue(t *testing.T) {
	files := 0
	err := fs.WalkDir(rego.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") {
			return err
		}
		files++
		src, err := fs.ReadFile(rego.FS, path)
		if err != nil {
			return err
		}
		m, err := ast.ParseModuleWithOpts(path, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return err
		}
		if found := withComparisons(m); len(found) > 0 {
			t.Errorf("a `with` takes a comparison as its value (the expression holds whatever is compared; bind the value first): %v", found)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 2 {
		t.Fatalf("%d Rego modules found in rego.FS, want the policy and its tests", files)
	}
	// The check finds the mistake it looks for.
	bad := ast.MustParseModuleWithOpts("package p\n\ntest_x if {\n\tdata.p.f with input as {\"a\": 1} == {\"b\"}\n}\n", ast.ParserOptions{RegoVersion: ast.RegoV1})
	if found := withComparisons(bad); len(found) != 1 {
		t.Fatalf("the check missed `f with input as x == v`: %v", found)
	}
}
