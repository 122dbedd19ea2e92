package main

import (
	"os"
	"path/filepath"
	"slices"
	"time"
)

// fsyncProbe is what the disk under the data directory does at one moment:
// the latency of appending 4 KiB to a file and syncing it, which allocates
// a block and commits the file system's journal, like an audit commit
// (bbolt writes copy-on-write pages into a file it grew sparsely, then
// fdatasyncs, twice). On a shared machine other work's I/O shows up here, and in
// custos's latency, which the bare server does not have.
type fsyncProbe struct {
	P50ms float64 `json:"p50_ms"`
	MaxMs float64 `json:"max_ms"`
	N     int     `json:"n"`
}

// probeFsync appends to and syncs a scratch file in dir n times.
func probeFsync(dir string, n int) (fsyncProbe, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return fsyncProbe{}, err
	}
	defer os.Remove(filepath.Clean(f.Name()))
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i)*4096); err != nil {
			return fsyncProbe{}, err
		}
		if err := f.Sync(); err != nil {
			return fsyncProbe{}, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return fsyncProbe{P50ms: ms(quantile(lat, 0.5)), MaxMs: ms(lat[len(lat)-1]), N: n}, nil
}
