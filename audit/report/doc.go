// Package report answers a privacy officer's questions from the audit log:
// who accessed a patient's records (including denials), the accounting of
// disclosures under 45 CFR 164.528 (which leaves out treatment, payment and
// health care operations), what a user did, every denial, every
// break-the-glass access — each over a time range.
//
// Invariants:
//   - Reports read canonical records only (audit.Decode); a record that does
//     not decode stops the report with an error naming its seq: a report
//     over a damaged log is never silently partial.
//   - Patients are matched by their keyed hashes (audit.Pseudonym under each
//     audit key version the caller searched: cmd/custos searches every
//     version ever used, and the report states them in KeyVersions); the
//     report never needs, prints or stores a raw patient id. A lookup value
//     is the same in every tenant (ids are unique within a tenant only): a
//     patient is the lookup value in a tenant (audit.PatientRefs, from the
//     record's URIs), and a patient report keeps each tenant's rows apart
//     (Query.Tenant selects one), never merged.
//   - Pure filtering: no I/O besides the Source; table and JSON renderings
//     are deterministic.
//   - The table is plain text for a terminal: one record a line, each cell
//     the record's text through audit.Printable (no newline, tab, escape
//     sequence or bidi override reaches the screen raw); JSON keeps the
//     exact text.
package report
