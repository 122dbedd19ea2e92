//go:build !unix

package regularfile

// extraFlags: where O_NOFOLLOW and FIFOs are missing, a plain open.
func extraFlags(Follow) int { return 0 }
