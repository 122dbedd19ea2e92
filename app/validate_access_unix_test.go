//go:build unix

package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/internal/asnobody"
	"github.com/custos-mcp/custos/secrets"
)

// TestCheckNamesWhatServeCannotUse: docs/operations.md has the operator
// run 'custos config check' as the service account ("runuser -u custos
// --") to see what serve will see. It said "valid" for a secret id file
// root's with mode 0400, a TLS key root's with mode 0600 and an anchor
// directory root's: serve, as that account, then failed at startup
// ("permission denied"). Check now names each file the account cannot read
// and each directory it cannot write in, and serve refuses such options
// before it opens Vault. Found by probe-ops with the real install.
func TestCheckNamesWhatServeCannotUse(t *testing.T) {
	if asnobody.Run(t, "TestCheckNamesWhatServeCannotUse") {
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
