package repofiles

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestListTakesTrackedFiles: of a checkout holding tracked files, a
// deleted one, a symbolic link and installed directories git does not
// track (ignored or not), List returns the tracked regular files alone.
func TestListTakesTrackedFiles(t *testing.T) {
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(t.TempDir()))
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	for _, f := range []string{"a.json", "sub/b.json", "sub/deep/c.ndjson", "gone.json"} {
		write(t, filepath.Join(dir, f), `{"resourceType":"Patient"}`)
	}
	if err := os.Symlink("a.json", filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "a.json", "sub", "gone.json", "link.json")
	write(t, filepath.Join(dir, ".gitignore"), "node_modules\n")
	write(t, filepath.Join(dir, "node_modules", "pkg", "x.json"), `{"resourceType":"Patient"}`)
	write(t, filepath.Join(dir, "e2e", "newly-installed", "packages", "y.json"), `{"resourceType":"Patient"}`)
	if err := os.Remove(filepath.Join(dir, "gone.json")); err != nil {
		t.Fatal(err)
	}
	got, err := List(filepath.Join(dir, "."))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.json"), filepath.Join(dir, "sub", "b.json"), filepath.Join(dir, "sub", "deep", "c.ndjson")}
	if !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	// A subdirectory: its files, joined to it.
	got, err = List(filepath.Join(dir, "sub"))
	if want := []string{filepath.Join(dir, "sub", "b.json"), filepath.Join(dir, "sub", "deep", "c.ndjson")}; err != nil || !slices.Equal(got, want) {
		t.Errorf("List(sub) = %q, %v; want %q", got, err, want)
	}
}

// TestListRefusesATreeOutsideGit: a directory that is not a git checkout
// is an error naming it, not a walk.
func TestListRefusesATreeOutsideGit(t *testing.T) {
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(t.TempDir()))
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.json"), `{"resourceType":"Patient"}`)
	got, err := List(dir)
	if err == nil {
		t.Fatalf("List of a directory outside git = %q, want an error", got)
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "git checkout") {
		t.Errorf("error %q does not name the directory and what is missing", msg)
	}
}
