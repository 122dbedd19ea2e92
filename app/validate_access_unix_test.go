//go:build unix

package app_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/secrets"
)

// asNobody runs the test named name in a copy of this test binary as the
// account nobody (uid and gid 65534) and fails t with its output if it
// fails. A test of what another account may read cannot run as root, who
// reads everything; the machines that run the tests run them as root.
func asNobody(t *testing.T, name string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "custos-as-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "app.test")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=/tmp", "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s as nobody: %v\n%s", name, err, out)
	}
}

// TestCheckNamesWhatServeCannotUse: docs/operations.md has the operator
// run 'custos config check' as the service account ("runuser -u custos
// --") to see what serve will see. It said "valid" for a secret id file
// root's with mode 0400, a TLS key root's with mode 0600 and an anchor
// directory root's: serve, as that account, then failed at startup
// ("permission denied"). Check now names each file the account cannot read
// and each directory it cannot write in, and serve refuses such options
// before it opens Vault. Found by probe-ops with the real install.
func TestCheckNamesWhatServeCannotUse(t *testing.T) {
	if os.Geteuid() == 0 {
		asNobody(t, "TestCheckNamesWhatServeCannotUse")
		return
	}
	dir := t.TempDir()
	file := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sub := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	o := app.Options{
		DataDir:     sub("data", 0o500),
		Node:        "n1",
		HTTP:        &app.HTTPOptions{Listen: "127.0.0.1:8443", CertFile: file("server.crt", 0o644), KeyFile: file("server.key", 0o000), TokensFile: file("tokens.json", 0o200)},
		Checkpoints: app.CheckpointOptions{AnchorDir: sub("anchor", 0o555)},
		Vault: &secrets.VaultOptions{Address: "https://vault.example:8200", AppRole: &secrets.AppRole{
			RoleIDFile: file("role-id", 0o400), SecretIDFile: file("secret-id", 0o000),
		}},
	}
	ps := o.Check(app.CheckOptions{})
	for _, want := range []struct{ key, msg string }{
		{"tls.key_file", "not readable by this account"},
		{"http.tokens_file", "not readable by this account"},
		{"vault.approle.secret_id_file", "not readable by this account"},
		{"data_dir", "not writable by this account"},
		{"audit.anchor_dir", "not writable by this account"},
	} {
		found := false
		for _, p := range ps {
			found = found || p.Key == want.key && strings.Contains(p.Message, want.msg)
		}
		if !found {
			t.Errorf("no problem %s: ...%s... in\n%v", want.key, want.msg, ps)
		}
	}
	for _, p := range ps {
		if p.Key == "tls.cert_file" || p.Key == "vault.approle.role_id_file" {
			t.Errorf("a file this account can read is named: %v", p)
		}
		if strings.Contains(p.Message, dir) {
			t.Errorf("a problem repeats a path: %v", p)
		}
	}
}
