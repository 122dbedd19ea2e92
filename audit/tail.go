package audit

import (
	"log/slog"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/internal/fsspace"
)

// The live segment's zero-filled tail.
//
// Every commit writes its new pages past the file's high-water mark (an
// append-only log frees little). bbolt extends a file with ftruncate, so
// those pages land in a hole: the commit's fdatasync must then allocate
// the blocks and write the file's block map too, not only the pages. A
// page written over a block that already holds data needs only its own
// write: measured on this project's machines, a bbolt-shaped commit (two
// pages and an fdatasync, then the meta page and an fdatasync) took 0.24–
// 0.27 ms over written zeros against 0.30–0.31 ms over a hole, and a
// serial audit append less under a shared disk (docs/benchmarks.md,
// "Issue 17, nineteenth step"). Databases' write-ahead logs are
// zero-filled ahead for the same reason.
//
// The batcher therefore keeps the live segment's next tailAhead bytes
// past the high-water mark written with zeros and synced, refilled when
// fewer than tailLow remain. Invariants:
//
//   - Zeros are written only at or past the high-water mark of a write
//     transaction the tail holds itself (bbolt's writer lock): pages there
//     belong to no committed state and no other writer can allocate them
//     meanwhile. The transaction is rolled back: it writes nothing of
//     bbolt's, and the log's state, records and hashes are unchanged.
//   - The zeros go through bbolt's own file handle, so they land in the
//     file that handle names even after a seal renamed it; once the
//     segment is closed the handle refuses the write.
//   - It is an optimisation only, and never takes the last of a disk: it
//     is written only while the file system keeps tailReserve bytes free
//     beyond it (a seal's next segment, checkpoints and the catalog need
//     room too). A tail that cannot be written is cut back to the file's
//     size before it, logged and retried later (tailRetry); appends go on
//     as bbolt would have made them, and fail as they would have failed.
//   - The tail is never counted: rolling by size, snapshots and backups go
//     by the high-water mark (tx.Size()), and a sealed segment is trimmed
//     to it (finishSealed).
const (
	tailAhead   = 2 << 20
	tailLow     = 1 << 20
	tailRetry   = time.Minute
	tailReserve = 64 << 20
)

// zeroTail is the live segment's zero-filled tail: the batcher's, used
// only by its committing goroutine.
type zeroTail struct {
	file   *os.File // bbolt's handle of the live segment's file
	log    *slog.Logger
	zeroed int64     // the file is written with zeros (or pages) up to here
	retry  time.Time // after a failure, no new try before this
}

// zeros is what the tail writes, in pieces of its size.
var zeros = make([]byte, 256<<10)

// extend refills t after a commit whose transaction began at high-water
// mark hwm, if fewer than tailLow bytes of zeros remain past it. A nil t
// (no file handle: a test's batcher) does nothing.
func (t *zeroTail) extend(db *bolt.DB, hwm int64) {
	if t == nil || t.zeroed-hwm >= tailLow || time.Now().Before(t.retry) {
		return
	}
	tx, err := db.Begin(true)
	if err != nil {
		return // closed (sealed or the log closed): nothing to extend
	}
	defer tx.Rollback()
	from := max(t.zeroed, tx.Size())
	to := tx.Size() + tailAhead
	if free, err := fsspace.FreeOf(t.file); err != nil || free < to-from+tailReserve {
		t.retry = time.Now().Add(tailRetry)
		return // little room left (or unknown): bbolt grows the file as before
	}
	fi, err := t.file.Stat()
	if err == nil {
		err = writeZeros(t.file, from, to)
	}
	if err != nil {
		if fi != nil && fi.Size() < to {
			t.file.Truncate(max(from, fi.Size())) // give back what was added: past the mark, nothing of bbolt's
		}
		t.retry = time.Now().Add(tailRetry)
		t.log.Warn("audit: the live segment's zero-filled tail could not be written; commits write into newly allocated blocks until it can", "err", err, "retry_in", tailRetry)
		return
	}
	t.zeroed = to
}

// writeZeros writes zeros to f over [from, to) and syncs it.
func writeZeros(f *os.File, from, to int64) error {
	for off := from; off < to; {
		n := min(int64(len(zeros)), to-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	return f.Sync()
}
