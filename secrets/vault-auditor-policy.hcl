# custos-auditor: what an auditor or privacy officer needs for the audit
# tools (custos audit hash, audit report --patient, audit pubkey): the audit
# keyed-hash key, to compute a patient's lookup value, and the checkpoint
# signing key's public keys. No payload keys, no signing, no decryption.
#
# Every version of the audit key: its metadata lists the versions ever
# written (a patient's records are keyed under the version in force when
# each was written), and each is read with ?version=N under the data path.
path "secret/data/custos/audit-hmac-key" {
  capabilities = ["read"]
}
path "secret/metadata/custos/audit-hmac-key" {
  capabilities = ["read"]
}
path "transit/keys/custos-audit-signing" {
  capabilities = ["read"]
}
