package fhirsync

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/cryptosigner"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestClientAssertion: the assertion is what SMART Backend Services asks
// for: ES384 with the registered kid and typ JWT; iss = sub = client id;
// aud = the token endpoint; a fresh jti; exp at most 5 minutes ahead. It
// verifies with the public key of the JWKS PublicJWKS prints.
func TestClientAssertion(t *testing.T) {
	key, kid, err := DevKey(filepath.Join(t.TempDir(), "k.pem"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	o := &Options{ClientID: "custos", Key: key, KeyID: kid, Now: func() time.Time { return now }}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES384, Key: &keyIDSigner{OpaqueSigner: cryptosigner.Opaque(key), kid: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tu, _ := url.Parse("https://ehr.example.org/auth/token")
	a := &authenticator{c: &client{o: o}, tokenURL: tu, signer: signer}
	s1, err := a.assertion(now)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := a.assertion(now)

	var set jose.JSONWebKeySet
	b, err := PublicJWKS(key, kid)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &set); err != nil || len(set.Keys) != 1 || set.Keys[0].KeyID != kid || set.Keys[0].Algorithm != "ES384" {
		t.Fatalf("JWKS %s: %v", b, err)
	}
	var jtis []string
	for _, s := range []string{s1, s2} {
		tok, err := jwt.ParseSigned(s, []jose.SignatureAlgorithm{jose.ES384})
		if err != nil {
			t.Fatal(err)
		}
		h := tok.Headers[0]
		if h.KeyID != kid || h.Algorithm != "ES384" || h.ExtraHeaders["typ"] != "JWT" {
			t.Fatalf("header %+v", h)
		}
		var c jwt.Claims
		if err := tok.Claims(set.Keys[0].Key, &c); err != nil {
			t.Fatalf("does not verify with the JWKS key: %v", err)
		}
		if err := c.ValidateWithLeeway(jwt.Expected{Issuer: "custos", Subject: "custos", AnyAudience: jwt.Audience{tu.String()}, Time: now}, 0); err != nil {
			t.Fatal(err)
		}
		if life := c.Expiry.Time().Sub(c.IssuedAt.Time()); life <= 0 || life > 5*time.Minute {
			t.Fatalf("lifetime %s, want (0, 5m]", life)
		}
		jtis = append(jtis, c.ID)
	}
	if jtis[0] == "" || jtis[0] == jtis[1] {
		t.Fatalf("jti %q, %q: want fresh ones", jtis[0], jtis[1])
	}

	// SMART allows ES384 and RS384 only: a P-256 key is refused.
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, err := assertionAlg(p256); err == nil {
		t.Fatal("a P-256 key was accepted")
	}
}

// TestInvalidateOnlyTheRefusedToken: a 401 drops the cached token only if
// it is the one the refused request carried, so that concurrent Binary
// fetches refused with the same expired token fetch one new token between
// them, not one each.
func TestInvalidateOnlyTheRefusedToken(t *testing.T) {
	a := &authenticator{tok: "t2"}
	a.invalidate("Bearer t1") // a request sent with the token t2 replaced
	if a.tok != "t2" {
		t.Fatalf("a 401 to an older token dropped the new one")
	}
	a.invalidate("Bearer t2")
	if a.tok != "" {
		t.Fatalf("a 401 to the cached token kept it")
	}
}
