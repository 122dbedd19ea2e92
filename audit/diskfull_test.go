package audit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/custos-mcp/custos/internal/tmpfstest"
)

// TestAppendOnAFullDisk appends to a log on a real file system that fills
// up, after a seal (the live segment's bbolt handle was created as
// audit.db.next and renamed): the appends that do not fit fail with
// ENOSPC, naming the live segment as it is called now (they named
// audit.db.next, a file no operator can find), leave no record behind,
// and once space is freed appends go on; the log verifies (mustOpenPath's
// cleanup).
func TestAppendOnAFullDisk(t *testing.T) {
	dir := tmpfstest.Mount(t, 1<<20)
	path := filepath.Join(dir, "audit.db")
	l := mustOpenPath(t, path, Options{})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := l.Append(ctx, sampleEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := l.Roll(ctx); err != nil || !ok {
		t.Fatalf("Roll = %v, %v", ok, err)
	}
	filler := tmpfstest.Fill(t, dir, 0)
	var err error
	// bbolt reuses the pages earlier commits freed: a few appends may
	// still fit.
	for i := 0; i < 1000 && err == nil; i++ {
		_, err = l.Append(ctx, sampleEntry(i))
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk = %v, want ENOSPC", err)
	}
	if msg := err.Error(); strings.Contains(msg, "audit.db.next") || !strings.Contains(msg, path) {
		t.Errorf("Append on a full disk: %q; want it to name the live segment %s", msg, path)
	}
	seq, _ := l.Head()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r, err := l.Append(ctx, sampleEntry(0))
	if err != nil {
		t.Fatalf("Append once space is free again: %v", err)
	}
	if r.Seq != seq+1 {
		t.Fatalf("Append once space is free again: seq %d, want %d (the head after the failed appends, plus one)", r.Seq, seq+1)
	}
}
