package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
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
	checkFailedPrintLeavesNothing(t, []string{"audit", "export", "--data-dir", data, "--purpose", "HOPERAT"}, true)
}

// TestComplianceReportFailingLeavesNothing: 'compliance report --out DIR'
// put its package in place, then printed its summary: a summary that
// could not be written (a closed pipe) exited 1 with the package left in
// DIR (a retry to DIR refused as not empty). The package is now taken
// back, as a bundle is: nothing is left in or beside DIR, and a given
// empty DIR is empty again.
func TestComplianceReportFailingLeavesNothing(t *testing.T) {
	data := anchoredDataDir(t, 4)
	checkFailedPrintLeavesNothing(t, []string{"compliance", "report", "--data-dir", data, "--dev", "--purpose", "HOPERAT"}, false)
}

// TestBackupFailingLeavesNothing: 'custos backup --out DIR' renamed the
// verified backup into place, then printed its report: a report that
// could not be written (a closed pipe) exited 1 with --json, 0 without
// (unnoticed), the backup left in DIR either way, though its --help says
// "1 no backup was written". The backup is now taken back, as a bundle
// and a compliance package are.
func TestBackupFailingLeavesNothing(t *testing.T) {
	data := backupDataDir(t)
	checkFailedPrintLeavesNothing(t, []string{"backup", "--data-dir", data, "--purpose", "HOPERAT"}, false)
}

// backupDataDir is anchoredDataDir(t, 4) with a catalog, which a backup
// copies.
func backupDataDir(t *testing.T) string {
	t.Helper()
	data := anchoredDataDir(t, 4)
	st, err := store.Open(filepath.Join(data, "catalog.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return data
}

// checkFailedPrintLeavesNothing runs custos with args, --out DIR and a
// stdout that fails: its report as text, then with --json into a DIR given
// empty (and with --json into a new DIR if allJSON). Each run must exit 1
// naming the failed write and leave nothing beside DIR but DIR itself when
// it was given, empty with its mode 0750; a retry to DIR then succeeds.
func checkFailedPrintLeavesNothing(t *testing.T, args []string, allJSON bool) {
	t.Helper()
	cases := []struct {
		name        string
		json, empty bool
	}{{"text", false, false}, {"json into an empty DIR", true, true}}
	if allJSON {
		cases = append(cases, struct {
			name        string
			json, empty bool
		}{"json", true, false})
	}
	for _, c := range cases {
		base := t.TempDir()
		out := filepath.Join(base, "out")
		if c.empty {
			if err := os.Mkdir(out, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		args := append(append([]string(nil), args...), "--out", out)
		if c.json {
			args = append(args, "--json")
		}
		var stderr bytes.Buffer
		code := run(args, failingWriter{}, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "broken pipe") {
			t.Errorf("%s: exit %d, want 1 naming the failed write:\n%s", c.name, code, stderr.String())
		}
		var left []string
		entries, err := os.ReadDir(base)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			left = append(left, e.Name())
		}
		want := ""
		if c.empty {
			want = "out"
		}
		if strings.Join(left, " ") != want {
			t.Errorf("%s: the failed command left %v beside --out, want %q", c.name, left, want)
		}
		if c.empty {
			if es, err := os.ReadDir(out); err != nil || len(es) != 0 {
				t.Errorf("%s: the given empty --out holds %d entries (%v) after the failed command", c.name, len(es), err)
			} else if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o750 {
				t.Errorf("%s: the given empty --out: %v, mode %v, want 0750", c.name, err, fi.Mode().Perm())
			}
		}
		if code, stdout, stderr := runCLI(args...); code != 0 {
			t.Errorf("%s: the retry: exit %d\n%s%s", c.name, code, stdout, stderr)
		}
	}
}

// TestOutSymlinkRefusedBeforeTheAccess: 'audit export --out DIR' and
// 'compliance report --out DIR' with DIR a symbolic link (to an empty
// directory, or nowhere) recorded the access, took the whole copy of the
// records into a partial directory beside it and only then failed, exit 1,
// at the rename ("exists and is not a directory"): a rename replaces no
// link's target. They refuse it as bad usage now, before the access and
// its record (as backup refuses one): the log does not grow, and the link
// and its target are left as they were.
func TestOutSymlinkRefusedBeforeTheAccess(t *testing.T) {
	data := anchoredDataDir(t, 4)
	head := func() uint64 {
		t.Helper()
		l, err := audit.Open(filepath.Join(data, "audit.db"), audit.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		seq, _ := l.Head()
		return seq
	}
	for _, args := range [][]string{
		{"audit", "export", "--data-dir", data, "--purpose", "HOPERAT"},
		{"compliance", "report", "--data-dir", data, "--dev", "--purpose", "HOPERAT"},
	} {
		for _, dangling := range []bool{false, true} {
			base := t.TempDir()
			target := filepath.Join(base, "target")
			if !dangling {
				if err := os.Mkdir(target, 0o750); err != nil {
					t.Fatal(err)
				}
			}
			link := filepath.Join(base, "link")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			before := head()
			code, stdout, stderr := runCLI(append(append([]string(nil), args...), "--out", link)...)
			if code != 2 || !strings.Contains(stderr, "symbolic link") || stdout != "" {
				t.Errorf("%s --out a link (dangling %v): exit %d, want 2 naming the link\n%s%s", args[:2], dangling, code, stdout, stderr)
			}
			if after := head(); after != before {
				t.Errorf("%s --out a link: the audit log grew from %d to %d records: the access began", args[:2], before, after)
			}
			var left []string
			entries, _ := os.ReadDir(base)
			for _, e := range entries {
				left = append(left, e.Name())
			}
			want := "link target"
			if dangling {
				want = "link"
			}
			if strings.Join(left, " ") != want {
				t.Errorf("%s --out a link: left %v beside it, want %s", args[:2], left, want)
			}
			if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s --out a link: the link is gone or changed (%v)", args[:2], err)
			}
			if !dangling {
				if es, err := os.ReadDir(target); err != nil || len(es) != 0 {
					t.Errorf("%s --out a link: its target holds %d entries (%v)", args[:2], len(es), err)
				}
			}
		}
	}
}

// TestAuditPubkeyFailingLeavesNoFile: 'audit pubkey -o FILE --json'
// wrote FILE, then printed its JSON: a JSON that could not be written (a
// closed pipe) exited 1 with FILE left behind. A FILE it created is now
// removed, as a failed command's --out directory is taken back; a FILE
// that existed before is left (holding the keys written), and the error
// says which.
func TestAuditPubkeyFailingLeavesNoFile(t *testing.T) {
	data := anchoredDataDir(t, 4)
	for _, existed := range []bool{false, true} {
		dir := t.TempDir()
		f := filepath.Join(dir, "custos.vkeys")
		if existed {
			if err := os.WriteFile(f, []byte("older keys\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var stderr bytes.Buffer
		code := run([]string{"audit", "pubkey", "--data-dir", data, "--dev", "-o", f, "--json"}, failingWriter{}, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "broken pipe") {
			t.Errorf("existed=%v: exit %d, want 1 naming the failed write:\n%s", existed, code, stderr.String())
		}
		_, err := os.Stat(f)
		switch {
		case !existed && !errors.Is(err, os.ErrNotExist):
			t.Errorf("the failed command left the -o file it created (%v):\n%s", err, stderr.String())
		case !existed && !strings.Contains(stderr.String(), f+" not written (removed)"):
			t.Errorf("the error does not say the file was removed:\n%s", stderr.String())
		case existed && err != nil:
			t.Errorf("the failed command removed the -o file that existed before: %v", err)
		case existed && !strings.Contains(stderr.String(), f+" existed before"):
			t.Errorf("the error does not say the file that existed is left:\n%s", stderr.String())
		}
	}
}

// replacingWriter is a stdout that fails, as a closed pipe does, after
// another process replaced the file at path with its own (what it wrote
// is returned by the test).
type replacingWriter struct{ path string }

func (w replacingWriter) Write([]byte) (int, error) {
	tmp := w.path + ".other"
	if err := os.WriteFile(tmp, []byte("another process's keys\n"), 0o644); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, w.path); err != nil {
		return 0, err
	}
	return 0, errors.New("write /dev/stdout: broken pipe")
}

// TestAuditPubkeyFailingLeavesAnotherFile: audit pubkey -o FILE --json
// created FILE, and FILE was replaced by another process's file before
// the JSON failed to print. Taking back what the command created removed
// that other file (os.Remove of the name, whatever it now names); the
// command now removes only the file it wrote, and says the other is left.
func TestAuditPubkeyFailingLeavesAnotherFile(t *testing.T) {
	data := anchoredDataDir(t, 4)
	f := filepath.Join(t.TempDir(), "custos.vkeys")
	var stderr bytes.Buffer
	code := run([]string{"audit", "pubkey", "--data-dir", data, "--dev", "-o", f, "--json"}, replacingWriter{f}, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "broken pipe") {
		t.Errorf("exit %d, want 1 naming the failed write:\n%s", code, stderr.String())
	}
	got, err := os.ReadFile(f)
	if err != nil || string(got) != "another process's keys\n" {
		t.Fatalf("the failed command removed or changed a file it did not write: %q, %v\n%s", got, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), f+" no longer holds the file this command wrote") {
		t.Errorf("the error does not say the file at -o is another's, left:\n%s", stderr.String())
	}
}
