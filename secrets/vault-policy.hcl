# custos-server: the least-privilege Vault ACL policy for a custos server node.
#
# It grants exactly what custos reads and calls at startup and while serving,
# for the default key layout (secrets.DefaultLayout; see docs/vault.md). It
# cannot write or delete secrets, rotate or export keys, or read any other
# path. Token renewal and lookup come from Vault's built-in "default" policy.

# KV v2 (mount "secret"): the cursor sealing key, the audit keyed-hash key and
# the resource id key (opaque ids of imported FHIR resources; never rotated).
# Reading a specific older version (?version=N) needs the same capability.
path "secret/data/custos/cursor-key" {
  capabilities = ["read"]
}
path "secret/data/custos/audit-hmac-key" {
  capabilities = ["read"]
}
path "secret/data/custos/id-key" {
  capabilities = ["read"]
}

# Transit (mount "transit"): the non-exportable ed25519 key that signs audit
# checkpoints. custos reads its public keys and asks Vault to sign; it
# verifies signatures itself with the public keys, so it needs no verify.
path "transit/keys/custos-audit-signing" {
  capabilities = ["read"]
}
path "transit/sign/custos-audit-signing" {
  capabilities = ["update"]
}

# Transit: the key-encryption key of blob envelope encryption. custos asks for
# a fresh wrapped data key per blob, unwraps stored data keys, and rewraps them
# to the newest key version after a rotation (custos store reencrypt).
path "transit/keys/custos-blob-kek" {
  capabilities = ["read"]
}
path "transit/datakey/wrapped/custos-blob-kek" {
  capabilities = ["update"]
}
path "transit/decrypt/custos-blob-kek" {
  capabilities = ["update"]
}
path "transit/rewrap/custos-blob-kek" {
  capabilities = ["update"]
}

# Transit: the public keys of the policy-bundle signing key (ecdsa-p256), to
# verify bundles (serve --policy-key-vault). Signing is the security team's
# (policy custos-policy-signer), never the server's.
path "transit/keys/custos-policy-signing" {
  capabilities = ["read"]
}

# Transit: the non-exportable ecdsa-p384 key that signs custos sync's SMART
# Backend Services client assertions (ES384) to a FHIR server's token
# endpoint. custos reads its public key (to print the JWKS the FHIR server
# registers) and asks Vault to sign; only needed where custos sync runs.
path "transit/keys/custos-fhir-client" {
  capabilities = ["read"]
}
path "transit/sign/custos-fhir-client" {
  capabilities = ["update"]
}
