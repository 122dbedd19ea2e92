package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testAudience is the resource URL of the server under test.
const testAudience = "https://custos.test/mcp"

// t0 is the fixed clock of the tests.
var t0 = time.Unix(1_800_000_000, 0)

// signingKey is one issuer key: private for signing, kid and alg.
type signingKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv any
}

func (k signingKey) public() jose.JSONWebKey {
	var pub any
	switch p := k.priv.(type) {
	case *rsa.PrivateKey:
		pub = &p.PublicKey
	case *ecdsa.PrivateKey:
		pub = &p.PublicKey
	case ed25519.PrivateKey:
		pub = p.Public()
	}
	return jose.JSONWebKey{Key: pub, KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

var (
	keysOnce sync.Once
	rsaKey   signingKey // RS256, kid rsa-1
	ecKey    signingKey // ES256, kid ec-1
	edKey    signingKey // EdDSA, kid ed-1
	ecKey2   signingKey // ES256, kid ec-2: the rotated-in key
)

func init() { testKeys() }

func testKeys() {
	keysOnce.Do(func() {
		r, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		e, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		e2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		_, d, _ := ed25519.GenerateKey(rand.Reader)
		rsaKey = signingKey{"rsa-1", jose.RS256, r}
		ecKey = signingKey{"ec-1", jose.ES256, e}
		edKey = signingKey{"ed-1", jose.EdDSA, d}
		ecKey2 = signingKey{"ec-2", jose.ES256, e2}
	})
}

// issuer is a real local authorization server: a loopback HTTP server
// publishing a JWKS, and the private keys that sign tokens.
type issuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	jwks    []byte
	fetches atomic.Int32
	down    atomic.Bool // answer 503
}

func newIssuer(t testing.TB, keys ...signingKey) *issuer {
	t.Helper()
	is := &issuer{}
	is.serve(t, keys...)
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jwks" {
			http.NotFound(w, r)
			return
		}
		is.fetches.Add(1)
		if is.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		is.mu.Lock()
		body := is.jwks
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(body)
	}))
	t.Cleanup(is.srv.Close)
	return is
}

// serve replaces the published key set (key rotation).
func (is *issuer) serve(t testing.TB, keys ...signingKey) {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, k.public())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	is.jwks = b
	is.mu.Unlock()
}

func (is *issuer) config() Config {
	now := t0
	return Config{
		Issuer:   is.srv.URL,
		JWKSURL:  is.srv.URL + "/jwks",
		Audience: testAudience,
		Now:      func() time.Time { return now },
	}
}

// clock is a settable clock for Config.Now.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock { c := &clock{}; c.ns.Store(t.UnixNano()); return c }
func (c *clock) Now() time.Time   { return time.Unix(0, c.ns.Load()) }
func (c *clock) Add(d time.Duration) {
	c.ns.Add(int64(d))
}

func (is *issuer) verifier(t testing.TB, mod ...func(*Config)) *Verifier {
	t.Helper()
	cfg := is.config()
	for _, m := range mod {
		m(&cfg)
	}
	v, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

// claims returns a valid claim set for the issuer, modified by mods.
func (is *issuer) claims(mods ...func(map[string]any)) map[string]any {
	c := map[string]any{
		"iss":            is.srv.URL,
		"sub":            "dr.alice",
		"aud":            testAudience,
		"exp":            t0.Add(5 * time.Minute).Unix(),
		"iat":            t0.Add(-time.Minute).Unix(),
		"nbf":            t0.Add(-time.Minute).Unix(),
		"jti":            "tok-1",
		"azp":            "claude-desktop",
		"scope":          "resources:list resources:read",
		"roles":          []string{"clinician"},
		"tenant":         "org-a",
		"patients":       []string{"11111111-1111-1111-1111-111111111111"},
		"purpose_of_use": "TREAT",
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

// sign signs claims with k as a compact JWS with typ at+jwt.
func sign(t testing.TB, k signingKey, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func set(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
func del(k string) func(map[string]any)        { return func(m map[string]any) { delete(m, k) } }

func rsaKeyBits(bits int) (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, bits) }
