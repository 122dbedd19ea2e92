package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/custos-mcp/custos/cmd/custos/internal/config"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/oauth"
	"github.com/custos-mcp/custos/server/ops"
)

// principalEnv names the principal file for --stdio when --principal-file
// is not given.
const principalEnv = "CUSTOS_PRINCIPAL_FILE"

func newServeCmd() *cobra.Command {
	var (
		dir, policyDir, principalFile, tokenFile, listen, addrFile, node, logLevel string
		stdio, dev                                                                 bool
		pageSize                                                                   int
		vf                                                                         vaultFlags
		ckpt                                                                       checkpointOptions
		bundlePath                                                                 string
		bundleKeys                                                                 []string
		bundleVault                                                                bool
		opsListen, opsAddrFile                                                     string
		oauthIssuer, oauthJWKS, oauthAudience                                      string
		tlsCert, tlsKey                                                            string
		tls12                                                                      bool
		rateLimit                                                                  float64
		rateBurst                                                                  int
		sessionIdle                                                                time.Duration
		configPath, logFormat                                                      string
		httpOpts                                                                   server.HTTPOptions
		oauthOpts                                                                  oauth.Config // scopes, claims, purpose header
	)
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
              principal by --tokens (see 'custos token new'), or an OAuth 2.1
              access token (JWT) verified against --oauth-issuer's JWKS: audience
              --oauth-audience, scopes resources:list / resources:read, claims
              sub, roles, tenant, patients, azp (or act), purpose_of_use (or the
              X-Purpose-Of-Use header). Protected resource metadata (RFC 9728)
              is served under /.well-known/oauth-protected-resource. Every 401
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

Audit checkpoints:
  The audit log is a Merkle tree. serve signs a checkpoint (C2SP format,
  origin <deployment>/<node>/audit) every --checkpoint-every records or
  --checkpoint-interval, and at shutdown, with the Vault Transit ed25519 key
  (--dev: the dev key), and appends it to D/checkpoints.jsonl and to
  --anchor-dir/checkpoints.jsonl (separate storage; required without --dev).
  At startup serve refuses to run if audit.db is behind, or disagrees with,
  any anchored checkpoint (rolled back, truncated, forked).

Examples:
  CUSTOS_PRINCIPAL_FILE=./synthetic/principals/clinician.json \
    custos serve --dev --data-dir ./data --stdio
  VAULT_ADDR=https://vault.internal:8200 custos serve --data-dir ./data \
    --vault-role-id-file /etc/custos/role-id --vault-secret-id-file /etc/custos/secret-id \
    --anchor-dir /mnt/anchor/custos --listen 10.0.0.5:8443 --tokens ./tokens.json \
    --tls-cert /etc/custos/tls/server.crt --tls-key /etc/custos/tls/server.key
  custos config check /etc/custos/custos.yaml && custos serve --config /etc/custos/custos.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Before the file is applied, dev and the Vault flags reflect
			// the command line alone; a conflict that involves the file is
			// reported by the validation below, naming the field.
			if dev {
				if name := explicitVaultFlag(cmd.Flags()); name != "" {
					return usagef("--%s cannot be combined with --dev: dev keys are ephemeral; drop --dev to use Vault", name)
				}
			}
			if err := applyServeConfig(cmd.Flags(), configPath); err != nil {
				return err
			}
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if stdio == (listen != "") {
				return usagef("choose exactly one of --stdio or --listen ADDR")
			}
			// Plain HTTP only for the demo: production traffic carries
			// bearer tokens and PHI, and needs TLS even on loopback.
			if listen != "" && tlsCert == "" && tlsKey == "" && !dev {
				return usagef("--listen %s without --tls-cert and --tls-key: plain HTTP is only served with --dev, on a loopback address; add --tls-cert and --tls-key", listen)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usagef("--log-level %q: want debug, info, warn or error", logLevel)
			}
			hopts := &slog.HandlerOptions{Level: level}
			var logger *slog.Logger
			switch logFormat {
			case "json":
				logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), hopts))
			case "text":
				logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), hopts))
			default:
				return usagef("--log-format %q: want json or text", logFormat)
			}

			// Validate the identity configuration before opening anything.
			var ident server.Identity
			var tokens *server.Tokens
			var verifier *oauth.Verifier
			if stdio {
				if principalFile == "" {
					principalFile = os.Getenv(principalEnv)
				}
				if principalFile == "" {
					return usagef("--stdio needs a principal: --principal-file FILE or $%s", principalEnv)
				}
				if ident, err = server.LoadPrincipalFile(principalFile); err != nil {
					return err
				}
			} else if oauthIssuer != "" || oauthJWKS != "" || oauthAudience != "" {
				if tokenFile != "" {
					return usagef("choose --tokens (dev tokens) or --oauth-* (an OAuth 2.1 issuer), not both")
				}
				if oauthIssuer == "" || oauthJWKS == "" || oauthAudience == "" {
					return usagef("OAuth needs --oauth-issuer, --oauth-jwks and --oauth-audience (this server's canonical URL, e.g. http://127.0.0.1:8080/mcp)")
				}
				if !server.IsLoopback(listen) && tlsCert == "" {
					return usagef("--listen %s: plain HTTP is only served on a loopback address; add --tls-cert and --tls-key", listen)
				}
				// Before anything is opened: an unreachable issuer changes nothing.
				oc := oauthOpts
				oc.Issuer, oc.JWKSURL, oc.Audience, oc.Logger = oauthIssuer, oauthJWKS, oauthAudience, logger
				if verifier, err = oauth.New(cmd.Context(), oc); err != nil {
					return fmt.Errorf("oauth: %w", err)
				}
			} else {
				if tokenFile == "" {
					return usagef("--listen needs --tokens FILE (create one with 'custos token new') or --oauth-issuer/--oauth-jwks/--oauth-audience")
				}
				if !server.IsLoopback(listen) && tlsCert == "" {
					return usagef("--listen %s: plain HTTP is only served on a loopback address (127.0.0.1:PORT or [::1]:PORT); add --tls-cert and --tls-key", listen)
				}
				if tokens, err = server.LoadTokenFile(tokenFile); err != nil {
					return err
				}
			}

			var tlsConfig *tls.Config
			if tlsCert != "" || tlsKey != "" {
				if tlsCert == "" || tlsKey == "" {
					return usagef("TLS needs both --tls-cert and --tls-key")
				}
				cr, err := server.NewCertReloader(tlsCert, tlsKey, logger)
				if err != nil {
					return err
				}
				tlsConfig = cr.TLSConfig(tls12)
			}
			var reg *prometheus.Registry
			var metrics *ops.Metrics
			if opsListen != "" {
				reg = prometheus.NewRegistry()
				reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
				metrics = ops.New(reg)
			}
			rt, err := openRuntime(cmd.Context(), runtimeOptions{
				metrics: metrics, rateLimit: server.RateLimit{PerSecond: rateLimit, Burst: rateBurst}, sessionIdle: sessionIdle,
				data: d, policyDir: policyDir, bundle: bundlePath, bundleKey: bundleKeys, bundleVlt: bundleVault, dev: dev, vault: &vf, node: nodeName(node), pageSize: pageSize, logger: logger,
				ckpt: ckpt,
			})
			if err != nil {
				return err
			}
			defer rt.Close()
			ctx, cancel := context.WithCancelCause(cmd.Context())
			defer cancel(nil)
			if opsListen != "" {
				stopOps, err := serveOps(logger, opsListen, opsAddrFile, ops.Handler(rt.health(metrics), metrics, reg))
				if err != nil {
					return err
				}
				defer stopOps()
			}
			rt.watchCheckpoints(logger, cancel)
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-hup:
						rt.reloadPolicy(ctx, logger)
					}
				}
			}()

			if stdio {
				logger.Info("serving MCP on stdio", "sub", ident.Principal.Sub)
				err := rt.srv.ServeStdio(ctx, &mcp.StdioTransport{}, ident)
				if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
					rt.Close()
					return cause
				}
				if err != nil && !errors.Is(err, context.Canceled) {
					return err
				}
				return rt.Close()
			}
			handler := http.Handler(nil)
			if verifier != nil {
				handler = rt.srv.OAuthHandler(verifier)
			} else {
				handler = rt.srv.HTTPHandler(tokens)
			}
			httpOpts.TLSConfig = tlsConfig
			if err := serveHTTP(ctx, logger, handler, listen, addrFile, rt, httpOpts); err != nil {
				return err
			}
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "read settings from this YAML file (docs/config.example.yaml); flags given here override it")
	f.StringVar(&dir, "data-dir", "", "data directory (catalog.db, audit.db)")
	f.BoolVar(&dev, "dev", false, "serve with ephemeral dev keys (demo only; every audit record says dev=true)")
	f.BoolVar(&stdio, "stdio", false, "serve one client on stdin/stdout")
	f.StringVar(&principalFile, "principal-file", "", "principal for --stdio (default $"+principalEnv+")")
	f.StringVar(&listen, "listen", "", "serve Streamable HTTP on this address (HTTPS with --tls-cert/--tls-key; plain HTTP only with --dev on loopback)")
	f.StringVar(&tokenFile, "tokens", "", "dev token file for --listen")
	f.Float64Var(&rateLimit, "rate-limit", 100, "HTTP requests per second per principal (token bucket; 0 disables); beyond it: 429, audited")
	f.IntVar(&rateBurst, "rate-burst", 200, "the bucket size of --rate-limit")
	f.StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain); reloaded when the file changes")
	f.StringVar(&tlsKey, "tls-key", "", "the certificate's PEM private key")
	f.BoolVar(&tls12, "tls12", false, "also accept TLS 1.2 (default: TLS 1.3 only)")
	f.StringVar(&oauthIssuer, "oauth-issuer", "", "OAuth 2.1: the issuer (iss) of access tokens")
	f.StringVar(&oauthJWKS, "oauth-jwks", "", "OAuth 2.1: the issuer's JWKS URL")
	f.StringVar(&oauthAudience, "oauth-audience", "", "OAuth 2.1: this server's canonical URL, the required audience (RFC 8707)")
	f.StringVar(&oauthOpts.ScopeList, "oauth-scope-list", oauth.DefaultScopeList, "OAuth 2.1: the scope resources/list, resources/templates/list and completion/complete require")
	f.StringVar(&oauthOpts.ScopeRead, "oauth-scope-read", oauth.DefaultScopeRead, "OAuth 2.1: the scope resources/read and subscriptions (resources/subscribe, subscriptions/listen) require")
	f.StringVar(&oauthOpts.RolesClaim, "oauth-roles-claim", oauth.DefaultRolesClaim, "OAuth 2.1: the claim holding the caller's roles (array of strings)")
	f.StringVar(&oauthOpts.TenantClaim, "oauth-tenant-claim", oauth.DefaultTenantClaim, "OAuth 2.1: the claim holding the caller's tenant")
	f.StringVar(&oauthOpts.PatientsClaim, "oauth-patients-claim", oauth.DefaultPatientsClaim, "OAuth 2.1: the claim holding the caller's patients (array of strings)")
	f.StringVar(&oauthOpts.PurposeClaim, "oauth-purpose-claim", oauth.DefaultPurposeClaim, "OAuth 2.1: the claim holding the purpose of use")
	f.StringVar(&oauthOpts.PurposeHeader, "oauth-purpose-header", oauth.DefaultPurposeHeader, "OAuth 2.1: the request header that may carry the purpose of use")
	f.DurationVar(&httpOpts.ReadHeaderTimeout, "http-read-header-timeout", server.DefaultReadHeaderTimeout, "HTTP: time allowed to read a request's headers")
	f.DurationVar(&httpOpts.ReadTimeout, "http-read-timeout", server.DefaultReadTimeout, "HTTP: time allowed to read a whole request")
	f.DurationVar(&httpOpts.WriteTimeout, "http-write-timeout", 0, "HTTP: time allowed to write a response (0: none; a timeout cuts SSE streams)")
	f.DurationVar(&httpOpts.IdleTimeout, "http-idle-timeout", server.DefaultIdleTimeout, "HTTP: close keep-alive connections idle this long")
	f.DurationVar(&sessionIdle, "http-session-idle-timeout", server.SessionTimeout, "MCP: close a 2025-11-25 session idle this long (automatic logoff)")
	f.IntVar(&httpOpts.MaxHeaderBytes, "http-max-header-bytes", server.DefaultMaxHeaderBytes, "HTTP: the largest request header block")
	f.Int64Var(&httpOpts.MaxRequestBodyBytes, "http-max-body-bytes", config.MaxRequestBodyLimit, "HTTP: the largest request body (at most 1 MiB, the MCP handler's own limit)")
	f.StringVar(&addrFile, "addr-file", "", "write the MCP endpoint URL to this file once listening (useful with port 0)")
	f.StringVar(&policyDir, "policy-dir", "", "load the Rego policy from this directory (--dev only; watched and reloaded)")
	f.StringVar(&bundlePath, "policy-bundle", "", "load the policy from this signed OPA bundle (watched and reloaded; needs --policy-key)")
	f.StringArrayVar(&bundleKeys, "policy-key", nil, "ID=PEMFILE: an ES256 public key that may sign the policy bundle (repeatable)")
	f.BoolVar(&bundleVault, "policy-key-vault", false, "also accept bundles signed by the Vault Transit key custos-policy-signing (every version)")
	f.IntVar(&pageSize, "page-size", server.DefaultPageSize, "resources per resources/list page")
	f.StringVar(&node, "node", "", "node name recorded in audit records (default: hostname)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "json", "json or text (the operational log on stderr)")
	f.StringVar(&opsListen, "ops-listen", "", "serve /healthz, /readyz and Prometheus /metrics on this separate address (e.g. 127.0.0.1:9090)")
	f.StringVar(&opsAddrFile, "ops-addr-file", "", "write the ops base URL to this file once listening (useful with port 0)")
	f.StringVar(&ckpt.deployment, "deployment", defaultDeployment, "deployment name in the checkpoint origin (<deployment>/<node>/audit)")
	f.StringVar(&ckpt.anchorDir, "anchor-dir", "", "directory on separate storage receiving every signed checkpoint (required without --dev)")
	f.Int64Var(&ckpt.every, "checkpoint-every", 1000, "sign a checkpoint after this many new audit records")
	f.DurationVar(&ckpt.interval, "checkpoint-interval", time.Second, "sign a checkpoint at least this often while records arrive")
	vf.register(f)
	return cmd
}

// applyServeConfig applies the configuration file at path (if any) to the
// serve flags that were not given on the command line, and validates the
// effective settings: every problem at once, each naming its field (or flag).
func applyServeConfig(fs *pflag.FlagSet, path string) error {
	var file *config.File
	if path != "" {
		var err error
		if file, err = config.Load(path); err != nil {
			return usageError{err}
		}
	}
	eff, err := config.Apply(fs, file)
	if err != nil {
		return usageError{err}
	}
	if err := eff.Validate(config.Options{CheckFiles: true}); err != nil {
		return usageError{err}
	}
	return nil
}

func serveHTTP(ctx context.Context, logger *slog.Logger, h http.Handler, listen, addrFile string, rt *runtime, o server.HTTPOptions) error {
	tlsConfig := o.TLSConfig
	hs, err := server.NewHTTPServerWith(listen, h, o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	scheme := "http"
	if tlsConfig != nil {
		ln, scheme = tls.NewListener(ln, tlsConfig), "https"
	}
	url := fmt.Sprintf("%s://%s%s", scheme, ln.Addr(), server.MCPPath)
	if addrFile != "" {
		if err := writeFileAtomic(addrFile, []byte(url+"\n"), 0o600); err != nil {
			ln.Close()
			return err
		}
	}
	logger.Info("serving MCP over Streamable HTTP", "url", url)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	return rt.Close()
}

// serveOps serves the operations endpoints on their own listener and
// returns the function that stops them.
func serveOps(logger *slog.Logger, addr, addrFile string, h http.Handler) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--ops-listen: %w", err)
	}
	url := "http://" + ln.Addr().String()
	if addrFile != "" {
		if err := writeFileAtomic(addrFile, []byte(url+"\n"), 0o600); err != nil {
			ln.Close()
			return nil, err
		}
	}
	hs := ops.NewHTTPServer(addr, h)
	go hs.Serve(ln)
	logger.Info("serving /healthz, /readyz and /metrics", "url", url)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	}, nil
}
