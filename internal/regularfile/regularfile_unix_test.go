//go:build unix

package regularfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	absent := filepath.Join(dir, "absent")
	if err := os.Symlink(absent, dangling); err != nil {
		t.Fatal(err)
	}
	linkToFIFO := filepath.Join(dir, "link-to-fifo")
	if err := os.Symlink(fifo, linkToFIFO); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		flag   int
		follow Follow
		kind   string // "" = opens
	}{
		{regular, os.O_RDONLY, NoFollow, ""},
		{regular, os.O_RDWR, FollowLinks, ""},
		{link, os.O_RDONLY, FollowLinks, ""},
		{link, os.O_RDONLY, NoFollow, "a symbolic link"},
		{link, os.O_RDWR | os.O_CREATE, NoFollow, "a symbolic link"},
		{dangling, os.O_RDWR | os.O_CREATE, NoFollow, "a symbolic link"},
		{fifo, os.O_RDONLY, FollowLinks, "a FIFO"},
		{fifo, os.O_RDONLY, NoFollow, "a FIFO"},
		{linkToFIFO, os.O_RDONLY, FollowLinks, "a FIFO"},
		{linkToFIFO, os.O_RDONLY, NoFollow, "a symbolic link"},
		{dir, os.O_RDONLY, FollowLinks, "a directory"},
		{"/dev/null", os.O_RDONLY, FollowLinks, "a device"},
	} {
		done := make(chan struct{})
		var f *os.File
		var err error
		go func() {
			defer close(done)
			f, err = Open(c.path, c.flag, 0o600, c.follow)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%s, follow=%v) still waiting after 10s", filepath.Base(c.path), c.follow)
		}
		var nr *NotRegularError
		switch {
		case c.kind == "" && err != nil:
			t.Errorf("Open(%s, follow=%v): %v, want it opened", filepath.Base(c.path), c.follow, err)
		case c.kind == "":
			f.Close()
		case !errors.As(err, &nr):
			if f != nil {
				f.Close()
			}
			t.Errorf("Open(%s, follow=%v): %v, want a *NotRegularError (%s)", filepath.Base(c.path), c.follow, err, c.kind)
		case nr.Kind != c.kind || nr.Path != c.path:
			t.Errorf("Open(%s, follow=%v): %v, want %s", filepath.Base(c.path), c.follow, err, c.kind)
		}
	}
	if _, err := os.Lstat(absent); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dangling link's target was created (%v)", err)
	}
	if _, err := Open(absent, os.O_RDONLY, 0, NoFollow); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open of a missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestOpenCreate: it reports a file as created only when this call made
// it, so that a caller gives away (owner.Match) only such a file; it
// creates nothing through a symbolic link and refuses a FIFO.
func TestOpenCreate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "lock")
	f, created, err := OpenCreate(p, os.O_RDWR, 0o600, NoFollow)
	if err != nil || !created {
		t.Fatalf("OpenCreate of a missing file: created %v, %v; want it created", created, err)
	}
	f.Close()
	f, created, err = OpenCreate(p, os.O_RDWR|os.O_CREATE, 0o600, NoFollow)
	if err != nil || created {
		t.Fatalf("OpenCreate of an existing file: created %v, %v; want it opened, not created", created, err)
	}
	f.Close()
	absent := filepath.Join(dir, "absent")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(absent, link); err != nil {
		t.Fatal(err)
	}
	if _, created, err := OpenCreate(link, os.O_RDWR, 0o600, NoFollow); !IsNotRegular(err) || created {
		t.Errorf("OpenCreate of a dangling link: created %v, %v; want a *NotRegularError", created, err)
	}
	if _, err := os.Lstat(absent); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dangling link's target was created (%v)", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, created, err := OpenCreate(fifo, os.O_RDONLY, 0o600, NoFollow); !IsNotRegular(err) || created {
		t.Errorf("OpenCreate of a FIFO: created %v, %v; want a *NotRegularError", created, err)
	}
}
