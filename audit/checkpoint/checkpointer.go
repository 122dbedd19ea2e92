package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Defaults for Config.
const (
	DefaultEvery    = 1000
	DefaultInterval = time.Second
)

// Config configures a Checkpointer.
type Config struct {
	// Origin names the log in every checkpoint (required), e.g.
	// "custos.example-hospital/node-1/audit".
	Origin string
	// Signer signs checkpoints (required); its Name must be Origin. A
	// signer with a WithContext(context.Context) note.Signer method (like
	// *Signer) is given the context of each checkpoint.
	Signer note.Signer
	// Tree is the local audit tree (required).
	Tree Tree
	// Anchors receive every checkpoint, in order (at least one): the
	// local copy in the data directory and the external anchor.
	Anchors []*Anchor
	// Every: a checkpoint is due when Notify reports this many records
	// appended since the last one. Zero means DefaultEvery.
	Every int64
	// Interval: the head is checked and checkpointed if it grew at least
	// this often. Zero means DefaultInterval.
	Interval time.Duration
	// Logger receives operational messages (sizes, roots, errors; never
	// secrets). Nil discards.
	Logger *slog.Logger
	// Now gives the anchoring time. Nil means time.Now.
	Now func() time.Time
	// Anchored, if not nil, is called once for each checkpoint that every
	// anchor holds, including, at the first step, the latest one already
	// anchored. It runs with the Checkpointer's lock held: it must be
	// quick and must not call the Checkpointer (a metric, a log line).
	Anchored func(Entry)
}

func (cfg *Config) validate() error {
	if err := validOrigin(cfg.Origin); err != nil {
		return err
	}
	switch {
	case cfg.Signer == nil:
		return errors.New("checkpoint: Config.Signer is nil")
	case cfg.Signer.Name() != cfg.Origin:
		return fmt.Errorf("checkpoint: signer is named %q, not the origin %q", cfg.Signer.Name(), cfg.Origin)
	case cfg.Tree == nil:
		return errors.New("checkpoint: Config.Tree is nil")
	case len(cfg.Anchors) == 0:
		return errors.New("checkpoint: Config.Anchors is empty")
	case cfg.Every < 0:
		return errors.New("checkpoint: Config.Every is negative")
	case cfg.Interval < 0:
		return errors.New("checkpoint: Config.Interval is negative")
	}
	for _, a := range cfg.Anchors {
		if a == nil || a.Dir == "" {
			return errors.New("checkpoint: Config.Anchors holds an anchor without Dir")
		}
	}
	if cfg.Every == 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return nil
}

// Checkpointer signs the audit tree head and appends it to the anchors:
// at every Interval and whenever Notify reports Every new records, if the
// tree grew since the last checkpoint, and once more at Close.
//
// Before signing it checks the new head against the last checkpoint it
// knows (its own, or at first the latest line of each anchor): a smaller
// head is a *RolledBackError, the same size with another root a
// *ForkError, a larger head that the tree cannot prove consistent an
// *InconsistentError. These integrity errors stop Run (it returns them)
// and nothing is signed. Other failures (signing backend, an anchor write)
// are logged, kept in LastError and retried at the next tick; an anchor
// that missed a checkpoint receives it (the same signed note) on retry.
type Checkpointer struct {
	cfg    Config
	notify chan struct{}
	stop   chan struct{}
	done   chan struct{} // closed when Run returns

	signed   atomic.Int64 // size of the last signed checkpoint, for Notify
	reported int64        // size last passed to Config.Anchored (under mu)

	lmu     sync.Mutex // lifecycle
	running bool
	closed  bool

	mu       sync.Mutex // serializes step; guards the fields below
	last     *Entry     // last signed checkpoint
	anchored []int64    // per anchor: largest size it holds; -1: not loaded yet
	lastErr  error
}

// New validates cfg (applying defaults) and returns a Checkpointer. It does
// no I/O: anchors are read at the first checkpoint.
func New(cfg Config) (*Checkpointer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Checkpointer{
		cfg:      cfg,
		notify:   make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		anchored: make([]int64, len(cfg.Anchors)),
	}
	for i := range c.anchored {
		c.anchored[i] = -1
	}
	return c, nil
}

// Notify tells the checkpointer the tree now has size records. It is cheap
// and never blocks: call it after every append.
func (c *Checkpointer) Notify(size int64) {
	if size-c.signed.Load() >= c.cfg.Every {
		select {
		case c.notify <- struct{}{}:
		default:
		}
	}
}

// Run checkpoints until ctx is done (returns ctx.Err()), Close is called
// (returns nil) or an integrity error is found (returns it: the caller must
// stop serving). It checkpoints once at start. Run may be called once.
func (c *Checkpointer) Run(ctx context.Context) error {
	c.lmu.Lock()
	if c.closed {
		c.lmu.Unlock()
		return ErrClosed
	}
	if c.running {
		c.lmu.Unlock()
		return errors.New("checkpoint: Run called twice")
	}
	c.running = true
	c.lmu.Unlock()
	defer close(c.done)

	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		if err := c.step(ctx); isIntegrity(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.stop:
			return nil
		case <-t.C:
		case <-c.notify:
		}
	}
}

// Close stops Run (waiting for it to return, within ctx) and writes a
// final checkpoint of the current head to every anchor. It returns the
// final checkpoint's error. Later calls return nil and do nothing.
func (c *Checkpointer) Close(ctx context.Context) error {
	c.lmu.Lock()
	if c.closed {
		c.lmu.Unlock()
		return nil
	}
	c.closed = true
	running := c.running
	close(c.stop)
	c.lmu.Unlock()
	if running {
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.step(ctx)
}

// LastCheckpoint returns the last checkpoint signed by this Checkpointer
// (or, before it signed one, the latest anchored one it loaded). It has
// reached every anchor if LastError is nil.
func (c *Checkpointer) LastCheckpoint() (Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		return Entry{}, false
	}
	return *c.last, true
}

// LastError returns the error of the last checkpoint attempt, nil if it
// succeeded everywhere.
func (c *Checkpointer) LastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

func isIntegrity(err error) bool {
	return errors.Is(err, ErrFork) || errors.Is(err, ErrRolledBack) || errors.Is(err, ErrInconsistent)
}

func (c *Checkpointer) step(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.stepLocked(ctx)
	c.lastErr = err
	switch {
	case isIntegrity(err):
		c.cfg.Logger.Error("audit checkpoint: integrity failure, nothing signed", "err", err)
	case err != nil:
		c.cfg.Logger.Warn("audit checkpoint failed; retrying at next tick", "err", err)
	}
	return err
}

func (c *Checkpointer) stepLocked(ctx context.Context) error {
	var errs []error
	// Load what each anchor already holds.
	for i, a := range c.cfg.Anchors {
		if c.anchored[i] >= 0 {
			continue
		}
		e, ok, err := a.Latest()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.anchored[i] = 0
		if !ok {
			continue
		}
		c.anchored[i] = e.Size
		if c.last == nil || e.Size > c.last.Size {
			e := e
			c.last = &e
			c.signed.Store(e.Size)
		} else if e.Size == c.last.Size && e.Root != c.last.Root {
			return &ForkError{Size: e.Size, A: entrySide(*c.last), B: entrySide(e)}
		}
	}

	size, root, err := c.cfg.Tree.TreeHead(ctx)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("checkpoint: tree head: %w", err))...)
	}
	if last := c.last; last != nil {
		switch {
		case size < last.Size:
			return &RolledBackError{LocalSize: size, LocalRoot: root, Anchored: *last}
		case size == last.Size && root != last.Root:
			return &ForkError{Size: size, A: entrySide(*last), B: Side{Source: "local audit tree", Root: root}}
		case size > last.Size && last.Size > 0:
			p, err := c.cfg.Tree.ProveTree(last.Size, size)
			if err == nil {
				err = tlog.CheckTree(p, size, root, last.Size, last.Root)
			}
			if err != nil {
				return &InconsistentError{OldSize: last.Size, OldRoot: last.Root, NewSize: size, NewRoot: root, Err: err}
			}
		}
	}
	if size > 0 && (c.last == nil || size > c.last.Size) {
		ck := Checkpoint{Origin: c.cfg.Origin, Size: size, Root: root}
		signer := c.cfg.Signer
		if cs, ok := signer.(interface {
			WithContext(context.Context) note.Signer
		}); ok {
			signer = cs.WithContext(ctx)
		}
		msg, err := Sign(ck, signer)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		c.last = &Entry{Size: size, Root: root, Note: msg, Time: c.cfg.Now().UTC()}
		c.signed.Store(size)
		c.cfg.Logger.Debug("audit checkpoint signed", "size", size, "root", root.String())
	}
	if c.last == nil {
		return errors.Join(errs...)
	}
	ck := Checkpoint{Origin: c.cfg.Origin, Size: c.last.Size, Root: c.last.Root}
	for i, a := range c.cfg.Anchors {
		if c.anchored[i] < 0 || c.anchored[i] >= c.last.Size {
			continue
		}
		if err := a.Append(ctx, c.last.Note, ck, c.last.Time); err != nil {
			errs = append(errs, err)
			continue
		}
		c.anchored[i] = c.last.Size
		c.cfg.Logger.Info("audit checkpoint anchored", "size", c.last.Size, "root", c.last.Root.String(), "anchor", a.Dir)
	}
	c.reportAnchored()
	return errors.Join(errs...)
}

// reportAnchored calls Config.Anchored when every anchor holds a
// checkpoint larger than the last one reported.
func (c *Checkpointer) reportAnchored() {
	if c.cfg.Anchored == nil || c.last.Size <= c.reported {
		return
	}
	for _, n := range c.anchored {
		if n < c.last.Size {
			return
		}
	}
	c.reported = c.last.Size
	c.cfg.Anchored(*c.last)
}
