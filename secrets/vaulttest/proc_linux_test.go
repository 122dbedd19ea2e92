//go:build linux

package vaulttest

import (
	"bytes"
	"os"
	"strconv"
	"testing"
)

// TestRootTokenNotInProcessArgs: the dev server's root token was a
// command-line flag (-dev-root-token-id), which every local user reads in
// ps or /proc/PID/cmdline while the server runs (tools/vaultdev runs on
// developers' machines); it is passed in the child's environment, which
// only its owner reads.
func TestRootTokenNotInProcessArgs(t *testing.T) {
	s := Start(t, Options{})
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cmdline, []byte("server")) {
		t.Fatalf("not the Vault server's command line: %q", cmdline)
	}
	if bytes.Contains(cmdline, []byte(s.RootToken)) {
		t.Errorf("the root token is in the Vault server's command line")
	}
	// readyOnce looks the root token up.
	c, err := s.Client(s.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.readyOnce(t.Context(), c); err != nil {
		t.Fatalf("the root token does not work: %v", err)
	}
}
