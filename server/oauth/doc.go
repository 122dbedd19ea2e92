// Package oauth makes custos an OAuth 2.1 resource server: it verifies JWT
// access tokens issued by one authorization server and maps them to the
// policy principal.
//
// Specifications followed:
//   - RFC 9068 (JWT profile for OAuth 2.0 access tokens) and RFC 7519: a
//     token is a JWS in compact serialization, signed with RS256, PS256,
//     ES256 or EdDSA by a key of the issuer's JWKS (RFC 7517), selected by
//     "kid". A JWK's "alg", when present, binds its key to that algorithm
//     (RFC 7517 §4.4, RFC 8725 §3.1); RSA keys have 2048 bits or more.
//   - RFC 8707: "aud" must contain the server's canonical resource URL.
//   - RFC 9728: protected resource metadata, advertised through the
//     resource_metadata parameter of WWW-Authenticate (RFC 6750 §3).
//   - RFC 8693 §4.1: the "act" claim names the agent acting for "sub".
//
// Invariants:
//   - Fail closed. A token is accepted only if every check passes: allowed
//     algorithm (never "none" and never an HMAC, so a public key can not be
//     used as a shared secret), a signature by a known asymmetric key, iss,
//     aud, exp (required), nbf and iat within Config.Skew, a non-empty sub,
//     a tenant and a client identity, and well-typed custom claims.
//   - All cryptography is go-jose's (github.com/go-jose/go-jose/v4).
//   - Errors and log lines never contain the token or any claim value; they
//     name the check that failed. Nor do they quote the JWKS URL, whose
//     query may hold a key: a fetch error names its host.
//   - The JWKS is cached. An unknown "kid", or a signature the cached key
//     of its kid does not verify (a key replaced under the same kid),
//     forces a refetch (key rotation), at most once per
//     Config.MinRefreshInterval so that forged kids can not
//     turn the verifier into a request amplifier against the issuer. A
//     fetch is never bound to the request that caused it (it serves every
//     caller; a caller that hangs up must not abort it and use up the
//     interval), but a request waits for it, and for a fetch in flight,
//     at most fetchWait (2 s) and not past its context: then ErrJWKS. If
//     the issuer becomes unreachable the cached keys keep
//     working for Config.JWKSMaxStaleness (default 24 h) after the last
//     successful fetch; beyond it every token is refused (ErrJWKSStale)
//     until a fetch succeeds, cached verifications included.
//   - Purpose of use is accepted only if it is a known HL7 v3 PurposeOfUse
//     code; the claim and the request header must not disagree.
package oauth
