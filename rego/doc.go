// Package rego embeds custos's default authorization policy, written in Rego v1.
//
// The policy lives in [FS] under custos/:
//
//   - custos/authz.rego: package custos.authz. The server evaluates the query
//     data.custos.authz.decision, which yields
//     {"allow": bool, "reasons": [string], "obligations": [{"op", "path", "fn"?}]}.
//   - custos/authz_test.rego: Rego unit tests (package custos.authz_test) for
//     every rule of the default policy; run by go test ./policy/
//     (TestRegoUnitTests).
//
// Invariants of the default policy:
//
//   - Deny by default: a request is allowed only when a role grant matches its
//     purpose of use, resource type, tenant and care relationship, and no
//     deny rule (sensitivity, consent, auditor, tenant) fires.
//   - "list" and "read" go through one function (resource_decisions) that
//     never looks at the action, so a listing never reveals what a read would
//     deny. It decides a list page in one evaluation (rule decisions, one
//     decision per input.items entry) and a single resource as a page of one
//     (rule decision); test_batch_equals_single_decisions checks the two
//     entry points agree item by item.
//   - The resource's fields are read by name (object.get with a constant
//     key), never input.resource as a whole, and the URI not at all, so
//     the engine caches a decision for every resource that differs only in
//     its URI (policy/uriread.go; TestDefaultPolicyKeysWithoutTheURI).
//   - class_denies is a fast path of resource_denies: a resource of the
//     principal's tenant, of a known type, without sensitivity labels or
//     consent flags can be denied by the principal's own denies only, so
//     it answers principal_denies without building the deny sets.
//     test_class_denies_agrees_with_resource_denies checks the two agree on
//     every combination of principal, tenant, type, labels and consent
//     flags it enumerates.
//   - Every request is decided without an evaluation error, and a deny
//     lists every reason that applies: no function gives two different
//     values for one argument (OPA fails the whole evaluation on such a
//     conflict, and with it every item of a list page). Reasons that can
//     hold together come from separate functions (label_deny and
//     label_role_deny: very-restricted outside treatment and without its
//     role). policy.TestDecideBatchMatchesDecide and
//     TestNothingVisibleMeansEveryDecisionDenies decide their grid (every
//     label the policy knows, very-restricted included) single and as list
//     pages and fail on any error; test_class_denies_agrees_with_resource_denies
//     evaluates very-restricted outside treatment.
//   - Per-role, per-type obligation sets are plain data (billing_obligations,
//     research_obligations) in the vocabulary of package minimize.
//   - Research (HRESCH) is HIPAA Safe Harbor: every FHIR type a researcher
//     may read carries one obligation, deidentify:safeharbor, which package
//     minimize applies by walking every element by its FHIR R4 data type;
//     a type without research obligations is denied. Notes, PDFs and images
//     are denied for research. safeharbor_test.go proves it on a generated
//     synthetic data set and on the realistic corpus testdata/fhir-corpus
//     by scanning every de-identified output for the 18 identifier classes;
//     r4examples_test.go on HL7's own R4 examples (every persona's view)
//     by the Safe Harbor properties (viewcheck_test.go: a checker written
//     apart from package minimize, walking a view by the R4 types), and
//     igexamples_test.go on the published examples of five implementation
//     guides (IPS, AU Base, mCODE, Genomics Reporting, SDC;
//     e2e/igexamples) by the same checks.
//
// This package only holds the policy text; package policy compiles and
// evaluates it. A hospital can replace it with its own directory of .rego
// files (custos serve --policy-dir DIR); see docs/policy.md.
package rego

import "embed"

// FS holds the default policy modules and their tests, rooted so that paths
// are "custos/authz.rego" and "custos/authz_test.rego".
//
//go:embed custos/*.rego
var FS embed.FS
