// Package impact shows what a candidate policy would change before it is
// rolled out: it replays the policy inputs of recently audited decisions
// (stored next to their audit records, see audit.Log.Inputs) against the
// candidate and reports, per decision, whether it would flip from allow to
// deny, from deny to allow, or keep its outcome with different obligations.
// custos policy impact is its command-line front end.
//
// # What is replayed
//
// Every audited request that reached a policy decision and stored its input:
// resources/read (allowed, denied, not found, policy error) and
// resources/templates/list. resources/list stores no per-item inputs (a page
// decides dozens of resources), so listings are not replayed; since list and
// read are decided by the same rules, the reads show their impact. Records
// without a stored input (lists, refusals before a decision, failures after
// an allow, records written before inputs were stored) are counted as
// skipped.
//
// # Invariants
//
//   - Read-only and pure apart from the source: Replay never writes to the
//     audit log and renders deterministically (rows in seq order, fixed key
//     order, times in UTC).
//   - The candidate is judged as the server would enforce it: a candidate
//     error is a denial (fail closed; classified ChangeReplayError), the
//     server's own rules apply through the function the server applies
//     them with (policy.Enforce): an allow of a resource of another tenant
//     than the caller's is a denial with reason tenant_boundary, an allow
//     demanding obligations on a binary resource (PDF, PNG) a denial with
//     reason binary_cannot_be_minimized; and a read of a
//     resource that did not exist stays not found whatever the candidate
//     decides.
//   - The recorded side comes from the canonical record (outcome, reason,
//     obligations), never from the stored input, which is context, not
//     evidence.
//   - No PHI: stored inputs hold keyed hashes instead of patient ids, and
//     reports name users, purposes and resource types, never resources or
//     patients. Candidate errors carry OPA codes and policy locations only.
package impact
