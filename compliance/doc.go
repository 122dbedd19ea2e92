// Package compliance is custos's machine-readable account of the safeguards
// it implements and of the evidence for each: an OSCAL 1.0.6 component
// definition (component-definition.json, embedded) that maps HIPAA Security
// Rule and Privacy Rule items and NIST SP 800-53 rev5 controls to how custos
// implements them and to the Go tests that prove it.
//
// # Invariants
//
//   - The document is valid against the NIST OSCAL 1.0.6 component-definition
//     JSON schema (checked in make test against ../shared/standards/).
//   - Every control in Required is mapped, and every mapping names at least
//     one evidence test as "<package dir>#<TestName>" (an evidence-test
//     property in the custos namespace).
//   - Every named test exists (CheckTestsExist) and, in a run of the whole
//     suite, passed (CheckEvidence over `go test -json` output): a control
//     whose evidence is missing, failed or skipped is a problem, and the
//     check fails. A mapping can therefore not outlive the test behind it.
//
// The package reads only its embedded document and what a caller hands it;
// it does no I/O of its own beyond CheckTestsExist's reading of test files.
package compliance
