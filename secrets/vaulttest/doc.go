// Package vaulttest runs a real HashiCorp Vault dev server for tests and
// provisions it the way an operator would for custos (docs/vault.md).
//
// Responsibility: start a `vault server -dev` child process on a free
// loopback port with a random root token (given in its environment, never
// on its command line, which every local user can read), wait until it is
// ready, provision
// the KV v2 secrets, Transit keys, ACL policy and AppRole that
// secrets.DefaultLayout and secrets.PolicyHCL describe, and stop it again.
// Tests use it to check custos against the real Vault, including outages
// (Server.Pause, Server.Resume, Server.Stop) and key rotation
// (Server.RotateKV, Server.RotateTransit), and to test the least-privilege
// claim of secrets.PolicyHCL against Vault's own ACL engine.
//
// This package is test support only: it is never imported by production code
// paths. A dev server keeps everything in memory, listens without TLS and
// hands out a root token.
//
// The Vault binary is built by tools/vault/build.sh (`make test` runs it) and
// named by the environment variable CUSTOS_VAULT_BIN; see [Binary]. When it
// is missing, tests skip, except under CI=true, where they fail: a missing
// dependency must never turn into a silent pass in CI.
//
// Invariants:
//   - Every process started is stopped: [Start] registers a cleanup, and
//     [Server.Stop] resumes a paused server, sends SIGTERM and, after a grace
//     period, SIGKILL. On Linux the child also receives SIGKILL if the test
//     process dies.
//   - The child sees a minimal environment: HOME is a fresh temporary
//     directory and no VAULT_* variable is passed, so no developer token,
//     address or configuration leaks into a test.
//   - Clients made by [Server.Client] and [Server.Root] ignore VAULT_TOKEN,
//     VAULT_ADDR, VAULT_AGENT_ADDR and VAULT_NAMESPACE of the test process.
//   - Log tails quoted in errors have the root token and the unseal key
//     redacted.
package vaulttest
