package backup

import (
	"context"
	"io"
)

// Progress is how far one step of a backup's verification or of a restore
// has come: Done of Total units, bytes or (Records) audit records. It
// carries counts only. A step's last report has Done == Total when the
// step succeeds; Total is never less than Done.
type Progress struct {
	Step    string `json:"step"` // one of the Step constants
	Done    int64  `json:"done"`
	Total   int64  `json:"total"`
	Records bool   `json:"records,omitempty"`
}

// Steps of Progress, in the order they run.
const (
	StepHash   = "checking the files"        // every file against the manifest (bytes)
	StepVerify = "verifying the audit copy"  // every record of the audit copy (records)
	StepCopy   = "copying"                   // restore: the files into the staged directory (bytes)
	StepCheck  = "checking the restored log" // restore: serve's startup checks (records)
)

// stepMeter reports one step's progress to fn: at most about once per
// thousandth of the total, and at the end. A nil *stepMeter (no progress
// asked for) does nothing.
type stepMeter struct {
	fn       func(Progress)
	p        Progress
	every    int64
	reported bool
}

func newStep(fn func(Progress), step string, total int64, records bool) *stepMeter {
	if fn == nil {
		return nil
	}
	return &stepMeter{fn: fn, p: Progress{Step: step, Total: max(total, 0), Records: records}, every: max(1, total/1000)}
}

func (m *stepMeter) add(n int64) {
	if m == nil {
		return
	}
	last := m.p.Done
	m.p.Done += n
	if !m.reported || m.p.Done/m.every != last/m.every {
		m.report()
	}
}

// finish reports the step's end: Done of Done.
func (m *stepMeter) finish() {
	if m == nil {
		return
	}
	m.p.Total = m.p.Done
	m.report()
}

func (m *stepMeter) report() {
	m.reported = true
	m.p.Total = max(m.p.Total, m.p.Done)
	m.fn(m.p)
}

// pace is an audit.VerifyFilePaced pace counting records into m (nil: no
// pace).
func (m *stepMeter) pace() func(context.Context, int) error {
	if m == nil {
		return nil
	}
	return func(_ context.Context, n int) error { m.add(int64(n)); return nil }
}

// reader counts the bytes read through r into m.
func (m *stepMeter) reader(r io.Reader) io.Reader {
	if m == nil {
		return r
	}
	return meteredReader{r, m}
}

type meteredReader struct {
	r io.Reader
	m *stepMeter
}

func (r meteredReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.m.add(int64(n))
	return n, err
}
