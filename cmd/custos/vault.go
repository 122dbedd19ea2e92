package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	vault "github.com/hashicorp/vault/api"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/custos-mcp/custos/secrets"
)

// vaultHelp is the flag and environment summary shared by the commands that
// talk to Vault.
const vaultHelp = `Vault (the production secrets provider; docs/vault.md):
  address     --vault-addr or $VAULT_ADDR (https://HOST:PORT, no credentials;
              http:// only to a loopback host)
  TLS CA      --vault-ca-cert or $VAULT_CACERT
  credentials $VAULT_TOKEN (a token; never a flag), or AppRole:
              --vault-role-id-file F --vault-secret-id-file F
              [--vault-secret-id-wrapped when F holds a response-wrapping token]
  keys        referred to by Vault path only (defaults need no flags):
              KV v2 secret/custos/cursor-key, secret/custos/audit-hmac-key,
              secret/custos/id-key (resource ids of FHIR imports; never rotated);
              Transit transit/custos-audit-signing (ed25519),
              transit/custos-blob-kek (aes256-gcm96);
              transit/custos-policy-signing (ecdsa-p256; policy bundles);
              transit/custos-fhir-client (ecdsa-p384; FHIR sync only)`

// vaultFlags are the Vault settings of serve, import and store reencrypt.
// Secrets are never flag values: the token comes from the environment, the
// AppRole ids from files.
type vaultFlags struct {
	addr, caCert                         string
	roleIDFile, secretIDFile, appRoleMnt string
	wrapped                              bool
	layout                               secrets.Layout
	maxStale, refresh, timeout           time.Duration
}

func (v *vaultFlags) register(f *pflag.FlagSet) {
	d := secrets.DefaultLayout
	f.StringVar(&v.addr, "vault-addr", "", "Vault address (default $VAULT_ADDR)")
	f.StringVar(&v.caCert, "vault-ca-cert", "", "CA certificate file for Vault's TLS (default $VAULT_CACERT)")
	f.StringVar(&v.roleIDFile, "vault-role-id-file", "", "AppRole: file holding the role id")
	f.StringVar(&v.secretIDFile, "vault-secret-id-file", "", "AppRole: file holding the secret id (or a wrapping token)")
	f.BoolVar(&v.wrapped, "vault-secret-id-wrapped", false, "AppRole: the secret id file holds a response-wrapping token")
	f.StringVar(&v.appRoleMnt, "vault-approle-mount", "approle", "AppRole auth mount")
	f.StringVar(&v.layout.KVMount, "vault-kv-mount", d.KVMount, "KV v2 mount")
	f.StringVar(&v.layout.CursorKeyPath, "vault-cursor-key", d.CursorKeyPath, "KV path of the cursor sealing key")
	f.StringVar(&v.layout.AuditKeyPath, "vault-audit-key", d.AuditKeyPath, "KV path of the audit keyed-hash key")
	f.StringVar(&v.layout.TransitMount, "vault-transit-mount", d.TransitMount, "Transit mount")
	f.StringVar(&v.layout.SigningKey, "vault-signing-key", d.SigningKey, "Transit ed25519 key that signs audit checkpoints")
	f.StringVar(&v.layout.BlobKey, "vault-blob-key", d.BlobKey, "Transit key that wraps blob data keys")
	f.DurationVar(&v.maxStale, "key-max-staleness", secrets.DefaultMaxStaleness, "refuse requests when keys were not refreshed from Vault for this long")
	f.DurationVar(&v.refresh, "key-refresh", secrets.DefaultRefreshInterval, "how often keys and key versions are re-read from Vault")
	f.DurationVar(&v.timeout, "vault-timeout", secrets.DefaultRequestTimeout, "timeout of every Vault call")
}

// address is the configured Vault address, from the flag or $VAULT_ADDR.
func (v *vaultFlags) address() string {
	if v.addr != "" {
		return v.addr
	}
	return os.Getenv("VAULT_ADDR")
}

// configured reports whether a Vault address is set.
func (v *vaultFlags) configured() bool { return v.address() != "" }

// explicit reports whether any --vault-* flag was given on the command line.
func explicitVaultFlag(f *pflag.FlagSet) string {
	name := ""
	f.Visit(func(fl *pflag.Flag) {
		if name == "" && len(fl.Name) > 6 && fl.Name[:6] == "vault-" {
			name = fl.Name
		}
	})
	return name
}

// options builds the provider options from flags and the environment.
func (v *vaultFlags) options(logger *slog.Logger) (secrets.VaultOptions, error) {
	o := secrets.VaultOptions{
		Address: v.address(), Layout: v.layout, Logger: logger,
		MaxStaleness: v.maxStale, RefreshInterval: v.refresh, RequestTimeout: v.timeout,
	}
	if o.Address == "" {
		return o, usagef("no Vault address: set --vault-addr or $VAULT_ADDR (or use --dev for ephemeral demo keys)")
	}
	if (v.roleIDFile == "") != (v.secretIDFile == "") {
		return o, usagef("AppRole needs both --vault-role-id-file and --vault-secret-id-file")
	}
	if v.roleIDFile != "" {
		o.AppRole = &secrets.AppRole{RoleIDFile: v.roleIDFile, SecretIDFile: v.secretIDFile, Wrapped: v.wrapped, MountPath: v.appRoleMnt}
	} else if v.wrapped {
		return o, usagef("--vault-secret-id-wrapped needs --vault-secret-id-file")
	} else {
		o.Token = os.Getenv("VAULT_TOKEN")
		if o.Token == "" {
			return o, usagef("no Vault credentials: set $VAULT_TOKEN, or --vault-role-id-file and --vault-secret-id-file")
		}
	}
	ca := v.caCert
	if ca == "" {
		ca = os.Getenv("VAULT_CACERT")
	}
	if ca != "" {
		o.TLS = &vault.TLSConfig{CACert: ca}
	}
	return o, nil
}

// open connects to Vault and loads every key, failing closed.
func (v *vaultFlags) open(ctx context.Context, logger *slog.Logger) (*secrets.Vault, error) {
	o, err := v.options(logger)
	if err != nil {
		return nil, err
	}
	kv, err := secrets.OpenVault(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	return kv, nil
}

// quietLogger is the logger of one-shot commands (import, store): warnings
// and errors as JSON lines on stderr, never a secret.
func quietLogger(cmd *cobra.Command) *slog.Logger {
	return slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}
