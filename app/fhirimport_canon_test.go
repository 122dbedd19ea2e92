package app

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/secrets/vaulttest"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

// TestImportBulkThenBundlesChangesNothing: the seed's Bulk export and its
// Bundles hold the same resources, serialized differently (the Bulk lines
// write Coding members in struct order, the Bundle path re-marshals
// through maps, and fhirin rewrites urn:uuid references); importing one
// after the other must create no new version (issue 14). Before the fix
// 13 of 228 resources were Updated, each a new version, a notification
// and an audit record for nothing. In a plaintext and an encrypted
// catalog (the stored content is read back decrypted), with data keys of
// the test and, when a Vault binary is available ($CUSTOS_VAULT_BIN, as
// make test sets it), of a real Vault dev server (Transit).
func TestImportBulkThenBundlesChangesNothing(t *testing.T) {
	seed := t.TempDir()
	if _, err := synth.Generate(context.Background(), seed, synth.Options{Patients: 20, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	key := secrets.Key{ID: "1", Bytes: bytes.Repeat([]byte{7}, 32)}
	vault := func(t *testing.T) store.DataKeys {
		srv := vaulttest.Start(t, vaulttest.Options{}) // skips without a binary (fails under CI=true)
		p, err := srv.Provision(context.Background(), vaulttest.ProvisionOptions{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		v, err := secrets.OpenVault(context.Background(), secrets.VaultOptions{Address: srv.Addr, Token: p.Token})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		return v
	}
	for _, c := range []struct {
		name string
		dk   func(t *testing.T) store.DataKeys
	}{
		{"plaintext", func(*testing.T) store.DataKeys { return nil }},
		{"encrypted", func(*testing.T) store.DataKeys { return gcmKeys{kek: make([]byte, 32)} }},
		{"vault", vault},
	} {
		t.Run(c.name, func(t *testing.T) {
			cat := filepath.Join(t.TempDir(), "catalog.db")
			o := FHIRImport{Tenant: "t", IDKey: key, DataKeys: c.dk(t)}
			first, err := ImportFHIR(context.Background(), cat, filepath.Join(seed, "bulk"), o)
			if err != nil || first.Created == 0 {
				t.Fatalf("bulk: %+v %v", first, err)
			}
			rep, err := ImportFHIR(context.Background(), cat, filepath.Join(seed, "bundles"), o)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Created+rep.Updated+rep.Retired+rep.Relabelled != 0 || rep.Unchanged != first.Created {
				t.Errorf("bundles after bulk: %+v, want all %d unchanged", rep, first.Created)
			}
			// And back: the Bulk export after the Bundles changes nothing either.
			rep, err = ImportFHIR(context.Background(), cat, filepath.Join(seed, "bulk"), o)
			if err != nil || rep.Unchanged != first.Created {
				t.Errorf("bulk after bundles: %+v %v, want all %d unchanged", rep, err, first.Created)
			}
		})
	}
}
