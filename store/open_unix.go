//go:build unix

package store

import "syscall"

// openNonblock keeps open(2) of a FIFO named in a manifest from blocking;
// it has no effect on regular files.
const openNonblock = syscall.O_NONBLOCK
