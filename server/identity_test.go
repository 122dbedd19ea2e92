package server

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTokenFileValidation(t *testing.T) {
	const principal = `{"sub":"dr-a","roles":["clinician"],"client_id":"c","tenant":"t","patients":[],"purpose_of_use":"TREAT"}`
	h := HashToken(strings.Repeat("x", 43))
	cases := map[string]string{
		"not json":         `{`,
		"no tokens":        `{"tokens":[]}`,
		"unknown field":    `{"tokens":[],"extra":1}`,
		"short hash":       `{"tokens":[{"token_sha256":"abcd","principal":` + principal + `}]}`,
		"no sub":           `{"tokens":[{"token_sha256":"` + h + `","principal":{"tenant":"t","client_id":"c"}}]}`,
		"unknown in princ": `{"tokens":[{"token_sha256":"` + h + `","principal":{"sub":"a","tenant":"t","client_id":"c","password":"x"}}]}`,
		"duplicate":        `{"tokens":[{"token_sha256":"` + h + `","principal":` + principal + `},{"token_sha256":"` + h + `","principal":` + principal + `}]}`,
	}
	for name, data := range cases {
		if _, err := ParseTokenFile([]byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	toks, err := ParseTokenFile([]byte(`{"tokens":[{"token_sha256":"` + h + `","principal":` + principal + `}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/mcp", nil)
	if _, err := toks.Verify(t.Context(), strings.Repeat("y", 43), req); err == nil {
		t.Fatal("wrong token accepted")
	}
	info, err := toks.Verify(t.Context(), strings.Repeat("x", 43), req)
	if err != nil {
		t.Fatal(err)
	}
	id := info.Extra[tokenInfoKey].(Identity)
	if id.Principal.Sub != "dr-a" || id.PurposeOfUse != "TREAT" || id.Source != req.RemoteAddr {
		t.Fatalf("identity %+v", id)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:80": true, "localhost:1": true, "127.9.9.9:0": true,
		"0.0.0.0:8080": false, "10.0.0.1:80": false, ":8080": false, "example.org:80": false, "127.0.0.1": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// A token file that cannot be used is named, and an empty one is called
// empty, not "EOF" (found by probe-cli: serve --tokens EMPTY said only
// "token file: EOF").
func TestLoadTokenFileNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens.json")
	for content, want := range map[string]string{
		"":        "token file: empty",
		" \n":     "token file: empty",
		`{"tok`:   "token file:",
		`{"a":1}`: "token file:",
	} {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadTokenFile(p, nil)
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: %v, want ErrBadConfig naming %s and %q", content, err, p, want)
		}
	}
}

// The Identity of a dev token with expires_at carries it, as an OAuth
// token's carries exp, so that a subscription's notifications stop at it
// (notifyDecision, token_expired).
func TestDevTokenIdentityCarriesItsExpiry(t *testing.T) {
	const principal = `{"sub":"dr-a","roles":["clinician"],"client_id":"c","tenant":"t","patients":[],"purpose_of_use":"TREAT"}`
	tok := strings.Repeat("x", 43)
	toks, err := ParseTokenFile([]byte(`{"tokens":[{"token_sha256":"` + HashToken(tok) + `","principal":` + principal + `,"expires_at":"2099-01-02T03:04:05Z"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	info, err := toks.Verify(t.Context(), tok, httptest.NewRequest("POST", "/mcp", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Extra[tokenInfoKey].(Identity).expires; !got.Equal(time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("identity expires %v, want the entry's expires_at", got)
	}
}
