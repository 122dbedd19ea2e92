package backup_test

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/backup"
	"github.com/custos-mcp/custos/secrets"
)

const origin = "custos.test/node/audit"

// dataDir is a data directory with an audit log of n records, a catalog
// and grants file (real bbolt files), and signed checkpoints at sizes.
type dataDir struct {
	dir       string
	log       *audit.Log
	signer    note.Signer
	verifiers note.Verifiers
}

func newDataDir(t *testing.T, n int, sizes ...int64) *dataDir {
	t.Helper()
	return newDataDirWith(t, audit.Options{}, n, sizes...)
}

// newDataDirWith is newDataDir with the audit log opened with opts.
func newDataDirWith(t *testing.T, opts audit.Options, n int, sizes ...int64) *dataDir {
	t.Helper()
	dir := t.TempDir()
	d := &dataDir{dir: dir, log: audittest.OpenPath(t, filepath.Join(dir, backup.FileAudit), opts)}
	for i := range n {
		d.append(t, fmt.Sprintf("r%d", i))
	}
	for _, name := range []string{backup.FileCatalog, backup.FileGrants} {
		db, err := bolt.Open(filepath.Join(dir, name), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("data"))
			if err != nil {
				return err
			}
			for i := range 100 {
				if err := b.Put(fmt.Appendf(nil, "k%03d", i), []byte(strings.Repeat("v", 200))); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	keys, err := secrets.NewDev()
	if err != nil {
		t.Fatal(err)
	}
	signer, _, err := checkpoint.NewSigner(context.Background(), origin, keys)
	if err != nil {
		t.Fatal(err)
	}
	vk, err := checkpoint.VerifierKeys(origin, keys, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.signer = signer
	if d.verifiers, err = checkpoint.ParseVerifierFile(checkpoint.FormatVerifierFile(vk)); err != nil {
		t.Fatal(err)
	}
	for _, s := range sizes {
		d.anchor(t, s)
	}
	return d
}

func (d *dataDir) append(t *testing.T, reason string) audit.Record {
	t.Helper()
	r, err := d.log.Append(context.Background(), audit.Entry{Action: "resources/read", Outcome: audit.OutcomeAllow, Reason: reason,
		Principal: audit.Principal{Sub: "u", Roles: []string{}, ClientID: "c"}, PurposeOfUse: "TREAT", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (d *dataDir) anchor(t *testing.T, size int64) {
	t.Helper()
	root, err := d.log.TreeHash(size)
	if err != nil {
		t.Fatal(err)
	}
	c := checkpoint.Checkpoint{Origin: origin, Size: size, Root: root}
	n, err := checkpoint.Sign(c, d.signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&checkpoint.Anchor{Dir: d.dir}).Append(context.Background(), n, c, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// take runs the backup operation in process and receives it into out.
func (d *dataDir) take(t *testing.T, out string) (*backup.Staged, access.Result, error) {
	t.Helper()
	l := access.Local{Service: access.New(d.log, nil, d.dir, nil), Caller: access.Self()}
	var staged *backup.Staged
	res, err := l.Do(context.Background(), access.OpBackup, access.BackupRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Out: out}, func(r io.Reader) error {
		var err error
		staged, err = backup.Receive(r, out)
		return err
	})
	return staged, res, err
}

func TestBackupIsConsistentVerifiedAndAudited(t *testing.T) {
	d := newDataDir(t, 10, 4, 10)
	out := filepath.Join(t.TempDir(), "b1")
	staged, res, err := d.take(t, out)
	if err != nil {
		t.Fatal(err)
	}
	// The server goes on appending: the backup is the state at its access
	// record.
	d.append(t, "after")
	rep, err := staged.Commit(context.Background(), d.verifiers)
	if err != nil {
		t.Fatalf("commit: %v (%v)", err, rep.Problems)
	}
	m := rep.Manifest
	if res.AccessSeq != 11 || m.Access.Seq != 11 || m.Audit.HeadSeq != 11 || m.Audit.TreeSize != 11 || !rep.Signatures {
		t.Fatalf("result %+v, manifest %+v", res, m)
	}
	if m.Checkpoints != 2 || m.Checkpoint == nil || m.Checkpoint.Size != 10 {
		t.Fatalf("checkpoints %d %+v, want 2, latest 10", m.Checkpoints, m.Checkpoint)
	}
	// The manifest names exactly the files, with their sizes and hashes.
	var names []string
	for _, f := range m.Files {
		names = append(names, f.Name)
		b, err := os.ReadFile(filepath.Join(out, f.Name))
		sum := sha256.Sum256(b)
		if err != nil || int64(len(b)) != f.Bytes || hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Errorf("%s: %d bytes %x, manifest %+v (%v)", f.Name, len(b), sum, f, err)
		}
	}
	if got := strings.Join(names, ","); got != "audit.db,catalog.db,grants.db,checkpoints.jsonl" {
		t.Errorf("files %s", got)
	}
	// The access record is in the copy, with its action and purpose.
	copyLog := audittest.OpenPath(t, filepath.Join(out, backup.FileAudit), audit.Options{ReadOnly: true})
	copyLog.Records(context.Background(), 11, 11, func(_ uint64, c []byte) error {
		r, _ := audit.Decode(c)
		if r.Action != "backup" || r.PurposeOfUse != "HOPERAT" || r.Reason != "out="+out || r.Hash != m.Access.Hash {
			t.Errorf("access record %+v", r)
		}
		return nil
	})
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 1 {
		t.Errorf("beside the backup: %v", entries)
	}
	// And it verifies again as it lies, without keys.
	if _, err := backup.Verify(context.Background(), out, nil); err != nil {
		t.Fatal(err)
	}
}

func TestBackupRefusesAnExistingDestinationAndAMissingPurpose(t *testing.T) {
	d := newDataDir(t, 3)
	out := t.TempDir()
	os.WriteFile(filepath.Join(out, "x"), nil, 0o600)
	if err := backup.CheckDest(out); !errors.Is(err, backup.ErrExists) {
		t.Fatalf("CheckDest: %v", err)
	}
	if _, _, err := d.take(t, out); !errors.Is(err, backup.ErrExists) {
		t.Fatalf("take into a non-empty dir: %v", err)
	}
	// A link to an empty directory is refused before anything is copied
	// (the final rename would fail over it, after the copy was audited).
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := backup.CheckDest(link); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Fatalf("CheckDest of a link to an empty directory: %v", err)
	}
	l := access.Local{Service: access.New(d.log, nil, d.dir, nil), Caller: access.Self()}
	_, err := l.Do(context.Background(), access.OpBackup, access.BackupRequest{}, access.Discard)
	if !errors.Is(err, access.ErrBadRequest) {
		t.Fatalf("no purpose: %v", err)
	}
	if seq, _ := d.log.Head(); seq != 4 {
		t.Fatalf("head %d: only the first backup's access record should have been written", seq)
	}
}

// stream re-packs the backup in dir as a tar stream, after edit changed
// its files.
func stream(t *testing.T, dir string) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			tw.WriteHeader(&tar.Header{Name: e.Name(), Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg})
			tw.Write(b)
		}
		pw.CloseWithError(tw.Close())
	}()
	return pr
}

func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, _ := os.ReadDir(from)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(to, e.Name()), b, 0o600)
	}
	return to
}

// rehash makes the manifest agree with the files again, so that only the
// deeper checks can find what was changed.
func rehash(t *testing.T, dir string) {
	t.Helper()
	m, err := backup.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range m.Files {
		b, _ := os.ReadFile(filepath.Join(dir, f.Name))
		sum := sha256.Sum256(b)
		m.Files[i].Bytes, m.Files[i].SHA256 = int64(len(b)), hex.EncodeToString(sum[:])
	}
	b, _ := json.Marshal(m)
	os.WriteFile(filepath.Join(dir, backup.FileManifest), b, 0o600)
}

func TestACorruptedCopyIsNotSaved(t *testing.T) {
	d := newDataDir(t, 8, 8)
	good := filepath.Join(t.TempDir(), "good")
	staged, _, err := d.take(t, good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := staged.Commit(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, want string
		edit       func(dir string)
	}{
		{"flipped byte", "audit.db: ", func(dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, backup.FileAudit))
			b[len(b)/2] ^= 1
			os.WriteFile(filepath.Join(dir, backup.FileAudit), b, 0o600)
		}},
		{"edited record, manifest rehashed", "hash_mismatch", func(dir string) {
			db, _ := bolt.Open(filepath.Join(dir, backup.FileAudit), 0o600, nil)
			db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("records"))
				k := []byte{0, 0, 0, 0, 0, 0, 0, 3}
				v := append([]byte(nil), b.Get(k)...)
				return b.Put(k, []byte(strings.Replace(string(v), `"r2"`, `"rX"`, 1)))
			})
			db.Close()
			rehash(t, dir)
		}},
		{"other checkpoint, manifest rehashed", "not consistent", func(dir string) {
			l, _ := os.ReadFile(filepath.Join(d.dir, checkpoint.FileName))
			other := newDataDir(t, 8, 8) // same size, other records: a fork
			ol, _ := os.ReadFile(filepath.Join(other.dir, checkpoint.FileName))
			if string(l) == string(ol) {
				t.Fatal("the two logs have the same checkpoint")
			}
			os.WriteFile(filepath.Join(dir, checkpoint.FileName), ol, 0o600)
			rehash(t, dir)
		}},
		{"extra file", "not in the manifest", func(dir string) {
			os.WriteFile(filepath.Join(dir, "extra"), []byte("x"), 0o600)
		}},
		{"catalog page garbage, manifest rehashed", "catalog.db", func(dir string) {
			p := filepath.Join(dir, backup.FileCatalog)
			b, _ := os.ReadFile(p)
			for i := 3 * 4096; i < len(b); i++ {
				b[i] = 0xff
			}
			os.WriteFile(p, b, 0o600)
			rehash(t, dir)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, good)
			c.edit(dir)
			out := filepath.Join(t.TempDir(), "bad")
			staged, err := backup.Receive(stream(t, dir), out)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := staged.Commit(context.Background(), nil)
			if !errors.Is(err, backup.ErrUnverified) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("commit: %v; want ErrUnverified naming %q (problems %v)", err, c.want, rep.Problems)
			}
			if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
				t.Fatalf("left behind: %v", entries)
			}
		})
	}
}

func TestAStreamThatEndsEarlyIsRefused(t *testing.T) {
	d := newDataDir(t, 2)
	good := filepath.Join(t.TempDir(), "good")
	staged, _, err := d.take(t, good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := staged.Commit(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	dir := copyDir(t, good)
	os.Remove(filepath.Join(dir, backup.FileManifest))
	out := filepath.Join(t.TempDir(), "bad")
	if _, err := backup.Receive(stream(t, dir), out); err == nil || !strings.Contains(err.Error(), "ended early") {
		t.Fatalf("receive without a manifest: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}

// TestALockedCatalogFailsAfterTheTimeout: the wait for catalog.db's lock,
// taken in attempts so that a shutdown ends it (access's
// TestCloseEndsABackupWaitingForTheCatalogLock), still lasts the whole
// Source.Timeout when nothing ends it, and then fails with ErrLocked
// naming the file.
func TestALockedCatalogFailsAfterTheTimeout(t *testing.T) {
	d := newDataDir(t, 3)
	held, err := bolt.Open(filepath.Join(d.dir, backup.FileCatalog), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	rec := d.append(t, "access")
	start := time.Now()
	_, err = backup.Write(context.Background(), io.Discard, backup.Source{Log: d.log, Dir: d.dir, Access: rec, Timeout: 700 * time.Millisecond})
	took := time.Since(start)
	if !errors.Is(err, backup.ErrLocked) || !strings.Contains(err.Error(), backup.FileCatalog) {
		t.Fatalf("backup with the catalog locked: %v, want ErrLocked naming %s", err, backup.FileCatalog)
	}
	if took < 700*time.Millisecond || took > 3*time.Second {
		t.Fatalf("ErrLocked after %v, want after the 700 ms timeout", took)
	}
}
