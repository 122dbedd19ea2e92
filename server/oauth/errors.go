package oauth

import "errors"

// Sentinel errors. Verify wraps exactly one of the token errors (ErrMissing
// to ErrInsufficientScope) so callers can branch with errors.Is; the
// wrapped message names the failed check and never the token or a claim
// value. Challenge maps them to the RFC 6750 error codes.
var (
	// ErrMissing: the request carries no bearer token. Answer 401 with a
	// challenge that carries no error code (RFC 6750 §3.1).
	ErrMissing = errors.New("oauth: no bearer token")
	// ErrMalformedRequest: the Authorization header is given more than once
	// or is not "Bearer" and one token (RFC 6750 §2.1), or the URI query
	// carries a token parameter (RFC 6750 §2.3's access_token, or another
	// name a token is carried by, in any case: tokenParams; custos does
	// not accept them). Answer 400
	// invalid_request (§3.1), never the header: which of several tokens
	// is meant is not for the server to guess.
	ErrMalformedRequest = errors.New("oauth: malformed Authorization header")
	// ErrInvalid: the token is malformed, uses a disallowed algorithm, is
	// signed by an unknown key, has a bad signature, or lacks a required
	// claim. Answer 401 invalid_token.
	ErrInvalid = errors.New("oauth: invalid token")
	// ErrExpired: exp is in the past by more than Config.Skew. Answer 401
	// invalid_token; the client should obtain a new token.
	ErrExpired = errors.New("oauth: token expired")
	// ErrNotYetValid: nbf or iat is in the future by more than Config.Skew.
	// Answer 401 invalid_token.
	ErrNotYetValid = errors.New("oauth: token not yet valid")
	// ErrAudience: aud does not contain Config.Audience, i.e. the token was
	// issued for another resource (RFC 8707). Answer 401 invalid_token.
	ErrAudience = errors.New("oauth: token audience mismatch")
	// ErrIssuer: iss is not Config.Issuer. Answer 401 invalid_token.
	ErrIssuer = errors.New("oauth: token issuer mismatch")
	// ErrInsufficientScope: the token is valid but lacks the scope the
	// method requires. Answer 403 insufficient_scope.
	ErrInsufficientScope = errors.New("oauth: insufficient scope")
	// ErrPurpose: the purpose of use given by the claim or the header is
	// not a known HL7 PurposeOfUse code, or the claim and the header
	// disagree. Answer 400 (the token itself is fine). A purpose absent from
	// both is not an error: it is "" and the policy denies.
	ErrPurpose = errors.New("oauth: invalid purpose of use")
	// ErrBodyTooLarge: the request body is longer than the server takes
	// (a Middleware methods func returns it, wrapped with the limit).
	// Answer 413; the client must send less (smaller batches).
	ErrBodyTooLarge = errors.New("oauth: request body too large")
	// ErrBadConfig: New was given an invalid Config; the message names the
	// field. Fix the configuration.
	ErrBadConfig = errors.New("oauth: invalid configuration")
	// ErrJWKSStale: no JWKS fetch has succeeded for longer than
	// Config.JWKSMaxStaleness; every token is refused until one does.
	// Answer 401 invalid_token; make the issuer's JWKS URL reachable.
	ErrJWKSStale = errors.New("oauth: signing keys stale")
	// ErrJWKS: the issuer's key set could not be fetched or held no usable
	// key when New ran (retry later or fix JWKSURL); or, from Verify, the
	// JWKS fetch a token needed (its kid unknown, or its signature not
	// verified by its kid's cached key) did not end within a short wait
	// (2 s) or before the request's context did: answer 401 invalid_token
	// ("signing keys unavailable"); the client may retry, the fetch goes on
	// and serves the next request.
	ErrJWKS = errors.New("oauth: JWKS unavailable")
)
