package policy

import "errors"

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
	// "obligations" whose op, path and fn are strings. Unknown keys of the
	// decision object are ignored. Reason code "policy_bad_shape".
	ErrBadShape = errors.New("policy: decision has the wrong shape")

	// ErrBadObligation is returned when an obligation fails
	// minimize.Obligation.Validate or carries a key other than op, path and
	// fn: the server would not know how to enforce it, so it denies rather
	// than silently skip a minimization. It wraps the minimize error too.
	// Reason code "unknown_obligation".
	ErrBadObligation = errors.New("policy: obligation not understood")
)
