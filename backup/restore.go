package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/checkpoint"

	"github.com/custos-mcp/custos/internal/durable"
	"github.com/custos-mcp/custos/internal/owner"
)

// ActionRestore is the action of the record a restore appends to the
// restored log.
const ActionRestore = "backup/restore"

// Errors of Restore.
var (
	// ErrBehind: the backup's log is behind a signed checkpoint anchored
	// in the data directory or the external anchor (a rollback: records
	// anchored since were lost). Nothing was changed. Restore a newer
	// backup, or acknowledge the loss (RestoreOptions.AcceptRollback).
	ErrBehind = errors.New("backup: the backup is behind an anchored checkpoint")
	// ErrServing: a process holds the data directory's audit log (a server
	// runs on it). Stop it first; nothing was changed.
	ErrServing = errors.New("backup: the data directory is in use (a server holds its audit log)")
	// ErrDataDirExists: the data directory exists and is not empty, and
	// Force was not given. Nothing was changed.
	ErrDataDirExists = errors.New("backup: the data directory exists and is not empty")
	// ErrAnchorUnchecked: an external anchor named holds no checkpoint
	// (its checkpoints.jsonl is missing or empty) while the backup or the
	// data directory has some, so the backup cannot be checked against it
	// (an anchor not mounted, the wrong directory, or its checkpoints
	// removed). Nothing was changed. Name the anchor that holds them.
	ErrAnchorUnchecked = errors.New("backup: an anchor named holds no checkpoint to check the backup against")
)

// RestoreOptions configures Restore.
type RestoreOptions struct {
	From    string // the backup directory
	DataDir string // the data directory to restore into
	// Anchors are the external anchor directories (the server's
	// --anchor-dir); the data directory's own anchor file, if any, is read
	// too. An anchor that is configured must be named: one left out is
	// not checked. A named directory that is missing is refused, and so
	// is one that holds no checkpoint while the backup or the data
	// directory has some (ErrAnchorUnchecked); with no checkpoint
	// anywhere, one that holds nothing cannot be told from a missing
	// checkpoints.jsonl.
	Anchors []string
	// Verifiers check the checkpoints' signatures (required).
	Verifiers note.Verifiers
	// AcceptRollback, when not empty, is the operator's reason for
	// restoring a backup that is behind the anchors; Signer (named as the
	// checkpoints' origin) then signs the checkpoint and the
	// acknowledgement. Signer is called only then.
	AcceptRollback string
	Signer         func(origin string) (note.Signer, error)
	// Force replaces an existing data directory, which is kept beside it
	// (RestoreResult.Replaced).
	Force bool
	// Account is the OS account recorded as the restore's principal
	// ("os:uid=…"), Purpose its purpose of use, Node the records' node.
	Account, Purpose, Node string
	Now                    func() time.Time // nil: time.Now
	// Progress, if set, receives the progress of the long steps: the
	// backup's verification (StepHash, StepVerify), the copy (StepCopy)
	// and the startup checks of the restored log (StepCheck). Counts only.
	Progress func(Progress)
	// Timeout bounds the wait for the data directory's lock (zero: 1 s).
	Timeout time.Duration
}

// RestoreResult says what Restore did.
type RestoreResult struct {
	Manifest Manifest `json:"manifest"`
	// Behind is the largest anchored checkpoint the backup was behind
	// (nil: none; the backup extends every anchored checkpoint).
	Behind *Anchored `json:"behind,omitempty"`
	// Record is the restore's own audit record (seq = the backup's head + 1).
	Record Head `json:"record"`
	// Acknowledged says that a rollback acknowledgement was signed and
	// anchored (in the data directory and every external anchor).
	Acknowledged bool `json:"acknowledged"`
	// Replaced is where the data directory that was replaced now is.
	Replaced string `json:"replaced,omitempty"`
}

// Restore restores the backup From into DataDir, all or nothing:
//
//  1. the backup verifies (Verify, with signatures);
//  2. DataDir is not in use, and empty unless Force; its audit log, if it
//     has one, stays open read-only (its lock held shared) until step 5 is
//     done, so that no server can start on it meanwhile (with no log that
//     opens read-only, or no lock file beside it, its lock file is held
//     exclusively: audit.Hold);
//  3. the backup's log is checked against every checkpoint anchored in
//     DataDir and in Anchors: those at or below its head must match
//     (checkpoint.CheckAgainst; a fork is always refused); any larger one
//     means the backup is behind (ErrBehind), unless AcceptRollback;
//  4. the files are staged in a new directory beside DataDir, and the
//     restore appends its own record (ActionRestore: the backup, its head,
//     the anchored size it is behind, the reason, the account) to the
//     staged log. Behind and acknowledged, it signs the checkpoint of the
//     log with that record and a rollback acknowledgement
//     (checkpoint.Rollback), and anchors them in the staged directory and
//     then in every external anchor;
//  5. the staged directory is checked as serve will check it (every
//     record; checkpoint.Load and CheckAgainst over all anchors), and only
//     then swapped in (an existing DataDir is renamed aside first).
//
// If step 4 anchored the acknowledgement in an external anchor (in any of
// them: also when anchoring it in a later one failed) and anything then
// fails, the staged directory is kept and named in the error: it is
// complete, and that anchor already expects it.
func Restore(ctx context.Context, o RestoreOptions) (res RestoreResult, err error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout == 0 {
		o.Timeout = time.Second
	}
	if o.Verifiers == nil {
		return res, errors.New("backup: restore needs the checkpoint verifier keys")
	}
	if o.DataDir, err = resolveLink(o.DataDir); err != nil {
		return res, err
	}
	rep, err := verify(ctx, o.From, o.Verifiers, o.Progress)
	if err != nil {
		return res, err
	}
	m := rep.Manifest
	res.Manifest = m
	exists, release, err := checkDataDir(o)
	if err != nil {
		return res, err
	}
	// Held until the data directory is swapped: a server starting on it
	// meanwhile waits for the log's lock and fails, instead of appending
	// the records of what it releases to the directory moved aside (or
	// taking the old directory's lock and the restored log).
	defer release()

	// The anchored checkpoints: the data directory's (if it has one) and
	// every external anchor's.
	anchors := make([]*checkpoint.Anchor, 0, len(o.Anchors)+1)
	if exists {
		anchors = append(anchors, &checkpoint.Anchor{Dir: o.DataDir})
	}
	var unchecked []string // the external anchors that hold no checkpoint
	for _, a := range o.Anchors {
		an := &checkpoint.Anchor{Dir: a}
		anchors = append(anchors, an)
		es, err := checkpoint.Load(an)
		if err != nil {
			return res, fmt.Errorf("backup: reading the anchored checkpoints: %w", err)
		}
		if len(es) == 0 {
			unchecked = append(unchecked, an.Path())
		}
	}
	entries, err := checkpoint.Load(anchors...)
	if err != nil {
		return res, fmt.Errorf("backup: reading the anchored checkpoints: %w", err)
	}
	// An anchor named that holds nothing, beside checkpoints elsewhere,
	// is one not checked (audit verify's UNCHECKED anchor): neither the
	// backup's nor the data directory's checkpoints record which anchors
	// serve wrote to, so a restore that went on would pass on the others
	// alone. With no checkpoint anywhere (a log never checkpointed) there
	// is nothing to tell it from.
	if len(unchecked) > 0 && (m.Checkpoint != nil || len(entries) > 0) {
		return res, fmt.Errorf("%w: %s is missing or holds no checkpoint, but the backup or the data directory has some (an anchor directory not mounted, the wrong directory, or its checkpoints removed); nothing was changed: name the anchor that holds them",
			ErrAnchorUnchecked, strings.Join(unchecked, ", "))
	}
	var upto []checkpoint.Entry
	var behind *checkpoint.Entry
	for _, e := range entries {
		if e.Size <= int64(m.Audit.HeadSeq) {
			upto = append(upto, e)
		} else if behind == nil || e.Size > behind.Size {
			e := e
			behind = &e
		}
	}
	copyLog, err := audit.Open(filepath.Join(o.From, FileAudit), audit.Options{ReadOnly: true})
	if err != nil {
		return res, err
	}
	err = checkpoint.CheckAgainst(ctx, copyLog, upto, o.Verifiers)
	copyLog.Close()
	if err != nil {
		if kerr := unknownKey(err); kerr != nil {
			return res, kerr
		}
		return res, fmt.Errorf("backup: the backup does not match the anchored checkpoints at or below its head %d: %w", m.Audit.HeadSeq, err)
	}
	if behind != nil {
		if _, _, err := checkpoint.Open(behind.Note, o.Verifiers); err != nil {
			err = fmt.Errorf("%s: %w", behind.Location(), err)
			if kerr := unknownKey(err); kerr != nil {
				return res, kerr
			}
			return res, fmt.Errorf("backup: %w", err)
		}
		res.Behind = &Anchored{Size: behind.Size, Root: behind.Root, Time: behind.Time}
		if o.AcceptRollback == "" {
			return res, fmt.Errorf("%w: the backup ends at record %d, but %s anchors a checkpoint of %d records (root %s); the %d records after the backup would be lost. Restore a newer backup, or acknowledge the loss with --accept-rollback REASON (recorded and anchored)",
				ErrBehind, m.Audit.HeadSeq, behind.Location(), behind.Size, behind.Root, behind.Size-int64(m.Audit.HeadSeq))
		}
	}

	staged, err := os.MkdirTemp(filepath.Dir(filepath.Clean(o.DataDir)), "."+filepath.Base(filepath.Clean(o.DataDir))+".restore-")
	if err != nil {
		return res, fmt.Errorf("backup: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(staged)
		}
	}()
	copying := newStep(o.Progress, StepCopy, filesBytes(m), false)
	for _, f := range m.Files {
		if !validName(f.Name) {
			return res, fmt.Errorf("backup: %s: not a plain name", f.Name)
		}
		to := filepath.Join(staged, f.Name)
		if sealed := filepath.Base(f.Name) != f.Name; sealed {
			if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
				return res, fmt.Errorf("backup: %w", err)
			}
		}
		if err := copyFile(filepath.Join(o.From, f.Name), to, copying); err != nil {
			return res, err
		}
		if filepath.Base(f.Name) != f.Name {
			// Sealed segments and their notes are immutable.
			if err := os.Chmod(to, 0o400); err != nil {
				return res, fmt.Errorf("backup: %w", err)
			}
		}
	}
	if err := durable.SyncDir(filepath.Join(staged, DirSealed)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, err
	}
	copying.finish()
	anchored, err := res.record(ctx, o, staged, behind)
	if anchored != "" {
		keep = true // an external anchor now expects this log
	}
	if err != nil {
		if keep {
			return res, fmt.Errorf("%w; the acknowledgement is already anchored in %s, so the staged data directory %s, which it names, is kept: "+
				"once every anchor is writable, append the last line of its checkpoints.jsonl to the anchors that lack it and move it to %s", err, anchored, staged, o.DataDir)
		}
		return res, err
	}
	if err := checkStaged(ctx, staged, o, newStep(o.Progress, StepCheck, int64(m.Audit.HeadSeq)+1, true)); err != nil {
		if keep {
			return res, fmt.Errorf("backup: the staged data directory %s does not pass the startup checks: %w", staged, err)
		}
		return res, err
	}
	// Run as root (docs/operations.md restores so), the restored directory
	// and its files take the owner of the one they replace: root's, serve
	// running as that account could open none of them.
	owner.Tree(staged, o.DataDir)
	if err := durable.SyncDir(staged); err != nil {
		return res, err
	}
	if exists {
		res.Replaced = fmt.Sprintf("%s.replaced-%s", filepath.Clean(o.DataDir), o.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(o.DataDir, res.Replaced); err != nil {
			return res, fmt.Errorf("backup: moving the old data directory aside: %w", err)
		}
	} else if err := os.Remove(o.DataDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(staged, o.DataDir); err != nil {
		keep = true
		return res, fmt.Errorf("backup: moving the restored directory %s into place: %w", staged, err)
	}
	keep = true
	return res, durable.SyncDir(filepath.Dir(filepath.Clean(o.DataDir)))
}

// checkDataDir checks that o.DataDir is not in use and may be replaced; it
// reports whether it exists with something in it. While it holds an audit
// log, checkDataDir keeps that log open read-only, which holds the log's
// lock shared so that no writer (a server starting) can open it, until
// release is called: after the swap. With Force and no log that opens
// read-only, or one without its lock file, it also holds the log's lock
// file exclusively (audit.Hold), for the same end. release is never nil.
func checkDataDir(o RestoreOptions) (exists bool, release func(), err error) {
	release = func() {}
	held := false
	entries, err := os.ReadDir(o.DataDir)
	if errors.Is(err, os.ErrNotExist) {
		return false, release, nil
	}
	if err != nil {
		return false, release, fmt.Errorf("backup: %w", err)
	}
	if len(entries) == 0 {
		return false, release, nil
	}
	if p := filepath.Join(o.DataDir, FileAudit); fileExists(p) {
		l, err := audit.Open(p, audit.Options{ReadOnly: true, Timeout: o.Timeout})
		if errors.Is(err, audit.ErrLocked) {
			return true, release, fmt.Errorf("%w: %s", ErrServing, o.DataDir)
		}
		if err == nil {
			release = func() { l.Close() }
			// Its lock file is held shared only if it was there: a log
			// written by a custos that predates it has none, and a
			// writer would create it and take it at once.
			_, lerr := os.Lstat(audit.LockFile(p))
			held = lerr == nil
		}
	}
	if !o.Force {
		release()
		return true, func() {}, fmt.Errorf("%w: %s (pass --force to replace it; it is kept beside as %s.replaced-TIME)", ErrDataDirExists, o.DataDir, filepath.Clean(o.DataDir))
	}
	if !held {
		// No audit.db, one that does not open read-only (a seal only a
		// writer completes, a migration), or one without its lock file:
		// a server starting now would create or complete the log here,
		// or take a new lock file and wait for bbolt's lock on the
		// audit.db about to be moved aside, and serve from the wrong
		// directory or without the restored log's lock. The lock file,
		// held exclusively, keeps it out.
		unlock, err := audit.Hold(filepath.Join(o.DataDir, FileAudit), o.Timeout)
		if errors.Is(err, audit.ErrLocked) {
			release()
			return true, func() {}, fmt.Errorf("%w: %s", ErrServing, o.DataDir)
		}
		if err != nil {
			release()
			return true, func() {}, fmt.Errorf("backup: holding %s against a server starting on it: %w", o.DataDir, err)
		}
		closeLog := release
		release = func() { unlock(); closeLog() }
	}
	return true, release, nil
}

// resolveLink returns the directory a data directory that is a symbolic
// link names (e.g. /var/lib/custos -> /srv/disk2/custos), so that the
// restore is staged beside it and renamed into it, on its file system,
// where serve will read it. Restoring over the link itself would replace
// the link with a directory on the link's file system and leave the
// target as it was.
func resolveLink(dir string) (string, error) {
	fi, err := os.Lstat(dir)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return dir, nil
	}
	target, err := filepath.EvalSymlinks(dir)
	if err != nil {
		link, _ := os.Readlink(dir)
		return "", fmt.Errorf("backup: the data directory %s is a symbolic link to %s, which does not resolve: create the directory it names, or name another data directory", dir, link)
	}
	return target, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// record appends the restore's record to the staged log and, behind and
// acknowledged, anchors its checkpoint with the acknowledgement. anchored
// names the external anchors that may hold the acknowledgement (the one
// whose append failed too: a failed append may have reached the disk),
// also when it fails: the staged log must then be kept.
func (res *RestoreResult) record(ctx context.Context, o RestoreOptions, staged string, behind *checkpoint.Entry) (anchored string, err error) {
	log, err := audit.Open(filepath.Join(staged, FileAudit), audit.Options{Node: o.Node})
	if err != nil {
		return "", err
	}
	defer log.Close()
	m := res.Manifest
	var why []string
	kv := func(k, v string) {
		if strings.ContainsAny(v, " \"=\t\n") {
			v = strconv.Quote(v)
		}
		why = append(why, k+"="+v)
	}
	kv("backup", o.From)
	kv("head", strconv.FormatUint(m.Audit.HeadSeq, 10))
	kv("head_hash", m.Audit.HeadHash)
	if behind != nil {
		kv("behind", strconv.FormatInt(behind.Size, 10))
		kv("accept_rollback", o.AcceptRollback)
	}
	purpose := o.Purpose
	if purpose == "" {
		purpose = "HOPERAT"
	}
	rec, err := log.Append(ctx, audit.Entry{
		Action: ActionRestore, Outcome: audit.OutcomeAllow, Reason: strings.Join(why, " "),
		Principal:    audit.Principal{Sub: o.Account, Roles: []string{}, ClientID: "custos-cli"},
		PurposeOfUse: purpose, Source: "local",
	})
	if err != nil {
		return "", fmt.Errorf("backup: recording the restore: %w", err)
	}
	res.Record = Head{Seq: rec.Seq, Hash: rec.Hash}
	if behind == nil {
		return "", nil // serve signs the next checkpoint, which extends every anchored one
	}
	origin, err := noteOrigin(behind.Note)
	if err != nil {
		return "", err
	}
	if o.Signer == nil {
		return "", errors.New("backup: acknowledging a rollback needs the checkpoint signing key")
	}
	signer, err := o.Signer(origin)
	if err != nil {
		return "", err
	}
	size := int64(rec.Seq)
	root, err := log.TreeHash(size)
	if err != nil {
		return "", err
	}
	fromRoot, err := log.TreeHash(size - 1)
	if err != nil {
		return "", err
	}
	signed, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: origin, Size: size, Root: root}, signer)
	if err != nil {
		return "", err
	}
	r := checkpoint.Rollback{Origin: origin, From: size - 1, FromRoot: fromRoot, Behind: behind.Size, BehindRoot: behind.Root,
		To: size, ToRoot: root, Record: rec.Hash}
	if r.Note, err = checkpoint.SignRollback(r, signer); err != nil {
		return "", err
	}
	e := checkpoint.Entry{Size: size, Root: root, Note: signed, Time: o.Now().UTC(), Rollback: &r}
	if err := (&checkpoint.Anchor{Dir: staged}).AppendRollback(ctx, e); err != nil {
		return "", err
	}
	var tried []string
	for _, a := range o.Anchors {
		tried = append(tried, a)
		if err := (&checkpoint.Anchor{Dir: a}).AppendRollback(ctx, e); err != nil {
			return strings.Join(tried, ", "), fmt.Errorf("backup: anchoring the acknowledgement in %s: %w", a, err)
		}
	}
	res.Acknowledged = true
	return strings.Join(tried, ", "), nil
}

// checkStaged checks the staged directory as serve does at startup.
func checkStaged(ctx context.Context, staged string, o RestoreOptions, step *stepMeter) error {
	path := filepath.Join(staged, FileAudit)
	var problems []string
	if _, err := audit.VerifyFilePaced(ctx, path, func(p audit.Problem) { problems = append(problems, p.String()) }, step.pace()); err != nil {
		return err
	}
	step.finish()
	if len(problems) > 0 {
		return fmt.Errorf("%w: the restored log: %s", ErrUnverified, strings.Join(problems, "; "))
	}
	anchors := []*checkpoint.Anchor{{Dir: staged}}
	for _, a := range o.Anchors {
		anchors = append(anchors, &checkpoint.Anchor{Dir: a})
	}
	entries, err := checkpoint.Load(anchors...)
	if err != nil {
		return err
	}
	log, err := audit.Open(path, audit.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer log.Close()
	return checkpoint.CheckAgainst(ctx, log, entries, o.Verifiers)
}

// unknownKey is the error of a restore whose anchored checkpoint is
// signed by no verifier key given (checkpoint.ErrUnknownKey, in err),
// leading with the keys and the fix rather than with a backup that does
// not match its checkpoints, which reads as tampering; nil for any other
// err.
func unknownKey(err error) error {
	var uk *checkpoint.UnknownKeyError
	if !errors.As(err, &uk) {
		return nil
	}
	return fmt.Errorf("backup: the anchored checkpoint is signed by a key that is not among the verifier keys: %s; "+
		"nothing was changed. Give the keys of every version of the signing key of that origin "+
		"(--pubkey FILE written by 'custos audit pubkey' for the server the backup came from, or that server's signing key through --dev or Vault) and restore again; "+
		"if they are the right keys, the checkpoint was not signed by this log's key: keep the backup and the anchors and investigate: %w", uk.SignedBy(), err)
}

func noteOrigin(signed []byte) (string, error) {
	i := strings.Index(string(signed), "\n")
	if i <= 0 {
		return "", fmt.Errorf("%w: not a signed note", checkpoint.ErrBadCheckpoint)
	}
	return string(signed[:i]), nil
}

// copyFile copies from to to, counting its bytes into step.
func copyFile(from, to string, step *stepMeter) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	return writeFile(to, step.reader(in), st.Size())
}
