package secrets

import "errors"

// ErrUnavailable is returned when a key cannot be supplied (the source is
// unreachable or the key is missing). Callers must fail closed: release
// nothing that the key would have protected.
var ErrUnavailable = errors.New("secrets: key unavailable")
