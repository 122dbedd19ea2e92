// Package e2e drives the real custos binary end to end: it builds
// ./cmd/custos, seeds and imports a synthetic data set with the CLI, serves
// it over stdio and Streamable HTTP, and talks to it with real MCP clients —
// the go-sdk client and the official TypeScript SDK client (e2e/tsclient,
// installed by `make deps`; a test that needs it fails without it under
// CI=true and is skipped otherwise). After each session
// it checks that the audit log holds exactly the expected records, and that
// `custos audit verify` catches and names a one-byte change to a stored
// record. TestMCPConformance runs the official MCP conformance suite
// (e2e/conformance) against a served data set. The disk-full tests
// (diskfull_test.go) put a directory on a small tmpfs that they fill up
// (internal/tmpfstest: root only; without it they fail under CI=true and
// are skipped otherwise).
//
// Fixtures (fixture_test.go): every test's data set comes from newDataset,
// whose audit log is verified (hash chain, Merkle tree, canonical encoding;
// audit/audittest) when the test ends, after every server the test started
// with serve has been stopped. TestTamperedRecordIsNamed shows that check
// failing on a tampered log.
//
// Invariant under test: every list, templates list and read produced exactly
// one durable audit record, denials and errors included, and nothing was
// released that the policy did not allow.
package e2e
