package backup_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/backup"
	"github.com/custos-mcp/custos/secrets"
)

// saved takes and commits a backup of d.
func (d *dataDir) saved(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "backup")
	staged, _, err := d.take(t, out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := staged.Commit(context.Background(), d.verifiers); err != nil {
		t.Fatal(err)
	}
	return out
}

// copyAnchorTo writes d's anchored checkpoints into the anchor directory
// dir, as serve does to its --anchor-dir.
func (d *dataDir) copyAnchorTo(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, checkpoint.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (d *dataDir) restoreOptions(from, to string, anchors ...string) backup.RestoreOptions {
	return backup.RestoreOptions{From: from, DataDir: to, Anchors: anchors, Verifiers: d.verifiers, Account: "os:uid=0(root)",
		Node: "test", Signer: func(string) (note.Signer, error) { return d.signer, nil }}
}

// A backup taken, then the log goes on and a newer checkpoint is anchored:
// restoring the backup is refused as behind, and accepted with an
// acknowledgement that is recorded and anchored and that the startup
// checks then accept.
func TestRestoreBehindTheAnchorsNeedsAnAcknowledgement(t *testing.T) {
	ctx := context.Background()
	d := newDataDir(t, 10, 10)
	from := d.saved(t) // head 11
	for range 9 {
		d.append(t, "later")
	}
	d.anchor(t, 20)
	to := filepath.Join(t.TempDir(), "restored")
	audittest.VerifyOnCleanup(t, filepath.Join(to, backup.FileAudit))

	// The data directory's own anchor is the external anchor here.
	o := d.restoreOptions(from, to, d.dir)
	res, err := backup.Restore(ctx, o)
	if !errors.Is(err, backup.ErrBehind) || res.Behind == nil || res.Behind.Size != 20 {
		t.Fatalf("restore behind: %v (behind %+v)", err, res.Behind)
	}
	if _, err := os.Stat(to); !os.IsNotExist(err) {
		t.Fatalf("a refused restore left %s", to)
	}
	if entries, _ := os.ReadDir(filepath.Dir(to)); len(entries) != 0 {
		t.Fatalf("a refused restore left %v", entries)
	}

	o.AcceptRollback = "disk lost"
	res, err = backup.Restore(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Acknowledged || res.Record.Seq != 12 {
		t.Fatalf("result %+v", res)
	}
	l := audittest.OpenPath(t, filepath.Join(to, backup.FileAudit), audit.Options{ReadOnly: true})
	l.Records(ctx, 12, 12, func(_ uint64, c []byte) error {
		r, _ := audit.Decode(c)
		if r.Action != backup.ActionRestore || !strings.Contains(r.Reason, `accept_rollback="disk lost"`) || !strings.Contains(r.Reason, "behind=20") ||
			r.Principal.Sub != "os:uid=0(root)" {
			t.Errorf("restore record %+v", r)
		}
		return nil
	})
	// What serve checks at startup: both anchors, the restored tree.
	es, err := checkpoint.Load(&checkpoint.Anchor{Dir: to}, &checkpoint.Anchor{Dir: d.dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.CheckAgainst(ctx, l, es, d.verifiers); err != nil {
		t.Fatalf("startup check of the restored log: %v", err)
	}
	// The checkpoint of size 20 (the lost history) is superseded by the
	// acknowledgement at 12, in both anchors.
	for _, e := range es {
		if e.Size == 20 || (e.Size == 12) != (e.Rollback != nil) {
			t.Fatalf("current entries %+v", es)
		}
	}
}

func TestRestoreRefusals(t *testing.T) {
	ctx := context.Background()
	d := newDataDir(t, 5, 5)
	from := d.saved(t)

	t.Run("not empty without force, in use, replaced with force", func(t *testing.T) {
		to := t.TempDir()
		os.WriteFile(filepath.Join(to, "x"), nil, 0o600)
		if _, err := backup.Restore(ctx, d.restoreOptions(from, to)); !errors.Is(err, backup.ErrDataDirExists) {
			t.Fatalf("non-empty data dir: %v", err)
		}
		// A process holding the data directory's audit log.
		busy := t.TempDir()
		audittest.OpenPath(t, filepath.Join(busy, backup.FileAudit), audit.Options{})
		o := d.restoreOptions(from, busy)
		o.Force = true
		if _, err := backup.Restore(ctx, o); !errors.Is(err, backup.ErrServing) {
			t.Fatalf("held data dir: %v", err)
		}
		o = d.restoreOptions(from, to)
		o.Force = true
		res, err := backup.Restore(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		audittest.VerifyOnCleanup(t, filepath.Join(to, backup.FileAudit))
		if _, err := os.Stat(filepath.Join(res.Replaced, "x")); err != nil || res.Behind != nil || res.Acknowledged {
			t.Fatalf("replaced %q: %v; %+v", res.Replaced, err, res)
		}
	})
	t.Run("unverified backup", func(t *testing.T) {
		bad := copyDir(t, from)
		f := filepath.Join(bad, backup.FileCatalog)
		b, _ := os.ReadFile(f)
		b[100] ^= 1
		os.WriteFile(f, b, 0o600)
		to := filepath.Join(t.TempDir(), "to")
		if _, err := backup.Restore(ctx, d.restoreOptions(bad, to)); !errors.Is(err, backup.ErrUnverified) {
			t.Fatalf("corrupt backup: %v", err)
		}
	})
	t.Run("forked anchor", func(t *testing.T) {
		other := newDataDir(t, 5, 5) // another log's checkpoint at size 5
		to := filepath.Join(t.TempDir(), "to")
		o := d.restoreOptions(from, to, other.dir)
		o.AcceptRollback = "no acknowledgement covers a fork"
		if _, err := backup.Restore(ctx, o); !errors.Is(err, checkpoint.ErrFork) && !errors.Is(err, checkpoint.ErrBadSignature) {
			t.Fatalf("forked anchor: %v", err)
		}
		if _, err := os.Stat(to); !os.IsNotExist(err) {
			t.Fatal("a refused restore left the data directory")
		}
	})
	// An anchor named whose checkpoints.jsonl is missing or holds none,
	// while the backup has checkpoints: the anchor asked for cannot be
	// checked (not mounted, the wrong directory, its checkpoints removed),
	// as audit verify says UNCHECKED. It restored without a word.
	t.Run("anchor without checkpoints", func(t *testing.T) {
		empty := t.TempDir()
		for _, tc := range []struct {
			name string
			make func()
		}{
			{"missing file", func() {}},
			{"empty file", func() { os.WriteFile(filepath.Join(empty, checkpoint.FileName), nil, 0o600) }},
		} {
			tc.make()
			to := filepath.Join(t.TempDir(), "to")
			_, err := backup.Restore(ctx, d.restoreOptions(from, to, empty))
			if !errors.Is(err, backup.ErrAnchorUnchecked) || !strings.Contains(err.Error(), filepath.Join(empty, checkpoint.FileName)) {
				t.Fatalf("%s: restore with an anchor holding no checkpoint: %v", tc.name, err)
			}
			if _, err := os.Stat(to); !os.IsNotExist(err) {
				t.Fatalf("%s: a refused restore left the data directory", tc.name)
			}
		}
		// The same anchor holding the checkpoints restores.
		d.copyAnchorTo(t, empty)
		to := filepath.Join(t.TempDir(), "to")
		if _, err := backup.Restore(ctx, d.restoreOptions(from, to, empty)); err != nil {
			t.Fatal(err)
		}
		audittest.VerifyOnCleanup(t, filepath.Join(to, backup.FileAudit))
	})
	t.Run("missing anchor dir", func(t *testing.T) {
		to := filepath.Join(t.TempDir(), "to")
		if _, err := backup.Restore(ctx, d.restoreOptions(from, to, filepath.Join(t.TempDir(), "unmounted"))); err == nil {
			t.Fatal("restore with a missing anchor directory succeeded")
		}
	})
}

// A log of sealed segments backs up with its segments and seal notes
// (audit.sealed/ in the backup), verifies as one log, and restores into a
// data directory whose segments are read-only and whose log opens and
// continues.
func TestBackupAndRestoreSealedSegments(t *testing.T) {
	ctx := context.Background()
	d := newDataDir(t, 5)
	for range 2 {
		if ok, err := d.log.Roll(ctx); !ok || err != nil {
			t.Fatalf("Roll: %v %v", ok, err)
		}
		for range 3 {
			d.append(t, "next segment")
		}
	}
	d.anchor(t, 11)
	from := d.saved(t) // head 12: segments 1..5, 6..8, live 9..12
	var names []string
	m, err := backup.ReadManifest(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, ","); !strings.HasPrefix(got, "audit.db,audit.sealed/000001.seal,audit.sealed/000001.db,audit.sealed/000002.seal,audit.sealed/000002.db,") {
		t.Fatalf("files %s", got)
	}
	if err := os.Remove(filepath.Join(from, "audit.sealed", "000001.db")); err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Verify(ctx, from, d.verifiers); err == nil {
		t.Fatal("a backup without its first segment verified")
	}
	from = d.saved(t) // head 13
	to := filepath.Join(t.TempDir(), "restored")
	audittest.VerifyOnCleanup(t, filepath.Join(to, backup.FileAudit))
	if _, err := backup.Restore(ctx, d.restoreOptions(from, to)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"000001.db", "000001.seal", "000002.db", "000002.seal"} {
		if fi, err := os.Stat(filepath.Join(to, "audit.sealed", f)); err != nil || fi.Mode().Perm() != 0o400 {
			t.Errorf("restored %s: %v", f, err)
		}
	}
	l := audittest.OpenPath(t, filepath.Join(to, backup.FileAudit), audit.Options{})
	if seq, _ := l.Head(); seq != 14 { // 13 + the restore record
		t.Errorf("restored head %d, want 14", seq)
	}
	if err := l.Records(ctx, 1, 14, func(uint64, []byte) error { return nil }); err != nil {
		t.Errorf("records across the restored segments: %v", err)
	}
}

// The seal notes of a backup must be those of its segments: notes swapped
// between two segments (the manifest rehashed, so only this check can see
// it) make the backup fail Verify, and Restore refuses it and writes
// nothing. Before, such a backup restored, and the restored log then
// failed 'audit verify' (seal_mismatch).
func TestSwappedSealNotesAreRefused(t *testing.T) {
	ctx := context.Background()
	d := newDataDir(t, 3)
	for range 2 {
		if ok, err := d.log.Roll(ctx); !ok || err != nil {
			t.Fatalf("Roll: %v %v", ok, err)
		}
		d.append(t, "next segment")
	}
	from := d.saved(t)
	a, b := filepath.Join(from, audit.SealedDir(backup.FileAudit), "000001.seal"), filepath.Join(from, audit.SealedDir(backup.FileAudit), "000002.seal")
	na, errA := os.ReadFile(a)
	nb, errB := os.ReadFile(b)
	if errA != nil || errB != nil {
		t.Fatalf("seal notes: %v %v", errA, errB)
	}
	if err := errors.Join(os.WriteFile(a, nb, 0o600), os.WriteFile(b, na, 0o600)); err != nil {
		t.Fatal(err)
	}
	rehash(t, from)
	if _, err := backup.Verify(ctx, from, nil); !errors.Is(err, backup.ErrUnverified) ||
		!strings.Contains(err.Error(), "segment 1's seal note: not the seal stored in the segment") ||
		!strings.Contains(err.Error(), "segment 2's seal note") {
		t.Fatalf("Verify of swapped seal notes: %v", err)
	}
	to := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(ctx, d.restoreOptions(from, to)); !errors.Is(err, backup.ErrUnverified) {
		t.Fatalf("Restore of swapped seal notes: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(to)); len(entries) != 0 {
		t.Fatalf("a refused restore left %v", entries)
	}
}

// A data directory that is a symbolic link (the data on another disk) is
// restored into the directory it names: the link stays a link, and with
// --force the old target is kept beside the target. A link that does not
// resolve is refused, naming it, and nothing is written. Before, the link
// was replaced by a new directory on the link's file system and the
// target was left as it was.
func TestRestoreIntoASymlinkedDataDirectory(t *testing.T) {
	ctx := context.Background()
	d := newDataDir(t, 4, 4)
	from := d.saved(t)
	base := t.TempDir()
	target, link := filepath.Join(base, "disk2-custos"), filepath.Join(base, "custos")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	audittest.VerifyOnCleanup(t, filepath.Join(target, backup.FileAudit))
	if _, err := backup.Restore(ctx, d.restoreOptions(from, link)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the data directory link was replaced: %v %v", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(target, backup.FileAudit)); err != nil {
		t.Fatalf("the link's target holds no restored log: %v", err)
	}
	o := d.restoreOptions(from, link)
	o.Force = true
	res, err := backup.Restore(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 || !strings.HasPrefix(res.Replaced, target+".replaced-") {
		t.Fatalf("--force over a link: link %v (%v), replaced %q", fi.Mode(), err, res.Replaced)
	}

	dangling := filepath.Join(base, "dangling")
	if err := os.Symlink(filepath.Join(base, "not-mounted"), dangling); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(base)
	if _, err := backup.Restore(ctx, d.restoreOptions(from, dangling)); err == nil || !strings.Contains(err.Error(), "not-mounted") || !strings.Contains(err.Error(), "does not resolve") {
		t.Fatalf("restore into a dangling link: %v", err)
	}
	if after, _ := os.ReadDir(base); len(after) != len(before) {
		t.Fatalf("a refused restore changed %s: %v", base, after)
	}
}

// The sealed segments in a backup are byte for byte the archived ones, so
// that after the data disk is lost and the backup restored, the server
// (same archive directory) finds each restored segment already archived
// instead of refusing, segment by segment, "the archive already holds a
// different 000001.db".
func TestRestoredSegmentsAreTheArchivedFiles(t *testing.T) {
	ctx := context.Background()
	archive := filepath.Join(t.TempDir(), "archive")
	d := newDataDirWith(t, audit.Options{ArchiveDir: archive}, 3)
	for range 2 {
		if ok, err := d.log.Roll(ctx); !ok || err != nil {
			t.Fatalf("Roll: %v %v", ok, err)
		}
		d.append(t, "next segment")
	}
	from := d.saved(t)
	for _, f := range []string{"000001.db", "000001.seal", "000002.db", "000002.seal"} {
		got, err1 := os.ReadFile(filepath.Join(from, backup.DirSealed, f))
		want, err2 := os.ReadFile(filepath.Join(archive, f))
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Errorf("the backup's %s is not the archived file (%v %v)", f, err1, err2)
		}
	}
	to := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(ctx, d.restoreOptions(from, to)); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	l := audittest.OpenPath(t, filepath.Join(to, backup.FileAudit), audit.Options{ArchiveDir: archive,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	// The first append kicks the roller, which archives what is pending.
	if _, err := l.Append(ctx, audit.Entry{Action: "resources/read", Outcome: audit.OutcomeAllow, Reason: "after the restore",
		Principal: audit.Principal{Sub: "u", Roles: []string{}, ClientID: "c"}, PurposeOfUse: "TREAT", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	sealed := filepath.Join(to, backup.DirSealed)
	deadline := time.Now().Add(10 * time.Second)
	for {
		es, _ := os.ReadDir(sealed)
		if len(es) == 1 && es[0].Name() == "archive-dir" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored segments were not archived: %v\n%s", es, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := l.Records(ctx, 1, 6, func(uint64, []byte) error { return nil }); err != nil {
		t.Errorf("records across the archived segments: %v", err)
	}
}

// An acknowledged restore whose acknowledgement reaches the first external
// anchor but not the second (its storage went away) fails, and keeps the
// staged data directory, naming it: the first anchor already expects that
// log. Before, the staged directory was removed, leaving an anchored
// acknowledgement of a log that no longer existed; a second restore would
// then anchor another record at the same size, a fork no serve accepts.
func TestPartlyAnchoredAcknowledgementKeepsTheStagedLog(t *testing.T) {
	ctx := context.Background()
	d := newDataDir(t, 10, 10)
	from := d.saved(t)
	for range 9 {
		d.append(t, "later")
	}
	d.anchor(t, 20)
	// The second anchor holds the same checkpoints (one that holds none
	// is refused before anything is done: ErrAnchorUnchecked).
	second := t.TempDir()
	d.copyAnchorTo(t, second)
	to := filepath.Join(t.TempDir(), "restored")
	o := d.restoreOptions(from, to, d.dir, second)
	o.AcceptRollback = "disk lost"
	o.Signer = func(string) (note.Signer, error) {
		// The second anchor's storage goes away after the checks and
		// before the acknowledgement is anchored.
		return d.signer, os.RemoveAll(second)
	}
	_, err := backup.Restore(ctx, o)
	if err == nil || !strings.Contains(err.Error(), "anchoring the acknowledgement in "+second) {
		t.Fatalf("restore with the second anchor gone: %v", err)
	}
	latest, ok, lerr := (&checkpoint.Anchor{Dir: d.dir}).Latest()
	if lerr != nil || !ok || latest.Rollback == nil || latest.Size != 12 {
		t.Fatalf("the first anchor's latest entry %+v (%v): want the acknowledgement at 12", latest, lerr)
	}
	entries, _ := os.ReadDir(filepath.Dir(to))
	if len(entries) != 1 || !strings.Contains(err.Error(), entries[0].Name()) {
		t.Fatalf("staged directories %v; want the one the error names kept (%v)", entries, err)
	}
	staged := filepath.Join(filepath.Dir(to), entries[0].Name())
	l := audittest.OpenPath(t, filepath.Join(staged, backup.FileAudit), audit.Options{ReadOnly: true})
	if root, err := l.TreeHash(12); err != nil || root != latest.Root {
		t.Fatalf("the kept log's root at 12 is %v (%v), the anchored acknowledgement's %v", root, err, latest.Root)
	}
}

// TestRestoreKeyMismatchLeadsWithTheKeys: an anchored checkpoint signed by
// a key that is not among the verifier keys (the signing key was rotated
// after the backup, and the keys given are the old version's) refused the
// restore as "the backup does not match the anchored checkpoints", which
// reads as tampering. It now leads with the key, which key signed, and
// the fix, at or below the backup's head and past it (a restore behind),
// and changes nothing; a fork still says the backup does not match.
func TestRestoreKeyMismatchLeadsWithTheKeys(t *testing.T) {
	ctx := context.Background()
	const lead = "backup: the anchored checkpoint is signed by a key that is not among the verifier keys: "
	d := newDataDir(t, 10, 10)
	from := d.saved(t)                                                      // head 11
	anchored, err := os.ReadFile(filepath.Join(d.dir, checkpoint.FileName)) // size 10, the old key
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewDev()
	if err != nil {
		t.Fatal(err)
	}
	rotated, _, err := checkpoint.NewSigner(ctx, origin, keys)
	if err != nil {
		t.Fatal(err)
	}
	newKey := fmt.Sprintf("%s+%08x", origin, rotated.KeyHash())
	for _, size := range []int64{11, 20} { // at the backup's head (checked against it); past it (behind)
		for head, _ := d.log.Head(); int64(head) < size; head, _ = d.log.Head() {
			d.append(t, "later")
		}
		anchor := t.TempDir()
		if err := os.WriteFile(filepath.Join(anchor, checkpoint.FileName), anchored, 0o600); err != nil {
			t.Fatal(err)
		}
		root, err := d.log.TreeHash(size)
		if err != nil {
			t.Fatal(err)
		}
		c := checkpoint.Checkpoint{Origin: origin, Size: size, Root: root}
		msg, err := checkpoint.Sign(c, rotated)
		if err != nil {
			t.Fatal(err)
		}
		if err := (&checkpoint.Anchor{Dir: anchor}).Append(ctx, msg, c, time.Now()); err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(t.TempDir(), "to")
		_, err = backup.Restore(ctx, d.restoreOptions(from, to, anchor)) // the old key's verifiers
		if !errors.Is(err, checkpoint.ErrUnknownKey) || !strings.HasPrefix(err.Error(), lead) || strings.Contains(err.Error(), "does not match") ||
			!strings.Contains(err.Error(), `signed by "`+newKey+`"`) {
			t.Errorf("size %d: restore with the old key's verifiers: %v\nwant it to lead with %q and name %s", size, err, lead, newKey)
		}
		if _, err := os.Stat(to); !os.IsNotExist(err) {
			t.Errorf("size %d: a refused restore left the data directory", size)
		}
	}

	// A backup whose own checkpoints are by the rotated key, checked with
	// the old key's: the problem leads with the key, not with a copy
	// "not consistent with checkpoints.jsonl".
	d.signer = rotated
	d.anchor(t, 20)
	newer := filepath.Join(t.TempDir(), "backup")
	staged, _, err := d.take(t, newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := staged.Commit(ctx, nil); err != nil { // signatures not checked
		t.Fatal(err)
	}
	_, err = backup.Restore(ctx, d.restoreOptions(newer, filepath.Join(t.TempDir(), "to")))
	if want := backup.FileCheckpoints + ": the latest checkpoint is signed by a key that is not among the verifier keys (the checkpoint of origin"; !errors.Is(err, backup.ErrUnverified) ||
		!strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "not consistent") {
		t.Errorf("restore of a backup whose checkpoints are by another key: %v\nwant a problem saying %q", err, want)
	}

	// A fork at the backup's head, signed by a key given.
	f := newDataDir(t, 10, 10)
	from = f.saved(t)
	forked := checkpoint.Checkpoint{Origin: origin, Size: 11, Root: tlog.Hash{1}}
	msg, err := checkpoint.Sign(forked, f.signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&checkpoint.Anchor{Dir: f.dir}).Append(ctx, msg, forked, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err = backup.Restore(ctx, f.restoreOptions(from, filepath.Join(t.TempDir(), "to"), f.dir))
	if !errors.Is(err, checkpoint.ErrFork) || !strings.HasPrefix(err.Error(), "backup: the backup does not match the anchored checkpoints") {
		t.Errorf("restore against a forked anchor: %v, want it to say the backup does not match its checkpoints", err)
	}
}
