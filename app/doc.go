// Package app is the one assembly of the custos application: it turns typed
// Options into a serving custos, the same way for `custos serve`, `custos
// demo`, tools/vaultdev and the load harness (bench/load), so that what is
// tested and measured is what ships.
//
// Open wires the concrete types in a fixed order:
//
//  1. keys: dev keys persisted in the data directory, or HashiCorp Vault;
//  2. catalog: catalog.db, opened read-only and followed (store.Live),
//     refused unless its labels were derived with the reader's current
//     label rules (fhirin.LabelRules; RelabelCatalog brings an older
//     catalog up to date);
//  3. policy: the built-in policy, a directory (dev only) or a signed bundle,
//     watched and reloaded;
//  4. audit log: audit.db, opened (and created if new) only after
//     everything above succeeded, so that a refused start leaves the data
//     directory as it was;
//  5. checkpointer: the audit tree is checked against every anchored
//     checkpoint and every record after the last one is verified (an
//     edited record there refuses the start), then signed checkpoints are
//     written to the anchors;
//  6. grant sync: break-the-glass grants from grants.db;
//  7. server: server.New, fed the audit log through the checkpointer's
//     notifier; then, for a bundle, rollback protection is armed with the
//     high-water mark of the audit log's last policy/load of a bundle (a
//     bundle that does not advance it is refused, on record, unless
//     AllowRollback; one under the operator's floor, MinSequence, is
//     refused even so), the initial load is recorded, then the listeners (MCP
//     over HTTP, ops).
//
// Invariants:
//
//   - Options.Validate (Check) is the one place where the rules of a serving
//     configuration live. It reports every problem, not only the first, each
//     naming its option by key: the dotted path of the configuration file
//     (http.listen, audit.anchor_dir), which the serve flags mirror. The
//     configuration file layer in cmd/ maps its fields and flags onto Options
//     and reports these problems at their line or flag; it adds no rule of
//     its own about what may be served.
//
//   - Open fails closed: when any step fails, everything opened so far is
//     closed again (in reverse order) before Open returns, so no file stays
//     locked and no listener stays bound.
//
//   - Close releases in the reverse order of Open: the listeners stop, the
//     grant sync records its last uses, the checkpointer signs a final
//     checkpoint covering every record, then the audit log, the catalog and
//     the Vault client are closed. Close may be called more than once.
//
//   - Every audit append the server makes reaches the checkpointer
//     (checkpointedLog), and every checkpoint anchored sets the
//     custos_checkpoint_size metric.
//
//   - An integrity error of the checkpointer while serving (a fork or a
//     rollback) stops Serve with that error: no data is released under a
//     log that can no longer be anchored.
//
//   - A scrubber (audit/scrub) re-verifies the whole log on a schedule,
//     from Open to Close. A break it finds latches the integrity guard
//     (scrub.go): /readyz fails its "integrity" check, an audit/integrity
//     record naming the seq is appended and anchored, and every later
//     append of the server is refused with audit.ErrIntegrity, so nothing
//     more is released; the process keeps running, so that the break
//     stays visible, until an operator restarts it.
//
//   - A scheduled FHIR sync (Options.Sync) records sync/start and sync/end
//     through the same checkpointed log and imports through ImportFHIR, the
//     one join of the FHIR reader (fhirin) and the staged streaming import
//     (store) that `custos import` and `custos sync` use too: what is
//     synced is imported exactly as what is imported by hand.
//
//   - Read ahead (readahead.go): ImportFHIR runs the FHIR reader
//     (fhirin.Read and entryOf, and what the import makes of each entry
//     alone: store.EntryOptions.Preparer) in a goroutine of its own, at most
//     about one batch of entries and a quarter of a batch's content bytes
//     ahead of the consumer, store.ImportEntries, which adds the entries and
//     commits the batches; it hands them over in chunks. What it imports is
//     exactly what the serial path, the reader in the consumer's goroutine,
//     imports (TestReadAheadImportsAlike): every read of the catalog by the
//     reader (its callbacks StoredBinary, PlaceBinary, PlaceContext and
//     Match, through settledCatalog: the only state of the consumer it
//     reads) waits at a barrier until the consumer has taken every entry
//     queued before it and made every commit they triggered, and the
//     consumer touches the catalog no more until the reader queues the next
//     entry: no read of the reader runs beside a write transaction, and each
//     sees the catalog the serial path saw at that point of the stream. Read
//     allocates what it yields (fhirin.Item.Body), so nothing queued aliases
//     a buffer the reader reuses. The reader's goroutine is joined before
//     the import returns, however it ends (the end, a read error, a consumer
//     error or too many problems, cancellation), and the consumer's stop
//     cancels the reader's context, so that it stops reading at once, as the
//     serial path did, even where it yields nothing for a while; a panic of
//     the reader is raised again in the consumer's goroutine after the
//     entries queued before it, as the serial path raised it there (the
//     admin socket's net/http server recovers one in a POST /v1/sync), and
//     only if the consumer took them all: one past where the consumer
//     stopped or panicked, which the serial path never reached, leaves the
//     consumer's error or panic as it is
//     (TestReadAheadReaderPanicPastConsumerStop); what the reader sets for
//     the caller (fhirin.Options.Skipped) is read after the join.
//
// The package reads the files its Options name (catalog, audit log, policy,
// principal and token files, TLS certificates), never flags, environment
// variables or configuration files: cmd/ does that and maps them to Options.
package app
