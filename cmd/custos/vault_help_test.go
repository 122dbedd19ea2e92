package main

import (
	"strings"
	"testing"

	"github.com/custos-mcp/custos/secrets"
)

// TestVaultHelpNamesEveryKey: the Vault summary in the --help of serve,
// import, restore and the other Vault commands lists every key custos
// reads, so that an operator provisioning Vault from it misses none. It
// left out the resource id key (secret/custos/id-key), without which a FHIR
// import under Vault fails, and the policy signing key.
func TestVaultHelpNamesEveryKey(t *testing.T) {
	l := secrets.DefaultLayout
	for _, p := range []string{
		l.KVMount + "/" + l.CursorKeyPath, l.KVMount + "/" + l.AuditKeyPath, l.KVMount + "/" + l.IDKeyPath,
		l.TransitMount + "/" + l.SigningKey, l.TransitMount + "/" + l.BlobKey,
		l.TransitMount + "/" + l.PolicyKey, l.TransitMount + "/" + l.FHIRClientKey,
	} {
		if !strings.Contains(vaultHelp, p) {
			t.Errorf("the Vault help does not name %s:\n%s", p, vaultHelp)
		}
	}
}
