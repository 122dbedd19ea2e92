package admin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestDialChecksWhichServerAnswers: a socket file in data directory B that
// leads to the server of data directory A (a symlink; the same happens
// with a socket copied along with a directory) is refused with
// ErrOtherServer, and nothing is recorded in A's log; the directory's own
// server is found through every path to the directory (relative, trailing
// slash, "..", a symlinked directory).
func TestDialChecksWhichServerAnswers(t *testing.T) {
	_, l, dirA := serveLog(t, nil)
	dirB := t.TempDir()
	if err := os.Symlink(Path(dirA), Path(dirB)); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(context.Background(), Path(dirB))
	if !errors.Is(err, ErrOtherServer) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("B's socket leads to A's server: Dial = %v, want ErrOtherServer", err)
	}
	if head, _ := l.Head(); head != 3 {
		t.Fatalf("A's head %d: something was recorded through B's socket", head)
	}

	link := filepath.Join(t.TempDir(), "data")
	if err := os.Symlink(dirA, link); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, dirA)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dirA, dirA + "/", rel, filepath.Join(dirA, "..", filepath.Base(dirA)), link} {
		c, err := Dial(context.Background(), Path(d))
		if err != nil {
			t.Errorf("data directory given as %q: %v", d, err)
			continue
		}
		c.Close()
	}
}
