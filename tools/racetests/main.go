// Command racetests selects the tests that `make race` runs under the race
// detector: the tests with real concurrency. `make unit` runs every other
// test, so each test runs once.
//
// A test function (TestXxx in a *_test.go file) is selected when its body,
// or a function or method of its package's test files that it names
// (directly or through other such functions), starts a goroutine: a go
// statement, a call of a method named Go (sync.WaitGroup.Go,
// errgroup.Group.Go) or of Parallel (t.Parallel). A test whose concurrency
// the product starts itself (a worker pool, a watcher, a background
// renewal) rather than the test carries the directive
//
//	//custos:race
//
// as the last line of its doc comment.
//
// Two rules keep the selection honest, and racetests fails when either is
// broken. A package whose own (non-test) code starts a goroutine has at
// least one selected test: mark the test that drives a new goroutine with
// the directive. A selected test's name is not the name of an unselected
// test elsewhere in the module (-run and -skip match names in every
// package, so `make unit` would skip that one too): rename one.
//
// Usage:
//
//	racetests [-exclude dir,...] [-root dir] run    # prints: -run=^(TestA|TestB)$ ./pkg ./pkg2
//	racetests [-exclude dir,...] [-root dir] skip   # prints: -skip=^(TestA|TestB)$
//	racetests [-exclude dir,...] [-root dir] list   # one line per selected test, with the reason
//
// -exclude names directories (relative to -root, with what is below them)
// whose tests never run under -race: they run in `make unit` only.
package main

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Directive marks a test whose concurrency the product starts.
const Directive = "//custos:race"

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "racetests:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fl := flag.NewFlagSet("racetests", flag.ContinueOnError)
	root := fl.String("root", ".", "module root to scan")
	exclude := fl.String("exclude", "", "comma-separated directories (relative to -root) not to scan")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() != 1 || !slices.Contains([]string{"run", "skip", "list"}, fl.Arg(0)) {
		return errors.New("usage: racetests [-exclude dir,...] [-root dir] run|skip|list")
	}
	var excluded []string
	for d := range strings.SplitSeq(*exclude, ",") {
		if d = strings.Trim(filepath.ToSlash(filepath.Clean(strings.TrimSpace(d))), "/"); d != "" && d != "." {
			excluded = append(excluded, d)
		}
	}
	pkgs, err := scan(*root, excluded)
	if err != nil {
		return err
	}
	if err := check(pkgs); err != nil {
		return err
	}
	names := selectedNames(pkgs)
	if len(names) == 0 {
		return errors.New("no test with concurrency found")
	}
	re := "^(" + strings.Join(names, "|") + ")$"
	switch fl.Arg(0) {
	case "run":
		args := []string{"-run=" + re}
		for _, p := range pkgs {
			if len(p.selected) > 0 {
				args = append(args, "./"+p.dir)
			}
		}
		fmt.Fprintln(out, strings.Join(args, " "))
	case "skip":
		fmt.Fprintln(out, "-skip="+re)
	case "list":
		for _, p := range pkgs {
			for _, s := range p.selected {
				fmt.Fprintf(out, "./%s\t%s\t%s\n", p.dir, s.name, s.why)
			}
		}
	}
	return nil
}

// pkg is one directory's tests.
type pkg struct {
	dir      string   // slash-separated, relative to the root
	tests    []string // every TestXxx, sorted
	selected []test   // the concurrent ones, sorted by name
	spawns   string   // "file:line" of a goroutine its non-test code starts, or ""
	excluded bool     // under -exclude: nothing selected, no rule checked
}

type test struct{ name, why string }

// scan reads the Go files of every directory under root except testdata,
// node_modules, dot-directories and other modules; excluded directories
// (and what is below them) select no test.
func scan(root string, excluded []string) ([]*pkg, error) {
	var pkgs []*pkg
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if rel != "." && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if rel != "." {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		p, err := scanDir(path, rel)
		if err != nil || p == nil {
			return err
		}
		if slices.ContainsFunc(excluded, func(x string) bool { return rel == x || strings.HasPrefix(rel, x+"/") }) {
			// Its tests run in `make unit` only; their names still count
			// for the clash check.
			p.excluded, p.selected, p.spawns = true, nil, ""
		}
		pkgs = append(pkgs, p)
		return nil
	})
	return pkgs, err
}

// scanDir parses the Go files of one directory; nil when it has none.
func scanDir(path, rel string) (*pkg, error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	p := &pkg{dir: rel}
	funcs := map[string][]*ast.FuncDecl{} // test-file functions and methods by name
	var tests []*ast.FuncDecl
	found := false
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		found = true
		f, err := parser.ParseFile(fset, filepath.Join(path, e.Name()), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if !strings.HasSuffix(e.Name(), "_test.go") {
			if p.spawns == "" {
				if pos, ok := startsGoroutine(f); ok {
					p.spawns = fmt.Sprintf("%s:%d", e.Name(), fset.Position(pos).Line)
				}
			}
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			funcs[fd.Name.Name] = append(funcs[fd.Name.Name], fd)
			if fd.Recv == nil && isTest(fd.Name.Name) {
				tests = append(tests, fd)
			}
		}
	}
	if !found {
		return nil, nil
	}
	c := &closure{funcs: funcs, memo: map[*ast.FuncDecl]string{}}
	for _, fd := range tests {
		p.tests = append(p.tests, fd.Name.Name)
		why := ""
		if hasDirective(fd.Doc) {
			why = Directive
		} else {
			why = c.spawns(fd)
		}
		if why != "" {
			p.selected = append(p.selected, test{fd.Name.Name, why})
		}
	}
	slices.Sort(p.tests)
	slices.SortFunc(p.selected, func(a, b test) int { return strings.Compare(a.name, b.name) })
	return p, nil
}

// isTest reports whether name is a test function's name (TestXxx, not TestMain).
func isTest(name string) bool {
	rest, ok := strings.CutPrefix(name, "Test")
	return ok && name != "TestMain" && (rest == "" || !('a' <= rest[0] && rest[0] <= 'z'))
}

func hasDirective(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	for _, c := range doc.List {
		if strings.TrimSpace(c.Text) == Directive {
			return true
		}
	}
	return false
}

// goroutineAt returns how n starts a goroutine ("go statement", "Go call",
// "Parallel call") and where, if it does.
func goroutineAt(n ast.Node) (what string, pos token.Pos, ok bool) {
	switch n := n.(type) {
	case *ast.GoStmt:
		return "go statement", n.Pos(), true
	case *ast.CallExpr:
		if s, ok := n.Fun.(*ast.SelectorExpr); ok && (s.Sel.Name == "Go" || s.Sel.Name == "Parallel") {
			return s.Sel.Name + " call", n.Pos(), true
		}
	}
	return "", token.NoPos, false
}

// startsGoroutine reports the first goroutine the file starts.
func startsGoroutine(f *ast.File) (pos token.Pos, ok bool) {
	ast.Inspect(f, func(n ast.Node) bool {
		if ok {
			return false
		}
		_, pos, ok = goroutineAt(n)
		return !ok
	})
	return pos, ok
}

// closure finds goroutines through the test files' own functions.
type closure struct {
	funcs map[string][]*ast.FuncDecl
	memo  map[*ast.FuncDecl]string // "" after a visit that found none
}

// spawns returns why fd starts a goroutine ("go statement in helper", ...), or "".
func (c *closure) spawns(fd *ast.FuncDecl) string {
	if why, seen := c.memo[fd]; seen {
		return why // "" also while fd is being visited (recursion)
	}
	c.memo[fd] = ""
	why := ""
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if why != "" {
			return false
		}
		if what, _, ok := goroutineAt(n); ok {
			why = what + " in " + fd.Name.Name
			return false
		}
		if id, ok := n.(*ast.Ident); ok {
			for _, callee := range c.funcs[id.Name] {
				if callee != fd {
					if w := c.spawns(callee); w != "" {
						why = w
						return false
					}
				}
			}
		}
		return true
	})
	c.memo[fd] = why
	return why
}

// check enforces the two rules in the package comment.
func check(pkgs []*pkg) error {
	var errs []error
	for _, p := range pkgs {
		if p.spawns != "" && len(p.selected) == 0 {
			errs = append(errs, fmt.Errorf("./%s starts a goroutine (%s) but none of its tests runs under -race: mark one that drives it with %s",
				p.dir, p.spawns, Directive))
		}
	}
	owner := map[string]string{} // selected name -> package
	for _, p := range pkgs {
		for _, s := range p.selected {
			owner[s.name] = p.dir
		}
	}
	for _, p := range pkgs {
		for _, name := range p.tests {
			if o, ok := owner[name]; ok && !slices.ContainsFunc(p.selected, func(s test) bool { return s.name == name }) {
				errs = append(errs, fmt.Errorf("%s runs under -race in ./%s, so `make unit` would skip ./%s's %s too and nothing would run it: rename one",
					name, o, p.dir, name))
			}
		}
	}
	return errors.Join(errs...)
}

// selectedNames returns the selected test names of all packages, sorted, once each.
func selectedNames(pkgs []*pkg) []string {
	var names []string
	for _, p := range pkgs {
		for _, s := range p.selected {
			names = append(names, s.name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
