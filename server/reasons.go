package server

import "github.com/custos-mcp/custos/policy"

// Audit reasons written by this package: the server's own vocabulary for
// the reason field of the records it writes (docs/audit-format.md). A
// record that reached a policy decision carries the policy's reasons
// instead (e.g. clinician_care_team), joined by commas; the server adds
// to them only where noted. A reason may be suffixed with ",page=N" for a
// ranged read (withPage). None of them names data: they say what happened,
// never to whom or with what.
const (
	// ReasonNoIdentity: the request carried no authenticated principal (or
	// an unknown purpose of use). Outcome deny.
	ReasonNoIdentity = "no_identity"
	// ReasonKeysStale: the keys are past their staleness limit; nothing is
	// read. Outcome error.
	ReasonKeysStale = "keys_stale"
	// ReasonAuditKeyUnavailable: the audit keyed-hash key is unavailable,
	// so the record carries no identifiers and the request is refused (and
	// a research caller's aliases cannot be made). Outcome error.
	ReasonAuditKeyUnavailable = "audit_key_unavailable"
	// ReasonCursorKeyUnavailable: no cursor key to open or seal a cursor.
	// Outcome error.
	ReasonCursorKeyUnavailable = "cursor_key_unavailable"
	// ReasonCursorSealFailed: the next-page cursor could not be sealed; the
	// page is not released. Outcome error.
	ReasonCursorSealFailed = "cursor_seal_failed"
	// ReasonBadCursor: the client's cursor does not open for it. Outcome
	// deny.
	ReasonBadCursor = "bad_cursor"
	// ReasonBadURI: the client named a URI that is not canonical. Outcome
	// deny; the record names no URI (the raw string may hold a secret).
	ReasonBadURI = "bad_uri"
	// ReasonCatalogUnavailable: the catalog could not be read. Outcome
	// error.
	ReasonCatalogUnavailable = "catalog_unavailable"
	// ReasonPolicyError: the policy could not decide (fail closed). Outcome
	// error. On a read the engine's own reason (policy_error,
	// policy_timeout) is kept; on a list or completion it prefixes the scan
	// summary.
	ReasonPolicyError = "policy_error"
	// ReasonNotFound: the URI names no catalog resource. Outcome deny; the
	// caller gets the answer a denial gets. Appended (",not_found") to a
	// policy error about a missing URI.
	ReasonNotFound = "not_found"
	// ReasonRetired: a URI left the catalog (ActionRetire): deleted at the
	// source, missing from a full import, or no longer in the replacing
	// catalog. Outcome allow.
	ReasonRetired = "retired"
	// ReasonDenied: the policy denied without giving a reason. Outcome deny.
	ReasonDenied = "denied"
	// ReasonBinaryNotMinimizable is added to an allow decision's reasons
	// when it demands minimization of a binary resource, which makes it a
	// denial (binary is released whole or not at all).
	ReasonBinaryNotMinimizable = policy.ReasonBinaryNotMinimizable
	// ReasonTenantBoundary is added to an allow decision's reasons about
	// a resource of another tenant than the caller's (or of no tenant),
	// which makes it a denial: the server's own tenant boundary, whatever
	// the policy says (decide.go, finishDecision; policy.Enforce).
	ReasonTenantBoundary = policy.ReasonTenantBoundary
	// ReasonNothingVisible prefixes the scan summary of a list page
	// answered without scanning ("nothing_visible returned=0 denied=0
	// scanned=0", outcome allow, no cursor): the policy says nothing is
	// visible to the caller for the purpose (rule nothing_visible), and
	// denies every list and read decision for them while it holds.
	ReasonNothingVisible = policy.ReasonNothingVisible
	// ReasonDataKeyUnavailable: after the allow record, the payload's data
	// key could not be unwrapped; nothing released. Outcome error.
	ReasonDataKeyUnavailable = "key_unavailable"
	// ReasonPayloadUnavailable: after the allow record, the payload could
	// not be fetched; nothing released. Outcome error.
	ReasonPayloadUnavailable = "payload_unavailable"
	// ReasonMinimizationFailed: after the allow record, minimization
	// failed; nothing released. Outcome error.
	ReasonMinimizationFailed = "minimization_failed"
	// ReasonPageOutOfRange: after the allow record, the page named is past
	// the end of the released text; answered as not found. Outcome error.
	ReasonPageOutOfRange = "page_out_of_range"
	// ReasonResearchNoSubscriptions: a research (HRESCH) caller asked for a
	// subscription, which the research view (aliased URIs) does not offer. Outcome
	// deny.
	ReasonResearchNoSubscriptions = "research_no_subscriptions"
	// ReasonNotSubscribed: an unsubscribe named no subscription of the
	// session. Outcome deny (the client's answer is still empty success).
	ReasonNotSubscribed = "not_subscribed"
	// ReasonUnsubscribed: a subscription was removed. Outcome allow.
	ReasonUnsubscribed = "unsubscribed"
	// ReasonTokenExpired: a subscriber's access token expired; the
	// notification is withheld. Outcome deny.
	ReasonTokenExpired = "token_expired"
	// ReasonTokenRevoked: a subscriber's dev token left the token file
	// (custos token revoke) or its entry changed; the notification is
	// withheld. Outcome deny.
	ReasonTokenRevoked = "token_revoked"
	// ReasonBadCompletion: a completion request is malformed (no ref, a
	// value too long). Outcome deny.
	ReasonBadCompletion = "bad_completion"
	// ReasonUnknownRef: a completion ref names no template of the server.
	// Outcome deny.
	ReasonUnknownRef = "unknown_ref"
	// ReasonUnknownArgument: a completion argument names no variable of
	// the template. Outcome deny.
	ReasonUnknownArgument = "unknown_argument"
	// ReasonRateLimited: an HTTP request beyond the principal's rate limit
	// (answered 429). Outcome deny.
	ReasonRateLimited = "http_429,rate_limited"
	// ReasonSessionLimit: a new 2025-11-25 session beyond the principal's
	// cap (Config.MaxSessions), answered 429 (action http/rate_limited).
	// Outcome deny; recorded in aggregate (refusals.go).
	ReasonSessionLimit = "http_429,session_limit"
	// ReasonDiskLow: the audit volume is down to its reserve; the request
	// is refused so that the records that must be written still fit.
	// Outcome error; recorded in aggregate (refusals.go).
	ReasonDiskLow = "disk_low"
)

// Parts of the reason of an HTTP request refused before MCP saw it
// (action auth/reject, outcome deny): "http_<status>," then one of
// these, then for an invalid token the verifier's code (expired,
// wrong_audience, ...), e.g. "http_401,invalid_token,expired".
const (
	ReasonNoToken           = "no_token"
	ReasonInvalidToken      = "invalid_token"
	ReasonInsufficientScope = "insufficient_scope"
	ReasonCrossOrigin       = "cross_origin"
	// ReasonSessionMismatch: the request named a 2025-11-25 session of
	// another principal (a hijack attempt); recorded with the caller's own
	// principal.
	ReasonSessionMismatch = "session_mismatch"
	// ReasonInvalidHost: a request that reached a loopback listener named
	// a Host that is not a loopback one (DNS-rebinding protection,
	// refuseRebinding); recorded as cross_origin until 2026-12-06.
	ReasonInvalidHost = "invalid_host"
	// ReasonInvalidRequest: the Authorization header was given more than
	// once or was not "Bearer" and one token: answered 400 invalid_request
	// (RFC 6750 §3.1), "http_400,invalid_request".
	ReasonInvalidRequest = "invalid_request"
)

// Suffix of an aggregate refusal record's reason (refusals.go):
// "<reason>,aggregate,count=N,window=START/END".
const ReasonAggregate = "aggregate"

// policyReasonBreakGlass is the reason the policy gives for an access it
// allows only under a break-the-glass grant: a request that relied on it
// (a read, a list page, a completion) is reported to the grant as one use
// (Grants.Used) once its record is durable.
const policyReasonBreakGlass = "break_glass"
