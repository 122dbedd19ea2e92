package backup_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/backup"
)

// steps checks a run's progress reports: the steps come in the order
// want, each once, each counting up to its total, which its last report
// reaches; it returns each step's last report.
func steps(t *testing.T, ps []backup.Progress, want ...string) map[string]backup.Progress {
	t.Helper()
	var order []string
	last := map[string]backup.Progress{}
	for i, p := range ps {
		if len(order) == 0 || order[len(order)-1] != p.Step {
			order = append(order, p.Step)
		} else if prev := ps[i-1]; p.Done < prev.Done {
			t.Fatalf("%s goes back: %+v after %+v", p.Step, p, prev)
		}
		if p.Done > p.Total || p.Done < 0 {
			t.Fatalf("report %+v", p)
		}
		last[p.Step] = p
	}
	if !slices.Equal(order, want) {
		t.Fatalf("steps %q, want %q", order, want)
	}
	for s, p := range last {
		if p.Done != p.Total {
			t.Fatalf("%s ends at %+v, short of its total", s, p)
		}
	}
	return last
}

// TestCommitAndRestoreReportProgress: a backup's verification (Commit)
// and a restore report each long step's progress, counts only: the bytes
// of the manifest's files hashed and copied, the records verified.
func TestCommitAndRestoreReportProgress(t *testing.T) {
	d := newDataDir(t, 3000, 2000)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "b")
	staged, _, err := d.take(t, out)
	if err != nil {
		t.Fatal(err)
	}
	var ps []backup.Progress
	staged.Progress = func(p backup.Progress) { ps = append(ps, p) }
	rep, err := staged.Commit(ctx, d.verifiers)
	if err != nil {
		t.Fatal(err)
	}
	var files int64
	for _, f := range rep.Manifest.Files {
		files += f.Bytes
	}
	head := int64(rep.Manifest.Audit.HeadSeq)
	last := steps(t, ps, backup.StepHash, backup.StepVerify)
	if last[backup.StepHash].Done != files || last[backup.StepVerify].Done != head || !last[backup.StepVerify].Records || last[backup.StepHash].Records {
		t.Fatalf("commit: %+v; want %d bytes and %d records", last, files, head)
	}

	ps = nil
	o := d.restoreOptions(out, filepath.Join(t.TempDir(), "restored"))
	o.Progress = func(p backup.Progress) { ps = append(ps, p) }
	if _, err := backup.Restore(ctx, o); err != nil {
		t.Fatal(err)
	}
	last = steps(t, ps, backup.StepHash, backup.StepVerify, backup.StepCopy, backup.StepCheck)
	if last[backup.StepCopy].Done != files || last[backup.StepCheck].Done != head+1 {
		t.Fatalf("restore: %+v; want %d bytes copied and %d records checked (the restore's own record too)", last, files, head+1)
	}
}

// TestBackupProgressTotalCountsArchivedSegments: a backup's progress
// total is right from its first report, sealed segments moved to the
// archive directory included: they are most of the bytes it sends. Before,
// they were not counted, and the bar ran to its end long before the copy
// did, then jumped (the last report sets the total to what was sent).
func TestBackupProgressTotalCountsArchivedSegments(t *testing.T) {
	ctx := context.Background()
	archive := filepath.Join(t.TempDir(), "archive")
	d := newDataDirWith(t, audit.Options{ArchiveDir: archive}, 3)
	for s := range 3 {
		for i := range 100 {
			d.append(t, fmt.Sprintf("s%d r%d %s", s, i, strings.Repeat("x", 2000)))
		}
		if ok, err := d.log.Roll(ctx); !ok || err != nil {
			t.Fatalf("Roll: %v %v", ok, err)
		}
	}
	d.append(t, "kicks the archiver")
	sealed := filepath.Join(d.dir, backup.DirSealed)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left, _ := filepath.Glob(filepath.Join(sealed, "*.db"))
		archived, _ := filepath.Glob(filepath.Join(archive, "*.db"))
		if len(left) == 0 && len(archived) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("segments not archived: %q left in %s, %q archived", left, sealed, archived)
		}
	}
	out := filepath.Join(t.TempDir(), "b")
	l := access.Local{Service: access.New(d.log, nil, d.dir, nil), Caller: access.Self()}
	var ps []access.Progress
	var sent int64
	_, err := l.DoProgress(ctx, access.OpBackup, access.BackupRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Out: out}, func(r io.Reader) error {
		n, err := io.Copy(io.Discard, r)
		sent = n
		return err
	}, func(p access.Progress) { ps = append(ps, p) })
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) < 2 {
		t.Fatalf("%d progress reports", len(ps))
	}
	first, last := ps[0], ps[len(ps)-1]
	if last.Done != sent || last.Total != sent {
		t.Fatalf("the last report %+v, want %d bytes sent of %d", last, sent, sent)
	}
	// The estimate is made of file sizes before the copy: within a tenth.
	if diff := first.Total - sent; diff < -sent/10 || diff > sent/10 {
		t.Fatalf("the first report's total %d is not within a tenth of the %d bytes sent (%+v)", first.Total, sent, first)
	}
	t.Logf("estimated %d, sent %d", first.Total, sent)
}
