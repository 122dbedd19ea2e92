package vaulttest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLocateBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "vault")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env string
		ok        bool
	}{
		{"unset", "", false},
		{"missing", filepath.Join(dir, "nope"), false},
		{"directory", dir, false},
		{"not executable", plain, false},
		{"executable", exe, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := locateBinary(func(k string) string {
				if k == EnvBinary {
					return tc.env
				}
				return ""
			})
			if tc.ok != (err == nil) {
				t.Fatalf("locateBinary(%q) = %q, %v; want ok=%v", tc.env, got, err, tc.ok)
			}
			if tc.ok && got != tc.env {
				t.Fatalf("path %q, want %q", got, tc.env)
			}
		})
	}
}

// recordingTB records the first Fatalf or Skipf instead of stopping the test.
type recordingTB struct {
	testing.TB
	fatal, skip string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Fatalf(f string, a ...any) {
	if r.fatal == "" && r.skip == "" {
		r.fatal = "fatal"
	}
}
func (r *recordingTB) Skipf(f string, a ...any) {
	if r.fatal == "" && r.skip == "" {
		r.skip = "skip"
	}
}

// TestBinaryMissingFailsUnderCI checks that a missing binary fails the test
// under CI=true and only skips it elsewhere.
func TestBinaryMissingFailsUnderCI(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "vault")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ci, bin, want string
	}{
		{"ci missing", "true", "", "fatal"},
		{"ci present", "true", exe, ""},
		{"local missing", "", "", "skip"},
		{"local false ci", "false", "", "skip"},
		{"local present", "", exe, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv(EnvBinary, tc.bin)
			r := &recordingTB{TB: t}
			got := Binary(r)
			if r.fatal+r.skip != tc.want {
				t.Fatalf("Binary: fatal=%q skip=%q, want %q", r.fatal, r.skip, tc.want)
			}
			if tc.want == "" && got != exe {
				t.Fatalf("Binary = %q, want %q", got, exe)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"root token", "Root Token: " + tok + "\n", "Root Token: [root token redacted]\n"},
		{"unseal key", "Unseal Key: c2VjcmV0LXVuc2VhbA==\nnext", "Unseal Key: [redacted]\nnext"},
		{"token in url", "GET /x?t=" + tok, "GET /x?t=[root token redacted]"},
		{"nothing", "core: vault is unsealed", "core: vault is unsealed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := redact(tc.in, tok); got != tc.want {
				t.Fatalf("redact(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestProvisionOptionsValidate(t *testing.T) {
	key := make([]byte, 32)
	for _, tc := range []struct {
		name string
		o    ProvisionOptions
		ok   bool
	}{
		{"minimal", ProvisionOptions{Dir: "d"}, true},
		{"canaries", ProvisionOptions{Dir: "d", CursorKey: key, AuditKey: key}, true},
		{"no dir", ProvisionOptions{}, false},
		{"short cursor key", ProvisionOptions{Dir: "d", CursorKey: key[:31]}, false},
		{"long audit key", ProvisionOptions{Dir: "d", AuditKey: append(key, 0)}, false},
		{"empty non-nil key", ProvisionOptions{Dir: "d", AuditKey: []byte{}}, false},
		{"negative ttl", ProvisionOptions{Dir: "d", TokenTTL: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.validate()
			if tc.ok != (err == nil) {
				t.Fatalf("validate = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrBadOptions) {
				t.Fatalf("validate = %v, want ErrBadOptions", err)
			}
		})
	}
}

// fakeVault writes a shell script standing in for the vault binary.
func fakeVault(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vault")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStartProcessExitEarly: a server that exits at once yields ErrNotReady
// with the redacted log tail, and a port clash is retried.
func TestStartProcessExitEarly(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		attempts     int
	}{
		{"exits", "echo 'Unseal Key: SECRETUNSEAL'; echo boom; exit 3\n", 1},
		{"port taken", "echo 'Error: listen tcp: bind: address already in use'; exit 1\n", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "vault.log")
			s, err := StartProcess(t.Context(), fakeVault(t, tc.script), logPath)
			if !errors.Is(err, ErrNotReady) {
				t.Fatalf("StartProcess = %v, %v; want ErrNotReady", s, err)
			}
			if !strings.Contains(err.Error(), "boom") && tc.attempts == 1 {
				t.Fatalf("log tail missing from error: %v", err)
			}
			if strings.Contains(err.Error(), "SECRETUNSEAL") {
				t.Fatalf("unseal key leaked into error: %v", err)
			}
			b, rerr := os.ReadFile(logPath)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if n := len(strings.Split(strings.TrimSpace(string(b)), "\n")) / strings.Count(tc.script, "echo"); n != tc.attempts {
				t.Fatalf("%d attempts, want %d; log:\n%s", n, tc.attempts, b)
			}
		})
	}
}
