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
	node      string
	pageSize  int
	logger    *slog.Logger
}

// runtime is an assembled server with the resources it holds open.
type runtime struct {
	srv     *server.Server
	catalog *store.Store
	audit   *audit.Log
	policy  *policy.Engine
	keys    *secrets.Dev
	closed  bool
}

// Close closes the audit log (waiting for pending appends) and the catalog.
// It may be called more than once.
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
	return errors.Join(errs...)
}

// openRuntime opens the catalog, the policy, the keys and the audit log, in
// that order, and fails closed on the first that is not usable.
func openRuntime(ctx context.Context, o runtimeOptions) (_ *runtime, err error) {
	if !o.dev {
		return nil, errors.New("no production secrets provider is configured: Vault support is not available in this release. " +
			"Run with --dev to serve with ephemeral in-memory keys (every audit record is then marked dev=true); do not serve real PHI that way")
	}
	rt := &runtime{}
	defer func() {
		if err != nil {
			rt.Close()
		}
	}()
	if err := existingFile(o.data.catalog(), "catalog"); err != nil {
		return nil, fmt.Errorf("%w; create it with 'custos import --data-dir %s PATH'", err, o.data)
	}
	if rt.catalog, err = store.Open(o.data.catalog(), store.Options{Logger: o.logger, ReadOnly: true}); err != nil {
		return nil, lockHint(err)
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
	if rt.keys, err = secrets.NewDev(); err != nil {
		return nil, err
	}
	// The audit log is opened (and created if new) last, so that a bad
	// policy or catalog leaves the data directory as it was.
	if rt.audit, err = audit.Open(o.data.audit(), audit.Options{Node: o.node, Logger: o.logger}); err != nil {
		return nil, lockHint(err)
	}
	o.logger.Warn("DEV MODE: serving with ephemeral in-memory keys; every audit record is marked dev=true. Not for real PHI.")
	rt.srv, err = server.New(server.Config{
		Catalog: rt.catalog, Policy: rt.policy, Audit: rt.audit, Keys: rt.keys,
		PageSize: o.pageSize, Logger: o.logger, Version: version,
	})
	if err != nil {
		return nil, err
	}
	o.logger.Info("ready", "policy_revision", rt.policy.Revision(), "secrets", rt.keys.Name(), "node", o.node)
	return rt, nil
}
