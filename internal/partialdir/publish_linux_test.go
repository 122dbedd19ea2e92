//go:build linux

package partialdir

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/custos-mcp/custos/internal/durable"
)

// TestStagedPublishNotTakenBack: Publish renamed the partial directory to
// OUT, its parent's fsync failed, and taking OUT back failed too (here
// OUT is a mount point, which cannot be renamed: EBUSY). A complete copy
// of PHI is left at OUT. Staged.Publish called it gone: its error was no
// *NotTakenBackError, so each command said "NOT written" of an OUT that
// holds it. Now the error says OUT still holds it, and OUT stays
// published: Discard leaves it, and releases the lock once.
func TestStagedPublishNotTakenBack(t *testing.T) {
	s, _, out, released := stage(t, 0)
	publishDir = func(tmp, dst string, _ func(string) error) error {
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
		pin(t, dst)
		return errors.New("sync " + dst + ": input/output error")
	}
	t.Cleanup(func() { publishDir = durable.PublishDir })

	err := s.Publish(nil)
	var left *NotTakenBackError
	if !errors.As(err, &left) || left.Out != out {
		t.Errorf("Publish's error, with OUT left in place, is not a *NotTakenBackError naming %s: %v", out, err)
	}
	if got := entries(t, out); got != "f" {
		t.Fatalf("out holds %q, want f (the published directory, left)", got)
	}
	if err := s.Publish(nil); err == nil || !strings.Contains(err.Error(), "which is published") {
		t.Errorf("a second Publish: %v, want a refusal naming the state published", err)
	}
	s.Discard()
	if got := entries(t, out); got != "f" {
		t.Errorf("Discard changed the published out: it holds %q", got)
	}
	if *released != 1 {
		t.Errorf("the lock was released %d times, want 1", *released)
	}
}

// TestStagedWithdrawNotTakenBack: a published OUT that cannot be renamed
// back (a mount point: EBUSY) stays published: Withdraw's error is a
// *NotTakenBackError, Discard leaves OUT whole and releases the lock once.
func TestStagedWithdrawNotTakenBack(t *testing.T) {
	s, _, out, released := stage(t, 0)
	if err := s.Publish(nil); err != nil {
		t.Fatal(err)
	}
	pin(t, out)
	err := s.Withdraw()
	var left *NotTakenBackError
	if !errors.As(err, &left) || left.Out != out {
		t.Errorf("Withdraw of an OUT that cannot be renamed back: %v, want a *NotTakenBackError naming %s", err, out)
	}
	s.Discard()
	if got := entries(t, out); got != "f" {
		t.Errorf("out holds %q, want f (published, left)", got)
	}
	if *released != 1 {
		t.Errorf("the lock was released %d times, want 1", *released)
	}
}

// pin bind-mounts dir on itself until the test ends: a mount point cannot
// be renamed (EBUSY).
func pin(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		hint := "cannot bind-mount (" + err.Error() + "): this test needs root"
		if os.Getenv("CI") == "true" {
			t.Fatal(hint + " (CI=true: a missing dependency fails)")
		}
		t.Skip(hint)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}
