package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/ops"
	"github.com/custos-mcp/custos/store"
)

// runtimeOptions are what serve and demo need to assemble a server.
type runtimeOptions struct {
	data      dataDir
	policyDir string
	bundle    string   // signed policy bundle (production)
	bundleKey []string // ID=PEMFILE verification keys of the bundle
	bundleVlt bool     // also the Vault policy key's public keys
	dev       bool
	vault     *vaultFlags // used unless dev
	node      string
	pageSize  int
	logger    *slog.Logger
	ckpt      checkpointOptions
	metrics   *ops.Metrics // nil: no metrics
	rateLimit server.RateLimit
	// sessionIdle closes idle MCP sessions (0: the server's default).
	sessionIdle time.Duration
}

// checkpointOptions configure signed checkpoints of the audit tree.
type checkpointOptions struct {
	deployment string        // names the deployment in the origin
	anchorDir  string        // external anchor directory (required without --dev)
	every      int64         // records between checkpoints
	interval   time.Duration // at most this long between checkpoints
}

// origin is the checkpoint origin: "<deployment>/<node>/audit".
func (o runtimeOptions) origin() string {
	dep := o.ckpt.deployment
	if dep == "" {
		dep = defaultDeployment
	}
	return dep + "/" + o.node + "/audit"
}

// defaultDeployment names a deployment that did not name itself.
const defaultDeployment = "custos.local"

// keyProvider is what the runtime needs of a secrets provider.
type keyProvider interface {
	server.Keys
	checkpoint.KeySigner
	Name() string
	SigningVersions() []int
}

// runtime is an assembled server with the resources it holds open.
type runtime struct {
	srv     *server.Server
	catalog *store.Live // follows catalog.db replaced by 'custos import' while serving
	stopCat context.CancelFunc
	audit   *audit.Log
	policy  server.Decider
	reload  *policy.Reloader // nil for the built-in policy
	stopRel context.CancelFunc
	pending []policy.Event // policy events from before the server existed
	keys    keyProvider
	vault   *secrets.Vault // nil with --dev
	ckpt    *checkpoint.Checkpointer
	ckptErr chan error // receives Run's result: an integrity error is fatal
	stopCP  context.CancelFunc
	grants  *btg.Cache
	stopBTG func() // stops the grants sync after a final round
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
	if r.stopRel != nil {
		r.stopRel()
	}
	if r.stopBTG != nil {
		r.stopBTG() // last uses and events into the log before it closes
	}
	if r.ckpt != nil {
		// The final checkpoint covers every record appended so far.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		errs = append(errs, r.ckpt.Close(ctx))
		cancel()
		r.stopCP()
	}
	if r.audit != nil {
		errs = append(errs, r.audit.Close())
	}
	if r.stopCat != nil {
		r.stopCat()
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
	if origin := o.origin(); !checkpoint.ValidOrigin(origin) {
		return nil, usagef("checkpoint origin %q is not valid: --deployment and --node must not contain spaces or '+'", origin)
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
	var dataKeys store.DataKeys
	if o.dev {
		dev, err := secrets.NewDev()
		if err != nil {
			return nil, err
		}
		// Dev audit and signing keys persist in the data directory so that
		// audit lookups and checkpoint verification work across dev runs.
		if err := dev.PersistIn(string(o.data)); err != nil {
			return nil, err
		}
		rt.keys = dev
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
	// Checked after the keys and before the catalog and the audit log are
	// opened (nothing is created on a refusal).
	switch {
	case o.ckpt.anchorDir != "":
		if err := existingDir(o.ckpt.anchorDir, "anchor directory"); err != nil {
			return nil, err
		}
	case !o.dev:
		return nil, usagef("--anchor-dir is required without --dev: signed checkpoints must also be written outside the data directory, so that a rolled-back audit.db is caught at startup")
	}
	// The catalog is opened read-only and followed: 'custos import' builds
	// a new catalog.db beside it and renames it over the old one; the new
	// file is swapped in (if it opens with these keys) and its changes
	// are notified to subscribers once the server exists.
	rt.catalog, err = store.OpenLive(o.data.catalog(), store.LiveOptions{
		Options: store.Options{Logger: o.logger, DataKeys: dataKeys},
		// Called only from Watch, started once rt.srv exists.
		OnChange: func(c store.Change) { rt.srv.CatalogChanged(context.Background(), c) },
	})
	if err != nil {
		return nil, catalogHint(lockHint(err), o.data)
	}
	if err := rt.openPolicy(ctx, o); err != nil {
		return nil, err
	}
	// The audit log is opened (and created if new) last, so that a bad
	// policy, catalog or key leaves the data directory as it was.
	if rt.audit, err = audit.Open(o.data.audit(), audit.Options{Node: o.node, Logger: o.logger}); err != nil {
		return nil, lockHint(err)
	}
	if err := rt.startCheckpoints(ctx, o); err != nil {
		return nil, err
	}
	if o.dev {
		o.logger.Warn("DEV MODE: serving with ephemeral in-memory keys; every audit record is marked dev=true. Not for real PHI.")
	}
	rt.grants = btg.NewCache()
	rt.srv, err = server.New(server.Config{
		Catalog: rt.catalog, Policy: rt.policy, Audit: notifyingLog{rt.audit, rt.ckpt}, Keys: rt.keys,
		PageSize: o.pageSize, Logger: o.logger, Version: version, Grants: rt.grants, Metrics: o.metrics, RateLimit: o.rateLimit, SessionTimeout: o.sessionIdle,
	})
	if err != nil {
		return nil, err
	}
	cctx, cancelCat := context.WithCancel(context.Background())
	rt.stopCat = cancelCat
	go rt.catalog.Watch(cctx)
	if err := rt.startGrantSync(ctx, o); err != nil {
		return nil, err
	}
	// The initial policy load happened before the server could audit it.
	for _, ev := range rt.pending {
		if err := rt.srv.AuditPolicyEvent(ctx, ev); err != nil {
			return nil, err
		}
	}
	rt.pending = nil
	if rt.reload != nil {
		wctx, cancel := context.WithCancel(context.Background())
		rt.stopRel = cancel
		go rt.reload.Watch(wctx, 0)
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

// watchCheckpoints calls stop with the checkpointer's error if it stops on
// an integrity problem (a fork or rollback seen while serving): the server
// must not go on releasing data under a log it can no longer anchor.
func (rt *runtime) watchCheckpoints(logger *slog.Logger, stop func(error)) {
	go func() {
		err := <-rt.ckptErr
		rt.ckptErr <- err // for anyone else who waits
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, checkpoint.ErrClosed) {
			logger.Error("audit checkpoints stopped on an integrity error; shutting down", "err", err)
			stop(err)
		}
	}()
}

// notifyingLog tells the checkpointer the new tree size after each append.
type notifyingLog struct {
	*audit.Log
	cp *checkpoint.Checkpointer
}

func (n notifyingLog) Append(ctx context.Context, e audit.Entry) (audit.Record, error) {
	rec, err := n.Log.Append(ctx, e)
	if err == nil {
		n.cp.Notify(int64(rec.Seq))
	}
	return rec, err
}

// startCheckpoints checks the audit tree against every checkpoint anchored
// so far (refusing a rolled-back, truncated or forked log) and starts
// signing new ones into the local and the external anchor.
func (rt *runtime) startCheckpoints(ctx context.Context, o runtimeOptions) error {
	origin := o.origin()
	anchors := []*checkpoint.Anchor{{Dir: string(o.data)}}
	if o.ckpt.anchorDir != "" {
		anchors = append(anchors, &checkpoint.Anchor{Dir: o.ckpt.anchorDir})
	}
	vkeys, err := checkpoint.VerifierKeys(origin, rt.keys, rt.keys.SigningVersions()...)
	if err != nil {
		return fmt.Errorf("checkpoint verifier keys: %w", err)
	}
	verifiers, err := checkpoint.ParseVerifierFile(checkpoint.FormatVerifierFile(vkeys))
	if err != nil {
		return err
	}
	entries, err := checkpoint.Load(anchors...)
	if err != nil {
		return fmt.Errorf("reading anchored checkpoints: %w", err)
	}
	if err := checkpoint.CheckAgainst(ctx, rt.audit, entries, verifiers); err != nil {
		return fmt.Errorf("the audit log does not match its anchored checkpoints; refusing to serve: %w", err)
	}
	signer, _, err := checkpoint.NewSigner(ctx, origin, rt.keys)
	if err != nil {
		return fmt.Errorf("checkpoint signer: %w", err)
	}
	rt.ckpt, err = checkpoint.New(checkpoint.Config{
		Origin: origin, Signer: signer, Tree: rt.audit, Anchors: anchors,
		Every: o.ckpt.every, Interval: o.ckpt.interval, Logger: o.logger,
	})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	rt.stopCP, rt.ckptErr = cancel, make(chan error, 1)
	go func() { rt.ckptErr <- rt.ckpt.Run(runCtx) }()
	o.logger.Info("audit checkpoints", "origin", origin, "anchored", len(entries), "anchors", len(anchors), "every", o.ckpt.every, "interval", o.ckpt.interval.String())
	return nil
}

// existingDir checks that path is a directory.
func existingDir(path, what string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s is not a directory", what, path)
	}
	return nil
}

// grantSyncInterval is how often the server picks up break-the-glass grants,
// revocations and reviews, and records uses and events.
const grantSyncInterval = time.Second

// startGrantSync loads the active break-the-glass grants and keeps them in
// sync with D/grants.db: every second it records the uses made, loads the
// grants active now, and writes pending grant events to the audit log.
func (rt *runtime) startGrantSync(ctx context.Context, o runtimeOptions) error {
	st := btg.New(o.data.grants(), btg.Options{})
	round := func(ctx context.Context) error {
		uses := rt.grants.TakeUses()
		active, pending, keys, err := st.Sync(uses)
		if err != nil {
			rt.grants.Return(uses)
			return err
		}
		rt.grants.Replace(active)
		if rt.keys.Check() != nil {
			// Without fresh keys an event could only be recorded without
			// its patient, and again each second: keep it queued.
			return nil
		}
		var done [][]byte
		for i, ev := range pending {
			if _, err := rt.srv.AuditGrantEvent(ctx, ev); err != nil {
				st.Delivered(done)
				return fmt.Errorf("auditing break-the-glass event: %w", err)
			}
			done = append(done, keys[i])
		}
		return st.Delivered(done)
	}
	if err := round(ctx); err != nil {
		return fmt.Errorf("break-the-glass grants (%s): %w", o.data.grants(), err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(grantSyncInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				if err := round(context.Background()); err != nil {
					o.logger.Error("final break-the-glass sync failed", "err", err)
				}
				return
			case <-t.C:
				if err := round(context.Background()); err != nil {
					o.logger.Warn("break-the-glass sync failed; retrying", "err", err)
				}
			}
		}
	}()
	var once sync.Once
	rt.stopBTG = func() { once.Do(func() { close(stop); <-done }) }
	return nil
}

// openPolicy loads the policy: the built-in default, a directory (--dev
// only: unsigned) or a signed bundle (verification mandatory). Directories
// and bundles are watched and reloaded (also on SIGHUP): a candidate is
// compiled and its Rego tests run off the request path, then swapped in
// atomically; every load and rejection is an audit event.
func (rt *runtime) openPolicy(ctx context.Context, o runtimeOptions) error {
	popts := policy.Options{Logger: o.logger}
	var src policy.Source
	switch {
	case o.policyDir != "" && o.bundle != "":
		return usagef("choose --policy-dir or --policy-bundle, not both")
	case o.policyDir != "":
		if !o.dev {
			return usagef("--policy-dir loads an unsigned policy, for development (--dev); in production use --policy-bundle FILE --policy-key ID=PEM")
		}
		src = &policy.DirSource{Dir: o.policyDir, Options: popts, AllowNoTests: true}
	case o.bundle != "":
		if len(o.bundleKey) == 0 && !o.bundleVlt {
			return usagef("--policy-bundle needs --policy-key ID=PEMFILE or --policy-key-vault: signature verification is mandatory")
		}
		var keys []policy.VerificationKey
		if o.bundleVlt {
			if rt.vault == nil {
				return usagef("--policy-key-vault needs Vault (not --dev)")
			}
			vks, err := rt.vault.PolicyVerificationKeys(ctx)
			if err != nil {
				return fmt.Errorf("policy verification keys from Vault: %w", err)
			}
			for _, vk := range vks {
				k, err := policy.ParseVerificationKey(vk.ID, vk.PEM)
				if err != nil {
					return err
				}
				keys = append(keys, k)
			}
		}
		for _, kv := range o.bundleKey {
			id, file, ok := strings.Cut(kv, "=")
			if !ok || id == "" || file == "" {
				return usagef("--policy-key %q: want ID=PEMFILE", kv)
			}
			pem, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			k, err := policy.ParseVerificationKey(id, pem)
			if err != nil {
				return err
			}
			keys = append(keys, k)
		}
		src = &policy.BundleSource{Path: o.bundle, Keys: keys, Options: popts}
	default:
		eng, err := policy.Default(ctx, popts)
		if err != nil {
			return fmt.Errorf("loading policy: %w", err)
		}
		rt.policy = eng
		return nil
	}
	r, err := policy.New(ctx, src, policy.ReloaderOptions{Logger: o.logger, OnEvent: func(ev policy.Event) error {
		if rt.srv == nil {
			rt.pending = append(rt.pending, ev)
			return nil
		}
		return rt.srv.AuditPolicyEvent(context.Background(), ev)
	}})
	if err != nil {
		return fmt.Errorf("loading policy: %w", err)
	}
	rt.policy, rt.reload = r, r
	return nil
}

// reloadPolicy reloads the policy now (SIGHUP); without a reloadable
// source it says so.
func (rt *runtime) reloadPolicy(ctx context.Context, logger *slog.Logger) {
	if rt.reload == nil {
		logger.Warn("SIGHUP: the built-in policy has nothing to reload")
		return
	}
	ev, err := rt.reload.Reload(ctx)
	if err != nil {
		logger.Error("SIGHUP: policy reload rejected; the last good policy keeps serving", "err", err)
		return
	}
	logger.Info("SIGHUP: policy reloaded", "revision", ev.Revision)
}

// health is the readiness of the runtime: the audit log answers (its tree
// head reads), a policy is loaded, and the keys are fresh.
func (rt *runtime) health(m *ops.Metrics) *ops.Health {
	h := &ops.Health{Metrics: m}
	h.AddCheck("audit", func(ctx context.Context) error {
		_, _, err := rt.audit.TreeHead(ctx)
		return err
	})
	h.AddCheck("policy", func(context.Context) error {
		if rt.policy.Revision() == "" {
			return errors.New("no policy")
		}
		return nil
	})
	h.AddCheck("keys", func(context.Context) error {
		err := rt.keys.Check()
		m.SetKeysStale(err != nil)
		if err != nil {
			return ops.NewSafeError("keys stale")
		}
		return nil
	})
	return h
}
