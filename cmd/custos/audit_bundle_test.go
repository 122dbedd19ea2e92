package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/store"
)

// failingWriter is a stdout that fails every write, as a closed pipe does
// (an auditor's script that died).
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) {
	return 0, errors.New("write /dev/stdout: broken pipe")
}

// TestAuditExportBundleFailingLeavesNothing: 'audit export --out DIR'
// whose report (the line, or --json's document) could not be written
// exited 1 with the bundle left in DIR: the bundle was renamed into place
// as soon as its stream was received, before the manifest was read back
// and the report printed, so anything failing after it left a bundle
// behind a failed command (an auditor could take it for one the command
// vouched for, and a retry to the same --out was refused as not empty).
// Now DIR appears only once everything but the printing succeeded, and a
// failed printing takes it back: nothing is left, neither DIR nor a
// partial directory beside it, and a given empty DIR is empty again. The
// line's failure was not even noticed (exit 0).
func TestAuditExportBundleFailingLeavesNothing(t *testing.T) {
	data := anchoredDataDir(t, 4)
	for _, c := range []struct {
		name  string
		json  bool
		empty bool // DIR exists, empty, before the export
	}{
		{"line", false, false},
		{"json", true, false},
		{"json into an empty DIR", true, true},
	} {
		base := t.TempDir()
		out := filepath.Join(base, "bundle")
		if c.empty {
			if err := os.Mkdir(out, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		args := []string{"audit", "export", "--data-dir", data, "--purpose", "HOPERAT", "--out", out}
		if c.json {
			args = append(args, "--json")
		}
		var stderr bytes.Buffer
		code := run(args, failingWriter{}, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "broken pipe") {
			t.Errorf("%s: exit %d, want 1 naming the failed write:\n%s", c.name, code, stderr.String())
		}
		checkLeftNothing(t, c.name, base, out, c.empty)
		// A retry to the same --out succeeds: nothing is in its way.
		if code, stdout, stderr := runCLI(args...); code != 0 {
			t.Errorf("%s: the retry: exit %d\n%s%s", c.name, code, stdout, stderr)
		}
	}
}

// TestComplianceReportFailingLeavesNothing: 'compliance report --out DIR'
// put its package in place, then printed its summary: a summary that
// could not be written (a closed pipe) exited 1 with the package left in
// DIR (a retry to DIR refused as not empty). The package is now taken
// back, as a bundle is: nothing is left in or beside DIR, and a given
// empty DIR is empty again.
func TestComplianceReportFailingLeavesNothing(t *testing.T) {
	data := anchoredDataDir(t, 4)
	for _, c := range []struct {
		name  string
		json  bool
		empty bool
	}{
		{"summary", false, false},
		{"json into an empty DIR", true, true},
	} {
		base := t.TempDir()
		out := filepath.Join(base, "package")
		if c.empty {
			if err := os.Mkdir(out, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		args := []string{"compliance", "report", "--data-dir", data, "--dev", "--purpose", "HOPERAT", "--out", out}
		if c.json {
			args = append(args, "--json")
		}
		var stderr bytes.Buffer
		code := run(args, failingWriter{}, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "broken pipe") {
			t.Errorf("%s: exit %d, want 1 naming the failed write:\n%s", c.name, code, stderr.String())
		}
		checkLeftNothing(t, c.name, base, out, c.empty)
		if code, stdout, stderr := runCLI(args...); code != 0 {
			t.Errorf("%s: the retry: exit %d\n%s%s", c.name, code, stdout, stderr)
		}
	}
}

// checkLeftNothing checks that a failed command left nothing in base, the
// parent of its output directory out, but out itself, empty with mode
// 0750, when it was given empty.
func checkLeftNothing(t *testing.T, name, base, out string, empty bool) {
	t.Helper()
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string(nil)
	if empty {
		want = []string{filepath.Base(out)}
	}
	if strings.Join(left, " ") != strings.Join(want, " ") {
		t.Errorf("%s: the failed command left %v beside --out, want %v", name, left, want)
	}
	if !empty {
		return
	}
	if es, err := os.ReadDir(out); err != nil || len(es) != 0 {
		t.Errorf("%s: the given empty --out holds %d entries (%v) after the failed command", name, len(es), err)
	} else if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("%s: the given empty --out: %v, mode %v, want 0750", name, err, fi.Mode().Perm())
	}
}

// TestBackupFailingLeavesNothing: 'custos backup --out DIR' renamed the
// verified backup into place, then printed its report: a report that
// could not be written (a closed pipe) exited 1 with --json, 0 without
// (unnoticed), the backup left in DIR either way, though its --help says
// "1 no backup was written". The backup is now taken back, as a bundle
// and a compliance package are.
func TestBackupFailingLeavesNothing(t *testing.T) {
	data := anchoredDataDir(t, 4)
	st, err := store.Open(filepath.Join(data, "catalog.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		json  bool
		empty bool
	}{
		{"report", false, false},
		{"json into an empty DIR", true, true},
	} {
		base := t.TempDir()
		out := filepath.Join(base, "backup")
		if c.empty {
			if err := os.Mkdir(out, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		args := []string{"backup", "--data-dir", data, "--purpose", "HOPERAT", "--out", out}
		if c.json {
			args = append(args, "--json")
		}
		var stderr bytes.Buffer
		code := run(args, failingWriter{}, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "broken pipe") {
			t.Errorf("%s: exit %d, want 1 naming the failed write:\n%s", c.name, code, stderr.String())
		}
		checkLeftNothing(t, c.name, base, out, c.empty)
		if code, stdout, stderr := runCLI(args...); code != 0 {
			t.Errorf("%s: the retry: exit %d\n%s%s", c.name, code, stdout, stderr)
		}
	}
}
