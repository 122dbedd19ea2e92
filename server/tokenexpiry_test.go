package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
)

// A dev token with expires_at is served before it and refused at and
// after it, through the real HTTP handler, exactly as an unknown token is
// (401, the same challenge); only its auth/reject record says why
// ("http_401,invalid_token,expired", as for an expired OAuth token), and
// it names no principal. Before expires_at existed every dev token
// verified for ever (Verify: "dev tokens do not expire"), and a token file
// carrying expires_at was refused at load as an unknown field.
func TestExpiredDevTokenIsRefusedAsUnknown(t *testing.T) {
	f := newFixture(t, "")
	raw, err := os.ReadFile(filepath.Join(f.seedDir, "principals", "clinician.json"))
	if err != nil {
		t.Fatal(err)
	}
	const tok = "expiring-token-" + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	// Written out, as an operator's file is (and so that the test runs
	// against the code before expires_at, which refused the file).
	data := `{"tokens":[{"token_sha256":"` + server.HashToken(tok) + `","principal":` + string(raw) +
		`,"expires_at":"` + exp.Format(time.RFC3339) + `"}]}`
	toks, err := server.ParseTokenFile([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	var now atomic.Pointer[time.Time]
	setNow := func(t time.Time) { now.Store(&t) }
	setNow(time.Now())
	server.SetTokensClock(toks, func() time.Time { return *now.Load() })
	ts := httptest.NewServer(f.srv.HTTPHandler(toks))
	t.Cleanup(ts.Close)
	url := ts.URL + server.MCPPath

	list := func(tok string) (int, http.Header, map[string]any) {
		return post(t, url, tok, map[string]string{"Mcp-Protocol-Version": rev2026},
			`{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{`+meta2026("")+`}}`)
	}
	if st, _, msg := list(tok); st != http.StatusOK || msg["result"] == nil {
		t.Fatalf("before expires_at: HTTP %d %v, want the list", st, msg)
	}

	_, unknownHdr, unknownMsg := list("unknown-token-" + strings.Repeat("y", 40))
	for _, at := range []time.Time{exp, exp.Add(time.Minute)} {
		setNow(at)
		before := len(f.records())
		st, hdr, msg := list(tok)
		if st != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != unknownHdr.Get("WWW-Authenticate") || len(msg) != len(unknownMsg) {
			t.Errorf("at %s (expires_at %s): HTTP %d, challenge %q, want 401 and an unknown token's %q",
				at.Format(time.RFC3339), exp.Format(time.RFC3339), st, hdr.Get("WWW-Authenticate"), unknownHdr.Get("WWW-Authenticate"))
		}
		recs := f.records()[before:]
		if at.Equal(exp) {
			if len(recs) != 1 || recs[0].Action != server.ActionAuthReject || recs[0].Outcome != audit.OutcomeDeny ||
				recs[0].Reason != "http_401,invalid_token,expired" || recs[0].Principal.Sub != "" {
				t.Errorf("records of the expired token's refusal: %+v, want one auth/reject http_401,invalid_token,expired naming nobody", recs)
			}
		}
		for _, r := range recs {
			if r.Action != server.ActionAuthReject {
				t.Errorf("an expired token reached MCP: %+v", r)
			}
		}
	}
}

// Verify's own contract: refused at expires_at (not only after), with
// auth.ErrInvalidToken; before it, TokenInfo.Expiration is expires_at; a
// token without expires_at verifies whatever the clock says.
func TestDevTokenExpiration(t *testing.T) {
	const principal = `{"sub":"dr-a","roles":["clinician"],"client_id":"c","tenant":"t","patients":[],"purpose_of_use":"TREAT"}`
	expiring, forever := strings.Repeat("e", 43), strings.Repeat("f", 43)
	toks, err := server.ParseTokenFile([]byte(`{"tokens":[` +
		`{"token_sha256":"` + server.HashToken(expiring) + `","principal":` + principal + `,"expires_at":"2030-01-02T03:04:05Z"},` +
		`{"token_sha256":"` + server.HashToken(forever) + `","principal":` + principal + `}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := toks.Unexpiring(); got != 1 {
		t.Errorf("Unexpiring() = %d, want 1", got)
	}
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var now time.Time
	server.SetTokensClock(toks, func() time.Time { return now })
	req := httptest.NewRequest("POST", "/mcp", nil)
	ctx := context.Background()

	now = exp.Add(-time.Second)
	info, err := toks.Verify(ctx, expiring, req)
	if err != nil || !info.Expiration.Equal(exp) {
		t.Fatalf("a second before expires_at: %v, %v; want served, Expiration %s", info, err, exp)
	}
	for _, at := range []time.Time{exp, exp.Add(time.Hour)} {
		now = at
		if _, err := toks.Verify(ctx, expiring, req); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("at %s: %v, want auth.ErrInvalidToken", at, err)
		}
		if info, err := toks.Verify(ctx, forever, req); err != nil || !info.Expiration.After(at) {
			t.Errorf("a token without expires_at at %s: %v, %v; want served", at, info, err)
		}
	}
}

// A malformed expires_at is refused at load, naming tokens[i].expires_at,
// and nothing is loaded.
func TestTokenFileRefusesABadExpiresAt(t *testing.T) {
	const principal = `{"sub":"dr-a","roles":["clinician"],"client_id":"c","tenant":"t","patients":[],"purpose_of_use":"TREAT"}`
	good := `{"token_sha256":"` + server.HashToken(strings.Repeat("a", 43)) + `","principal":` + principal + `,"expires_at":"2030-01-02T03:04:05Z"}`
	for _, bad := range []string{
		`"2030-01-02"`,                // a date, no time
		`"2030-01-02T03:04:05"`,       // no zone
		`"2030-01-02T04:04:05+01:00"`, // not UTC
		`"2030-01-02T03:04:05.5Z"`,    // a fraction
		`"2030-13-02T03:04:05Z"`,      // no such month
		`"tomorrow"`,
		`""`,
		`1893553445`,
	} {
		data := `{"tokens":[` + good + `,{"token_sha256":"` + server.HashToken(strings.Repeat("b", 43)) + `","principal":` + principal + `,"expires_at":` + bad + `}]}`
		toks, err := server.ParseTokenFile([]byte(data))
		want := "tokens[1].expires_at"
		if bad == `1893553445` {
			want = "expires_at of type string" // the decoder's own words
		}
		if !errors.Is(err, server.ErrBadConfig) || !strings.Contains(err.Error(), want) || toks != nil {
			t.Errorf("expires_at %s: %v, %v; want ErrBadConfig naming %s", bad, toks, err, want)
		}
	}
}
