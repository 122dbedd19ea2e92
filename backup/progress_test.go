package backup_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

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
