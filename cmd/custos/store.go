package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/store"
)

func newStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Maintain the catalog (encryption at rest)",
		Long: `store maintains the catalog, D/catalog.db. Stop 'custos serve' first: it
holds the file.

Example:
  custos store reencrypt --data-dir ./data`,
	}
	return commandGroup(cmd, newStoreReencryptCmd())
}

func newStoreReencryptCmd() *cobra.Command {
	var (
		dir    string
		asJSON bool
		vf     vaultFlags
	)
	cmd := &cobra.Command{
		Use:   "reencrypt --data-dir D",
		Short: "Encrypt a plaintext catalog at rest, or rewrap its data keys after a key rotation",
		Long: `reencrypt brings every blob of D/catalog.db under envelope encryption with
the newest version of Vault's key-encryption key:

  - a plaintext catalog (imported without Vault) is converted: each blob is
    sealed with its own AES-256-GCM data key from Vault Transit, and the
    catalog is marked encrypted (custos serve refuses plaintext catalogs);
  - in an encrypted catalog every wrapped data key is rewrapped under the
    newest Transit key version (after 'vault write -f transit/keys/KEY/rotate');
    the data keys never leave Vault and the ciphertexts are unchanged.

Every blob is verified before and after. All or nothing: new values are
computed first and committed in one transaction; on any failure nothing is
written. The file is then compacted (copied into a fresh file that replaces
it) so that no freed page keeps old plaintext or old wrapped keys.

Stop 'custos serve' first: it holds the catalog open.

` + vaultHelp + `

Example:
  VAULT_ADDR=https://vault.internal:8200 custos store reencrypt --data-dir /srv/custos \
    --vault-role-id-file /etc/custos/vault/role-id --vault-secret-id-file /etc/custos/vault/secret-id`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if err := existingFile(d.catalog(), "catalog"); err != nil {
				return err
			}
			if !vf.configured() {
				return usagef("reencrypt needs Vault: set --vault-addr or $VAULT_ADDR (see --help)")
			}
			kv, err := vf.open(cmd.Context(), quietLogger(cmd))
			if err != nil {
				return err
			}
			defer kv.Close()
			st, err := store.Open(d.catalog(), store.Options{DataKeys: kv, Migrate: true})
			if err != nil {
				return catalogHint(lockHint(err), d)
			}
			tick, done := progress(progressTo(cmd, asJSON), "re-encrypting", true)
			stats, err := st.Reencrypt(cmd.Context(), tick)
			done()
			if cerr := st.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), stats)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d blobs: %d encrypted, %d rewrapped, %d unchanged; keys %s\n",
				stats.Blobs, stats.Converted, stats.Rewrapped, stats.Unchanged, kv.KEK())
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "data directory holding catalog.db")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	vf.register(cmd.Flags())
	markRequired(cmd, "data-dir")
	return cmd
}

// catalogHint adds the command that resolves a catalog encryption-mode
// refusal.
func catalogHint(err error, d dataDir) error {
	switch {
	case errors.Is(err, store.ErrPlaintext):
		return fmt.Errorf("%w; encrypt it at rest first: 'custos store reencrypt --data-dir %s' with the same Vault settings", err, d)
	case errors.Is(err, store.ErrEncrypted):
		return fmt.Errorf("%w; it cannot be served with --dev keys: configure Vault (docs/vault.md)", err)
	}
	return err
}
