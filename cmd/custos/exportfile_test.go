package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestExportFileIsInvisibleUntilComplete: while 'audit export -o FILE'
// writes, nothing is in FILE's directory, so a command killed mid-export
// leaves no partial copy of records (before: a hidden .custos-export-*
// that stayed forever); once published, FILE alone is there, complete,
// mode 0600, replacing an older FILE; a discarded export leaves nothing.
func TestExportFileIsInvisibleUntilComplete(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(path, []byte("older export\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, e := range es {
			ns = append(ns, e.Name())
		}
		return ns
	}

	f, err := createExportFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("{\"seq\":1}\n")); err != nil {
		t.Fatal(err)
	}
	if ns := names(); len(ns) != 1 || ns[0] != "audit.jsonl" {
		t.Fatalf("while the export is written the directory holds %q; want only the older audit.jsonl", ns)
	}
	if err := f.publish(); err != nil {
		t.Fatal(err)
	}
	if ns := names(); len(ns) != 1 || ns[0] != "audit.jsonl" {
		t.Fatalf("after publishing: %q", ns)
	}
	b, err := os.ReadFile(path)
	st, serr := os.Stat(path)
	if err != nil || serr != nil || string(b) != "{\"seq\":1}\n" || st.Mode().Perm() != 0o600 {
		t.Fatalf("published file %q (%v, %v), mode %v", b, err, serr, st.Mode())
	}

	g, err := createExportFile(filepath.Join(dir, "failed.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("partial"))
	g.discard()
	if ns := names(); len(ns) != 1 {
		t.Fatalf("a discarded export left %q", ns)
	}
}

// TestExportFileRefusesWhatIsNoRegularFile: 'audit export -o /dev/null'
// run as root renamed the export over /dev/null, replacing the system's
// device with a regular file of mode 0600 (2026-12-06). A FIFO stands in
// for the device: refused before anything is written, and left as it was.
func TestExportFileRefusesWhatIsNoRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := createExportFile(fifo)
	if err == nil {
		e.Write([]byte("records\n"))
		err = e.publish()
	}
	if err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
		t.Errorf("export to a FIFO: %v, want it refused naming a FIFO", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v, %v", fi.Mode(), err)
	}
}
