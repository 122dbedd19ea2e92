//go:build unix

package fhirin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadRefusesAPipe: the reader reads its input twice (two passes), and
// Detect read the head of it before. A pipe given as the path (a shell's
// process substitution, <(zcat export.ndjson.gz)) was consumed by the
// first read and refused as "neither a Bulk Data export, a Bundle, a
// resource, nor a directory of them", and a FIFO nobody writes to hung
// Detect in open(2) past SIGTERM. Both are now refused at once as what
// they are.
func TestReadRefusesAPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "Patient.ndjson")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readAll(t, fifo); done <- err }()
	select {
	case err := <-done:
		var fe *Error
		if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) || fe.Where != "Patient.ndjson" ||
			!strings.Contains(err.Error(), "not a regular file or a directory") {
			t.Errorf("err = %v, want ErrFormat naming a file that is not regular", err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the reader's open so the test can end.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("Read of a FIFO nobody writes to hung")
	}
	if _, err := Detect(fifo); !errors.Is(err, ErrFormat) {
		t.Errorf("Detect: %v, want ErrFormat", err)
	}
}
