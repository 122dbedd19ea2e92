// Package minimize applies the data-minimization obligations that a policy
// decision demands to a payload before it leaves custos.
//
// # Responsibility
//
// minimize is a set of pure functions over bytes and values: given a payload,
// its MIME type, an ordered list of [Obligation] values and [Options], it
// returns the minimized payload or an error. It performs no I/O, reads no
// clock (the reference instant for age computations is [Options.Now]) and has
// no mutable package state, so it can be tested exhaustively and fuzzed.
//
// The [Obligation] type and the Op* constants are the obligation vocabulary of
// the whole project: the Rego policy emits obligations in this shape, the
// policy package decodes them into [Obligation] and validates them with
// [ValidateAll], the audit log records [Obligation.String], and this package
// enforces them.
//
// # Operations
//
//   - remove ([OpRemove]): delete the member or array element(s) at Path.
//   - mask ([OpMask]): replace the value with "***" (Fn "") or "***" plus the
//     last four characters of a string (Fn "last4").
//   - generalize ([OpGeneralize]): coarsen a value (Fn "year", "zip3",
//     "age90", "birthyear90"); a value of unexpected form becomes "***".
//   - scrub ([OpScrub]): replace identifier patterns (phone, email, SSN, MRN,
//     date) inside strings with tokens such as "[PHONE]".
//
// Paths are RFC 6901 JSON pointers, with one extension: a segment "*" selects
// every element of an array (it matches a member literally named "*" when it
// meets an object). A path that does not resolve is a no-op, not an error.
// Obligations are applied in the order given.
//
// # Mapping to HL7 ObligationPolicy
//
// The HL7 v3 ObligationPolicy code system (used in FHIR security labels) has
// REDACT, MASK and DEID. remove corresponds to REDACT, mask to MASK, and
// generalize and scrub together implement DEID (HIPAA Safe Harbor,
// 45 CFR 164.514(b)(2)).
//
// # Invariants
//
//   - Pure: the same inputs always give the same output; inputs are never
//     modified and outputs never alias inputs.
//   - All or nothing: a function that returns an error returns a nil payload.
//     A partially minimized payload is never returned.
//   - Binary payloads (anything not JSON or text/*) are released whole when no
//     obligation applies and withheld ([ErrBinaryWithheld]) when any does:
//     custos cannot minimize a PDF or an image, so it does not pretend to.
//   - An unknown op, a malformed path or an unknown fn is an error
//     ([ErrUnknownOp], [ErrBadPath], [ErrBadFn]) before anything is applied,
//     so a policy can never ask for a minimization that would silently be
//     skipped.
//   - Generalization fails closed: a value that is not of the expected form
//     is replaced with "***" rather than passed through.
//   - Errors never contain payload content (it may be PHI); they name the
//     obligation instead.
//
// # Caveats
//
// Scrubbing is pattern based. It removes the identifier formats listed on
// [ScrubString] and nothing else: a name in free text, or an identifier in a
// format it does not know, survives. Policies that need Safe Harbor on
// structured data should remove or generalize the FHIR elements that carry
// identifiers and use scrub for free text. Object member names are not
// scrubbed, only values.
package minimize
