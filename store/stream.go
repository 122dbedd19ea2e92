package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// Defaults of EntryOptions.
const (
	// DefaultBatchEntries is how many entries ImportEntries commits at most
	// per write transaction. The mapping is released once it grew by
	// releaseBudget (until 2026-12-07: after each batch, when these figures
	// were taken), and the resident set between releases grows with a
	// batch: every entry touches
	// random leaves of five buckets, and the kernel maps up to 64 KiB of
	// cached neighbours with each page it faults in; smaller batches cost
	// CPU (commits, and faulting the released pages back in). Measured end
	// to end on 99,833 resources (docs/benchmarks.md, "Streaming import of
	// FHIR input"): peak RSS 195-205 MiB at 256 entries, 135-140 MiB at
	// 128, 113-115 MiB at 96, 92-99 MiB at 64 (7% more CPU than 96).
	DefaultBatchEntries = 96
	// DefaultBatchBytes is how many content bytes ImportEntries holds at
	// most before it commits a batch.
	DefaultBatchBytes = 32 << 20
	// DefaultSource is the Resource.Source of entries when
	// EntryOptions.Source is empty.
	DefaultSource = "fhir"
)

// EntryOptions configure ImportEntries.
type EntryOptions struct {
	// Namer names the entries (tenant and resource id key). Required.
	Namer *Namer
	// Source labels what this import's resources came from (Resource.Source;
	// [a-z0-9:._-], at most 64 bytes, no PHI), e.g. "fhir" or
	// "sync:<name>". "" means DefaultSource. A full import retires only
	// resources of its tenant and source.
	Source string
	// Full makes the stream the complete content of the source for the
	// tenant: every resource of that tenant and source it does not mention
	// is retired after the last batch. Its Deleted entries retire what they
	// name, as for any import (the full import would retire it anyway, as
	// unmentioned). A full stream must hold at least one entry that is not
	// Deleted: one of deletions only is refused (ErrBadEntry), since it
	// would retire everything.
	Full bool
	// Progress, if not nil, is called from the calling goroutine about
	// every 1,000 entries with the number of entries read so far and total
	// 0 (a stream's length is unknown), and once at the end with done ==
	// total.
	Progress func(done, total int)
	// BatchEntries and BatchBytes bound a batch (zero: DefaultBatchEntries,
	// DefaultBatchBytes): the memory an import holds is about one batch.
	BatchEntries int
	BatchBytes   int64
	// Now stamps retirements; nil means time.Now.
	Now func() time.Time
	// LabelRules is the version of the rules the entries' labels were
	// derived with (fhirin.LabelRules; zero: none stated). The catalog
	// keeps the oldest version its live items may carry (labelrules.go):
	// the import lowers a recorded version to this one, records it in a
	// catalog without streaming data, and, when Full and every live item
	// of a streaming import is of its tenant and source and was written by
	// it (none kept or only relabelled as a stored Binary), records it
	// whatever the catalog had.
	LabelRules uint32
}

func (o *EntryOptions) validate() error {
	if o.Namer == nil {
		return errors.New("store: import entries: no namer")
	}
	if o.Source == "" {
		o.Source = DefaultSource
	}
	if len(o.Source) > 64 || strings.Trim(o.Source, "abcdefghijklmnopqrstuvwxyz0123456789:._-") != "" {
		return errors.New("store: import entries: source must be [a-z0-9:._-], at most 64 bytes")
	}
	if o.BatchEntries <= 0 {
		o.BatchEntries = DefaultBatchEntries
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// noEntries is the reason an import of no entry is refused.
const noEntries = "no entries: the input holds no resource and no deletion, only what imports nothing " +
	"(an empty Bundle, a search's outcomes alone, requests that only read: GET or HEAD without a resource), so there is nothing to import"

// ImportEntries imports a stream of source resources of one tenant
// (EntryOptions.Namer) into the store, in batches: each batch is validated,
// its new blobs sealed (encrypted catalog: outside any transaction) and
// then written in one write transaction. Memory stays about one batch
// (BatchEntries, BatchBytes), whatever the stream's length: the entries seen
// so far (to find an entry named twice, and, with Full, what the stream did
// not mention) are kept in a scratch bucket of the catalog file, removed at
// the end.
//
// ImportEntries on its own is NOT all or nothing: a failure leaves the
// batches before it committed. Use ImportEntriesStaged, which imports into
// a scratch copy and replaces the catalog only with a complete, verified
// copy; ImportEntries is its building block.
//
// ImportEntries takes an entry, and makes every commit it triggers,
// before it asks the stream for the next one, and while it waits for that
// one it touches the store no more: a stream that reads the store between
// its elements (app.ImportFHIR's reader, read ahead in a goroutine of its
// own behind a barrier) sees every batch its earlier entries ended
// committed, and no write transaction open.
//
// Every entry is named by the Namer (keyed ids; never a source id in a URI,
// name, title or description) and checked (checkEntry: FHIR JSON whose
// resourceType is the entry's type, attachment bytes matching their MIME
// type, known label values). A resource (type and id) may appear more than
// once only as an exact repeat: the same patient, labels, MIME type and
// lastUpdated, and the same content (FHIR JSON compared in canonical form:
// keys sorted, whitespace and string escapes aside, numbers as written;
// other content byte for byte), or two deletions. A repeat is imported
// once (the first occurrence) and counted Repeated; any other second
// occurrence, and a resource both deleted and imported, is a problem
// naming both Wheres. Invalid entries are reported as *EntryError values
// (ErrBadEntry) naming their Where, up to a cap; after the first one
// nothing more is written. An error from the stream itself is returned as
// it is (the reader's errors name the input).
//
// A URI whose content or metadata changed gets a new version; identical
// entries are Unchanged, and so is a FHIR resource whose content differs
// from its live version's only in bytes, not in canonical form (the
// stored version and bytes are kept; keepStored). A Deleted entry, a resource whose URI changed
// (its patient changed), a lifted attachment (Type "Attachment" with a
// Carrier) that its carrier no longer carries when the stream updates or
// deletes the carrier, and, with Full, every resource of the tenant and
// source the stream did not mention, are retired (Retired): a new version
// carrying the retirement time, and no longer listed or readable. Nothing
// is deleted. Which attachments a carrier carries is kept in the catalog
// (bucket "carried") by the imports that lift them; a Binary is a resource
// of its own and is not retired with a carrier that linked it. The catalog
// records the id key's version and refuses another (ErrIDKeyChanged).
//
// The consent label "opt-out" is the catalog's: the live Consents that
// record an opt-out (Entry.OptOut) are kept in bucket "optout", and every
// live item of their patients carries the label, none of any other
// patient; an import that changes a patient's opt-out relabels the
// patient's live items it did not write, with a new version each
// (Relabelled; patientwide.go, relabelPatientWide). A live Patient whose
// own labels hold "vip" is kept in bucket "vip" and gives every live item
// of its patient the sensitivity label "vip" the same way.
//
// Labels follow Binaries across imports: the Binaries each live FHIR
// resource names (Entry.Links) are kept in buckets "links" and
// "linkedby"; after the last batch and the retirements, every Binary the
// import wrote, relabelled or saw named, and every live resource of its
// compartment naming it, gets the union of their sensitivity labels, to a
// fixed point over the catalog, with a new version for each item that
// lacked one (Relabelled; links.go, propagateLinks).
func (s *Store) ImportEntries(ctx context.Context, entries iter.Seq2[Entry, error], opts EntryOptions) (ImportReport, error) {
	if s.readOnly {
		return ImportReport{}, errors.New("store: import into a read-only store")
	}
	if err := opts.validate(); err != nil {
		return ImportReport{}, err
	}
	imp := &entryImport{s: s, opts: opts, pending: map[[16]byte]pendingEntry{}}
	if err := imp.begin(); err != nil {
		return ImportReport{}, err
	}
	if imp.buildOptOut || imp.buildVIP {
		if err := imp.fillPatientWide(ctx); err != nil {
			return ImportReport{}, err
		}
	}
	if imp.buildLinks {
		if err := imp.fillLinks(ctx); err != nil {
			return ImportReport{}, err
		}
	}
	start := time.Now()
	n, kept := 0, 0
	for e, err := range entries {
		if err != nil {
			return ImportReport{}, err
		}
		n++
		if !e.Deleted {
			kept++
		}
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return ImportReport{}, err
			}
			imp.progress(n, 0)
		}
		if !imp.add(&e, n) {
			break // too many problems to list
		}
		if len(imp.batch) >= opts.BatchEntries || imp.batchBytes >= opts.BatchBytes || len(imp.deletes)+len(imp.stored) >= opts.BatchEntries {
			if err := imp.flush(ctx); err != nil {
				return ImportReport{}, err
			}
		}
	}
	if err := imp.probs.err(); err != nil {
		s.log.Warn("import failed", "entries", n, "err", err)
		return ImportReport{}, err
	}
	if n == 0 {
		// What reads as no entry (fhirin): an empty Bundle, a search's
		// outcomes alone, and requests that read (GET, HEAD) without a
		// resource, a batch of them say. The reader does not say which
		// the input held: the message names all three, and no content.
		return ImportReport{}, &EntryError{Where: "input", Reason: noEntries}
	}
	if opts.Full && kept == 0 {
		// A full import keeps exactly what it holds: with nothing to keep it
		// would retire every resource of the tenant and source (an export
		// that failed to write its output files, say). Refused, like an
		// empty input.
		return ImportReport{}, &EntryError{Where: "input", Reason: fmt.Sprintf(
			"a full import holds no resource to keep, only deletions (%d): it would retire every resource of the tenant and source; import deletions without full", n)}
	}
	if err := imp.flush(ctx); err != nil {
		return ImportReport{}, err
	}
	if err := imp.retireUncarried(ctx); err != nil {
		return ImportReport{}, err
	}
	if err := imp.checkKept(ctx); err != nil {
		return ImportReport{}, err
	}
	if opts.Full {
		if err := imp.retireUnmentioned(ctx); err != nil {
			return ImportReport{}, err
		}
	}
	if err := imp.propagateLinks(ctx); err != nil {
		return ImportReport{}, err
	}
	if err := imp.relabelPatientWide(ctx); err != nil {
		return ImportReport{}, err
	}
	if err := imp.dropSeen(ctx); err != nil {
		return ImportReport{}, err
	}
	if opts.Full && !imp.partial && len(imp.kept) == 0 {
		// Every live item of a streaming import is this import's, each
		// labelled by its rules.
		err := s.update(func(tx *bolt.Tx) error {
			if v, why := labelRules(tx, tx.ID()-1); why != "" || v != opts.LabelRules {
				s.markedRules = true
			}
			return putLabelRules(tx, opts.LabelRules)
		})
		if err != nil {
			return ImportReport{}, err
		}
	}
	if imp.buildLinks && imp.buildOptOut && imp.buildVIP {
		// Every label index was built anew by this import and every label
		// settled (fillLinks, fillPatientWide, the batches): only now, at
		// its end, is the catalog marked settled.
		if err := s.update(markSettled); err != nil {
			return ImportReport{}, err
		}
	}
	imp.rep.Lines = n
	imp.progress(n, n)
	s.builtIndex = s.builtIndex || imp.buildLinks || imp.buildOptOut || imp.buildVIP
	r := imp.rep
	s.log.Info("import committed", "elapsed", time.Since(start).Round(time.Millisecond), "entries", r.Lines, "created", r.Created,
		"updated", r.Updated, "unchanged", r.Unchanged, "retired", r.Retired, "relabelled", r.Relabelled, "bytes", r.Bytes)
	return r, nil
}

// streamFillPercent is the fill factor of the nodes a streaming batch
// splits. Keys arrive in random order across batches (digests, keyed ids),
// and bbolt re-splits every node a commit touches at this threshold: at
// bbolt's default of one half, a catalog of 100,000 resources grew to
// 515 MB; fuller nodes leave less slack for later inserts but far fewer
// pages.
const streamFillPercent = 0.8

// entryImport is the state of one ImportEntries.
type entryImport struct {
	s     *Store
	opts  EntryOptions
	mode  string
	probs entryProblems
	// pending maps the keyed ids of the queued batch to their occurrence
	// and their index in batch (-1 for a deletion); bucketImportSeen holds
	// the occurrences of the batches written.
	pending map[[16]byte]pendingEntry

	batch      []entryRecord
	batchBytes int64
	deletes    []deletion
	stored     []storedEntry
	rep        ImportReport
	lastProg   int
	// buildOptOut is set by begin when the catalog has no opt-out index.
	buildOptOut bool
	// buildVIP is set by begin when the catalog has no vip index.
	buildVIP bool
	// buildLinks is set by begin when the catalog has no link index.
	buildLinks bool
	// touched are the Binaries propagateLinks must settle.
	touched touchedSet
	// kept are the kept entries (Entry.Kept) by keyed id; in a full
	// import, keptAlso the attachments they carry, by keyed id, and
	// keptLinked the attachment URIs their lifted attachments name
	// (checkKept).
	kept       map[[16]byte]keptEntry
	keptAlso   map[[16]byte]struct{}
	keptLinked map[string]struct{}
	// delta, if not nil, counts the labels each new version of a relabel
	// adds or removes (Relabel's report).
	delta *labelDelta
	// partial is set when a live item of a streaming import may keep
	// labels this import did not derive: a full import's walk met one of
	// another tenant or source (retireUnmentioned), or the import relabelled
	// a stored Binary (addStored). A full import records its label rules
	// version only without it.
	partial bool
	// fresh is set by begin when the catalog holds no resource: until the
	// import ends it then holds only what this import writes, and
	// dropRepeats removes every entry an earlier batch wrote, so no entry
	// of a batch has a live version and keepStored has nothing to compare
	// (it would look every entry up: a tenth of a first import's CPU).
	fresh bool
	// blank is set by begin when the catalog holds no version, no id
	// entry and no carried pair: it never held a resource. Until the
	// import ends every version, id entry and carried pair is then this
	// import's, and dropRepeats removes every entry an earlier batch
	// wrote, so write's lookups of an entry's earlier URI, its last
	// version and what it carried before find nothing, and write skips
	// them (each would fault in a random page of a large bucket).
	blank bool
}

// bucketImportSeen is a streaming import's scratch bucket: keyed id ->
// occurrence (encoded) of every entry written so far. ImportEntries removes
// it at the end (and a stale one left by a failed import at the start).
var bucketImportSeen = []byte("import-seen")

// bucketImportCarriers is a streaming import's scratch bucket: keyed id ->
// empty for every entry written so far that the carried index (bucketCarried)
// lists as a carrier, i.e. whose attachments retireUncarried must check.
// retireUncarried empties and removes it (and begin a stale one).
var bucketImportCarriers = []byte("import-carriers")

// deletion is a queued Deleted entry.
type deletion struct {
	id    [16]byte
	where string
}

// pendingEntry is an entry of the queued batch: its occurrence and its
// index in entryImport.batch (-1 for a deletion).
type pendingEntry struct {
	occ   occurrence
	index int
}

// occurrence is what an import keeps of an entry it queued or wrote, to
// tell a later entry of the same resource that repeats it (imported once)
// from one that contradicts it (refused): the digest of its catalog record
// without content digest and size (zero for a deletion), the keyed id of
// its patient (zero for tenant-level data and deletions), the digest of its
// content as written (the blob's key; zero for a deletion) and its Where.
type occurrence struct {
	meta    [sha256.Size]byte
	patient [16]byte
	content [sha256.Size]byte
	where   string
}

// encode is the occurrence's value in bucketImportSeen:
// meta (32 bytes) || patient (16) || content (32) || where.
func (o occurrence) encode() []byte {
	b := make([]byte, 0, len(o.meta)+len(o.patient)+len(o.content)+len(o.where))
	b = append(b, o.meta[:]...)
	b = append(b, o.patient[:]...)
	b = append(b, o.content[:]...)
	return append(b, o.where...)
}

func decodeOccurrence(b []byte) (occurrence, error) {
	var o occurrence
	if len(b) < len(o.meta)+len(o.patient)+len(o.content) {
		return o, fmt.Errorf("%w: a record of the import's scratch bucket is short", ErrCorrupt)
	}
	b = b[copy(o.meta[:], b):]
	b = b[copy(o.patient[:], b):]
	b = b[copy(o.content[:], b):]
	o.where = string(b)
	return o, nil
}

// repetition is how a later entry of a resource relates to the first one.
type repetition int

const (
	// repeats: the same entry; the first is imported, the later skipped.
	repeats repetition = iota
	// repeatsIfCanonical: the same but for the content's bytes; a repeat
	// if both are FHIR JSON of the same canonical form (sameCanonical).
	repeatsIfCanonical
	// contradicts: the import is refused.
	contradicts
)

// compare tells how later relates to first (entries of one resource) and,
// unless it repeats first, the problem to report at later's Where. The
// problem names first's Where and never content.
func (first occurrence) compare(later occurrence) (repetition, string) {
	deleted := func(o occurrence) bool { return o.meta == [sha256.Size]byte{} }
	reason := "the same resource appears twice in the input, with different content or labels"
	rel := contradicts
	switch {
	case deleted(first) != deleted(later):
		reason = "the same resource is both deleted and imported in the input"
	case first.patient != later.patient:
		reason = "the same resource appears twice in the input, in different patient compartments"
	case first.meta != later.meta:
	case first.content != later.content:
		rel = repeatsIfCanonical
	default:
		return repeats, ""
	}
	return rel, reason + " (first at " + first.where + ")"
}

// sameCanonical reports whether a and b are JSON of the same canonical
// form (canonicalJSON).
func sameCanonical(a, b []byte) bool {
	ca, err1 := canonicalJSON(a)
	cb, err2 := canonicalJSON(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

// canonicalJSON re-encodes the JSON value b holds with encoding/json:
// object keys sorted, no insignificant whitespace, strings re-escaped
// without HTML escaping, numbers as written (json.Number, so 6.10 and 6.1
// differ). Whitespace, key order and string escapes therefore do not
// count. A value with a \u escape of a UTF-16 surrogate has no canonical
// form (errSurrogateEscape): encoding/json decodes every lone surrogate
// to U+FFFD, which would make "\ud800", "\udbff" and "\ufffd" one string.
// Pure: no I/O.
func canonicalJSON(b []byte) ([]byte, error) {
	if surrogateEscape(b) {
		return nil, errSurrogateEscape
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("store: more than one JSON value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// errSurrogateEscape is canonicalJSON's refusal of a value with a \u
// escape of a UTF-16 surrogate; such content is compared by its bytes.
var errSurrogateEscape = errors.New("store: a \\u escape of a UTF-16 surrogate has no canonical form")

// surrogateEscape reports whether b holds a \u escape of a UTF-16
// surrogate (\uD800 to \uDFFF), paired or not. An escaped backslash
// followed by such text ("\\ud800") counts too: the answer errs toward
// comparing bytes.
func surrogateEscape(b []byte) bool {
	for i := bytes.Index(b, []byte(`\u`)); i >= 0 && i+3 < len(b); {
		if c, d := b[i+2], b[i+3]; (c == 'd' || c == 'D') && strings.IndexByte("89abcdefABCDEF", d) >= 0 {
			return true
		}
		j := bytes.Index(b[i+2:], []byte(`\u`))
		if j < 0 {
			break
		}
		i += 2 + j
	}
	return false
}

// entryProblems collects entry problems up to maxReportedProblems.
type entryProblems struct {
	list []error
	more int
}

func (p *entryProblems) add(where, reason string) bool {
	return p.addError(&EntryError{Where: where, Reason: reason})
}

func (p *entryProblems) addError(e *EntryError) bool {
	if len(p.list) >= maxReportedProblems {
		p.more++
		return false
	}
	p.list = append(p.list, e)
	return true
}

func (p *entryProblems) err() error {
	switch {
	case len(p.list) == 0:
		return nil
	case len(p.list) == 1 && p.more == 0:
		return p.list[0]
	case p.more > 0:
		return errors.Join(append(p.list, fmt.Errorf("%w: %d more problems not shown", ErrBadEntry, p.more))...)
	}
	return errors.Join(p.list...)
}

func (imp *entryImport) progress(done, total int) {
	if imp.opts.Progress != nil && (done-imp.lastProg >= 1000 || done == total) {
		imp.lastProg = done
		imp.opts.Progress(done, total)
	}
}

// begin checks the encryption mode and records (or checks) the id key's
// version in meta, creating the id index.
func (imp *entryImport) begin() error {
	keyID := imp.opts.Namer.keyID
	return imp.s.update(func(tx *bolt.Tx) error {
		mode, _, err := encryption(tx)
		if err != nil {
			return err
		}
		if err := imp.s.checkMode(mode); err != nil {
			return err
		}
		imp.mode = mode
		switch rules, why := labelRules(tx, tx.ID()-1); {
		case !streamingData(tx):
			// Every streaming item will be this import's.
			err = putLabelRules(tx, imp.opts.LabelRules)
		case why == "":
			err = putLabelRules(tx, min(rules, imp.opts.LabelRules))
		}
		if err != nil {
			return err
		}
		if settled(tx, tx.ID()-1) != nil {
			// A custos older than this one wrote to the catalog after
			// this one last settled it (or before any did): its label
			// indexes may be stale, so they are rebuilt like a catalog's
			// written before them, and every label settled anew.
			for _, name := range labelIndexes {
				if tx.Bucket(name) != nil {
					if err := tx.DeleteBucket(name); err != nil {
						return fmt.Errorf("store: remove a stale label index: %w", err)
					}
				}
			}
		}
		if b := tx.Bucket(bucketResources); b == nil {
			imp.fresh = true
		} else if k, _ := b.Cursor().First(); k == nil {
			imp.fresh = true
		}
		imp.blank = imp.fresh && emptyBuckets(tx, bucketVersions, bucketIDs, bucketCarried)
		meta := tx.Bucket(bucketMeta)
		switch got := meta.Get(metaIDKeyKey); {
		case got == nil:
			if err := meta.Put(metaIDKeyKey, []byte(keyID)); err != nil {
				return fmt.Errorf("store: write meta: %w", err)
			}
		case string(got) != keyID:
			return fmt.Errorf("%w: catalog %q, import %q", ErrIDKeyChanged, got, keyID)
		}
		for _, name := range [][]byte{bucketIDs, bucketCarried} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("store: create bucket: %w", err)
			}
		}
		if tx.Bucket(bucketLinks) == nil || tx.Bucket(bucketLinkedBy) == nil {
			// A catalog written before the link index: fillLinks builds
			// it before the first batch.
			imp.buildLinks = true
			for _, name := range [][]byte{bucketLinks, bucketLinkedBy} {
				if tx.Bucket(name) != nil {
					if err := tx.DeleteBucket(name); err != nil {
						return fmt.Errorf("store: remove a partial link index: %w", err)
					}
				}
				if _, err := tx.CreateBucket(name); err != nil {
					return fmt.Errorf("store: create bucket: %w", err)
				}
			}
		}
		if tx.Bucket(bucketOptOut) == nil {
			// A catalog written before the opt-out index: buildOptOut
			// fills it before the first batch.
			imp.buildOptOut = true
			if _, err := tx.CreateBucket(bucketOptOut); err != nil {
				return fmt.Errorf("store: create bucket: %w", err)
			}
		}
		if tx.Bucket(bucketVIP) == nil {
			// A catalog written before the vip index: buildVIP fills it
			// before the first batch.
			imp.buildVIP = true
			if _, err := tx.CreateBucket(bucketVIP); err != nil {
				return fmt.Errorf("store: create bucket: %w", err)
			}
		}
		for _, name := range [][]byte{bucketImportSeen, bucketImportCarriers, bucketImportOptOut} {
			if tx.Bucket(name) != nil {
				if err := tx.DeleteBucket(name); err != nil {
					return fmt.Errorf("store: remove a stale import bucket: %w", err)
				}
			}
			if _, err := tx.CreateBucket(name); err != nil {
				return fmt.Errorf("store: create bucket: %w", err)
			}
		}
		return nil
	})
}

// add validates entry number n and queues it; false when the problem list
// is full.
func (imp *entryImport) add(e *Entry, n int) bool {
	p := e.prepared
	if p == nil || p.namer != imp.opts.Namer || p.source != imp.opts.Source {
		p = prepareEntry(e, n, imp.opts.Namer, imp.opts.Source)
	}
	if p.prob != nil {
		return imp.probs.addError(p.prob)
	}
	u, id, where, occ, rec := p.u, p.id, p.where, p.occ, p.rec
	switch {
	case e.Kept:
		return imp.addKept(e, u, id, where, n)
	case e.Stored:
		return imp.addStored(e, u, id, where)
	}
	if first, dup := imp.pending[id]; dup {
		rel, reason := first.occ.compare(occ)
		if rel == repeatsIfCanonical && u.Scheme == SchemeFHIR && sameCanonical(imp.batch[first.index].body, e.Body) {
			rel = repeats
		}
		if rel != repeats {
			return imp.probs.add(where, reason)
		}
		imp.rep.Repeated++ // the first is queued in this batch
		return true
	}
	if len(imp.probs.list) > 0 {
		// Once nothing more is written, entries are only validated: no
		// record of them is kept, so memory stays bounded.
		return true
	}
	if e.Deleted {
		imp.pending[id] = pendingEntry{occ, -1}
		imp.deletes = append(imp.deletes, deletion{id, where})
		return true
	}
	imp.pending[id] = pendingEntry{occ, len(imp.batch)}
	rec.id, rec.occ = id, occ
	rec.res.Digest = formatDigest(rec.digest)
	imp.batch = append(imp.batch, rec)
	imp.batchBytes += int64(len(e.Body))
	return true
}

// preparedEntry is what add makes of an entry from the entry alone and
// the import's namer and source, before it looks at the catalog or at
// earlier entries: its URI and keyed id, its Where, and, unless it is
// Kept, Stored or Deleted, its checked record (checkEntry) and
// occurrence; or its problem. Pure (no I/O, no state of the import), so
// that a stream may make it ahead of the import, in another goroutine
// (EntryOptions.Preparer).
type preparedEntry struct {
	namer  *Namer
	source string
	u      URI
	id     [16]byte
	where  string
	occ    occurrence
	rec    entryRecord
	prob   *EntryError // the entry's problem (Where set); nothing else is
}

// prepareEntry is the preparedEntry of entry number n under namer and
// source.
func prepareEntry(e *Entry, n int, namer *Namer, source string) *preparedEntry {
	p := &preparedEntry{namer: namer, source: source, where: e.Where}
	if p.where == "" {
		p.where = "entry " + strconv.Itoa(n)
	}
	problem := func(reason string) *preparedEntry {
		p.prob = &EntryError{Where: p.where, Reason: reason}
		return p
	}
	u, err := namer.URI(e.Type, e.ID, e.Patient)
	if err != nil {
		return problem(strings.TrimPrefix(err.Error(), "store: "))
	}
	p.u, p.id, p.occ = u, uuid.MustParse(u.ID), occurrence{where: p.where}
	if e.Kept || e.Stored || e.Deleted {
		return p
	}
	rec, prob := checkEntry(e, u, source)
	if prob != nil {
		prob.Where = p.where
		p.prob = prob
		return p
	}
	if e.Type == TypeAttachmentSource && e.Carrier.ID != "" {
		cu, err := namer.URI(e.Carrier.Type, e.Carrier.ID, "")
		if err != nil {
			return problem("carrier: " + strings.TrimPrefix(err.Error(), "store: "))
		}
		rec.carrier = uuid.MustParse(cu.ID)
	}
	rec.digest = sha256.Sum256(e.Body)
	rec.optOut = e.OptOut && e.Type == "Consent" && u.Patient != ""
	rec.vipHint = slices.Contains(e.PatientWide, SensitivityVIP) && u.Patient != ""
	rec.binary = e.Type == "Binary"
	rec.noOverwrite = e.NoOverwrite
	if u.Scheme == SchemeFHIR {
		var prob string
		if rec.links, prob = linkIDs(namer, e); prob != "" {
			return problem(prob)
		}
	}
	meta, err := metaDigest(rec.res)
	if err != nil {
		return problem(err.Error())
	}
	p.occ.meta, p.occ.content = meta, rec.digest
	if u.Patient != "" {
		p.occ.patient = uuid.MustParse(u.Patient)
	}
	p.rec = rec
	return p
}

// Preparer returns the function that makes, for an entry of an import
// with these options, what ImportEntries makes of it from the entry alone
// (preparedEntry: its URI, its check, its digests), and keeps it with
// the entry: ImportEntries with the same Namer and Source then takes it
// as made instead of making it again. It is pure and safe to call from
// another goroutine than the import's, so a stream can make it while the
// import commits an earlier batch (app.ImportFHIR's read-ahead). The
// entry must not change afterwards; one without a Where is left as it is
// (its Where is its number in the stream).
func (o EntryOptions) Preparer() (func(*Entry), error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	return func(e *Entry) {
		if e.Where != "" {
			e.prepared = prepareEntry(e, 0, o.Namer, o.Source)
		}
	}, nil
}

// metaDigest is SHA-256 of the catalog record r would get, without its
// content digest and size (Digest and Size are those of the content,
// which compare tells apart): URI, texts, MIME type, lastUpdated, labels.
func metaDigest(r Resource) ([sha256.Size]byte, error) {
	r.Digest, r.Size = "", 0
	b, err := json.Marshal(r)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("store: encode resource: %w", err)
	}
	return sha256.Sum256(b), nil
}

// dropRepeats compares the queued batch with the entries earlier batches
// wrote (bucketImportSeen): it drops from the batch each entry that
// repeats its first occurrence (counted Repeated) and returns a
// contradiction as an *EntryError. Where only the canonical form of FHIR
// JSON can tell, it reads the first occurrence's content back with Blob
// (in an encrypted catalog decrypted outside any transaction).
func (imp *entryImport) dropRepeats(ctx context.Context) error {
	type recheck struct {
		i      int
		first  occurrence
		reason string
	}
	var rechecks []recheck
	dropped := make([]bool, len(imp.batch))
	droppedDel := make([]bool, len(imp.deletes))
	droppedStored := make([]bool, len(imp.stored))
	n := 0
	err := imp.s.view(func(tx *bolt.Tx) error {
		seen := tx.Bucket(bucketImportSeen)
		// earlier returns the first occurrence of id if an earlier batch
		// wrote one.
		earlier := func(id [16]byte) (occurrence, bool, error) {
			v := seen.Get(id[:])
			if v == nil {
				return occurrence{}, false, nil
			}
			first, err := decodeOccurrence(v)
			return first, true, err
		}
		for i := range imp.batch {
			rec := &imp.batch[i]
			first, ok, err := earlier(rec.id)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			switch rel, reason := first.compare(rec.occ); {
			case rel == repeats:
				dropped[i] = true
				n++
			case rel == repeatsIfCanonical && rec.uri.Scheme == SchemeFHIR:
				rechecks = append(rechecks, recheck{i, first, reason})
			default:
				return &EntryError{Where: rec.occ.where, Reason: reason}
			}
		}
		for i, d := range imp.deletes {
			first, ok, err := earlier(d.id)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if rel, reason := first.compare(occurrence{where: d.where}); rel != repeats {
				return &EntryError{Where: d.where, Reason: reason}
			}
			droppedDel[i] = true
			n++
		}
		for i, st := range imp.stored {
			first, ok, err := earlier(st.id)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if rel, reason := compareStored(first, st.occ); rel != repeats {
				return &EntryError{Where: st.occ.where, Reason: reason}
			}
			droppedStored[i] = true
			n++
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range rechecks {
		first, err := imp.s.Blob(ctx, formatDigest(r.first.content))
		if err != nil {
			return err
		}
		if !sameCanonical(first, imp.batch[r.i].body) {
			return &EntryError{Where: imp.batch[r.i].occ.where, Reason: r.reason}
		}
		dropped[r.i] = true
		n++
	}
	if n == 0 {
		return nil
	}
	imp.rep.Repeated += n
	kept := imp.batch[:0]
	for i, rec := range imp.batch {
		if dropped[i] {
			imp.batchBytes -= int64(len(rec.body))
			continue
		}
		kept = append(kept, rec)
	}
	clear(imp.batch[len(kept):]) // drop the bodies
	imp.batch = kept
	keptDel := imp.deletes[:0]
	for i, d := range imp.deletes {
		if !droppedDel[i] {
			keptDel = append(keptDel, d)
		}
	}
	imp.deletes = keptDel
	keptStored := imp.stored[:0]
	for i, st := range imp.stored {
		if !droppedStored[i] {
			keptStored = append(keptStored, st)
		}
	}
	imp.stored = keptStored
	return nil
}

// keepStored finds the FHIR resources of the queued batch whose live
// version differs from them only in the bytes of the content, the same
// JSON in canonical form (sameCanonical: key order, whitespace and string
// escapes aside), and makes their records name the stored content instead
// of theirs, so that write counts them Unchanged and keeps the stored
// version, its bytes and its link pairs (one source writing Coding members
// in struct order, another through maps, made a new version of the same
// resource on every alternation). Only such a candidate's stored content
// is read (Blob: in an encrypted catalog decrypted outside any
// transaction); an entry whose bytes are the live version's, or whose
// metadata differ (labels, patient, MIME type, lastUpdated, source),
// reads nothing. Attachments are compared byte for byte, as before. Of
// a NoOverwrite entry of this source whose record differs otherwise (new
// labels), the stored content is read too, and its digest kept in
// sameContentAs when it is the same in canonical form: write's 409 is for
// other content only.
func (imp *entryImport) keepStored(ctx context.Context) error {
	type candidate struct {
		i    int
		prev Resource
		// contentOnly: the records differ, and only a NoOverwrite entry's
		// conflict asks whether the contents do (sameContentAs).
		contentOnly bool
	}
	if imp.fresh && keepStoredSkipsFresh {
		return nil // see entryImport.fresh
	}
	var cands []candidate
	err := imp.s.view(func(tx *bolt.Tx) error {
		res, optout, vip := tx.Bucket(bucketResources), tx.Bucket(bucketOptOut), tx.Bucket(bucketVIP)
		for i := range imp.batch {
			rec := &imp.batch[i]
			if rec.uri.Scheme != SchemeFHIR {
				continue
			}
			v := res.Get([]byte(rec.res.URI))
			if v == nil || bytes.Contains(v, etagMember(rec.res.Digest)) {
				continue // new, or the same bytes: write compares the rest
			}
			var prev Resource
			if err := decodeResource(v, &prev); err != nil {
				return err
			}
			if prev.Digest == rec.res.Digest || prev.MIMEType != MIMEFHIR {
				continue
			}
			// The record write would compare, as the patient-wide
			// indexes label it now (patientIndex.label), with the stored
			// content.
			r := rec.res
			r.Digest, r.Size, r.Version = prev.Digest, prev.Size, prev.Version
			if rec.uri.Patient != "" {
				p := uuid.MustParse(rec.uri.Patient)
				if lists(optout, p[:]) {
					r.Labels.Consent = []string{ConsentOptOut}
				}
				setVIP(&r, lists(vip, p[:]) || rec.vipHint)
			}
			same, err := sameResource(r, prev)
			if err != nil {
				return err
			}
			if same || rec.noOverwrite != "" && prev.Source == imp.opts.Source {
				cands = append(cands, candidate{i, prev, !same})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range cands {
		stored, err := imp.s.Blob(ctx, c.prev.Digest)
		if err != nil {
			return err
		}
		rec := &imp.batch[c.i]
		if !sameCanonical(stored, rec.body) {
			continue
		}
		if c.contentOnly {
			rec.sameContentAs = c.prev.Digest
			continue
		}
		d := sha256.Sum256(stored) // Blob checked it is the digest's
		imp.batchBytes += int64(len(stored) - len(rec.body))
		rec.body, rec.digest, rec.occ.content = stored, d, d
		rec.res.Digest, rec.res.Size = c.prev.Digest, c.prev.Size
	}
	return nil
}

// emptyBuckets reports whether every bucket of names is absent or holds
// no key.
func emptyBuckets(tx *bolt.Tx, names ...[]byte) bool {
	for _, name := range names {
		if b := tx.Bucket(name); b != nil {
			if k, _ := b.Cursor().First(); k != nil {
				return false
			}
		}
	}
	return true
}

// writeSkipsBlank lets a test run write's lookups in a blank import too
// (TestBlankImportSkipsLookupsAlike: the same catalog).
var writeSkipsBlank = true

// keepStoredSkipsFresh lets a test run keepStored's lookups in a fresh
// import too (TestFreshImportSkipsKeepStoredAlike: the same catalog).
var keepStoredSkipsFresh = true

// etagMember is Resource.Digest d as its JSON encoding holds it: a
// stored record holding it names content d (keepStored's shortcut, which
// spares decoding the record of an entry whose bytes did not change).
func etagMember(d string) []byte { return []byte(`"etag":"` + d + `"`) }

// markSeen records the occurrence of id in the scratch bucket of entries
// written. dropRepeats has already removed every entry an earlier batch
// wrote, so id is new to the bucket.
func markSeen(seen *bolt.Bucket, id [16]byte, occ occurrence) error {
	if seen.Get(id[:]) != nil {
		return errors.New("store: import: an entry would be written twice")
	}
	if err := seen.Put(id[:], occ.encode()); err != nil {
		return fmt.Errorf("store: put seen: %w", err)
	}
	return nil
}

// flush seals (encrypted catalog) and writes the queued batch.
func (imp *entryImport) flush(ctx context.Context) error {
	if len(imp.batch) == 0 && len(imp.deletes) == 0 && len(imp.stored) == 0 {
		return nil
	}
	if err := imp.dropRepeats(ctx); err != nil {
		return err
	}
	if err := imp.keepStored(ctx); err != nil {
		return err
	}
	batch := imp.batch
	blobValue := func(i int) []byte { return batch[i].body }
	if imp.mode == EncryptionEnvelope {
		contents := make([][]byte, len(batch))
		digests := make([][sha256.Size]byte, len(batch))
		for i := range batch {
			contents[i], digests[i] = batch[i].body, batch[i].digest
		}
		sealed, err := imp.s.sealNew(ctx, contents, digests, newProgress(nil, 0), 0)
		if err != nil {
			return err
		}
		blobValue = func(i int) []byte { return sealed[batch[i].digest] }
	}
	now := imp.opts.Now().UTC()
	err := imp.s.update(func(tx *bolt.Tx) error {
		m, _, err := encryption(tx)
		if err != nil {
			return err
		}
		if m != imp.mode {
			return errors.New("store: encryption mode changed during import; import again")
		}
		return imp.write(tx, blobValue, now)
	})
	if err != nil {
		return err
	}
	clear(imp.batch) // drop the bodies
	imp.batch, imp.batchBytes, imp.deletes, imp.stored = imp.batch[:0], 0, imp.deletes[:0], imp.stored[:0]
	clear(imp.pending)
	imp.s.release()
	return nil
}

// eachStoredPage calls fn with the live resources of the catalog being
// imported into, diffPage at a time in URI order, and releases the
// mapping's pages after each (such a walk reads every resource through
// the mapping); it stops at fn's first error, or when ctx is done.
func (imp *entryImport) eachStoredPage(ctx context.Context, fn func(page []Resource) error) error {
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := imp.s.Page(after, diffPage)
		if err != nil {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		imp.s.release()
		if len(page) < diffPage {
			return nil
		}
		after = page[len(page)-1].URI
	}
}

// releaseBudget is how many bytes of the file mapping release lets
// become resident before it drops them (a variable so that a test can make
// it small). Dropping the whole mapping after every batch, as release did
// until 2026-12-07, made every batch fault back in the branch pages of
// every bucket it reads (and, with each fault, the kernel's fault-around
// neighbours): about 55 us of CPU a fault, and a batch's faults grew with
// the catalog (3.3 an entry at 10,710 entries, 4.6 at 53,480), so the
// import's CPU grew faster than its input (docs/benchmarks.md, "A large
// Bundle's CPU"). With a budget the pages a batch faults in stay for the
// next ones, and the mapping's part of the resident set stays under the
// budget plus one batch's pages (up to about 30 MiB). 48 MiB: a 50 MB
// Bundle's import 13 s of CPU instead of 16-19, 99,833 NDJSON resources
// 153 MiB peak RSS (137 MiB before; 188 MiB at a budget of 64 MiB, too
// near the 200 MB target).
var releaseBudget int64 = 48 << 20

// release drops the file mapping's pages from the resident set
// (releaseResident) while no transaction of s is open, once they grew by
// releaseBudget since it last did; always where the resident file-backed
// bytes cannot be read (residentFileBytes < 0).
func (s *Store) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	mapped := residentFileBytes()
	if mapped >= 0 && mapped-s.mappedAtRelease < releaseBudget {
		return
	}
	var size int64
	if s.db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil }) == nil {
		releaseResident(s.db, size)
	}
	s.mappedAtRelease = residentFileBytes()
}

// write writes the batch and the deletions in tx: blobs in digest order and
// resources in URI order (appends, see writeEntries).
func (imp *entryImport) write(tx *bolt.Tx, blobValue func(int) []byte, now time.Time) error {
	res, vers, blobs, ids := tx.Bucket(bucketResources), tx.Bucket(bucketVersions), tx.Bucket(bucketBlobs), tx.Bucket(bucketIDs)
	seen, carried, carriers := tx.Bucket(bucketImportSeen), tx.Bucket(bucketCarried), tx.Bucket(bucketImportCarriers)
	optout, links := imp.patientIndex(tx), imp.linksOf(tx)
	for _, b := range []*bolt.Bucket{res, vers, blobs, ids, seen, carried, carriers, optout.optout, optout.vip, optout.queue, links.fwd, links.rev} {
		b.FillPercent = streamFillPercent
	}
	if err := imp.indexBatchPatientWide(tx); err != nil {
		return err
	}
	// noteCarrier queues id for retireUncarried if it carried attachments
	// before (or, earlier in this import, carries some now).
	noteCarrier := func(id [16]byte) error {
		if k, _ := carried.Cursor().Seek(id[:]); k == nil || !bytes.HasPrefix(k, id[:]) {
			return nil
		}
		if err := carriers.Put(id[:], nil); err != nil {
			return fmt.Errorf("store: put carrier: %w", err)
		}
		return nil
	}
	batch := imp.batch
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(batch[a].digest[:], batch[b].digest[:]) })
	for n, i := range order {
		if n > 0 && batch[order[n-1]].digest == batch[i].digest {
			continue
		}
		if blobs.Get(batch[i].digest[:]) != nil {
			continue
		}
		v := blobValue(i)
		if v == nil {
			return fmt.Errorf("%w: blob %s disappeared during import", ErrCorrupt, formatDigest(batch[i].digest))
		}
		if err := blobs.Put(batch[i].digest[:], v); err != nil {
			return fmt.Errorf("store: put blob: %w", err)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(batch[a].res.URI, batch[b].res.URI) })
	for _, i := range order {
		rec := &batch[i]
		if err := markSeen(seen, rec.id, rec.occ); err != nil {
			return err
		}
		imp.rep.Bytes += rec.res.Size
		// A resource whose URI changed (its patient changed) retires the
		// old one, if this import's source may write it: another
		// source's is refused as at its own URI (below), which this
		// retirement skipped (until 2026-12-06 a second source moved the
		// first's resource into another patient's compartment).
		// In a blank import (entryImport.blank) nothing has an earlier
		// version, an id entry or carried attachments but what this import
		// wrote, and dropRepeats removed every entry an earlier batch
		// wrote: the lookups below would find nothing.
		skip := imp.blank && writeSkipsBlank
		var old []byte
		if !skip {
			old = ids.Get(rec.id[:])
		}
		if old != nil && string(old) != rec.res.URI {
			if prev, live, err := lastVersion(res, vers, string(old)); err != nil {
				return err
			} else if live && otherSource(prev.Source, imp.opts.Source) {
				return &EntryError{Where: rec.occ.where, Reason: heldByAnotherSource}
			} else if live && rec.noOverwrite != "" {
				// In another compartment: not the same resource.
				return overwriteConflict(rec)
			}
			ok, err := imp.retire(tx, string(old), now)
			if err != nil {
				return err
			}
			if ok {
				imp.rep.Retired++
			}
		}
		if err := ids.Put(rec.id[:], []byte(rec.res.URI)); err != nil {
			return fmt.Errorf("store: put id: %w", err)
		}
		if rec.carrier != ([16]byte{}) {
			if err := carried.Put(append(rec.carrier[:], rec.id[:]...), nil); err != nil {
				return fmt.Errorf("store: put carried: %w", err)
			}
		} else if skip {
			// What rec carries was lifted by this import: retireUncarried
			// would retire nothing of it.
		} else if err := noteCarrier(rec.id); err != nil {
			return err
		}
		var prev *Resource
		var live bool
		if !skip {
			var err error
			if prev, live, err = lastVersion(res, vers, rec.res.URI); err != nil {
				return err
			}
		}
		if live && otherSource(prev.Source, imp.opts.Source) {
			return &EntryError{Where: rec.occ.where, Reason: heldByAnotherSource}
		}
		// The same content is the same FHIR JSON in canonical form, as for
		// Unchanged (keepStored): until 2026-12-06 the bytes, and a
		// server's re-export with other key order and a new label was a
		// 409 where the same bytes were an update.
		if live && rec.noOverwrite != "" && (prev.Source != imp.opts.Source || prev.Digest != rec.res.Digest && prev.Digest != rec.sameContentAs || prev.MIMEType != rec.res.MIMEType) {
			return overwriteConflict(rec)
		}
		// The link index: a resource's pairs as its entry names them (a
		// resource not live before has none to remove); the Binaries of
		// a resource or a Binary written are settled after the last
		// batch (of an unchanged one only a Binary it names anew).
		linked := func(written bool) error {
			switch {
			case rec.binary:
				if written {
					links.touch(rec.id[:])
				}
			case rec.uri.Scheme == SchemeFHIR && (live || len(rec.links) > 0):
				return links.set(rec.id[:], rec.links, written)
			}
			return nil
		}
		r := rec.res
		if rec.uri.Patient != "" {
			p := uuid.MustParse(rec.uri.Patient)
			if err := optout.label(&r, p[:], rec.vipHint); err != nil {
				return err
			}
		}
		switch {
		case prev == nil:
			r.Version = 1
			imp.rep.Created++
		case live:
			r.Version = prev.Version
			same, err := sameResource(r, *prev)
			if err != nil {
				return err
			}
			if same {
				if err := linked(false); err != nil {
					return err
				}
				imp.rep.Unchanged++
				continue
			}
			r.Version++
			imp.rep.Updated++
		default: // retired before, back now
			r.Version = prev.Version + 1
			imp.rep.Updated++
		}
		if err := linked(true); err != nil {
			return err
		}
		if err := putLive(res, vers, r); err != nil {
			return err
		}
	}
	for _, d := range imp.deletes {
		if err := markSeen(seen, d.id, occurrence{where: d.where}); err != nil {
			return err
		}
		if err := noteCarrier(d.id); err != nil {
			return err
		}
		uri := ids.Get(d.id[:])
		if uri == nil {
			imp.rep.Unchanged++ // never imported: nothing to retire
			imp.rep.DeletedAbsent++
			continue
		}
		if prev, live, err := lastVersion(res, vers, string(uri)); err != nil {
			return err
		} else if live && otherSource(prev.Source, imp.opts.Source) {
			return &EntryError{Where: d.where, Reason: heldByAnotherSource}
		}
		ok, err := imp.retire(tx, string(uri), now)
		if err != nil {
			return err
		}
		if ok {
			imp.rep.Retired++
			imp.rep.Deleted++
		} else {
			imp.rep.Unchanged++ // retired already
			imp.rep.DeletedAbsent++
		}
	}
	return imp.writeStored(tx, optout)
}

// heldByAnotherSource is the problem of an entry naming a live resource
// that another source of the tenant imported. A tenant is one id
// namespace: two sources that use the same ids (two EHRs that both number
// patients from 1) would otherwise merge their patients, one source's
// data landing in the other's patient's compartment. Each such source
// needs a tenant of its own.
const heldByAnotherSource = "the resource is live in the catalog from another source of this tenant; a tenant is one id namespace, so a second source with the same ids needs a tenant of its own (or retire the first source's copy with a full import of it)"

// overwriteConflict is the problem of rec, a conditional update or
// create that matched nothing (Entry.NoOverwrite), whose id is that of a
// live resource it is not the same content of (FHIR's 409 Conflict).
// Until 2026-12-06 fhirin refused it for any live resource of that id,
// its own earlier import included, and a re-import of the same Bundle
// failed where its search did not find what its first import wrote.
func overwriteConflict(rec *entryRecord) error {
	return &EntryError{Where: rec.occ.where, Path: rec.noOverwrite, Reason: "the conditional update or create found no resource, and the resource of the id it would be created under is live in the catalog with other content, in another patient compartment, or of another source or none (FHIR 409 Conflict): it would overwrite a resource its search did not find; give the resource another id, or a search that finds it"}
}

// otherSource reports whether a live resource of source held cannot be
// written by an import of source imp: held names another source (a
// resource written before sources were recorded, "", is anyone's).
func otherSource(held, imp string) bool {
	return held != "" && held != imp
}

// lastVersion returns the newest version of uri and whether it is live (in
// resources); nil if the URI was never imported.
func lastVersion(res, vers *bolt.Bucket, uri string) (*Resource, bool, error) {
	var r Resource
	if v := res.Get([]byte(uri)); v != nil {
		if err := decodeResource(v, &r); err != nil {
			return nil, false, err
		}
		return &r, true, nil
	}
	c := vers.Cursor()
	prefix := append([]byte(uri), 0)
	k, v := c.Seek(versionKey(uri, 1<<32-1))
	if k == nil {
		k, v = c.Last()
	} else if !bytes.Equal(k, versionKey(uri, 1<<32-1)) {
		k, v = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) || len(k) != len(prefix)+4 {
		return nil, false, nil
	}
	if err := decodeResource(v, &r); err != nil {
		return nil, false, err
	}
	return &r, false, nil
}

// retire retires the live resource uri at now: a new version carrying the
// time, and no entry in resources. false if uri is not live.
func retire(res, vers *bolt.Bucket, uri string, now time.Time) (bool, error) {
	v := res.Get([]byte(uri))
	if v == nil {
		return false, nil
	}
	var r Resource
	if err := decodeResource(v, &r); err != nil {
		return false, err
	}
	r.Version++
	r.Retired = now
	enc, err := json.Marshal(r)
	if err != nil {
		return false, fmt.Errorf("store: encode resource: %w", err)
	}
	if err := vers.Put(versionKey(uri, r.Version), enc); err != nil {
		return false, fmt.Errorf("store: put version: %w", err)
	}
	if err := res.Delete([]byte(uri)); err != nil {
		return false, fmt.Errorf("store: retire: %w", err)
	}
	return true, nil
}

// putLive writes r as version r.Version of r.URI and as its live
// record: every writer of a live version (the imports, the opt-out and
// stored-Binary relabels) goes through it, so that the two never differ.
func putLive(res, vers *bolt.Bucket, r Resource) error {
	enc, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: encode resource: %w", err)
	}
	if err := vers.Put(versionKey(r.URI, r.Version), enc); err != nil {
		return fmt.Errorf("store: put version: %w", err)
	}
	if err := res.Put([]byte(r.URI), enc); err != nil {
		return fmt.Errorf("store: put resource: %w", err)
	}
	return nil
}

// setOptOut sets or clears the consent label "opt-out" of r, keeping its
// other consent labels sorted, and nil when none is left.
func setOptOut(r *Resource, out bool) {
	c := slices.DeleteFunc(slices.Clone(r.Labels.Consent), func(l string) bool { return l == ConsentOptOut })
	if out {
		c = append(c, ConsentOptOut)
		slices.Sort(c)
	}
	if len(c) == 0 {
		c = nil
	}
	r.Labels.Consent = c
}

// seenDropChunk is how many keys of the scratch bucket dropSeen deletes
// per transaction (a variable so that a test can make it small).
var seenDropChunk = 4096

// dropSeen removes the scratch bucket of entries seen: it deletes its keys
// in chunks of seenDropChunk, one transaction each, releasing the mapping
// after each (Store.release), and then the empty bucket. bbolt's
// DeleteBucket of the full bucket would read every one of its pages
// through the mapping in one transaction (to free them), putting the whole
// bucket and the neighbouring pages the kernel faults in with them in the
// resident set at once: the import's peak RSS before this.
func (imp *entryImport) dropSeen(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done := false
		err := imp.s.update(func(tx *bolt.Tx) error {
			seen := tx.Bucket(bucketImportSeen)
			keys := make([][]byte, 0, seenDropChunk)
			c := seen.Cursor()
			for k, _ := c.First(); k != nil && len(keys) < seenDropChunk; k, _ = c.Next() {
				keys = append(keys, bytes.Clone(k))
			}
			if len(keys) == 0 {
				done = true
				return tx.DeleteBucket(bucketImportSeen)
			}
			for _, k := range keys {
				if err := seen.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("store: remove the import's scratch bucket: %w", err)
		}
		imp.s.release()
		if done {
			return nil
		}
	}
}

// retireUnmentioned retires every live resource of the tenant and source
// whose keyed id the stream did not name, in batches; a kept resource
// (Entry.Kept) and what it carries or links are named (keeps).
func (imp *entryImport) retireUnmentioned(ctx context.Context) error {
	tenant := imp.opts.Namer.tenant
	var gone []string
	err := imp.eachStoredPage(ctx, func(page []Resource) error {
		return imp.s.view(func(tx *bolt.Tx) error {
			seen := tx.Bucket(bucketImportSeen)
			for _, r := range page {
				if r.Labels.Tenant != tenant || r.Source != imp.opts.Source {
					imp.partial = imp.partial || r.Source != ""
					continue
				}
				u, err := ParseURI(r.URI)
				if err != nil {
					return fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
				}
				id := uuid.MustParse(u.ID)
				if seen.Get(id[:]) == nil && !imp.keeps(u) {
					gone = append(gone, r.URI)
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	now := imp.opts.Now().UTC()
	for len(gone) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk := gone[:min(len(gone), imp.opts.BatchEntries)]
		gone = gone[len(chunk):]
		err := imp.s.update(func(tx *bolt.Tx) error {
			for _, uri := range chunk {
				ok, err := imp.retire(tx, uri, now)
				if err != nil {
					return err
				}
				if ok {
					imp.rep.Retired++
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		imp.s.release()
	}
	return nil
}

// retireUncarried retires the lifted attachments that a carrier named by
// this import (imported or deleted) carried before and no longer carries:
// for every carrier queued in bucketImportCarriers, each attachment the
// carried index lists for it that this import did not write is retired
// and leaves the index. A deleted carrier carries nothing; a carrier that
// moved to another patient carries what its new version carries (the
// attachments it still carries moved with it, retiring their old URIs).
// It works in chunks of BatchEntries carriers, one transaction each,
// draining the scratch bucket, and then removes it.
func (imp *entryImport) retireUncarried(ctx context.Context) error {
	now := imp.opts.Now().UTC()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done := false
		err := imp.s.update(func(tx *bolt.Tx) error {
			ids := tx.Bucket(bucketIDs)
			seen, carried, carriers := tx.Bucket(bucketImportSeen), tx.Bucket(bucketCarried), tx.Bucket(bucketImportCarriers)
			var queued, gone [][]byte
			c := carriers.Cursor()
			for k, _ := c.First(); k != nil && len(queued) < imp.opts.BatchEntries; k, _ = c.Next() {
				queued = append(queued, bytes.Clone(k))
			}
			if len(queued) == 0 {
				done = true
				return tx.DeleteBucket(bucketImportCarriers)
			}
			for _, carrier := range queued {
				cc := carried.Cursor()
				for k, _ := cc.Seek(carrier); k != nil && bytes.HasPrefix(k, carrier); k, _ = cc.Next() {
					att := k[len(carrier):]
					if seen.Get(att) != nil {
						continue // carried by this import
					}
					gone = append(gone, bytes.Clone(k))
					uri := ids.Get(att)
					if uri == nil {
						return fmt.Errorf("%w: a carried attachment has no id entry", ErrCorrupt)
					}
					ok, err := imp.retire(tx, string(uri), now)
					if err != nil {
						return err
					}
					if ok {
						imp.rep.Retired++
					}
				}
			}
			for _, k := range gone {
				if err := carried.Delete(k); err != nil {
					return fmt.Errorf("store: delete carried: %w", err)
				}
			}
			for _, k := range queued {
				if err := carriers.Delete(k); err != nil {
					return fmt.Errorf("store: delete carrier: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		imp.s.release()
		if done {
			return nil
		}
	}
}
