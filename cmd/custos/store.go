package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/store"
)

func newStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Maintain the catalog (encryption at rest, labels)",
		Long: `store maintains the catalog, D/catalog.db. Stop 'custos serve' before
reencrypt: it holds the file. relabel works beside a running server.

Examples:
  custos store reencrypt --data-dir ./data
  custos store relabel --data-dir ./data`,
	}
	return commandGroup(cmd, newStoreReencryptCmd(), newStoreRelabelCmd())
}

func newStoreRelabelCmd() *cobra.Command {
	var (
		dir    string
		asJSON bool
		dryRun bool
		vf     vaultFlags
	)
	cmd := &cobra.Command{
		Use:   "relabel --data-dir D [--dry-run]",
		Short: "Derive every stored FHIR resource's labels anew with this custos's label rules",
		Long: `relabel brings the labels of D/catalog.db up to this custos's label rules.

When: 'custos serve' refuses a catalog labelled with older rules (say one
imported before a patient's home Location was labelled residence, which an
older catalog serves as reference data). relabel reads every stored FHIR
resource's body, adds the labels the current rules derive from it (and to
its lifted attachments and Binary components, as an import does) and
records the rules' version. It never removes a label and needs no FHIR
input; a full import of every source does the same.

All or nothing: the catalog is copied, relabelled in the copy and renamed
over D/catalog.db only if everything succeeded (a server swaps it in and
notifies subscribers, as after an import). A catalog whose stored bodies are
missing or undecodable is refused, naming how many, and left unchanged.
--dry-run reports what would change and changes nothing. Progress goes to
stderr on a terminal; --json prints counts by label, never content.

An encrypted catalog needs the Vault settings serve uses, to read bodies.

` + vaultHelp + `

Examples:
  custos store relabel --data-dir ./data --dry-run
  custos store relabel --data-dir ./data --json
  VAULT_ADDR=https://vault.internal:8200 custos store relabel --data-dir /srv/custos   # encrypted: serve's Vault settings`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := existingCatalog(dir)
			if err != nil {
				return err
			}
			var dataKeys store.DataKeys
			if vf.configured() {
				kv, err := vf.open(cmd.Context(), quietLogger(cmd))
				if err != nil {
					return err
				}
				defer kv.Close()
				dataKeys = kv
			}
			// A dry run, or a failed relabel, leaves no import lock file
			// it created (as a failed first import leaves none).
			_, lerr := os.Stat(d.catalog() + ".import.lock")
			newLock := errors.Is(lerr, os.ErrNotExist)
			tick, done := progress(progressTo(cmd, asJSON), "relabelling", true)
			rep, err := app.RelabelCatalog(cmd.Context(), d.catalog(), app.Relabel{
				DataKeys: dataKeys, DryRun: dryRun, Timeout: importLockWait, Progress: tick, Logger: quietLogger(cmd),
			})
			done()
			if newLock && (dryRun || err != nil) {
				store.RemoveImportLock(d.catalog())
			}
			switch {
			case errors.Is(err, store.ErrEncrypted):
				return fmt.Errorf("%w: set --vault-addr or $VAULT_ADDR (see --help)", err)
			case errors.Is(err, store.ErrLocked):
				return fmt.Errorf("%w: an import, or a writer such as 'custos store reencrypt', held the catalog for %s (nothing was relabelled)", err, importLockWait)
			case err != nil:
				return fmt.Errorf("%w (nothing was relabelled)", catalogHint(err, d))
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			verb := "relabelled"
			if dryRun {
				verb = "would relabel (dry run, nothing changed)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d resources, %d bodies read: %s %d%s; label rules version %d\n",
				rep.Resources, rep.Read, verb, rep.Relabelled, labelCounts(rep), rep.Rules)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "data directory holding catalog.db")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would change; change nothing")
	vf.register(cmd.Flags())
	markRequired(cmd, "data-dir")
	return cmd
}

// labelCounts is " (+residence 3, -vip 1)": the labels a relabel added and
// removed, by label, in label order; "" when none.
func labelCounts(rep store.RelabelReport) string {
	var parts []string
	for _, c := range []struct {
		sign string
		m    map[string]int
	}{{"+", rep.Added}, {"-", rep.Removed}} {
		for _, l := range slices.Sorted(maps.Keys(c.m)) {
			parts = append(parts, fmt.Sprintf("%s%s %d", c.sign, l, c.m[l]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
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
			d, err := existingCatalog(dir)
			if err != nil {
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

// existingCatalog is the data directory --data-dir names, which must hold
// a catalog.
func existingCatalog(dir string) (dataDir, error) {
	d, err := requireDataDir(dir)
	if err != nil {
		return d, err
	}
	return d, existingFile(d.catalog(), "catalog")
}

// catalogHint adds the command that resolves a catalog encryption-mode
// refusal.
func catalogHint(err error, d dataDir) error {
	switch {
	case errors.Is(err, store.ErrPlaintext):
		return fmt.Errorf("%w; encrypt it at rest first: 'custos store reencrypt --data-dir %s' with the same Vault settings", err, d)
	case errors.Is(err, store.ErrEncrypted):
		return fmt.Errorf("%w; it cannot be served with --dev keys: configure Vault (docs/vault.md)", err)
	case errors.Is(err, store.ErrOldLabelRules):
		return fmt.Errorf("%w; bring its labels up to date: 'custos store relabel --data-dir %s' (with the same Vault settings)", err, d)
	}
	return err
}
