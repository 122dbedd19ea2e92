package fhirin

import (
	"log/slog"
	"time"
)

// Item is one catalog-ready thing read from the input: a resource, a
// Binary, an attachment lifted out of a resource, or the retirement of a
// resource.
type Item struct {
	// Type is the R4 resourceType, or "Attachment" for an attachment lifted
	// out of its carrier.
	Type string
	// ID is the source logical id. A lifted attachment's id is derived from
	// its carrier and element: "<CarrierType>/<carrier id>/<element path>",
	// e.g. "DocumentReference/abc/content[0].attachment", stable across
	// re-imports of the same carrier.
	ID string
	// Patient is the source id of the Patient whose compartment holds the
	// item ("" = tenant-level reference data); a Patient's own id for a
	// Patient. Empty for a Deleted item: the store finds what to retire by
	// (Type, ID).
	Patient string
	// Deleted marks a retirement (a Bulk `deleted` entry or a DELETE entry
	// of a transaction or batch Bundle); Body is nil.
	Deleted bool
	// Body is the resource as compact FHIR JSON (urn:uuid references
	// resolved, lifted attachments replaced by a url from Options.Link), or
	// the decoded bytes of an attachment or Binary. Read allocates it for
	// the item: the callback may keep it.
	Body []byte
	// MIMEType is "application/fhir+json" for a resource, the checked
	// contentType for an attachment or Binary as it is listed
	// (listedMediaType: a type custos does not know is listed as one of
	// its kind, never as written).
	MIMEType string
	// Sensitivity holds the custos sensitivity labels (docs/import.md,
	// "Labels"), sorted and without duplicates.
	Sensitivity []string
	// Consent holds "opt-out" when this import holds an opt-out Consent of
	// the patient (OptOut); nil otherwise. It is a first approximation: the
	// importer decides the final label from every live Consent of its
	// catalog (docs/import.md, "Patient-wide labels"), which only it sees.
	Consent []string
	// OptOut, for a Consent in a patient compartment, reports that it
	// records an opt-out: status "active" and a base provision of type
	// "deny", or a policyRule of v3 ActCode OPTOUT (store.ConsentOptsOut).
	// Always false for any other item.
	OptOut bool
	// PatientWide holds "vip" when this import holds the item's patient's
	// Patient labelled vip (v3 ActCode CEL in its meta.security); nil
	// otherwise. Like Consent, a first approximation: the importer decides
	// the patient-wide label from every live Patient of its catalog
	// (docs/import.md, "Patient-wide labels"). It is not in Sensitivity,
	// which holds the item's own labels only, so that the label leaves the
	// item when the patient stops being a VIP.
	PatientWide []string
	// LastUpdated is meta.lastUpdated (zero if absent).
	LastUpdated time.Time
	// Carrier is the resource an attachment was lifted from or a Binary is
	// linked from (zero for a resource).
	Carrier Carrier
	// Where is "file:line" of the line, Bundle entry or file that held it.
	Where string
	// Links are the source ids of the Binaries a resource links (a lifted
	// attachment's url) or mentions (any other url or reference naming
	// Binary/<id>, mentionedBinaries), in the order first named; nil for
	// a Binary, an attachment or a retirement. The importer keeps them in
	// its catalog's link index so that a label a Binary gains later
	// reaches the resources naming it (docs/import.md, "Labels").
	Links []string
	// Stored marks a Binary this import links but does not hold: one
	// Options.StoredBinary reported live in the catalog, in the
	// compartment of the resources linking it. Body, MIMEType and
	// LastUpdated are zero; Sensitivity is every label the Binary must
	// have (those StoredBinary reported and those of the resources linking
	// it here), Patient its compartment, Where the first link's place. The
	// importer gives the stored Binary a new version with these labels
	// (content unchanged) if it lacks one, and must fail if it is no
	// longer live there. Read yields one such item per Binary, after every
	// other item.
	Stored bool
	// Kept marks a resource of the catalog that a conditional create
	// (POST with ifNoneExist) found (Options.Match): R4 leaves it as it
	// is, so the entry's content is not imported. Only Type, ID (the
	// match's), Patient (its compartment, the entry's) and Where are set.
	// The importer writes nothing of it and, in a full import, keeps it
	// live with what it carries and links (it was seen).
	Kept bool
	// NoOverwrite, for the resource of a conditional update or create
	// that matched nothing, is the FHIR path of its query
	// ("Bundle.entry[3].request.url"): the entry creates its resource
	// under its own id, so the importer must refuse it where a live
	// resource of that id is not this same content of the import's
	// source in this compartment (R5 http.html#cond-update, "No matches,
	// id provided and already exist": 409 Conflict). The same content
	// again is no conflict: a re-import of the same Bundle is unchanged.
	// The attachments lifted out of such a resource carry it too (their
	// carrier's body names each by a link that does not change with its
	// bytes). "" for any other item.
	NoOverwrite string
}

// Carrier names a resource by source type and id.
type Carrier struct {
	Type, ID string
}

// FHIRJSON is the MIME type of a resource item.
const FHIRJSON = "application/fhir+json"

// TypeAttachment is Item.Type for an attachment lifted out of a resource.
const TypeAttachment = "Attachment"

// DefaultMaxLine is the longest NDJSON line (and the largest JSON file
// value: one resource or one Bundle) read when Options.MaxLine is 0: 64 MiB,
// the store's largest blob (store.MaxBlobSize) in base64 with room for the
// resource around it. Memory while reading is bounded by a small multiple
// of it.
const DefaultMaxLine = 96 << 20

// Options configure Read. The zero value is not usable: Link is required.
type Options struct {
	// Link returns the custos URI an attachment link must point to, for a
	// lifted attachment (typ TypeAttachment) or a Binary (typ "Binary"),
	// by source id and source patient. Required.
	Link func(typ, id, patient string) string
	// MaxLine bounds an NDJSON line and a JSON file's top-level value, in
	// bytes; 0 means DefaultMaxLine.
	MaxLine int
	// Logger receives operational messages (never content); nil discards.
	Logger *slog.Logger
	// StoredBinary, if not nil, reports whether the Binary id is live in
	// the importer's catalog in the compartment of patient ("" for
	// tenant-level) of the tenant being imported, and its sensitivity
	// labels there. It is asked, once per Binary, at the end of the first
	// pass about:
	//   - a Binary the import links but does not hold: if live, the link
	//     is accepted (not ErrDangling), the linking resources carry its
	//     labels, and Read yields it as an Item with Stored set;
	//   - a Binary the import holds and no resource of the import links
	//     (placed by its securityContext), or, unless Complete, one it
	//     holds and links: it keeps the labels reported besides its own
	//     and its linking resources' here (those its linking resources
	//     gave it before: one of them not in this import still links it),
	//     and so do the resources here that link it.
	// It is also asked, at the end of the first pass and once per Binary
	// and compartment, about a Binary the import neither holds nor links
	// that a resource names in a url or reference outside the lifted
	// elements (mentionedBinaries): if live in that resource's
	// compartment, its labels join the resource's label component (the
	// resource and the other Binaries it names carry them; the importer
	// gives the stored Binary the component's labels through its link
	// index).
	// The answer must be the same whatever the Binary's existence
	// elsewhere (another patient, another tenant, retired: not live). An
	// error stops Read and is returned as it is. nil: every linked Binary
	// must be in the import, and a Binary's labels come from the import
	// alone.
	StoredBinary func(id, patient string) (labels []string, live bool, err error)
	// PlaceBinary, if not nil, reports whether the Binary id is live in
	// the importer's catalog of the tenant being imported, in whichever
	// compartment, and if so the source id of its patient ("" for
	// tenant-level) and its sensitivity labels there. It is asked once, at
	// the end of the first pass, about each Binary the import holds that
	// no resource of the import links and whose securityContext names no
	// Patient (optional in R4; the resource linking it placed it, in an
	// earlier import): if live, the Binary is placed where it is and keeps
	// the labels reported besides its own; if not, it cannot be placed
	// (ErrCompartment). The answer must be the same whatever the Binary's
	// existence elsewhere (another tenant, retired: not live). An error
	// stops Read and is returned as it is. nil: such a Binary cannot be
	// placed.
	PlaceBinary func(id string) (patient string, labels []string, live bool, err error)
	// PlaceContext, if not nil, reports whether the resource typ/id (not
	// a Patient) is live in the importer's catalog of the tenant being
	// imported, and if so the source id of its patient ("" for
	// tenant-level) and its own sensitivity labels there. It is asked
	// once, after the first pass, about each resource that a Binary's
	// securityContext names and the import does not hold: if live, it
	// gives the Binary its compartment and labels as such a resource of
	// the import does (R4: "a proxy of the security sensitivity" of the
	// Binary). When Complete it must answer as the catalog will be after
	// the import: a resource the full import retires (its own source's,
	// which the import does not hold) is not live, while another
	// source's resource of the tenant is, since a full import retires
	// nothing of it. The answer must be the same whatever the resource's
	// existence elsewhere (another tenant, retired: not live). An error
	// stops Read and is returned as it is. nil: such a reference counts
	// for nothing.
	PlaceContext func(typ, id string) (patient string, labels []string, live bool, err error)
	// Match, if not nil, reports the live resources of type typ in the
	// importer's catalog, of the source being imported (the same tenant
	// and source), that q finds, each once with its compartment: a Bundle
	// entry's conditional update (PUT Type?query) or create (POST with
	// ifNoneExist) resolved to exactly one of them updates it (takes its
	// id) when that one is in the compartment the entry's resource is in,
	// and is refused (ErrCompartment) when it is in another: a match does
	// not move a resource between patients. To none, the entry creates its
	// resource; to more, it is refused (FHIR's 412). An error stops Read
	// and is returned as it is. nil: the catalog holds no match (the
	// Bundle is still searched).
	Match func(typ string, q Search) ([]Found, error)
	// Complete says the input holds every resource that links any of its
	// Binaries (a full import: what it does not hold is retired). A Binary
	// it holds and links then takes its labels from the import alone, so a
	// label a linking resource no longer has leaves it; otherwise it also
	// keeps those StoredBinary reports. Without StoredBinary it changes
	// nothing. It also refuses an $export manifest whose request asks for
	// part of the data only (_since, _type, _typeFilter: ErrManifest), whose
	// full import would retire the rest.
	Complete bool
	// Skipped, if not nil, is set when Read returns nil to the count of
	// the Bundle entries it left out on purpose, for the caller's report
	// (they are no error, and an import would otherwise not say it left
	// them out). Read leaves it as it is when it fails.
	Skipped *Skipped
}

// Skipped counts, by kind, the Bundle entries Read leaves out on purpose:
// they carry nothing to import (docs/import.md, "Bundle entries"). Every
// other entry is imported or refused.
type Skipped struct {
	// Reads are GET and HEAD request entries without a resource (a batch
	// of reads): a request to read, with nothing to store.
	Reads int `json:"read_requests"`
	// Outcomes are a search's outcomes: in a searchset an OperationOutcome
	// with search.mode outcome or none that reports no error (one that
	// does refuses the import), in any other Bundle one with search.mode
	// outcome. Never imported: its diagnostics may quote a patient.
	Outcomes int `json:"search_outcomes"`
}

func (o Options) maxLine() int {
	if o.MaxLine > 0 {
		return o.MaxLine
	}
	return DefaultMaxLine
}

// Format is the kind of input a path holds.
type Format int

const (
	// FormatUnknown: none of the below.
	FormatUnknown Format = iota
	// FormatCustosManifest: a custos import manifest (manifest.jsonl, or a
	// directory holding one). Read refuses it with ErrCustosManifest.
	FormatCustosManifest
	// FormatExportManifest: a Bulk Data $export manifest JSON.
	FormatExportManifest
	// FormatDir: a directory of FHIR files: a Bulk Data export
	// (<Type>[.NNN].ndjson[.gz]) and/or Bundle and resource JSON files.
	FormatDir
	// FormatNDJSON: one NDJSON file (resources or Bundles), maybe gzipped.
	FormatNDJSON
	// FormatJSON: one JSON file holding a resource, a Bundle, or an array
	// of them.
	FormatJSON
)

func (f Format) String() string {
	switch f {
	case FormatCustosManifest:
		return "custos manifest"
	case FormatExportManifest:
		return "Bulk Data $export manifest"
	case FormatDir:
		return "directory of FHIR files"
	case FormatNDJSON:
		return "FHIR NDJSON"
	case FormatJSON:
		return "FHIR JSON"
	}
	return "unknown"
}
