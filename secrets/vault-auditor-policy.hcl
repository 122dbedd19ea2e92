# custos-auditor: what an auditor or privacy officer needs for the audit
# tools (custos audit hash, audit report --patient, audit pubkey): the audit
# keyed-hash key, to compute a patient's lookup value, and the checkpoint
# signing key's public keys. No payload keys, no signing, no decryption.
path "secret/data/custos/audit-hmac-key" {
  capabilities = ["read"]
}
path "transit/keys/custos-audit-signing" {
  capabilities = ["read"]
}
