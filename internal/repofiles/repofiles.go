// Package repofiles gives a test the files of the repository that git
// tracks: the fixtures a test reads from the whole checkout. A walk of the
// directory tree reads whatever else is there too, and a package manager
// installs more of it than any list of names to leave out foresees
// (node_modules, the implementation guides' packages `make igexamples`
// installs, the next one): the fresh-clone CI after h-igviews2 failed on
// installed files read as fixtures. git's index is the one list of what the
// repository holds.
//
// Invariants: the files listed are the ones `git ls-files` lists (tracked,
// staged ones included), as they are in the work tree; a tracked file
// deleted from the work tree, a symbolic link and a submodule are left
// out. A tree that is not a git checkout, or a machine without git, fails
// the test with what is missing: never a silent walk, and never a skip
// (a clean clone has git, and a test that read no fixture would pass).
//
// It is a test helper: it never runs in the server.
package repofiles

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Tracked returns the regular files git tracks under dir (a directory of
// the checkout, such as ".." from a package's directory), each joined to
// dir, sorted. It fails t when dir is not in a git checkout or git cannot
// list it.
func Tracked(t testing.TB, dir string) []string {
	t.Helper()
	paths, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// List is Tracked's work: the regular files git tracks under dir, joined
// to dir and sorted, or an error naming dir and what git said.
func List(dir string) ([]string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("repofiles: the fixtures of %s are the files git tracks, and git is not installed: %w", dir, err)
	}
	cmd := exec.Command("git", "-C", dir, "ls-files", "-z", "--cached")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("repofiles: git ls-files in %s: %w: %s (the fixtures of a test are the files git tracks: run the tests in a git checkout)",
			dir, err, strings.TrimSpace(stderr.String()))
	}
	var paths []string
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // tracked, deleted from the work tree: not a fixture now
		case err != nil:
			return nil, fmt.Errorf("repofiles: %w", err)
		case !fi.Mode().IsRegular():
			continue
		}
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("repofiles: git tracks no file under %s", dir)
	}
	slices.Sort(paths)
	return slices.Compact(paths), nil // an unmerged file is listed once a stage
}
