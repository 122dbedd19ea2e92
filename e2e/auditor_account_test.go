package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestAuditorOfAnotherAccount: an auditor command run by an account that
// may read the data directory but is not the server's (docs/audit-access.md,
// decisions 1 and 2) fails with an error that says so, exit 1, and changes
// nothing: next to a running server the kernel refuses the admin socket
// (it read "admin: …: Get \"http://custos-admin/v1/ping\": dial unix …:
// connect: permission denied"), and on a stopped server the log cannot be
// opened for writing. As root the command runs as nobody; otherwise the
// modes keep this account out of the socket and the lock file.
func TestAuditorOfAnotherAccount(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	newToken(t, d.principal("clinician"), tokens)
	// The binary, where the other account can run it.
	run := exec.Command
	var cred *syscall.Credential
	exe := bin
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
		dir, err := os.MkdirTemp("", "custos-e2e-bin-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		exe = filepath.Join(dir, "custos")
		copyFile(t, bin, exe)
		os.Chmod(exe, 0o755)
		os.Chmod(dir, 0o755)
	}
	other := func(args ...string) (string, int) {
		t.Helper()
		c := run(exe, args...)
		c.Dir = os.TempDir()
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := c.CombinedOutput()
		code := 0
		if ee := (*exec.ExitError)(nil); err != nil {
			var ok bool
			if ee, ok = err.(*exec.ExitError); !ok {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		return string(out), code
	}
	// Read permission for everyone on the way to the data directory and
	// in it, as an operator would give an auditor's account.
	readable := func() {
		for p := d.data; p != filepath.Dir(p) && p != os.TempDir(); p = filepath.Dir(p) {
			if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
				os.Chmod(p, fi.Mode().Perm()|0o055)
			}
		}
		filepath.Walk(d.data, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				os.Chmod(p, fi.Mode().Perm()|0o044)
			}
			return nil
		})
	}

	s := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--node", "e2e")
	readable()
	sock := filepath.Join(d.data, "admin.sock")
	if cred == nil {
		os.Chmod(sock, 0)
		defer os.Chmod(sock, 0o600)
	}
	before := mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "jsonl")
	out, code := other("audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "jsonl")
	if code != 1 || !strings.Contains(out, "may not use the admin socket "+sock+" (permission denied)") {
		t.Errorf("another account next to a running server: exit %d\n%s", code, out)
	}
	if cred == nil {
		os.Chmod(sock, 0o600)
	}
	after := mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "jsonl")
	if got, want := strings.Count(after, "\n"), strings.Count(before, "\n")+1; got != want {
		t.Errorf("the refused command changed the log: %d records after, want %d (the next export's own only)", got, want)
	}

	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	readable()
	lock := d.audit() + ".lock"
	if cred == nil {
		os.Chmod(lock, 0o400)
		defer os.Chmod(lock, 0o600)
	}
	st, _ := os.Stat(d.audit())
	out, code = other("audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "jsonl")
	if code != 1 || !strings.Contains(out, "cannot open "+d.audit()+" for writing (permission denied)") {
		t.Errorf("another account on a stopped server: exit %d\n%s", code, out)
	}
	if st2, _ := os.Stat(d.audit()); st2.Size() != st.Size() || !st2.ModTime().Equal(st.ModTime()) {
		t.Errorf("the refused command changed %s", d.audit())
	}
	if cred == nil {
		return
	}
	// The other account now owns the data directory, but its lock file is
	// root's (made by a root auditor command before such files were given
	// to the log's owner): the command was told to run as the directory's
	// owner, which it does; it is told whose the lock file is. A root
	// auditor command leaves it root's (a lock file root finds may be a
	// root file's second name: it gives away only one it creates); once
	// chowned as the message says, the owner's command works.
	filepath.Walk(d.data, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, int(cred.Uid), int(cred.Gid))
		}
		return nil
	})
	os.Chown(lock, 0, 0)
	os.Chmod(lock, 0o600)
	out, code = other("audit", "verify", "--data-dir", d.data)
	// Exit 2: no verdict was reached (cmd/custos verdictExit).
	if code != 2 || !strings.Contains(out, lock+" belongs to uid 0") {
		t.Errorf("the data directory's owner, its lock file root's: exit %d\n%s", code, out)
	}
	mustCustos(t, "audit", "verify", "--data-dir", d.data)
	if fi, err := os.Stat(lock); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("a root auditor command gave away the lock file it found (%v)", err)
	}
	if err := os.Chown(lock, int(cred.Uid), int(cred.Gid)); err != nil {
		t.Fatal(err)
	}
	if out, code = other("audit", "verify", "--data-dir", d.data); code != 0 {
		t.Errorf("the data directory's owner after chown of its lock file: exit %d\n%s", code, out)
	}
}
