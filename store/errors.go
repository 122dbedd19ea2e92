package store

import (
	"errors"
	"fmt"
	"strconv"
)

// The error vocabulary of package store. Callers branch with errors.Is; the
// messages never contain PHI, secrets, resource content or the raw text of a
// rejected URI.
var (
	// ErrNotFound is returned by Get when no resource has the URI and by Blob
	// when no blob has the digest (or the digest is malformed). The MCP server
	// answers it as "resource not found"; it must not reveal whether the URI
	// exists but is denied, so callers should decide on policy first.
	ErrNotFound = errors.New("store: not found")

	// ErrBadURI is returned (wrapped in a *URIError that says what is wrong)
	// by ParseURI and Get when a URI is not a canonical custos URI. The
	// caller should reject the request as invalid parameters; retrying with
	// the same input cannot succeed.
	ErrBadURI = errors.New("store: bad uri")

	// ErrBadManifest is returned by ParseManifest and Import (wrapped in one
	// or more *ManifestError values naming file and line) when a manifest or
	// a file it refers to is invalid. Nothing has been written when Import
	// returns it: fix the manifest and import again.
	ErrBadManifest = errors.New("store: bad manifest")

	// ErrBadEntry is returned by ImportEntries (wrapped in one or more
	// *EntryError values naming each entry's Where) when entries of the
	// stream are invalid. A staged import (ImportEntriesStaged) has then
	// changed nothing: fix the input and import again.
	ErrBadEntry = errors.New("store: bad entry")

	// ErrAttachment is returned, beside ErrBadEntry (in an *EntryError
	// whose Path names the attachment's contentType when it can) and by
	// CheckAttachment, when an attachment's bytes do not agree with its
	// declared media type, or the type is missing or not a media type. Fix
	// the attachment at the source (its contentType or its data) and
	// import again.
	ErrAttachment = errors.New("store: attachment does not agree with its media type")

	// ErrIDKeyChanged is returned by ImportEntries when the catalog's
	// imported resources were named under another version of the resource
	// id key than the Namer's: importing would give every resource a new
	// URI. Configure the key the catalog was imported under; the id key is
	// never rotated.
	ErrIDKeyChanged = errors.New("store: resource id key differs from the one the catalog was imported under")

	// ErrCorrupt is returned when stored bytes no longer match their digest or
	// a stored record cannot be decoded. For blobs it is wrapped in an
	// *IntegrityError carrying the evidence. The content must not be served;
	// the operator should restore the store from a backup or re-import.
	ErrCorrupt = errors.New("store: corrupt")

	// ErrLocked is returned by Open when another process (or another Store in
	// this process) holds the database file lock for longer than
	// Options.Timeout. bbolt allows one writer process per file; stop the
	// other holder (e.g. the server while importing) or open ReadOnly.
	ErrLocked = errors.New("store: database is locked by another process")

	// ErrEncrypted is returned by Open when the catalog's blobs are
	// envelope-encrypted at rest but Options.DataKeys is nil. Open it with the
	// Vault secrets provider; the catalog is never silently read as plaintext.
	ErrEncrypted = errors.New("store: catalog is encrypted at rest; open it with the Vault secrets provider")

	// ErrMetadataOnly is returned by Blob of a Store opened with
	// Options.MetadataOnly, whatever the catalog's encryption mode: such a
	// store serves labels, never content. Open the catalog without
	// MetadataOnly (with the Vault secrets provider if it is encrypted).
	ErrMetadataOnly = errors.New("store: opened for metadata only; content is not served")

	// ErrPlaintext is returned by Open when Options.DataKeys is set but the
	// catalog already holds plaintext blobs (and Options.Migrate is not set),
	// and by Blob and Import on such a catalog opened with Migrate until
	// Reencrypt has converted it. Run the migration; plaintext is never
	// silently mixed with envelopes.
	ErrPlaintext = errors.New("store: catalog holds plaintext blobs; migrate with 'custos store reencrypt'")

	// ErrKEKMismatch is returned by Open (wrapped, with both KEK names) when
	// the catalog's data keys are wrapped under another key-encryption key
	// than the one Options.DataKeys offers. Configure the KEK the catalog was
	// written with.
	ErrKEKMismatch = errors.New("store: key-encryption key mismatch")

	// ErrDataKey is returned (inside a *KeyError, which also unwraps to the
	// provider's own error) when the DataKeys provider fails to create,
	// unwrap or rewrap a data key: typically Vault is unreachable, sealed or
	// denies the request. It is not corruption: the stored bytes may be
	// intact, and the request can be retried once the provider is back.
	ErrDataKey = errors.New("store: data key provider failed")

	// ErrUnsettledLabels is returned by OpenLive (wrapped, naming the
	// missing indexes), and keeps Reload from swapping a file in, when the
	// catalog holds resources of a streaming (FHIR) import but lacks an
	// index that settles their labels (links, linkedby, optout, vip): a
	// custos older than those indexes (before 2026-12-05) wrote it, and its
	// items may lack the labels they give (a patient's opt-out, a VIP's
	// chart, a Binary component's sensitivity), so serving it could release
	// what those labels deny. Open (import, auditing) is not refused: one
	// import by this custos builds the indexes and settles every label
	// (docs/import.md); re-import the tenant's FHIR input, then serve.
	// Also returned (saying the labels were changed by a custos older than
	// this one) when the indexes exist but a custos that does not keep the
	// marker of settled labels (meta "settled-txid", added 2026-12-06)
	// wrote to the catalog after this one last did, or none of this one's
	// writes recorded it: its imports leave the indexes stale (an opted-out
	// patient's Observation unlabelled), and the next streaming import by
	// this custos rebuilds them and settles every label.
	// ErrOldLabelRules is returned by OpenLive (wrapped, saying why), and
	// keeps Reload from swapping a file in, when the catalog holds
	// resources of a streaming (FHIR) import whose labels were not derived
	// with the label rules the server relies on (LiveOptions.LabelRules,
	// fhirin.LabelRules): a catalog imported before the rules changed (or
	// before they had a version: before the residence rule), or changed
	// since by a custos that does not keep the version. Its items may lack
	// a label the rules give now (a patient's home Location, labelled
	// residence, served as reference data). Open is not refused: run
	// 'custos store relabel' (Relabel), which derives every stored
	// resource's labels anew, or a full import of every source, then
	// serve.
	ErrOldLabelRules = errors.New("store: catalog labelled with older label rules than this custos's; relabel it with 'custos store relabel' before serving")

	ErrUnsettledLabels = errors.New("store: catalog written by a custos older than its label indexes: its items may lack the opt-out, vip or Binary component labels those give; re-import its FHIR input with this custos (custos import), which settles them, before serving")
)

// KeyError reports a failure of the DataKeys provider for one blob. It
// unwraps to both ErrDataKey and the provider's error, so callers can branch
// with errors.Is on either (e.g. on the secrets package's "unavailable"
// sentinel to answer "try again later" rather than "corrupt"). Its message
// includes the provider's message, which by the DataKeys contract holds no
// key bytes.
type KeyError struct {
	// Op is "new", "unwrap" or "rewrap".
	Op string
	// Digest is the blob concerned, "sha256:<hex>".
	Digest string
	// Err is the provider's error (or what is wrong with its answer).
	Err error
}

func (e *KeyError) Error() string {
	return "store: blob " + e.Digest + ": data key " + e.Op + " failed: " + e.Err.Error()
}

// Unwrap returns ErrDataKey and the provider's error.
func (e *KeyError) Unwrap() []error { return []error{ErrDataKey, e.Err} }

// IntegrityError reports a blob whose bytes do not hash to the digest under
// which they are stored, or, in an encrypted catalog, whose envelope cannot
// be parsed or fails authentication. It unwraps to ErrCorrupt.
type IntegrityError struct {
	// Digest is the digest the blob is stored (and was requested) under,
	// "sha256:<hex>".
	Digest string
	// Got is the digest of the bytes actually read (after decryption, in an
	// encrypted catalog), "sha256:<hex>"; empty when Reason is set.
	Got string
	// Reason says what failed before the content could be hashed, e.g.
	// "envelope truncated" or "decryption failed: ciphertext, nonce or
	// content address altered"; empty for a hash mismatch.
	Reason string
}

func (e *IntegrityError) Error() string {
	if e.Reason != "" {
		return "store: blob " + e.Digest + " is corrupt: " + e.Reason
	}
	return "store: blob " + e.Digest + " is corrupt: stored bytes hash to " + e.Got
}

// Unwrap returns ErrCorrupt.
func (e *IntegrityError) Unwrap() error { return ErrCorrupt }

// URIError says why a string is not a canonical custos URI. Reason never
// contains any part of the rejected input. It unwraps to ErrBadURI.
type URIError struct {
	Reason string // e.g. "uri has userinfo", "id is not a canonical uuid"
}

func (e *URIError) Error() string { return "store: bad uri: " + e.Reason }

// Unwrap returns ErrBadURI.
func (e *URIError) Unwrap() error { return ErrBadURI }

// ManifestError locates one problem in a manifest. Its message has the form
// "manifest.jsonl:17: uri: id is not a canonical uuid" and never quotes the
// content of the line or of the file it names. It unwraps to ErrBadManifest.
type ManifestError struct {
	File   string // base name of the manifest; empty when parsed from a reader
	Line   int    // 1-based line number; 0 when the problem is not tied to a line
	Field  string // JSON field at fault ("uri", "labels.type", "file", ...); may be empty
	Reason string // what is wrong
}

func (e *ManifestError) Error() string {
	var b []byte
	switch {
	case e.File != "" && e.Line > 0:
		b = append(b, e.File...)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(e.Line), 10)
	case e.File != "":
		b = append(b, e.File...)
	case e.Line > 0:
		b = append(b, "line "...)
		b = strconv.AppendInt(b, int64(e.Line), 10)
	default:
		b = append(b, "manifest"...)
	}
	b = append(b, ": "...)
	if e.Field != "" {
		b = append(b, e.Field...)
		b = append(b, ": "...)
	}
	b = append(b, e.Reason...)
	return string(b)
}

// Unwrap returns ErrBadManifest.
func (e *ManifestError) Unwrap() error { return ErrBadManifest }

// maxReportedProblems caps how many manifest problems one error lists.
const maxReportedProblems = 20

// joinProblems turns collected manifest problems into one error (nil if
// none). Every problem is reported up to maxReportedProblems, then a count.
func joinProblems(probs []*ManifestError, more int) error {
	if len(probs) == 0 {
		return nil
	}
	if len(probs) == 1 && more == 0 {
		return probs[0]
	}
	errs := make([]error, 0, len(probs)+1)
	for _, p := range probs {
		errs = append(errs, p)
	}
	if more > 0 {
		errs = append(errs, fmt.Errorf("%w: %d more problems not shown", ErrBadManifest, more))
	}
	return errors.Join(errs...)
}
