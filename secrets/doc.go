// Package secrets supplies the key material custos needs at run time.
//
// Responsibility: one place that hands out keys (today the cursor sealing
// key; later the audit keyed-hash key and the checkpoint signer) to the
// packages that use them. Those packages declare the small interface they
// need; this package provides the implementations.
//
// This release ships only the development provider, [Dev]: ephemeral random
// keys held in memory for the life of the process. It exists for the demo
// and for tests. A production provider backed by HashiCorp Vault arrives in
// its own change; until then `custos serve` refuses to start without --dev.
//
// Invariants:
//   - Key bytes never appear in an error, a log line, a URI or the audit log.
//     [Key.String] and [Key.LogValue] print only the key id.
//   - A Dev provider says so: [Dev.Dev] is true, and the server records that
//     flag in every audit record it writes while serving with it.
//   - Keys returned are copies; a caller cannot mutate the provider's state.
package secrets
