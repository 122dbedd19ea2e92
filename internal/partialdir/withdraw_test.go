package partialdir_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/internal/partialdir"
)

// TestWithdraw: a directory published at out (renamed from its partial
// directory) is taken back whole, and a given empty out is made again
// with its mode; a directory at out that is not the one published (the
// output replaced meanwhile) is left as it is.
func TestWithdraw(t *testing.T) {
	for _, given := range []bool{false, true} {
		base := t.TempDir()
		out := filepath.Join(base, "out")
		if given {
			if err := os.Mkdir(out, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		mode := partialdir.GivenMode(out)
		if (mode != 0) != given {
			t.Fatalf("given=%v: GivenMode = %v", given, mode)
		}
		tmp, release, _, err := partialdir.New(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, "f"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		info, err := os.Lstat(tmp)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(out) // as durable.PublishDir does with an empty one
		if err := os.Rename(tmp, out); err != nil {
			t.Fatal(err)
		}
		if err := partialdir.Withdraw(out, tmp, info, mode); err != nil {
			t.Fatal(err)
		}
		release()
		es, _ := os.ReadDir(base)
		switch {
		case !given && len(es) != 0:
			t.Errorf("given=%v: left %v", given, es)
		case given && (len(es) != 1 || es[0].Name() != "out"):
			t.Errorf("given=%v: left %v, want the empty out", given, es)
		case given:
			fi, err := os.Stat(out)
			inner, _ := os.ReadDir(out)
			if err != nil || fi.Mode().Perm() != 0o750 || len(inner) != 0 {
				t.Errorf("given=%v: out %v (%v), %d entries; want empty, 0750", given, fi.Mode(), err, len(inner))
			}
		}
	}

	base := t.TempDir()
	out := filepath.Join(base, "out")
	tmp, info := newPartial(t, out)
	if err := os.Mkdir(out, 0o700); err != nil { // not the one published
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "theirs"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := partialdir.Withdraw(out, tmp, info, 0); err == nil {
		t.Error("Withdraw took back a directory that is not the one published")
	}
	if _, err := os.Stat(filepath.Join(out, "theirs")); err != nil {
		t.Errorf("Withdraw touched a directory that is not the one published: %v", err)
	}
}

// TestWithdrawRemakesTheGivenModeBits: the empty out given is made again
// with its setgid and sticky bits, not its permissions alone: a group's
// shared directory (setgid) given as --out lost its setgid bit to a
// command that failed after publishing (until h-review64).
func TestWithdrawRemakesTheGivenModeBits(t *testing.T) {
	base := t.TempDir()
	out := filepath.Join(base, "out")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	want := os.ModeDir | os.ModeSetgid | os.ModeSticky | 0o770
	if err := os.Chmod(out, want&^os.ModeDir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(out); err != nil || fi.Mode() != want {
		t.Fatalf("the given out: %v (%v), want %v", fi.Mode(), err, want)
	}
	mode := partialdir.GivenMode(out)
	tmp, info := newPartial(t, out)
	if err := partialdir.Publish(tmp, out, info, mode, nil); err != nil {
		t.Fatal(err)
	}
	if err := partialdir.Withdraw(out, tmp, info, mode); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(out)
	if err != nil || fi.Mode() != want {
		t.Errorf("out made again: %v (%v), want %v", fi.Mode(), err, want)
	}
}

// newPartial makes a partial directory of out (partialdir.New), locked
// until the test ends, and returns it with its FileInfo.
func newPartial(t *testing.T, out string) (string, os.FileInfo) {
	t.Helper()
	tmp, release, _, err := partialdir.New(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	info, err := os.Lstat(tmp)
	if err != nil {
		t.Fatal(err)
	}
	return tmp, info
}
