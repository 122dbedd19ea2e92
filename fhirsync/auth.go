package fhirsync

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/cryptosigner"
	"github.com/go-jose/go-jose/v4/jwt"
)

// assertionLifetime is the client assertion's exp - iat. SMART Backend
// Services: no more than five minutes.
const assertionLifetime = 4 * time.Minute

// assertionAlg is the JWS algorithm SMART allows for key: ES384 for an
// ECDSA P-384 key, RS384 for RSA.
func assertionAlg(key crypto.Signer) (jose.SignatureAlgorithm, error) {
	switch k := key.Public().(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P384() {
			return jose.ES384, nil
		}
	case *rsa.PublicKey:
		if k.N.BitLen() >= 2048 {
			return jose.RS384, nil
		}
	}
	return "", fmt.Errorf("%w: the client key must be ECDSA P-384 (ES384) or RSA of at least 2048 bits (RS384), as SMART Backend Services requires", ErrBadConfig)
}

// PublicJWKS is the JSON Web Key Set of key under kid: what a FHIR
// server's authorization server registers for the client.
func PublicJWKS(key crypto.Signer, kid string) ([]byte, error) {
	alg, err := assertionAlg(key)
	if err != nil {
		return nil, err
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: kid, Algorithm: string(alg), Use: "sig"}}}
	return json.MarshalIndent(set, "", "  ")
}

// authenticator obtains and caches SMART Backend Services access tokens.
type authenticator struct {
	c        *client
	tokenURL *url.URL
	signer   jose.Signer
	scope    string // Options.Scope, or the configuration's default

	mu    sync.Mutex
	tok   string
	renew time.Time // after it, tok is not used: a new one is fetched
	// fetched counts tokens obtained (tests, outcome record).
	fetched int
}

// smartConfiguration is the part of .well-known/smart-configuration used.
type smartConfiguration struct {
	TokenEndpoint   string   `json:"token_endpoint"`
	AuthMethods     []string `json:"token_endpoint_auth_methods_supported"`
	ScopesSupported []string `json:"scopes_supported"`
	Capabilities    []string `json:"capabilities"`
}

// defaultScope is the scope asked for when Options.Scope is empty: SMART
// v1's system/*.read, which v2 servers usually still take, unless the
// configuration shows the server takes only v2 scopes — scopes_supported
// with system/*.rs and without system/*.read, or the permission-v2
// capability without permission-v1 — then v2's system/*.rs (read and
// search).
func (sc smartConfiguration) defaultScope() string {
	const v1, v2 = "system/*.read", "system/*.rs"
	switch {
	case slices.Contains(sc.ScopesSupported, v1):
		return v1
	case slices.Contains(sc.ScopesSupported, v2),
		slices.Contains(sc.Capabilities, "permission-v2") && !slices.Contains(sc.Capabilities, "permission-v1"):
		return v2
	}
	return v1
}

// newAuthenticator reads the server's SMART configuration and prepares the
// signer of client assertions.
func newAuthenticator(ctx context.Context, c *client) (*authenticator, error) {
	alg, err := assertionAlg(c.o.Key)
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: &keyIDSigner{OpaqueSigner: cryptosigner.Opaque(c.o.Key), kid: c.o.KeyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("%w: client assertion signer: %v", ErrBadConfig, err)
	}
	u, _ := c.resolve(".well-known/smart-configuration")
	resp, err := c.get(ctx, u, "application/json", nil)
	if err != nil {
		return nil, fmt.Errorf("SMART configuration: %w", err)
	}
	defer resp.Body.Close()
	var sc smartConfiguration
	if err := decodeJSON(resp, jsonTypes, &sc); err != nil {
		return nil, err
	}
	if sc.TokenEndpoint == "" {
		return nil, fmt.Errorf("%w: %s: no token_endpoint", ErrServer, where(u))
	}
	tu, err := url.Parse(sc.TokenEndpoint)
	if err != nil || (tu.Scheme != "https" && tu.Scheme != "http") || tu.Host == "" || tu.User != nil {
		return nil, fmt.Errorf("%w: %s: token_endpoint is not an http(s) URL", ErrServer, where(u))
	}
	if tu.Scheme == "http" && c.base.Scheme == "https" {
		return nil, fmt.Errorf("%w: %s: token_endpoint is plain http while the FHIR base is https; refused", ErrServer, where(u))
	}
	scope := c.o.Scope
	if scope == "" {
		scope = sc.defaultScope()
	}
	return &authenticator{c: c, tokenURL: tu, signer: signer, scope: scope}, nil
}

// keyIDSigner adds the key id to the JWK that go-jose takes the kid header from.
type keyIDSigner struct {
	jose.OpaqueSigner
	kid string
}

func (k *keyIDSigner) Public() *jose.JSONWebKey {
	p := k.OpaqueSigner.Public()
	p.KeyID = k.kid
	return p
}

// invalidate drops the cached token after a 401 to a request whose
// Authorization header was authz: only if it is still the token that
// request carried, so that concurrent requests refused with the same
// token fetch one new token, not one each.
func (a *authenticator) invalidate(authz string) {
	a.mu.Lock()
	if authz == "Bearer "+a.tok {
		a.tok = ""
	}
	a.mu.Unlock()
}

// token returns the cached token until its renewal time — 30 s before it
// expires, or halfway through a life shorter than a minute — then a new one.
func (a *authenticator) token(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.c.o.Now()
	if a.tok != "" && now.Before(a.renew) {
		return a.tok, nil
	}
	tok, ttl, err := a.fetch(ctx)
	if err != nil {
		return "", err
	}
	a.c.creds.add(tok)
	a.tok, a.renew = tok, now.Add(ttl-min(30*time.Second, ttl/2))
	a.fetched++
	return tok, nil
}

// assertion is a fresh client assertion JWT (SMART Backend Services
// "Authenticating to the Token endpoint").
func (a *authenticator) assertion(now time.Time) (string, error) {
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", err
	}
	claims := jwt.Claims{
		Issuer: a.c.o.ClientID, Subject: a.c.o.ClientID,
		Audience: jwt.Audience{a.tokenURL.String()},
		ID:       hex.EncodeToString(jti[:]),
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(assertionLifetime)),
	}
	s, err := jwt.Signed(a.signer).Claims(claims).Serialize()
	if err != nil {
		// The signer's error (Vault's) names a path, never key material.
		return "", fmt.Errorf("%w: signing the client assertion: %v", ErrAuth, err)
	}
	a.c.creds.add(s)
	return s, nil
}

// tokenResponse is the token endpoint's answer (RFC 6749 section 5.1).
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// maxTokenTTL bounds how long a token is cached, whatever expires_in says
// (a 401 re-authenticates anyway); it also keeps expires_in·time.Second
// from wrapping.
const maxTokenTTL = time.Hour

// fetch does the client_credentials grant; it is not retried on 4xx.
func (a *authenticator) fetch(ctx context.Context) (string, time.Duration, error) {
	// The token request goes through the retrying transport without a
	// bearer token (auth is nil for it). Every attempt signs a fresh
	// assertion: the server refuses a jti it has seen (SMART Backend
	// Services), and an earlier attempt's exp may have passed.
	tc := &client{o: a.c.o, base: a.c.base, creds: a.c.creds}
	resp, err := tc.do(ctx, func(ctx context.Context) (*http.Request, error) {
		asrt, err := a.assertion(a.c.o.Now())
		if err != nil {
			return nil, err
		}
		form := url.Values{
			"grant_type":            {"client_credentials"},
			"scope":                 {a.scope},
			"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
			"client_assertion":      {asrt},
		}.Encode()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.tokenURL.String(), strings.NewReader(form))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		return req, nil
	})
	a.c.requests.Add(tc.requests.Load())
	if err != nil {
		if errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return "", 0, fmt.Errorf("token request: %w", err)
		}
		if !errors.Is(err, ErrAuth) {
			err = fmt.Errorf("%w: %w", ErrAuth, err)
		}
		return "", 0, fmt.Errorf("%w; check --client-id and that the FHIR server registered this client's public key (custos sync --print-jwks)", err)
	}
	defer resp.Body.Close()
	var tr tokenResponse
	if err := decodeJSON(resp, []string{"application/json"}, &tr); err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	if tr.AccessToken == "" || !strings.EqualFold(tr.TokenType, "bearer") {
		return "", 0, fmt.Errorf("%w: POST %s: no bearer access_token in the answer", ErrAuth, where(a.tokenURL))
	}
	ttl := 5 * time.Minute // expires_in absent (RFC 6749: RECOMMENDED) or not positive
	if tr.ExpiresIn > 0 {
		ttl = time.Duration(min(tr.ExpiresIn, int(maxTokenTTL/time.Second))) * time.Second
	}
	return tr.AccessToken, ttl, nil
}

// maxJSONBody bounds a JSON answer (a search page, a manifest); a var for
// tests.
var maxJSONBody int64 = 64 << 20

// decodeJSON checks the content type and decodes a bounded JSON body.
func decodeJSON(resp *http.Response, types []string, v any) error {
	if err := checkType(resp, types...); err != nil {
		return err
	}
	lr := &io.LimitedReader{R: resp.Body, N: maxJSONBody + 1}
	if err := json.NewDecoder(lr).Decode(v); err != nil {
		if errors.Is(err, errStalled) {
			return fmt.Errorf("%w: %s %s: %v", ErrUnavailable, resp.Request.Method, hideBinaryIDs(where(resp.Request.URL)), err)
		}
		if lr.N <= 0 {
			return fmt.Errorf("%w: %s %s: body larger than %d bytes; refused", ErrServer, resp.Request.Method, where(resp.Request.URL), maxJSONBody)
		}
		return fmt.Errorf("%w: %s %s: body is not valid JSON: %v", ErrServer, resp.Request.Method, where(resp.Request.URL), jsonCause(err))
	}
	return nil
}

// jsonCause keeps a JSON error's position but never the offending value.
func jsonCause(err error) string {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Sprintf("syntax error at byte %d", e.Offset)
	case *json.UnmarshalTypeError:
		return fmt.Sprintf("field %q has the wrong JSON type (%s, byte %d)", e.Field, e.Value, e.Offset)
	}
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return "truncated"
	}
	return "malformed"
}
