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

// TestReadFileReplacedByAPipeOrADevice: a file of a directory input is
// opened again by each read of the import; one replaced after its first
// read (here a symlink retargeted) by a FIFO nobody writes to hung the
// import in open(2), and by /dev/zero in reading it to its end for the
// file's hash, for ever, past SIGTERM. One gone since that read was
// reported as "not a FHIR input format". Each is now an ErrChanged naming
// the file. The input: HL7's R4 Observation/f003 beside the Synthea-style
// Bundle of testdata/synthea-bundle.json.
func TestReadFileReplacedByAPipeOrADevice(t *testing.T) {
	obs, synthea := changedInput(t)
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"a FIFO": fifo, "/dev/zero": "/dev/zero", "nothing": ""} {
		dir, keep := t.TempDir(), t.TempDir()
		real := filepath.Join(keep, "observation.json")
		if err := os.WriteFile(real, obs, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "synthea.json"), synthea, 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "resources.json")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		n := 0
		afterRead = func(p string) {
			if p != link {
				return
			}
			if n++; n > 1 {
				return
			}
			if err := os.Remove(link); err != nil {
				t.Error(err)
			}
			if target != "" {
				if err := os.Symlink(target, link); err != nil {
					t.Error(err)
				}
			}
		}
		done := make(chan error, 1)
		go func() { _, err := readAll(t, dir); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrChanged) || errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "resources.json") {
				t.Errorf("replaced by %s: %v; want ErrChanged naming resources.json alone", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("replaced by %s: the import still runs after 10s", name)
		}
		afterRead = nil
	}
}
