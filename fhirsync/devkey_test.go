package fhirsync

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/custos-mcp/custos/internal/tmpfstest"
)

// TestDevKeyOnAFullDiskLeavesNoFile: the dev client key is created in the
// data directory, the audit volume; when that volume is full the key
// cannot be written, and the empty file left behind made every later
// DevKey (serve --dev with a sync, custos sync --dev) fail with "not a
// PKCS #8 PEM private key" until it was removed by hand. Once space is
// freed, DevKey must create the key.
func TestDevKeyOnAFullDiskLeavesNoFile(t *testing.T) {
	dir := tmpfstest.Mount(t, 256<<10)
	path := filepath.Join(dir, "sync-client-key.pem")
	filler := tmpfstest.Fill(t, dir, 0)
	if _, _, err := DevKey(path); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("DevKey on a full disk = %v, want ENOSPC", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DevKey on a full disk left %s behind (%v)", filepath.Base(path), err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	_, kid, err := DevKey(path)
	if err != nil {
		t.Fatalf("DevKey once space is free: %v", err)
	}
	if _, again, err := DevKey(path); err != nil || again != kid {
		t.Fatalf("DevKey again = %q, %v; want the key just created, %q", again, err, kid)
	}
}
