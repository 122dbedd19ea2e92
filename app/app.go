package app

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/app/admin"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/audit/scrub"
	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/clientaddr"
	"github.com/custos-mcp/custos/server/oauth"
	"github.com/custos-mcp/custos/server/ops"
	"github.com/custos-mcp/custos/store"
)

// Files of a data directory.
const (
	CatalogFile = "catalog.db"
	AuditFile   = "audit.db"
	GrantsFile  = "grants.db"
)

// keyProvider is what the App needs of a secrets provider.
type keyProvider interface {
	server.Keys
	checkpoint.KeySigner
	Name() string
	SigningVersions() []int
	// IDKey names imported FHIR resources (the scheduled sync's imports).
	IDKey(context.Context) (secrets.Key, error)
}

// App is an assembled custos: keys, catalog, policy, audit log,
// checkpointer, grant sync and server, and the listeners of its transport.
// Its methods are safe for concurrent use.
type App struct {
	o   Options
	log *slog.Logger

	keys    keyProvider
	vault   *secrets.Vault // nil with Dev
	catalog *store.Live
	stopCat func() // stops following catalog.db and waits
	policy  server.Decider
	reload  *policy.Reloader // nil for the built-in policy
	stopRel context.CancelFunc
	pending []policy.Event // policy events from before the server existed
	audit   *audit.Log
	ckpt    *checkpoint.Checkpointer
	ckptErr chan error // receives Run's result
	stopCP  context.CancelFunc

	polState policyState // PolicyStatus's load time and last refusal
	// anchors and verifiers check the log against the anchored
	// checkpoints (at startup, and on every scrub pass).
	anchors   []*checkpoint.Anchor
	verifiers note.Verifiers
	guard     integrity              // latched when a scrub pass finds the log broken
	stopScrub func()                 // stops the scrubber and waits
	stopSync  func()                 // stops the scheduled FHIR sync and waits
	syncOpts  *fhirsync.Options      // nil: no sync configured
	syncRec   fhirsync.AuditRecorder // the records of syncs (Principal.Sub set per run)
	grants    *btg.Cache
	stopBTG   func() // stops the grant sync after a final round
	srv       *server.Server

	disk     *ops.DiskWatch // the audit volume's free space
	stopDisk context.CancelFunc
	metrics  *ops.Metrics // nil without Ops.Listen
	registry *prometheus.Registry

	// Transport, prepared before anything is opened.
	ident     server.Identity // stdio
	tokens    *server.Tokens
	verifier  *oauth.Verifier
	tlsConfig *tls.Config
	handler   http.Handler
	ln        net.Listener
	hs        *http.Server
	url       string
	opsLn     net.Listener
	opsHS     *http.Server
	opsURL    string
	admin     *admin.Server
	access    *access.Service // the admin socket's: closed before it waits for its requests

	mu     sync.Mutex
	closed bool
}

// Open validates o, prepares the transport's identity (principal, tokens
// or OAuth verifier) and TLS, then opens the keys, the catalog, the
// policy, the audit log, the checkpointer, the grant sync and the server,
// in that order, and binds the listeners. It fails closed: on any error
// everything opened so far is closed again. Invalid options are Problems
// (errors.Is(err, ErrInvalid)) and nothing is opened.
func Open(ctx context.Context, o Options) (_ *App, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Node == "" {
		o.Node = hostName()
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if origin := o.origin(); !checkpoint.ValidOrigin(origin) {
		return nil, Problems{{Key: "node", Message: fmt.Sprintf("the checkpoint origin %q is not valid: the deployment and the node must not contain spaces or '+'", origin)}}
	}
	a := &App{o: o, log: o.Logger}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	// Identity and TLS first: a bad principal, token file, certificate or
	// an unreachable OAuth issuer changes nothing on disk.
	if err := a.prepareTransport(ctx); err != nil {
		return nil, err
	}
	if err := a.openKeys(ctx); err != nil {
		return nil, err
	}
	if err := a.openCatalog(); err != nil {
		return nil, err
	}
	if err := a.openPolicy(ctx); err != nil {
		return nil, err
	}
	// The audit log is opened (and created if new) last, so that a bad
	// policy, catalog or key leaves the data directory as it was.
	if o.Ops.Listen != "" {
		// Before the audit log, whose rollover reports its failures here.
		a.registry = prometheus.NewRegistry()
		a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		a.metrics = ops.New(a.registry)
	}
	ao := audit.Options{Node: o.Node, Logger: o.Logger, MinBatchDelay: o.AuditBatchDelay, MaxBatchDelay: o.AuditBatchDelay,
		RollSize: o.AuditSegments.RollSize, RollPeriod: o.AuditSegments.RollPeriod, RollMonthly: o.AuditSegments.RollPeriod == 0,
		ArchiveDir: o.AuditSegments.ArchiveDir, SealVerifyRate: cmp.Or(o.Scrub.Rate, scrub.DefaultRate),
		OnSegmentFailure: a.metrics.SegmentFailed}
	if a.audit, err = audit.Open(a.path(AuditFile), ao); err != nil {
		return nil, err
	}
	if err := a.watchDisk(); err != nil {
		return nil, err
	}
	if err := a.startCheckpoints(ctx); err != nil {
		return nil, err
	}
	if o.Dev {
		a.log.Warn("DEV MODE: serving with ephemeral in-memory keys; every audit record is marked dev=true. Not for real PHI.")
	}
	a.grants = btg.NewCache()
	sc := server.Config{
		Catalog: a.catalog, Policy: a.policy, Audit: checkpointedLog{a.audit, a.ckpt, &a.guard}, Keys: a.keys,
		PageSize: o.PageSize, Logger: o.Logger, Version: o.Version, Grants: a.grants, Metrics: a.metrics,
		Volume: a.disk,
	}
	sc.References = a.referencer(ctx)
	if h := o.HTTP; h != nil {
		sc.RateLimit, sc.SessionTimeout = h.RateLimit, h.SessionIdle
		sc.MaxSessions, sc.Refusals = h.MaxSessions, h.Refusals
		// Checked by Options.Check: an error here is a bug, and fails closed.
		if sc.TrustedProxies, err = clientaddr.ParseProxies(h.TrustedProxies); err != nil {
			return nil, err
		}
		hdr, err := clientaddr.ParseHeader(h.TrustedProxyHeader)
		if err != nil {
			return nil, err
		}
		sc.TrustedProxies = sc.TrustedProxies.WithHeader(hdr)
	}
	if a.srv, err = server.New(sc); err != nil {
		return nil, err
	}
	a.followCatalog()
	a.warmResearch(ctx)
	if err := a.startGrantSync(ctx); err != nil {
		return nil, err
	}
	// The initial policy load happened before the audit log was open: check
	// it against the high-water mark the log holds, then record it.
	if err := a.armRollback(ctx); err != nil {
		return nil, err
	}
	for _, ev := range a.pending {
		if err := a.recordPolicyEvent(ctx, ev); err != nil {
			return nil, err
		}
	}
	a.pending = nil
	if a.reload == nil {
		// The built-in policy: loaded once, with no event.
		now := time.Now()
		a.metrics.PolicyLoaded(a.policy.Revision(), "", 0, now)
		a.polState.loaded(now)
	}
	if a.reload != nil {
		wctx, cancel := context.WithCancel(context.Background())
		a.stopRel = cancel
		go a.reload.Watch(wctx, 0)
	}
	if err := a.listen(); err != nil {
		return nil, err
	}
	if err := a.prepareSync(ctx); err != nil {
		return nil, err
	}
	if err := a.serveAdmin(); err != nil {
		return nil, err
	}
	if err := a.startScrub(); err != nil {
		return nil, err
	}
	a.startSync()
	if err := a.announce(); err != nil {
		return nil, err
	}
	a.log.Info("ready", "policy_revision", a.policy.Revision(), "secrets", a.keys.Name(), "keys", a.keys.KeyIDs(), "node", o.Node)
	return a, nil
}

// serveAdmin serves the admin socket D/admin.sock, through which the
// auditor commands reach the log while the App holds its lock. Access records go through
// the checkpointed log like every other record.
func (a *App) serveAdmin() error {
	// No integrity guard here: after a detected break the server releases
	// no payload, but auditors must still be able to verify and export the
	// log to investigate it; their access records are appended to the same
	// chain, after the audit/integrity record, like every other record.
	svc := access.New(a.audit, devMarked{checkpointedLog{a.audit, a.ckpt, nil}, a.o.Dev}, a.o.DataDir, a.log)
	// A bundle is assembled in the data directory, on the audit volume:
	// it must not take the reserve kept for refusals and the shutdown
	// checkpoint.
	svc.LimitSpace(a.disk.Spare)
	// An auditor's walk of a large log must not take the CPUs the reads
	// need (docs/operations.md, "Auditors while serving").
	svc.Pace(a.o.Admin.auditorCPU())
	path := admin.Path(a.o.DataDir)
	cfg := admin.Config{Service: svc, Groups: a.o.Admin.Groups, Logger: a.log}
	if a.syncOpts != nil {
		cfg.Sync = a.syncNow
	}
	cfg.PolicyStatus = func() any { return a.PolicyStatus() }
	s, err := admin.Listen(path, cfg)
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	a.admin, a.access = s, svc
	go func() {
		if err := s.Serve(); err != nil {
			a.log.Error("admin socket stopped", "err", err)
		}
	}()
	a.log.Info("serving the admin socket", "path", path)
	return nil
}

// hostName is the default node name.
func hostName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "custos"
	}
	return h
}

func (a *App) path(file string) string { return filepath.Join(a.o.DataDir, file) }

// openKeys opens dev keys persisted in the data directory, or Vault with
// every key present.
func (a *App) openKeys(ctx context.Context) error {
	if a.o.Dev {
		dev, err := secrets.NewDev()
		if err != nil {
			return err
		}
		// Dev audit and signing keys persist in the data directory so that
		// audit lookups and checkpoint verification work across dev runs.
		if err := dev.PersistIn(a.o.DataDir); err != nil {
			return err
		}
		a.keys = dev
		return nil
	}
	vo := *a.o.Vault
	if vo.Logger == nil {
		vo.Logger = a.log
	}
	v, err := secrets.OpenVault(ctx, vo)
	if err != nil {
		return fmt.Errorf("vault: %w", err)
	}
	a.vault, a.keys = v, v
	if a.keys.Dev() {
		return errors.New("the production path refuses dev keys")
	}
	return nil
}

// openCatalog opens catalog.db read-only and follows it: 'custos import'
// builds a new catalog.db beside it and renames it over the old one; the
// new file is swapped in (if it opens with these keys) and its changes are
// notified to subscribers once the server exists (followCatalog).
func (a *App) openCatalog() error {
	path := a.path(CatalogFile)
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("catalog not found at %s (is the data directory right?); create it with 'custos import --data-dir %s PATH'", path, a.o.DataDir)
	case err != nil:
		return err
	case st.IsDir():
		return fmt.Errorf("catalog at %s is a directory", path)
	}
	var dataKeys store.DataKeys
	if a.vault != nil {
		dataKeys = a.vault
	}
	a.catalog, err = store.OpenLive(path, store.LiveOptions{
		Options: store.Options{Logger: a.log, DataKeys: dataKeys},
		// The default policy relies on the labels the current rules give
		// (a patient's home is not reference data): an older catalog is
		// refused until 'custos store relabel'.
		LabelRules: fhirin.LabelRules,
		// Called only from Watch, started once a.srv exists.
		OnChange: func(c store.Change) {
			a.srv.CatalogChanged(context.Background(), c)
			a.warmResearch(context.Background())
		},
	})
	return err
}

// warmResearch builds every tenant's research aliases for the catalog now
// being served (server.WarmResearchAliases), at the start and after each
// catalog swap, so that the first research page does not build them (~50
// ms of a 10,000-patient tenant's first research page on the 2-core build
// machine in a slow hour). It refuses nothing: a research request whose
// aliases cannot be made is refused on its own.
func (a *App) warmResearch(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a.srv.WarmResearchAliases(ctx); err != nil {
		a.log.Warn("research aliases not built ahead; the first research list builds them", "err", err)
	}
}

func (a *App) followCatalog() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.catalog.Watch(ctx) }()
	a.stopCat = func() { cancel(); <-done }
}

// devMarked appends through Appender with the record's dev set when the
// server runs with ephemeral development keys (--dev), as every record of
// such a server says (docs/audit-format.md, section 1): the access records
// of the auditor commands served through the admin socket were written
// with dev false (TestDevServerMarksAccessRecordsDev).
type devMarked struct {
	access.Appender
	dev bool
}

func (d devMarked) Append(ctx context.Context, e audit.Entry) (audit.Record, error) {
	e.Dev = e.Dev || d.dev
	return d.Appender.Append(ctx, e)
}

// checkpointedLog is the audit log the server appends to: after each
// durable append it tells the checkpointer the new tree size. It is the
// one place where appends reach the checkpointer. Once the integrity guard
// is latched (a scrub pass found the log broken) it refuses every append
// with audit.ErrIntegrity, so the server releases nothing more.
type checkpointedLog struct {
	*audit.Log
	cp    *checkpoint.Checkpointer
	guard *integrity
}

func (l checkpointedLog) Append(ctx context.Context, e audit.Entry) (audit.Record, error) {
	if err := l.guard.check(); err != nil {
		return audit.Record{}, err
	}
	rec, err := l.Log.Append(ctx, e)
	if err == nil {
		l.cp.Notify(int64(rec.Seq))
	}
	return rec, err
}

// startCheckpoints checks the audit tree against every checkpoint anchored
// so far (refusing a rolled-back, truncated or forked log), verifies every
// record after the last one (verifySuffix: refusing an edited record
// there) and starts signing new ones into the local and the external
// anchor. Each anchored checkpoint sets custos_checkpoint_size.
func (a *App) startCheckpoints(ctx context.Context) error {
	origin := a.o.origin()
	anchors := []*checkpoint.Anchor{{Dir: a.o.DataDir}}
	if d := a.o.Checkpoints.AnchorDir; d != "" {
		anchors = append(anchors, &checkpoint.Anchor{Dir: d})
	}
	vkeys, err := checkpoint.VerifierKeys(origin, a.keys, a.keys.SigningVersions()...)
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
	if err := checkpoint.CheckAgainst(ctx, a.audit, entries, verifiers); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// Stopped (SIGTERM, SIGINT) while checking: nothing is known
			// against the log, and saying it does not match its
			// checkpoints would be a false tamper alarm.
			return fmt.Errorf("stopped while checking the audit log against its anchored checkpoints: %w", err)
		}
		var uk *checkpoint.UnknownKeyError
		if errors.As(err, &uk) {
			// Signed by no key this server has: another origin (--node,
			// --deployment) or another signing key (a Vault key trimmed
			// or replaced) is the usual cause, not tampering: lead with
			// the keys and the fix, not with "does not match" (which
			// read as a fork).
			return fmt.Errorf("refusing to serve: the latest anchored checkpoint is signed by a key this server does not have: %s; "+
				"this server signs as origin %q and has the keys %s. Start it with the --deployment and --node the log was served under, "+
				"and the signing key that signed it (every version of it: its min_decryption_version must stay 1); "+
				"if both are right, the checkpoint was not signed by this log's key: keep the files and investigate: %w",
				uk.SignedBy(), origin, keyNames(vkeys), err)
		}
		if errors.Is(err, checkpoint.ErrBadSignature) {
			// A signature by a key this server has that does not
			// verify: a changed checkpoint. Name this server's origin.
			return fmt.Errorf("the audit log does not match its anchored checkpoints; refusing to serve (this server's origin is %q): %w", origin, err)
		}
		return fmt.Errorf("the audit log does not match its anchored checkpoints; refusing to serve: %w", err)
	}
	a.anchors, a.verifiers = anchors, verifiers
	if err := a.verifySuffix(ctx, entries); err != nil {
		return err
	}
	signer, _, err := checkpoint.NewSigner(ctx, origin, a.keys)
	if err != nil {
		return fmt.Errorf("checkpoint signer: %w", err)
	}
	a.audit.SetSealSigner(signer) // seals are signed like checkpoints
	cp := a.o.Checkpoints
	a.ckpt, err = checkpoint.New(checkpoint.Config{
		Origin: origin, Signer: signer, Tree: a.audit, Anchors: anchors,
		Every: cp.Every, Interval: cp.Interval, Logger: a.log,
		Anchored: func(e checkpoint.Entry) { a.metrics.SetCheckpointSize(uint64(e.Size)) },
	})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	a.stopCP, a.ckptErr = cancel, make(chan error, 1)
	go func() { a.ckptErr <- a.ckpt.Run(runCtx) }()
	a.log.Info("audit checkpoints", "origin", origin, "anchored", len(entries), "anchors", len(anchors), "every", cp.Every, "interval", cp.Interval.String())
	return nil
}

// keyNames names verifier keys as signatures do ("origin+hash"), quoted
// and comma-separated, for a message.
func keyNames(vkeys []string) string {
	names := make([]string, len(vkeys))
	for i, k := range vkeys {
		names[i] = strconv.Quote(checkpoint.VerifierKeyName(k))
	}
	return strings.Join(names, ", ")
}

// watchDisk samples the free space of the audit log's volume now and
// every ops.DefaultDiskInterval: below the low watermark /readyz is not
// ready, below the reserve the server refuses new requests.
func (a *App) watchDisk() error {
	d, err := ops.NewDiskWatch(ops.DiskOptions{
		Dir: filepath.Dir(a.path(AuditFile)), Watermark: uint64(a.o.AuditDisk.LowWatermark),
		Reserve: uint64(a.o.AuditDisk.Reserve), Metrics: a.metrics, Logger: a.log,
	})
	if err != nil {
		return fmt.Errorf("audit volume: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.disk, a.stopDisk = d, cancel
	go d.Run(ctx)
	return nil
}

// grantSyncInterval is how often the App picks up break-the-glass grants,
// revocations and reviews, and records uses and events.
const grantSyncInterval = time.Second

// startGrantSync publishes the break-the-glass rules in grants.db, loads
// the active grants and keeps them in sync with the file: every second it
// records the uses made, refuses grants that break the rules, loads the
// grants active now, and writes pending grant events to the audit log.
func (a *App) startGrantSync(ctx context.Context) error {
	rules := a.o.BreakGlass.rules()
	st := btg.New(a.path(GrantsFile), btg.Options{Rules: &rules})
	if err := st.Publish(rules); err != nil {
		return fmt.Errorf("break-the-glass grants (%s): publishing the rules: %w", a.path(GrantsFile), err)
	}
	round := func(ctx context.Context) error {
		uses := a.grants.TakeUses()
		active, pending, keys, err := st.Sync(uses)
		if err != nil {
			a.grants.Return(uses)
			return err
		}
		a.grants.Replace(active)
		if a.keys.Check() != nil {
			// Without fresh keys an event could only be recorded without
			// its patient, and again each second: keep it queued.
			return nil
		}
		var done [][]byte
		for i, ev := range pending {
			if _, err := a.srv.AuditGrantEvent(ctx, ev); err != nil {
				st.Delivered(done)
				return fmt.Errorf("auditing break-the-glass event: %w", err)
			}
			done = append(done, keys[i])
		}
		return st.Delivered(done)
	}
	if all, err := st.All(); err == nil {
		warnGrantsWithoutTenant(a.log, btg.InForceWithoutTenant(all, time.Now()))
	}
	if err := round(ctx); err != nil {
		return fmt.Errorf("break-the-glass grants (%s): %w", a.path(GrantsFile), err)
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
					a.log.Error("final break-the-glass sync failed", "err", err)
				}
				return
			case <-t.C:
				if err := round(context.Background()); err != nil {
					a.log.Warn("break-the-glass sync failed; retrying", "err", err)
				}
			}
		}
	}()
	var once sync.Once
	a.stopBTG = func() { once.Do(func() { close(stop); <-done }) }
	return nil
}

// warnGrantsWithoutTenant tells the operator, once at start-up, about n
// grants that name no tenant and would otherwise be in force: they apply
// nowhere (btg.Grant.Active) and the first sync refuses them
// (btg/refuse, refused=no_tenant). Only the count: no id, no patient.
func warnGrantsWithoutTenant(log *slog.Logger, n int) {
	if n > 0 {
		log.Warn("break-the-glass grants without a tenant apply nowhere and are refused; grant again with 'custos btg grant --tenant'", "grants", n)
	}
}

// Close stops the listeners, the policy watcher and the grant sync (after
// a final round), signs a final checkpoint covering every record, then
// closes the audit log, the catalog and the Vault client: the reverse of
// Open. It may be called more than once; later calls return nil.
func (a *App) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	var errs []error
	a.stopListeners()
	if a.srv != nil {
		// Pending aggregate refusal records, before the final checkpoint.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		a.srv.Close(ctx)
		cancel()
	}
	if a.stopDisk != nil {
		a.stopDisk()
	}
	if a.stopRel != nil {
		a.stopRel()
	}
	if a.stopSync != nil {
		a.stopSync() // a sync in flight is cancelled and records its outcome
	}
	if a.stopBTG != nil {
		a.stopBTG() // last uses and events into the log before it closes
	}
	if a.stopScrub != nil {
		a.stopScrub()
	}
	if a.ckpt != nil {
		// The final checkpoint covers every record appended so far.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		errs = append(errs, a.ckpt.Close(ctx))
		cancel()
		a.stopCP()
	}
	if a.audit != nil {
		errs = append(errs, a.audit.Close())
	}
	if a.stopCat != nil {
		a.stopCat()
	}
	if a.catalog != nil {
		errs = append(errs, a.catalog.Close())
	}
	if a.vault != nil {
		errs = append(errs, a.vault.Close())
	}
	return errors.Join(errs...)
}

// AuditLog is the App's audit log, for inspection (Head, TreeHead) while
// it serves. The App owns it: do not close it or append to it.
func (a *App) AuditLog() *audit.Log { return a.audit }

// Server is the assembled MCP server.
func (a *App) Server() *server.Server { return a.srv }

// Health is the readiness of the App: the audit log answers (its tree head
// reads), a policy is loaded, the audit volume is above its low watermark,
// the keys are fresh, and over OAuth the issuer's JWKS is within
// oauth.jwks_max_staleness. Its details show the audit retention period and
// the oldest record's age (AuditRetention).
func (a *App) Health() *ops.Health {
	h := &ops.Health{Metrics: a.metrics}
	h.AddCheck("audit", func(ctx context.Context) error { return auditReady(ctx, a.audit) })
	h.AddCheck("integrity", a.integrityCheck)
	h.AddCheck("policy", func(context.Context) error {
		if a.policy.Revision() == "" {
			return errors.New("no policy")
		}
		return nil
	})
	h.AddCheck("disk", a.disk.Check)
	h.AddCheck("keys", func(context.Context) error {
		err := a.keys.Check()
		a.metrics.SetKeysStale(err != nil)
		a.metrics.SetKeysRefreshFailing(a.vault != nil && a.vault.RefreshFailing())
		if err != nil {
			// The class of the cause, never the cause itself (Vault's
			// address, paths and answers stay in the log).
			if se := (*secrets.StaleError)(nil); errors.As(err, &se) && se.Kind != "" {
				return ops.NewSafeError("keys stale: " + se.Kind)
			}
			return ops.NewSafeError("keys stale")
		}
		return nil
	})
	if v := a.verifier; v != nil {
		// Past oauth.jwks_max_staleness every token is refused: not ready
		// (custos_ready_check{check="oauth_jwks"} 0) until a fetch succeeds.
		h.AddCheck("oauth_jwks", func(context.Context) error {
			if v.CheckJWKS() != nil {
				return ops.NewSafeError("OAuth signing keys stale: no JWKS fetch succeeded within oauth.jwks_max_staleness; every token is refused")
			}
			return nil
		})
	}
	h.AddDetail("audit_retention", func(ctx context.Context) (any, error) {
		return a.AuditRetention(ctx, time.Now())
	})
	return h
}

// auditLog is what the readiness check "audit" asks of the audit log.
type auditLog interface {
	TreeHead(ctx context.Context) (int64, tlog.Hash, error)
	Broken() error
}

// auditReady is the readiness check "audit": the tree head reads, and no
// seal that failed half-way has latched the log into refusing appends
// (every read would be refused until a restart settles it).
func auditReady(ctx context.Context, l auditLog) error {
	if l.Broken() != nil {
		return ops.NewSafeError("audit log refuses appends: a segment seal failed (restart to settle it)")
	}
	_, _, err := l.TreeHead(ctx)
	return err
}

// AuditRetention is the retention status of the audit log at now: the
// configured period and the oldest record's time and age. custos never
// deletes a record; PastRetention only says that the oldest one is older
// than the period (docs/operations.md, "Retention").
type AuditRetention struct {
	Period           string    `json:"period"`      // Go duration, e.g. "52596h0m0s"
	PeriodDays       float64   `json:"period_days"` // the period in days of 24 h
	Records          uint64    `json:"records"`     // the head seq: records 1..Records are all kept
	OldestRecord     time.Time `json:"oldest_record,omitzero"`
	OldestAge        string    `json:"oldest_record_age,omitempty"` // Go duration, whole seconds
	OldestAgeDays    float64   `json:"oldest_record_age_days"`
	PastRetention    bool      `json:"past_retention"`  // the oldest record is older than Period
	DeletesOldRecord bool      `json:"deletes_records"` // always false: custos never deletes a record
}

// AuditRetention reports the audit log's retention status at now.
func (a *App) AuditRetention(ctx context.Context, now time.Time) (AuditRetention, error) {
	period := a.o.Retention()
	st := AuditRetention{Period: period.String(), PeriodDays: days(period)}
	head, _ := a.audit.Head()
	st.Records = head
	if head == 0 {
		return st, nil
	}
	err := a.audit.Records(ctx, 1, 1, func(_ uint64, canonical []byte) error {
		r, err := audit.Decode(canonical)
		if err != nil {
			return err
		}
		st.OldestRecord = r.Time
		return nil
	})
	if err != nil {
		return st, err
	}
	age := now.Sub(st.OldestRecord).Truncate(time.Second)
	st.OldestAge, st.OldestAgeDays = age.String(), days(age)
	st.PastRetention = age > period
	return st, nil
}

// days is d in days of 24 h, to two decimals.
func days(d time.Duration) float64 {
	return math.Round(d.Hours()/24*100) / 100
}

// referencer is the server's Config.References: the catalog's resources
// named by the keyed ids of their URIs under the resource id key, which
// stays in the store.Referencer. Without the key (a provider that has
// none) it is nil, and a view the policy pseudonymizes keeps no id and
// only the type of its references (fail closed).
func (a *App) referencer(ctx context.Context) server.Referencer {
	k, err := a.keys.IDKey(ctx)
	if err == nil {
		var r *store.Referencer
		if r, err = store.NewReferencer(k.Bytes); err == nil {
			return r
		}
	}
	a.log.Warn("no resource id key: views name no resource by its keyed id", "err", err)
	return nil
}
