package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

// runtimeOptions are what serve and demo need to assemble a server.
type runtimeOptions struct {
	data      dataDir
	policyDir string
	dev       bool
	vault     *vaultFlags // used unless dev
	node      string
	pageSize  int
	logger    *slog.Logger
}

// keyProvider is what the runtime needs of a secrets provider.
type keyProvider interface {
	server.Keys
	Name() string
}

// runtime is an assembled server with the resources it holds open.
type runtime struct {
	srv     *server.Server
	catalog *store.Store
	audit   *audit.Log
	policy  *policy.Engine
	keys    keyProvider
	vault   *secrets.Vault // nil with --dev
	closed  bool
}

// Close closes the audit log (waiting for pending appends), the catalog
// and the Vault client. It may be called more than once.
func (r *runtime) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	if r.audit != nil {
		errs = append(errs, r.audit.Close())
	}
	if r.catalog != nil {
		errs = append(errs, r.catalog.Close())
	}
	if r.vault != nil {
		errs = append(errs, r.vault.Close())
	}
	return errors.Join(errs...)
}

// openRuntime opens the keys, the catalog, the policy and the audit log, in
// that order, and fails closed on the first that is not usable. Without
// --dev the keys come from Vault, every key must be present, and the
// catalog must be encrypted at rest under Vault's key-encryption key.
func openRuntime(ctx context.Context, o runtimeOptions) (_ *runtime, err error) {
	rt := &runtime{}
	defer func() {
		if err != nil {
			rt.Close()
		}
	}()
	if err := existingFile(o.data.catalog(), "catalog"); err != nil {
		return nil, fmt.Errorf("%w; create it with 'custos import --data-dir %s PATH'", err, o.data)
	}
	var dataKeys store.DataKeys
	if o.dev {
		if rt.keys, err = secrets.NewDev(); err != nil {
			return nil, err
		}
	} else {
		if o.vault == nil {
			return nil, errors.New("no secrets provider: configure Vault (see --help) or run with --dev")
		}
		if rt.vault, err = o.vault.open(ctx, o.logger); err != nil {
			return nil, err
		}
		rt.keys, dataKeys = rt.vault, rt.vault
		if rt.keys.Dev() {
			return nil, errors.New("the production path refuses dev keys")
		}
	}
	if rt.catalog, err = store.Open(o.data.catalog(), store.Options{Logger: o.logger, ReadOnly: true, DataKeys: dataKeys}); err != nil {
		return nil, catalogHint(lockHint(err), o.data)
	}
	popts := policy.Options{Logger: o.logger}
	if o.policyDir != "" {
		rt.policy, err = policy.LoadDir(ctx, o.policyDir, popts)
	} else {
		rt.policy, err = policy.Default(ctx, popts)
	}
	if err != nil {
		return nil, fmt.Errorf("loading policy: %w", err)
	}
	// The audit log is opened (and created if new) last, so that a bad
	// policy, catalog or key leaves the data directory as it was.
	if rt.audit, err = audit.Open(o.data.audit(), audit.Options{Node: o.node, Logger: o.logger}); err != nil {
		return nil, lockHint(err)
	}
	if o.dev {
		o.logger.Warn("DEV MODE: serving with ephemeral in-memory keys; every audit record is marked dev=true. Not for real PHI.")
	}
	rt.srv, err = server.New(server.Config{
		Catalog: rt.catalog, Policy: rt.policy, Audit: rt.audit, Keys: rt.keys,
		PageSize: o.pageSize, Logger: o.logger, Version: version,
	})
	if err != nil {
		return nil, err
	}
	o.logger.Info("ready", "policy_revision", rt.policy.Revision(), "secrets", rt.keys.Name(), "keys", rt.keys.KeyIDs(), "node", o.node)
	return rt, nil
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
