//go:build !unix

package app

import "errors"

// openFileLimit: no RLIMIT_NOFILE here.
func openFileLimit() (uint64, error) { return 0, errors.ErrUnsupported }
