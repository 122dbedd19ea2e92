//go:build linux

package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReleaseBoundsMapping holds what release is for: the catalog's
// mapping grows in the resident set by at most releaseBudget and what one
// batch faults in before release drops it. A batch's random lookups fault
// in up to 64 KiB each (the kernel's fault-around): about 20 MiB were
// seen here at a budget of 0 (the release before 2026-12-07) as at 2 MiB.
// With a budget of 2 MiB, an import of 16,000 entries (a catalog of about
// 57 MiB) is sampled every 2 ms; a release that never dropped the mapping
// would let it grow by the catalog.
func TestReleaseBoundsMapping(t *testing.T) {
	defer func(b int64) { releaseBudget = b }(releaseBudget)
	releaseBudget = 2 << 20
	namer := testNamer(t, "general-hospital")
	// A first import faults in the code an import runs (file-backed too).
	if _, err := ImportEntriesStaged(context.Background(), filepath.Join(t.TempDir(), "warm.db"), syntheticEntries(2000), EntryOptions{Namer: namer}, Options{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.db")
	base := residentFileBytes()
	if base < 0 {
		t.Fatal("residentFileBytes: /proc/self/statm not read")
	}
	var peak int64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, residentFileBytes())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	rep, err := ImportEntriesStaged(context.Background(), path, syntheticEntries(16000), EntryOptions{Namer: namer}, Options{})
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	grown := peak - base
	t.Logf("catalog %.1f MiB, resident file-backed bytes grew by at most %.1f MiB (budget %.1f MiB), report %+v",
		float64(size)/(1<<20), float64(grown)/(1<<20), float64(releaseBudget)/(1<<20), rep)
	if limit := releaseBudget + 24<<20; grown > limit || size < 2*limit {
		t.Errorf("the mapping grew by %d bytes, limit %d (budget and a batch); catalog %d bytes (must be over 2 x the limit for the test to mean something)", grown, limit, size)
	}
}
