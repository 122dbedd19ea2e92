package bundle_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/internal/repofiles"
)

// TestEveryActionIsExportedAndValidated: every action custos writes to
// the audit log — each untyped string constant named Action… in the
// module's non-test code (server, fhirsync, audit/access, audit/scrub,
// backup, audit: the Go files git tracks, repofiles) and each btg event
// Kind… (policy/btg: the actions
// btg/grant … btg/refuse) — has a record among the ones
// TestExportsPassOutsideValidators exports and runs the outside validators
// over. A new action added without one fails here, naming it and the file
// that declares it.
func TestEveryActionIsExportedAndValidated(t *testing.T) {
	exported := map[string]bool{}
	for _, e := range bundle.RealisticEntries() {
		exported[e.Action] = true
	}
	declared := map[string]string{} // action -> where
	// The module's code is the files git tracks (repofiles): a walk of the
	// tree read whatever else was there too, an untracked file or an
	// installed package, and an action declared in a scratch file failed
	// the test (or counted as declared) though no commit held it. A Go
	// file under testdata is a fixture, not code custos runs.
	for _, path := range repofiles.Tracked(t, filepath.Join("..", "..")) {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || slices.Contains(strings.Split(filepath.ToSlash(path), "/"), "testdata") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		btgKinds := filepath.ToSlash(filepath.Dir(path)) == "../../policy/btg"
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Type != nil { // typed: policy.Action's list/read/templates, not audit actions
					continue
				}
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !(strings.HasPrefix(name.Name, "Action") || (btgKinds && strings.HasPrefix(name.Name, "Kind"))) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					declared[v] = path + ": " + name.Name
				}
			}
		}
	}
	// The scan finds what it is meant to (one action of each kind of
	// declaration it reads).
	for _, a := range []string{"resources/read", "auth/reject", "sync/end", "audit/verify", "audit/integrity", "backup/restore", "btg/refuse"} {
		if declared[a] == "" {
			t.Fatalf("the scan did not find the action %s; found %v", a, declared)
		}
	}
	var missing []string
	for a, where := range declared {
		if !exported[a] {
			missing = append(missing, a+" ("+where+")")
		}
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("action %s has no record in the validated export (add one to realisticEntries)", m)
	}
	t.Logf("%d actions declared, every one exported and validated", len(declared))
}
