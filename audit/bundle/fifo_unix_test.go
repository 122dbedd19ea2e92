//go:build unix

package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestVerifyRefusesAFIFO: a FIFO in place of any file of a bundle (the
// manifest, the records, the checkpoints, the proof, a derived file) is
// reported as a problem naming it, at once: the bundle fails (an auditor's
// script gets exit 1). Before, Verify opened it and waited for a writer
// for ever, and the script got no verdict at all.
func TestVerifyRefusesAFIFO(t *testing.T) {
	l := openRealLog(t, 50)
	k := newTestKey(t, testOrigin, 1)
	vkeys := []byte(k.vkey + "\n")
	for _, name := range []string{FileManifest, FileRecords, FileCheckpoints, FileProof, FormatCSV.FileName()} {
		t.Run(name, func(t *testing.T) {
			dir := writeTestBundle(t, l, k)
			p := filepath.Join(dir, name)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			type result struct {
				tr  Transcript
				err error
			}
			done := make(chan result, 1)
			go func() {
				tr, err := Verify(dir, vkeys)
				done <- result{tr, err}
			}()
			select {
			case r := <-done:
				if r.err == nil || r.tr.OK {
					t.Fatalf("a FIFO as %s: %v, %+v; want the bundle failed", name, r.err, r.tr)
				}
				if text := r.tr.Text(); !strings.Contains(text, name) || !strings.Contains(text, "FIFO, not a regular file") {
					t.Errorf("a FIFO as %s: the transcript does not name it:\n%s", name, text)
				}
			case <-time.After(20 * time.Second):
				// Unblock the open so that the test process can end.
				if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				t.Fatalf("Verify still waiting on the FIFO %s after 20 s", name)
			}
		})
	}
}
