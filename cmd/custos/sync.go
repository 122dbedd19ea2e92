package main

import (
	"crypto"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/app/admin"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server/ops"
	"github.com/custos-mcp/custos/store"
)

// newSyncImporter returns the importer custos sync hands its staging
// manifest to (a Bulk export layout, see fhirsync.Importer): app.ImportFHIR
// into D/catalog.db for tenant, labelled with source (fhirsync.SourceLabel
// of the FHIR base), so that a full sync retires only what came from that
// server, under the resource id key.
func newSyncImporter(d dataDir, tenant, source string, idKey secrets.Key, keys store.DataKeys) fhirsync.Importer {
	return app.FHIRImporter(d.catalog(), app.FHIRImport{
		Tenant: tenant, IDKey: idKey, Source: source, DataKeys: keys, Timeout: importLockWait,
	})
}

func newSyncCmd() *cobra.Command {
	var (
		dir, base, tenant, clientID string
		group, scope                string
		dev, asJSON, full, noBulk   bool
		printJWKS                   bool
		types                       []string
		lowWatermark                int64
		vf                          vaultFlags
	)
	cmd := &cobra.Command{
		Use:   "sync --fhir-base URL --data-dir D --tenant T [--client-id ID] [--dev] [--json]",
		Short: "Pull resources from a live FHIR R4 server (Bulk $export or REST search) and import them",
		Long: `sync fetches resources from the FHIR R4 server at --fhir-base and imports them
into D/catalog.db for --tenant, all or nothing, under the source label
fhir-sync:<id of the base> (a full sync retires only what came from it).

How it fetches:
  It reads the server's CapabilityStatement ([base]/metadata). If the server
  offers Bulk Data $export (Group level with --group, else system level,
  else Patient level), sync kicks an export off, polls it (honouring
  Retry-After, showing X-Progress) and downloads every output and deleted
  file. Otherwise it pages a REST search per resource type (_count,
  following the Bundle's next links). Every file is streamed to a staging
  directory in D, checked (JSON, content types, complete NDJSON lines, types
  matching their files), and only then imported. Binaries that staged
  attachments (DocumentReference, DiagnosticReport, Media) name by url on
  this server and that the export lacks (Bulk exports leave Binary out) are
  fetched one by one first (GET [base]/Binary/<id>; the token's scope must
  cover Binary, see --scope). An incremental sync that finds no change
  imports nothing; a full sync that finds no resource at all is refused
  rather than retiring everything.

Increments:
  The first sync is full: resources of this server missing from it are
  retired. Later runs fetch only what changed (Bulk _since, or REST
  _lastUpdated=ge), from the point the last successful sync saved in
  D/sync-*.json. A failed sync changes nothing and saves nothing, so the next
  run fetches the same changes again. "N deleted" counts the deletions that
  retired a resource custos held; deletions the server lists of resources
  it never held (another type, or created and deleted between two syncs)
  change nothing and are named apart ("M deletions ... ignored"). --full forces a full sync (REST
  searches cannot see deletions; a periodic full sync retires them). A sync
  restricted by --type retires nothing, and a later sync asking for a type
  the last one did not fetch is full. A type the server lists only since
  the last REST sync is searched in full.

Disk space:
  The staging directory is in D, on the audit log's volume. As it stages,
  sync checks the volume's free space (every 16 MiB) and stops, importing
  nothing, when it falls below --audit-disk-low-watermark (serve's
  audit.disk_low_watermark when serve runs the sync), or when importing as
  much again as it staged would: a large sync does not take the room the
  audit records need.

Authorization (SMART Backend Services):
  With --client-id, sync signs a client assertion (private_key_jwt, ES384)
  and exchanges it at the token endpoint of the server's
  .well-known/smart-configuration for an access token (cached until it
  expires; a 401 re-authenticates once). The key is the Vault Transit key
  transit/custos-fhir-client (ecdsa-p384, never leaves Vault); with --dev, a
  local key in D/` + app.SyncKeyFile + ` (demos and tests only). Register the
  client's public key with the FHIR server: --print-jwks prints it.

Failures:
  429 and 5xx answers, dropped connections and downloads that break off are
  retried with exponential backoff and jitter, honouring Retry-After, then
  fail with the request's path. An unusable
  answer (bad JSON, wrong content type, truncated NDJSON) fails at once,
  naming the URL path. Errors never contain a token or a payload.

Audit:
  Every sync is two records in D/audit.db: sync/start before the first
  request, sync/end with the counts or the error. When 'custos serve' runs
  on D it holds the audit log: sync then asks it, through its admin socket
  D/admin.sock, to run the sync now with the server's own settings and key
  (serve --sync-fhir-base must name the same server), recorded in its log
  as run by your account.

` + vaultHelp + `

Examples:
  custos sync --dev --data-dir ./data --fhir-base http://127.0.0.1:8103/fhir --client-id custos --print-jwks
  custos sync --dev --data-dir ./data --tenant demo --fhir-base http://127.0.0.1:8103/fhir --client-id custos
  custos sync --data-dir /var/lib/custos --tenant general-hospital --fhir-base https://ehr.example.org/fhir/R4 --client-id custos --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if base == "" {
				return usagef("--fhir-base is required")
			}
			if lowWatermark < 1 {
				// Checked before anything in D is opened or created.
				return usagef("--audit-disk-low-watermark must be 1 or more, got %d", lowWatermark)
			}
			if _, err := fhirsync.ParseBase(base); err != nil {
				return usageError{err}
			}
			if dev && explicitVaultFlag(cmd.Flags()) != "" {
				return usagef("--dev uses a local client key; it does not combine with --%s", explicitVaultFlag(cmd.Flags()))
			}
			if tenant == "" && !printJWKS {
				return usagef("--tenant is required: the tenant the synced resources belong to, e.g. --tenant general-hospital")
			}
			if err := checkTenant(tenant); err != nil {
				return err
			}
			if (clientID != "" || printJWKS) && !dev && !vf.configured() {
				return usagef("a client key is needed: configure Vault (--vault-addr or $VAULT_ADDR, key transit/%s) or use --dev", secrets.DefaultLayout.FHIRClientKey)
			}
			if !dev && vf.configured() {
				// Vault usage (credentials, AppRole flags) is checked
				// before D is created; open checks it again.
				if _, err := vf.options(nil); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			if err := os.MkdirAll(string(d), 0o700); err != nil {
				return err
			}
			var dataKeys store.DataKeys
			var kv *secrets.Vault
			var key crypto.Signer
			var kid, auditKey string
			switch {
			case dev && (clientID != "" || printJWKS):
				// Only a sync that authenticates uses the key: without
				// --client-id one was created (a private key file left in
				// D for nothing).
				if key, kid, err = fhirsync.DevKey(filepath.Join(string(d), app.SyncKeyFile)); err != nil {
					return err
				}
				auditKey = "fhir-client=" + kid
			case dev:
			case vf.configured():
				if kv, err = vf.open(ctx, quietLogger(cmd)); err != nil {
					return err
				}
				defer kv.Close()
				dataKeys = kv
				if clientID != "" || printJWKS {
					s, err := kv.FHIRClientSigner(ctx)
					if err != nil {
						return fmt.Errorf("vault: %w", err)
					}
					key, kid, auditKey = s, s.KeyID(), s.AuditKeyID()
				}
			}
			if printJWKS {
				b, err := fhirsync.PublicJWKS(key, kid)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return err
			}
			if clientID == "" {
				key = nil
			}
			idKey, err := resourceIDKey(ctx, d, kv)
			if err != nil {
				return err
			}
			return runSync(cmd, d, fhirsync.Options{
				Base: base, Tenant: tenant, StateDir: string(d), ClientID: clientID, Key: key, KeyID: kid, Scope: scope,
				Importer: newSyncImporter(d, tenant, fhirsync.SourceLabel(base), idKey, dataKeys), Full: full, NoBulk: noBulk, Types: types, Group: group,
				Logger: quietLogger(cmd), Progress: syncProgress(cmd.ErrOrStderr()),
			}, dev, auditKey, asJSON, lowWatermark)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory (created if missing)")
	f.StringVar(&base, "fhir-base", "", "FHIR R4 base URL, http(s)://HOST[:PORT]/PATH (no credentials)")
	f.StringVar(&tenant, "tenant", "", "tenant the synced resources belong to (required)")
	f.StringVar(&clientID, "client-id", "", "SMART Backend Services client id (none: the server needs no authorization)")
	f.StringVar(&scope, "scope", "", "the scope to ask the token endpoint for, with --client-id (default: system/*.read, or system/*.rs where the server's SMART configuration lists only SMART v2 scopes)")
	f.BoolVar(&dev, "dev", false, "sign client assertions with a local key in D/"+app.SyncKeyFile+" instead of Vault (demos and tests only)")
	f.BoolVar(&asJSON, "json", false, "print the sync report as JSON")
	f.BoolVar(&full, "full", false, "fetch everything and retire what the server no longer has, even if a previous sync saved a state")
	f.BoolVar(&noBulk, "no-bulk", false, "page REST searches even if the server offers $export")
	f.StringVar(&group, "group", "", "export this Group (Group/ID/$export) when the server offers Group-level export")
	f.StringSliceVar(&types, "type", nil, "only these resource types (repeatable; default: all the server offers); a sync restricted by --type retires nothing")
	f.Int64Var(&lowWatermark, "audit-disk-low-watermark", int64(ops.DefaultDiskWatermark), "stop staging (nothing imported) when the data directory's volume has fewer free bytes than this")
	f.BoolVar(&printJWKS, "print-jwks", false, "print the client's public key as a JWKS (to register with the FHIR server) and exit")
	vf.register(f)
	markRequired(cmd, "fhir-base", "data-dir")
	return cmd
}

// runSync opens the audit log (refusing while a server holds it), runs one
// sync and reports it.
func runSync(cmd *cobra.Command, d dataDir, o fhirsync.Options, dev bool, auditKey string, asJSON bool, lowWatermark int64) error {
	ctx := cmd.Context()
	if c, err := admin.Dial(ctx, admin.Path(string(d))); err == nil {
		// A server holds the audit log: it runs the sync, with its own
		// settings and key, recorded in its log as run by this account.
		defer c.Close()
		b, _ := fhirsync.ParseBase(o.Base)
		fmt.Fprintf(cmd.ErrOrStderr(), "sync: a server runs on %s; it runs the sync (its own client and key)\n", d)
		var res fhirsync.Result
		if err := c.Sync(ctx, app.SyncRequest{Base: b.String(), Full: o.Full}, &res); err != nil {
			var ae *access.Error
			if errors.As(err, &ae) && ae.Code == "not_found" {
				return fmt.Errorf("a custos server runs on %s and holds its audit log, but syncs from no FHIR server: configure serve --sync-fhir-base, or stop it to sync from the command line", d)
			}
			return fmt.Errorf("sync %s (by the server): %w", b, err)
		}
		return reportSync(cmd, res, asJSON)
	} else if !errors.Is(err, admin.ErrNoSocket) && !errors.Is(err, admin.ErrNoAnswer) {
		return err
	}
	log, err := audit.Open(d.audit(), audit.Options{Node: cliNode(), Logger: quietLogger(cmd)})
	if err != nil {
		return lockHint(err)
	}
	defer log.Close()
	rec := fhirsync.AuditRecorder{Log: log, Dev: dev,
		Principal: audit.Principal{Sub: "uid:" + strconv.Itoa(os.Getuid()), Roles: []string{"sync"}, ClientID: o.ClientID}}
	if auditKey != "" && o.ClientID != "" {
		rec.Keys = []string{auditKey}
	}
	o.Recorder = rec
	disk, err := ops.NewDiskWatch(ops.DiskOptions{Dir: string(d), Watermark: uint64(lowWatermark), Reserve: uint64(lowWatermark)})
	if err != nil {
		return fmt.Errorf("the data directory's volume: %w", err)
	}
	o.Space = disk.Room
	s, err := fhirsync.New(o)
	if err != nil {
		return usageError{err}
	}
	res, err := s.Run(ctx)
	if err != nil {
		return fmt.Errorf("sync %s: %w (nothing was imported; the next sync starts from the same point)", s.Base(), err)
	}
	return reportSync(cmd, res, asJSON)
}

// reportSync prints a sync's result on stdout.
func reportSync(cmd *cobra.Command, res fhirsync.Result, asJSON bool) error {
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), res)
	}
	kind := "incremental"
	switch {
	case res.Full:
		kind = "full"
	case len(res.New) > 0:
		kind = "incremental, in full for types the last sync did not search (" + strings.Join(res.New, ", ") + ")"
	}
	fetched := ""
	if res.Binaries > 0 {
		// Binaries the export lacked, fetched by their attachment urls
		// (counted among the resources too).
		fetched = fmt.Sprintf(", %d Binaries fetched by url", res.Binaries)
	}
	deleted := fmt.Sprintf("%d deleted", res.Deleted)
	if res.DeletesIgnored > 0 {
		// Deletions the server listed of resources custos never held (or
		// had retired already): they changed nothing.
		deleted += fmt.Sprintf("; %d deletions of resources not in the catalog ignored", res.DeletesIgnored)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "synced %d resources (%s) from %s in %s: %s, %s, %d requests%s%s\n",
		res.Resources, deleted, res.Base, res.Duration.Round(time.Millisecond), res.Mode, kind, res.Requests, fetched, skippedText(res.Skipped.Skipped, res.Skipped.Includes))
	return nil
}

// syncProgress prints one line per phase change on w (stderr).
func syncProgress(w io.Writer) func(fhirsync.Progress) {
	last := ""
	lastAt := time.Time{}
	return func(p fhirsync.Progress) {
		key := p.Phase + " " + p.Detail
		if key == last && time.Since(lastAt) < 2*time.Second {
			return
		}
		last, lastAt = key, time.Now()
		line := "sync: " + p.Phase
		if p.Detail != "" {
			line += " " + p.Detail
		}
		if p.Resources > 0 {
			line += fmt.Sprintf(" (%d resources)", p.Resources)
		}
		fmt.Fprintln(w, line)
	}
}
