# custos-policy-signer: the security team's identity for signing policy
# bundles (custos policy bundle --vault-key). It signs with the ecdsa-p256
# Transit key and reads its public keys; nothing else.
path "transit/sign/custos-policy-signing" {
  capabilities = ["update"]
}
path "transit/keys/custos-policy-signing" {
  capabilities = ["read"]
}
