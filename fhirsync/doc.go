// Package fhirsync pulls resources from a live FHIR R4 server into a
// staging directory laid out as a FHIR Bulk Data export, and hands that
// directory to an importer.
//
// Specifications followed: FHIR R4 RESTful API (CapabilityStatement at
// [base]/metadata, search with _count, _lastUpdated and Bundle
// link[relation=next]); FHIR Bulk Data Access 2.0 ($export kick-off with
// Prefer: respond-async, status polling with Retry-After and X-Progress,
// the completion manifest with output, deleted and error files — outcome
// and link next for a manifest in pages in the IG's later editions —
// _since); SMART App
// Launch 2.x Backend Services (client_credentials grant with a
// private_key_jwt client assertion, RS384 or ES384, exp at most five
// minutes ahead, aud = the token endpoint of
// .well-known/smart-configuration).
//
// A [Syncer] runs one sync at a time:
//
//  1. read the CapabilityStatement; choose Bulk $export (Group level
//     when --group names a group and the server offers it, else system,
//     else Patient level) or, when none is offered, a paged REST search
//     per resource type;
//  2. fetch everything (full) or only what changed since the last
//     successful sync (its state), streaming every file to disk;
//  3. validate what was fetched (JSON, content types, UTF-8, complete
//     NDJSON lines, resource types matching their file), and drop the
//     deletions of resources the export's output holds (deleted and
//     created again with the same id since _since: the output wins);
//  4. fetch the Binaries that the staged attachments (DocumentReference,
//     DiagnosticReport.presentedForm, Media) name on the server by url and
//     that the staged files do not hold (real Bulk exports leave Binary
//     out: it is outside the Patient compartment), with GET
//     [base]/Binary/<id>, into one more staged Binary file, by the rule
//     of custos's reader (fhirin), which would refuse them as dangling;
//  5. call [Importer].Import with the staging directory's manifest (not
//     when an incremental sync found no change; a full sync that found
//     nothing at all is refused rather than retiring everything; only a
//     full sync of every type asks the importer to retire, never one
//     restricted by Options.Types);
//  6. only then write the new state file.
//
// # Invariants
//
//   - A failed sync changes nothing: the importer is not called unless
//     every file was fetched and validated, and the state file is written
//     (atomically: temporary file, fsync, rename) only after the import
//     succeeded. The next run then fetches the same changes again.
//   - Every sync is audited: a start record before the first request to
//     the server and an outcome record (counts or the error) at the end,
//     through [Recorder]. If the start record cannot be written, nothing is
//     fetched (fail closed).
//   - Bounded memory: resources are streamed from the network to staging
//     files line by line; no file or Bundle page is held whole beyond one
//     page of a REST search (at most Options.PageSize resources), and one
//     Binary fetched by its attachment url (at most Options.MaxLine); a
//     multi-page REST search keeps the ids of its type's matches for its
//     second pass.
//   - No secret leaves in a message: errors and log lines name the URL path
//     of the request that failed, never its query (pre-signed download URLs
//     carry credentials there), never an access token or client assertion,
//     never a payload; a Binary read's path shows its id as [id] (a FHIR
//     id may carry PHI), in its errors and its retries' log lines alike,
//     and an answer reached through a redirect is named by the request
//     made. The FHIR base URL is refused if it carries user
//     information, a query or a fragment. What a server echoes of the
//     sync's access tokens or client assertions (in a header Go quotes in
//     an error, a Content-Type, a manifest field) is redacted from the
//     error, the log and the progress reports.
//   - Credentials stay on their origin: the access token goes only to the
//     FHIR base's origin (scheme, host and port), and neither it nor the
//     client assertion follows a redirect to another origin (Go's client
//     would forward the Authorization header to another port or scheme of
//     the same host, and re-post a 307's body anywhere); no redirect goes
//     from https to http.
//   - The client assertion is signed by an opaque key (a crypto.Signer:
//     Vault Transit in production, a local key with --dev) through
//     go-jose; this package never sees private key material of a Vault key
//     and never assembles a JWS by hand.
//   - Retries: 429 and 5xx answers and transport errors are retried with
//     exponential backoff and full jitter, honouring Retry-After, up to
//     Options.MaxAttempts; a 401 discards the cached token and re-authenticates
//     once. A response whose headers, or any read of whose body, wait more
//     than Options.HeaderTimeout is abandoned and retried the same way: a
//     stalled server never holds a sync (and the base's lock) forever.
//
// # Caveats
//
// A REST search cannot see deletions: an incremental REST sync only adds
// and updates; resources deleted on the server are retired by the next full
// sync (Options.Full, or the first sync). A REST search of several pages is
// paged twice (the second pass stages only what the first missed): a
// server paging by offset skips a match when a resource is deleted during
// the paging, and a full sync retired that live resource. Two deletions
// timed to shift the same place in both passes still can. Bulk exports report deletions
// through their deleted files when the server supports it.
package fhirsync
