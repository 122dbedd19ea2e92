//go:build darwin || freebsd || dragonfly

package fsspace

import "golang.org/x/sys/unix"

// fragmentSize is 0: these systems' statfs has no f_frsize, and its
// f_bsize is the fundamental block size, the unit of its block counts
// (Bytes).
func fragmentSize(*unix.Statfs_t) int64 { return 0 }
