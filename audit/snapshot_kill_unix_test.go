//go:build unix

package audit

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestKilledDuringACopyReopens: a server killed (SIGKILL) while a backup
// copied the live segment leaves a file whose meta page names no freelist
// (copyLive). It is a valid bbolt file: Open accepts it (checkBoltFile),
// verify and export read it read-only, and a read-write open rebuilds the
// freelist, writes it, and goes on appending after every record. Run in a
// child process, which kills itself.
func TestKilledDuringACopyReopens(t *testing.T) {
	if dir := os.Getenv("CUSTOS_TEST_KILLED_COPY_DIR"); dir != "" {
		killedCopyChild(t, dir)
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.db")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKilledDuringACopyReopens$", "-test.v")
	cmd.Env = append(os.Environ(), "CUSTOS_TEST_KILLED_COPY_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed by SIGKILL\n%s", err, out)
	}
	head, err := os.ReadFile(filepath.Join(dir, "head"))
	if err != nil {
		t.Fatalf("the child wrote no head: %v\n%s", err, out)
	}
	if f := boltFreelistPage(t, path); f != noFreelist {
		t.Fatalf("the killed server's file names freelist page %d: the commits during the copy wrote it", f)
	}
	// Read-only: verify and export.
	if sum := mustVerify(t, path); sum.Records != 50 {
		t.Errorf("verify read %d records, want 50", sum.Records)
	}
	var exported strings.Builder
	if n, err := ExportFile(context.Background(), path, &exported, FormatJSONL, Filter{}); err != nil || n != 50 {
		t.Errorf("export: %d records, %v; want 50", n, err)
	}
	ro, err := Open(path, Options{Node: "n", ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open: %v", err)
	}
	if seq, hash := ro.Head(); seq != 50 || hash != string(head) {
		t.Errorf("read-only head %d %s, want 50 %s", seq, hash, head)
	}
	ro.Close()
	if f := boltFreelistPage(t, path); f != noFreelist {
		t.Errorf("a read-only open wrote the freelist (page %d)", f)
	}
	// Read-write: the freelist is rebuilt and written, appends go on.
	l := mustOpenPath(t, path, Options{Node: "n"})
	if seq, hash := l.Head(); seq != 50 || hash != string(head) {
		t.Fatalf("head after reopen %d %s, want 50 %s", seq, hash, head)
	}
	if f := boltFreelistPage(t, path); f == noFreelist {
		t.Error("the read-write open did not write the freelist")
	}
	recs := appendN(t, l, 20)
	if recs[0].Seq != 51 || recs[0].PrevHash != string(head) {
		t.Errorf("first append after reopen: seq %d prev %s, want 51 %s", recs[0].Seq, recs[0].PrevHash, head)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if sum := mustVerify(t, path); sum.Records != 70 {
		t.Errorf("verify read %d records, want 70", sum.Records)
	}
}

// killedCopyChild appends 20 records, holds a backup's copy open, appends
// 30 more, writes the head hash to dir/head and kills itself.
func killedCopyChild(t *testing.T, dir string) {
	l, err := Open(filepath.Join(dir, "audit.db"), Options{Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 20)
	copying := make(chan struct{})
	go l.WriteSnapshot(func(Snapshot) (io.Writer, error) { close(copying); select {} })
	<-copying
	recs := appendN(t, l, 30)
	if err := os.WriteFile(filepath.Join(dir, "head"), []byte(recs[len(recs)-1].Hash), 0o600); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
