// Package store is custos's resource catalog and content-addressed blob
// store, kept in one bbolt file, together with the custos URI scheme and its
// RFC 6570 templates, the keyed ids of FHIR input, and the imports that fill
// the store: the manifest import and the streaming import of source
// resources (ImportEntries).
//
// # Responsibility
//
// store answers "which resources exist, with which labels" (Get, Page, Count;
// Live follows a catalog replaced while serving and reports what changed)
// and "what are the bytes of this digest" (Blob), and keeps the bytes
// envelope-encrypted at rest when given a DataKeys provider (Reencrypt
// migrates and rewraps). It makes no access
// decision: callers (the server) must obtain a policy decision and commit an
// audit record before they call Blob and release content. Metadata and labels
// are returned to the caller so that it can decide; content is only returned
// by Blob.
//
// # URIs
//
// A resource is named by a URI of one of five families (see ParseURI and
// docs/uris.md):
//
//	fhir://{tenant}/patients/{patient}/{type}/{id}   (any R4 type)
//	fhir://{tenant}/{type}/{id}                      (tenant-level reference data)
//	note://{tenant}/patients/{patient}/notes/{id}
//	report://{tenant}/patients/{patient}/reports/{id}
//	image://{tenant}/patients/{patient}/images/{id}
//	attachment://{tenant}[/patients/{patient}]/attachments/{id}
//
// Patient and id are opaque lowercase UUIDs, never names or record numbers;
// for FHIR input they are keyed ids of the source ids (ResourceID, Namer:
// HMAC-SHA256 under the resource id key, as UUID version 8). ParseURI
// accepts only canonical input, so a resource has exactly one URI string
// and byte-wise comparison of URIs is identity.
//
// # Storage layout (schema version 2)
//
//	bucket "resources": uri -> JSON(Resource), the current version
//	bucket "versions":  uri || 0x00 || uint32be(version) -> JSON(Resource)
//	                    every version ever imported, the current one included
//	bucket "blobs":     SHA-256(content) (32 bytes) -> content, or its
//	                    envelope in an encrypted catalog
//	bucket "ids":       keyed resource id (16 bytes) -> its URI; streaming
//	                    imports only (created by the first); GetByID
//	                    reads it
//	bucket "carried":   keyed id of a carrier (16 bytes) || keyed id of
//	                    an attachment lifted out of it (16 bytes) -> empty;
//	                    streaming imports only: what a carrier carried, so
//	                    that an import updating or deleting the carrier
//	                    retires what it no longer carries
//	bucket "optout":    keyed id of a patient (16 bytes) || keyed id of a
//	                    live Consent of theirs that records an opt-out
//	                    (Entry.OptOut) (16 bytes) -> empty; streaming
//	                    imports only: a patient has opted out iff a key
//	                    starts with their keyed id (patientwide.go)
//	bucket "vip":       keyed id of a patient (16 bytes) || keyed id of
//	                    their live Patient resource whose own labels hold
//	                    "vip" (16 bytes) -> empty; streaming imports only:
//	                    a patient is a VIP iff a key starts with their
//	                    keyed id (patientwide.go)
//	bucket "links":     keyed id of a live FHIR resource (16 bytes) ||
//	                    keyed id of a Binary it links or mentions (16
//	                    bytes) -> empty; streaming imports only (links.go)
//	bucket "linkedby":  the transpose of "links": Binary || resource
//	bucket "meta":      "schema"     -> uint32be(SchemaVersion) = 2
//	                    "encryption" -> "none" | "envelope-v1"
//	                    "kek"        -> DataKeys.KEK(), envelope-v1 only
//	                    "id-key"     -> the version of the resource id key
//	                                    the streaming imports named under
//	                    "settled-txid" -> uint64be(the bbolt transaction id
//	                                    of the last write this custos made
//	                                    to a catalog whose labels were
//	                                    settled: settled.go); a write by an
//	                                    older custos moves the catalog's
//	                                    transaction id past it, and
//	                                    OpenLive refuses the catalog until
//	                                    a streaming import rebuilds the
//	                                    label indexes
//	                    "label-rules" -> uint32be(version) ||
//	                                    uint64be(txid): the oldest version
//	                                    of the label rules
//	                                    (fhirin.LabelRules) a live item of
//	                                    a streaming import may have been
//	                                    labelled with, and, as for
//	                                    "settled-txid", the last write of
//	                                    this custos (labelrules.go);
//	                                    OpenLive refuses an older, missing
//	                                    or outdated one (ErrOldLabelRules)
//	                                    until Relabel
//
// A retired URI (ImportEntries) has no "resources" entry; its newest
// version carries the retirement time (Resource.Retired). The "ids",
// "carried", "optout", "vip", "links" and "linkedby" buckets, meta "id-key" and
// the Resource fields "source", "retired" and "patientWide" were added without a schema
// change: older binaries ignore them (and so do not maintain them: an
// import by an older binary leaves "optout", "vip" and "links" stale; a stale
// "links" pair over-labels, a missing one leaves a label unpropagated
// until the resource is imported again). A catalog without "optout" gets it on its
// next streaming import, built from the bodies of its live Consents; one
// without "vip" gets it then too, from the labels of its live Patients; one
// without "links" (or "linkedby") gets both on its next streaming import,
// built from the bodies of its live FHIR resources (fillLinks: a custos
// attachment URI or a relative Binary/<id>, versioned or not, in a url or
// reference member;
// a Binary named by an absolute URL is indexed when its resource is next
// imported), and that import settles every Binary they name. The import
// that builds an index is renamed over the catalog (ImportStaged) even if
// it changes nothing else, so the build, which reads every live FHIR body
// once, is not repeated (it was, by every import until one changed
// something).
// Attachments imported before "carried" existed are not listed in it: an
// incremental import that drops one from its carrier leaves it live, and
// the next full import of the source retires it (as unmentioned).
//
// Schema version 1 is the same without "encryption" and "kek" and is always
// plaintext; Open still accepts it and leaves it at version 1 until
// Reencrypt records the envelope mode.
//
// # Encryption at rest (envelope-v1)
//
// With Options.DataKeys every blob value is an envelope under its own fresh
// 256-bit data key; the data key is stored only wrapped by the provider's
// key-encryption key (Vault Transit), which never leaves the provider:
//
//	value = "e1" || uint16be(len(wrapped)) || wrapped || nonce || ciphertext
//	    "e1"       2 bytes, format marker (0x65 0x31)
//	    wrapped    1..65535 bytes, opaque (Vault: "vault:vN:<base64>")
//	    nonce      12 bytes, fresh from crypto/rand per blob
//	    ciphertext AES-256-GCM(data key, nonce, content, aad), tag (16 bytes) last
//	aad   = "custos/blob/v1" || 0x00 || SHA-256(content) (the 32-byte bucket key)
//
// The AAD binds each ciphertext to its content address: a value moved to
// another key fails authentication. After decryption Blob still re-hashes the
// plaintext. Failures are told apart: an unparsable or unauthenticated
// envelope, or a hash mismatch, is an *IntegrityError (ErrCorrupt); a
// provider failure (Vault down, sealed, denying, or a damaged wrapped key
// that Vault rejects) is a *KeyError (ErrDataKey and the provider's error).
//
// The mode is recorded in meta and never mixed: Open refuses an encrypted
// catalog without DataKeys (ErrEncrypted) unless Options.MetadataOnly asks
// for its metadata alone (read-only; Blob then returns ErrMetadataOnly,
// as it does for a plaintext catalog opened so), a
// plaintext catalog holding blobs
// with DataKeys (ErrPlaintext) unless Options.Migrate is set for Reencrypt,
// and a KEK name other than the recorded one (ErrKEKMismatch). A new or still
// empty catalog takes the mode of the options it is opened read-write with;
// an encrypted catalog is never downgraded.
//
// Metadata is not encrypted: resource records (URIs, names, titles,
// descriptions, MIME types, sizes, content digests, annotations) and labels stay in the
// clear, because policy decides on them before any key is used. URIs hold
// only opaque ids (no names or record numbers) and labels are policy
// attributes; manifests must keep PHI out of names, titles and descriptions.
// Content digests are SHA-256 of the plaintext, so a party holding a candidate
// content can confirm it is stored; that is inherent to content addressing.
//
// # Invariants
//
//   - Content addressing: every blob is stored under the SHA-256 of its bytes;
//     identical content is stored once. Resource.Digest is "sha256:" + hex of
//     that key and Resource.Size is the blob's length. Blob re-hashes the
//     bytes on every read and returns an *IntegrityError instead of content
//     that does not match (45 CFR 164.312(c), integrity).
//   - Nothing is deleted: blobs and versions are never removed or rewritten;
//     an import only adds blobs, adds versions and moves "resources" forward
//     (164.316(b)(2), retention). Retirement removes a URI from "resources"
//     only, after adding the version that records it. The one exception is Reencrypt, which
//     rewrites a blob's value (plaintext to envelope, or a rewrapped data
//     key) after verifying that the content it encodes is unchanged. Versions of one URI are 1, 2, 3, ... and
//     resources[uri] equals versions[uri, max] for a live URI; a retired
//     URI has no resources entry and versions[uri, max] carries Retired.
//   - Labels.Tenant and Labels.Type equal the corresponding URI segments.
//     Labels.Patient equals the URI's patient segment for manifest imports;
//     for FHIR input it is the SOURCE Patient id and the URI's patient is
//     ResourceID(id key, tenant, "Patient", Labels.Patient) (computed by the
//     import, so they agree by construction); "" for tenant-level resources.
//     No URI, name, title or description of FHIR input carries a source id.
//   - One file, replaced whole: while a Live serves a catalog, the file at
//     its path is only ever replaced by rename (ImportStaged), never written
//     in place; Live swaps in only a file that opens with its options.
//   - All or nothing: ImportEntriesStaged commits batches into a scratch
//     copy and renames it over the catalog only when the whole stream was
//     imported and the synced copy reopens cleanly; on failure the catalog
//     is byte-identical. (ImportEntries alone, on an open store,
//     is not atomic: it is the staged import's building block.)
//     Import validates every manifest line and every file
//     (and, in an encrypted catalog, seals every new blob through the
//     provider) before it writes, then writes in one bbolt transaction.
//     Provider round trips never happen while a transaction is open.
//     Reencrypt likewise computes and verifies everything first and commits
//     once.
//   - Mode integrity: every blob in a catalog is in the recorded mode; Blob
//     and Import check the mode in the same transaction that reads or writes.
//   - Patient-wide labels (docs/import.md, "Patient-wide labels"): after
//     a streaming import, every live item of a streaming import in the
//     compartment of a patient (fhir:// and attachment:// URIs under the
//     patient's keyed id) carries the consent label "opt-out" iff "optout"
//     lists a Consent of that patient, and "optout" lists exactly the live
//     opt-out Consents; every such item carries the sensitivity label
//     "vip" if "vip" lists a Patient of that patient, and "vip" lists
//     exactly the live Patients of streaming imports whose own labels
//     (Resource.OwnSensitivity) hold "vip". Resource.PatientWide is a
//     subset of Labels.Sensitivity holding at most "vip", and holds it
//     only on an item of a VIP that lacks "vip" on its own account; an
//     item of a patient who is no VIP has no PatientWide; a manifest
//     import's items have none. A label change is a new version like any
//     other. TestPatientWideIndexAgreesWithScan holds both indexes and
//     every label against a plain scan of the live catalog.
//   - Link index: "links" lists R || B iff R is a live FHIR resource of a
//     streaming import whose current version's entry named Binary B
//     (Entry.Links; for a resource last written before the index, its body
//     names B as fillLinks reads it), and "linkedby" lists exactly the
//     transposed pairs. An import sets a resource's pairs when it writes
//     it (changed or not) and removes them when it retires it.
//     TestLinkIndexAgreesWithScan holds it against a plain scan of the
//     live bodies. After a streaming import, every live Binary B and every
//     live resource of B's tenant and patient compartment that "linkedby"
//     lists for B have at least the union of their own sensitivity labels
//     (Resource.OwnSensitivity: a patient-wide "vip" is not shared as one's
//     own, so that it leaves with the patient's) (a
//     resource naming B from another compartment is no member); a lifted
//     attachment has at least its carrier's. Labels are only added there
//     (a new version, Relabelled), never removed: a label leaves a
//     component only by imports that write every member without it (a
//     full import holding them, docs/import.md, "Labels").
//   - Label rules version (labelrules.go): meta "label-rules" names a
//     version no newer than that of the rules any live item of a
//     streaming import was labelled with, as the writers state it
//     (EntryOptions.LabelRules, RelabelOptions.Rules): an incremental
//     import lowers it to its own, and only a writer that labels every
//     such item anew raises it (the first streaming import, a full import
//     holding every live streaming item, Relabel, which adds what the
//     rules derive from each stored body and never removes a label).
//     TestLabelRulesVersion.
//   - Unchanged is canonical for FHIR JSON: a streaming import counts a
//     FHIR resource Unchanged, keeping its stored version and bytes, when
//     its record equals the live one but for the content, and the two
//     contents are the same JSON in canonical form (sameCanonical;
//     keepStored reads the stored content back only then). An import into
//     a catalog that holds no resource skips keepStored's lookups: nothing
//     is live but what this import wrote, and dropRepeats removes every
//     entry an earlier batch wrote (TestFreshImportSkipsKeepStoredAlike
//     holds the catalog alike with and without the skip).
//   - Blank imports: an import into a catalog that never held a
//     resource (no version, no "ids" entry, no "carried" pair) skips
//     write's lookups of an entry's earlier URI ("ids"), its last version
//     ("resources", "versions") and the attachments it carried before
//     ("carried"): until it ends the catalog holds only what it wrote,
//     and dropRepeats removes every entry an earlier batch wrote, so they
//     would find nothing (each faulted in a random page of a large
//     bucket: about a seventh of a first import's CPU).
//     TestBlankImportSkipsLookupsAlike holds the catalog alike, every
//     bucket key for key, with and without the skip.
//   - Entries made ahead: what ImportEntries makes of an entry alone
//     (prepareEntry: its URI and keyed id, checkEntry, digests, link ids,
//     or its problem) is pure, and a stream may make it ahead in another
//     goroutine (EntryOptions.Preparer; app.ImportFHIR's reader does); the
//     import takes it only when made with its own Namer and Source, and
//     makes it itself otherwise. TestPreparedEntriesImportAlike holds the
//     catalog and the problems alike, every bucket key for key. Between
//     two entries of its stream ImportEntries touches the store no more:
//     it takes an entry and makes every commit it triggers before it asks
//     for the next (the barrier of app's read-ahead relies on it).
//   - Stored Binaries: a stored entry (Entry.Stored, stored.go) never
//     changes a Binary's content or metadata; it only adds labels, and the
//     import fails unless the Binary is live under the entry's URI (same
//     tenant, same patient) when it is written.
//   - The index of a Live catalog (Index, index.go) is built from the file
//     when Live opens or swaps it in and never changes afterwards: for every
//     tenant, TenantPage yields exactly the file's resources labelled with
//     that tenant, in URI order, and PatientEntries those of one patient
//     (keyed on Labels, never on URI segments); SegmentPatient names the
//     one Labels.Patient of a tenant's resources under a URI patient
//     segment. TestIndexAgreesWithPage holds it against a plain Page walk. Building it costs one decoding
//     pass over the catalog (of the indexed fields only) at open and at
//     each swap, off the request path: ~0.9-2 s and ~41 MB for 100,000
//     resources (docs/benchmarks.md).
//   - No PHI or secrets in errors or logs: errors name manifest lines and
//     fields, URI errors say what is wrong without echoing input, and file
//     content is never quoted.
//
// # Caveats
//
// bbolt allows one process to hold the file read-write; a second Open waits
// Options.Timeout and returns ErrLocked. The server therefore opens the
// catalog ReadOnly (shared lock) through Live, and imports while it serves
// go through ImportStaged, which never writes the served file: it copies it
// (tx.WriteTo, under a shared lock held until the end, so no in-place writer
// can interleave) to a scratch file in the same directory, imports into the
// copy, syncs it and renames it over the catalog; concurrent ImportStaged
// calls serialize on an flock of path+".import.lock". A failed import removes
// the scratch file and leaves the catalog untouched; one killed before it
// could leaves it, and the next import removes it under the lock. Live polls the path
// (DefaultPollInterval), opens a replaced file with its own Options (a file
// that does not open is never swapped in), diffs it against the current one
// by URI (Change), swaps it in, closes the old handle once the calls in
// flight on it return, and reports the Change. Readers of the old file keep
// a consistent view until they close it. An import needs disk space for a
// second copy of the catalog.
// A large manifest import is one transaction, so the imported content is held in
// memory until commit (a few hundred MB for 100,000 small files); the
// streaming import holds about one batch instead, and after every batch and
// every chunk of its closing steps (the retirement of attachments no longer
// carried, the scan of a full import, the label propagation over the link
// index, the patient-wide relabelling, the removal of its scratch buckets)
// drops bbolt's mapping from its resident set once the resident file-backed
// bytes grew by releaseBudget (48 MiB) since it last did, so that no step
// reads a whole bucket into it: the mapping stays under the budget and one
// batch's pages (dropping it after every batch made every batch fault
// back the branch pages of every bucket it reads, and the import's CPU grew
// faster than its input). Reencrypt
// holds every old and new blob value in memory the same way.
//
// bbolt keeps freed pages in the file, with their old bytes: rewriting a
// blob in place would leave its plaintext (or its key wrapped under an old
// KEK version) in the file. Reencrypt therefore ends by compacting: it
// copies every key and value into a fresh file in the same directory, syncs
// it and renames it over the catalog, then reopens (on failure the
// re-encryption stays committed and the error says the old values may
// remain; run Reencrypt again). This scrubs catalog.db, not the disk: the
// old file's blocks, filesystem snapshots, backups and copies made before
// the migration still hold plaintext and must be destroyed or rotated
// separately. During the commit and compaction every other call on the Store
// waits; a second process could take the file between the rename and the
// reopen, in which case the Store is left closed (the reopen error says so).
// The rename assumes POSIX semantics (replacing an open file).
package store
