package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrClosed is returned by the methods of a Live catalog after Close. The
// server is shutting down; the request cannot be answered.
var ErrClosed = errors.New("store: catalog closed")

// DefaultPollInterval is how often Live.Watch looks for a replaced catalog
// file when LiveOptions.Interval is zero.
const DefaultPollInterval = time.Second

// Change is what replacing one catalog with another changed, by URI. Each
// list is in ascending byte order of URI.
type Change struct {
	// Updated are URIs present in both whose current version differs
	// (another version number or Digest: new content, labels or metadata).
	Updated []string
	// Added are URIs only in the new catalog.
	Added []string
	// Removed are URIs only in the old catalog.
	Removed []string
	// RemovedPatients maps each URI of Removed whose resource named a
	// patient to that Labels.Patient in the old catalog: the patient its
	// URI's patient segment stood for, which the new catalog no longer
	// says when the patient's whole compartment left it. Nil when none.
	RemovedPatients map[string]string
}

// Empty reports whether nothing changed.
func (c Change) Empty() bool { return len(c.Updated)+len(c.Added)+len(c.Removed) == 0 }

// ListChanged reports whether the set of URIs changed (resources/list may
// answer differently even for a caller whose visible resources did not
// change their content).
func (c Change) ListChanged() bool { return len(c.Added)+len(c.Removed) > 0 }

// pager reads the current resources of a catalog in URI order.
type pager interface {
	Page(after string, limit int) ([]Resource, error)
}

// diffPage is how many resources Diff reads per page from each side; each
// page is one short read transaction, so a long diff never blocks bbolt's
// remapping.
const diffPage = 512

// Diff compares the current versions of two catalogs by URI.
func Diff(old, cur *Store) (Change, error) { return diff(old, cur) }

func diff(old, cur pager) (Change, error) {
	var ch Change
	a, b := &cursor{p: old}, &cursor{p: cur}
	for {
		ra, err := a.peek()
		if err != nil {
			return Change{}, fmt.Errorf("store: diff: old catalog: %w", err)
		}
		rb, err := b.peek()
		if err != nil {
			return Change{}, fmt.Errorf("store: diff: new catalog: %w", err)
		}
		switch {
		case ra == nil && rb == nil:
			return ch, nil
		case rb == nil || (ra != nil && ra.URI < rb.URI):
			ch.Removed = append(ch.Removed, ra.URI)
			if ra.Labels.Patient != "" {
				if ch.RemovedPatients == nil {
					ch.RemovedPatients = map[string]string{}
				}
				ch.RemovedPatients[ra.URI] = ra.Labels.Patient
			}
			a.i++
		case ra == nil || rb.URI < ra.URI:
			ch.Added = append(ch.Added, rb.URI)
			b.i++
		default:
			if ra.Version != rb.Version || ra.Digest != rb.Digest {
				ch.Updated = append(ch.Updated, ra.URI)
			}
			a.i++
			b.i++
		}
	}
}

type cursor struct {
	p     pager
	buf   []Resource
	i     int
	after string
	done  bool
}

// peek returns the next resource without consuming it, or nil at the end.
func (c *cursor) peek() (*Resource, error) {
	if c.i < len(c.buf) {
		return &c.buf[c.i], nil
	}
	if c.done {
		return nil, nil
	}
	buf, err := c.p.Page(c.after, diffPage)
	if err != nil {
		return nil, err
	}
	if len(buf) < diffPage {
		c.done = true
	}
	if len(buf) == 0 {
		return nil, nil
	}
	c.buf, c.i, c.after = buf, 0, buf[len(buf)-1].URI
	return &c.buf[0], nil
}

// LiveOptions configure OpenLive.
type LiveOptions struct {
	// Options open each catalog file; ReadOnly is always set.
	Options
	// Interval is how often Watch stats the file. Zero means
	// DefaultPollInterval.
	Interval time.Duration
	// LabelRules is the label rules version the server's policy relies on
	// (fhirin.LabelRules): a catalog holding resources of a streaming
	// import whose labels were derived with older rules is refused
	// (ErrOldLabelRules), and so, even at zero, is one whose version is not
	// known (none recorded, or a custos that does not keep it wrote since).
	LabelRules uint32
	// OnChange, if not nil, is called after a new catalog file has been
	// swapped in and the old one closed, with what changed (only when
	// something did). It runs on the goroutine that called Reload (Watch's),
	// so a slow OnChange delays the next poll, never a request.
	OnChange func(Change)
}

// Live is a read-only catalog that follows its file being replaced while
// it serves: 'custos import' builds the new catalog in a copy and renames
// it over the old file (ImportStaged), and Live notices the new file, opens
// it, compares it with the one it serves and swaps it in.
//
// Get, Page, Count, Blob and Encryption each run on one catalog: the one
// current when they start. A swap waits for calls in flight on the old
// catalog to finish before it closes it. A file that does not open (wrong
// encryption mode or KEK, not a catalog, damaged, or one whose labels an
// older custos left unsettled: ErrUnsettledLabels, or labelled with older
// label rules: ErrOldLabelRules) is never swapped in: the
// old catalog keeps serving and the failure is logged once per file.
//
// Live is safe for concurrent use.
type Live struct {
	path string
	opts LiveOptions
	log  *slog.Logger

	cur atomic.Pointer[liveHandle]

	reload  sync.Mutex  // serializes Reload and Close
	bad     os.FileInfo // the last file that failed to open, not retried until replaced
	statErr string      // the last failure to examine the file, logged once
	closed  bool
}

// liveHandle is one open catalog file. mu is held shared by every call on
// it and exclusively to close it.
type liveHandle struct {
	mu     sync.RWMutex
	st     *Store
	ix     *Index // the file's index, built when it was opened
	fi     os.FileInfo
	closed bool
}

// OpenLive opens the catalog at path read-only (see Open) and returns a
// Live serving it. Call Watch to follow replacements, or Reload to check
// once.
func OpenLive(path string, opts LiveOptions) (*Live, error) {
	if opts.Interval < 0 {
		return nil, errors.New("store: negative poll interval")
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultPollInterval
	}
	opts.ReadOnly = true
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Live{path: path, opts: opts, log: opts.Logger}
	h, err := l.open()
	if err != nil {
		return nil, err
	}
	l.cur.Store(h)
	return l, nil
}

// open opens the file now at l.path.
func (l *Live) open() (*liveHandle, error) {
	fi, err := os.Stat(l.path)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", pathless(err))
	}
	st, err := Open(l.path, l.opts.Options)
	if err != nil {
		return nil, err
	}
	if err := st.checkSettled(); err != nil {
		st.Close()
		return nil, err
	}
	if err := st.view(func(tx *bolt.Tx) error { return checkLabelRules(tx, tx.ID(), l.opts.LabelRules) }); err != nil {
		st.Close()
		return nil, err
	}
	ix, err := buildIndex(st.entryPage)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &liveHandle{st: st, ix: ix, fi: fi}, nil
}

// acquire returns the current catalog, held shared; release with
// h.mu.RUnlock.
func (l *Live) acquire() (*liveHandle, error) {
	for {
		h := l.cur.Load()
		h.mu.RLock()
		if !h.closed {
			return h, nil
		}
		h.mu.RUnlock()
		if l.cur.Load() == h {
			return nil, ErrClosed // closed by Close, not by a swap
		}
	}
}

// Get is Store.Get on the current catalog.
func (l *Live) Get(uri string) (Resource, error) {
	h, err := l.acquire()
	if err != nil {
		return Resource{}, err
	}
	defer h.mu.RUnlock()
	return h.st.Get(uri)
}

// Index returns the index of the current catalog (see Index): immutable,
// it stays usable after a swap, describing the catalog it was built for.
// Callers that decide on an IndexEntry and then Get the record from the current
// catalog compare Version and Digest to notice a swap in between.
func (l *Live) Index() (*Index, error) {
	h, err := l.acquire()
	if err != nil {
		return nil, err
	}
	defer h.mu.RUnlock()
	return h.ix, nil
}

// Page is Store.Page on the current catalog.
func (l *Live) Page(after string, limit int) ([]Resource, error) {
	h, err := l.acquire()
	if err != nil {
		return nil, err
	}
	defer h.mu.RUnlock()
	return h.st.Page(after, limit)
}

// Count is Store.Count on the current catalog.
func (l *Live) Count() (int, error) {
	h, err := l.acquire()
	if err != nil {
		return 0, err
	}
	defer h.mu.RUnlock()
	return h.st.Count()
}

// Blob is Store.Blob on the current catalog. Blobs are never removed by an
// import, so a digest read from the previous catalog is found in the next.
func (l *Live) Blob(ctx context.Context, digest string) ([]byte, error) {
	h, err := l.acquire()
	if err != nil {
		return nil, err
	}
	defer h.mu.RUnlock()
	return h.st.Blob(ctx, digest)
}

// Encryption is Store.Encryption on the current catalog.
func (l *Live) Encryption() (mode, kek string, err error) {
	h, err := l.acquire()
	if err != nil {
		return "", "", err
	}
	defer h.mu.RUnlock()
	return h.st.Encryption()
}

// Reload checks whether the file at the catalog's path was replaced and, if
// so, opens it, diffs it against the current catalog, swaps it in, closes
// the old one (after the calls in flight on it) and calls OnChange with a
// non-empty change. swapped reports whether a new file was swapped in. An
// error means the new file was not swapped in; the old one keeps serving.
// A file that failed once is not tried again until it is replaced.
func (l *Live) Reload() (ch Change, swapped bool, err error) {
	l.reload.Lock()
	defer l.reload.Unlock()
	if l.closed {
		return Change{}, false, ErrClosed
	}
	old := l.cur.Load()
	fi, err := os.Stat(l.path)
	if err != nil {
		err = fmt.Errorf("store: stat catalog: %w", pathless(err))
		if msg := err.Error(); msg != l.statErr { // once per distinct failure
			l.statErr = msg
			l.log.Warn("catalog file cannot be examined; still serving the open catalog", "err", err)
		}
		return Change{}, false, err
	}
	l.statErr = ""
	if os.SameFile(fi, old.fi) || (l.bad != nil && os.SameFile(fi, l.bad) && fi.ModTime().Equal(l.bad.ModTime())) {
		return Change{}, false, nil
	}
	h, err := l.open()
	if err == nil {
		ch, err = diff(old.st, h.st)
		if err != nil {
			h.st.Close()
		}
	}
	if err != nil {
		l.bad = fi
		l.log.Error("replaced catalog file does not open; still serving the previous one", "err", err)
		return Change{}, false, err
	}
	l.bad = nil
	l.cur.Store(h)
	old.mu.Lock() // waits for the calls in flight on the old catalog
	old.closed = true
	cerr := old.st.Close()
	old.mu.Unlock()
	if cerr != nil {
		l.log.Warn("closing the previous catalog failed", "err", cerr)
	}
	l.log.Info("catalog replaced", "updated", len(ch.Updated), "added", len(ch.Added), "removed", len(ch.Removed))
	if !ch.Empty() && l.opts.OnChange != nil {
		l.opts.OnChange(ch)
	}
	return ch, true, nil
}

// Watch calls Reload every Interval until ctx is done. Failures are logged
// by Reload and do not stop the watch.
func (l *Live) Watch(ctx context.Context) {
	t := time.NewTicker(l.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, _, err := l.Reload(); errors.Is(err, ErrClosed) {
				return
			}
		}
	}
}

// Close closes the current catalog after the calls in flight on it; later
// calls return ErrClosed. Close may be called more than once.
func (l *Live) Close() error {
	l.reload.Lock()
	defer l.reload.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	h := l.cur.Load()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	return h.st.Close()
}
