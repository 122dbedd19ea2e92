package minimize

import "errors"

// Validation errors. They are returned by [Obligation.Validate] and
// [ValidateAll], and by [Apply], [JSON] and [Text] before anything is applied.
// They mean the policy asked for something this package does not understand:
// the caller must not release the payload and should report a policy error
// (the obligation is named in the message; the payload never is).
var (
	// ErrUnknownOp is returned when an obligation's Op is not one of OpRemove,
	// OpMask, OpGeneralize, OpScrub, OpAllow, OpDeidentify or OpPseudonymize.
	ErrUnknownOp = errors.New("minimize: unknown obligation op")

	// ErrBadPath is returned when an obligation's Path is not a valid
	// RFC 6901 JSON pointer (it must be "" or start with "/", and "~" must be
	// followed by "0" or "1"), or when remove targets the whole document ("").
	ErrBadPath = errors.New("minimize: malformed obligation path")

	// ErrBadFn is returned when an obligation's Fn is not valid for its Op
	// (for example mask with fn "year", generalize without fn, scrub with a
	// class other than phone, email, ssn, mrn, date, or allow without a list
	// of non-empty JSON pointers).
	ErrBadFn = errors.New("minimize: obligation fn not valid for op")
)

// Application errors. The payload must not be released.
var (
	// ErrBinaryWithheld is returned by [Apply] when obligations apply to a
	// payload that is neither JSON nor text. Binary content cannot be
	// minimized, so it is released whole or not at all; the caller should
	// deny the read (or offer a text rendition, if one exists).
	ErrBinaryWithheld = errors.New("minimize: binary payload withheld: obligations cannot be applied to binary content")

	// ErrNotApplicable is returned by [Text] (and [Apply] for text/*) when an
	// obligation other than scrub with Path "" is applied to plain text, which
	// has no structure to address. The policy asked for something that cannot
	// be enforced on this resource: the caller should deny the read.
	ErrNotApplicable = errors.New("minimize: obligation not applicable to text payload")

	// ErrMalformed is returned by [JSON] (and [Apply] for JSON types) when the
	// payload is not a single valid JSON value. The stored resource is
	// corrupt or mislabelled; the caller should deny the read and report it.
	ErrMalformed = errors.New("minimize: malformed JSON payload")

	// ErrWithheld is returned by [JSON] (and [Apply] for JSON types) when a
	// deidentify obligation meets a document it cannot de-identify: not a
	// FHIR R4 resource of a known type, or a resource with a modifier
	// extension custos does not know (FHIR forbids ignoring one). The caller
	// must not release the payload.
	ErrWithheld = errors.New("minimize: resource withheld: it cannot be de-identified")

	// ErrNoReferenceTime is returned when a generalize:birthyear90 or a
	// deidentify obligation is applied with a zero [Options.Now]. The caller must pass the current
	// time; it is a programming error, not a policy error.
	ErrNoReferenceTime = errors.New("minimize: birthyear90 and deidentify need Options.Now")

	// ErrNoKeyer is returned when a pseudonymize obligation is applied
	// without [Options.KeyID]. The caller must pass one (a function that
	// names nothing makes every reference keep only its type); it is a
	// programming error, not a policy error.
	ErrNoKeyer = errors.New("minimize: pseudonymize needs Options.KeyID")
)
