package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit/scrub"
	"github.com/custos-mcp/custos/cmd/custos/internal/config"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/oauth"
	"github.com/custos-mcp/custos/server/ops"
)

// principalEnv names the principal file for --stdio when --principal-file
// is not given.
const principalEnv = "CUSTOS_PRINCIPAL_FILE"

// newServeCmd maps serve's flags and configuration file onto app.Options
// (config.AppOptions), which app validates, and runs the assembly until a
// signal. SIGHUP reloads the policy (and the token file, at once).
func newServeCmd() *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:   "serve [--config FILE] --data-dir D (--stdio | --listen ADDR) [--dev | Vault settings]",
		Short: "Serve the catalog over MCP (stdio or Streamable HTTP)",
		Long: `serve answers MCP resources/list, resources/read and resources/templates/list.
Each request is decided by the policy, durably audited to D/audit.db, and only
then answered, with the payload minimized as the decision demands.

Configuration file:
  --config FILE reads every setting below from one YAML file (see
  docs/config.example.yaml; check it with 'custos config check FILE'). A
  flag given on the command line overrides the file; the file overrides
  the built-in defaults. Secrets are never in the file.

Identity:
  --stdio     one principal for the whole session, from --principal-file or
              $CUSTOS_PRINCIPAL_FILE (JSON: sub, roles, client_id, tenant,
              patients, purpose_of_use). Logs go to stderr; stdout is MCP.
  --listen    Streamable HTTP at https://ADDR/mcp with --tls-cert/--tls-key
              (plain http:// only with --dev, on a loopback address); each
              request carries "Authorization: Bearer TOKEN", mapped to a
              principal by --tokens (see 'custos token new'; reloaded
              within a second of a change (at once on SIGHUP); without --dev
              a warning counts its tokens that never expire: mint them with
              --ttl), or an OAuth 2.1
              access token (JWT) verified against --oauth-issuer's JWKS: audience
              --oauth-audience, scopes resources:list / resources:read, claims
              sub, roles, tenant, patients, azp (or act), purpose_of_use (or the
              X-Purpose-Of-Use header). Protected resource metadata (RFC 9728)
              is served under /.well-known/oauth-protected-resource/mcp (the
              audience's path appended; the bare path answers 404). Every 401
              and 403 is an audit record (auth/reject).

Keys:
  Without --dev every key comes from HashiCorp Vault, and serve refuses to
  start unless Vault is reachable, every key is present and the catalog is
  encrypted at rest under Vault's key-encryption key. Keys are re-read every
  --key-refresh; when they could not be refreshed for --key-max-staleness,
  every request is refused (and audited) until Vault is back. There is no
  fallback to dev keys or plaintext.
  --dev serves with ephemeral in-memory keys for the demo: every audit record
  is marked dev=true, and an encrypted catalog is refused. Never for real PHI.

` + vaultHelp + `

Policy:
  The built-in default policy, or --policy-dir (--dev only) or a signed
  --policy-bundle (signature checked against --policy-key, Rego tests run at
  load). A changed directory or bundle, or SIGHUP, reloads it: the candidate
  is compiled and tested off the request path and swapped in atomically; a
  broken, unsigned or failing candidate is rejected and the last good policy
  keeps serving. Loads and rejections are audit records (policy/load,
  policy/reject); every record names the revision and bundle digest in force.
  /readyz stays ready after a rejection; /metrics shows it (custos_policy_info,
  custos_policy_rejections_total{reason}, custos_policy_last_*_timestamp_seconds).
  Rollback protection: a bundle whose signed sequence claim (custos policy
  bundle --sequence N) does not advance the last one loaded (read from the
  audit log) is rejected; at startup the server refuses to start unless
  --policy-allow-rollback is given (the override is audited). A new audit
  log holds no mark yet: --policy-min-sequence N (policy.min_sequence) is
  the lowest claim accepted from the first start on, and no override
  lowers it.

Audit checkpoints:
  The audit log is a Merkle tree. serve signs a checkpoint (C2SP format,
  origin <deployment>/<node>/audit) every --checkpoint-every records or
  --checkpoint-interval, and at shutdown, with the Vault Transit ed25519 key
  (--dev: the dev key), and appends it to D/checkpoints.jsonl and to
  --anchor-dir/checkpoints.jsonl (separate storage; required without --dev).
  At startup serve refuses to run if audit.db is behind, or disagrees with,
  any anchored checkpoint (rolled back, truncated, forked), or if a record
  after the last anchored checkpoint does not verify (the error names it).

Continuous integrity:
  While serving, a scrubber re-verifies every record of the audit log (hash
  chain, canonical encoding, stored hashes, Merkle tree, anchored
  checkpoints) every --scrub-interval (default 24h; the first pass starts
  with the server), checking at most --scrub-rate records per second. A
  broken record, tree or checkpoint turns /readyz not ready, sets
  custos_audit_integrity_ok to 0, appends an audit/integrity record naming
  the seq, and refuses every read and list until an operator has
  investigated and restarted (docs/operations.md, Continuous integrity).

Examples:
  CUSTOS_PRINCIPAL_FILE=./synthetic/principals/clinician.json \
    custos serve --dev --data-dir ./data --stdio
  VAULT_ADDR=https://vault.internal:8200 custos serve --data-dir ./data \
    --vault-role-id-file /etc/custos/vault/role-id --vault-secret-id-file /etc/custos/vault/secret-id \
    --anchor-dir /mnt/audit-anchor/custos --listen 10.0.0.5:8443 --tokens ./tokens.json \
    --tls-cert /etc/custos/tls/server.crt --tls-key /etc/custos/tls/server.key
  custos config check /etc/custos/custos.yaml && custos serve --config /etc/custos/custos.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, level, format, err := serveOptions(cmd.Flags(), configPath, os.Getenv)
			if err != nil {
				return err
			}
			hopts := &slog.HandlerOptions{Level: level}
			if format == "text" {
				o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), hopts))
			} else {
				o.Logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), hopts))
			}
			o.Version = version
			return runServe(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "read settings from this YAML file (docs/config.example.yaml); flags given here override it")
	registerServeFlags(f)
	return cmd
}

// serveOptions applies the configuration file at path (if any) to the
// serve flags not given on the command line, and maps the effective
// settings onto app.Options, validated as a whole: every problem at once,
// each naming its field (or flag). It also returns the log settings.
func serveOptions(fs *pflag.FlagSet, path string, getenv func(string) string) (app.Options, slog.Level, string, error) {
	var level slog.Level
	var file *config.File
	if path != "" {
		var err error
		if file, err = config.Load(path); err != nil {
			return app.Options{}, level, "", usageError{err}
		}
	}
	eff, err := config.Apply(fs, file)
	if err != nil {
		return app.Options{}, level, "", usageError{err}
	}
	all, err := config.Snapshot(fs, eff)
	if err != nil {
		return app.Options{}, level, "", usageError{err}
	}
	if err := all.Validate(config.Options{Complete: true, CheckFiles: true, Getenv: getenv}); err != nil {
		return app.Options{}, level, "", usageError{err}
	}
	lv, _ := fs.GetString("log-level")
	format, _ := fs.GetString("log-format")
	level.UnmarshalText([]byte(lv)) // validated above
	o := all.AppOptions(getenv)
	// A one-off override: a flag, never a configuration key (see
	// app.PolicyOptions.AllowRollback).
	o.Policy.AllowRollback, _ = fs.GetBool("policy-allow-rollback")
	if o.Policy.AllowRollback && o.Policy.Bundle == "" {
		return app.Options{}, level, "", usagef("--policy-allow-rollback is only used with --policy-bundle")
	}
	return o, level, format, nil
}

// runServe opens the assembly and serves until the context is done (a
// signal) or the assembly stops on an integrity error; SIGHUP reloads the
// policy.
func runServe(ctx context.Context, o app.Options) error {
	a, err := app.Open(ctx, o)
	if err != nil {
		// Options the assembly or the secrets provider refuse are a
		// usage error, as the flags' own.
		if errors.Is(err, app.ErrInvalid) || errors.Is(err, secrets.ErrBadConfig) {
			return usageError{err}
		}
		return catalogHint(lockHint(err), dataDir(o.DataDir))
	}
	defer a.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-sctx.Done():
				return
			case <-hup:
				reloadPolicy(sctx, a, o.Logger)
				// The token file reloads itself when it changes; SIGHUP
				// checks at once (a failure is logged by the reload).
				_ = a.ReloadTokens()
			}
		}
	}()
	err = a.Serve(sctx)
	cancel()
	if cerr := a.Close(); err == nil {
		err = cerr
	}
	return err
}

// reloadPolicy reloads the policy now (SIGHUP).
func reloadPolicy(ctx context.Context, a *app.App, logger *slog.Logger) {
	ev, err := a.ReloadPolicy(ctx)
	switch {
	case errors.Is(err, app.ErrBuiltinPolicy):
		logger.Warn("SIGHUP: the built-in policy has nothing to reload")
	case err != nil:
		logger.Error("SIGHUP: policy reload rejected; the last good policy keeps serving", "err", err)
	default:
		logger.Info("SIGHUP: policy reloaded", "revision", ev.Revision)
	}
}

// registerServeFlags registers every serve flag but --config; their values
// are read back through config.Snapshot.
func registerServeFlags(f *pflag.FlagSet) {
	var vf vaultFlags // shared with import and store
	f.String("data-dir", "", "data directory (catalog.db, audit.db)")
	f.Bool("dev", false, "serve with ephemeral dev keys (demo only; every audit record says dev=true)")
	f.Bool("stdio", false, "serve one client on stdin/stdout")
	f.String("principal-file", "", "principal for --stdio (default $"+principalEnv+")")
	f.String("listen", "", "serve Streamable HTTP on this address (HTTPS with --tls-cert/--tls-key; plain HTTP only with --dev on loopback)")
	f.String("tokens", "", "dev token file for --listen")
	f.Float64("rate-limit", 100, "HTTP requests per second per principal (token bucket; 0 disables); beyond it: 429, audited")
	f.Int("rate-burst", 200, "the bucket size of --rate-limit")
	f.String("tls-cert", "", "serve HTTPS with this PEM certificate (chain); reloaded when the file changes")
	f.String("tls-key", "", "the certificate's PEM private key")
	f.Bool("tls12", false, "also accept TLS 1.2 (default: TLS 1.3 only)")
	f.String("oauth-issuer", "", "OAuth 2.1: the issuer (iss) of access tokens")
	f.String("oauth-jwks", "", "OAuth 2.1: the issuer's JWKS URL")
	f.String("oauth-audience", "", "OAuth 2.1: this server's canonical URL, the required audience (RFC 8707)")
	f.String("oauth-scope-list", oauth.DefaultScopeList, "OAuth 2.1: the scope resources/list, resources/templates/list and completion/complete require")
	f.String("oauth-scope-read", oauth.DefaultScopeRead, "OAuth 2.1: the scope resources/read and subscriptions (resources/subscribe, subscriptions/listen) require")
	f.String("oauth-roles-claim", oauth.DefaultRolesClaim, "OAuth 2.1: the claim holding the caller's roles (array of strings)")
	f.String("oauth-tenant-claim", oauth.DefaultTenantClaim, "OAuth 2.1: the claim holding the caller's tenant")
	f.String("oauth-patients-claim", oauth.DefaultPatientsClaim, "OAuth 2.1: the claim holding the caller's patients (array of strings)")
	f.String("oauth-purpose-claim", oauth.DefaultPurposeClaim, "OAuth 2.1: the claim holding the purpose of use")
	f.String("oauth-client-claim", "", "OAuth 2.1: one more claim naming the client when a token has neither azp nor client_id (Okta: cid; Entra ID v1.0: appid); default none")
	f.String("oauth-purpose-header", oauth.DefaultPurposeHeader, "OAuth 2.1: the request header that may carry the purpose of use")
	f.Duration("oauth-jwks-max-staleness", oauth.DefaultJWKSMaxStaleness, "OAuth 2.1: beyond this long without a successful fetch of the issuer's JWKS, every token is refused (401) until a fetch succeeds")
	f.Duration("http-read-header-timeout", server.DefaultReadHeaderTimeout, "HTTP: time allowed to read a request's headers")
	f.Duration("http-read-timeout", server.DefaultReadTimeout, "HTTP: time allowed to read a whole request")
	f.Duration("http-write-timeout", 0, "HTTP: time allowed to write a response (0: none; a timeout cuts SSE streams)")
	f.Duration("http-idle-timeout", server.DefaultIdleTimeout, "HTTP: close keep-alive connections idle this long")
	f.Duration("http-session-idle-timeout", server.SessionTimeout, "MCP: close a 2025-11-25 session idle this long (automatic logoff)")
	f.Int("http-max-sessions", server.DefaultMaxSessions, "MCP: the 2025-11-25 sessions one principal may hold at once; beyond it: 429, audited")
	f.Duration("http-refusal-window", server.DefaultRefusalWindow, "HTTP: failed authentications are audited in aggregate per source address over this window")
	f.Int("http-refusals-per-source", server.DefaultRefusalsPerSource, "HTTP: failed authentications one source address may make per --http-refusal-window; beyond it: 429")
	f.StringArray("http-trusted-proxy", nil, "HTTP: IP address or CIDR of a trusted proxy (load balancer); only from these peers is the caller's address taken from Forwarded or X-Forwarded-For (repeatable or comma-separated; default none: the TCP peer)")
	f.String("http-trusted-proxy-header", "", "HTTP: the one forwarding header the trusted proxies write, forwarded or x-forwarded-for; the other is then ignored (default: either, and both present must agree)")
	f.Int("http-max-header-bytes", server.DefaultMaxHeaderBytes, "HTTP: the largest request header block")
	f.Int64("http-max-body-bytes", app.MaxRequestBodyLimit, "HTTP: the largest request body (at most 1 MiB, the MCP handler's own limit)")
	f.Int("http-max-connections", server.DefaultMaxConnections, "HTTP: the connections served at once; beyond it a new connection waits, unread, until one closes (above three quarters in use, connections that never carried a valid token are closed first); serve warns at start if the open-file limit is below it + 96")
	f.String("addr-file", "", "write the MCP endpoint URL to this file once started, admin socket included (useful with port 0)")
	f.String("policy-dir", "", "load the Rego policy from this directory (--dev only; watched and reloaded)")
	f.String("policy-bundle", "", "load the policy from this signed OPA bundle (watched and reloaded; needs --policy-key)")
	f.StringArray("policy-key", nil, "ID=PEMFILE: an ES256 public key that may sign the policy bundle (repeatable)")
	f.Bool("policy-key-vault", false, "also accept bundles signed by the Vault Transit key custos-policy-signing (every version)")
	f.Int64("policy-min-sequence", 0, "the lowest signed sequence claim a policy bundle may carry (0: none); a floor for a new audit log, which has no rollback high-water mark yet")
	f.Bool("policy-allow-rollback", false, "start even though the bundle does not advance the rollback high-water mark (an older sequence claim); audited; command line only")
	f.Int("page-size", server.DefaultPageSize, "resources per resources/list page")
	f.String("node", "", "node name recorded in audit records (default: hostname)")
	f.String("log-level", "info", "debug, info, warn or error")
	f.String("log-format", "json", "json or text (the operational log on stderr)")
	f.String("ops-listen", "", "serve /healthz, /readyz and Prometheus /metrics on this separate address (e.g. 127.0.0.1:9090)")
	f.String("ops-addr-file", "", "write the ops base URL to this file once started (useful with port 0)")
	f.String("deployment", app.DefaultDeployment, "deployment name in the checkpoint origin (<deployment>/<node>/audit)")
	f.String("anchor-dir", "", "directory on separate storage receiving every signed checkpoint (required without --dev)")
	f.Int64("checkpoint-every", 1000, "sign a checkpoint after this many new audit records")
	f.Duration("checkpoint-interval", time.Second, "sign a checkpoint at least this often while records arrive")
	f.Duration("btg-max-ttl", btg.DefaultMaxTTL, "break-the-glass: the longest grant 'custos btg grant' may make (at most 24h); longer grants are refused and audited")
	f.StringArray("btg-grant-role", nil, "break-the-glass: an OS group whose members may grant (repeatable; none: any operator who can write grants.db)")
	f.Duration("audit-retention", app.DefaultRetention, "how long audit records must be kept (reported by /readyz and compliance report; custos never deletes one)")
	f.Int64("audit-disk-low-watermark", ops.DefaultDiskWatermark, "bytes free on the audit volume below which /readyz is not ready and custos_audit_volume_low is 1")
	f.Int64("audit-disk-reserve", ops.DefaultDiskReserve, "bytes free on the audit volume below which new requests are refused (disk_low), keeping the rest for the records that must be written")
	f.Duration("scrub-interval", scrub.DefaultInterval, "re-verify the whole audit log this often while serving (the first pass starts with the server)")
	f.Int("scrub-rate", scrub.DefaultRate, "records per second the audit scrubber checks at most (about 5 µs of CPU each)")
	f.Float64("auditor-cpu", app.DefaultAuditorCPU, "share of one CPU the auditor commands' walks of the log (verify, export, bundle, report, compliance report, policy impact) may use together through the admin socket while serving, however many run at once; they rest between chunks of records (1 or more: not paced)")
	f.String("sync-fhir-base", "", "pull from this FHIR R4 server on a schedule, as 'custos sync' does (the first sync starts with the server)")
	f.Duration("sync-every", app.DefaultSyncEvery, "time between the starts of two scheduled syncs (at least 1m)")
	f.String("sync-client-id", "", "SMART Backend Services client id of the scheduled sync (key: Vault transit/custos-fhir-client, or D/"+app.SyncKeyFile+" with --dev)")
	f.String("sync-scope", "", "the scope the scheduled sync asks the token endpoint for (default: system/*.read, or system/*.rs where the server lists only SMART v2 scopes)")
	f.String("sync-tenant", "", "tenant that receives the synced resources (required with --sync-fhir-base)")
	f.Int64("audit-roll-size", 0, "seal the live audit segment once its pages in use reach this many bytes (at least 65536; 0: no size limit)")
	f.Duration("audit-roll-period", 0, "seal the live audit segment once its first record is this old (at least 1m; 0: monthly, UTC)")
	f.String("audit-archive-dir", "", "directory on separate storage receiving every sealed audit segment with its signed seal (default: keep them in DATA_DIR/audit.sealed)")
	vf.register(f)
}
