// Package policy is custos's single decision point: every resources/list,
// resources/read and resource-templates request is decided here, by an
// embedded Open Policy Agent engine evaluating the Rego query
// data.custos.authz.decision (see package rego for the default policy and
// docs/policy.md for the schema).
//
// An [Engine] is built once per policy revision by [Load], [LoadDir] or
// [Default]; [Engine.Decide] is then safe for concurrent use. To change the
// policy, build a new Engine off the request path and swap it in (for
// example with atomic.Pointer), keeping the last good one if the new policy
// fails to compile.
//
// # Invariants
//
//   - Deny by default. Only a well-formed decision with allow == true allows.
//   - Any failure is a denial: a bad input, an evaluation error, a timeout,
//     an undefined or malformed decision each return a [Decision] with
//     Allow=false, a reason code and no obligations, plus a non-nil error
//     (see errors.go). There is no code path that allows on error.
//   - Unknown obligations are denials: every obligation is checked with
//     minimize.Obligation.Validate, so the server never silently skips a
//     minimization it does not understand.
//   - One prepared query per revision. The policy modules are compiled once
//     with rego.PrepareForEval; the prepared query is reused by all
//     goroutines. The revision is "sha256:" + hex(SHA-256 of the sorted
//     (path NUL content NUL) sequence of the policy modules), so two servers
//     running the same policy files report the same revision.
//   - Every decision has a fresh ID (a random UUID) and the revision that
//     made it, for the audit log.
//   - The policy is sandboxed: http.send, net.* and opa.runtime are removed
//     from the capabilities (using them is a compile error), and builtin
//     errors are fatal (rego.StrictBuiltinErrors) rather than silently
//     undefined.
//   - No PHI in errors or logs: evaluation error details carry only OPA
//     error codes and policy locations, never input values.
package policy
