// Package secrets supplies the key material custos needs at run time.
//
// Responsibility: one place that hands out keys — the cursor sealing key,
// the audit keyed-hash key, the audit checkpoint signer and the blob data
// keys of envelope encryption — to the packages that use them. Those
// packages declare the small interface they need (server.Keys,
// store.DataKeys); this package provides the implementations:
//
//   - [Vault], the production provider, backed by HashiCorp Vault: the
//     cursor and audit keys are KV version 2 secrets (versioned; the version
//     in force is recorded in every audit record), the checkpoint signer is
//     a non-exportable Transit ed25519 key (Vault signs; verification is
//     local with the public keys), and blob data keys come from Transit
//     datakey/wrapped and are unwrapped by Transit decrypt into a bounded,
//     expiring in-memory cache. [Layout] names the paths; [PolicyHCL] is the
//     least-privilege ACL policy they need (docs/vault.md).
//     [Vault.FHIRClientSigner] is a crypto.Signer over the non-exportable
//     Transit ecdsa-p384 key that signs custos sync's SMART client
//     assertions; it is read on demand, not at startup.
//   - [Dev], ephemeral random keys for the demo and tests.
//
// Invariants:
//   - Fail closed. Keys not refreshed from Vault within the staleness limit
//     are not used: every accessor returns a *StaleError (ErrStale,
//     ErrUnavailable), including for data keys still in the cache. Nothing
//     falls back to older, dev or no keys.
//   - Startup checks everything: OpenVault fails unless every key is
//     present, of the right type and not exportable, and a signature and a
//     data key round trip succeed; errors name the Vault path and the ACL
//     rule that grants it. Every refresh checks the keys again, and the
//     token's capabilities on the Transit paths it does not call itself.
//     Refreshes (the background tick's, and a Sign's that meets a signing
//     version newer than the keys held) run one at a time, so the key
//     state held only moves forward: a slower refresh never stores what it
//     fetched over a newer refresh's state.
//   - custos reaches only the Vault address it checked and verifies its
//     certificate: https, or plain http to a loopback host; the client
//     library's $VAULT_SKIP_VERIFY and $VAULT_AGENT_ADDR are refused; so is
//     an AppRole secret id file every local user can read.
//   - No Vault round trip on the hot path once keys are cached: cursor and
//     audit keys are held in memory and refreshed in the background; data
//     keys are cached up to their TTL, or until a refresh finds the blob
//     KEK's min_decryption_version raised.
//   - Key bytes, tokens and secret ids never appear in an error, a log line,
//     a URI or the audit log. [Key.String] and [Key.LogValue] print only the
//     key id; configuration names secrets by Vault path, never by value; a
//     Vault address carrying credentials, a query or a fragment is refused.
//   - A Dev provider says so: [Dev.Dev] is true, and the server records that
//     flag in every audit record it writes while serving with it.
//   - Keys returned are copies; a caller cannot mutate the provider's state.
package secrets
