package policy

import (
	"errors"
	"fmt"
)

// Load errors.
var (
	// ErrCompile is returned by [Load], [LoadDir] and [Default] when the
	// policy cannot be read, parsed or compiled, when it uses a builtin the
	// locked-down capabilities exclude (http.send, net.*, opa.runtime), or
	// when it has no policy module or no data.custos.authz.decision rule. The
	// message carries the file:line detail. The caller must keep serving with
	// the last good engine (or refuse to start): a policy that did not compile
	// never decides anything.
	ErrCompile = errors.New("policy: compile failed")

	// ErrLinkedDir is returned, wrapped and naming the link, when a policy
	// directory holds a symbolic link to a directory: the walk does not
	// follow it, and the modules in it (a deny rule among them) must not
	// be left out without a word. The policy as given cannot be read
	// whole, as with a .rego that is a FIFO: a server refuses it (keeping
	// its last good engine), and 'custos policy test' and 'check' reach no
	// verdict on it (exit 2). The text is the tail of the message "P is a
	// symbolic link to a directory, which is not followed".
	ErrLinkedDir = errors.New("symbolic link to a directory, which is not followed")
)

// Decision errors. [Engine.Decide] returns one of them (wrapped with a
// detail that never contains input values) together with a denying
// [Decision]. The caller must treat the request as denied, record the denial
// in the audit log with the decision's reason, and release nothing.
var (
	// ErrBadInput is returned when the [Input] is malformed before evaluation:
	// an unknown Action, or a list/read without a Resource. It indicates a
	// programming error in the caller. Reason code "bad_input".
	ErrBadInput = errors.New("policy: bad input")

	// ErrEvaluation is returned when evaluation fails: a runtime error in the
	// policy (including strict builtin errors such as to_number("x")), a
	// conflict between rules, a cancelled context or the per-evaluation
	// timeout. Reason code "policy_error", or "policy_timeout" when the
	// deadline was exceeded (errors.Is(err, context.DeadlineExceeded) holds).
	ErrEvaluation = errors.New("policy: evaluation failed")

	// ErrUndefined is returned when data.custos.authz.decision is undefined
	// for the input. Reason code "policy_undefined".
	ErrUndefined = errors.New("policy: decision undefined")

	// ErrBadShape is returned when the decision is not an object with a
	// boolean "allow", an array of strings "reasons" and an array of objects
	// "obligations" whose op, path and fn are strings ("reasons" and
	// "obligations" may be absent), or when the decision object has any
	// other key: a key the server does not know may hold obligations
	// ("obligation", "Obligations") it would otherwise skip. Reason code
	// "policy_bad_shape".
	ErrBadShape = errors.New("policy: decision has the wrong shape")

	// ErrBadObligation is returned when an obligation fails
	// minimize.Obligation.Validate or carries a key other than op, path and
	// fn: the server would not know how to enforce it, so it denies rather
	// than silently skip a minimization. It wraps the minimize error too.
	// Reason code "unknown_obligation".
	ErrBadObligation = errors.New("policy: obligation not understood")
)

// Bundle and reload errors. A candidate policy failing with any of them (or
// with [ErrCompile]) is rejected: the caller keeps serving with the last good
// engine and records the rejection ([Reloader] does both). They reach the
// caller wrapped in a [*CandidateError] that names the rejected candidate.
var (
	// ErrBundle is returned by [LoadBundle] when the file is not a policy
	// bundle custos accepts: unreadable, larger than [MaxBundleSize]
	// compressed or uncompressed, not a gzipped tar of an OPA bundle, an
	// archive holding a link or other non-file entry, a file name that is
	// not a clean relative path, or the same file twice, a delta bundle, or
	// carrying data documents, Wasm or plan modules (custos evaluates Rego
	// modules only, so it refuses what it would silently ignore).
	ErrBundle = errors.New("policy: bad bundle")

	// ErrBundleTooLarge is returned by [LoadBundle], wrapped with ErrBundle,
	// when the file is larger than [MaxBundleSize]: it was read up to that
	// size, and is no bundle custos accepts, though no digest of it is
	// computed. 'custos policy verify' reports it as a problem found.
	ErrBundleTooLarge = fmt.Errorf("bundle larger than %d bytes", MaxBundleSize)

	// ErrSignature is returned by [LoadBundle] when signature verification
	// fails: the bundle has no .signatures.json, the JWT names a key id that
	// is not configured, the ES256 signature does not verify, a file's digest
	// differs from the signed one, a file is not covered by the signature, a
	// signed file is missing, or a file digest uses another algorithm than
	// SHA-256. The bundle may have been tampered with; it must not be used.
	ErrSignature = errors.New("policy: bundle signature verification failed")

	// ErrTestsFailed is returned when the candidate policy's Rego tests
	// (*_test.rego, shipped with the policy) fail, cannot be compiled, or do
	// not exist where they are required. The message lists the failing tests.
	ErrTestsFailed = errors.New("policy: policy tests failed")

	// ErrBatchDisagrees is returned (wrapped in ErrTestsFailed) when the
	// candidate's decisions rule, which decides list pages, and its
	// decision rule, which decides reads, give different decisions for the
	// same item of a synthetic list request (see agree.go): a listing
	// could show what a read denies. The message names the first such item
	// (synthetic: no PHI) and how many differ.
	ErrBatchDisagrees = errors.New("policy: decisions disagrees with decision")

	// ErrKey is returned when a signing or verification key is unusable: not
	// PEM, not an ECDSA P-256 key, an empty or duplicate key id, or when no
	// verification key is configured at all (verification is mandatory).
	ErrKey = errors.New("policy: bad key")

	// ErrEventHook is returned by [New] and [Reloader.Reload] when
	// ReloaderOptions.OnEvent failed for a policy_loaded event (for example
	// the audit log could not record the load): the candidate is not swapped
	// in, so no policy serves whose load is not on record.
	ErrEventHook = errors.New("policy: load event not recorded")

	// ErrEventRecorded is what ReloaderOptions.OnEvent wraps in its error
	// when the event's record was appended but could not be completed (the
	// audit key unavailable: the record is written as an error, without
	// the event's details). A rejection so reported is on record, and the
	// Reloader does not offer it again (it would be recorded twice, at
	// every poll while the failure lasts); a load so reported still does
	// not take effect ([ErrEventHook]).
	ErrEventRecorded = errors.New("policy: event recorded incompletely")

	// ErrRollback is returned (in a [*RollbackError]) when a bundle's signed
	// sequence claim does not advance past the high-water mark: lower, equal
	// with another bundle digest, or absent once a bundle with a claim has
	// loaded (see [CheckSequence]). The candidate may be an older bundle put
	// back at the path; the last good policy keeps serving.
	ErrRollback = errors.New("policy: bundle rollback refused")
)

// RollbackError is the evidence of a refused rollback: the high-water mark
// (or, when MinSequence is set, the operator's floor) and the candidate's
// claim and digest. It unwraps to ErrRollback.
type RollbackError struct {
	HighWater HighWater
	// MinSequence is set when the refusal is the floor's
	// ([CheckMinSequence]): the lowest claim the server accepts.
	MinSequence uint64
	Sequence    uint64 // the candidate's claim; 0 if it has none
	Digest      string // the candidate bundle's digest
}

func (e *RollbackError) Error() string {
	if e.MinSequence != 0 {
		if e.Sequence == 0 {
			return fmt.Sprintf("%v: bundle %s has no sequence claim (manifest metadata.custos.sequence), and this server accepts only bundles claiming at least %d (policy.min_sequence)", ErrRollback, e.Digest, e.MinSequence)
		}
		return fmt.Sprintf("%v: bundle %s claims sequence %d, below %d, the lowest this server accepts (policy.min_sequence)", ErrRollback, e.Digest, e.Sequence, e.MinSequence)
	}
	hw := fmt.Sprintf("the high-water mark: sequence %d, bundle %s", e.HighWater.Sequence, e.HighWater.Digest)
	switch {
	case e.Sequence == 0:
		return fmt.Sprintf("%v: bundle %s has no sequence claim (manifest metadata.custos.sequence) but a bundle with one has loaded (%s)", ErrRollback, e.Digest, hw)
	case e.Sequence == e.HighWater.Sequence:
		return fmt.Sprintf("%v: bundle %s claims sequence %d, equal to %s, but is another bundle", ErrRollback, e.Digest, e.Sequence, hw)
	}
	return fmt.Sprintf("%v: bundle %s claims sequence %d, lower than %s", ErrRollback, e.Digest, e.Sequence, hw)
}

func (e *RollbackError) Unwrap() error { return ErrRollback }

// CandidateError is the error of a rejected candidate policy. It names the
// candidate by Digest so that the rejection can be audited: for a bundle,
// "sha256:" + hex of the bundle file; for a directory, the digest of its
// .rego files (see [DirSource]); "" when the candidate could not be read at
// all. Err wraps one of ErrBundle, ErrSignature, ErrCompile,
// ErrTestsFailed or ErrRollback (errors.Is sees through CandidateError).
//
// Revision, Sequence and KeyID are the candidate's own identity as far as
// it is known, for the rejection's record to name beside the policy in
// force: the revision of its policy modules (as [Engine.Revision] would
// be), its signed sequence claim (0: none) and the id of the key whose
// signature verified it. A bundle whose signature did not verify has none
// of them (its claims are not to be believed); a directory has only a
// revision; "" when its modules could not be read.
type CandidateError struct {
	Digest   string
	Revision string
	Sequence uint64
	KeyID    string
	Err      error
}

func (e *CandidateError) Error() string {
	if e.Digest == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + " (candidate " + e.Digest + ")"
}

func (e *CandidateError) Unwrap() error { return e.Err }
