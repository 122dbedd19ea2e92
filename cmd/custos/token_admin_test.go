package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/server"
)

const adminPrincipal = `{"sub":"%s","roles":["clinician"],"client_id":"assistant","tenant":"general-hospital","patients":["pat-canary-1","pat-canary-2"],"purpose_of_use":"TREAT"}`

// tokenFileOf writes a token file of entries {hash, sub, expires_at}.
func tokenFileOf(t *testing.T, entries ...[3]string) string {
	t.Helper()
	var parts []string
	for _, e := range entries {
		exp := ""
		if e[2] != "" {
			exp = `,"expires_at":"` + e[2] + `"`
		}
		parts = append(parts, `{"token_sha256":"`+e[0]+`","principal":`+strings.Replace(adminPrincipal, "%s", e[1], 1)+exp+`}`)
	}
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, []byte(`{"tokens":[`+strings.Join(parts, ",")+`]}`), 0o640); err != nil {
		t.Fatal(err)
	}
	return path
}

func hexOf(c string) string { return strings.Repeat(c, 64) }

// custosIn runs the CLI with stdin.
func custosIn(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	root := newRootCmd(&out, &errb)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		printErr(&errb, err)
		return exitCode(err), out.String(), errb.String()
	}
	return 0, out.String(), errb.String()
}

// 'custos token list' shows who each token stands for and until when:
// its id, principal, patient count (never the patients) and state.
func TestTokenListShowsWhoAndUntilWhen(t *testing.T) {
	path := tokenFileOf(t,
		[3]string{hexOf("a"), "dr-active", "2099-01-01T00:00:00Z"},
		[3]string{hexOf("b"), "dr-forever", ""},
		[3]string{hexOf("c"), "dr-gone", "2001-01-01T00:00:00Z"})
	code, out, errs := runCustos("token", "list", "--tokens", path, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rows []tokenRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"dr-active": "active", "dr-forever": "no_expiry", "dr-gone": "expired"}
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		if want[r.Sub] != r.State || r.Patients != 2 || r.ID != hexOf(r.ID[:1])[:tokenIDLen] {
			t.Errorf("row %+v", r)
		}
	}
	code, table, _ := runCustos("token", "list", "--tokens", path)
	if code != 0 || !strings.Contains(table, "EXPIRES") || !strings.Contains(table, "dr-gone") {
		t.Fatalf("table (exit %d):\n%s", code, table)
	}
	if strings.Contains(out+table, "pat-canary") {
		t.Fatal("list names a patient")
	}
	if code, _, errs := runCustos("token", "list", "--tokens", filepath.Join(t.TempDir(), "none.json")); code == 0 || !strings.Contains(errs, "--tokens") {
		t.Fatalf("a missing file: exit %d, %s", code, errs)
	}
}

// 'custos token revoke' removes exactly the selected entries, keeps the
// file's mode, and leaves a file serve loads; a selection that matches
// nothing, is ambiguous, or would leave no token changes nothing.
func TestTokenRevoke(t *testing.T) {
	leaked := strings.Repeat("L", 43)
	entries := [][3]string{
		{hexOf("a"), "dr-a", "2099-01-01T00:00:00Z"},
		{"aaaaaaaa" + hexOf("1")[8:], "dr-b", ""},
		{hexOf("c"), "dr-c", "2001-01-01T00:00:00Z"},
		{server.HashToken(leaked), "dr-d", ""},
		{hexOf("e"), "dr-e", ""},
		{hexOf("f"), "dr-e", ""},
	}
	path := tokenFileOf(t, entries...)
	before, _ := os.ReadFile(path)
	unchanged := func(what string) {
		t.Helper()
		if now, _ := os.ReadFile(path); !bytes.Equal(now, before) {
			t.Fatalf("%s changed the file", what)
		}
	}
	for name, args := range map[string][]string{
		"ambiguous prefix": {"--id", "aaaaaaaa"},
		"no such id":       {"--id", "0123456789"},
		"no such sub":      {"--sub", "nobody"},
		"short id":         {"--id", "aaaa"},
		"no selector":      {},
		"dry run":          {"--sub", "dr-e", "--dry-run"},
	} {
		code, _, errs := runCustos(append([]string{"token", "revoke", "--tokens", path}, args...)...)
		if (code == 0) != (name == "dry run") {
			t.Errorf("%s: exit %d (%s)", name, code, errs)
		}
		unchanged(name)
	}
	steps := []struct {
		args  []string
		stdin string
		gone  []string
	}{
		{[]string{"--id", "aaaaaaaaaa"}, "", []string{"dr-a"}},
		{[]string{"--expired"}, "", []string{"dr-c"}},
		{[]string{"--token-stdin"}, leaked + "\n", []string{"dr-d"}},
		{[]string{"--sub", "dr-e", "--json"}, "", []string{"dr-e", "dr-e"}},
	}
	for _, s := range steps {
		code, out, errs := custosIn(s.stdin, append([]string{"token", "revoke", "--tokens", path}, s.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", s.args, code, errs)
		}
		for _, sub := range s.gone {
			if !strings.Contains(out, sub) {
				t.Errorf("%v: output does not name %s:\n%s", s.args, sub, out)
			}
		}
	}
	toks, err := server.LoadTokenFile(path, nil)
	if err != nil {
		t.Fatalf("serve would not load the file left: %v", err)
	}
	if toks.Unexpiring() != 1 {
		t.Fatalf("%d tokens without expiry left, want dr-b's alone", toks.Unexpiring())
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	before, _ = os.ReadFile(path)
	if code, _, errs := runCustos("token", "revoke", "--tokens", path, "--sub", "dr-b"); code == 0 || !strings.Contains(errs, "without any token") {
		t.Fatalf("revoking the last token: exit %d, %s", code, errs)
	}
	unchanged("revoking the last token")
}

// A token file reached through a symbolic link (a served path that links
// to the managed file) is revoked where it is: the file the link names
// changes and the link stays. Until h-review59 the new file was renamed
// over the link, so a serve reading the file by its own name (the link's
// target) kept accepting the token 'revoke' said it had revoked.
func TestTokenRevokeThroughASymlinkChangesTheFileItNames(t *testing.T) {
	target := tokenFileOf(t,
		[3]string{hexOf("a"), "dr-keep", ""},
		[3]string{hexOf("b"), "dr-leaked", ""})
	link := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCustos("token", "revoke", "--tokens", link, "--sub", "dr-leaked"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
	data, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), hexOf("b")) || !strings.Contains(string(data), hexOf("a")) {
		t.Fatalf("the file the link names still holds the revoked token, or lost the kept one:\n%s", data)
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("the file's mode: %v %v", fi, err)
	}
}

// TestTokenNewNamesTheBadPrincipalFile: a --principal file that cannot be
// read or is not a principal is named by the flag, and no token file is
// written. The error read "server: invalid configuration: principal file:
// ...", which names no flag of 'token new'.
func TestTokenNewNamesTheBadPrincipalFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"sub": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.json")
	for _, p := range []string{filepath.Join(dir, "missing.json"), bad} {
		code, stdout, stderr := runCustos("token", "new", "--principal", p, "--tokens", tokens)
		if code == 0 || stdout != "" || !strings.Contains(stderr, "--principal "+p) {
			t.Errorf("token new --principal %s: exit %d, stdout %q, stderr %q; want a failure naming --principal", p, code, stdout, stderr)
		}
	}
	if _, err := os.Stat(tokens); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("token file after refused mints: %v", err)
	}
}
