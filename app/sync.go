package app

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/store"
)

// SyncRequest asks a running server for one sync now, through its admin
// socket (POST /v1/sync; 'custos sync' next to 'custos serve').
type SyncRequest struct {
	// Base must be the server's own sync.fhir_base (normalized).
	Base string `json:"base"`
	// Full forces a full sync.
	Full bool `json:"full"`
}

// prepareSync loads the FHIR client key and the options every sync of the
// App uses; nothing runs yet. A missing key (Vault Transit, or the Dev key
// file) stops Open.
func (a *App) prepareSync(ctx context.Context) error {
	so := a.o.Sync
	if so.FHIRBase == "" {
		return nil
	}
	var key crypto.Signer
	var kid, auditKey string
	if so.ClientID != "" {
		if a.o.Dev {
			k, id, err := fhirsync.DevKey(a.path(SyncKeyFile))
			if err != nil {
				return fmt.Errorf("sync: dev client key: %w", err)
			}
			key, kid, auditKey = k, id, "fhir-client="+id
		} else {
			s, err := a.vault.FHIRClientSigner(ctx)
			if err != nil {
				return fmt.Errorf("sync: vault: %w", err)
			}
			key, kid, auditKey = s, s.KeyID(), s.AuditKeyID()
		}
	}
	var dataKeys store.DataKeys
	if a.vault != nil {
		dataKeys = a.vault
	}
	importer := so.Importer
	if importer == nil {
		idKey, err := a.keys.IDKey(ctx)
		if err != nil {
			return fmt.Errorf("sync: resource id key: %w", err)
		}
		importer = func(dataKeys store.DataKeys) fhirsync.Importer {
			return FHIRImporter(a.path(CatalogFile), FHIRImport{
				Tenant: so.Tenant, IDKey: idKey, Source: fhirsync.SourceLabel(so.FHIRBase),
				DataKeys: dataKeys, Logger: a.log,
			})
		}
	}
	o := fhirsync.Options{
		Base: so.FHIRBase, Tenant: so.Tenant, StateDir: a.o.DataDir, ClientID: so.ClientID, Key: key, KeyID: kid, Scope: so.Scope,
		Importer: importer(dataKeys), Logger: a.log,
		// The staging directory is on the audit log's volume: a sync
		// stops at its low watermark rather than take the audit's room.
		Space: func(need uint64) error {
			if a.disk == nil {
				return nil
			}
			return a.disk.Room(need)
		},
	}
	rec := fhirsync.AuditRecorder{
		Log: checkpointedLog{a.audit, a.ckpt, &a.guard}, Dev: a.o.Dev,
		Principal: audit.Principal{Sub: "custos-serve", Roles: []string{"sync"}, ClientID: so.ClientID},
	}
	if auditKey != "" {
		rec.Keys = []string{auditKey}
	}
	// A check of the options now, so that a bad one stops Open.
	o.Recorder = rec
	if _, err := fhirsync.New(o); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	a.syncOpts, a.syncRec = &o, rec
	return nil
}

// syncer returns a Syncer of the App's options, recorded as run by who.
func (a *App) syncer(who string, full bool) (*fhirsync.Syncer, error) {
	o := *a.syncOpts
	rec := a.syncRec
	rec.Principal.Sub = who
	o.Recorder, o.Full = rec, full
	return fhirsync.New(o)
}

// syncNow is the admin socket's POST /v1/sync: one sync, now, recorded as
// run by the caller's OS account. It waits for a scheduled sync in flight
// to end only by failing (busy): syncs never overlap.
func (a *App) syncNow(ctx context.Context, caller access.Caller, body []byte) (any, error) {
	var req SyncRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, &access.Error{Code: "bad_request", Message: "sync: the request is not a SyncRequest"}
	}
	if b, err := fhirsync.ParseBase(req.Base); err != nil || b.String() != a.syncOpts.Base {
		return nil, &access.Error{Code: "bad_request", Message: fmt.Sprintf("sync: this server syncs %s (sync.fhir_base), not the base asked for", a.syncOpts.Base)}
	}
	s, err := a.syncer(caller.Account, req.Full)
	if err != nil {
		return nil, err
	}
	res, err := s.Run(ctx)
	if errors.Is(err, fhirsync.ErrBusy) {
		return nil, &access.Error{Code: "busy", Message: "sync: a sync of this base is running (the server's schedule); try again when it ends"}
	}
	return res, err
}

// startSync starts the scheduled sync: the first run with the server, then
// one every Sync.Every (a run that overruns delays the next; runs never
// overlap). Each run is recorded in the App's audit log (sync/start,
// sync/end) through the checkpointed log and its integrity guard, like
// every other record.
func (a *App) startSync() {
	if a.syncOpts == nil {
		return
	}
	every := a.o.Sync.Every
	if every == 0 {
		every = DefaultSyncEvery
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s, err := a.syncer("custos-serve", false)
			if err == nil {
				var res fhirsync.Result
				res, err = s.Run(sctx)
				if err == nil {
					a.log.Info("scheduled FHIR sync", "base", s.Base(), "mode", res.Mode, "full", res.Full,
						"resources", res.Resources, "deleted", res.Deleted, "deletes_ignored", res.DeletesIgnored,
						"read_requests_skipped", res.Skipped.Reads, "search_outcomes_skipped", res.Skipped.Outcomes, "search_includes_skipped", res.Skipped.Includes, "duration", res.Duration)
				}
			}
			if err != nil && sctx.Err() == nil {
				a.log.Error("scheduled FHIR sync failed", "base", a.syncOpts.Base, "err", err)
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	a.stopSync = func() { cancel(); <-done }
	a.log.Info("scheduled FHIR sync", "base", a.syncOpts.Base, "every", every)
}
