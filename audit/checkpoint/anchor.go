package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/internal/durable"
)

// FileName is the name of the anchor file inside an anchor directory.
const FileName = "checkpoints.jsonl"

// MaxLineSize bounds one anchor line. A custos line is well under 1 KiB.
const MaxLineSize = 64 << 10

// Entry is one anchored checkpoint: one line of an anchor file.
type Entry struct {
	Size int64
	Root tlog.Hash
	Note []byte    // the full signed note
	Time time.Time // when it was anchored (UTC)
	// Rollback is the acknowledged rollback this line carries, if any
	// (see Rollback and Current); its signature is checked only by
	// CheckAgainst.
	Rollback *Rollback

	// Where the entry was read from (not part of the line): the file path,
	// 1-based line number (0 if unknown) and byte offset of the line.
	Source string
	Line   int
	Offset int64
}

// Location describes where e was read from, for error messages.
func (e Entry) Location() string {
	if e.Source == "" {
		return "an anchored checkpoint"
	}
	if e.Line > 0 {
		return fmt.Sprintf("anchor %s line %d", e.Source, e.Line)
	}
	return fmt.Sprintf("anchor %s byte offset %d", e.Source, e.Offset)
}

// line is the JSON form of an Entry; field order is the file format.
type line struct {
	Size *int64     `json:"size"`
	Root *tlog.Hash `json:"root"`
	Note *string    `json:"note"`
	Time *string    `json:"time"`
	// Rollback is the signed note of a rollback acknowledgement, on the
	// line of the checkpoint that includes the restore's record.
	Rollback *string `json:"rollback,omitempty"`
}

// FormatLine returns e's anchor line, including the final '\n':
//
//	{"size":N,"root":"<base64>","note":"<signed note>","time":"<RFC 3339 nano UTC>"}
//
// with a fifth field "rollback" (its signed note) when e carries a
// Rollback.
func FormatLine(e Entry) ([]byte, error) {
	t := e.Time.UTC().Format(time.RFC3339Nano)
	n := string(e.Note)
	l := line{Size: &e.Size, Root: &e.Root, Note: &n, Time: &t}
	if e.Rollback != nil {
		rb := string(e.Rollback.Note)
		l.Rollback = &rb
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		return nil, err
	}
	return b.Bytes(), nil // Encode appends '\n'
}

// ParseLine parses one anchor line (with or without its final '\n'). It
// requires exactly the four fields, a non-negative size, a signed note
// whose body (not its signature: that needs verifiers, see Open) parses as
// a checkpoint with the same size and root, and an RFC 3339 time; an
// optional "rollback" must be a rollback acknowledgement (unverified) of
// that same tree.
func ParseLine(b []byte) (Entry, error) {
	b = bytes.TrimSuffix(b, []byte("\n"))
	var l line
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Entry{}, fmt.Errorf("%w: anchor line is not valid JSON", ErrBadCheckpoint)
	}
	if dec.More() || dec.InputOffset() != int64(len(b)) {
		return Entry{}, fmt.Errorf("%w: trailing data after anchor line", ErrBadCheckpoint)
	}
	if l.Size == nil || l.Root == nil || l.Note == nil || l.Time == nil {
		return Entry{}, fmt.Errorf("%w: anchor line lacks a field", ErrBadCheckpoint)
	}
	if *l.Size < 0 {
		return Entry{}, fmt.Errorf("%w: negative size", ErrBadCheckpoint)
	}
	t, err := time.Parse(time.RFC3339Nano, *l.Time)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: bad time", ErrBadCheckpoint)
	}
	c, err := noteBody([]byte(*l.Note))
	if err != nil {
		return Entry{}, err
	}
	if c.Size != *l.Size || c.Root != *l.Root {
		return Entry{}, fmt.Errorf("%w: anchor line size/root differ from its note (%d %s vs %d %s)",
			ErrBadCheckpoint, *l.Size, *l.Root, c.Size, c.Root)
	}
	e := Entry{Size: *l.Size, Root: *l.Root, Note: []byte(*l.Note), Time: t.UTC()}
	if l.Rollback != nil {
		r, err := rollbackBody([]byte(*l.Rollback))
		if err != nil {
			return Entry{}, err
		}
		if r.To != e.Size || r.ToRoot != e.Root || r.Origin != c.Origin {
			return Entry{}, fmt.Errorf("%w: the acknowledgement is not of this line's checkpoint", ErrBadRollback)
		}
		e.Rollback = &r
	}
	return e, nil
}

// noteBody parses the checkpoint in a signed note without verifying it.
func noteBody(signed []byte) (Checkpoint, error) {
	i := bytes.LastIndex(signed, []byte("\n\n"))
	if i < 0 || !bytes.HasSuffix(signed, []byte("\n")) || i+2 == len(signed) {
		return Checkpoint{}, fmt.Errorf("%w: not a signed note", ErrBadCheckpoint)
	}
	return Parse(signed[:i+1])
}

// ReadEntries reads anchor lines from r; source names it in errors and in
// the entries. It returns the entries read before the first problem and
// the problem: a *TornError if the last line is incomplete (no '\n') or
// unparsable, a *CorruptLineError for an invalid earlier line (including
// an empty line).
func ReadEntries(r io.Reader, source string) ([]Entry, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var entries []Entry
	var off int64
	for n := 1; ; n++ {
		b, err := readLine(br)
		if err == io.EOF && len(b) == 0 {
			return entries, nil
		}
		if err != nil && err != io.EOF {
			if errors.Is(err, errLongLine) {
				return entries, &CorruptLineError{Path: source, Line: n, Offset: off, Reason: "line longer than MaxLineSize"}
			}
			return entries, fmt.Errorf("checkpoint: reading %s: %w", source, err)
		}
		if err == io.EOF { // data without final '\n'
			return entries, &TornError{Path: source, Offset: off, Line: n, Reason: "no trailing newline"}
		}
		e, perr := ParseLine(b)
		if perr != nil {
			if _, err := br.Peek(1); err == io.EOF {
				return entries, &TornError{Path: source, Offset: off, Line: n, Reason: perr.Error()}
			}
			return entries, &CorruptLineError{Path: source, Line: n, Offset: off, Reason: perr.Error()}
		}
		e.Source, e.Line, e.Offset = source, n, off
		entries = append(entries, e)
		off += int64(len(b))
	}
}

var errLongLine = errors.New("line too long")

// readLine returns the next line including '\n', or the trailing bytes and
// io.EOF.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		b, err := br.ReadSlice('\n')
		out = append(out, b...)
		if len(out) > MaxLineSize {
			return nil, errLongLine
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return out, err
	}
}

// Anchor is an append-only file of signed checkpoints, Dir/checkpoints.jsonl
// (FileName), one line per checkpoint (FormatLine). The same format serves
// the local copy in the data directory and the external anchor. Dir must
// exist: Anchor never creates it, so an unmounted external volume is an
// error rather than a silent new directory. Methods are safe for
// concurrent use within a process; one process writes an anchor at a time
// (the one holding the audit log's lock). An Anchor must not be copied
// after first use.
type Anchor struct {
	Dir string

	mu sync.Mutex
}

// Path returns the anchor file's path.
func (a *Anchor) Path() string { return filepath.Join(a.Dir, FileName) }

// Append writes one line for ckpt and its signed note, anchored at time t,
// and returns once the line is fsynced (and the directory too, when the
// file was created). It checks that the note's body is ckpt (not the
// signature). It refuses to append after a torn last line (*TornError).
// A write that fails part way (ENOSPC on a full disk), or an fsync that
// fails, is cut back, so the file ends with the line before (see the
// package invariants).
func (a *Anchor) Append(ctx context.Context, signedNote []byte, ckpt Checkpoint, t time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := noteBody(signedNote)
	if err != nil {
		return err
	}
	if c != ckpt {
		return fmt.Errorf("%w: signed note does not hold the checkpoint being anchored", ErrBadCheckpoint)
	}
	return a.appendLine(Entry{Size: ckpt.Size, Root: ckpt.Root, Note: signedNote, Time: t})
}

// AppendRollback anchors the checkpoint e (of the restored log, including
// the restore's own record) with the rollback acknowledgement it carries
// (e.Rollback, signed), like Append. It checks that the line parses back
// (the acknowledgement is of e's tree), not the signatures.
func (a *Anchor) AppendRollback(ctx context.Context, e Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.Rollback == nil {
		return fmt.Errorf("%w: no acknowledgement", ErrBadRollback)
	}
	b, err := FormatLine(e)
	if err != nil {
		return err
	}
	if _, err := ParseLine(b); err != nil {
		return err
	}
	return a.appendLine(e)
}

// appendLine appends e's line (FormatLine) and fsyncs it.
func (a *Anchor) appendLine(e Entry) error {
	b, err := FormatLine(e)
	if err != nil {
		return err
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	path := a.Path()
	created := true
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		created = false
		f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o600)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: anchor: %w", err)
	}
	defer f.Close()
	var before int64 // the file's size before this line
	if !created {
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("checkpoint: anchor: %w", err)
		}
		before = fi.Size()
		if size := before; size > 0 {
			var last [1]byte
			if _, err := f.ReadAt(last[:], size-1); err != nil {
				return fmt.Errorf("checkpoint: anchor: %w", err)
			}
			if last[0] != '\n' {
				start, err := lineStart(f, size-1)
				if err != nil {
					return fmt.Errorf("checkpoint: anchor: %w", err)
				}
				return &TornError{Path: path, Offset: start, Reason: "no trailing newline"}
			}
		}
	}
	n, err := f.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		// A write that stopped part way (the disk filled up) must not
		// leave a torn line behind: it would stop every later Append,
		// and every start, until an operator cut it off by hand.
		if cerr := undoAppend(f, created, before, int64(n)); cerr != nil {
			return fmt.Errorf("checkpoint: anchor %s: write: %w; its partial line could not be removed: %v", path, err, cerr)
		}
		return fmt.Errorf("checkpoint: anchor %s: write: %w", path, err)
	}
	if err := syncFile(f, before); err != nil {
		// Not reported written either: on a network file system
		// (NFS, SMB) write only fills a cache and a full volume shows
		// here, with the server holding all, part or none of the line.
		if cerr := undoAppend(f, created, before, int64(len(b))); cerr != nil {
			return fmt.Errorf("checkpoint: anchor %s: fsync: %w; its line could not be removed: %v", path, err, cerr)
		}
		return fmt.Errorf("checkpoint: anchor %s: fsync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("checkpoint: anchor %s: close: %w", path, err)
	}
	if created {
		if err := syncDir(a.Dir); err != nil {
			// Not reported written: remove the file, so that the next
			// Append creates it again and fsyncs the directory (appended
			// to as it is, it would never be).
			if rerr := os.Remove(path); rerr != nil {
				return fmt.Errorf("checkpoint: anchor %s: fsync directory: %w; the file could not be removed: %v", a.Dir, err, rerr)
			}
			return fmt.Errorf("checkpoint: anchor %s: fsync directory: %w", a.Dir, err)
		}
	}
	return nil
}

// syncDir fsyncs a directory; a test replaces it to make it fail.
var syncDir = durable.SyncDir

// syncLine, when a test sets it, replaces the fsync of an appended line
// (whose file held before bytes before it): no local file system fails an
// fsync on demand.
var syncLine func(f *os.File, before int64) error

func syncFile(f *os.File, before int64) error {
	if syncLine != nil {
		return syncLine(f, before)
	}
	return f.Sync()
}

// undoAppend removes what a failed write or fsync of at most n bytes left
// in f, which held before bytes: the file itself if this Append created it
// (so that the next one creates it again and fsyncs its directory), else
// those bytes, by truncating f to before and fsyncing it. It does so only
// if f holds between before and before+n bytes (nothing else was appended
// meanwhile; after a failed fsync a network file system may hold any part
// of the line). The bytes were never reported written, so no checkpoint
// is lost.
func undoAppend(f *os.File, created bool, before, n int64) error {
	if !created && n == 0 {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < before || fi.Size() > before+n {
		return fmt.Errorf("the file holds %d bytes, not the %d before the write plus at most the %d it wrote: left as it is", fi.Size(), before, n)
	}
	if created {
		return os.Remove(f.Name())
	}
	if err := f.Truncate(before); err != nil {
		return err
	}
	return f.Sync()
}

// lineStart returns the offset just after the last '\n' strictly before
// end (0 if none).
func lineStart(f *os.File, end int64) (int64, error) {
	const chunk = 4096
	buf := make([]byte, chunk)
	for end > 0 {
		start := max(0, end-chunk)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// All reads and parses the whole anchor file (see ReadEntries for errors).
// A missing file means no checkpoint yet: (nil, nil). A missing Dir is an
// error (fs.ErrNotExist): an external anchor that is not mounted must not
// look empty.
func (a *Anchor) All() ([]Entry, error) {
	f, err := a.open()
	if f == nil || err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadEntries(f, a.Path())
}

func (a *Anchor) open() (*os.File, error) {
	if _, err := os.Stat(a.Dir); err != nil {
		return nil, fmt.Errorf("checkpoint: anchor directory: %w", err)
	}
	f, err := os.Open(a.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: anchor: %w", err)
	}
	return f, nil
}

// Latest returns the last entry of the anchor file, reading only its tail
// (Entry.Line is 0). ok is false when there is none. If the last line is
// torn it returns the entry before it (if any) and a *TornError; if that
// one is invalid too, a *CorruptLineError. Only All checks the rest of the
// file.
func (a *Anchor) Latest() (e Entry, ok bool, err error) {
	f, err := a.open()
	if f == nil || err != nil {
		return Entry{}, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Entry{}, false, fmt.Errorf("checkpoint: anchor: %w", err)
	}
	path, size := a.Path(), fi.Size()
	if size == 0 {
		return Entry{}, false, nil
	}
	for window := int64(8 << 10); ; window *= 2 {
		start := max(0, size-window)
		buf := make([]byte, size-start)
		if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
			return Entry{}, false, fmt.Errorf("checkpoint: anchor: %w", err)
		}
		// Split into segments; with start > 0 the first one may be partial.
		var segs [][]byte
		var offs []int64
		for pos := 0; pos < len(buf); {
			i := bytes.IndexByte(buf[pos:], '\n')
			end := len(buf)
			if i >= 0 {
				end = pos + i + 1
			}
			segs, offs = append(segs, buf[pos:end]), append(offs, start+int64(pos))
			pos = end
		}
		if start > 0 {
			segs, offs = segs[1:], offs[1:]
		}
		enough := start == 0 || len(segs) >= 2
		if !enough {
			if window > 2*MaxLineSize {
				return Entry{}, false, &CorruptLineError{Path: path, Offset: start, Reason: "line longer than MaxLineSize"}
			}
			continue
		}
		last := len(segs) - 1
		lastSeg := segs[last]
		var torn *TornError
		if lastSeg[len(lastSeg)-1] != '\n' {
			torn = &TornError{Path: path, Offset: offs[last], Reason: "no trailing newline"}
		} else if e, err := ParseLine(lastSeg); err != nil {
			torn = &TornError{Path: path, Offset: offs[last], Reason: err.Error()}
		} else {
			e.Source, e.Offset = path, offs[last]
			return e, true, nil
		}
		if last == 0 {
			if start == 0 {
				return Entry{}, false, torn
			}
			continue
		}
		e, err := ParseLine(segs[last-1])
		if err != nil {
			return Entry{}, false, &CorruptLineError{Path: path, Offset: offs[last-1], Reason: err.Error()}
		}
		e.Source, e.Offset = path, offs[last-1]
		return e, true, torn
	}
}
