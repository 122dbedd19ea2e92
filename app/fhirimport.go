package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/store"
)

// FHIRImport configures ImportFHIR: where standard FHIR input goes and under
// which key its resources are named.
type FHIRImport struct {
	// Tenant the resources belong to. Required.
	Tenant string
	// IDKey is the resource id key (secrets: Vault KV, or the dev key file
	// of the data directory). Required; it names every imported resource.
	IDKey secrets.Key
	// Full makes the input the complete content of Source for Tenant: what
	// it does not mention is retired (store.EntryOptions.Full).
	Full bool
	// Source labels the import's origin ("" = store.DefaultSource); a full
	// import retires only resources of its own source.
	Source string
	// DataKeys encrypts new blobs at rest (nil: plaintext catalog).
	DataKeys store.DataKeys
	// Timeout bounds the wait for another import's lock (0: store default).
	Timeout time.Duration
	// Progress is called with the number of entries read (total 0 until the
	// end); nil for none.
	Progress func(done, total int)
	// Logger receives operational messages, never content; nil discards.
	Logger *slog.Logger
}

// errStopped ends fhirin.Read when the store stops consuming entries (it
// found a problem and reports that instead).
var errStopped = errors.New("app: import stopped by the catalog")

// FHIRReport is what ImportFHIR did: the catalog's report of what it
// imported, and what the reader left out of the input on purpose
// (fhirin.Skipped: Bundle entries that carry nothing to import), which
// none of the catalog's counts holds. Its JSON is the catalog report's
// members and "skipped".
type FHIRReport struct {
	store.ImportReport
	Skipped fhirin.Skipped `json:"skipped"`
}

// ImportFHIR reads the FHIR input at path (a Bulk export directory or its
// $export manifest, Bundles, or single resources; fhirin.Detect) as a stream
// and imports it into the catalog at catalogPath through the staged import:
// all or nothing, with memory bounded by one batch, while a server may be
// serving the catalog. A custos manifest is refused with
// fhirin.ErrCustosManifest: the caller routes it to store.ImportStaged.
func ImportFHIR(ctx context.Context, catalogPath, path string, o FHIRImport) (FHIRReport, error) {
	namer, err := store.NewNamer(o.Tenant, o.IDKey.Bytes, o.IDKey.ID)
	if err != nil {
		return FHIRReport{}, err
	}
	eopts := store.EntryOptions{Namer: namer, Source: o.Source, Full: o.Full, Progress: o.Progress, LabelRules: fhirin.LabelRules}
	if tuneEntries != nil {
		tuneEntries(&eopts)
	}
	// Set by the read whose stream the catalog took whole; read after the
	// import returned, when the reader's goroutine was joined (readAhead).
	var skipped fhirin.Skipped
	// The reader's context: read ahead, the consumer's stop cancels it,
	// so that a reader that yields nothing for a while (entries it leaves
	// out) stops at once, as in the serial path (readAhead.cancel).
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rep, err := store.ImportEntriesStagedFrom(ctx, catalogPath, func(st *store.Store) iter.Seq2[store.Entry, error] {
		var ra *readAhead // nil: the serial path, the reader in the consumer's goroutine
		if readAheadOn {
			ra = newReadAhead(eopts)
			ra.cancel = cancel
		}
		cat := settledCatalog{st, ra} // every read of the catalog by the reader waits at the barrier
		opts := fhirin.Options{Link: namer.Link, Logger: o.Logger, StoredBinary: storedBinary(cat, namer),
			PlaceBinary: placeBinary(cat, namer), PlaceContext: placeContext(cat, namer, eopts), Complete: o.Full,
			Match: matchResources(rctx, cat, namer, cmp.Or(o.Source, store.DefaultSource)), Skipped: &skipped}
		if ra == nil {
			return fhirEntries(rctx, path, opts)
		}
		return ra.run(fhirEntries(rctx, path, opts))
	}, eopts, store.Options{DataKeys: o.DataKeys, Timeout: o.Timeout, Logger: o.Logger})
	if err != nil {
		return FHIRReport{}, err
	}
	return FHIRReport{ImportReport: rep, Skipped: skipped}, nil
}

// storedBinary is fhirin.Options.StoredBinary over st, the catalog copy
// being imported into: whether Binary id is live in the compartment of
// patient of namer's tenant, and its own sensitivity labels
// (Resource.OwnSensitivity: a patient-wide "vip" is its patient's, not a
// label it gives its component, which would keep it after the patient
// loses it). Its URI names
// tenant, patient and Binary, so a Binary of another patient or tenant,
// or a retired one, is simply not found: the answer is the same as for
// one that never existed.
func storedBinary(st catalog, namer *store.Namer) func(id, patient string) ([]string, bool, error) {
	return func(id, patient string) ([]string, bool, error) {
		uri := namer.Link("Binary", id, patient)
		if uri == "" {
			return nil, false, errors.New("app: a Binary the import links cannot be named")
		}
		r, err := st.Get(uri)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
		return r.OwnSensitivity(), true, nil // a patient-wide label is not the Binary's to give
	}
}

// placeBinary is fhirin.Options.PlaceBinary over st, the catalog copy
// being imported into: whether Binary id of namer's tenant is live in it,
// and if so its source patient id (Labels.Patient) and own sensitivity
// labels (Resource.OwnSensitivity, as storedBinary).
// The catalog's id index (store.GetByID) finds it by its keyed id, which
// covers tenant, type and source id but not the patient: a Binary of
// another tenant, or a retired one, is simply not found, the same answer
// as for one that never existed. A live Binary whose URI is not the one
// its labels' patient names is an error (fail closed: the catalog
// contradicts itself).
func placeBinary(st catalog, namer *store.Namer) func(id string) (string, []string, bool, error) {
	place := placeResource(st, namer, "")
	return func(id string) (string, []string, bool, error) { return place("Binary", id) }
}

// placeResource is fhirin.Options.PlaceContext over st, as placeBinary
// (which it is for a Binary) for a resource of any type: whether typ/id of
// namer's tenant is live in the catalog copy, and if so its source patient
// id and own sensitivity labels. A resource of source retired (not "") is
// not live: the import being read retires it.
func placeResource(st catalog, namer *store.Namer, retired string) func(typ, id string) (string, []string, bool, error) {
	return func(typ, id string) (string, []string, bool, error) {
		u, err := namer.URI(typ, id, "")
		if err != nil {
			return "", nil, false, fmt.Errorf("app: a %s of the import cannot be named", typ)
		}
		r, err := st.GetByID(u.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return "", nil, false, nil
		case err != nil:
			return "", nil, false, err
		}
		if retired != "" && r.Source == retired {
			return "", nil, false, nil
		}
		if r.URI != namer.Link(typ, id, r.Labels.Patient) {
			return "", nil, false, fmt.Errorf("%w: a live %s's URI is not that of its labels' patient", store.ErrCorrupt, typ)
		}
		return r.Labels.Patient, r.OwnSensitivity(), true, nil
	}
}

// placeContext is fhirin.Options.PlaceContext over st: placeResource,
// with a full import's (eo.Full) own source retired, since the import
// retires that source's resources it does not hold (PlaceContext is asked
// only about those); another source's stay live, and a Binary naming one
// takes its compartment and labels as in an incremental import. Until
// 2026-12-06 (574ee43) a full import asked nothing, and a Binary naming an
// HIV-labelled resource of another source was stored without hiv.
func placeContext(st catalog, namer *store.Namer, eo store.EntryOptions) func(typ, id string) (string, []string, bool, error) {
	if !eo.Full {
		return placeResource(st, namer, "")
	}
	return placeResource(st, namer, cmp.Or(eo.Source, store.DefaultSource))
}

// matchResources is fhirin.Options.Match over st, the catalog copy being
// imported into: the source ids and compartments (Labels.Patient, the
// source Patient id) of the live resources of type typ of namer's tenant
// and of source that q finds. By _id, the resource's keyed
// id (store.GetByID). By identifier, the bodies of the type's live
// resources of the tenant and source, read once per type and import
// (st.Page over the catalog, st.Blob for each of that type: the catalog
// indexes no identifier), of which only ids and identifiers are kept. A
// live resource whose URI is not the one its body's id names is an error
// (fail closed: the catalog contradicts itself). Read asks in its first
// pass, before the import writes anything. A resource without a source
// (a manifest's: its URI is not the key's name of its body's id; or one
// of a streaming import older than sources) is never found: see
// docs/import.md, "Conditional updates and creates".
func matchResources(ctx context.Context, st catalog, namer *store.Namer, source string) func(typ string, q fhirin.Search) ([]fhirin.Found, error) {
	byType := map[string][]identified{}
	return func(typ string, q fhirin.Search) ([]fhirin.Found, error) {
		if q.ID != "" {
			u, err := namer.URI(typ, q.ID, "")
			if err != nil {
				return nil, fmt.Errorf("app: a %s of the import cannot be named", typ)
			}
			r, err := st.GetByID(u.ID)
			switch {
			case errors.Is(err, store.ErrNotFound):
				return nil, nil
			case err != nil:
				return nil, err
			case r.Source != source:
				return nil, nil // another source's: not this import's to update
			}
			return []fhirin.Found{{ID: q.ID, Patient: r.Labels.Patient, Labels: r.OwnSensitivity()}}, nil
		}
		rs, ok := byType[typ]
		if !ok {
			var err error
			if rs, err = identifiedOf(ctx, st, namer, source, typ); err != nil {
				return nil, err
			}
			byType[typ] = rs
		}
		var found []fhirin.Found
		for _, r := range rs {
			if slices.ContainsFunc(r.identifiers, func(id [2]string) bool { return q.Matches(id[0], id[1]) }) {
				found = append(found, fhirin.Found{ID: r.id, Patient: r.patient, Labels: r.labels})
			}
		}
		return found, nil
	}
}

// identified is a live resource's source id, its compartment's source
// Patient id ("" for none), its own sensitivity labels and its
// identifiers {system, value}.
type identified struct {
	id, patient string
	labels      []string
	identifiers [][2]string
}

// identifiedOf reads the live resources of typ of namer's tenant and
// source in st (matchResources).
func identifiedOf(ctx context.Context, st catalog, namer *store.Namer, source, typ string) ([]identified, error) {
	lower := strings.ToLower(typ)
	var out []identified
	for after := ""; ; {
		page, err := st.Page(after, 512)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			if r.Labels.Tenant != namer.Tenant() || r.Labels.Type != lower || r.Source != source {
				continue
			}
			body, err := st.Blob(ctx, r.Digest)
			if err != nil {
				return nil, err
			}
			var head struct {
				ID         string          `json:"id"`
				Identifier json.RawMessage `json:"identifier"`
			}
			if json.Unmarshal(body, &head) != nil || namer.Link(typ, head.ID, r.Labels.Patient) != r.URI {
				return nil, fmt.Errorf("%w: a live %s's body does not name its URI", store.ErrCorrupt, typ)
			}
			out = append(out, identified{id: head.ID, patient: r.Labels.Patient, labels: r.OwnSensitivity(), identifiers: fhirin.Identifiers(head.Identifier)})
		}
		if len(page) < 512 {
			return out, nil
		}
		after = page[len(page)-1].URI
	}
}

// fhirEntries adapts fhirin.Read to the store's entry stream. A read error
// is the stream's last element.
func fhirEntries(ctx context.Context, path string, opts fhirin.Options) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		err := fhirin.Read(ctx, path, opts, func(it fhirin.Item) error {
			if !yield(entryOf(it), nil) {
				return errStopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopped) {
			yield(store.Entry{}, fmt.Errorf("reading FHIR input: %w", err))
		}
	}
}

// entryOf maps a reader item onto the store's entry, field for field.
func entryOf(it fhirin.Item) store.Entry {
	return store.Entry{
		Type:        it.Type,
		ID:          it.ID,
		Patient:     it.Patient,
		Deleted:     it.Deleted,
		Body:        it.Body,
		MIMEType:    it.MIMEType,
		Sensitivity: it.Sensitivity,
		Consent:     it.Consent,
		OptOut:      it.OptOut,
		PatientWide: it.PatientWide,
		LastUpdated: it.LastUpdated,
		Carrier:     store.Carrier{Type: it.Carrier.Type, ID: it.Carrier.ID},
		Where:       it.Where,
		Stored:      it.Stored,
		Kept:        it.Kept,
		NoOverwrite: it.NoOverwrite,
		Links:       it.Links,
	}
}

// FHIRImporter is the fhirsync.Importer of a sync: it imports the staged
// $export manifest a sync hands it into the catalog at catalogPath with
// ImportFHIR under o (o.Source should be the base's fhirsync.SourceLabel,
// so that a full sync retires only what came from that server), full as
// the sync says.
// It is a fhirsync.BinaryCatalog too, so that an incremental sync does
// not fetch again the Binaries the catalog holds.
func FHIRImporter(catalogPath string, o FHIRImport) fhirsync.Importer {
	return fhirImporter{path: catalogPath, o: o}
}

// fhirImporter is FHIRImporter's importer.
type fhirImporter struct {
	path string
	o    FHIRImport
}

// Import imports the staged manifest with ImportFHIR, and says which
// deletions retired a resource, which named none the catalog held, and
// which Bundle entries the reader left out on purpose.
func (f fhirImporter) Import(ctx context.Context, manifest string, full bool) (fhirsync.Imported, error) {
	o := f.o
	o.Full = full
	rep, err := ImportFHIR(ctx, f.path, manifest, o)
	if err != nil {
		return fhirsync.Imported{}, err
	}
	return fhirsync.Imported{Deleted: rep.Deleted, DeletesIgnored: rep.DeletedAbsent, Skipped: rep.Skipped}, nil
}

// LiveBinaries is fhirsync.BinaryCatalog over the catalog file: which of
// the Binary source ids are live in it for the tenant, found by their
// keyed id as placeBinary finds one (any compartment: the reader, asking
// again through storedBinary while it imports, refuses a link to a
// Binary live in another compartment than the linking resource's). It
// opens the catalog read-only for the question (a serving catalog is
// read-only too); a catalog not created yet holds none.
func (f fhirImporter) LiveBinaries(ctx context.Context, ids []string) (map[string]bool, error) {
	live := map[string]bool{}
	if _, err := os.Stat(f.path); errors.Is(err, fs.ErrNotExist) {
		return live, nil
	}
	namer, err := store.NewNamer(f.o.Tenant, f.o.IDKey.Bytes, f.o.IDKey.ID)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(f.path, store.Options{ReadOnly: true, DataKeys: f.o.DataKeys, Timeout: f.o.Timeout, Logger: f.o.Logger})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		u, err := namer.URI("Binary", id, "")
		if err != nil {
			return nil, errors.New("app: a Binary the sync asks about cannot be named")
		}
		switch _, err := st.GetByID(u.ID); {
		case err == nil:
			live[id] = true
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
	}
	return live, nil
}
