package secrets

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/custos-mcp/custos/internal/tmpfstest"
)

func TestDevKeysAreRandomCopiesAndNeverPrinted(t *testing.T) {
	a, err := NewDev()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewDev()
	if err != nil {
		t.Fatal(err)
	}
	ka, _ := a.CursorKey(context.Background())
	kb, _ := b.CursorKey(context.Background())
	if len(ka.Bytes) != KeySize {
		t.Fatalf("key size %d, want %d", len(ka.Bytes), KeySize)
	}
	if bytes.Equal(ka.Bytes, kb.Bytes) {
		t.Fatal("two dev providers produced the same key")
	}
	ka.Bytes[0] ^= 0xff
	again, _ := a.CursorKey(context.Background())
	if bytes.Equal(ka.Bytes, again.Bytes) {
		t.Fatal("CursorKey returned the provider's own slice")
	}
	if !a.Dev() {
		t.Fatal("dev provider must report Dev() == true")
	}

	var logbuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logbuf, nil)).Info("k", "key", again)
	for _, s := range []string{fmt.Sprint(again), fmt.Sprintf("%v %+v %s", again, again, again), logbuf.String()} {
		if strings.Contains(s, fmt.Sprintf("%x", again.Bytes)) || strings.Contains(s, string(again.Bytes)) || strings.Contains(s, fmt.Sprint(again.Bytes)) {
			t.Fatalf("key bytes printed: %q", s)
		}
		if !strings.Contains(s, "dev-ephemeral-1") {
			t.Fatalf("key id missing from %q", s)
		}
	}
}

func TestDevPersistInKeepsAuditAndSigningKeys(t *testing.T) {
	dir := t.TempDir()
	a, _ := NewDev()
	if err := a.PersistIn(dir); err != nil {
		t.Fatal(err)
	}
	b, _ := NewDev()
	if err := b.PersistIn(dir); err != nil {
		t.Fatal(err)
	}
	ka, _ := a.AuditKey(context.Background())
	kb, _ := b.AuditKey(context.Background())
	if !bytes.Equal(ka.Bytes, kb.Bytes) || ka.ID != "dev:file" {
		t.Fatalf("audit key not persisted: %v %v", ka, kb)
	}
	pa, _, _ := a.PublicKey(0)
	pb, _, _ := b.PublicKey(0)
	if !bytes.Equal(pa, pb) {
		t.Fatal("signing key not persisted")
	}
	ca, _ := a.CursorKey(context.Background())
	cb, _ := b.CursorKey(context.Background())
	if bytes.Equal(ca.Bytes, cb.Bytes) {
		t.Fatal("the cursor key must stay ephemeral")
	}
	if fi, err := os.Stat(filepath.Join(dir, DevKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi, err)
	}
	os.WriteFile(filepath.Join(dir, DevKeyFile), []byte(`{"audit_hmac":"AAAA","signing_seed":"AAAA"}`), 0o600)
	c, _ := NewDev()
	if err := c.PersistIn(dir); err == nil {
		t.Fatal("malformed dev key file accepted")
	}
}

// TestDevPersistInKeepsIDKey: the resource id key is persisted with the
// other dev keys, so demo, serve and import name resources alike; a key
// file written before the id key existed gets one added, once, and keeps
// its other keys.
func TestDevPersistInKeepsIDKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, _ := NewDev()
	b, _ := NewDev()
	ea, _ := a.IDKey(ctx)
	eb, _ := b.IDKey(ctx)
	if bytes.Equal(ea.Bytes, eb.Bytes) || len(ea.Bytes) != KeySize {
		t.Fatal("ephemeral id keys must be fresh random keys")
	}
	if err := a.PersistIn(dir); err != nil {
		t.Fatal(err)
	}
	if err := b.PersistIn(dir); err != nil {
		t.Fatal(err)
	}
	ka, _ := a.IDKey(ctx)
	kb, _ := b.IDKey(ctx)
	if !bytes.Equal(ka.Bytes, kb.Bytes) || ka.ID != "dev:file" || !bytes.Equal(ka.Bytes, ea.Bytes) {
		t.Fatalf("id key not persisted: %v %v", ka, kb)
	}

	// An older file: audit key and signing seed only.
	old := t.TempDir()
	seed := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	audit := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{8}, 32))
	if err := os.WriteFile(filepath.Join(old, DevKeyFile), []byte(`{"audit_hmac":"`+audit+`","signing_seed":"`+seed+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := NewDev()
	if err := c.PersistIn(old); err != nil {
		t.Fatal(err)
	}
	d, _ := NewDev()
	if err := d.PersistIn(old); err != nil {
		t.Fatal(err)
	}
	kc, _ := c.IDKey(ctx)
	kd, _ := d.IDKey(ctx)
	ac, _ := d.AuditKey(ctx)
	if !bytes.Equal(kc.Bytes, kd.Bytes) || !bytes.Equal(ac.Bytes, bytes.Repeat([]byte{8}, 32)) {
		t.Fatal("id key added to an older file is not kept, or the audit key changed")
	}
	if fi, err := os.Stat(filepath.Join(old, DevKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi, err)
	}
}

// TestDevAuditKeyHistoryIsItsOneKey: the dev provider's history of audit
// key versions is its one key, readable, under the id its records name.
func TestDevAuditKeyHistoryIsItsOneKey(t *testing.T) {
	d, _ := NewDev()
	if err := d.PersistIn(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	h, err := d.AuditKeyHistory(context.Background())
	k, _ := d.AuditKey(context.Background())
	if err != nil || len(h) != 1 || len(h.Unreadable()) != 0 || h[0].ID != "dev:file" || !bytes.Equal(h.Keys()[0].Bytes, k.Bytes) {
		t.Fatalf("dev history: %+v %v", h, err)
	}
}

// TestDevPersistInOnAFullDiskLeavesNoFile: dev-keys.json is created in the
// data directory, the audit volume; when that volume is full the keys
// cannot be written, and the empty file left behind made every later
// start with --dev on that directory fail ("not a dev key file") until it
// was removed by hand. Once space is freed, PersistIn must draw and write
// the keys, and a second Dev must read the same ones.
func TestDevPersistInOnAFullDiskLeavesNoFile(t *testing.T) {
	dir := tmpfstest.Mount(t, 256<<10)
	path := filepath.Join(dir, DevKeyFile)
	filler := tmpfstest.Fill(t, dir, 0)
	a, err := NewDev()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.PersistIn(dir); !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), DevKeyFile) {
		t.Fatalf("PersistIn on a full disk = %v, want ENOSPC naming %s", err, DevKeyFile)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("PersistIn on a full disk left %s behind (%v)", DevKeyFile, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := a.PersistIn(dir); err != nil {
		t.Fatalf("PersistIn once space is free: %v", err)
	}
	b, err := NewDev()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PersistIn(dir); err != nil {
		t.Fatalf("PersistIn again: %v", err)
	}
	ka, _ := a.AuditKey(context.Background())
	kb, _ := b.AuditKey(context.Background())
	if !bytes.Equal(ka.Bytes, kb.Bytes) {
		t.Error("a second Dev read another audit key than the one written")
	}
}

// TestDevKeysLoserReadsTheWinner: two processes drawing keys for one new
// data directory at once (both found no dev-keys.json): the second to
// write got "file exists" and failed its start, and a process killed
// between creating the file and writing it left an empty one that every
// later start refused. The keys are now written whole to a temporary file
// and linked into place; the loser of the race gets the winner's file,
// and no temporary file stays behind. Found by probe-chaos (by reading
// the code).
func TestDevKeysLoserReadsTheWinner(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, DevKeyFile)
	a, err := NewDev()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.PersistIn(dir); err != nil {
		t.Fatal(err)
	}
	winner, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The loser, having found no file before a wrote it, writes its own.
	got, err := writeDevKeys(path, devKeyFile{AuditHMAC: "bG9zZXI=", SigningSeed: "bG9zZXI="}, false)
	if err != nil {
		t.Fatalf("the second writer of a new %s: %v, want the winner's file", DevKeyFile, err)
	}
	if !bytes.Equal(got, winner) {
		t.Errorf("the second writer got %q, want the winner's %q", got, winner)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, winner) {
		t.Errorf("%s changed to %q", DevKeyFile, now)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want only %s", names, DevKeyFile)
	}
}
