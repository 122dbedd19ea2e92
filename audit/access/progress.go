package access

import (
	"context"
	"io"

	"github.com/custos-mcp/custos/audit/bundle"
)

// Progress is how far an operation has come: Done of Total units of Unit.
// It carries counts only, never record contents, and is reported only
// after the access record is durable (RunProgress).
type Progress struct {
	Done  int64  `json:"done"`
	Total int64  `json:"total"` // never less than Done; the last report has Total == Done
	Unit  string `json:"unit"`  // UnitRecords or UnitBytes
}

// Units of Progress.
const (
	// UnitRecords: verify (records walked, of the head when it began;
	// the walk goes on past it to the log's end), export (records read
	// of the view 1..N), bundle (records written of its range).
	UnitRecords = "records"
	// Compliance counts in records too: those of its three passes, one
	// after the other (the whole log verified, of the head when it began;
	// records 1..N scanned for retention; the bundle's records written,
	// counted as N until its range is known).
	// UnitBytes: backup (bytes of the archive sent, of an estimate made
	// from the sizes of the files it copies when it began, archived
	// segments included: backup.EstimateSize).
	UnitBytes = "bytes"
)

// meter reports an operation's progress to fn: at most about once per
// thousandth of the total, and once at the end (finish). A walk of the log
// calls set after each chunk, between read transactions, which is also
// where a paced operation rests (pace; Service.Pace). A nil *meter (no
// progress asked for, no pacing) does nothing.
type meter struct {
	fn    func(Progress) // nil: no progress asked for (pacing only)
	pace  *pacer
	unit  string
	total int64
	every int64
	last  int64 // Done of the last report; -1: none yet
	base  int64 // the units of the passes already done (pass)
}

func newMeter(fn func(Progress), unit string, total int64) *meter {
	return newPacedMeter(fn, nil, unit, total)
}

// newPacedMeter is newMeter for a walk of the log that rests at each set
// as pace says (nil: no pacing).
func newPacedMeter(fn func(Progress), pace *pacer, unit string, total int64) *meter {
	if fn == nil && pace == nil {
		return nil
	}
	return &meter{fn: fn, pace: pace, unit: unit, total: max(total, 0), every: max(1, total/1000), last: -1}
}

// walkMeter is the meter of one of s's record walks run under ctx: it
// reports to fn and rests as s's pacing says (Service.Pace).
func (s *Service) walkMeter(ctx context.Context, fn func(Progress), total int64) *meter {
	return newPacedMeter(fn, newPacer(ctx, s.budget, s.nowFunc), UnitRecords, total)
}

// set reports done (of the current pass) if it moved on by a thousandth
// of the total since the last report.
func (m *meter) set(done int64) {
	if m == nil {
		return
	}
	m.pace.rest()
	done += m.base
	if m.last >= 0 && done-m.last < m.every {
		return
	}
	m.report(done)
}

// finish reports the end: done (of the last pass) of done.
func (m *meter) finish(done int64) {
	if m == nil {
		return
	}
	done += m.base
	m.total = done
	m.report(done)
}

// pass ends one pass of an operation made of several, which counted done
// units; rest is the units of the passes still to come (an estimate the
// next pass may correct). It reports nothing: the next set or finish
// counts on from the end of this pass.
func (m *meter) pass(done, rest int64) {
	if m == nil {
		return
	}
	m.base += done
	m.total = m.base + max(rest, 0)
	m.every = max(1, m.total/1000)
}

func (m *meter) report(done int64) {
	m.total = max(m.total, done)
	m.last = done
	if m.fn != nil {
		m.fn(Progress{Done: done, Total: m.total, Unit: m.unit})
	}
}

// meteredView is a View whose record walks (bundle.Write reads its range
// once, in order) report how many of the records from..to were read. It
// reports between reads of the log, never inside one: it walks a range in
// parts of meteredChunk records, each read by View.Records in its own read
// transactions, and reports after each part. Over the admin socket a
// report is a frame written to the caller, which waits for a caller that
// stopped reading (up to the stall limit); inside a read transaction that
// would keep bbolt from remapping the log and stop every append.
type meteredView struct {
	View
	m    *meter
	from uint64
}

// meteredChunk is the number of records a meteredView reads between two
// reports.
const meteredChunk = 1024

func (v meteredView) Records(ctx context.Context, from, to uint64, fn func(seq uint64, canonical []byte) error) error {
	if to < from || to > v.n {
		// View.Records refuses the range before reading any of it, and
		// names it; a walk in parts would read the first parts first.
		return v.View.Records(ctx, from, to, fn)
	}
	for lo := from; ; lo += meteredChunk {
		hi := to
		if to-lo >= meteredChunk {
			hi = lo + meteredChunk - 1
		}
		if err := v.View.Records(ctx, lo, hi, fn); err != nil {
			return err
		}
		if hi >= v.from {
			v.m.set(int64(hi - v.from + 1))
		}
		if hi == to {
			return nil
		}
	}
}

var _ bundle.Source = meteredView{}

// countingWriter counts the bytes written through it into a meter.
type countingWriter struct {
	w io.Writer
	m *meter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.m.set(c.n)
	return n, err
}
