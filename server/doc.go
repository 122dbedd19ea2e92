// Package server is custos's one decision point: it answers the MCP
// Resources methods (resources/list, resources/read, including ranged reads
// of pages of a note, resources/templates/list), completion/complete, and
// resources/subscribe, resources/unsubscribe and subscriptions/listen, for
// every transport (stdio and Streamable HTTP) and both protocol revisions
// (2025-11-25 with sessions, 2026-07-28 stateless).
//
// Every request is handled in this order, and no step may be skipped or
// reordered:
//
//  1. identify the caller (principal and purpose of use, from the transport)
//     and pin the policy that decides the request ([Snapshotter]);
//  2. validate the request (URI in canonical form, store.ParseReadURI;
//     cursor sealed for this caller) — bad input is refused with -32602 and
//     audited;
//  3. look up catalog metadata (labels only, never the payload);
//  4. ask the policy for a decision ([Decider]);
//  5. append the audit record and wait until it is durable ([AuditLog]);
//  6. only for an allowed read: fetch the payload and apply the decision's
//     obligations (package minimize);
//  7. answer.
//
// The files follow that path: server.go (Config, New, the middleware,
// admit: step 1), decide.go (pinning and steps 3–5 for one resource:
// decideResource, shared by read, subscribe and notify), record.go (audit
// entries, pseudonymization, commit, and refuse, the one way a refusal is
// recorded and answered), reasons.go (the audit reasons the server
// writes), resources.go (list, read — steps 6 and 7 —, templates),
// entitytag.go (what _meta says about content), then subscribe.go,
// complete.go, research.go, btg.go and the transports (with sessions.go,
// the cap on sessions per principal; slots.go, the share of
// http.max_connections left to unauthenticated connections). refusals.go records the refusals
// anyone can cause (failed authentications, a session too many, requests
// while the audit volume is in its reserve) once per kind and window and
// otherwise in one aggregate record, so that they cannot fill the audit
// volume; every one of them is still counted in the metrics.
// Over HTTP the caller's source address (audit records, the limit of
// failed authentications) is resolved once per request by package
// clientaddr (the TCP peer, or from a peer in Config.TrustedProxies the
// client its Forwarded or X-Forwarded-For names); nothing else reads
// RemoteAddr.
//
// Three values about content travel in _meta and only one is an entity
// tag: [ETagKey] ("custos/etag") is the entity tag of what the caller
// receives (minimized tags are keyed with a key derived from the newest
// cursor key by HKDF); [DigestKey] ("etag" on the wire) is the stored
// content digest (store.Resource.Digest) and [VersionKey] its version,
// both given only unminimized.
//
// Invariants:
//   - List and read share one decision function: a list item is shown only if
//     the policy would allow reading it, and list metadata is minimized too
//     (titles and descriptions scrubbed, size omitted when read would return
//     something smaller, the content digest withheld under obligations).
//   - Denied and not-found answer the same error (-32002 up to 2025-11-25,
//     -32602 with data.uri on 2026-07-28; see NotFoundCode); the audit
//     record keeps the true reason.
//   - Completion suggests only values the caller could list (a research
//     caller's in research-URI order, as its list is ordered); a subscription
//     is decided like a read, and every update notification is decided again
//     for its subscriber and audited before it is sent.
//   - If the audit append fails, the request fails and no payload byte leaves;
//     a refusal whose record cannot be written answers the audit failure,
//     never the refusal alone.
//   - If policy cannot decide, the request is refused (fail closed).
//   - Binary payloads (minimize.IsBinary) are released whole or not at all: a
//     decision that demands minimization of a binary resource is a denial.
//   - Tenant boundary: a resource is released (listed, read, notified) only
//     to a caller of its tenant, whatever the policy says: finishDecision
//     turns an allow about another tenant's resource into a denial
//     (tenant_boundary). The default policy already denies it
//     (tenant_mismatch), so no decision of it changes. Because of this rule
//     a list over an indexed catalog (store.Live: store.Index) scans the
//     caller's tenant only: the pages are exactly those of a scan of the
//     whole catalog (TestIndexedListAgreesWithPlain keeps the plain scan as
//     the reference), and a caller whose tenant holds nothing gets one
//     empty page without a cursor. Every listed item is still decided by
//     the one policy decision, on the labels the index holds; its metadata
//     is then read by Get and must be the version decided (Version and
//     Digest), else the page ends before it.
//   - Nothing visible: a list first asks the policy pinned for the request
//     whether nothing can be visible to the caller for the purpose
//     (policy.Engine.NothingVisible, the policy's rule nothing_visible);
//     if so it answers one empty page without cursor, scans nothing, and
//     records reason nothing_visible (a completion likewise suggests
//     nothing and scans nothing). That is not a second decision: the
//     engine enforces the rule inside the one decision function (every
//     list and read decision denies while it holds), so the page is
//     exactly what scanning and deciding every item would give
//     (TestNothingVisibleListsOneEmptyPageUnscanned keeps the scan as the
//     reference). If the policy cannot say, the list is refused.
//   - Research aliases over an indexed catalog (research.go) are built per
//     audit key, catalog index and tenant, lazily, and page in exactly the
//     order of the plain alias index (TestIndexedListAgreesWithPlain); a
//     research URI outside the prefix its order assumes refuses the list
//     rather than misorder it. WarmResearchAliases fills the same cache
//     ahead (the assembly calls it at the start and after each catalog
//     swap, for tenants of up to maxWarmPatients patients in all) with the
//     same function, so the first research list finds it built;
//     TestWarmResearchAliases holds the warm and cold builds equal.
//   - A record names a patient one way (patientOf, record.go), in its URIs
//     and its patients alike: for FHIR input, whose URI segment is a keyed
//     id, the source id (labels.patient) of the resource decided, or else
//     the one labels.patient of the catalog's current resources under that
//     segment in the tenant (store.Index.SegmentPatient: with or without
//     the compartment's Patient resource), or for a retirement the removed
//     resource's (store.Change.RemovedPatients); otherwise the segment. A
//     segment without the form of a keyed id (store.HasKeyedIDForm) is
//     taken as it is, with no catalog lookup (the manifest import requires
//     labels.patient to equal it), and resolved segments are memoized;
//     TestPatientOfFastPathsAgree keeps the plain lookup (lookupPatientOf)
//     as the reference, and TestRecordsOfACompartmentWithoutPatientAgree
//     holds every record's URIs to its patients.
//   - The checks in front of the go-sdk's HTTP handlers (rate limit, OAuth
//     scope, params, routing, sessions: transport.go) read a POST's body
//     through one memo per request (body.go): the memo holds the bytes the
//     body will yield; any rewrite replaces both (setBody, emptyName). The memo is
//     the body itself, read ahead once (at most maxBody+1 bytes), and each
//     of its decodings (the go-sdk's message, the params' _meta, a batch)
//     is made at most once, when a check first asks
//     (TestBodyIsReadAndDecodedOnce); the answers are those of every check
//     reading and decoding the body itself (TestBodyMemoAgreesWithPlainPeeks
//     keeps that plain peek as the reference).
//   - The SDK's in-memory resource list and its plain-text cursors are never
//     used; cursors are AEAD-sealed and bound to the caller.
//   - Connection slots (slots.go): a connection that never carried an
//     authenticated request holds a slot of http.max_connections only while
//     slots are plentiful. A request that was not authenticated (a refusal
//     before the token verified, the OAuth metadata document) closes its
//     connection after its answer if, as it arrived, more than three
//     quarters of the slots were in use; below that it keeps it, so that a
//     refusal on a kept-alive connection costs no TLS handshake
//     (TestRefusalClosesItsConnectionNearTheCap). When a connection takes
//     the last slot, the idle connection that never carried an
//     authenticated request and idled longest is closed
//     (TestIdleRefusedConnectionsGoFirstAtTheCap,
//     TestRefusedConnectionsCannotHoldEverySlot). An idle connection that
//     carried an authenticated request keeps its slot until IdleTimeout
//     (TestAuthenticatedIdleConnectionKeepsItsSlot); a request in progress,
//     or a connection still sending its headers, is never closed for a slot.
//   - No PHI, payload or secret is written to the operational log or put in an
//     error message; errors name what was wrong, not the data.
package server
