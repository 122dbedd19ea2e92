package ops

// SafeError is implemented by errors whose Safe text may be shown in a
// readiness answer (/readyz). Safe must return a short, fixed description
// (e.g. "policy not loaded", "keys stale") that contains no secret, no PHI
// and no dynamic detail such as a path, URL or token. The text is truncated
// to MaxSafeLen bytes.
//
// Readiness finds a SafeError anywhere in an error's chain (errors.As);
// only its Safe text is used, never the text of the errors around it. An
// error that does not implement it is reported as "failing".
type SafeError interface {
	Safe() string
}

// MaxSafeLen is the longest SafeError text a readiness answer repeats.
const MaxSafeLen = 120

// safeErr is a SafeError with a fixed message.
type safeErr struct{ msg string }

func (e *safeErr) Error() string { return e.msg }
func (e *safeErr) Safe() string  { return e.msg }

// NewSafeError returns an error whose text is msg and is shown as is in
// readiness answers. msg must be a constant description: no secret, PHI,
// path or URL.
func NewSafeError(msg string) error { return &safeErr{msg: msg} }
