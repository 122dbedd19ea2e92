package bundle

import (
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
)

// readMeter counts the bytes Verify reads and reports them, with a total
// made from the files' sizes, to fn. Reads are counted from any goroutine
// (records.jsonl is read by a goroutine of its own); fn is called only
// from the goroutine that calls report and finish (Verify's caller's).
// A nil *readMeter counts and reports nothing.
type readMeter struct {
	fn    func(done, total int64)
	read  atomic.Int64
	total int64
	last  int64 // done at the last report; -1 before the first
}

// begin sets the total: records.jsonl and every human-format file present
// (read while the records are compared), and every other file the
// manifest lists (hashed by checkDigests, the human-format files a second
// time). A file that cannot be stat'ed counts nothing.
func (m *readMeter) begin(dir string, man *Manifest) {
	if m == nil {
		return
	}
	size := func(name string) int64 {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode().IsRegular() {
			return st.Size()
		}
		return 0
	}
	total := size(FileRecords)
	for _, f := range Formats {
		total += size(f.FileName())
	}
	if man != nil {
		for name := range man.Files {
			if name != FileRecords && name != FileManifest && name == filepath.Base(name) {
				total += size(name)
			}
		}
	}
	m.total, m.last = total, -1
	m.report()
}

// reader returns r, its reads counted.
func (m *readMeter) reader(r io.Reader) io.Reader {
	if m == nil {
		return r
	}
	return countingReader{r: r, n: &m.read}
}

// report calls fn if a thousandth of the total was read since the last
// call (or none was made yet).
func (m *readMeter) report() {
	if m == nil {
		return
	}
	done := m.read.Load()
	if m.last >= 0 && done-m.last < max(1, m.total/1000) {
		return
	}
	m.last = done
	m.fn(done, max(m.total, done))
}

// finish reports the end: everything read, of itself.
func (m *readMeter) finish() {
	if m == nil {
		return
	}
	done := m.read.Load()
	m.total, m.last = done, done
	m.fn(done, done)
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
