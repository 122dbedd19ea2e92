package app

import (
	"context"
	"crypto"
	"fmt"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/store"
)

// startSync loads the FHIR client key and starts the scheduled sync: the
// first run with the server, then one every Sync.Every (a run that
// overlaps its successor's start delays it; runs never overlap). Each run
// is recorded in the App's audit log (sync/start, sync/end) through the
// checkpointed log and its integrity guard, like every other record.
func (a *App) startSync(ctx context.Context) error {
	so := a.o.Sync
	if so.FHIRBase == "" {
		return nil
	}
	if so.Importer == nil {
		return fmt.Errorf("sync: Options.Sync.Importer is required with a FHIR base")
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
	rec := fhirsync.AuditRecorder{
		Log: checkpointedLog{a.audit, a.ckpt, &a.guard}, Dev: a.o.Dev,
		Principal: audit.Principal{Sub: "custos-serve", Roles: []string{"sync"}, ClientID: so.ClientID},
	}
	if auditKey != "" {
		rec.Keys = []string{auditKey}
	}
	var dataKeys store.DataKeys
	if a.vault != nil {
		dataKeys = a.vault
	}
	s, err := fhirsync.New(fhirsync.Options{
		Base: so.FHIRBase, Tenant: so.Tenant, StateDir: a.o.DataDir, ClientID: so.ClientID, Key: key, KeyID: kid,
		Importer: so.Importer(dataKeys), Recorder: rec, Logger: a.log,
	})
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	every := so.Every
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
			res, err := s.Run(sctx)
			if err != nil {
				if sctx.Err() != nil {
					return
				}
				a.log.Error("scheduled FHIR sync failed", "base", s.Base(), "err", err)
			} else {
				a.log.Info("scheduled FHIR sync", "base", s.Base(), "mode", res.Mode, "full", res.Full,
					"resources", res.Resources, "deleted", res.Deleted, "duration", res.Duration)
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	a.stopSync = func() { cancel(); <-done }
	a.log.Info("scheduled FHIR sync", "base", s.Base(), "every", every)
	return nil
}
