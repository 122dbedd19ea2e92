package ops

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDiskWatchStates(t *testing.T) {
	free, ferr := uint64(10<<30), error(nil)
	m := New(nil)
	d, err := NewDiskWatch(DiskOptions{Dir: t.TempDir(), Watermark: 2 << 30, Reserve: 1 << 30, Metrics: m,
		Free: func(string) (uint64, error) { return free, ferr }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		free      uint64
		err       error
		low, resv bool
		check     string
	}{
		{"plenty", 10 << 30, nil, false, false, StatusOK},
		{"below the watermark", 2<<30 - 1, nil, true, false, "audit volume low"},
		{"below the reserve", 1<<30 - 1, nil, true, true, "audit volume in reserve: requests refused"},
		{"back", 3 << 30, nil, false, false, StatusOK},
		{"unreadable: fail closed", 10 << 30, errors.New("statfs: boom"), true, true, "audit volume in reserve: requests refused"},
	} {
		free, ferr = tc.free, tc.err
		if err := d.Sample(); (err != nil) != (tc.err != nil) {
			t.Fatalf("%s: Sample = %v", tc.name, err)
		}
		if d.Low() != tc.low || d.InReserve() != tc.resv || describe(d.Check(context.Background())) != tc.check {
			t.Errorf("%s: low %v reserve %v check %q", tc.name, d.Low(), d.InReserve(), describe(d.Check(context.Background())))
		}
		wantLow := 0.0
		if tc.low {
			wantLow = 1
		}
		if got := testutil.ToFloat64(m.volumeLow); got != wantLow {
			t.Errorf("%s: custos_audit_volume_low = %v", tc.name, got)
		}
		if got := testutil.ToFloat64(m.diskFree); tc.err == nil && got != float64(tc.free) {
			t.Errorf("%s: custos_audit_disk_free_bytes = %v", tc.name, got)
		}
	}
}

func TestDiskWatchOptions(t *testing.T) {
	if _, err := NewDiskWatch(DiskOptions{Dir: t.TempDir(), Watermark: 1 << 20, Reserve: 2 << 20}); !errors.Is(err, ErrDiskOptions) {
		t.Errorf("a reserve above the watermark: %v", err)
	}
	if _, err := NewDiskWatch(DiskOptions{}); !errors.Is(err, ErrDiskOptions) {
		t.Errorf("no directory: %v", err)
	}
	// The real statfs of a real directory.
	d, err := NewDiskWatch(DiskOptions{Dir: t.TempDir(), Watermark: 1, Reserve: 1})
	if err != nil || d.Free() == 0 || d.Low() {
		t.Fatalf("statfs of a temp dir: free %d low %v err %v", d.Free(), d.Low(), err)
	}
	if _, err := NewDiskWatch(DiskOptions{Dir: t.TempDir() + "/missing"}); err == nil {
		t.Error("a missing directory was sampled")
	}
}

// Room answers for the volume as it is now (a fresh sample, not the last
// one) and for what a caller is about to write on top of it.
func TestDiskWatchRoom(t *testing.T) {
	free, ferr := uint64(10<<30), error(nil)
	d, err := NewDiskWatch(DiskOptions{Dir: t.TempDir(), Watermark: 2 << 30, Reserve: 1 << 30,
		Free: func(string) (uint64, error) { return free, ferr }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		free, need uint64
		err        error
		want       string // "" for room
	}{
		{10 << 30, 0, nil, ""},
		{10 << 30, 8 << 30, nil, ""},
		{10 << 30, 8<<30 + 1, nil, "8589934593 more would leave less than its low watermark of 2147483648 bytes"},
		{2 << 30, 0, nil, ""},
		{2<<30 - 1, 0, nil, "below its low watermark of 2147483648 bytes"},
		{2<<30 - 1, 1, nil, "1 more would leave less than its low watermark"},
		{10 << 30, 0, errors.New("statfs: boom"), "cannot be read: statfs: boom"},
	} {
		free, ferr = tc.free, tc.err
		err := d.Room(tc.need)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("free %d, need %d (%v): %v, want %q", tc.free, tc.need, tc.err, err, tc.want)
		}
		// A fresh sample: the watch's state follows it.
		if got := d.Free(); tc.err == nil && got != tc.free {
			t.Errorf("free %d: the watch holds %d after Room", tc.free, got)
		}
	}
}

// Spare answers for the volume as it is now and keeps the reserve, not
// the watermark: work that holds room only for a while may go below the
// watermark (the alert) but never into the reserve.
func TestDiskWatchSpare(t *testing.T) {
	free, ferr := uint64(10<<30), error(nil)
	d, err := NewDiskWatch(DiskOptions{Dir: t.TempDir(), Watermark: 2 << 30, Reserve: 1 << 30,
		Free: func(string) (uint64, error) { return free, ferr }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		free, need uint64
		err        error
		want       string // "" for room
	}{
		{10 << 30, 9 << 30, nil, ""},
		{10 << 30, 9<<30 + 1, nil, "has 10737418240 bytes free and keeps 1073741824 in reserve (audit.disk_reserve): 9663676417 more would take it into the reserve"},
		{2<<30 - 1, 1 << 20, nil, ""}, // below the watermark, above the reserve
		{1 << 30, 0, nil, ""},
		{1 << 30, 1, nil, "1 more would take it into the reserve"},
		{1<<30 - 1, 0, nil, "has 1073741823 bytes free"},
		{10 << 30, 1, errors.New("statfs: boom"), "cannot be read: statfs: boom"},
	} {
		free, ferr = tc.free, tc.err
		err := d.Spare(tc.need)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("free %d, need %d (%v): %v, want %q", tc.free, tc.need, tc.err, err, tc.want)
		}
		if got := d.Free(); tc.err == nil && got != tc.free {
			t.Errorf("free %d: the watch holds %d after Spare", tc.free, got)
		}
	}
}
