//go:build linux

package store

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// releaseResident drops the pages of the file mapping from the process's
// resident set (madvise MADV_DONTNEED on the first size bytes). bbolt maps
// the file read-only and shared and writes through the file, so nothing is
// lost: the kernel keeps the pages in its page cache and the next access
// faults them back in. A streaming import calls it (Store.release) once
// the mapping grew by releaseBudget, so that its resident set stays under
// the budget and a batch instead of growing with the catalog file (every
// random insert reads a leaf through the mapping).
func releaseResident(db *bolt.DB, size int64) {
	if size <= 0 {
		return
	}
	// Through the raw system call: the mapping's address is a uintptr
	// (bolt.DB.Info), never converted to a Go pointer.
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, db.Info().Data, uintptr(size), syscall.MADV_DONTNEED)
}

// residentFileBytes returns the process's resident file-backed bytes (the
// third field of /proc/self/statm, "shared": RssFile + RssShmem), which
// hold the catalog's mapping; -1 if they cannot be read. It reads the
// kernel's counters, not the mapping, so it costs the same whatever the
// file's size.
func residentFileBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return -1
	}
	pages, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || pages < 0 {
		return -1
	}
	return pages * int64(os.Getpagesize())
}
