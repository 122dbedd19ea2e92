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
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/internal/partialdir"
)

// ReadManifest reads dir's manifest strictly.
func ReadManifest(dir string) (Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileManifest))
	if errors.Is(err, os.ErrNotExist) {
		if _, derr := os.Stat(dir); derr == nil {
			// e.g. a data directory given as --from
			return Manifest{}, fmt.Errorf("backup: %s is not a backup: it has no %s ('custos backup --out' writes one)", dir, FileManifest)
		}
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	var m Manifest
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %s: %v", ErrUnverified, FileManifest, err)
	}
	if m.Format != Format {
		return Manifest{}, fmt.Errorf("%w: %s: format %q, want %q", ErrUnverified, FileManifest, m.Format, Format)
	}
	return m, nil
}

// Report is what Verify found: every problem, and what was checked.
type Report struct {
	Manifest Manifest `json:"manifest"`
	Problems []string `json:"problems"`
	// Signatures says whether the latest checkpoint's signature was
	// checked (verifier keys were given).
	Signatures bool `json:"signatures"`
}

// Verify checks the backup in dir and reports every problem found (see the
// package invariants). With verifiers it also checks the signatures of the
// checkpoints (checkpoint.CheckAgainst); without, their roots only. The
// error is ErrUnverified (with the problems) when the backup does not
// verify, another error when it cannot be read at all.
func Verify(ctx context.Context, dir string, verifiers note.Verifiers) (Report, error) {
	return verify(ctx, dir, verifiers, nil)
}

// verify is Verify reporting its progress to progress (nil: none): the
// files hashed (StepHash), then the audit copy's records (StepVerify).
func verify(ctx context.Context, dir string, verifiers note.Verifiers, progress func(Progress)) (Report, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Manifest: m, Problems: []string{}, Signatures: verifiers != nil}
	bad := func(format string, args ...any) { rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...)) }

	listed := map[string]bool{FileManifest: true}
	hashing := newStep(progress, StepHash, filesBytes(m), false)
	for _, f := range m.Files {
		if listed[f.Name] || !validName(f.Name) {
			bad("%s: listed twice or not a plain name", f.Name)
			continue
		}
		listed[f.Name] = true
		size, sum, err := hashFile(filepath.Join(dir, f.Name), hashing)
		switch {
		case err != nil:
			bad("%s: %v", f.Name, err)
		case size != f.Bytes || sum != f.SHA256:
			bad("%s: %d bytes, SHA-256 %s; the manifest says %d bytes, %s", f.Name, size, sum, f.Bytes, f.SHA256)
		}
	}
	for _, need := range []string{FileAudit, FileCatalog, FileCheckpoints} {
		if !listed[need] {
			bad("%s: missing from the manifest", need)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == DirSealed && e.IsDir() {
			sealed, _ := os.ReadDir(filepath.Join(dir, DirSealed))
			for _, e := range sealed {
				if name := DirSealed + "/" + e.Name(); !listed[name] {
					bad("%s: not in the manifest", name)
				}
			}
			continue
		}
		if !listed[e.Name()] {
			bad("%s: not in the manifest", e.Name())
		}
	}
	if len(rep.Problems) > 0 {
		return rep, unverified(rep)
	}
	hashing.finish()

	verifyAudit(ctx, dir, m, verifiers, bad, newStep(progress, StepVerify, int64(m.Audit.HeadSeq), true))
	for _, name := range []string{FileCatalog, FileGrants} {
		if listed[name] {
			for _, err := range checkBolt(filepath.Join(dir, name)) {
				bad("%s: %v", name, err)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if len(rep.Problems) > 0 {
		return rep, unverified(rep)
	}
	return rep, nil
}

func unverified(rep Report) error {
	return fmt.Errorf("%w: %s", ErrUnverified, strings.Join(rep.Problems, "; "))
}

// verifyAudit checks the audit copy: every record (audit.VerifyFile), the
// head and tree against the manifest, the access record, and the
// checkpoints.
func verifyAudit(ctx context.Context, dir string, m Manifest, verifiers note.Verifiers, bad func(string, ...any), step *stepMeter) {
	path := filepath.Join(dir, FileAudit)
	sum, err := audit.VerifyFilePaced(ctx, path, func(p audit.Problem) { bad("%s: %s", FileAudit, p) }, step.pace())
	if err != nil {
		bad("%s: %v", FileAudit, err)
		return
	}
	step.finish()
	if sum.HeadSeq != m.Audit.HeadSeq || sum.HeadHash != m.Audit.HeadHash {
		bad("%s: head %d %s; the manifest says %d %s", FileAudit, sum.HeadSeq, sum.HeadHash, m.Audit.HeadSeq, m.Audit.HeadHash)
	}
	if sum.Problems > 0 {
		return
	}
	log, err := audit.Open(path, audit.Options{ReadOnly: true})
	if err != nil {
		bad("%s: %v", FileAudit, err)
		return
	}
	defer log.Close()
	size, root, err := log.TreeHead(ctx)
	if err != nil || size != m.Audit.TreeSize || root != m.Audit.TreeRoot {
		bad("%s: tree %d %s (%v); the manifest says %d %s", FileAudit, size, root, err, m.Audit.TreeSize, m.Audit.TreeRoot)
		return
	}
	if m.Access.Seq == 0 || m.Access.Seq > m.Audit.HeadSeq {
		bad("%s: the access record %d is not in the copy (head %d)", FileAudit, m.Access.Seq, m.Audit.HeadSeq)
	} else {
		err := log.Records(ctx, m.Access.Seq, m.Access.Seq, func(_ uint64, canonical []byte) error {
			if h := audit.HashRecord(canonical); h != m.Access.Hash {
				return fmt.Errorf("record %d hashes to %s, the access record was %s", m.Access.Seq, h, m.Access.Hash)
			}
			if r, err := audit.Decode(canonical); err != nil || r.Action != ActionBackup {
				return fmt.Errorf("record %d is not a %q access record", m.Access.Seq, ActionBackup)
			}
			return nil
		})
		if err != nil {
			bad("%s: %v", FileAudit, err)
		}
	}
	es, err := ReadCheckpoints(dir)
	if err != nil {
		bad("%s: %v", FileCheckpoints, err)
		return
	}
	if len(es) != m.Checkpoints {
		bad("%s: %d checkpoints; the manifest says %d", FileCheckpoints, len(es), m.Checkpoints)
	}
	if n := len(es); n > 0 {
		l := es[n-1]
		if m.Checkpoint == nil || l.Size != m.Checkpoint.Size || l.Root != m.Checkpoint.Root {
			bad("%s: the latest checkpoint is %d %s; the manifest says %+v", FileCheckpoints, l.Size, l.Root, m.Checkpoint)
		}
	}
	var uk *checkpoint.UnknownKeyError
	if err := CheckTree(ctx, log, es, verifiers); errors.As(err, &uk) {
		// The keys given, not the copy, are the likely cause: say so
		// first ("not consistent" read as a fork).
		bad("%s: the latest checkpoint is signed by a key that is not among the verifier keys (%s): give the keys of every version of that origin's signing key; "+
			"if they are the right keys, it was not signed by this log's key: %v", FileCheckpoints, uk.SignedBy(), err)
	} else if err != nil {
		bad("%s: not consistent with %s: %v", FileAudit, FileCheckpoints, err)
	}
	// Each seal note beside a sealed segment must state the seal stored in
	// that segment: a note swapped with another segment's, edited or
	// missing is restored as it is and fails 'audit verify' afterwards.
	// Content only: the stored seals are checked with the records above;
	// the notes' signatures are 'audit verify --pubkey's to check (a note
	// left unsigned when signing failed at seal time is not a reason to
	// refuse a restore).
	for _, p := range log.CheckSeals(nil) {
		bad("%s: %s", FileAudit, p)
	}
}

// ActionBackup is the action of a backup's access record.
const ActionBackup = "backup"

// ReadCheckpoints reads a backup's checkpoints.jsonl: complete lines only,
// rollback acknowledgements applied (checkpoint.Current).
func ReadCheckpoints(dir string) ([]checkpoint.Entry, error) {
	path := filepath.Join(dir, FileCheckpoints)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Checked against the manifest before it is parsed: a damaged copy is
	// a backup that does not verify, not an anchor file to repair.
	if err := matchesManifest(dir, FileCheckpoints, b); err != nil {
		return nil, err
	}
	es, err := checkpoint.ReadEntries(bytes.NewReader(b), path)
	if err != nil {
		return nil, err
	}
	return checkpoint.Current(es)
}

// matchesManifest checks that b, the content of the backup file name, has
// the size and SHA-256 dir's manifest lists for it (ErrUnverified).
func matchesManifest(dir, name string, b []byte) error {
	m, err := ReadManifest(dir)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(m.Files, func(f File) bool { return f.Name == name })
	if i < 0 {
		return fmt.Errorf("%w: %s: missing from the manifest", ErrUnverified, name)
	}
	sum := sha256.Sum256(b)
	if f := m.Files[i]; int64(len(b)) != f.Bytes || hex.EncodeToString(sum[:]) != f.SHA256 {
		return fmt.Errorf("%w: %s: %d bytes, SHA-256 %x; the manifest says %d bytes, %s", ErrUnverified, name, len(b), sum, f.Bytes, f.SHA256)
	}
	return nil
}

// CheckTree checks tree against entries: with verifiers as the server does
// at startup (checkpoint.CheckAgainst); without, every entry's root must be
// the tree's at its size, and none may be larger than the tree.
func CheckTree(ctx context.Context, tree checkpoint.Tree, entries []checkpoint.Entry, verifiers note.Verifiers) error {
	if verifiers != nil {
		return checkpoint.CheckAgainst(ctx, tree, entries, verifiers)
	}
	size, _, err := tree.TreeHead(ctx)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Size > size {
			return &checkpoint.RolledBackError{LocalSize: size, Anchored: e}
		}
		h, err := tree.TreeHash(e.Size)
		if err != nil {
			return err
		}
		if h != e.Root {
			return &checkpoint.ForkError{Size: e.Size, A: checkpoint.Side{Source: e.Location(), Root: e.Root, Note: e.Note}, B: checkpoint.Side{Source: "backup audit tree", Root: h}}
		}
	}
	return nil
}

// checkBolt runs bbolt's consistency check on a read-only open of path.
func checkBolt(path string) []error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: DefaultTimeout})
	if err != nil {
		return []error{err}
	}
	defer db.Close()
	var errs []error
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return errs
}

// DefaultTimeout bounds the wait for a file lock.
const DefaultTimeout = 5 * time.Second

// filesBytes is the size of m's files together.
func filesBytes(m Manifest) int64 {
	var n int64
	for _, f := range m.Files {
		n += max(f.Bytes, 0)
	}
	return n
}

// hashFile hashes the file at path, counting its bytes into step.
func hashFile(path string, step *stepMeter) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, step.reader(f))
	return n, hex.EncodeToString(h.Sum(nil)), err
}

// maxFile bounds one file read from a backup stream.
const maxFile = 1 << 50

// Staged is a backup received into a temporary directory beside its
// destination, not yet verified or in place. Its lifecycle is
// partialdir.Staged's: call Discard always (deferred), also after Commit.
type Staged struct {
	staged *partialdir.Staged
	dir    string // the temporary directory (staged.Dir())
	// Removed lists the partial directories of interrupted earlier backups
	// to the same destination that Receive removed.
	Removed []string
	// Progress, if set, receives Commit's progress: the verification's
	// steps (StepHash, StepVerify).
	Progress func(Progress)
}

// Receive unpacks the backup stream r (Write's output) into a new
// temporary directory beside out, each file fsynced. out must not exist or
// be an empty directory (ErrExists). On failure nothing is left behind.
// Call Commit once the stream is known complete (the transport reported
// success), and Discard in any case. The temporary directory is locked
// until Discard; the unlocked ones a killed backup to the same out left
// behind (copies of the catalog and the audit log) are removed first
// (Staged.Removed).
func Receive(r io.Reader, out string) (*Staged, error) {
	out = filepath.Clean(out)
	if err := CheckDest(out); err != nil {
		return nil, err
	}
	ps, err := partialdir.Stage(out)
	if errors.Is(err, partialdir.ErrTaken) {
		// Another backup to the same --out took the new directory for one
		// left behind (its clock says it is old: a skewed file system
		// clock) and is removing it.
		return nil, fmt.Errorf("backup: the staging directory beside %s was locked by another backup to it, which took it for one left behind (is the file system's clock skewed?); retry", filepath.Base(out))
	}
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	s := &Staged{staged: ps, dir: ps.Dir(), Removed: ps.Removed()}
	if err := unpack(r, s.dir); err != nil {
		s.Discard()
		return nil, err
	}
	return s, nil
}

// CheckDest fails with ErrExists unless out is missing or an empty
// directory, and with another error when out is a symbolic link: call it
// before asking for a backup stream.
func CheckDest(out string) error {
	if fi, err := os.Lstat(out); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		// The backup is renamed into place at the end: over a link it
		// would fail only after the whole copy was taken and audited.
		link, _ := os.Readlink(out)
		return fmt.Errorf("backup: %s is a symbolic link (to %s), not a directory: name the directory itself", out, link)
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return fmt.Errorf("%w: %s", ErrExists, out)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// Discard removes the staged directory unless Commit put it in place (and
// no Withdraw took it back), and releases its lock the first time. Safe
// to call more than once.
func (s *Staged) Discard() { s.staged.Discard() }

// Commit verifies the staged backup (Verify, with verifiers if given),
// fsyncs its directory and renames it to its destination. If it does not
// verify, or anything fails, the staged directory is removed and nothing
// is left at the destination; the report says what failed. The one
// exception: renamed into place, its parent's fsync failed and it could
// not be taken back: it is left there, complete and verified, and the
// error is a *partialdir.NotTakenBackError.
func (s *Staged) Commit(ctx context.Context, verifiers note.Verifiers) (Report, error) {
	rep, err := verify(ctx, s.dir, verifiers, s.Progress)
	if err != nil {
		s.Discard()
		return rep, err
	}
	if err := s.staged.Publish(CheckDest); err != nil {
		s.Discard()
		if errors.Is(err, ErrExists) {
			return rep, err
		}
		return rep, fmt.Errorf("backup: %w", err)
	}
	return rep, nil
}

// Withdraw takes back the backup Commit put in place, for a command that
// fails after it (its report could not be printed):
// partialdir.Staged.Withdraw (renamed back, removed, an empty out given
// made again; one renamed back but not removed is removed by Discard).
// Before Commit, or again, it is an error.
func (s *Staged) Withdraw() error { return s.staged.Withdraw() }

// unpack writes the flat regular files of a tar stream into dir, and
// fsyncs them once the stream has ended: the server holds a read
// transaction on the audit log until it has sent the whole stream, and
// stops a caller that does not read for its stall limit (admin), so a
// slow disk's flush of a large file must not come between two files.
func unpack(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("backup: stream: %w", err)
		}
		name := h.Name
		if h.Typeflag != tar.TypeReg || !validName(name) ||
			h.Size < 0 || h.Size > maxFile || slices.Contains(names, name) {
			return fmt.Errorf("backup: stream: unexpected entry %q", name)
		}
		names = append(names, name)
		if filepath.Base(name) != name {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o700); err != nil {
				return fmt.Errorf("backup: %w", err)
			}
		}
		if err := writeFile(filepath.Join(dir, name), tr, h.Size); err != nil {
			return err
		}
	}
	if !slices.Contains(names, FileManifest) {
		return fmt.Errorf("backup: stream: no %s (the backup ended early)", FileManifest)
	}
	for _, name := range names {
		if err := syncFile(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes size bytes of r to a new file at path (not fsynced:
// unpack syncs every file after the stream).
func writeFile(path string, r io.Reader, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: writing %s: %w", filepath.Base(path), err)
	}
	return nil
}

// syncFile fsyncs the file at path.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: syncing %s: %w", filepath.Base(path), err)
	}
	return nil
}
