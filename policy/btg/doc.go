// Package btg keeps break-the-glass grants: time-limited emergency access
// of one user to one patient's records, with a reason, granted by an
// operator (`custos btg grant`), used by the server for reads with purpose
// of use ETREAT, and reviewed afterwards by the privacy officer
// (`custos btg review`).
//
// The store is a bbolt file (conventionally DATA/grants.db) shared by the
// CLI and the server. Neither holds it open: each operation opens it, does
// one transaction and closes it, so the operator's CLI and a running server
// take turns on the file lock. The server polls it (about once a second):
// it loads the active grants into memory for its read path, records the
// uses it made, and turns pending events into audit records.
//
// The rules a grant must meet (Rules: the maximum TTL and the operator
// roles allowed to grant) are the server's configuration. The server
// publishes them in the file; the CLI enforces the published rules when it
// writes a grant, and the server checks every grant it reads against its
// own rules and refuses (never applies, and audits as btg/refuse) one that
// breaks them, whoever wrote it.
//
// Invariants:
//   - A grant always has a reason, a user, a patient (the id resources'
//     labels name: a UUID for custos's own data, the source Patient id, a
//     FHIR id, for FHIR input; never a URI's keyed segment), the
//     patient's tenant (patient ids are unique within a tenant only; a
//     grant covers its tenant's patient, and one without a tenant,
//     written before grants named one or by an edit of the file, covers
//     nothing and is refused while it would be in force) and an expiry;
//     it takes effect only if its duration is at most the server's
//     MaxTTL and, when the server names roles allowed to grant, its
//     operator's role is one of them. It is never edited except to be
//     revoked (once), refused (once), to record its uses, or to record
//     that its expiry was audited.
//   - Every use is recorded: one per request (a read, a list page, a
//     completion) per grant the request's decisions relied on, naming the
//     request's action and its audit record.
//   - Every change — grant, revoke, expiry, review sign-off — is an Event in
//     the outbox until the server has written it to the audit log; events
//     carry ids so that a record written twice (crash between the audit
//     append and the outbox delete) is recognizable.
//   - Nothing here is a secret; patient ids are the catalog's (which holds
//     them too), in a 0600 file of the data directory. The audit log
//     gets keyed hashes of them (the server pseudonymizes events as it does
//     every record).
package btg
