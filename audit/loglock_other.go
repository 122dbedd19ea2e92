//go:build !unix

package audit

import "time"

// lockLog is a no-op where flock(2) is missing: bbolt's own lock on the
// live segment is then the only one (see loglock_unix.go).
func lockLog(string, bool, time.Duration) (func(), error) { return func() {}, nil }
