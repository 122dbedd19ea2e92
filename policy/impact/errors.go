package impact

import "errors"

// ErrRecord is returned by Replay when an audit record in range does not
// decode, or its stored input is not a policy input. The log may be damaged:
// run custos audit verify. The replay stops rather than report a partial
// picture as complete.
var ErrRecord = errors.New("impact: unreadable audit record or input")
