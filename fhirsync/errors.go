package fhirsync

import "errors"

// Errors of a sync. Every error a Syncer returns wraps exactly one of them,
// so a caller (the CLI's exit code, the scheduler's log) can branch on the
// cause; the message names the URL path involved. The one exception is the
// caller's own cancellation: a sync whose context ends returns an error
// wrapping the context's (context.Canceled or context.DeadlineExceeded),
// having imported nothing and removed what it staged.
var (
	// ErrBadConfig: Options are unusable (no base URL, a base URL with
	// credentials, no importer). Nothing was contacted.
	ErrBadConfig = errors.New("fhirsync: bad configuration")
	// ErrAuth: the SMART token endpoint refused the client, or the FHIR
	// server refused a fresh token. Check the client id and that the
	// server holds the client's public key (JWKS).
	ErrAuth = errors.New("fhirsync: authorization failed")
	// ErrServer: the server answered something that is not what the
	// specification allows or what a sync can take whole (bad JSON, a wrong
	// content type or a charset other than UTF-8, truncated NDJSON, a
	// manifest without files, a 4xx, an OperationOutcome reporting an error
	// in a search or an export, a link or redirect to another origin, a TLS
	// certificate the client does not trust). Not retried; nothing was
	// imported; the server (or the trust configuration) must be fixed.
	ErrServer = errors.New("fhirsync: unusable answer from the FHIR server")
	// ErrUnavailable: the server kept answering 429 or 5xx (or could not be
	// reached) through every retry. Nothing was imported; try again later.
	ErrUnavailable = errors.New("fhirsync: FHIR server unavailable")
	// ErrImport: the importer refused what was fetched, or could not say
	// which Binaries its catalog holds (BinaryCatalog). The state is
	// unchanged; the same changes are fetched again next time.
	ErrImport = errors.New("fhirsync: import failed")
	// ErrNotRecorded: the audit record of the sync could not be written;
	// nothing was fetched (fail closed).
	ErrNotRecorded = errors.New("fhirsync: sync not recorded in the audit log")
	// ErrBusy: another sync of the same FHIR base holds its lock.
	ErrBusy = errors.New("fhirsync: another sync of this FHIR base is running")
	// ErrSpace: Options.Space refused to let the sync stage more (the
	// volume is down to the room the audit log needs). Nothing was
	// imported; the staged files are removed.
	ErrSpace = errors.New("fhirsync: no room to stage the sync")
)
