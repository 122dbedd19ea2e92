// Package access is the one implementation of every auditor operation on
// the audit log — verify, export (JSONL, CSV), export bundle, report,
// prove, hash, the reading of policy-impact replay inputs, the
// compliance report's reading (verification, retention scan, bundle) and
// the online backup (package backup) — together with the access record
// that audits each of them. It follows the agreed design in
// docs/audit-access.md (decisions 1, 3, 4, 5 and 6).
//
// A Service runs inside the one process that holds the audit log's
// exclusive lock: a running server (reached through its admin socket,
// package app/admin) or, when no server runs, the CLI command itself
// (Local). Both call Service.Run with the request as JSON and a writer for
// the result; only the transport differs, so the output is the same.
//
// # Invariants
//
//   - Audited before read. Run appends the access record (action
//     "audit/<verb>", "policy/impact", "compliance/report" or "backup";
//     principal = the caller's OS account; purpose of use; reason = the
//     range or subject) and waits until it is durable before it reads any record.
//     If the append fails, Run returns ErrNotRecorded and reads nothing
//     (fail closed).
//   - A consistent view is a prefix. The access record's seq N pins the
//     view: every operation reads records 1..N (or a range within it), which
//     never change once written, in read transactions of at most 4,096
//     records (audit.Log.Records, Inputs, Export), never one long
//     transaction, so the writer keeps appending meanwhile. Verify walks the
//     whole log, including records appended after N (its end is checked in
//     the same transaction as the last records), and checks anchored
//     checkpoints against the tree at N.
//   - The caller's identity comes from the transport (peer credentials or
//     the CLI's own uid), never from the request body. --by is a claim the
//     operator adds; it is recorded as such, in the reason.
//   - Patients appear only as lookup values (keyed hashes, audit.Pseudonym)
//     computed by the caller, as in every record; no raw patient id is
//     accepted, stored or returned.
//   - Paced, never held. A server's Service paces its walks of the log
//     (Service.Pace), all of them on one budget (a share of one CPU for
//     the walks together, not for each): a walk rests between chunks of
//     records, outside any
//     read transaction (a rest inside one would keep bbolt from reusing
//     the pages the writer frees meanwhile) and outside the log's read
//     lock (audit.Log.VerifyPaced, Export: Close does not wait for a
//     rest, and a walk that finds the log closed after one ends with
//     audit.ErrClosed), and a rest ends when the caller goes away or the
//     Service closes (Service.Close, a server shutting down: the walk then
//     ends with audit.ErrClosed too). Pacing changes when output is
//     written, never what.
//   - Errors and the operational log never contain record contents, nor
//     does progress (RunProgress): counts only, reported after the access
//     record is durable.
//
// # Caveats
//
// A Service does not authenticate: the transport does (app/admin checks
// the peer's uid on every connection). A bundle is assembled in a
// temporary directory inside the data directory (.access-bundle-*) and
// streamed as a tar archive; the temporary directory is removed when Run
// returns, and one left by a process that was killed meanwhile is removed
// by the next New (only the lock holder creates a Service). The data
// directory is the audit log's volume: a server hands its reserve check to
// Service.LimitSpace, which every write to a bundle asks first, so that a
// bundle stops (ErrNoRoom) before it takes the room kept for refusal
// records and the shutdown checkpoint.
package access
