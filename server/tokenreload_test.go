package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/internal/durable"
)

const reloadPrincipal = `{"sub":"dr-a","roles":["clinician"],"client_id":"c","tenant":"t","patients":["p1"],"purpose_of_use":"TREAT"}`

// writeTokens writes a token file holding the given tokens, as 'custos
// token new' and 'custos token revoke' do (a new file renamed over the old).
func writeTokens(t *testing.T, path string, tokens ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"tokens":[`)
	for i, tok := range tokens {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"token_sha256":"` + HashToken(tok) + `","principal":` + reloadPrincipal + `}`)
	}
	b.WriteString("]}")
	if err := durable.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func verifies(t *testing.T, toks *Tokens, tok string) bool {
	t.Helper()
	_, err := toks.Verify(t.Context(), tok, httptest.NewRequest("POST", "/mcp", nil))
	return err == nil
}

// A served token file is reloaded when it changes: a token removed from it
// (revoked) is refused, one added verifies, without a restart; once a
// second on a request, at once on Reload (SIGHUP). Until 2026-12-07 serve
// read the file once, at start: a revoked token verified until a restart.
func TestTokenFileReloadsWhenItChanges(t *testing.T) {
	a, b, c := strings.Repeat("a", 43), strings.Repeat("b", 43), strings.Repeat("c", 43)
	path := filepath.Join(t.TempDir(), "tokens.json")
	writeTokens(t, path, a, b)
	var logs bytes.Buffer
	toks, err := LoadTokenFile(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !verifies(t, toks, a) || !verifies(t, toks, b) || verifies(t, toks, c) {
		t.Fatal("the loaded file does not verify as written")
	}
	writeTokens(t, path, b, c) // a revoked, c added
	if err := toks.Reload(); err != nil {
		t.Fatal(err)
	}
	if verifies(t, toks, a) || !verifies(t, toks, b) || !verifies(t, toks, c) {
		t.Fatal("after Reload: a revoked token verifies, or a kept or added one does not")
	}
	writeTokens(t, path, c) // b revoked; noticed on a request a second later
	if !verifies(t, toks, b) {
		t.Fatal("checked before the second passed: the file was read on every request")
	}
	time.Sleep(tokenCheckInterval + 100*time.Millisecond)
	if verifies(t, toks, b) {
		t.Fatal("a token revoked more than a second ago still verifies")
	}
	if !strings.Contains(logs.String(), "token file reloaded") || strings.Contains(logs.String(), HashToken(a)) {
		t.Fatalf("log: %s", logs.String())
	}
}

// A token file that no longer loads (an edit that broke it, a file removed)
// leaves the tokens loaded before in force, and says so once, at error
// level, naming the file and the problem (as at start: the entry's index, its
// sub), never a digest or a patient.
func TestBrokenTokenFileKeepsTheTokensInForce(t *testing.T) {
	a := strings.Repeat("a", 43)
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.json")
	writeTokens(t, path, a)
	var logs bytes.Buffer
	toks, err := LoadTokenFile(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	broken := `{"tokens":[{"token_sha256":"` + HashToken(a) + `","principal":{"sub":"dr-a"}}]}`
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := toks.Reload(); err == nil || !strings.Contains(err.Error(), "tokens[0]") {
		t.Fatalf("Reload of a broken file: %v, want an error naming tokens[0]", err)
	}
	if !verifies(t, toks, a) {
		t.Fatal("a broken file dropped the tokens in force")
	}
	toks.src.next.Store(0)
	verifies(t, toks, a) // a second check of the same broken file: no second line
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Fatalf("%d error lines, want 1:\n%s", n, logs.String())
	}
	// Broken another way: said again, once.
	if err := os.WriteFile(path, []byte(`{"tokens":[`), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		toks.src.next.Store(0)
		verifies(t, toks, a)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 2 {
		t.Fatalf("%d error lines after a second breakage, want 2:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), HashToken(a)) || strings.Contains(logs.String(), "p1") {
		t.Fatalf("log names a digest or a patient: %s", logs.String())
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	toks.src.next.Store(0)
	if !verifies(t, toks, a) {
		t.Fatal("a removed file dropped the tokens in force")
	}
	writeTokens(t, path, a)
	if err := toks.Reload(); err != nil || !verifies(t, toks, a) {
		t.Fatalf("the mended file: %v", err)
	}
}

// loadCredential loads the token file at path and verifies tok with it.
func loadCredential(t *testing.T, path, tok string) (*Tokens, Identity) {
	t.Helper()
	toks, err := LoadTokenFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := DevTokenIdentity(toks, tok)
	if err != nil {
		t.Fatal(err)
	}
	return toks, id
}

// A credential stays current while its entry stays in the file unchanged,
// across reloads that change other entries; it is revoked when its entry
// leaves the file or is edited (a subscription's notifications stop then).
func TestCredentialRevokedWhenItsEntryLeaves(t *testing.T) {
	a, b := strings.Repeat("a", 43), strings.Repeat("b", 43)
	path := filepath.Join(t.TempDir(), "tokens.json")
	writeTokens(t, path, a)
	toks, id := loadCredential(t, path, a)
	writeTokens(t, path, a, b)
	if err := toks.Reload(); err != nil {
		t.Fatal(err)
	}
	if id.revoked() {
		t.Fatal("a's credential revoked by a reload that only added b")
	}
	edited := `{"tokens":[{"token_sha256":"` + HashToken(a) + `","principal":` + strings.Replace(reloadPrincipal, `"p1"`, `"p2"`, 1) + `}]}`
	if err := durable.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := toks.Reload(); err != nil {
		t.Fatal(err)
	}
	if !id.revoked() {
		t.Fatal("a's credential still current after its principal was edited")
	}
	if (Identity{}).revoked() {
		t.Fatal("an identity without a dev token is revoked")
	}
}

// An entry 'custos token new' or 'custos token revoke' writes back unchanged
// keeps its credential current, however the file was written: they
// re-encode every entry (encoding/json escapes <, > and & in a principal as
// \u003c, \u003e, \u0026), and a principal written by hand with a literal
// '&' read as edited, so a subscription made with an untouched token lost
// its notifications when another token was revoked.
func TestCredentialKeptWhenTheCommandsRewriteItsEntry(t *testing.T) {
	a, b := strings.Repeat("a", 43), strings.Repeat("b", 43)
	path := filepath.Join(t.TempDir(), "tokens.json")
	principal := strings.Replace(reloadPrincipal, `"tenant":"t"`, `"tenant":"st-mary&st-john"`, 1)
	hand := `{"tokens":[{"token_sha256":"` + HashToken(a) + `","principal":` + principal + `}]}`
	if err := durable.WriteFile(path, []byte(hand), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, id := loadCredential(t, path, a)
	// What 'custos token new' does to the file: decode, add, re-encode.
	var tf TokenFile
	if err := json.Unmarshal([]byte(hand), &tf); err != nil {
		t.Fatal(err)
	}
	tf.Tokens = append(tf.Tokens, TokenEntry{TokenSHA256: HashToken(b), Principal: json.RawMessage(reloadPrincipal)})
	data, err := json.MarshalIndent(tf, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := durable.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := toks.Reload(); err != nil {
		t.Fatal(err)
	}
	if id.revoked() {
		t.Fatalf("a's credential revoked by a rewrite that left its entry as it was:\n%s", data)
	}
}
