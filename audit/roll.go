package audit

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/internal/durable"
	"github.com/custos-mcp/custos/internal/owner"
	"github.com/custos-mcp/custos/internal/regularfile"
)

// Rollover and sealing.
//
// Sealing the live segment L (number k, file P = the path given to Open)
// goes through these steps; the one commit point is step 4:
//
//  1. verify L alone, from its recorded base, without the writer's lock
//     (appends go on);
//  2. take the writer's lock (appends wait) and verify the records
//     appended meanwhile;
//  3. create the next live segment at P.next: segment k+1, base = L's
//     head, tree_size = L's head, its tlog bucket holding copies of the
//     stored hashes of the complete subtrees of the tree at L's head;
//  4. write the seal into L's meta (bbolt commit, fsync): from here on L
//     takes no append;
//  5. link L as SealedDir(P)/k.db, fsync that directory, rename P.next
//     over P (atomic: P is never missing), fsync the data directory;
//     sign the seal (Options.SealSigner) and write it beside k.db as
//     k.seal, still under the lock, so that nobody sees L sealed without
//     its note; appends go on in k+1; release the lock; then close the
//     writer's handle on k.db, trim the file to its pages in use, chmod
//     0400, fsync it and reopen it read-only;
//  6. copy k.db and k.seal to the archive directory if one is configured
//     (and write k.seal if step 5 could not).
//
// A crash before step 4 leaves L live and unsealed: Open removes P.next
// (rolled back, nothing lost). A crash after step 4 leaves L sealed at P
// (and maybe already linked in the sealed directory), or, from a version
// that renamed L away, L in the sealed directory and P.next beside a
// missing P: Open completes steps 3 (afresh while P is sealed: P.next
// holds no record then, and a completion killed while making it left it
// empty or without its buckets) and 5 (nothing lost), k.db trimmed to
// its pages and made read-only as step 5 does (trimToPages, then
// makeReadOnly), also when the crash came after the rename. Open writes a
// missing k.seal (step 6) too. The completion makes P read-only before it
// links and replaces it, so a kill during it may leave P sealed and 0400:
// the next completion opens such a P read-only.

// sealCrash, when a test sets it, is called after each step of a seal
// (3, 4, 5: after step 5's link) and once step 5's rename is done
// (sealRenamed: before the file is trimmed and made read-only); an error
// stops the seal there as if the process had been killed: open handles
// are closed, nothing is cleaned up, and appends are refused until the
// log is reopened.
var sealCrash func(step int) error

// sealRenamed is the step sealCrash is called with once the next segment
// was renamed over the live path.
const sealRenamed = 50

// completeReadOnly is the step sealCrash is called with when Open's
// completion of a seal (recoverSeal) has made the sealed file, still at
// the live path, read-only and before it links it in the sealed directory.
const completeReadOnly = 60

// roller runs rollover in the background.
type roller struct {
	mu    sync.Mutex // one seal at a time
	kick  chan struct{}
	quit  chan struct{}
	done  chan struct{}
	again atomic.Bool // an archive copy failed: archivePending again later
}

// rollPoll is the roller's pace: it checks whether a roll is due at most
// this often, and at least once a minute.
const rollPoll = 100 * time.Millisecond

// archiveRetryInterval is how long the roller waits before it tries again
// to archive the sealed segments still in the sealed directory after a
// failure (a var: tests shorten it).
var archiveRetryInterval = 5 * time.Minute // shortened by tests

// retryArchive asks the roller to archive the pending segments again,
// archiveRetryInterval from now.
func (r *roller) retryArchive() { r.again.Store(true) }

func (r *roller) start(l *Log) {
	if l.opts.RollSize == 0 && l.opts.RollPeriod == 0 && !l.opts.RollMonthly && l.opts.ArchiveDir == "" {
		return
	}
	r.kick, r.quit, r.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go r.run(l)
}

func (r *roller) notify() {
	if r.kick == nil {
		return
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *roller) stop() {
	if r.quit == nil {
		return
	}
	close(r.quit)
	<-r.done
}

func (r *roller) run(l *Log) {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	pending := true
	var retryAt time.Time
	for {
		select {
		case <-r.quit:
			return
		case <-r.kick:
		case <-tick.C:
		}
		// Seal notes missing after a crash, and segments not yet
		// archived: after the first event, by when the server has set
		// its SealSigner; while that fails, again every
		// archiveRetryInterval (each failure counted, so that an alert
		// on the count keeps firing while segments wait).
		if pending && !time.Now().Before(retryAt) {
			pending = false
			if err := l.archivePending(ctx); err != nil && ctx.Err() == nil {
				l.log.Error("audit segment archiving failed; retried", "err", err, "retry_in", archiveRetryInterval.String())
				pending, retryAt = true, time.Now().Add(archiveRetryInterval)
			}
		}
		_, err := l.RollIfDue(ctx)
		if errors.Is(err, ErrClosed) {
			return
		}
		if r.again.Swap(false) && !pending {
			pending, retryAt = true, time.Now().Add(archiveRetryInterval)
		}
		if err != nil && ctx.Err() == nil {
			l.segmentFailed(SegmentSeal)
			l.log.Error("audit segment seal failed; appends continue in the live segment and the seal is retried", "err", err)
			select { // back off
			case <-r.quit:
				return
			case <-time.After(10 * time.Second):
			}
		}
		select {
		case <-r.quit:
			return
		case <-time.After(rollPoll):
		}
	}
}

// SetSealSigner sets the signer of the seal notes written from now on
// (Options.SealSigner), for a server whose signer exists only once the log
// is open.
func (l *Log) SetSealSigner(s note.Signer) {
	l.roll.mu.Lock()
	defer l.roll.mu.Unlock()
	l.opts.SealSigner = s
}

// RollDue reports whether the live segment is due to be sealed under the
// configured rollover (Options.RollSize, RollPeriod, RollMonthly), judged
// by the clock Options.Now: it holds at least one record and its file has
// reached RollSize bytes, or its first record is RollPeriod old, or (with
// RollMonthly) it was written in an earlier calendar month (UTC).
func (l *Log) RollDue() (bool, error) {
	l.headMu.Lock()
	first := l.liveFirst
	l.headMu.Unlock()
	if first.IsZero() {
		return false, nil
	}
	now := l.opts.Now().UTC()
	if l.opts.RollPeriod > 0 && now.Sub(first) >= l.opts.RollPeriod {
		return true, nil
	}
	if l.opts.RollMonthly {
		fy, fm, _ := first.UTC().Date()
		ny, nm, _ := now.Date()
		if ny > fy || ny == fy && nm > fm {
			return true, nil
		}
	}
	if l.opts.RollSize > 0 {
		var size int64
		if err := l.view(func(tx *bolt.Tx) error { size = tx.Size(); return nil }); err != nil {
			return false, err
		}
		return size >= l.opts.RollSize, nil
	}
	return false, nil
}

// RollIfDue seals the live segment if RollDue says so, and reports
// whether it did.
func (l *Log) RollIfDue(ctx context.Context) (bool, error) {
	due, err := l.RollDue()
	if err != nil || !due {
		return false, err
	}
	return l.Roll(ctx)
}

// Roll seals the live segment now and starts the next one (see the steps
// above), and reports whether it did: an empty live segment is not
// sealed. Appends wait only during steps 2 to 5. If the verification of
// step 1 or 2 finds a problem, nothing is sealed, every later Append
// fails with a *CorruptError (the log's past can no longer be proven) and
// Roll returns it; other failures before the commit point leave the live
// segment as it was. A failure of the commit itself or after it also
// makes every later Append fail, until a restart settles the seal.
func (l *Log) Roll(ctx context.Context) (bool, error) {
	if l.opts.ReadOnly {
		return false, ErrReadOnly
	}
	l.roll.mu.Lock()
	defer l.roll.mu.Unlock()
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return false, ErrClosed
	}
	live := l.live()
	if seq, _ := l.Head(); seq == live.base {
		return false, nil
	}
	start := time.Now()
	// Step 1: the segment so far, next to the writer.
	v := &verifier{}
	w := &segmentWalk{v: v, s: live, alone: true, pace: Pacer(l.opts.SealVerifyRate)}
	if err := w.run(ctx); err != nil {
		return false, fmt.Errorf("audit: seal: %w", err)
	}
	w.pace = nil // step 2 holds the writer's lock: as fast as it goes
	seal, dst, err := l.sealLocked(ctx, live, w)
	if err != nil {
		return false, err
	}
	if err := l.finishSealed(live, dst); err != nil {
		l.log.Error("audit sealed segment not made read-only; the next open does it", "segment", seal.Segment, "err", err)
		return true, fmt.Errorf("audit: seal of segment %d: %w", seal.Segment, err)
	}
	l.log.Info("audit segment sealed", "segment", seal.Segment, "first", seal.First, "last", seal.Last, "elapsed", time.Since(start).String())
	// Step 6, outside the writer's lock: the note if step 5 could not
	// write it (it is there already otherwise), then the archive.
	if err := l.writeSealNote(live, seal); err != nil {
		l.segmentFailed(SegmentSealNote)
		l.log.Error("audit seal note not written; it is written at the next open", "segment", seal.Segment, "err", err)
		return true, nil
	}
	if err := l.archive(ctx, live); err != nil {
		l.segmentFailed(SegmentArchive)
		l.log.Error("audit segment archiving failed; retried", "segment", seal.Segment, "err", err, "retry_in", archiveRetryInterval.String())
		l.roll.retryArchive()
	}
	return true, nil
}

// segmentFailed tells Options.OnSegmentFailure, if set, that step failed.
func (l *Log) segmentFailed(step string) {
	if l.opts.OnSegmentFailure != nil {
		l.opts.OnSegmentFailure(step)
	}
}

// sealLocked runs steps 2 to 5 under the writer's lock.
func (l *Log) sealLocked(ctx context.Context, live *segment, w *segmentWalk) (Seal, string, error) {
	v := w.v
	var problems []Problem
	v.report = func(p Problem) { problems = append(problems, p) }
	l.segMu.Lock()
	defer l.segMu.Unlock()
	if l.broken != nil {
		return Seal{}, "", l.broken
	}
	// Step 2: what was appended meanwhile.
	if err := w.run(ctx); err != nil {
		return Seal{}, "", fmt.Errorf("audit: seal: %w", err)
	}
	if v.sum.Problems > 0 {
		p := Problem{Kind: KindSealMismatch, Detail: "problems found before the writer's lock was taken"}
		if len(problems) > 0 {
			p = problems[0]
		}
		l.broken = &CorruptError{Seq: p.Seq, Kind: p.Kind, Expected: p.Expected, Got: p.Got,
			Detail: fmt.Sprintf("segment %d failed its verification at sealing (%d problems), appends refused: %s", live.no, v.sum.Problems, p.Detail)}
		l.log.Error("audit segment failed its verification at sealing; appends refused", "segment", live.no, "problems", v.sum.Problems, "seq", p.Seq, "kind", p.Kind)
		return Seal{}, "", l.broken
	}
	seal, frontier, err := l.sealOf(live, v.sum)
	if err != nil {
		return Seal{}, "", err
	}
	// Step 3.
	next, nextTail, err := createNext(l.path+nextSuffix, l.opts, seal, frontier, l.opts.Timeout)
	if err != nil {
		os.Remove(l.path + nextSuffix)
		return Seal{}, "", fmt.Errorf("audit: seal: next segment: %w", err)
	}
	crashed := func(step int) error {
		if sealCrash == nil {
			return nil
		}
		err := sealCrash(step)
		if err != nil {
			next.Close()
			l.broken = err
		}
		return err
	}
	if err := crashed(3); err != nil {
		return Seal{}, "", err
	}
	// Step 4: the commit point.
	body := seal.Body()
	err = live.update(func(tx *bolt.Tx) error {
		// A sealed file keeps its freelist, even when a backup copies
		// the segment now (copyLive).
		tx.DB().NoFreelistSync = false
		return tx.Bucket(bucketMeta).Put(metaSeal, body)
	})
	if err != nil {
		// A failed commit may still have reached the disk: whether the
		// segment is sealed is known only to the next open, which
		// completes the seal or continues the segment. Until then nothing
		// is appended.
		next.Close()
		os.Remove(l.path + nextSuffix)
		l.broken = fmt.Errorf("audit: seal of segment %d: its commit failed (restart to settle it): %w", live.no, l.liveError(err))
		l.log.Error("audit segment seal commit failed; appends refused until a restart settles it", "segment", live.no, "err", err)
		return Seal{}, "", l.broken
	}
	if err := crashed(4); err != nil {
		return Seal{}, "", err
	}
	// Step 5: the files change places. The writer's handle stays open on
	// the moved file (finishSealed closes it once the writer's lock is
	// released: a reader may hold the segment while it looks segments up).
	dir := SealedDir(l.path)
	dst := filepath.Join(dir, SegmentFile(seal.Segment))
	err = os.MkdirAll(dir, 0o700)
	// The seal note first (the seal is committed, step 4): a reader that
	// finds the segment in the sealed directory (an auditor's verify in
	// another process, while the server rolls) finds its note beside it.
	// Signing here holds appends for one signature, once per segment. A
	// failure is logged and the note is written at the next open
	// (archivePending); a crash before the link leaves the note, which the
	// seal's completion at the next open keeps (writeSealNoteAt).
	if err == nil {
		if nerr := l.writeSealNoteAt(dst, seal); nerr != nil {
			l.log.Error("audit seal note not written; it is written at the next open", "segment", seal.Segment, "err", nerr)
		}
		err = l.linkSealed(l.path, dst)
	}
	if err == nil {
		err = durable.SyncDir(dir)
	}
	if err == nil {
		if err := crashed(5); err != nil {
			return Seal{}, "", err
		}
		err = os.Rename(l.path+nextSuffix, l.path)
		if err == nil {
			if err := crashed(sealRenamed); err != nil {
				return Seal{}, "", err
			}
		}
	}
	if err != nil {
		next.Close()
		l.broken = fmt.Errorf("audit: seal of segment %d interrupted after its commit point (restart to complete it): %w", live.no, err)
		l.log.Error("audit segment seal interrupted; appends refused until a restart completes it", "segment", live.no, "err", err)
		return Seal{}, "", l.broken
	}
	if err := durable.SyncDir(filepath.Dir(l.path)); err != nil {
		l.log.Warn("audit: fsync of the data directory failed after a seal", "err", err)
	}
	// From here until finishSealed moves the handle, the sealed segment's
	// path is still the live path, which names the next segment by now:
	// readers of its note go by notePath. (segment.mu is not taken here:
	// a backup holds it for its whole download, and segMu is held.)
	live.seal.Store(&seal)
	nextSeg := &segment{no: seal.Segment + 1, base: seal.Last, path: l.path, db: next, tail: nextTail}
	l.segs = append(l.segs, nextSeg)
	l.commits.db, l.commits.tail, l.commits.copies = next, nextTail, &nextSeg.copies
	l.headMu.Lock()
	l.liveFirst = time.Time{}
	l.headMu.Unlock()
	return seal, dst, nil
}

// sealOf computes the seal of segment s from its verification summary, and
// the frontier (the stored hashes of the complete subtrees of its tree)
// that the next segment copies.
func (l *Log) sealOf(s *segment, sum Summary) (Seal, map[int64][]byte, error) {
	var seal Seal
	frontier := map[int64][]byte{}
	err := s.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		m, err := readSegmentMeta(meta)
		if err != nil {
			return err
		}
		h, err := readHead(meta)
		if err != nil {
			return err
		}
		first, err := Decode(tx.Bucket(bucketRecords).Get(seqKey(m.baseSeq + 1)))
		if err != nil {
			return &CorruptError{Seq: m.baseSeq + 1, Kind: KindNonCanonical, Detail: "first record of the segment does not decode"}
		}
		seal = Seal{Segment: m.no, First: m.baseSeq + 1, Last: h.seq, PrevHash: ZeroHash, PrevRoot: m.baseRoot,
			HeadHash: hex.EncodeToString(h.hash[:]), FirstTime: first.Time, LastTime: h.time}
		if m.baseSeq > 0 {
			seal.PrevHash = hex.EncodeToString(m.baseHash[:])
		}
		tree := tx.Bucket(bucketTree)
		n := int64(h.seq)
		if seal.Root, err = tlog.TreeHash(n, txHashReader{tree}); err != nil {
			return err
		}
		for lv := 0; n>>uint(lv) > 0; lv++ {
			if n>>uint(lv)&1 == 0 {
				continue
			}
			start := n >> uint(lv+1) << uint(lv+1)
			idx := tlog.StoredHashIndex(lv, start>>uint(lv))
			v := tree.Get(treeKey(idx))
			if len(v) != tlog.HashSize {
				return &CorruptError{Seq: storingSeq(idx), Kind: KindTreeMismatch, Detail: fmt.Sprintf("stored tree hash %d missing", idx)}
			}
			frontier[idx] = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		return Seal{}, nil, err
	}
	if seal.Last != sum.HeadSeq || seal.HeadHash != sum.HeadHash || seal.Root != sum.TreeRoot {
		return Seal{}, nil, &CorruptError{Seq: seal.Last, Kind: KindSealMismatch, Detail: "the segment's head changed during its seal"}
	}
	return seal, frontier, nil
}

// createNext creates the segment after seal at path and returns it open
// for writing.
func createNext(path string, opts Options, seal Seal, frontier map[int64][]byte, timeout time.Duration) (*bolt.DB, *zeroTail, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	db, tail, err := openLiveDB(path, bolt.Options{Timeout: timeout, FreelistType: bolt.FreelistMapType, OpenFile: openSegmentFile}, opts.Logger)
	if err != nil {
		return nil, nil, err
	}
	db.NoSync, db.NoGrowSync = false, false
	headHash, err := hex.DecodeString(seal.HeadHash)
	if err != nil || len(headHash) != 32 {
		db.Close()
		return nil, nil, errors.New("audit: malformed seal head hash")
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		for _, b := range [][]byte{bucketRecords, bucketHashes} {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		tree, err := tx.CreateBucket(bucketTree)
		if err != nil {
			return err
		}
		last := seqKey(seal.Last)
		lastTime := []byte(seal.LastTime.UTC().Format(TimeLayout))
		for _, kv := range [][2][]byte{
			{metaFormat, []byte(formatMagic)},
			{metaNode, []byte(opts.Node)},
			{metaSegment, seqKey(seal.Segment + 1)},
			{metaBaseSeq, last},
			{metaBaseHash, headHash},
			{metaBaseTime, lastTime},
			{metaBaseRoot, seal.Root[:]},
			{metaHeadSeq, last},
			{metaHeadHash, headHash},
			{metaHeadTime, lastTime},
			{metaTreeSize, last},
		} {
			if err := meta.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		for idx, h := range frontier {
			if err := tree.Put(treeKey(idx), h); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, tail, nil
}

// finishSealed makes sealed segment s, moved to dst, immutable: close the
// writer's handle, trim the file to its pages in use, chmod 0400, fsync,
// reopen read-only.
func (l *Log) finishSealed(s *segment, dst string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var used int64 // pages up to the high-water mark: bbolt preallocates beyond it
	if s.db != nil {
		if err := s.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
			return err
		}
		if err := s.db.Close(); err != nil {
			return err
		}
		s.db = nil
	}
	s.path = dst
	if err := trimToPages(dst, used); err != nil {
		return err
	}
	if err := makeReadOnly(dst); err != nil {
		return err
	}
	db, err := openReadOnlyTimeout(dst, l.opts.Timeout)
	if err != nil {
		return err
	}
	s.db = db
	return nil
}

// trimToPages cuts the sealed segment file path, not yet read-only, to
// used bytes, its pages in use (the high-water mark tx.Size() of its last
// transaction), if it is longer. The file never grows again: past the
// mark lie only the space bbolt preallocated (up to half of a small file,
// 16 MiB of a large one) and the live segment's zero tail (tail.go). A
// file of exactly tx.Size() bytes is what bbolt's own hot backup
// (tx.WriteTo) writes. Every seal trims its file so, whether it ran to
// its end (finishSealed) or Open completed it after a crash (recoverSeal,
// readOnlySealed). A file without its owner's write permission is left
// as it is (a completion that a second crash stopped after the chmod: the
// file is not opened for writing again). The file is opened as every
// segment is (openSegmentFile): a link in its place is refused, not
// followed, and a file that is no bbolt database (checkBoltFile, which
// reads it: hence O_RDWR, not O_WRONLY) is not cut.
func trimToPages(path string, used int64) error {
	if used <= 0 {
		return nil
	}
	fi, err := statSegment(path)
	if err != nil || fi.Size() <= used || fi.Mode().Perm()&0o200 == 0 {
		return err
	}
	f, err := openSegmentFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(used); err != nil {
		return err
	}
	return f.Sync()
}

// statSegment is the FileInfo of segment file path, opened read-only as
// every segment is (openSegmentFile).
func statSegment(path string) (os.FileInfo, error) {
	f, err := openSegmentFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// pagesInUse is the high-water mark (tx.Size()) of the segment file path,
// opened read-only.
func pagesInUse(path string, timeout time.Duration) (int64, error) {
	db, err := openReadOnlyTimeout(path, timeout)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var used int64
	err = db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	return used, err
}

// linkSealed gives the sealed segment file src (the live path) its sealed
// name dst as a second hard link, so that the live path never goes
// missing: the next segment's rename over src, atomic, then replaces it.
// Readers that look at the live path while the server rolls (an auditor's
// command checking --data-dir, a backup script) always find a file. A dst
// that is already src (a link made before a crash) is accepted; any other
// dst is refused, never replaced. Where the file system refuses hard links
// the file is renamed instead, and the live path is missing for the moment
// until the next segment takes its place (logged).
func (l *Log) linkSealed(src, dst string) error {
	err := linkFile(src, dst)
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		a, errA := os.Stat(src)
		b, errB := os.Stat(dst)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return nil
		}
		return fmt.Errorf("sealed segment %s exists already and is another file: refusing to replace it", dst)
	}
	switch _, serr := os.Lstat(dst); {
	case serr == nil:
		return fmt.Errorf("sealed segment %s exists already: refusing to replace it (link: %w)", dst, err)
	case !errors.Is(serr, fs.ErrNotExist):
		return fmt.Errorf("sealed segment %s: %w (and it cannot be checked: %w)", dst, err, serr)
	}
	l.log.Warn("audit: the file system refused a hard link for the sealed segment; renaming it (the live path is missing until the next segment takes its place)", "err", err)
	return os.Rename(src, dst)
}

// linkFile is os.Link; a test replaces it to play a file system without
// hard links.
var linkFile = os.Link

// makeReadOnly sets mode 0400 on a sealed file and fsyncs it, through a
// descriptor opened as every segment is (openSegmentFile): a writer running
// as root (an auditor command on a stopped server) that chmods sealed files
// must not follow a symbolic link put in their place to another file.
func makeReadOnly(path string) error {
	f, err := openSegmentFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chmod(0o400); err != nil {
		return err
	}
	return f.Sync()
}

// sealPaths prepares file src (sealed segment no of the log at path) for
// its move: read-only mode bits and fsync; it creates the sealed directory
// and returns the destination.
func sealPaths(path string, no uint64, src string) (string, error) {
	if err := makeReadOnly(src); err != nil {
		return "", err
	}
	dir := SealedDir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return filepath.Join(dir, SegmentFile(no)), nil
}

// writeSealNote writes the seal note (signed when a SealSigner is set)
// beside sealed segment s, atomically, unless it is there already.
func (l *Log) writeSealNote(s *segment, seal Seal) error {
	s.mu.RLock()
	path := s.path
	s.mu.RUnlock()
	return l.writeSealNoteAt(path, seal)
}

// writeSealNoteAt writes the seal note of the sealed segment file path.
func (l *Log) writeSealNoteAt(path string, seal Seal) error {
	dst := sealNotePath(path)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	text := seal.Body()
	if l.opts.SealSigner != nil {
		signed, err := note.Sign(&note.Note{Text: string(text)}, l.opts.SealSigner)
		if err != nil {
			l.log.Error("audit seal not signed; the note is written unsigned", "segment", seal.Segment, "err", err)
		} else {
			text = signed
		}
	}
	return durable.WriteFile(dst, text, 0o400)
}

// sealNotePath is the seal note beside segment file path (k.db -> k.seal).
func sealNotePath(path string) string {
	return path[:len(path)-len(filepath.Ext(path))] + ".seal"
}

// recoverSeal completes or rolls back a seal a crash interrupted (see the
// steps above), before Open opens the live segment.
func (l *Log) recoverSeal() error {
	next := l.path + nextSuffix
	fiLive, errLive := os.Stat(l.path)
	_, errNext := os.Stat(next)
	switch {
	case errors.Is(errLive, os.ErrNotExist) && errNext == nil:
		l.log.Warn("audit: completing an interrupted seal (moving the next segment in place)")
		if err := os.Rename(next, l.path); err != nil {
			return fmt.Errorf("audit: complete seal: %w", err)
		}
		return durable.SyncDir(filepath.Dir(l.path))
	case errLive != nil:
		return nil // a new log, or an error Open reports
	}
	// Only read here. A file without its owner's write permission is a
	// sealed one whose completion a second kill stopped after sealPaths
	// made it read-only: opened for writing, it kept a server running as
	// its own account (not root) from starting, "permission denied".
	db, err := bolt.Open(l.path, 0o600, &bolt.Options{Timeout: l.opts.Timeout, FreelistType: bolt.FreelistMapType, OpenFile: openSegmentFile,
		ReadOnly: fiLive.Mode().Perm()&0o200 == 0})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return fmt.Errorf("%w (waited %s)", ErrLocked, l.opts.Timeout)
		}
		return fmt.Errorf("audit: open: %w", err)
	}
	var sealText []byte
	var frontier map[int64][]byte
	var used int64 // the pages in use, to trim the file to as the seal does
	err = db.View(func(tx *bolt.Tx) error {
		used = tx.Size()
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return nil
		}
		m, err := readSegmentMeta(meta)
		if err != nil || m.seal == nil {
			return err
		}
		sealText = m.seal
		seal, err := ParseSeal(sealText, nil)
		if err != nil {
			return &CorruptError{Kind: KindSealMismatch, Detail: err.Error()}
		}
		frontier = map[int64][]byte{}
		n, tree := int64(seal.Last), tx.Bucket(bucketTree)
		for lv := 0; n>>uint(lv) > 0; lv++ {
			if n>>uint(lv)&1 == 1 {
				idx := tlog.StoredHashIndex(lv, (n>>uint(lv+1)<<uint(lv+1))>>uint(lv))
				frontier[idx] = bytes.Clone(tree.Get(treeKey(idx)))
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return err
	}
	if sealText == nil {
		db.Close()
		if errNext == nil {
			l.log.Warn("audit: rolling back an interrupted seal (before its commit point; nothing was sealed)")
			if err := os.Remove(next); err != nil {
				return fmt.Errorf("audit: roll back seal: %w", err)
			}
		}
		return nil
	}
	seal, _ := ParseSeal(sealText, nil)
	l.log.Warn("audit: completing an interrupted seal", "segment", seal.Segment)
	// The next segment is made afresh, also when one is there: while the
	// live path holds the sealed segment it has taken no record (appends
	// wait for step 5's rename), and one this completion was killed
	// making is empty or lacks its buckets; renamed over the live path it
	// kept the log from opening (segment_damaged, or a new log that does
	// not follow the sealed segments).
	{
		nd, _, err := createNext(next, l.opts, seal, frontier, l.opts.Timeout)
		if err != nil {
			db.Close()
			return fmt.Errorf("audit: complete seal: %w", err)
		}
		nd.Close()
	}
	if err := db.Close(); err != nil {
		return err
	}
	// As finishSealed does, before sealPaths makes the file read-only.
	err = trimToPages(l.path, used)
	var dst string
	if err == nil {
		dst, err = sealPaths(l.path, seal.Segment, l.path)
	}
	if err == nil && sealCrash != nil {
		err = sealCrash(completeReadOnly)
	}
	if err == nil {
		err = l.linkSealed(l.path, dst)
	}
	if err == nil {
		err = durable.SyncDir(filepath.Dir(dst))
	}
	if err == nil {
		err = os.Rename(next, l.path)
	}
	if err == nil {
		err = durable.SyncDir(filepath.Dir(l.path))
	}
	if err != nil {
		return fmt.Errorf("audit: complete seal: %w", err)
	}
	return nil
}

// readOnlySealed trims every sealed segment file in the sealed directory
// that is not read-only yet to its pages (trimToPages) and makes it
// read-only: a seal interrupted after its link or rename left it so. A
// file whose pages cannot be read is left as long as it is (the readers
// that open it say what is wrong with it).
func readOnlySealed(path string, timeout time.Duration) error {
	files, err := segmentFilesIn(SealedDir(path))
	if err != nil {
		return err
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() == 0o400 {
			continue
		}
		if used, err := pagesInUse(f, timeout); err == nil {
			if err := trimToPages(f, used); err != nil {
				return fmt.Errorf("audit: sealed segment %s: %w", filepath.Base(f), err)
			}
		}
		if err := makeReadOnly(f); err != nil {
			return fmt.Errorf("audit: sealed segment %s: %w", filepath.Base(f), err)
		}
	}
	return nil
}

// notePointer records the archive directory in the sealed directory, so
// that readers given only the live segment's path find archived segments.
func (l *Log) notePointer() error {
	abs, err := filepath.Abs(l.opts.ArchiveDir)
	if err != nil {
		return err
	}
	dir := SealedDir(l.path)
	if archiveDirOf(dir) == abs {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("audit: sealed directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return fmt.Errorf("audit: archive directory: %w", err)
	}
	return durable.WriteFile(filepath.Join(dir, archivePointer), []byte(abs+"\n"), 0o600)
}

// archivePending writes missing seal notes and archives every sealed
// segment still in the sealed directory.
func (l *Log) archivePending(ctx context.Context) error {
	l.roll.mu.Lock()
	defer l.roll.mu.Unlock()
	var errs []error
	for _, s := range l.segments() {
		s.mu.RLock()
		seal := s.seal.Load()
		s.mu.RUnlock()
		if seal == nil {
			continue
		}
		if err := l.writeSealNote(s, *seal); err != nil {
			l.segmentFailed(SegmentSealNote)
			errs = append(errs, err)
			continue
		}
		if err := l.archive(ctx, s); err != nil {
			l.segmentFailed(SegmentArchive)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// archive moves sealed segment s (and its seal note) into the archive
// directory, if one is configured and s is not there yet: copy, fsync,
// compare the copy's SHA-256 with the original's, rename into place
// (0400), fsync the directory, switch readers to the copy, and only then
// remove the original.
func (l *Log) archive(ctx context.Context, s *segment) error {
	if l.opts.ArchiveDir == "" {
		return nil
	}
	s.mu.RLock()
	src, seal := s.path, s.seal.Load()
	s.mu.RUnlock()
	if seal == nil || filepath.Dir(src) != SealedDir(l.path) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dst := filepath.Join(l.opts.ArchiveDir, SegmentFile(seal.Segment))
	for _, pair := range [][2]string{{src, dst}, {sealNotePath(src), sealNotePath(dst)}} {
		if err := copyVerified(pair[0], pair[1]); err != nil {
			return err
		}
	}
	db, err := openReadOnlyTimeout(dst, l.opts.Timeout)
	if err != nil {
		return err
	}
	s.mu.Lock()
	old := s.db
	s.db, s.path = db, dst
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
	// The segment before its note: a reader that lists the sealed
	// directory meanwhile finds either both or the segment in the archive
	// (CheckSeals reads an archived note when the sealed one is gone).
	for _, p := range []string{src, sealNotePath(src)} {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	l.log.Info("audit segment archived", "segment", seal.Segment)
	return durable.SyncDir(filepath.Dir(src))
}

// copyVerified copies src to dst durably (read-only mode bits) and checks
// that the copy has the original's SHA-256. An existing dst with the same
// digest is kept; one with another digest is never replaced (archived
// evidence, e.g. of a log a restore replaced): that is an error.
func copyVerified(src, dst string) error {
	want, err := regularfile.Sum256(src)
	if err != nil {
		return err
	}
	if got, err := regularfile.Sum256(dst); err == nil {
		if got != want {
			return fmt.Errorf("audit: the archive already holds a different %s; it is never replaced (move it aside by hand if it belongs to another log)", filepath.Base(dst))
		}
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	// The archive directory is the service account's, and root archives
	// when it runs an auditor command: the copy is made afresh (a stale
	// one, or anything put in its place, is removed by name first) with
	// O_EXCL, which follows no symbolic link, chmodded on its descriptor,
	// and given to the directory's owner as a segment file root creates is
	// (openSegmentFile). Opened with O_CREATE|O_TRUNC, a link at the
	// temporary name had root truncate, overwrite and chmod its target,
	// and a root-owned 0400 copy kept serve out of its archived log.
	tmp := dst + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	owner.Match(out, dst)
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if err == nil {
		err = out.Chmod(0o400)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		var got [32]byte
		if got, err = regularfile.Sum256(tmp); err == nil && got != want {
			err = fmt.Errorf("audit: archive copy of %s differs from the original", filepath.Base(src))
		}
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return durable.SyncDir(filepath.Dir(dst))
}
