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
		want int64 // int64: the cases do not fit a 32-bit int, and the file must compile there
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
		if got := int64(liveMapSize(c.fs)); got != c.want {
			t.Errorf("liveMapSize(%d) = %d, want %d", c.fs, got, c.want)
		}
	}
}

// TestLiveMapSizeUnderBboltsLargestMapping: on mips64 and mips64le bbolt
// maps at most 512 GiB (bolt_mips64x.go); a live segment on a larger file
// system reserved its size (capped at 64 TiB only), and bolt.Open failed
// with 'mmap too large', which is not ENOMEM: the log did not open.
func TestLiveMapSizeUnderBboltsLargestMapping(t *testing.T) {
	for _, c := range []struct {
		goarch string
		fs     int64
		want   int64
	}{
		{"mips64le", 1 << 40, 0x8000000000},
		{"mips64", 1 << 50, 0x8000000000},
		{"mips64le", 100 << 30, 100 << 30},
		{"amd64", 1 << 40, 1 << 40},
		{"arm64", 1 << 50, 1 << 46},
	} {
		if got := liveMapSizeOn(c.goarch, c.fs); got != c.want {
			t.Errorf("liveMapSizeOn(%s, %d) = %d, want %d", c.goarch, c.fs, got, c.want)
		}
	}
}
