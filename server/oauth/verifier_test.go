package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/custos-mcp/custos/policy"
)

func TestVerifyValidMapsPrincipal(t *testing.T) {
	is := newIssuer(t, rsaKey, ecKey, edKey)
	v := is.verifier(t)
	for _, k := range []signingKey{rsaKey, ecKey, edKey} {
		t.Run(string(k.alg), func(t *testing.T) {
			c, err := v.Verify(context.Background(), sign(t, k, is.claims()))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			want := Claims{
				Principal: policy.Principal{Sub: "dr.alice", Roles: []string{"clinician"}, ClientID: "claude-desktop",
					Tenant: "org-a", Patients: []string{"11111111-1111-1111-1111-111111111111"}},
				Issuer: is.srv.URL, Subject: "dr.alice", Audience: []string{testAudience}, ID: "tok-1",
				Expiry: t0.Add(5 * time.Minute), NotBefore: t0.Add(-time.Minute), IssuedAt: t0.Add(-time.Minute),
				Scopes: []string{"resources:list", "resources:read"}, AuthorizedParty: "claude-desktop",
				PurposeOfUse: "TREAT",
			}
			if !reflect.DeepEqual(c, want) {
				t.Errorf("claims:\n got %+v\nwant %+v", c, want)
			}
		})
	}
}

// noneToken builds an unsigned token (alg none) by hand.
func noneToken(claims map[string]any) string {
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "none", "kid": "rsa-1", "typ": "at+jwt"})
	p, _ := json.Marshal(claims)
	return enc.EncodeToString(h) + "." + enc.EncodeToString(p) + "."
}

// hmacToken signs with HS256 using secret (key-confusion attack).
func hmacToken(t *testing.T, kid string, secret []byte, claims map[string]any) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: secret, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestVerifyRejects(t *testing.T) {
	is := newIssuer(t, rsaKey, ecKey, edKey)
	v := is.verifier(t)
	skew := DefaultSkew
	rogue, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pubDER, _ := x509.MarshalPKIXPublicKey(rsaKey.public().Key)
	pubJWK, _ := json.Marshal(rsaKey.public())
	valid := sign(t, ecKey, is.claims())
	parts := strings.Split(valid, ".")
	otherPayload := strings.Split(sign(t, ecKey, is.claims(set("sub", "mallory"))), ".")[1]
	noKID, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: ecKey.priv}, nil)
	noKIDTok, _ := jwt.Signed(noKID).Claims(is.claims()).Serialize()
	idTyp, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: ecKey.priv, KeyID: "ec-1"}},
		(&jose.SignerOptions{}).WithType("logout+jwt"))
	idTypTok, _ := jwt.Signed(idTyp).Claims(is.claims()).Serialize()

	tests := []struct {
		name  string
		token string
		want  error // nil: accepted
	}{
		{"aud array containing us", sign(t, ecKey, is.claims(set("aud", []string{"https://other", testAudience}))), nil},
		{"wrong audience", sign(t, ecKey, is.claims(set("aud", "https://other.test/mcp"))), ErrAudience},
		{"audience prefix only", sign(t, ecKey, is.claims(set("aud", "https://custos.test"))), ErrAudience},
		{"no audience", sign(t, ecKey, is.claims(del("aud"))), ErrAudience},
		{"wrong issuer", sign(t, ecKey, is.claims(set("iss", "https://evil.test"))), ErrIssuer},
		{"expired beyond skew", sign(t, ecKey, is.claims(set("exp", t0.Add(-skew-time.Second).Unix()))), ErrExpired},
		{"expired at skew", sign(t, ecKey, is.claims(set("exp", t0.Add(-skew).Unix()))), ErrExpired},
		{"expired within skew", sign(t, ecKey, is.claims(set("exp", t0.Add(-skew/2).Unix()))), nil},
		{"nbf beyond skew", sign(t, ecKey, is.claims(set("nbf", t0.Add(skew+time.Second).Unix()))), ErrNotYetValid},
		{"nbf within skew", sign(t, ecKey, is.claims(set("nbf", t0.Add(skew/2).Unix()))), nil},
		{"iat beyond skew", sign(t, ecKey, is.claims(set("iat", t0.Add(skew+time.Second).Unix()))), ErrNotYetValid},
		{"missing exp", sign(t, ecKey, is.claims(del("exp"))), ErrInvalid},
		{"missing sub", sign(t, ecKey, is.claims(del("sub"))), ErrInvalid},
		{"empty sub", sign(t, ecKey, is.claims(set("sub", ""))), ErrInvalid},
		{"missing tenant", sign(t, ecKey, is.claims(del("tenant"))), ErrInvalid},
		{"no client identity", sign(t, ecKey, is.claims(del("azp"))), ErrInvalid},
		{"roles not an array", sign(t, ecKey, is.claims(set("roles", "clinician"))), ErrInvalid},
		{"patients not strings", sign(t, ecKey, is.claims(set("patients", []int{1}))), ErrInvalid},
		{"sub not a string", sign(t, ecKey, is.claims(set("sub", 7))), ErrInvalid},
		{"exp not a number", sign(t, ecKey, is.claims(set("exp", "soon"))), ErrInvalid},
		{"bad signature (payload swapped)", parts[0] + "." + otherPayload + "." + parts[2], ErrInvalid},
		{"bad signature (rogue key, our kid)", sign(t, signingKey{"ec-1", jose.ES256, rogue}, is.claims()), ErrInvalid},
		{"alg none", noneToken(is.claims()), ErrInvalid},
		{"HS256 with public key DER as secret", hmacToken(t, "rsa-1", pubDER, is.claims()), ErrInvalid},
		{"HS256 with public JWK as secret", hmacToken(t, "rsa-1", pubJWK, is.claims()), ErrInvalid},
		{"ES256 token naming an RSA kid", sign(t, signingKey{"rsa-1", jose.ES256, ecKey.priv}, is.claims()), ErrInvalid},
		{"no kid", noKIDTok, ErrInvalid},
		{"typ logout+jwt", idTypTok, ErrInvalid},
		{"garbage", "not.a.jwt", ErrInvalid},
		{"JWS JSON serialization", `{"payload":"e30","signatures":[]}`, ErrInvalid},
		{"empty", "", ErrMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.Verify(context.Background(), tt.token)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v, want success", err)
				}
				if c.Subject == "" {
					t.Fatal("accepted token has no subject")
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify error = %v, want %v", err, tt.want)
			}
			if !reflect.DeepEqual(c, Claims{}) {
				t.Errorf("rejected token returned claims %+v", c)
			}
			for _, seg := range strings.Split(tt.token, ".") {
				if len(seg) > 8 && strings.Contains(err.Error(), seg) {
					t.Errorf("error %q contains part of the token", err)
				}
			}
			for _, val := range []string{"mallory", "https://evil.test", "https://other.test/mcp", "soon"} {
				if strings.Contains(err.Error(), val) {
					t.Errorf("error %q contains claim value %q", err, val)
				}
			}
		})
	}
}

// A token with critical header extensions is refused as such (found by
// probe: it was refused as "signature does not verify", which sends an
// operator looking at keys).
func TestCriticalHeaderIsRefusedByName(t *testing.T) {
	is := newIssuer(t, ecKey)
	v := is.verifier(t)
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: ecKey.priv, KeyID: "ec-1"}},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("exp", t0.Unix()).WithCritical("exp"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(is.claims()).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "crit") {
		t.Fatalf("token with crit: %v, want ErrInvalid naming crit", err)
	}
}

// Okta's access tokens name the client in "cid" and Entra ID's v1.0
// tokens in "appid", neither with azp or client_id: with ClientClaim set
// they verify, the client taken from that claim after azp and client_id;
// without it they are refused as naming no client.
func TestClientClaimOfOktaAndEntraTokens(t *testing.T) {
	is := newIssuer(t, ecKey)
	for _, c := range []struct{ claim, value string }{{"cid", "0oa1b2c3d4EXAMPLE"}, {"appid", "6e74172b-be56-4843-9ff4-e66a39bb12e3"}} {
		token := sign(t, ecKey, is.claims(del("azp"), set(c.claim, c.value)))
		if _, err := is.verifier(t).Verify(context.Background(), token); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no client identity") {
			t.Errorf("%s without ClientClaim: %v, want no client identity", c.claim, err)
		}
		v := is.verifier(t, func(cfg *Config) { cfg.ClientClaim = c.claim })
		got, err := v.Verify(context.Background(), token)
		if err != nil || got.Principal.ClientID != c.value || got.OtherClient != c.value {
			t.Errorf("%s with ClientClaim: client %q (%v), want %q", c.claim, got.Principal.ClientID, err, c.value)
		}
		// azp and client_id still come first.
		got, err = v.Verify(context.Background(), sign(t, ecKey, is.claims(del("azp"), set("client_id", "ci"), set(c.claim, c.value))))
		if err != nil || got.Principal.ClientID != "ci" {
			t.Errorf("%s with client_id: client %q (%v), want ci", c.claim, got.Principal.ClientID, err)
		}
		_, err = v.Verify(context.Background(), sign(t, ecKey, is.claims(del("azp"), set(c.claim, 7))))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `claim "`+c.claim+`" has the wrong type`) {
			t.Errorf("%s a number: %v, want the wrong type", c.claim, err)
		}
		_, err = v.Verify(context.Background(), sign(t, ecKey, is.claims(del("azp"))))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "azp, client_id, "+c.claim+" or act.sub") {
			t.Errorf("no client claim at all: %v, want the claims named", err)
		}
	}
}

func TestClientIdentity(t *testing.T) {
	is := newIssuer(t, ecKey)
	v := is.verifier(t)
	act := set("act", map[string]any{"sub": "agent-7", "act": map[string]any{"sub": "orchestrator"}})
	tests := []struct {
		name        string
		mods        []func(map[string]any)
		wantClient  string
		wantActor   string
		wantAZP     string
		wantClaimID string
	}{
		{"azp wins", []func(map[string]any){set("client_id", "cid"), act}, "claude-desktop", "agent-7", "claude-desktop", "cid"},
		{"client_id", []func(map[string]any){del("azp"), set("client_id", "cid"), act}, "cid", "agent-7", "", "cid"},
		{"act.sub", []func(map[string]any){del("azp"), act}, "agent-7", "agent-7", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.Verify(context.Background(), sign(t, ecKey, is.claims(tt.mods...)))
			if err != nil {
				t.Fatal(err)
			}
			got := [4]string{c.Principal.ClientID, c.Actor, c.AuthorizedParty, c.ClientIDClaim}
			want := [4]string{tt.wantClient, tt.wantActor, tt.wantAZP, tt.wantClaimID}
			if got != want {
				t.Errorf("client, actor, azp, client_id = %q, want %q", got, want)
			}
		})
	}
}

func TestScopes(t *testing.T) {
	is := newIssuer(t, ecKey)
	v := is.verifier(t)
	tests := []struct {
		name string
		mods []func(map[string]any)
		want []string
	}{
		{"scope string", nil, []string{"resources:list", "resources:read"}},
		{"scp array", []func(map[string]any){del("scope"), set("scp", []string{"resources:read"})}, []string{"resources:read"}},
		{"scp string", []func(map[string]any){del("scope"), set("scp", "resources:list  x")}, []string{"resources:list", "x"}},
		{"scope wins over scp", []func(map[string]any){set("scope", "a"), set("scp", []string{"b"})}, []string{"a"}},
		{"none", []func(map[string]any){del("scope")}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.Verify(context.Background(), sign(t, ecKey, is.claims(tt.mods...)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Scopes, tt.want) {
				t.Errorf("scopes = %q, want %q", c.Scopes, tt.want)
			}
		})
	}
	methods := map[string]string{
		"resources/list": "resources:list", "resources/templates/list": "resources:list",
		"resources/read": "resources:read", "tools/call": "", "initialize": "",
		"completion/complete": "resources:list", "resources/subscribe": "resources:read",
		"resources/unsubscribe": "resources:read", "subscriptions/listen": "resources:read",
	}
	for m, want := range methods {
		if got := v.RequiredScope(m); got != want {
			t.Errorf("RequiredScope(%q) = %q, want %q", m, got, want)
		}
	}
	listOnly := Claims{Scopes: []string{"resources:list"}}
	if err := CheckScope(&listOnly, "resources:read"); !errors.Is(err, ErrInsufficientScope) {
		t.Errorf("CheckScope(read) = %v, want ErrInsufficientScope", err)
	}
	if err := CheckScope(&listOnly, "resources:list"); err != nil {
		t.Errorf("CheckScope(list) = %v", err)
	}
	if err := CheckScope(&listOnly, ""); err != nil {
		t.Errorf("CheckScope(\"\") = %v", err)
	}
}

func TestKeyRotationAndRateLimit(t *testing.T) {
	is := newIssuer(t, ecKey)
	clk := newClock(t0)
	v := is.verifier(t, func(c *Config) { c.Now = clk.Now; c.JWKSRefresh = time.Hour })
	ctx := context.Background()
	if n := is.fetches.Load(); n != 1 {
		t.Fatalf("fetches after New = %d, want 1", n)
	}
	old := sign(t, ecKey, is.claims())
	rotated := sign(t, ecKey2, is.claims())

	// The issuer rotates: ec-2 is published next to ec-1.
	clk.Add(DefaultMinRefreshInterval)
	is.serve(t, ecKey, ecKey2)
	if _, err := v.Verify(ctx, rotated); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	if n := is.fetches.Load(); n != 2 {
		t.Fatalf("fetches after rotation = %d, want 2", n)
	}
	for _, tok := range []string{old, rotated} { // cached: no fetch
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	// Unknown kids within MinRefreshInterval: no fetch.
	forged := sign(t, signingKey{"nope", jose.ES256, ecKey.priv}, is.claims())
	for range 5 {
		if _, err := v.Verify(ctx, forged); !errors.Is(err, ErrInvalid) {
			t.Fatalf("unknown kid: %v, want ErrInvalid", err)
		}
	}
	if n := is.fetches.Load(); n != 2 {
		t.Fatalf("fetches after forged kids = %d, want 2 (rate-limited)", n)
	}
	clk.Add(DefaultMinRefreshInterval)
	if _, err := v.Verify(ctx, forged); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown kid: %v, want ErrInvalid", err)
	}
	if _, err := v.Verify(ctx, forged); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown kid: %v, want ErrInvalid", err)
	}
	if n := is.fetches.Load(); n != 3 {
		t.Fatalf("fetches after interval = %d, want 3", n)
	}
	// The issuer retires ec-1; a later refresh drops it.
	clk.Add(DefaultMinRefreshInterval)
	is.serve(t, ecKey2)
	if _, err := v.Verify(ctx, forged); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, old); !errors.Is(err, ErrInvalid) {
		t.Fatalf("retired key: %v, want ErrInvalid", err)
	}
}

// A JWKS fetch forced by an unknown kid is not aborted when the request
// that forced it goes away (found by probe: a forged kid on a connection
// dropped at once aborted the fetch and used up MinRefreshInterval, so the
// issuer's rotated-in key stayed unknown; repeated, it was never learnt).
func TestForcedRefreshOutlivesItsRequest(t *testing.T) {
	is := newIssuer(t, ecKey)
	clk := newClock(t0)
	v := is.verifier(t, func(c *Config) { c.Now = clk.Now; c.JWKSRefresh = time.Hour })
	clk.Add(DefaultMinRefreshInterval)
	is.serve(t, ecKey, ecKey2) // the issuer rotates ec-2 in

	// The attacker's request gives up while the issuer is still answering.
	is.mu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	go func() {
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond)
		is.mu.Unlock()
	}()
	forged := sign(t, signingKey{"forged", jose.ES256, ecKey2.priv}, is.claims())
	// It is refused when its context ends (ErrJWKS: the fetch did not end
	// in time; until h-policy10 it waited for the fetch, ErrInvalid).
	if _, err := v.Verify(ctx, forged); !errors.Is(err, ErrJWKS) && !errors.Is(err, ErrInvalid) {
		t.Fatalf("forged kid: %v, want ErrJWKS or ErrInvalid", err)
	}
	// Within MinRefreshInterval, a clinician's token under the new key.
	if _, err := v.Verify(context.Background(), sign(t, ecKey2, is.claims())); err != nil {
		t.Fatalf("rotated-in key after an abandoned fetch: %v (fetches %d)", err, is.fetches.Load())
	}
	if n := is.fetches.Load(); n != 2 {
		t.Errorf("fetches = %d, want 2", n)
	}
}

func TestJWKSDownKeepsCachedKeys(t *testing.T) {
	is := newIssuer(t, rsaKey, ecKey)
	clk := newClock(t0)
	v := is.verifier(t, func(c *Config) { c.Now = clk.Now })
	ctx := context.Background()
	is.down.Store(true)
	clk.Add(time.Minute)
	tok := sign(t, rsaKey, is.claims(set("exp", t0.Add(time.Hour).Unix())))
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("cached key with issuer down: %v", err)
	}
	unknown := sign(t, ecKey2, is.claims(set("exp", t0.Add(time.Hour).Unix())))
	if _, err := v.Verify(ctx, unknown); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown kid with issuer down: %v", err)
	}
	is.srv.Close() // connection refused from now on
	clk.Add(time.Minute)
	if _, err := v.Verify(ctx, unknown); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown kid with issuer gone: %v", err)
	}
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("cached key with issuer gone: %v", err)
	}
}

// TestPeriodicRefresh runs under -race (tools/racetests): the stale key set is fetched on a background goroutine while the test reads it.
//
//custos:race
func TestPeriodicRefresh(t *testing.T) {
	is := newIssuer(t, ecKey)
	clk := newClock(t0)
	v := is.verifier(t, func(c *Config) { c.Now = clk.Now })
	is.serve(t, ecKey, ecKey2)
	clk.Add(DefaultJWKSRefresh + time.Second)
	tok := sign(t, ecKey, is.claims(set("exp", t0.Add(time.Hour).Unix())))
	if _, err := v.Verify(context.Background(), tok); err != nil { // served from cache, starts a refresh
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for v.keys.Load().byKID["ec-2"] == nil {
		if time.Now().After(deadline) {
			t.Fatalf("stale JWKS not refreshed in the background (fetches %d)", is.fetches.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := is.fetches.Load(); n != 2 {
		t.Errorf("fetches = %d, want 2", n)
	}
}

// A token the verifier has cached is still checked against a current key
// set: once the key set is older than JWKSRefresh, a request whose token is
// a cache hit refreshes it in the background as a miss does, and when the
// issuer no longer publishes the signing key (revoked), the token is
// refused. Only a cache miss started the refresh: a client (or an attacker
// holding a token signed with a key the issuer has since revoked) that kept
// sending one cached token was served on it, without any JWKS fetch, until
// the key set reached JWKSMaxStaleness (24 h).
func TestCachedTokenOfRevokedKeyIsRefused(t *testing.T) {
	is := newIssuer(t, ecKey, ecKey2)
	clk := newClock(t0)
	v := is.verifier(t, func(c *Config) { c.Now = clk.Now })
	ctx := context.Background()
	tok := sign(t, ecKey, is.claims(set("exp", t0.Add(24*time.Hour).Unix())))
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	is.serve(t, ecKey2) // the issuer revokes ecKey
	clk.Add(DefaultJWKSRefresh + time.Second)
	v.Verify(ctx, tok) // may still be served from the cache; starts the refresh
	deadline := time.Now().Add(10 * time.Second)
	for v.keys.Load().byKID[ecKey.kid] != nil {
		if time.Now().After(deadline) {
			t.Fatalf("JWKS older than JWKSRefresh not refreshed while a cached token is used (fetches %d)", is.fetches.Load())
		}
		v.Verify(ctx, tok)
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := v.Verify(ctx, tok); !errors.Is(err, ErrInvalid) {
		t.Fatalf("cached token of a revoked key: %v, want ErrInvalid", err)
	}
}

// JWKS fetch errors and log lines name the host, never the JWKS URL, whose
// query may hold a key (found by probe: net/http's errors quote the whole
// URL, and New's error and the refresh warnings carried it).
func TestJWKSErrorsDoNotEchoTheURL(t *testing.T) {
	const canary = "CANARY-7f3a9c"
	is := newIssuer(t, ecKey)
	var logs strings.Builder
	clk := newClock(t0)
	v := is.verifier(t, func(c *Config) {
		c.JWKSURL += "?subscription-key=" + canary
		c.Now = clk.Now
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	host := strings.TrimPrefix(is.srv.URL, "http://")
	is.srv.Close() // connection refused from now on
	clk.Add(DefaultMinRefreshInterval)
	if _, err := v.Verify(context.Background(), sign(t, ecKey2, is.claims())); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown kid with the issuer gone: %v", err)
	}
	cfg := is.config()
	cfg.JWKSURL += "?subscription-key=" + canary
	_, err := New(context.Background(), cfg)
	if !errors.Is(err, ErrJWKS) {
		t.Fatalf("New with the issuer gone: %v, want ErrJWKS", err)
	}
	for what, text := range map[string]string{"New's error": err.Error(), "the log": logs.String()} {
		if strings.Contains(text, canary) || strings.Contains(text, "subscription-key") {
			t.Errorf("%s quotes the JWKS URL's query: %s", what, text)
		}
		if !strings.Contains(text, host) {
			t.Errorf("%s does not name the host %s: %s", what, host, text)
		}
	}
}

// A JWKS URL that is https is not followed to http (found by probe: a
// redirect to http was followed, and keys fetched there were trusted).
func TestJWKSRedirectToHTTPIsRefused(t *testing.T) {
	plain := newIssuer(t, ecKey) // serves the keys over plain loopback HTTP
	mux := http.NewServeMux()
	mux.Handle("/jwks", http.RedirectHandler(plain.srv.URL+"/jwks", http.StatusFound))
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(mustJSON(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{ecKey.public()}})))
	})
	secure := httptest.NewTLSServer(mux)
	t.Cleanup(secure.Close)
	cfg := Config{Issuer: secure.URL, JWKSURL: secure.URL + "/jwks", Audience: testAudience, HTTPClient: secure.Client()}
	if _, err := New(context.Background(), cfg); !errors.Is(err, ErrJWKS) || !strings.Contains(err.Error(), "not https") {
		t.Fatalf("https JWKS redirected to http: %v, want ErrJWKS naming the downgrade", err)
	}
	if n := plain.fetches.Load(); n != 0 {
		t.Errorf("the http URL was fetched %d times", n)
	}
	// An https redirect is followed as before.
	moved := httptest.NewTLSServer(http.RedirectHandler(secure.URL+"/keys", http.StatusMovedPermanently))
	t.Cleanup(moved.Close)
	cfg.JWKSURL = moved.URL + "/jwks"
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatalf("https to https redirect: %v", err)
	}
}

func TestNewFailsWithoutKeys(t *testing.T) {
	is := newIssuer(t, ecKey)
	ctx := context.Background()

	is.down.Store(true)
	if _, err := New(ctx, is.config()); !errors.Is(err, ErrJWKS) {
		t.Errorf("issuer down: %v, want ErrJWKS", err)
	}
	is.down.Store(false)

	small, _ := rsaKeyBits(1024)
	for name, body := range map[string]string{
		"empty set":     `{"keys":[]}`,
		"not json":      `<html>`,
		"symmetric key": `{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}]}`,
		"rsa 1024":      mustJSON(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &small.PublicKey, KeyID: "r", Use: "sig"}}}),
		"enc key":       mustJSON(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: ecKey.public().Key, KeyID: "e", Use: "enc"}}}),
		"private key":   mustJSON(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: ecKey.priv, KeyID: "p"}}}),
		"no kid":        mustJSON(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: ecKey.public().Key}}}),
	} {
		is.mu.Lock()
		is.jwks = []byte(body)
		is.mu.Unlock()
		if _, err := New(ctx, is.config()); !errors.Is(err, ErrJWKS) {
			t.Errorf("%s: %v, want ErrJWKS", name, err)
		}
	}
	// Unusable keys are skipped, usable ones kept.
	is.mu.Lock()
	is.jwks = []byte(`{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"},{"kty":"XYZ","kid":"x"},` +
		mustJSON(ecKey.public()) + `]}`)
	is.mu.Unlock()
	v, err := New(ctx, is.config())
	if err != nil {
		t.Fatalf("mixed set: %v", err)
	}
	if got := len(v.keys.Load().byKID); got != 1 {
		t.Errorf("usable keys = %d, want 1", got)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestConfigValidate(t *testing.T) {
	is := newIssuer(t, ecKey)
	tests := []struct {
		field string
		mod   func(*Config)
	}{
		{"Issuer", func(c *Config) { c.Issuer = "" }},
		{"Issuer", func(c *Config) { c.Issuer = "http://idp.example.com" }},
		{"JWKSURL", func(c *Config) { c.JWKSURL = "jwks.json" }},
		{"Audience", func(c *Config) { c.Audience = "" }},
		{"Audience", func(c *Config) { c.Audience = "http://custos.example/mcp" }},
		{"Audience", func(c *Config) { c.Audience = "https://custos.test/mcp#x" }},
		{"Skew", func(c *Config) { c.Skew = -time.Second }},
		{"Skew", func(c *Config) { c.Skew = time.Hour }},
		{"ScopeRead", func(c *Config) { c.ScopeRead = "a b" }},
		{"PurposeHeader", func(c *Config) { c.PurposeHeader = "X: y" }},
		{"KnownPurposes", func(c *Config) { c.KnownPurposes = []string{} }},
		{"JWKSRefresh", func(c *Config) { c.JWKSRefresh = -1 }},
		{"MinRefreshInterval", func(c *Config) { c.MinRefreshInterval = -1 }},
	}
	for _, tt := range tests {
		cfg := is.config()
		tt.mod(&cfg)
		_, err := New(context.Background(), cfg)
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tt.field+":") {
			t.Errorf("%s: err = %v, want ErrBadConfig naming the field", tt.field, err)
		}
	}
	v := is.verifier(t)
	c := v.Config()
	if c.Skew != DefaultSkew || c.ScopeList != DefaultScopeList || c.PurposeHeader != DefaultPurposeHeader ||
		c.JWKSRefresh != DefaultJWKSRefresh || c.MinRefreshInterval != DefaultMinRefreshInterval ||
		c.ResourceMetadataURL != "https://custos.test/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestVerifiedTokenCache(t *testing.T) {
	is := newIssuer(t, ecKey)
	clk := newClock(t0)
	v := is.verifier(t, func(c *Config) { c.Now = clk.Now })
	ctx := context.Background()
	tok := sign(t, ecKey, is.claims())
	c, err := v.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	c.Principal.Roles[0] = "admin" // must not reach the cache
	c2, err := v.Verify(ctx, tok)
	if err != nil || c2.Principal.Roles[0] != "clinician" {
		t.Fatalf("cache hit: roles %q, err %v", c2.Principal.Roles, err)
	}
	if len(v.verified) != 1 {
		t.Fatalf("cache entries = %d, want 1", len(v.verified))
	}
	clk.Add(5*time.Minute + DefaultSkew)
	if _, err := v.Verify(ctx, tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("cached token after exp: %v, want ErrExpired", err)
	}
	small := is.verifier(t, func(c *Config) { c.Now = clk.Now; c.CacheSize = 2 })
	for i := range 5 {
		if _, err := small.Verify(ctx, sign(t, ecKey, is.claims(set("jti", fmt.Sprint(i)), set("exp", t0.Add(time.Hour).Unix())))); err != nil {
			t.Fatal(err)
		}
	}
	if len(small.verified) != 2 {
		t.Errorf("bounded cache holds %d entries, want 2", len(small.verified))
	}
}

// The client claim cannot be a registered claim or one mapped to the
// principal: with "sub", every token would name its user as its client,
// and the rule that a token names a client would hold for all of them.
func TestClientClaimCannotBeARegisteredOrPrincipalClaim(t *testing.T) {
	is := newIssuer(t, ecKey)
	for _, name := range []string{"sub", "iss", "client_id", "azp", "scope", "roles", "tenant", "patients", "purpose_of_use"} {
		cfg := is.config()
		cfg.ClientClaim = name
		if _, err := New(context.Background(), cfg); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "ClientClaim") {
			t.Errorf("ClientClaim %q: %v, want ErrBadConfig", name, err)
		}
	}
	cfg := is.config()
	cfg.ClientClaim, cfg.RolesClaim = "groups", "groups"
	if _, err := New(context.Background(), cfg); !errors.Is(err, ErrBadConfig) {
		t.Errorf("ClientClaim = RolesClaim: %v, want ErrBadConfig", err)
	}
	cfg = is.config()
	cfg.ClientClaim = "cid"
	if _, err := New(context.Background(), cfg); err != nil {
		t.Errorf("ClientClaim cid: %v", err)
	}
}

// PS256 (RSASSA-PSS) tokens verify with RSA keys of 2048 bits or more, and
// a JWK's alg binds its key to that one algorithm (RFC 7517 §4.4, RFC 8725
// §3.1). Found by probe: PS256 tokens (newer Auth0 tenants, some Keycloak
// realms) were refused as "not a JWS with an allowed algorithm".
func TestPS256AndKeyAlgorithmBinding(t *testing.T) {
	r := rsaKey.priv.(*rsa.PrivateKey)
	small, err := rsaKeyBits(1024)
	if err != nil {
		t.Fatal(err)
	}
	psKey := signingKey{"ps-1", jose.PS256, r}           // JWK alg PS256
	anyRSA := signingKey{"rsa-any", "", r}               // JWK without alg
	smallPS := signingKey{"ps-small", jose.PS256, small} // too short: not in the key set
	is := newIssuer(t, rsaKey, psKey, anyRSA, smallPS, ecKey)
	v := is.verifier(t)
	as := func(kid string, alg jose.SignatureAlgorithm, priv any) signingKey { return signingKey{kid, alg, priv} }
	for _, tc := range []struct {
		name string
		key  signingKey
		want error
	}{
		{"PS256 with a PS256 key", as("ps-1", jose.PS256, r), nil},
		{"PS256 with an RSA key without alg", as("rsa-any", jose.PS256, r), nil},
		{"RS256 with an RSA key without alg", as("rsa-any", jose.RS256, r), nil},
		{"PS256 naming a key published as RS256", as("rsa-1", jose.PS256, r), ErrInvalid},
		{"RS256 naming a key published as PS256", as("ps-1", jose.RS256, r), ErrInvalid},
		{"PS256 with a 1024-bit key", as("ps-small", jose.PS256, small), ErrInvalid},
		{"PS256 naming an EC key", as("ec-1", jose.PS256, r), ErrInvalid},
		{"PS384", as("rsa-any", jose.PS384, r), ErrInvalid},
		{"PS512", as("rsa-any", jose.PS512, r), ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(context.Background(), sign(t, tc.key, is.claims()))
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
		})
	}
}

// Cached keys are trusted for JWKSMaxStaleness after the last successful
// fetch, not for ever: found by probe, a verifier whose JWKS endpoint was
// unreachable kept accepting tokens signed by its cached keys indefinitely
// (a key the issuer had revoked meanwhile included). Beyond the limit
// every token is refused, cached verifications too, until a fetch
// succeeds.
func TestJWKSMaxStaleness(t *testing.T) {
	is := newIssuer(t, ecKey)
	clk := newClock(t0)
	var logs strings.Builder
	v := is.verifier(t, func(c *Config) {
		c.Now = clk.Now
		c.JWKSMaxStaleness = time.Hour
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ctx := context.Background()
	tok := sign(t, ecKey, is.claims(set("exp", t0.Add(48*time.Hour).Unix())))
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	is.down.Store(true)
	clk.Add(59 * time.Minute)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("within the staleness limit: %v", err)
	}
	if err := v.CheckJWKS(); err != nil {
		t.Fatalf("CheckJWKS within the limit: %v", err)
	}
	clk.Add(2 * time.Minute)
	fresh := sign(t, ecKey, is.claims(set("jti", "tok-2"), set("exp", t0.Add(48*time.Hour).Unix())))
	for name, tk := range map[string]string{"cached": tok, "new": fresh} {
		_, err := v.Verify(ctx, tk)
		if !errors.Is(err, ErrJWKSStale) {
			t.Fatalf("%s token past the limit: %v, want ErrJWKSStale", name, err)
		}
		if strings.Contains(err.Error(), is.srv.URL) || !strings.Contains(err.Error(), "oauth.jwks_max_staleness") {
			t.Errorf("error %q: want the setting named, no URL", err)
		}
	}
	if err := v.CheckJWKS(); !errors.Is(err, ErrJWKSStale) {
		t.Fatalf("CheckJWKS past the limit: %v", err)
	}

	// Over HTTP: 401 invalid_token with a fixed description, the reason
	// in the log at warning level.
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	w := httptest.NewRecorder()
	v.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("served with stale keys") }), nil).ServeHTTP(w, req)
	ch := w.Header().Get("WWW-Authenticate")
	if w.Code != http.StatusUnauthorized || !strings.Contains(ch, `error="invalid_token"`) || RejectionCode(ch) != "jwks_stale" {
		t.Fatalf("%d %q, want 401 invalid_token, jwks_stale", w.Code, ch)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "signing keys stale") {
		t.Errorf("log: %s", logs.String())
	}

	// The issuer is back: the next refresh (at most one per
	// MinRefreshInterval) makes the keys fresh again.
	is.down.Store(false)
	clk.Add(DefaultMinRefreshInterval)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := v.Verify(ctx, tok)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrJWKSStale) || time.Now().After(deadline) {
			t.Fatalf("after the issuer came back: %v (fetches %d)", err, is.fetches.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestJWKSMaxStalenessMustExceedRefresh(t *testing.T) {
	is := newIssuer(t, ecKey)
	for _, d := range []time.Duration{-time.Hour, time.Minute, DefaultJWKSRefresh} {
		cfg := is.config()
		cfg.JWKSMaxStaleness = d
		if _, err := New(context.Background(), cfg); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "JWKSMaxStaleness") {
			t.Errorf("JWKSMaxStaleness %v: %v, want ErrBadConfig naming it", d, err)
		}
	}
}

// An issuer that replaces a key under the same kid (RFC 7517 does not
// forbid it; some self-hosted issuers publish one key as "kid":"1") is
// followed at once, as a new kid is: a token that the cached key of its
// kid does not verify forces a refetch, rate-limited like an unknown kid,
// so a token with a bad signature can not make the verifier fetch more
// than once per MinRefreshInterval. Found by reading the verifier while
// probing key rotation against the built binary: only an unknown kid
// forced a refetch, so every token of the replaced key was refused until
// the periodic refresh, 5 minutes by default.
func TestKeyReplacedUnderTheSameKid(t *testing.T) {
	is := newIssuer(t, ecKey)
	clk := newClock(t0)
	v := is.verifier(t, func(c *Config) { c.Now = clk.Now; c.JWKSRefresh = time.Hour })
	ctx := context.Background()
	replaced := signingKey{ecKey.kid, jose.ES256, ecKey2.priv} // a new key, the old kid
	tok := sign(t, replaced, is.claims())

	// Within MinRefreshInterval of the last fetch: refused, no fetch.
	if _, err := v.Verify(ctx, tok); !errors.Is(err, ErrInvalid) {
		t.Fatalf("before the issuer replaced the key: %v, want ErrInvalid", err)
	}
	if n := is.fetches.Load(); n != 1 {
		t.Fatalf("fetches = %d, want 1 (rate-limited)", n)
	}
	is.serve(t, replaced)
	clk.Add(DefaultMinRefreshInterval)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("a token of the key replaced under its kid: %v", err)
	}
	if n := is.fetches.Load(); n != 2 {
		t.Fatalf("fetches = %d, want 2", n)
	}
	// The old key is gone with the refetch; bad signatures under a known
	// kid fetch at most once per MinRefreshInterval.
	old := sign(t, ecKey, is.claims(set("jti", "old")))
	for range 5 {
		if _, err := v.Verify(ctx, old); !errors.Is(err, ErrInvalid) {
			t.Fatalf("a token of the replaced-out key: %v, want ErrInvalid", err)
		}
	}
	if n := is.fetches.Load(); n != 2 {
		t.Fatalf("fetches after 5 bad signatures = %d, want 2 (rate-limited)", n)
	}
}

// TestUnknownKidDoesNotWaitBehindAStalledFetch: a token whose kid is
// unknown needs a JWKS fetch, and one is already in flight (a background
// refresh) against an issuer that stalls. The request waits at most
// fetchWait, and not past its context, then gets ErrJWKS (401,
// "signing keys unavailable"), naming neither the token nor a key. Until
// h-policy10 it waited on the fetch lock for as long as the stalled fetch
// took (the HTTP client's 10 s here, up to 30 s).
func TestUnknownKidDoesNotWaitBehindAStalledFetch(t *testing.T) {
	is := newIssuer(t, ecKey)
	clk := newClock(t0)
	v := is.verifier(t, func(c *Config) { c.Now = clk.Now; c.JWKSRefresh = time.Minute })
	// The issuer stalls from now on, until the test ends.
	is.mu.Lock()
	var release sync.Once
	t.Cleanup(func() { release.Do(is.mu.Unlock) })
	clk.Add(time.Minute + DefaultMinRefreshInterval)
	if _, err := v.Verify(context.Background(), sign(t, ecKey, is.claims())); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); is.fetches.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the background refresh never reached the issuer")
		}
	}
	clk.Add(DefaultMinRefreshInterval)
	token := sign(t, ecKey2, is.claims())
	for _, tc := range []struct {
		name    string
		timeout time.Duration // of the request's context; 0: none
		max     time.Duration
	}{
		{"the request's context ends first", 200 * time.Millisecond, time.Second},
		{"no deadline: the cap", 0, fetchWait + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				_, err := v.Verify(ctx, token)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("Verify of an unknown kid still waits after 5 s behind a stalled JWKS fetch")
			}
			if took := time.Since(start); took > tc.max {
				t.Errorf("Verify took %v, want at most %v", took, tc.max)
			}
			if !errors.Is(err, ErrJWKS) {
				t.Errorf("Verify: %v, want ErrJWKS", err)
			}
			if msg := err.Error(); strings.Contains(msg, token) || strings.Contains(msg, "ec-2") || strings.Contains(msg, is.srv.URL) {
				t.Errorf("the error names the token, its kid or the JWKS URL: %q", msg)
			}
			if description(err) != "signing keys unavailable" {
				t.Errorf("error_description %q", description(err))
			}
		})
	}
	// The issuer answers again: the fetch in flight ends, and a token of
	// a known key verifies without waiting for anything.
	release.Do(is.mu.Unlock)
	if _, err := v.Verify(context.Background(), sign(t, ecKey, is.claims())); err != nil {
		t.Fatal(err)
	}
}
