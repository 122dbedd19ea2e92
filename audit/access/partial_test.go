//go:build unix

package access_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/bundle"
)

// TestReadBundleRemovesWhatAKilledReceiverLeft: a command killed
// (SIGKILL, the OOM killer) while it received a bundle left its partial
// directory beside --out, a copy of records (PHI) that nothing ever
// removed (found with kill -9 of 'custos audit export --out' mid-export:
// each run left a '.OUT.tmp-*'). The next bundle received to the same
// --out removes it once it is older than a minute (its lock died with the
// process), and keeps one that another receiver still holds.
func TestReadBundleRemovesWhatAKilledReceiverLeft(t *testing.T) {
	if out := os.Getenv("CUSTOS_TEST_PARTIAL_RECEIVER"); out != "" {
		// The receiver that is killed: its stream stops half-way.
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			tw.WriteHeader(&tar.Header{Name: bundle.FileRecords, Mode: 0o600, Size: 1 << 20, Typeflag: tar.TypeReg})
			tw.Write(bytes.Repeat([]byte("x"), 4096))
		}()
		access.ReadBundle(pr, out)
		os.Exit(3)
	}
	base := t.TempDir()
	out := filepath.Join(base, "b")
	child := exec.Command(os.Args[0], "-test.run=^TestReadBundleRemovesWhatAKilledReceiverLeft$")
	child.Env = append(os.Environ(), "CUSTOS_TEST_PARTIAL_RECEIVER="+out)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(receiving(t, base)) == 0 {
		if time.Now().After(deadline) {
			child.Process.Kill()
			t.Fatal("the receiver wrote nothing beside --out in 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	child.Process.Kill()
	child.Wait()
	left := hidden(t, base)
	if len(left) == 0 {
		t.Fatal("the killed receiver left nothing: nothing to test")
	}
	old := time.Now().Add(-2 * time.Minute) // the retry comes later
	for _, n := range left {
		os.Chtimes(filepath.Join(base, n), old, old)
	}
	held := filepath.Join(base, ".b.partial-held")
	if err := os.Mkdir(held, 0o700); err != nil {
		t.Fatal(err)
	}
	hf, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	if err := syscall.Flock(int(hf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(held, old, old)

	l, dir := openLog(t)
	appendN(t, l, 10)
	signer, _ := testVerifierKeys(t, "custos.test/n1/audit")
	anchorHead(t, l, dir, signer)
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	if _, err := local.Do(context.Background(), access.OpBundle, access.BundleRequest{Ask: access.Ask{Purpose: "HOPERAT"}},
		func(r io.Reader) error { return access.ReadBundle(r, out) }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, bundle.FileManifest)); err != nil {
		t.Errorf("the bundle: %v", err)
	}
	if got := hidden(t, base); len(got) != 1 || got[0] != filepath.Base(held) {
		t.Errorf("beside --out after the next bundle: %v, want only %s (held by a running receiver); the killed one left %v", got, filepath.Base(held), left)
	}
}

// hidden lists the hidden entries of dir.
func hidden(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// receiving lists the hidden directories of dir that hold a file.
func receiving(t *testing.T, dir string) []string {
	var out []string
	for _, n := range hidden(t, dir) {
		if es, _ := os.ReadDir(filepath.Join(dir, n)); len(es) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// TestBundleTargetPublishesLast: a command reads back what it reports
// from the received bundle before the bundle is in place (Read no longer
// renamed it into place, so a command that failed after it left a
// bundle), puts it in place with Publish, and takes it back with Withdraw
// when it fails after that: nothing is left beside --out, and the empty
// --out it was given is there again, with its mode.
func TestBundleTargetPublishesLast(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 5)
	signer, _ := testVerifierKeys(t, "custos.test/n1/audit")
	anchorHead(t, l, dir, signer)
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	for _, given := range []bool{false, true} {
		base := t.TempDir()
		out := filepath.Join(base, "b")
		if given {
			if err := os.Mkdir(out, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		target, err := access.NewBundleTarget(out)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := local.Do(context.Background(), access.OpBundle, access.BundleRequest{Ask: access.Ask{Purpose: "HOPERAT"}},
			func(r io.Reader) error { return target.Read(r) }); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(out, bundle.FileManifest)); !os.IsNotExist(err) {
			t.Errorf("given=%v: the bundle is in place before Publish: %v", given, err)
		}
		if _, err := os.Stat(filepath.Join(target.Dir(), bundle.FileManifest)); err != nil {
			t.Errorf("given=%v: the received bundle: %v", given, err)
		}
		if err := target.Publish(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(out, bundle.FileManifest)); err != nil {
			t.Errorf("given=%v: the published bundle: %v", given, err)
		}
		if err := target.Withdraw(); err != nil {
			t.Fatal(err)
		}
		target.Discard()
		if got := hidden(t, base); len(got) != 0 {
			t.Errorf("given=%v: Withdraw left %v beside --out", given, got)
		}
		es, err := os.ReadDir(out)
		switch {
		case !given && !os.IsNotExist(err):
			t.Errorf("given=%v: --out after Withdraw: %d entries, %v; want none", given, len(es), err)
		case given && (err != nil || len(es) != 0):
			t.Errorf("given=%v: --out after Withdraw: %d entries, %v; want the empty directory", given, len(es), err)
		case given:
			if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o750 {
				t.Errorf("given=%v: --out's mode after Withdraw: %v (%v), want 0750", given, fi.Mode().Perm(), err)
			}
		}
	}
}
