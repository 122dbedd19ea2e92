package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/checkpoint"
)

// Files of a backup (and of the data directory they come from).
const (
	FileAudit       = "audit.db"
	FileCatalog     = "catalog.db"
	FileGrants      = "grants.db"
	FileDevKeys     = "dev-keys.json" // secrets.DevKeyFile
	FileCheckpoints = checkpoint.FileName
	FileManifest    = "manifest.json"
	// DirSealed holds the sealed audit segments (audit.SealedDir), the
	// one directory in a backup: DirSealed/NNNNNN.db and NNNNNN.seal.
	DirSealed = "audit.sealed"
)

// validName reports whether name may appear in a backup: a plain file
// name, or a sealed segment or seal note under DirSealed.
func validName(name string) bool {
	if strings.HasPrefix(name, DirSealed+"/") {
		name = strings.TrimPrefix(name, DirSealed+"/")
		return sealedName.MatchString(name)
	}
	return name != "" && name == filepath.Base(name) && !strings.HasPrefix(name, ".")
}

var sealedName = regexp.MustCompile(`^[0-9]{6,}\.(db|seal)$`)

// Format is the manifest's format tag.
const Format = "custos-backup/1"

// The package's error vocabulary.
var (
	// ErrUnverified: the backup does not verify (a file differs from the
	// manifest, the audit copy has problems or does not match its
	// checkpoints, a bbolt copy fails tx.Check). Do not restore it; take a
	// new backup. The error lists every problem found.
	ErrUnverified = errors.New("backup: the backup does not verify")
	// ErrExists: the destination exists and is not empty; nothing was
	// written. Choose a new directory.
	ErrExists = errors.New("backup: the destination exists and is not empty")
	// ErrLocked: a bbolt file could not be opened for reading within the
	// timeout (another process holds it exclusively). Retry.
	ErrLocked = errors.New("backup: a file is locked by another process")
)

// Manifest describes a backup: manifest.json.
type Manifest struct {
	Format  string    `json:"format"`
	Created time.Time `json:"created"`
	Files   []File    `json:"files"`
	// Access is the access record that audits the backup (action
	// "backup"): the copy's view is records 1..Access.Seq and more.
	Access Head `json:"access"`
	// Audit is the audit copy's head and tree at backup time.
	Audit AuditHead `json:"audit"`
	// Checkpoints counts the lines of checkpoints.jsonl; Checkpoint is the
	// latest of them (nil: none anchored yet), which the copy extends.
	Checkpoints int       `json:"checkpoints"`
	Checkpoint  *Anchored `json:"checkpoint,omitempty"`
}

// File is one file of a backup.
type File struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Head names one record.
type Head struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// AuditHead is the head record and Merkle tree of an audit copy.
type AuditHead struct {
	HeadSeq  uint64    `json:"head_seq"`
	HeadHash string    `json:"head_hash"`
	TreeSize int64     `json:"tree_size"`
	TreeRoot tlog.Hash `json:"tree_root"`
}

// Anchored is an anchored checkpoint.
type Anchored struct {
	Size int64     `json:"size"`
	Root tlog.Hash `json:"root"`
	Time time.Time `json:"time"`
}

// Source is what Write copies: the open audit log (held by this process),
// the data directory it lives in, and the backup's access record, already
// durable in the log.
type Source struct {
	Log    *audit.Log
	Dir    string
	Access audit.Record
	// Timeout bounds the wait for the catalog's and grants' locks (zero:
	// 5 s).
	Timeout time.Duration
	Now     func() time.Time // nil: time.Now
}

// Write writes the backup of src to w as a tar archive of flat files, the
// manifest last, and returns the manifest. It stops at its first write
// after ctx is done (also inside a file's copy, the audit log's long read
// transaction included), or within lockPoll if it is waiting for the
// catalog's or grants' lock then, with ctx's error and no manifest
// written.
func Write(ctx context.Context, w io.Writer, src Source) (Manifest, error) {
	w = ctxWriter{ctx: ctx, w: w}
	if src.Timeout == 0 {
		src.Timeout = DefaultTimeout
	}
	if src.Now == nil {
		src.Now = time.Now
	}
	m := Manifest{Format: Format, Created: src.Now().UTC(), Access: Head{Seq: src.Access.Seq, Hash: src.Access.Hash}}
	tw := tar.NewWriter(w)
	add := func(name string, size int64) (io.Writer, func(), error) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: size, ModTime: m.Created, Typeflag: tar.TypeReg}); err != nil {
			return nil, nil, err
		}
		h := sha256.New()
		return io.MultiWriter(tw, h), func() {
			m.Files = append(m.Files, File{Name: name, Bytes: size, SHA256: hex.EncodeToString(h.Sum(nil))})
		}, nil
	}
	// The audit log first: its head bounds the checkpoints copied.
	var done func()
	snap, err := src.Log.WriteSnapshot(func(s audit.Snapshot) (io.Writer, error) {
		w, d, err := add(FileAudit, s.Bytes)
		done = d
		return w, err
	})
	if err != nil {
		return m, fmt.Errorf("backup: copying %s: %w", FileAudit, err)
	}
	done()
	if snap.HeadSeq < src.Access.Seq {
		return m, fmt.Errorf("backup: the audit copy ends at %d, before its own access record %d", snap.HeadSeq, src.Access.Seq)
	}
	m.Audit = AuditHead{HeadSeq: snap.HeadSeq, HeadHash: snap.HeadHash, TreeSize: snap.TreeSize, TreeRoot: snap.TreeRoot}
	// The sealed segments before the copied live one (immutable files),
	// each with its seal note.
	var pending func() // the hash record of the segment being written
	err = src.Log.WriteSealed(snap.Segment, func(s audit.SealedSegment) (io.Writer, error) {
		if pending != nil {
			pending()
		}
		name := path.Join(DirSealed, audit.SegmentFile(s.No))
		if err := addBytes(add, strings.TrimSuffix(name, ".db")+".seal", s.Note); err != nil {
			return nil, err
		}
		w, d, err := add(name, s.Bytes)
		pending = d
		return w, err
	})
	if err != nil {
		return m, fmt.Errorf("backup: copying the sealed audit segments: %w", err)
	}
	if pending != nil {
		pending()
	}
	for _, name := range []string{FileCatalog, FileGrants} {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		err := copyBolt(ctx, filepath.Join(src.Dir, name), src.Timeout, func(size int64) (io.Writer, func(), error) { return add(name, size) })
		if errors.Is(err, os.ErrNotExist) && name == FileGrants {
			continue // no grant was ever made
		}
		if err != nil {
			return m, fmt.Errorf("backup: copying %s: %w", name, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(src.Dir, FileDevKeys)); err == nil {
		if err := addBytes(add, FileDevKeys, b); err != nil {
			return m, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("backup: reading %s: %w", FileDevKeys, err)
	}
	lines, latest, err := anchoredLines(src.Dir, snap.HeadSeq)
	if err != nil {
		return m, err
	}
	m.Checkpoints, m.Checkpoint = bytes.Count(lines, []byte("\n")), latest
	if err := addBytes(add, FileCheckpoints, lines); err != nil {
		return m, err
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	if err := addBytes(add, FileManifest, append(mb, '\n')); err != nil {
		return m, err
	}
	m.Files = m.Files[:len(m.Files)-1] // the manifest does not list itself
	return m, tw.Close()
}

type addFunc func(name string, size int64) (io.Writer, func(), error)

// ctxWriter fails every write once ctx is done: a server that shuts down
// ends a backup in flight (access.Service.Close) without waiting for the
// copy of a large file, which tx.WriteTo writes in chunks.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

func addBytes(add addFunc, name string, b []byte) error {
	w, done, err := add(name, int64(len(b)))
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	done()
	return nil
}

// copyBolt copies the bbolt file at path with tx.WriteTo in one read
// transaction, opening it read-only (a shared lock, compatible with the
// server's read-only catalog and its brief grant updates). It waits up to
// timeout for the lock, and no longer once ctx is done (openShared).
func copyBolt(ctx context.Context, path string, timeout time.Duration, add func(size int64) (io.Writer, func(), error)) error {
	if _, err := os.Stat(path); err != nil {
		return err // bbolt would create a missing file
	}
	db, err := openShared(ctx, path, timeout)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		w, done, err := add(tx.Size())
		if err != nil {
			return err
		}
		n, err := tx.WriteTo(w)
		if err == nil && n != tx.Size() {
			err = fmt.Errorf("wrote %d of %d bytes", n, tx.Size())
		}
		if err == nil {
			done()
		}
		return err
	})
}

// lockPoll is how long each of openShared's attempts waits for the lock:
// how late a backup waiting for a lock notices that ctx is done.
const lockPoll = 100 * time.Millisecond

// openShared opens the bbolt file at path read-only, waiting up to
// timeout for its shared lock (ErrLocked after it), in attempts of
// lockPoll each, so that a server that shuts down meanwhile (ctx done:
// access.Service.Close) ends the wait at once with ctx's error, as it
// ends a copy; bbolt's own Options.Timeout knows no context, and the
// wait held a shutdown up to the whole timeout.
func openShared(ctx context.Context, path string, timeout time.Duration) (*bolt.DB, error) {
	deadline := time.Now().Add(timeout)
	for {
		wait := min(lockPoll, time.Until(deadline))
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: max(wait, time.Millisecond)})
		if !errors.Is(err, berrors.ErrTimeout) {
			return db, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, path)
		}
	}
}

// anchoredLines reads the data directory's anchor file and returns its
// current entries (checkpoint.Current) of size at most head as anchor
// lines, and the latest of them. A torn last line (a checkpoint being
// written) is left out.
func anchoredLines(dir string, head uint64) ([]byte, *Anchored, error) {
	es, err := (&checkpoint.Anchor{Dir: dir}).All()
	var torn *checkpoint.TornError
	if err != nil && !errors.As(err, &torn) {
		return nil, nil, fmt.Errorf("backup: reading the anchored checkpoints: %w", err)
	}
	if es, err = checkpoint.Current(es); err != nil {
		return nil, nil, fmt.Errorf("backup: reading the anchored checkpoints: %w", err)
	}
	var out []byte
	var latest *Anchored
	for _, e := range es {
		if e.Size > int64(head) {
			continue
		}
		l, err := checkpoint.FormatLine(e)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, l...)
		latest = &Anchored{Size: e.Size, Root: e.Root, Time: e.Time}
	}
	return out, latest, nil
}

// EstimateSize is about the number of bytes Write sends for src: the
// sizes, as they are now, of the files it copies (the live audit log and
// every sealed segment with its seal note, those moved to an archive
// directory included; the catalog, grants, dev key and checkpoints files),
// with the archive's headers. It is a progress total, not a promise: the
// copies are taken later (the log grows meanwhile), bbolt copies hold only
// the used pages, and the manifest is not counted.
func EstimateSize(src Source) int64 {
	n := int64(2 * tarBlock) // the archive's end
	add := func(size int64) {
		n += tarBlock + (size+tarBlock-1)/tarBlock*tarBlock // a header, the data padded to a block
	}
	file := func(name string) {
		if st, err := os.Stat(filepath.Join(src.Dir, name)); err == nil && st.Mode().IsRegular() {
			add(st.Size())
		}
	}
	if src.Log != nil {
		// The live file's size is not what a copy holds: its mapping
		// grows it ahead of its pages (audit/mapsize.go).
		if used, err := src.Log.LiveBytes(); err == nil {
			add(used)
		}
		segs, _ := src.Log.SealedSegments()
		for _, s := range segs {
			add(s.Bytes)
			add(int64(len(s.Note)))
		}
	}
	if src.Log == nil {
		file(FileAudit)
	}
	for _, name := range []string{FileCatalog, FileGrants, FileDevKeys, FileCheckpoints} {
		file(name)
	}
	return n
}

// tarBlock is the tar format's block: a header is one, file data is padded
// to a multiple.
const tarBlock = 512
