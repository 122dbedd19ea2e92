package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/store"
)

// importLockWait is how long an import waits for another import (or a
// writer such as 'custos store reencrypt') to finish.
const importLockWait = 30 * time.Second

func newImportCmd() *cobra.Command {
	var (
		dir    string
		asJSON bool
		tenant string
		full   bool
		source string
		vf     vaultFlags
	)
	cmd := &cobra.Command{
		Use:   "import --data-dir D [--tenant T] PATH",
		Short: "Load standard FHIR R4 (Bulk export, Bundles, resources) or a custos manifest into the catalog, all or nothing",
		Long: `import loads resources into D/catalog.db. PATH is one of:

  - a FHIR Bulk Data export: a directory of <Type>[.NNN].ndjson[.gz] files
    (its OperationOutcome.ndjson is the export's error file: an error or
    fatal issue there refuses the import, as in a manifest's error files),
    or its $export manifest JSON (output and deleted entries);
  - FHIR Bundles (collection, document, transaction, batch, searchset): a
    file holding one or many, or a directory of them; urn:uuid references
    are resolved;
  - single FHIR R4 resources (a .json file, or a directory of them);
  - a custos manifest (JSON lines: metadata plus a file path relative to the
    manifest), or a directory written by 'custos seed' (its manifest.jsonl).

FHIR input needs --tenant. Any R4 resource type is accepted. A resource in a
Patient compartment belongs to that patient; the rest is tenant-level
reference data. Attachments (DocumentReference, DiagnosticReport, Media,
Binary) become resources of their own, their bytes checked against their
contentType. Sensitivity labels come from meta.security, opt-out from an
active Consent that denies (or whose policyRule is OPTOUT). URIs carry
opaque ids keyed by the resource id key (Vault, or the dev key file in D),
never a source id: re-importing the same resource updates the same URI.
A Bundle entry's conditional update or create (PUT Type?identifier=s|v or
?_id=x, POST with ifNoneExist identifier=s|v, also written with Type?,
Type/?, /Type?, [base]/Type? or a ? alone before the query) updates the one
resource of the tenant and --source it matches in the catalog (under new
urn:uuids too; a conditional create leaves it unchanged, and --full keeps
it), creates one when none matches, and is refused when several do, when the
one it matches is in another patient's compartment or an update's resource
names another id, when none matches and its id is a live resource's of other
content (FHIR 409; the same content again is unchanged), or the query is
another or on another server (an absolute URL); a Bundle's search sees every
NDJSON line and resource file of the import, whatever the files are named
(they are read before any Bundle), and what the Bundles before it (in name
order) wrote or deleted. A PUT or POST to another server's absolute URL is
refused too.
The mapping is in docs/import.md.

Everything is validated while it is staged, and nothing is swapped in
unless all of it is valid: a bad line is reported with its file and line
(and FHIR path) and nothing is imported. Every FHIR resource must be valid
R4 by its structure (no element R4 does not define, each of its JSON kind,
primitives in their formats, required elements present): an error names
the element's path, never its value. A FHIR input file that changes
while the import reads it (it is read more than once) fails the import,
naming the file: nothing is imported; run it again once the file is
complete. Its bytes are compared, so a file only touched (its modification
time moved, by touch, rsync -t or a backup tool) between the reads is the
same input. Re-importing a resource whose
content or metadata changed creates a new version with a new etag; older
versions are kept. A Bulk "deleted" entry retires a resource, and --full
retires every resource of the tenant (and --source) the input does not
mention: it is no longer listed or readable, its versions are kept, and a
running server audits the retirement and notifies subscribers.

Encryption at rest: when Vault is configured ($VAULT_ADDR or --vault-addr),
every new blob is encrypted with its own data key from Vault Transit
(envelope encryption) and the catalog is marked encrypted; without Vault the
catalog holds plaintext (dev and demo only), and every import says so in a
warning on stderr. The two never mix: importing
into an encrypted catalog without Vault, or with Vault into a plaintext one,
is refused (migrate with 'custos store reencrypt').

Importing while 'custos serve' runs is supported: the import copies
catalog.db, imports into the copy and renames it over catalog.db only when
everything succeeded. The server notices the new file within about a second,
swaps it in (requests in flight finish on the old one) and notifies
subscribed clients of the resources that changed. Concurrent imports wait
for each other.

On a terminal, import draws its progress on stderr, not with --json; the
output is the same either way.

` + vaultHelp + `

Examples:
  custos import --data-dir ./data --tenant general-hospital ./export/
  custos import --data-dir ./data --tenant general-hospital ./export/bulk-export.json
  custos import --data-dir ./data --tenant general-hospital ./synthea/fhir/
  custos import --data-dir ./data ./synthetic
  custos import --data-dir ./data ./updates/manifest.jsonl`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("import takes exactly one PATH (FHIR input, a manifest file or a seeded directory), got %d", len(args))
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
			format, err := fhirin.Detect(args[0])
			if err != nil {
				return fmt.Errorf("import: %w", err)
			}
			isFHIR := format != fhirin.FormatCustosManifest
			if isFHIR && tenant == "" {
				return usagef("import: %s is FHIR input (%s): --tenant is required, e.g. --tenant general-hospital", args[0], format)
			}
			if err := checkTenant(tenant); err != nil {
				return err
			}
			if !isFHIR && (tenant != "" || full || source != "") {
				return usagef("import: --tenant, --full and --source apply to FHIR input; %s is a custos manifest, whose URIs name their tenant", args[0])
			}
			// A failed first import leaves no trace: remember what existed.
			// The dev id key it may draw (resourceIDKey) goes too when the
			// catalog is still missing: no resource is named under it.
			made := missingAncestor(string(d)) // what MkdirAll creates
			newDir := made != ""
			_, cerr := os.Stat(d.catalog())
			newCatalog := errors.Is(cerr, os.ErrNotExist)
			devKeys := filepath.Join(string(d), secrets.DevKeyFile)
			_, kerr := os.Stat(devKeys)
			newKeys := errors.Is(kerr, os.ErrNotExist)
			if err := os.MkdirAll(string(d), 0o700); err != nil {
				return err
			}
			cleanup := func() {
				if !newCatalog {
					return
				}
				store.RemoveImportLock(d.catalog()) // not while another import holds it
				if _, err := os.Stat(d.catalog()); newKeys && errors.Is(err, os.ErrNotExist) {
					os.Remove(devKeys)
				}
				if newDir {
					removeUpTo(string(d), made)
				}
			}
			var (
				dataKeys store.DataKeys
				kv       *secrets.Vault
			)
			if vf.configured() {
				if kv, err = vf.open(cmd.Context(), quietLogger(cmd)); err != nil {
					cleanup()
					return err
				}
				defer kv.Close()
				dataKeys = kv
			}
			tick, done := progress(progressTo(cmd, asJSON), "validating and importing", !isFHIR)
			var (
				rep     store.ImportReport
				fhirRep app.FHIRReport
			)
			if isFHIR {
				var key secrets.Key
				if key, err = resourceIDKey(cmd.Context(), d, kv); err == nil {
					fhirRep, err = app.ImportFHIR(cmd.Context(), d.catalog(), args[0], app.FHIRImport{
						Tenant: tenant, IDKey: key, Full: full, Source: source, DataKeys: dataKeys,
						Timeout: importLockWait, Progress: tick, Logger: quietLogger(cmd),
					})
					rep = fhirRep.ImportReport
				}
			} else {
				rep, err = store.ImportStaged(cmd.Context(), d.catalog(), args[0], store.Options{DataKeys: dataKeys, Timeout: importLockWait}, tick)
			}
			done()
			if err != nil {
				cleanup()
				if errors.Is(err, store.ErrLocked) {
					return fmt.Errorf("%w: another import, or a writer such as 'custos store reencrypt', held the catalog for %s (nothing was imported)", err, importLockWait)
				}
				return fmt.Errorf("%w (nothing was imported)", catalogHint(err, d))
			}
			if kv == nil {
				// Plaintext at rest is right for the demo and wrong for PHI,
				// and nothing else says which one this was.
				ids := ""
				if isFHIR {
					ids = ", their ids keyed under " + devKeys
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "custos: warning: no Vault configured ($VAULT_ADDR or --vault-addr): %s holds the imported resources in plaintext%s; for synthetic or demo data only (docs/vault.md)\n", d.catalog(), ids)
			}
			if asJSON && isFHIR {
				return writeJSON(cmd.OutOrStdout(), fhirRep)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			if isFHIR {
				repeated := ""
				if rep.Repeated > 0 {
					repeated = fmt.Sprintf(", %d repeated (imported once)", rep.Repeated)
				}
				if rep.Relabelled > 0 {
					repeated += fmt.Sprintf(", %d relabelled (labels changed)", rep.Relabelled)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "imported %d FHIR entries for tenant %s: %d created, %d updated, %d unchanged, %d retired%s (%d bytes)%s\n",
					rep.Lines, tenant, rep.Created, rep.Updated, rep.Unchanged, rep.Retired, repeated, rep.Bytes, skippedText(fhirRep.Skipped, 0))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %d lines: %d created, %d updated, %d unchanged (%d bytes)\n",
				rep.Lines, rep.Created, rep.Updated, rep.Unchanged, rep.Bytes)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "data directory (created if missing)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the import report as JSON")
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant the FHIR input belongs to (required for FHIR input)")
	cmd.Flags().BoolVar(&full, "full", false, "the FHIR input is the tenant's complete data from this source: retire what it does not mention")
	cmd.Flags().StringVar(&source, "source", "", `origin label of the FHIR input (default "fhir"); --full retires only resources of this source`)
	vf.register(cmd.Flags())
	markRequired(cmd, "data-dir")
	return cmd
}

// skippedText is the import or sync summary's account of the entries
// left out on purpose ("; skipped: 12 read requests (GET/HEAD), 3 search
// outcomes"; a sync's included entries, includes, too), "" when it left
// out none.
func skippedText(s fhirin.Skipped, includes int) string {
	var kinds []string
	for _, k := range []struct {
		n         int
		one, many string
	}{{s.Reads, "read request", "read requests"}, {s.Outcomes, "search outcome", "search outcomes"},
		{includes, "included entry (search.mode include)", "included entries (search.mode include)"}} {
		switch {
		case k.n == 1:
			kinds = append(kinds, "1 "+k.one)
		case k.n > 1:
			kinds = append(kinds, strconv.Itoa(k.n)+" "+k.many)
		}
	}
	if s.Reads > 0 {
		kinds[0] += " (GET/HEAD)"
	}
	if len(kinds) == 0 {
		return ""
	}
	return "; skipped: " + strings.Join(kinds, ", ")
}

// resourceIDKey returns the key that names imported FHIR resources: Vault's
// (KV custos/id-key) when kv is open, otherwise the dev key persisted in
// D/dev-keys.json, the one 'custos serve --dev' and 'custos demo' use on D.
func resourceIDKey(ctx context.Context, d dataDir, kv *secrets.Vault) (secrets.Key, error) {
	if kv != nil {
		return kv.IDKey(ctx)
	}
	dev, err := secrets.NewDev()
	if err == nil {
		err = dev.PersistIn(string(d))
	}
	if err != nil {
		return secrets.Key{}, fmt.Errorf("dev resource id key: %w", err)
	}
	return dev.IDKey(ctx)
}

// missingAncestor returns the outermost directory of path (path itself
// included) that does not exist, or "" when path exists: the first
// directory os.MkdirAll(path) would create.
func missingAncestor(path string) string {
	missing := ""
	for p := filepath.Clean(path); ; {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			return missing
		}
		missing = p
		parent := filepath.Dir(p)
		if parent == p {
			return missing
		}
		p = parent
	}
}

// removeUpTo removes the empty directory path and its parents up to and
// including top (what os.MkdirAll made, as missingAncestor found it). A
// directory that is not empty stays, and so do its parents.
func removeUpTo(path, top string) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if os.Remove(p) != nil || p == top || p == filepath.Dir(p) {
			return
		}
	}
}

// checkTenant refuses, as bad usage, a --tenant the catalog's URIs cannot
// name ("" is left to the caller: required or not).
func checkTenant(tenant string) error {
	if tenant != "" && !store.ValidTenant(tenant) {
		return usagef("--tenant %s: want lowercase letters, digits and - (not first), at most 63, e.g. general-hospital", strconv.Quote(tenant))
	}
	return nil
}
