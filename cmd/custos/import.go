package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/store"
)

// importLockWait is how long an import waits for another import (or a
// writer such as 'custos store reencrypt') to finish.
const importLockWait = 30 * time.Second

func newImportCmd() *cobra.Command {
	var (
		dir    string
		asJSON bool
		vf     vaultFlags
	)
	cmd := &cobra.Command{
		Use:   "import --data-dir D PATH",
		Short: "Load a manifest or a seeded directory into the catalog, all or nothing (encrypted at rest with Vault)",
		Long: `import loads resources into D/catalog.db. PATH is a manifest (JSON lines:
metadata plus a file path relative to the manifest) or a directory written by
'custos seed' (its manifest.jsonl is used).

Every line is validated before anything is written, and everything is written
in one transaction: a bad line is reported with its line number and nothing
is imported. Re-importing a URI whose content or metadata changed creates a
new version with a new etag; older versions are kept.

Encryption at rest: when Vault is configured ($VAULT_ADDR or --vault-addr),
every new blob is encrypted with its own data key from Vault Transit
(envelope encryption) and the catalog is marked encrypted; without Vault the
catalog holds plaintext (dev and demo only). The two never mix: importing
into an encrypted catalog without Vault, or with Vault into a plaintext one,
is refused (migrate with 'custos store reencrypt').

Importing while 'custos serve' runs is supported: the import copies
catalog.db, imports into the copy and renames it over catalog.db only when
everything succeeded. The server notices the new file within about a second,
swaps it in (requests in flight finish on the old one) and notifies
subscribed clients of the resources that changed. Concurrent imports wait
for each other.

` + vaultHelp + `

Example:
  custos import --data-dir ./data ./synthetic
  custos import --data-dir ./data ./updates/manifest.jsonl`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("import takes exactly one PATH (a manifest file or a seeded directory), got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if _, err := os.Stat(args[0]); err != nil {
				return fmt.Errorf("import: %w", err)
			}
			// A failed first import leaves no trace: remember what existed.
			_, derr := os.Stat(string(d))
			newDir := errors.Is(derr, os.ErrNotExist)
			_, cerr := os.Stat(d.catalog())
			newCatalog := errors.Is(cerr, os.ErrNotExist)
			if err := os.MkdirAll(string(d), 0o700); err != nil {
				return err
			}
			cleanup := func() {
				if newCatalog {
					os.Remove(d.catalog() + ".import.lock")
				}
				if newDir {
					os.Remove(string(d))
				}
			}
			var dataKeys store.DataKeys
			if vf.configured() {
				kv, err := vf.open(cmd.Context(), quietLogger(cmd))
				if err != nil {
					cleanup()
					return err
				}
				defer kv.Close()
				dataKeys = kv
			}
			tick, done := progress(cmd.ErrOrStderr(), "validating and importing", false)
			rep, err := store.ImportStaged(cmd.Context(), d.catalog(), args[0], store.Options{DataKeys: dataKeys, Timeout: importLockWait}, tick)
			done()
			if err != nil {
				cleanup()
				if errors.Is(err, store.ErrLocked) {
					return fmt.Errorf("%w: another import, or a writer such as 'custos store reencrypt', held the catalog for %s (nothing was imported)", err, importLockWait)
				}
				return fmt.Errorf("%w (nothing was imported)", catalogHint(err, d))
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %d lines: %d created, %d updated, %d unchanged (%d bytes)\n",
				rep.Lines, rep.Created, rep.Updated, rep.Unchanged, rep.Bytes)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "data directory (created if missing)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the import report as JSON")
	vf.register(cmd.Flags())
	return cmd
}
