package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// allowedAlgs are the only JWS algorithms accepted. "none" and the HMAC
// algorithms are absent: go-jose rejects any other alg at parse time, which
// defeats the alg=none and the RS256->HS256 key-confusion attacks. PS256
// (RSASSA-PSS, RFC 7518 §3.5) is what newer Auth0 tenants and some Keycloak
// realms sign with.
var allowedAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256, jose.EdDSA}

// maxJWKSBytes bounds the JWKS response body.
const maxJWKSBytes = 1 << 20

// fetchTimeout bounds a JWKS fetch after New (Config.HTTPClient's own
// timeout may be shorter). It is not the timeout of any request: a fetch
// serves every caller.
const fetchTimeout = 30 * time.Second

// fetchWait bounds how long a request waits for a JWKS fetch it needs (an
// unknown kid, or a signature its kid's cached key did not verify): for
// the fetch in flight (a background refresh, another request's) to end,
// and for its own, together; the request's context bounds it too. Beyond
// it the token is refused with ErrJWKS (401 invalid_token, "signing keys
// unavailable"), and the fetch goes on: its keys serve the next request.
// Until h-policy10 the request waited on the fetch lock for as long as
// the fetch in flight took (up to fetchTimeout, 30 s).
const fetchWait = 2 * time.Second

// Verifier verifies access tokens against the issuer's cached JWKS. It is
// safe for concurrent use.
type Verifier struct {
	cfg   Config
	names claimNames
	known map[string]bool

	keys        atomic.Pointer[keySet]
	lastAttempt atomic.Int64 // unix nanoseconds of the last JWKS fetch attempt
	refreshing  atomic.Bool  // a background refresh is running
	// lastStaleWarn and lastRejectInfo are when Middleware last logged a
	// refused token above debug level: a warning for stale keys, an info
	// line for any other reason (unix nanoseconds; 0: never).
	lastStaleWarn, lastRejectInfo atomic.Int64
	// fetchLock holds one token while a JWKS fetch runs: it serializes
	// fetches, and a request waits for it at most fetchWait (lockFetch).
	fetchLock chan struct{}

	// verified caches the claims of recently verified tokens, by
	// SHA-256(token). An entry is used only with the key set it was
	// verified against, and its times are rechecked on every hit.
	cacheMu  sync.RWMutex
	verified map[[32]byte]cachedClaims
}

type cachedClaims struct {
	ks *keySet
	c  Claims
}

// keySet is one fetched JWKS: usable public signing keys by kid.
type keySet struct {
	byKID   map[string][]jose.JSONWebKey
	fetched time.Time
}

// New validates cfg and fetches the JWKS; it fails (ErrJWKS) if the key set
// can not be fetched or holds no usable key.
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	v := &Verifier{
		cfg: cfg,
		names: claimNames{roles: cfg.RolesClaim, tenant: cfg.TenantClaim,
			patients: cfg.PatientsClaim, purpose: cfg.PurposeClaim, client: cfg.ClientClaim},
		known:     map[string]bool{},
		verified:  map[[32]byte]cachedClaims{},
		fetchLock: make(chan struct{}, 1),
	}
	for _, p := range cfg.KnownPurposes {
		v.known[p] = true
	}
	v.fetchLock <- struct{}{}
	defer v.unlockFetch()
	if err := v.fetchLocked(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// Config returns the effective configuration (defaults applied).
func (v *Verifier) Config() Config { return v.cfg }

// Verify verifies a compact-serialized JWT access token and returns its
// claims. Errors wrap one of ErrInvalid, ErrExpired, ErrNotYetValid,
// ErrAudience, ErrIssuer, ErrJWKSStale, ErrJWKS (a JWKS fetch the token
// needed did not end within fetchWait or before ctx did) (or ErrMissing
// for ""), and never contain the token or key material. Scopes are not checked here: see RequiredScope and CheckScope.
func (v *Verifier) Verify(ctx context.Context, rawToken string) (Claims, error) {
	if rawToken == "" {
		return Claims{}, ErrMissing
	}
	if err := v.CheckJWKS(); err != nil {
		// Before the cache too: a token verified against keys that are
		// now stale is not released either.
		return Claims{}, err
	}
	// Before the cache too: only a miss reached keysFor, so one cached
	// token used again and again (a revoked key's) kept the key set from
	// being refreshed until JWKSMaxStaleness.
	v.refreshIfOld()
	var digest [32]byte
	if v.cfg.CacheSize > 0 {
		digest = sha256.Sum256([]byte(rawToken))
		v.cacheMu.RLock()
		e, ok := v.verified[digest]
		v.cacheMu.RUnlock()
		if ok && e.ks == v.keys.Load() {
			if err := v.checkClaims(&e.c); err != nil {
				return Claims{}, err
			}
			return e.c.clone(), nil
		}
	}
	jws, err := jose.ParseSignedCompact(rawToken, allowedAlgs)
	if err != nil {
		// go-jose's message may describe the header, never the token.
		return Claims{}, fmt.Errorf("%w: not a JWS with an allowed algorithm", ErrInvalid)
	}
	if len(jws.Signatures) != 1 {
		return Claims{}, fmt.Errorf("%w: want exactly one signature", ErrInvalid)
	}
	h := jws.Signatures[0].Header
	if err := checkTyp(h); err != nil {
		return Claims{}, err
	}
	if _, ok := h.ExtraHeaders["crit"]; ok {
		// RFC 7515 §4.1.11: extensions the recipient does not understand
		// must be refused. custos understands none (not even RFC 7797's b64,
		// which go-jose would honour; an unencoded payload is not a JWT).
		return Claims{}, fmt.Errorf("%w: header has critical extensions (crit)", ErrInvalid)
	}
	if h.KeyID == "" {
		return Claims{}, fmt.Errorf("%w: header has no kid", ErrInvalid)
	}
	alg := jose.SignatureAlgorithm(h.Algorithm)
	ks, keys, err := v.keysFor(ctx, h.KeyID)
	if err != nil {
		return Claims{}, err
	}
	payload := verifyWith(jws, keys, alg)
	if payload == nil {
		// The issuer may have replaced the key under the same kid: refetch
		// as for an unknown kid (shared, rate-limited by
		// MinRefreshInterval, so bad signatures amplify nothing) and try
		// the kid's keys again. Without it the replaced key's tokens were
		// refused until the periodic refresh (JWKSRefresh).
		if ks2, keys2 := v.refetched(ctx, ks, h.KeyID); ks2 != nil {
			ks, payload = ks2, verifyWith(jws, keys2, alg)
		}
	}
	if payload == nil {
		return Claims{}, fmt.Errorf("%w: signature does not verify", ErrInvalid)
	}
	c, err := parseClaims(payload, v.names)
	if err != nil {
		return Claims{}, err
	}
	if err := v.checkClaims(&c); err != nil {
		return Claims{}, err
	}
	if v.cfg.CacheSize > 0 {
		v.cacheMu.Lock()
		if len(v.verified) >= v.cfg.CacheSize {
			for k := range v.verified { // evict an arbitrary entry
				delete(v.verified, k)
				break
			}
		}
		v.verified[digest] = cachedClaims{ks: ks, c: c.clone()}
		v.cacheMu.Unlock()
	}
	return c, nil
}

// CheckJWKS returns an error wrapping ErrJWKSStale if no JWKS fetch has
// succeeded for longer than Config.JWKSMaxStaleness (and starts a
// background refetch, at most once per MinRefreshInterval); nil while the
// keys are fresh enough. Verify refuses every token while it fails; it is
// also a readiness check. The message names the limit, no URL or key.
func (v *Verifier) CheckJWKS() error {
	now := v.cfg.Now()
	age := now.Sub(v.keys.Load().fetched)
	if age <= v.cfg.JWKSMaxStaleness {
		return nil
	}
	if v.mayFetch(now) && v.refreshing.CompareAndSwap(false, true) {
		go v.backgroundRefresh()
	}
	return fmt.Errorf("%w: no JWKS fetch has succeeded for %s, more than the %s allowed (oauth.jwks_max_staleness); refusing every token until one does",
		ErrJWKSStale, age.Truncate(time.Second), v.cfg.JWKSMaxStaleness)
}

// clone copies the slices of c, so that callers can not alter the cache.
func (c Claims) clone() Claims {
	c.Audience = slices.Clone(c.Audience)
	c.Scopes = slices.Clone(c.Scopes)
	c.Principal.Roles = slices.Clone(c.Principal.Roles)
	c.Principal.Patients = slices.Clone(c.Principal.Patients)
	return c
}

// checkTyp rejects tokens whose typ names another kind of JWT (RFC 9068
// §4 wants at+jwt; plain JWT and no typ are accepted for issuers that do
// not set it).
func checkTyp(h jose.Header) error {
	t, ok := h.ExtraHeaders[jose.HeaderType]
	if !ok {
		return nil
	}
	s, _ := t.(string)
	switch strings.ToLower(s) {
	case "jwt", "at+jwt", "application/at+jwt":
		return nil
	}
	return fmt.Errorf("%w: typ is not an access token type", ErrInvalid)
}

// checkClaims checks iss, aud and the validity window.
func (v *Verifier) checkClaims(c *Claims) error {
	if c.Issuer != v.cfg.Issuer {
		return ErrIssuer
	}
	if !slices.Contains(c.Audience, v.cfg.Audience) {
		return ErrAudience
	}
	now, skew := v.cfg.Now(), v.cfg.Skew
	if !now.Add(-skew).Before(c.Expiry) { // valid while now - skew < exp
		return ErrExpired
	}
	if !c.NotBefore.IsZero() && now.Add(skew).Before(c.NotBefore) {
		return fmt.Errorf("%w: nbf", ErrNotYetValid)
	}
	if !c.IssuedAt.IsZero() && now.Add(skew).Before(c.IssuedAt) {
		return fmt.Errorf("%w: iat", ErrNotYetValid)
	}
	return nil
}

// keyFits binds key types to algorithms, so that no key is ever used with
// an algorithm of another family, whatever the JWKS says. A JWK's "alg"
// member, when present, binds the key to that one algorithm (RFC 7517
// §4.4; RFC 8725 §3.1: one key, one algorithm): a key published as RS256
// never verifies a PS256 token and a PS256 key never an RS256 one. An RSA
// key without "alg" verifies both RS256 and PS256, as issuers that omit it
// expect; it must have at least 2048 bits (RFC 7518 §3.3, §3.5).
func keyFits(k jose.JSONWebKey, alg jose.SignatureAlgorithm) bool {
	if k.Algorithm != "" && k.Algorithm != string(alg) {
		return false
	}
	switch pk := k.Key.(type) {
	case *rsa.PublicKey:
		return (alg == jose.RS256 || alg == jose.PS256) && pk.N.BitLen() >= 2048
	case *ecdsa.PublicKey:
		return alg == jose.ES256 && pk.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return alg == jose.EdDSA
	}
	return false
}

// keysFor returns the cached keys for kid. An unknown kid forces a JWKS
// refetch (key rotation), rate-limited by MinRefreshInterval. (A set older
// than JWKSRefresh is refreshed in the background by Verify, refreshIfOld.)
// The caller waits for the fetch at most fetchWait, and not past ctx
// (forcedFetch): then ErrJWKS.
func (v *Verifier) keysFor(ctx context.Context, kid string) (*keySet, []jose.JSONWebKey, error) {
	ks := v.keys.Load()
	if keys := ks.byKID[kid]; len(keys) > 0 {
		return ks, keys, nil
	}
	ks, err := v.forcedFetch(ctx, func(cur *keySet) bool { return len(cur.byKID[kid]) > 0 }, "unknown kid")
	switch {
	case errors.Is(err, errRateLimited):
		return nil, nil, fmt.Errorf("%w: unknown kid (JWKS refresh rate-limited)", ErrInvalid)
	case errors.Is(err, errFetchFailed):
		return nil, nil, fmt.Errorf("%w: unknown kid (JWKS refresh failed)", ErrInvalid)
	case err != nil:
		return nil, nil, fmt.Errorf("%w: unknown kid: %w", ErrJWKS, err)
	}
	if keys := ks.byKID[kid]; len(keys) > 0 {
		return ks, keys, nil
	}
	return nil, nil, fmt.Errorf("%w: unknown kid", ErrInvalid)
}

var (
	errRateLimited = errors.New("JWKS refresh rate-limited")
	errFetchFailed = errors.New("JWKS refresh failed")
	// errFetchWait: the JWKS fetch the request needed did not end within
	// fetchWait, or the request's context ended first.
	errFetchWait = errors.New("the JWKS refresh under way did not end in time; try again shortly")
)

// forcedFetch returns a key set fetched for a request: one installed
// meanwhile that done accepts, or one fetched now if MinRefreshInterval
// allows (errRateLimited if not; errFetchFailed). The fetch serves every
// caller and outlives the request (bound to it, a forged kid on a
// connection dropped at once aborted it; repeated every
// MinRefreshInterval, that kept the issuer's rotated-in key, and its
// removals, from custos), but the request waits for the fetch lock and the
// fetch together at most fetchWait and not past ctx: errFetchWait.
func (v *Verifier) forcedFetch(ctx context.Context, done func(*keySet) bool, why string) (*keySet, error) {
	wait := time.NewTimer(fetchWait)
	defer wait.Stop()
	if !v.lockFetch(ctx, wait.C) {
		return nil, errFetchWait
	}
	if cur := v.keys.Load(); done(cur) { // fetched meanwhile
		v.unlockFetch()
		return cur, nil
	}
	if !v.mayFetch(v.cfg.Now()) {
		v.unlockFetch()
		return nil, errRateLimited
	}
	fetched := make(chan error, 1)
	go func() {
		defer v.unlockFetch()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		err := v.fetchLocked(fctx)
		if err != nil {
			v.cfg.Logger.Warn("oauth: JWKS refresh for "+why+" failed", "err", err)
		}
		fetched <- err
	}()
	select {
	case err := <-fetched:
		if err != nil {
			return nil, errFetchFailed
		}
		return v.keys.Load(), nil
	case <-ctx.Done():
	case <-wait.C:
	}
	return nil, errFetchWait
}

// lockFetch takes the fetch lock, waiting until ctx ends or wait fires at
// most; false if it could not.
func (v *Verifier) lockFetch(ctx context.Context, wait <-chan time.Time) bool {
	select {
	case v.fetchLock <- struct{}{}:
		return true
	default:
	}
	select {
	case v.fetchLock <- struct{}{}:
		return true
	case <-ctx.Done():
	case <-wait:
	}
	return false
}

func (v *Verifier) unlockFetch() { <-v.fetchLock }

// refreshIfOld starts a background refresh of a key set older than
// JWKSRefresh (at most one at a time, and one fetch per
// MinRefreshInterval); the cached keys keep serving meanwhile.
func (v *Verifier) refreshIfOld() {
	now := v.cfg.Now()
	if now.Sub(v.keys.Load().fetched) > v.cfg.JWKSRefresh && v.mayFetch(now) && v.refreshing.CompareAndSwap(false, true) {
		go v.backgroundRefresh()
	}
}

// verifyWith returns the payload of jws if one of keys that fits alg
// verifies its signature, else nil.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, alg jose.SignatureAlgorithm) []byte {
	for _, k := range keys {
		if !keyFits(k, alg) {
			continue
		}
		if p, err := jws.Verify(k.Key); err == nil {
			return p
		}
	}
	return nil
}

// refetched returns a key set fetched after seen and its keys for kid: the
// one another caller installed meanwhile, or one fetched now if
// MinRefreshInterval allows (forcedFetch, as keysFor does for an unknown
// kid: the fetch serves every caller and outlives the request, which
// waits for it at most fetchWait). It returns nil if no newer set can be
// had in that time.
func (v *Verifier) refetched(ctx context.Context, seen *keySet, kid string) (*keySet, []jose.JSONWebKey) {
	cur, err := v.forcedFetch(ctx, func(cur *keySet) bool { return cur != seen }, "a signature its kid's key did not verify")
	if err != nil {
		return nil, nil
	}
	return cur, cur.byKID[kid]
}

func (v *Verifier) mayFetch(now time.Time) bool {
	return now.Sub(time.Unix(0, v.lastAttempt.Load())) >= v.cfg.MinRefreshInterval
}

func (v *Verifier) backgroundRefresh() {
	defer v.refreshing.Store(false)
	v.fetchLock <- struct{}{}
	defer v.unlockFetch()
	if !v.mayFetch(v.cfg.Now()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	if err := v.fetchLocked(ctx); err != nil {
		v.cfg.Logger.Warn("oauth: periodic JWKS refresh failed; keeping cached keys", "err", err)
	}
}

// fetchLocked fetches and installs the JWKS. v.fetchLock must be held. On
// failure the cached set is kept.
func (v *Verifier) fetchLocked(ctx context.Context) error {
	v.lastAttempt.Store(v.cfg.Now().UnixNano())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
	if err != nil {
		return fmt.Errorf("%w: JWKSURL: not a request URL", ErrJWKS)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	client := *v.cfg.HTTPClient // a copy, to add the redirect rule
	client.CheckRedirect = jwksRedirect(v.cfg.HTTPClient.CheckRedirect)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: GET %s: %v", ErrJWKS, req.URL.Host, withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: HTTP status %d", ErrJWKS, req.URL.Host, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return fmt.Errorf("%w: reading the body: %v", ErrJWKS, withoutURL(err))
	}
	if len(body) > maxJWKSBytes {
		return fmt.Errorf("%w: body larger than %d bytes", ErrJWKS, maxJWKSBytes)
	}
	byKID, skipped, err := parseJWKS(body)
	if err != nil {
		return err
	}
	v.keys.Store(&keySet{byKID: byKID, fetched: v.cfg.Now()})
	v.cfg.Logger.Info("oauth: JWKS fetched", "keys", len(byKID), "skipped", skipped)
	return nil
}

// jwksRedirect wraps a client's redirect policy (nil: net/http's, at most
// 10) with the rule JWKSURL itself obeys: keys come over https, or http on a
// loopback host, and never over http once the JWKS URL was https (a
// redirect from https to http would hand the key set to anyone on the path).
func jwksRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if err := checkURL(req.URL.String(), true); err != nil || (via[0].URL.Scheme == "https" && req.URL.Scheme != "https") {
			return fmt.Errorf("redirected to %s, which is not https", req.URL.Host)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// withoutURL is err without the request URL net/http puts in its errors
// (*url.Error): JWKSURL may carry a query (Entra's ?appid=, an API
// gateway's key), and errors are logged. The caller names the host.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// parseJWKS keeps the usable keys of a JWK Set: public RSA, EC P-256 and
// Ed25519 signing keys with a kid. Other keys (encryption keys, symmetric
// keys, private keys, unknown types) are skipped and counted; a set with no
// usable key is an error.
func parseJWKS(body []byte) (map[string][]jose.JSONWebKey, int, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, 0, fmt.Errorf("%w: not a JWK Set", ErrJWKS)
	}
	byKID := map[string][]jose.JSONWebKey{}
	skipped := 0
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || k.KeyID == "" || !k.Valid() ||
			!k.IsPublic() || (k.Use != "" && k.Use != "sig") || !usableKey(k) {
			skipped++
			continue
		}
		byKID[k.KeyID] = append(byKID[k.KeyID], k)
	}
	if len(byKID) == 0 {
		return nil, skipped, fmt.Errorf("%w: no usable signing key", ErrJWKS)
	}
	return byKID, skipped, nil
}

func usableKey(k jose.JSONWebKey) bool {
	for _, alg := range allowedAlgs {
		if keyFits(k, alg) {
			return true
		}
	}
	return false
}
