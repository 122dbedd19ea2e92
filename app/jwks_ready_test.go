package app_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/server/oauth"
)

// Past oauth.jwks_max_staleness without a successful JWKS fetch every
// token is refused, and /readyz says so (check oauth_jwks) until a fetch
// succeeds.
func TestJWKSStalenessIsAReadinessCheck(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}})
	var down atomic.Bool
	is := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(jwks)
	}))
	defer is.Close()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	f := newFixture(t)
	audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
	a, err := app.Open(context.Background(), app.Options{
		DataDir: f.data, Dev: true, Node: "test",
		HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", OAuth: &oauth.Config{
			Issuer: is.URL, JWKSURL: is.URL + "/jwks", Audience: "https://custos.test/mcp",
			JWKSMaxStaleness: 2 * time.Hour,
			Now:              func() time.Time { return time.Unix(0, now.Load()) },
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	if r := a.Health().Ready(ctx); r.Checks["oauth_jwks"] != "ok" {
		t.Fatalf("fresh keys: %+v", r)
	}
	down.Store(true)
	now.Add(int64(2*time.Hour + time.Minute))
	r := a.Health().Ready(ctx)
	if r.Ready() || !strings.Contains(r.Checks["oauth_jwks"], "jwks_max_staleness") {
		t.Fatalf("stale keys: %+v, want not ready naming oauth.jwks_max_staleness", r)
	}
	down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for a.Health().Ready(ctx).Checks["oauth_jwks"] != "ok" {
		if time.Now().After(deadline) {
			t.Fatal("still stale after the issuer came back")
		}
		now.Add(int64(oauth.DefaultMinRefreshInterval))
		time.Sleep(20 * time.Millisecond)
	}
}

// An issuer whose JWKS cannot be fetched at startup makes Open fail with
// one error naming the JWKS host and the cause, never its URL (whose query
// may hold a key), and saying "oauth:" once: probing the built binary,
// serve printed "custos: oauth: oauth: JWKS unavailable: ...", and for an
// HTTP error status only "HTTP status 503", without the host.
func TestOpenWithoutJWKSNamesTheHostOnce(t *testing.T) {
	is := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer is.Close()
	f := newFixture(t)
	_, err := app.Open(context.Background(), app.Options{
		DataDir: f.data, Dev: true, Node: "test",
		HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", OAuth: &oauth.Config{
			Issuer: is.URL, JWKSURL: is.URL + "/jwks?key=SECRET-KEY", Audience: "https://custos.test/mcp",
		}},
	})
	if err == nil {
		t.Fatal("opened without the issuer's keys")
	}
	host := strings.TrimPrefix(is.URL, "http://")
	if msg := err.Error(); strings.Count(msg, "oauth:") != 1 || !strings.Contains(msg, "JWKS unavailable: GET "+host+": HTTP status 503") || strings.Contains(msg, "SECRET-KEY") {
		t.Fatalf("error %q: want one \"oauth:\", the host and the cause, and no URL query", msg)
	}
}
