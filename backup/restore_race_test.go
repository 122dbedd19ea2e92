package backup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/backup"
)

// TestRestoreHoldsTheDataDirectoryUntilTheSwap: a server that starts on
// the data directory while a restore --force works on it must not get its
// audit log. Before, the restore checked that no server held the log
// (opened it and closed it again) and then copied, recorded and checked for
// seconds before it renamed the directory aside: probe-chaos started
// `custos serve` in that window and it came up, serving, with its lock in
// D.replaced-TIME and its log in the restored D, and a serve that opened
// the log before the swap appends the records of what it releases to the
// directory moved aside, which the restored log never holds. Here the
// "server" is a writer Open of the log, tried while the restore copies.
func TestRestoreHoldsTheDataDirectoryUntilTheSwap(t *testing.T) {
	ctx := context.Background()
	d := newDataDir(t, 5, 5)
	from := d.saved(t)

	to := t.TempDir()
	path := filepath.Join(to, backup.FileAudit)
	l, err := audit.Open(path, audit.Options{Node: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, audit.Entry{Action: "resources/read", Outcome: audit.OutcomeAllow, Reason: "before the restore",
		Principal: audit.Principal{Sub: "u", Roles: []string{}, ClientID: "c"}, PurposeOfUse: "TREAT", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	o := d.restoreOptions(from, to)
	o.Force = true
	tried := false
	var opened error
	o.Progress = func(p backup.Progress) {
		if tried || p.Step != backup.StepCopy {
			return
		}
		tried = true
		// A serve starting now, on the data directory being replaced.
		w, err := audit.Open(path, audit.Options{Node: "serve", Timeout: 50 * time.Millisecond})
		if err == nil {
			w.Close()
			opened = errors.New("a writer opened the data directory's audit log while the restore was copying")
			return
		}
		if !errors.Is(err, audit.ErrLocked) {
			opened = err
		}
	}
	res, err := backup.Restore(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	audittest.VerifyOnCleanup(t, path)
	if !tried {
		t.Fatal("no copy progress was reported: the test tried nothing")
	}
	if opened != nil {
		t.Error(opened)
	}
	if _, err := os.Stat(filepath.Join(res.Replaced, backup.FileAudit)); err != nil {
		t.Errorf("the replaced data directory: %v", err)
	}
	// Once the restore is done, the restored log opens for its server.
	w, err := audit.Open(path, audit.Options{Node: "serve", Timeout: time.Second})
	if err != nil {
		t.Fatalf("the restored log after the restore: %v", err)
	}
	w.Close()
}

// TestRestoreHoldsADataDirectoryWithoutALog: the same for a data directory
// the restore cannot hold by opening its audit log read-only: one with no
// audit.db yet (a catalog imported, never served), or one whose live
// segment was left mid-seal (audit.db.next only), which only a writer
// completes. The restore held nothing there, so a serve starting during
// the restore created or completed the log in the directory about to be
// moved aside and served from it: its access records end up beside, never
// in the restored log.
func TestRestoreHoldsADataDirectoryWithoutALog(t *testing.T) {
	for _, tc := range []struct{ name, file string }{
		{"no audit log", backup.FileCatalog},
		{"interrupted seal", backup.FileAudit + ".next"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d := newDataDir(t, 5, 5)
			from := d.saved(t)
			to := t.TempDir()
			if tc.file == backup.FileAudit+".next" {
				// A sound log, renamed as a seal leaves its next segment
				// before it moves it in place.
				l, err := audit.Open(filepath.Join(to, backup.FileAudit), audit.Options{Node: "old"})
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(filepath.Join(to, backup.FileAudit), filepath.Join(to, tc.file)); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(filepath.Join(to, tc.file), []byte("not empty"), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(to, backup.FileAudit)
			o := d.restoreOptions(from, to)
			o.Force = true
			tried := false
			var opened error
			o.Progress = func(p backup.Progress) {
				if tried || p.Step != backup.StepCopy {
					return
				}
				tried = true
				w, err := audit.Open(path, audit.Options{Node: "serve", Timeout: 50 * time.Millisecond})
				if err == nil {
					w.Close()
					opened = errors.New("a writer opened an audit log in the data directory while the restore was copying")
					return
				}
				if !errors.Is(err, audit.ErrLocked) {
					opened = err
				}
			}
			if _, err := backup.Restore(ctx, o); err != nil {
				t.Fatal(err)
			}
			audittest.VerifyOnCleanup(t, path)
			if !tried {
				t.Fatal("no copy progress was reported: the test tried nothing")
			}
			if opened != nil {
				t.Error(opened)
			}
			w, err := audit.Open(path, audit.Options{Node: "serve", Timeout: time.Second})
			if err != nil {
				t.Fatalf("the restored log after the restore: %v", err)
			}
			w.Close()
		})
	}
}
