//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// pinningWriter is a stdout that fails, as a closed pipe does, after
// bind-mounting out on itself: a mount point cannot be renamed (EBUSY),
// so the command cannot take back what it put at out.
type pinningWriter struct {
	t   *testing.T
	out string
}

func (w pinningWriter) Write([]byte) (int, error) {
	if err := unix.Mount(w.out, w.out, "", unix.MS_BIND, ""); err != nil {
		hint := "cannot bind-mount (" + err.Error() + "): this test needs root"
		if os.Getenv("CI") == "true" {
			w.t.Fatal(hint + " (CI=true: a missing dependency fails)")
		}
		w.t.Skip(hint)
	}
	w.t.Cleanup(func() {
		if err := unix.Unmount(w.out, unix.MNT_DETACH); err != nil {
			w.t.Errorf("unmount %s: %v", w.out, err)
		}
	})
	return 0, errors.New("write /dev/stdout: broken pipe")
}

// TestNotTakenBackSaysWhatIsLeft: a command whose report could not be
// printed, and whose output could not be taken back from --out either,
// leaves a complete copy of PHI there. Each of backup, audit export and
// compliance report said it differently ("the package is complete, but
// could not be taken back (…)", nothing of where or what to do; only
// audit export said what to do). Each now says what is left and where,
// that it is complete (verified, for a backup), that it holds PHI, and
// how to remove or check it; exit 1, and the output is there, whole.
func TestNotTakenBackSaysWhatIsLeft(t *testing.T) {
	data := backupDataDir(t)
	for _, c := range []struct {
		args               []string
		what, state, check string
		file               string // a file the output holds
	}{
		{[]string{"backup", "--data-dir", data, "--purpose", "HOPERAT"}, "backup", "complete and verified", "'custos audit verify --data-dir COPY' on a copy of OUT", "manifest.json"},
		{[]string{"audit", "export", "--data-dir", data, "--purpose", "HOPERAT"}, "bundle", "complete", "'custos audit verify --bundle OUT --pubkey FILE'", "manifest.json"},
		{[]string{"compliance", "report", "--data-dir", data, "--dev", "--purpose", "HOPERAT"}, "package", "complete", "'custos audit verify --bundle OUT/bundle --pubkey FILE'", "report.json"},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			var stderr bytes.Buffer
			code := run(append(c.args, "--out", out), pinningWriter{t, out}, &stderr)
			msg := stderr.String()
			for _, want := range []string{
				"broken pipe",
				"the " + c.what + " is LEFT at " + out + ", " + c.state + ", holding copies of PHI",
				"could not be taken back (",
				"Remove it, or keep it and check it with " + strings.ReplaceAll(c.check, "OUT", out),
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("the message lacks %q:\n%s", want, msg)
				}
			}
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}

			if _, err := os.Stat(filepath.Join(out, c.file)); err != nil {
				t.Errorf("the output said to be left at --out: %v", err)
			}
		})
	}
}
