//go:build unix

package policy

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// configMapDir lays files out as kubelet writes a ConfigMap volume
// (AtomicWriter) for top-level keys: the files in a hidden, timestamped
// directory, a hidden symbolic link ..data to it, and one visible symbolic
// link per file through ..data. An update writes a new timestamped
// directory and swaps ..data.
func configMapDir(t *testing.T, dir, stamp string, files map[string]string) {
	t.Helper()
	real := filepath.Join(dir, stamp)
	for p, c := range files {
		writeFile(t, filepath.Join(real, p), c)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(stamp, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for p := range files {
		link := filepath.Join(dir, p)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", p), link); err != nil {
			t.Fatal(err)
		}
	}
}

// flat is reasonPolicy(reason) with every file at the top level, as the
// keys of a ConfigMap are.
func flat(reason string) map[string]string {
	m := map[string]string{}
	for p, c := range reasonPolicy(reason) {
		m[filepath.Base(p)] = c
	}
	return m
}

// TestDirSourceKubernetesConfigMap: a policy directory mounted from a
// ConfigMap loads as the same files in a plain directory do (the hidden
// copies are not read twice), and an update of the ConfigMap is reloaded.
func TestDirSourceKubernetesConfigMap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	configMapDir(t, dir, "..2026_12_05_05_55_00.123456789", flat("a"))
	plain, err := DirSource{Dir: writeDir(t, flat("a"))}.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(ctx, DirSource{Dir: dir}, ReloaderOptions{})
	if err != nil {
		t.Fatalf("a ConfigMap-mounted policy does not load: %v", err)
	}
	if r.Revision() != plain.Revision() || decideReason(t, r.Current()) != "a" {
		t.Fatalf("revision %s, want %s as for a plain directory", r.Revision(), plain.Revision())
	}
	configMapDir(t, dir, "..2026_12_05_06_00_00.987654321", flat("b"))
	if ev, err := r.Reload(ctx); err != nil || ev.Kind != EventLoaded || decideReason(t, r.Current()) != "b" {
		t.Fatalf("after the ConfigMap update: %+v, %v", ev, err)
	}
}

// TestSourcesRefuseFIFO: a FIFO where a policy file or the bundle should be
// is refused at once, naming it, by Fingerprint and Load, instead of
// blocking them (and every later reload) until something writes to it.
func TestSourcesRefuseFIFO(t *testing.T) {
	ctx := context.Background()
	dir := writeDir(t, reasonPolicy("a"))
	if err := syscall.Mkfifo(filepath.Join(dir, "custos", "extra.rego"), 0o644); err != nil {
		t.Fatal(err)
	}
	bundlePath := filepath.Join(t.TempDir(), "policy.tar.gz")
	if err := syscall.Mkfifo(bundlePath, 0o644); err != nil {
		t.Fatal(err)
	}
	signer := newSigner(t, "k1")
	for _, src := range []Source{
		DirSource{Dir: dir},
		BundleSource{Path: bundlePath, Keys: []VerificationKey{signer.VerificationKey()}},
	} {
		done := make(chan error, 1)
		go func() {
			// Watch polls Fingerprint under the reloader's mutex: a
			// blocked poll would stop every reload, SIGHUP included.
			if _, err := src.(Fingerprinter).Fingerprint(); err == nil || !strings.Contains(err.Error(), "is a FIFO, not a regular file") {
				done <- errors.Join(errors.New("fingerprint"), err)
				return
			}
			_, err := src.Load(ctx)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "is a FIFO, not a regular file") {
				t.Errorf("%s: Load err = %v, want a FIFO refused by name", src.Describe(), err)
			}
			if bs, ok := src.(BundleSource); ok && !errors.Is(err, ErrBundle) {
				t.Errorf("%s: err = %v, want ErrBundle", bs.Describe(), err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s: Fingerprint or Load blocked on a FIFO", src.Describe())
			// Unblock the reader so the goroutine ends.
			if w, err := os.OpenFile(fifoOf(src, dir, bundlePath), os.O_WRONLY, 0); err == nil {
				w.Close()
			}
		}
	}
}

func fifoOf(src Source, dir, bundlePath string) string {
	if _, ok := src.(BundleSource); ok {
		return bundlePath
	}
	return filepath.Join(dir, "custos", "extra.rego")
}

// TestLinkedDirectoryIsNotSilentlySkipped: a policy directory whose deny
// rules live in a linked directory (extra -> a shared directory) used to
// load without them, allowing what they deny, and to bundle without them.
// The link is refused by name instead.
func TestLinkedDirectoryIsNotSilentlySkipped(t *testing.T) {
	ctx := context.Background()
	shared := writeDir(t, map[string]string{"deny.rego": "package custos.extra\n\ndenies contains \"everything_denied\"\n"})
	dir := writeDir(t, map[string]string{
		"authz.rego": `package custos.authz

denies contains r if some r in data.custos.extra.denies

decision := {"allow": count(denies) == 0, "reasons": sort(denies), "obligations": []}
`,
		"authz_test.rego": "package custos.authz_test\n\nimport data.custos.authz\n\ntest_decides if authz.decision\n",
	})
	if err := os.Symlink(shared, filepath.Join(dir, "extra")); err != nil {
		t.Fatal(err)
	}
	const want = "extra is a symbolic link to a directory, which is not followed"
	e, err := DirSource{Dir: dir}.Load(ctx)
	if err == nil || !strings.Contains(err.Error(), want) {
		allowed := e != nil && decideAllows(ctx, e)
		t.Errorf("DirSource.Load = %v (allows: %v); want an error saying %q", err, allowed, want)
	}
	if !errors.Is(err, ErrLinkedDir) {
		t.Errorf("DirSource.Load = %v, want it to match ErrLinkedDir (policy test/check: no verdict)", err)
	}
	if _, err := BuildBundle(ctx, dir, "r1"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("BuildBundle: err = %v, want %q", err, want)
	}
}

func decideAllows(ctx context.Context, e *Engine) bool {
	d, err := e.Decide(ctx, readInput)
	return err == nil && d.Allow
}

// TestOpenRegularDoesNotWaitOnAFIFO: the bundle's path is checked by name
// and then opened, and a rollout renames files over that path; a FIFO put
// there between the check and the open made the open wait for a writer,
// holding the load and every reload after it. The open itself does not
// wait, and the file opened is checked.
func TestOpenRegularDoesNotWaitOnAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "policy.tar.gz")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := openRegular(fifo)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "is a FIFO, not a regular file") {
			t.Fatalf("openRegular(FIFO) = %v, want it refused by name", err)
		}
	case <-time.After(10 * time.Second):
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("openRegular waited on a FIFO")
	}
	regular := filepath.Join(t.TempDir(), "b")
	if err := os.WriteFile(regular, []byte("bundle"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := openRegular(regular)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, err := io.ReadAll(f); err != nil || string(b) != "bundle" {
		t.Fatalf("read %q, %v", b, err)
	}
}
