package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/custos-mcp/custos/internal/fsspace"
)

// Defaults of DiskOptions.
const (
	DefaultDiskWatermark = 1 << 30   // 1 GiB
	DefaultDiskReserve   = 256 << 20 // 256 MiB
	DefaultDiskInterval  = 5 * time.Second
)

// DiskOptions configure a DiskWatch. Zero fields take the defaults.
type DiskOptions struct {
	// Dir is a directory on the volume watched (the audit log's).
	Dir string
	// Watermark: below this many free bytes the volume is low: the
	// readiness check fails ("audit volume low") and
	// custos_audit_volume_low is 1, an alert well before the volume is
	// full. Default DefaultDiskWatermark.
	Watermark uint64
	// Reserve: below this many free bytes (at most Watermark) the volume
	// is in its reserve: InReserve reports true, and the server refuses new
	// requests so that what is left holds the records that must be written
	// (those refusals, aggregated; policy loads; the shutdown checkpoint).
	// Default DefaultDiskReserve, or Watermark if that is smaller.
	Reserve uint64
	// Interval between samples of Run. Default DefaultDiskInterval.
	Interval time.Duration
	// Metrics, if not nil, receives custos_audit_disk_free_bytes and
	// custos_audit_volume_low at every sample.
	Metrics *Metrics
	// Logger receives a line when the state changes; nil discards.
	Logger *slog.Logger
	// Free returns the bytes available on the volume holding dir; nil
	// means statfs(2) (f_bavail × f_bsize: what an unprivileged writer
	// may use). Tests set it.
	Free func(dir string) (uint64, error)
}

// DiskWatch samples the free space of the audit log's volume
// periodically (never per request) and says whether it is low or in its
// reserve. A sample that fails counts as in the reserve (fail closed). It
// is safe for concurrent use.
type DiskWatch struct {
	o DiskOptions

	mu    sync.RWMutex
	free  uint64
	state diskState
}

type diskState int

const (
	diskOK diskState = iota
	diskLow
	diskReserve
)

// ErrDiskOptions is returned by NewDiskWatch for options that cannot work.
var ErrDiskOptions = errors.New("ops: invalid disk watch options")

// NewDiskWatch takes a first sample of o.Dir's volume and returns the
// watch; call Run to keep sampling. It fails if the volume cannot be
// sampled at all.
func NewDiskWatch(o DiskOptions) (*DiskWatch, error) {
	if o.Dir == "" {
		return nil, fmt.Errorf("%w: no directory", ErrDiskOptions)
	}
	if o.Watermark == 0 {
		o.Watermark = DefaultDiskWatermark
	}
	if o.Reserve == 0 {
		o.Reserve = min(DefaultDiskReserve, o.Watermark)
	}
	if o.Reserve > o.Watermark {
		return nil, fmt.Errorf("%w: the reserve (%d bytes) exceeds the low watermark (%d bytes)", ErrDiskOptions, o.Reserve, o.Watermark)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultDiskInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Free == nil {
		o.Free = statfsFree
	}
	d := &DiskWatch{o: o}
	if err := d.Sample(); err != nil {
		return nil, err
	}
	return d, nil
}

// statfsFree is the space available to unprivileged writers on the
// volume holding dir (fsspace.Free: f_bavail in fragments).
func statfsFree(dir string) (uint64, error) {
	n, err := fsspace.Free(dir)
	if err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// Sample reads the free space now and updates the state and the metrics.
func (d *DiskWatch) Sample() error {
	free, err := d.o.Free(d.o.Dir)
	state := diskOK
	switch {
	case err != nil:
		state = diskReserve
	case free < d.o.Reserve:
		state = diskReserve
	case free < d.o.Watermark:
		state = diskLow
	}
	d.mu.Lock()
	prev := d.state
	d.free, d.state = free, state
	d.mu.Unlock()
	d.o.Metrics.SetDisk(free, state != diskOK)
	switch {
	case err != nil:
		d.o.Logger.Error("cannot read the free space of the audit volume; refusing new requests until it can be read", "err", err)
	case state == prev:
	case state == diskReserve:
		d.o.Logger.Error("AUDIT VOLUME IN RESERVE: new requests are refused (disk_low) so that refusals, policy loads and the shutdown checkpoint still fit; free space now", "free_bytes", free, "reserve_bytes", d.o.Reserve)
	case state == diskLow:
		d.o.Logger.Warn("audit volume low: /readyz is not ready; free space now", "free_bytes", free, "watermark_bytes", d.o.Watermark)
	default:
		d.o.Logger.Info("audit volume no longer low", "free_bytes", free)
	}
	return err
}

// Run samples every Interval until ctx is done.
func (d *DiskWatch) Run(ctx context.Context) {
	t := time.NewTicker(d.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = d.Sample() // logged and counted as in the reserve
		}
	}
}

// Free is the free space at the last sample.
func (d *DiskWatch) Free() uint64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.free
}

// Low reports whether free space was below the watermark (or could not be
// read) at the last sample.
func (d *DiskWatch) Low() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.state != diskOK
}

// InReserve reports whether free space was below the reserve (or could
// not be read) at the last sample.
func (d *DiskWatch) InReserve() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.state == diskReserve
}

// Check is the readiness check of the volume (Health.AddCheck): it fails
// with "audit volume low" below the watermark and "audit volume in
// reserve: requests refused" below the reserve.
func (d *DiskWatch) Check(context.Context) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	switch d.state {
	case diskReserve:
		return NewSafeError("audit volume in reserve: requests refused")
	case diskLow:
		return NewSafeError("audit volume low")
	}
	return nil
}

// Room samples the volume now and returns nil while need more bytes
// written to it would leave its free space at or above the low watermark;
// otherwise, or when it cannot be read, an error naming the free space,
// need and the watermark. Work that fills the audit log's volume on its
// own (a FHIR sync's staging and import) asks before and as it goes, and
// stops before it takes the room the audit records need.
func (d *DiskWatch) Room(need uint64) error {
	if err := d.Sample(); err != nil {
		return fmt.Errorf("the free space of the audit volume (%s) cannot be read: %w", d.o.Dir, err)
	}
	free := d.Free()
	switch {
	case need == 0 && free < d.o.Watermark:
		return fmt.Errorf("the audit volume (%s) has %d bytes free, below its low watermark of %d bytes", d.o.Dir, free, d.o.Watermark)
	case need > 0 && (free < d.o.Watermark || free-d.o.Watermark < need):
		return fmt.Errorf("the audit volume (%s) has %d bytes free: %d more would leave less than its low watermark of %d bytes", d.o.Dir, free, need, d.o.Watermark)
	}
	return nil
}

// Spare samples the volume now and returns nil while need more bytes
// written to it would leave its free space at or above the reserve;
// otherwise, or when it cannot be read, an error naming the free space,
// the reserve and need. Work that takes room on the audit log's volume
// only for a while (an export bundle assembled there) asks before each
// write, and stops before it takes the reserve kept for the records that
// must be written (refusals, policy loads, the shutdown checkpoint).
func (d *DiskWatch) Spare(need uint64) error {
	if err := d.Sample(); err != nil {
		return fmt.Errorf("the free space of the audit volume (%s) cannot be read: %w", d.o.Dir, err)
	}
	free := d.Free()
	if free < d.o.Reserve || free-d.o.Reserve < need {
		return fmt.Errorf("the audit volume (%s) has %d bytes free and keeps %d in reserve (audit.disk_reserve): %d more would take it into the reserve", d.o.Dir, free, d.o.Reserve, need)
	}
	return nil
}
