package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyAllowRollbackIsAOneOffFlag: --policy-allow-rollback reaches
// app.Options from the command line, only with a bundle, and a
// configuration file cannot set it (an override left in a file would let
// the next restart roll back unnoticed).
func TestPolicyAllowRollbackIsAOneOffFlag(t *testing.T) {
	dir := t.TempDir()
	data, tokens, bundle, pub := filepath.Join(dir, "data"), filepath.Join(dir, "tokens.json"), filepath.Join(dir, "p.tar.gz"), filepath.Join(dir, "k.pub.pem")
	os.Mkdir(data, 0o700)
	for _, f := range []string{tokens, bundle, pub} {
		if err := os.WriteFile(f, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := []string{"--data-dir", data, "--dev", "--listen", "127.0.0.1:0", "--tokens", tokens}
	parse := func(cfg string, args ...string) (bool, error) {
		t.Helper()
		fs := newServeCmd().Flags()
		if err := fs.Parse(append(append([]string{}, base...), args...)); err != nil {
			t.Fatal(err)
		}
		o, _, _, err := serveOptions(fs, cfg, func(string) string { return "" })
		return o.Policy.AllowRollback, err
	}
	if allow, err := parse("", "--policy-bundle", bundle, "--policy-key", "team="+pub, "--policy-allow-rollback"); err != nil || !allow {
		t.Fatalf("with a bundle: %v, %v", allow, err)
	}
	if allow, err := parse("", "--policy-bundle", bundle, "--policy-key", "team="+pub); err != nil || allow {
		t.Fatalf("without the flag: %v, %v", allow, err)
	}
	if _, err := parse("", "--policy-allow-rollback"); err == nil || !strings.Contains(err.Error(), "only used with --policy-bundle") {
		t.Fatalf("without a bundle: %v", err)
	}
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("policy:\n  bundle: "+bundle+"\n  allow_rollback: true\n  keys:\n    - id: team\n      file: "+pub+"\n"), 0o600)
	if _, err := parse(cfg); err == nil || !strings.Contains(err.Error(), "allow_rollback") {
		t.Fatalf("allow_rollback in a file: %v", err)
	}
}
