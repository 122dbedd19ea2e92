// Package minimize applies the data-minimization obligations that a policy
// decision demands to a payload before it leaves custos.
//
// # Responsibility
//
// minimize is a set of pure functions over bytes and values: given a payload,
// its MIME type, an ordered list of [Obligation] values and [Options], it
// returns the minimized payload or an error. It performs no I/O, reads no
// clock (the reference instant for age computations is [Options.Now]) and has
// no mutable package state, so it can be tested exhaustively and fuzzed.
//
// The [Obligation] type and the Op* constants are the obligation vocabulary of
// the whole project: the Rego policy emits obligations in this shape, the
// policy package decodes them into [Obligation] and validates them with
// [ValidateAll], the audit log records [Obligation.String], and this package
// enforces them.
//
// # Operations
//
//   - remove ([OpRemove]): delete the member or array element(s) at Path.
//   - mask ([OpMask]): replace the value with "***" (Fn "") or "***" plus the
//     last four characters of a string (Fn "last4").
//   - generalize ([OpGeneralize]): coarsen a value (Fn "year", "zip3",
//     "age90", "birthyear90"); a value of unexpected form becomes "***".
//     In a FHIR R4 resource both leave only what the element's R4 type can
//     hold (see Views of FHIR resources).
//   - scrub ([OpScrub]): replace identifier patterns (phone, email, SSN, MRN,
//     date, url: URLs and IP addresses, id: account, health plan, licence,
//     vehicle and device numbers after their keywords, and VINs, DNIs and
//     codici fiscali whose check agrees) inside strings with tokens such as
//     "[PHONE]", inside UUIDs and
//     hex runs too, as [ScrubString] does (national telephone numbers
//     without "+", 020 7946 0958, and dates of eight digits, 19310314,
//     included; clinical numbers, doses, ranges, codes, are not taken).
//   - allow ([OpAllow]): a field allow-list. Fn is a comma-separated list of
//     JSON pointers, relative to Path, naming the elements that are kept;
//     everything else in the value(s) Path selects is deleted, except a
//     "resourceType" member of those values. For example
//     {Op: "allow", Path: "", Fn: "/gender,/birthDate,/address/*/state"}
//     keeps resourceType, gender, birthDate and the state of every address
//     of a FHIR resource. A listed pointer keeps its whole subtree but
//     for the "extension" members below it, which are dropped unless the
//     list names one (a modifierExtension stays, its extensions with it;
//     a primitive's companion left empty goes); "*"
//     selects every array element; an index segment never selects an array
//     element (so a list is idempotent); an object keeps its listed members
//     and stays, possibly empty (a FHIR resource's view then prunes it: see
//     Views of FHIR resources); a scalar or array where members were listed
//     is deleted. It is the minimum-necessary form: what a role may see,
//     rather than what it may not, so an element the policy author did not
//     foresee is withheld rather than released.
//   - deidentify ([OpDeidentify], Fn [DeidentifySafeHarbor], Path ""): HIPAA
//     Safe Harbor for any FHIR R4 resource. It walks every element by its
//     FHIR data type (a table generated from the R4 StructureDefinitions by
//     tools/fhirtypes, internal/fhirr4) and decides per type: a code
//     element keeps only a code of the value set R4 binds it to
//     (fhircodes_gen.go) or of its grammar (language, MIME type of a
//     media type it knows, currency); free text,
//     narrative, notes, identifiers, names, contact points, attachments,
//     URIs and extensions not on [AllowedExtensions] are dropped (US
//     Core race and ethnicity keep their ombCategory and detailed
//     codings of CDC Race & Ethnicity, system and code, and nothing
//     else: their text, free text, is dropped, and so is an extension
//     left with no coding; the view claims no profile, Meta withheld,
//     so it owes US Core's text nothing); codings
//     are kept only for public terminologies (terminologySystems:
//     LOINC, SNOMED CT, ICD, RxNorm, CVX, NDC, CPT, NUCC, UCUM, BCP-47,
//     ISO 3166 and 4217, DICOM, RadLex, HL7's and FHIR's own, and for
//     oncology, genomics and pharmacy research NCI Thesaurus, HGNC, the
//     Sequence Ontology, ATC, ICD-O-3, CDC Race & Ethnicity and the
//     genomics reporting guide's TBD codes; not NCBI Gene, ClinVar,
//     HGVS nor EDQM, whose codes have no form an identifier lacks), with
//     a code of the terminology's form (of HL7's and FHIR's own code
//     systems, CDC's and the TBD codes: one of their codes; of LOINC and
//     SNOMED CT: with their check digits; of ISO 3166: a code an address
//     keeps; of BCP-47: language, script and region only); a quantity
//     keeps a code of HL7's code systems with its system, as a coding,
//     but that code is no unit: without unit text its number is judged
//     as a bare number;
//     dates become the year (a year 90 or more before now, which
//     tells an age over 89, is dropped), dates
//     of birth of people over 89, or of such a year, are withheld; ages over 89 (by type, unit
//     of time, age element or LOINC age code) are dropped, and so is an age
//     that with a year of its resource tells such a birth year; a bare
//     whole number of nine digits or more, or of six to eight that reads
//     as a date (YYYYMMDD, MMDDYYYY, DDMMYYYY, YYMMDD, ...: dateDigits)
//     (in any number element; in a quantity, one without
//     unit), one of seven digits or more without unit (a value[x], a
//     quantity whose unit is absent, "1" or annotations: bareIdentifier)
//     and an integer beyond 32 bits are
//     dropped, and so is a bare whole number that reads as a year 90
//     years or more before now (a value[x], a quantity without unit or
//     whose unit is only "1" or annotations: oldYearNumber,
//     dimensionless); a unit text is kept only as a unit symbol
//     (unitSymbol: a plate or serial typed as one is dropped, also in an
//     annotation or a bracketed atom: plainAnnotations), and no unit or UCUM code holds a
//     date, in digits or with its month as a name (datedText), or an
//     identifier's digits split by ".", "/", "-", parentheses and the like
//     (unitIdentifier); a unit text or UCUM code must name a unit, a
//     UCUM expression of UCUM's atoms (ucumUnit, ucum_gen.go) or, for a
//     text, words each a unit (knownUnitText: "MRN", "acct", a surname
//     are none), and a quantity whose unit and code are dropped is
//     dropped whole, its number with it;
//     an answer (QuestionnaireResponse, Contract), an open value[x], or a
//     value whose code is withheld (an Observation's value under a local code or text alone, a
//     device property of a local type: valueMeanings), whose meaning
//     is withheld, is judged as a date of birth (numbers dropped);
//     addresses keep state (first-level only), country (not one of 20,000
//     people or fewer) and, in the US (by country, or by state and a ZIP
//     of that state when no country is given), ZIP3; a USPS state code
//     only in the US (usAddress); geocodes are dropped;
//     references to a patient are
//     rewritten with [Options.Alias], all others dropped; contained
//     resources are walked recursively. An element of unknown type is
//     dropped. A required element it drops gets a data-absent-reason
//     extension, and so does an element an at-least-one invariant of R4
//     needs (pat-1, cmp-1, app-1, ...); a document Bundle becomes a
//     collection: the output stays valid FHIR R4. See deidentify.go.
//   - pseudonymize ([OpPseudonymize], Fn [PseudonymizeKeyedID], Path ""):
//     a FHIR R4 resource's id and every literal reference Type/id in it
//     (Reference.reference, found by the R4 element table) are renamed by
//     [Options.KeyID], the name the caller holds the resource by (custos's
//     server: the keyed id of its URI, store.ResourceID), so that a reader
//     who must not see a source's ids (which may be national numbers)
//     can still join a Claim to its Coverage; a reference KeyID cannot
//     name (absolute, urn:, conditional, local #x, a type outside R4)
//     loses its "reference" and keeps its type. Without
//     KeyID it fails ([ErrNoKeyer]). See pseudonymize.go.
//
// Paths are RFC 6901 JSON pointers, with one extension: a segment "*" selects
// every element of an array (it matches a member literally named "*" when it
// meets an object). A path that does not resolve is a no-op, not an error.
// Obligations are applied in the order given: obligations before an allow
// see the whole document, obligations after it see only what it kept.
//
// # Views of FHIR resources
//
// remove, mask, generalize, scrub and allow work on JSON paths and know
// nothing of R4, so they can leave what R4 forbids: an empty object where
// a Reference held only a display (ele-1), an empty array or string, a
// primitive's "_name" companion without its value, a local reference to
// a contained resource they dropped (ref-1), a required element emptied
// (Coverage.payor, 1..*). In a FHIR R4 resource, mask, generalize and
// scrub know the R4 type of the element they change (fit, apply.go): a
// string or markdown keeps "***", "***1234" or a scrubbed text, a date or
// dateTime generalized its year; any other primitive whose result is no
// value of its type ("***" in a date or a code, "90+" in a birthDate,
// "[DATE]" in an instant) is withheld, its value removed and its "_name"
// companion set to the data-absent-reason "masked" alone (a null and a
// companion entry in a repeating element, whose array they change item
// by item); a narrative's div masked is a div of "***"; a resource's id,
// a canonical, a complex value and a contained resource go. After them, [JSON] prunes a FHIR R4 resource
// (pruneView, prune.go): what they emptied goes, bottom up, and a
// required element missing from an object that stays is marked with a
// data-absent-reason extension "masked" (on a primitive, its "_name"
// companion), as the research view marks one. The view is labelled with
// HL7's security label REDACTED (v3-ObservationValue) in meta.security: a
// copy filtered of what its reader may not see, the policy's statement
// whether or not a path matched. A document that is no R4 resource, or
// that no obligation applies to, is not walked; the research view keeps
// R4 by its own walk, and withholds Meta, so carries no label.
//
// An obligation is the triple op, path, fn of strings (JSON keys "op",
// "path", "fn"), which is exactly what the policy emits and the policy
// package decodes; [Obligation.String] renders it as op:path[:fn] for the
// audit log, e.g. "allow::/gender,/birthDate".
//
// # Mapping to HL7 ObligationPolicy
//
// Every op maps to one code of the HL7 v3 ObligationPolicy value set (code
// system [HL7CodeSystem], http://terminology.hl7.org/CodeSystem/v3-ActCode),
// returned by [Obligation.HL7Code]:
//
//	op          fn                          HL7 code  HL7 meaning
//	remove      ""                          REDACT    remove information the user may not see
//	mask        "", last4                   MASK      render information unreadable
//	generalize  year, zip3, age90,          DEID      strip data that would identify the subject
//	            birthyear90
//	scrub       "" or phone,email,ssn,      DEID      strip data that would identify the subject
//	            mrn,date,url,id
//	deidentify  safeharbor                  DEID      strip data that would identify the subject
//	allow       /ptr,/ptr,...               MINEC     limit disclosure to the minimum necessary
//	pseudonymize keyedid                    PSEUD     create pseudonymized information
//
// generalize and scrub implement the HIPAA Safe Harbor transformations of
// 45 CFR 164.514(b)(2) (dates to year, ZIP to ZIP3 with the restricted ZIP3
// list and the prefixes of no resident population as "000", ages over 89
// to 90+, identifier patterns in free text); allow
// implements minimum necessary, 164.514(d). A Safe Harbor profile combines
// them; deidentify does all of it by FHIR data type, and is what the default
// policy's HRESCH view uses.
//
// # Invariants
//
//   - Pure: the same inputs always give the same output; inputs are never
//     modified and outputs never alias inputs.
//   - All or nothing: a function that returns an error returns a nil payload.
//     A partially minimized payload is never returned.
//   - Binary payloads (anything not JSON or text/*) are released whole when no
//     obligation applies and withheld ([ErrBinaryWithheld]) when any does:
//     custos cannot minimize a PDF or an image, so it does not pretend to.
//   - An unknown op, a malformed path or an unknown fn is an error
//     ([ErrUnknownOp], [ErrBadPath], [ErrBadFn]) before anything is applied,
//     so a policy can never ask for a minimization that would silently be
//     skipped. Every op that validates has an HL7 code.
//   - Generalization fails closed: a value that is not of the expected form
//     is replaced with "***" rather than passed through.
//   - Errors never contain payload content (it may be PHI); they name the
//     obligation instead.
//
// # Scrubbing strings outside an obligation
//
// Two functions scrub a string of every class; the caller chooses by where
// the text came from:
//
//   - [ScrubString] for text from outside custos: a listed resource's name,
//     title and description (server), an operator's free text (policy/btg:
//     a grant's or revocation's reason, a review note, a legacy event's
//     detail). It keeps nothing whole, as the scrub obligation does: a
//     telephone number written in a UUID's or a digest's shape
//     ("aaaaaaaa-2024-0305-1234-5551234567ab") is replaced.
//   - [ScrubReason] for custos's own text in an audit reason only (the
//     policy/load and policy/reject records: the previous revision, the
//     rollback refusal overridden). It keeps machine tokens (UUIDs, hex
//     runs of 32 or more: digests, keyed ids) whole, so the record names
//     the digests it holds; in text someone else wrote it would release a
//     telephone number hidden in one.
//   - [ScrubKeeping] for text from outside custos that quotes custos's own
//     evidence: a policy rejection's error quotes the candidate's Rego (a
//     policy author's text) and ends with the candidate's digest. It is
//     ScrubString keeping the exact strings it is given (the digests the
//     event names) whole.
//
// When in doubt, ScrubString: a damaged id costs less than a leak.
//
// # Caveats
//
// deidentify withholds a document that is not a FHIR resource of a known
// type, or that carries a modifier extension it does not know
// ([ErrWithheld]): FHIR forbids ignoring a modifier extension.
//
// Scrubbing is pattern based. It removes the identifier formats listed on
// [ScrubString] and nothing else: a name in free text, or an identifier in a
// format it does not know, survives. Policies that need Safe Harbor on
// structured data should generalize the FHIR elements they keep and end
// with an allow-list, rather than rely on scrub; free text that may hold
// names cannot be made Safe Harbor by scrub alone. Object member names are
// not scrubbed, only values.
package minimize
