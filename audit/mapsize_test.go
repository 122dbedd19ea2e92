package audit

import (
	"strconv"
	"testing"
)

func TestLiveMapSize(t *testing.T) {
	if strconv.IntSize < 64 {
		if got := liveMapSize(100 << 30); got != 0 {
			t.Fatalf("32-bit: liveMapSize = %d, want 0 (bbolt's default)", got)
		}
		return
	}
	for _, c := range []struct {
		fs   int64
		want int
	}{
		{0, 0},       // unknown: bbolt's default
		{-1, 0},      // unknown
		{1, 1 << 30}, // at least a GiB
		{1 << 30, 1 << 30},
		{1<<30 + 1, 2 << 30},
		{252 << 30, 252 << 30},
		{252<<30 + 4096, 253 << 30},
		{1 << 50, 1 << 46}, // capped under bbolt's largest mapping
	} {
		if got := liveMapSize(c.fs); got != c.want {
			t.Errorf("liveMapSize(%d) = %d, want %d", c.fs, got, c.want)
		}
	}
}
