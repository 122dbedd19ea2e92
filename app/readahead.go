package app

import (
	"context"
	"errors"
	"iter"
	"sync/atomic"

	"github.com/custos-mcp/custos/store"
)

// readAheadOn runs ImportFHIR's reader ahead of the catalog (readAhead);
// a test turns it off for the serial reference path, the reader in the
// consumer's goroutine (TestReadAheadImportsAlike: the same catalog).
var readAheadOn = true

// slowConsumer, if not nil, is called by the consumer before it takes
// each entry, with how many elements are still queued: a test slows the
// catalog down so that the reader really runs ahead and the barrier
// waits (TestReadAheadImportsAlike, TestReadAheadBarrier).
var slowConsumer func(queued int)

// tuneEntries, if not nil, adjusts ImportFHIR's entry options: a test
// sets the batch size and the clock (TestReadAheadImportsAlike).
var tuneEntries func(*store.EntryOptions)

// errReaderExited is the stream's error when the reader's goroutine
// ended without finishing the stream or panicking (runtime.Goexit): the
// stream is incomplete, and nothing of it may be committed.
var errReaderExited = errors.New("app: the FHIR reader stopped before the end of its input")

// readAhead runs an entry stream (the FHIR reader, fhirEntries) in a
// goroutine of its own, ahead of the consumer (store.ImportEntries, which
// adds the entries and commits the batches), and with it what the import
// makes of each entry alone (its check and digests:
// store.EntryOptions.Preparer, pure), through a bounded queue: at most
// one batch of entries (EntryOptions.BatchEntries) and a quarter of a
// batch's content bytes (BatchBytes / aheadShare) ahead, and a chunk being
// filled (a sixth of that).
//
// The reader reads the catalog the consumer writes (its callbacks,
// catalog). settle is the barrier that keeps what it reads what the
// serial path read: before the reader touches the catalog, it waits until
// the consumer has taken every entry queued before and made every flush
// they triggered (ImportEntries does both before it asks for the next
// entry), and the consumer, waiting for the next entry, touches the
// catalog no more until the reader queues one. So no read of the reader
// runs beside a write of the consumer, and each sees the catalog as the
// serial path did at the same point of the stream.
//
// The reader's goroutine is joined before the stream's iteration returns,
// however it ends (the stream's end or error, the consumer stopping or
// panicking); a panic of the reader is raised again in the consumer's
// goroutine after the entries queued before it, where the serial path
// raised it, and only if the consumer took them all (one past where the
// consumer stopped or panicked the serial path never reached: the
// consumer's error or panic stands). What the reader sets for its caller
// (fhirin.Options.Skipped) is read only after that join.
type readAhead struct {
	queue chan []aheadItem // chunks of up to chunk elements
	// A chunk is queued when it holds chunk elements or chunkBytes
	// content bytes, or ends with the stream's error or a barrier.
	chunk      int
	chunkBytes int64
	stop       chan struct{} // closed when the consumer stops taking entries
	// cancel, if not nil, cancels the reader's context when the consumer
	// stops: a reader learns of the stop (stop) only when it next queues
	// an entry or settles, so one that yields nothing for a long stretch
	// (entries it leaves out) would read on to the end of its input, while
	// the serial path stops at once (TestReadAheadConsumerStopEndsTheRead).
	cancel   context.CancelFunc
	space    chan struct{} // the consumer took bytes off the queue (1 buffered)
	maxBytes int64
	queued   atomic.Int64 // content bytes in the queue
	// prepare makes ahead, in the reader's goroutine, what the import
	// makes of an entry alone (store.EntryOptions.Preparer); nil: none.
	prepare func(*store.Entry)
	// Of the reader's goroutine: the chunk it fills (and its content
	// bytes), and whether it queued an entry since the consumer last
	// settled the queue (settle).
	pending      []aheadItem
	pendingBytes int64
	unsettled    bool
	// Set by the reader's goroutine before it ends, read by the consumer
	// after the join: it panicked with p, or finished the stream.
	panicked bool
	p        any
	ended    bool
}

// aheadItem is an element of the queue: an entry of the stream, or a
// barrier (ack not nil) the consumer closes when it takes it. The reader
// queues them in chunks (aheadChunk at most), so that the two goroutines
// hand over a chunk, not each entry: one wake-up per chunk.
type aheadItem struct {
	e   store.Entry
	err error
	ack chan struct{}
}

// aheadChunk is how many elements the reader queues at once, at most.
const aheadChunk = 16

// aheadShare: the queue holds at most 1/aheadShare of a batch's content
// bytes. The entries' cap (a batch) binds on inputs of small resources
// (all the overlap needs); on inputs of large ones (Binaries of
// megabytes) a whole batch more of bytes raised the peak RSS by about
// 110 MB over the serial path's (120 Binaries of 3 MB: 521-530 MB against
// 414-418 MB), twice the 32 MiB batch with the collector's headroom.
const aheadShare = 4

// newReadAhead returns a read-ahead bounded by one batch of entries of eo
// and a quarter of its bytes.
func newReadAhead(eo store.EntryOptions) *readAhead {
	entries, bytes := eo.BatchEntries, eo.BatchBytes
	if entries <= 0 {
		entries = store.DefaultBatchEntries
	}
	if bytes <= 0 {
		bytes = store.DefaultBatchBytes
	}
	// Options the import refuses are refused by it: nothing is made ahead.
	prepare, _ := eo.Preparer()
	chunk := min(aheadChunk, entries)
	chunks := max(1, entries/chunk)
	ahead := max(1, bytes/aheadShare)
	return &readAhead{queue: make(chan []aheadItem, chunks), chunk: chunk, chunkBytes: max(1, ahead/int64(chunks)),
		stop: make(chan struct{}), space: make(chan struct{}, 1), maxBytes: ahead, prepare: prepare}
}

// run is seq read ahead: the returned stream starts seq's goroutine when
// it is iterated (once) and joins it before it returns.
func (ra *readAhead) run(seq iter.Seq2[store.Entry, error]) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		finished := make(chan struct{})
		go ra.read(seq, finished)
		defer func() {
			close(ra.stop)
			if ra.cancel != nil {
				ra.cancel()
			}
			<-finished
		}()
		for chunk := range ra.queue {
			for i, it := range chunk {
				if it.ack != nil {
					close(it.ack)
					continue
				}
				ra.queued.Add(-int64(len(it.e.Body)))
				select {
				case ra.space <- struct{}{}:
				default:
				}
				if slowConsumer != nil {
					slowConsumer(len(chunk) - i - 1 + len(ra.queue)*ra.chunk)
				}
				if !yield(it.e, it.err) {
					return
				}
			}
		}
		<-finished
		switch {
		case ra.panicked:
			// Only here, once the consumer took every entry queued
			// before the panic, where the serial path raised it: a
			// consumer that stopped or panicked first never reached it
			// there, and its own error or panic stands.
			panic(ra.p)
		case !ra.ended:
			yield(store.Entry{}, errReaderExited)
		}
	}
}

// read is the reader's goroutine: it queues seq's elements until seq ends
// or the consumer stops.
func (ra *readAhead) read(seq iter.Seq2[store.Entry, error], finished chan<- struct{}) {
	defer close(finished)
	defer close(ra.queue)
	defer func() {
		if !ra.ended {
			// A panic (since Go 1.21 panic(nil) too recovers non-nil);
			// nil is runtime.Goexit, which run reports as an error. The
			// entries yielded before it reach the consumer first.
			ra.flush()
			if p := recover(); p != nil {
				ra.panicked, ra.p = true, p
			}
		}
	}()
	for e, err := range seq {
		if err == nil && ra.prepare != nil {
			ra.prepare(&e)
		}
		if !ra.send(aheadItem{e: e, err: err}) {
			ra.ended = true // the consumer stopped: nothing more to hand over
			return
		}
	}
	ra.ended = ra.flush()
}

// send adds it to the chunk being filled, and queues the chunk when it
// is full or it is the stream's error (flush); false when the consumer
// stopped.
func (ra *readAhead) send(it aheadItem) bool {
	ra.pending = append(ra.pending, it)
	ra.pendingBytes += int64(len(it.e.Body))
	if len(ra.pending) < ra.chunk && ra.pendingBytes < ra.chunkBytes && it.err == nil {
		return true
	}
	return ra.flush()
}

// flush queues the chunk being filled, waiting for room (at most
// maxBytes content bytes queued, but for one chunk); false when the
// consumer stopped (checked first: a select with room in the queue as
// well would pick either, and the reader would read on into a queue no
// one takes).
func (ra *readAhead) flush() bool {
	select {
	case <-ra.stop:
		return false
	default:
	}
	if len(ra.pending) == 0 {
		return true
	}
	n := ra.pendingBytes
	for q := ra.queued.Load(); q > 0 && q+n > ra.maxBytes; q = ra.queued.Load() {
		select {
		case <-ra.space:
		case <-ra.stop:
			return false
		}
	}
	ra.queued.Add(n)
	select {
	case ra.queue <- ra.pending:
		ra.pending, ra.pendingBytes, ra.unsettled = nil, 0, true // the consumer has that chunk now
		return true
	case <-ra.stop:
		return false
	}
}

// settle is the barrier: called by the reader's goroutine before it reads
// the catalog, it returns once the consumer has taken and settled every
// entry queued before (errStopped if the consumer stopped instead).
func (ra *readAhead) settle() error {
	if ra == nil || !ra.unsettled && len(ra.pending) == 0 {
		return nil
	}
	ack := make(chan struct{})
	if !ra.send(aheadItem{ack: ack}) || !ra.flush() {
		return errStopped
	}
	select {
	case <-ack:
	case <-ra.stop:
		return errStopped
	}
	ra.unsettled = false
	return nil
}

// catalog is what the reader's callbacks (storedBinary, placeResource,
// matchResources) read of the catalog being imported into: store.Store's
// methods of those names.
type catalog interface {
	Get(uri string) (store.Resource, error)
	GetByID(id string) (store.Resource, error)
	Page(after string, limit int) ([]store.Resource, error)
	Blob(ctx context.Context, digest string) ([]byte, error)
}

// settledCatalog is the catalog as the reader reads it: every read waits
// at the barrier first (readAhead.settle). With a nil read-ahead (the
// serial path) it is the store itself.
type settledCatalog struct {
	st *store.Store
	ra *readAhead
}

func (c settledCatalog) Get(uri string) (store.Resource, error) {
	if err := c.ra.settle(); err != nil {
		return store.Resource{}, err
	}
	return c.st.Get(uri)
}

func (c settledCatalog) GetByID(id string) (store.Resource, error) {
	if err := c.ra.settle(); err != nil {
		return store.Resource{}, err
	}
	return c.st.GetByID(id)
}

func (c settledCatalog) Page(after string, limit int) ([]store.Resource, error) {
	if err := c.ra.settle(); err != nil {
		return nil, err
	}
	return c.st.Page(after, limit)
}

func (c settledCatalog) Blob(ctx context.Context, digest string) ([]byte, error) {
	if err := c.ra.settle(); err != nil {
		return nil, err
	}
	return c.st.Blob(ctx, digest)
}
