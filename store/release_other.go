//go:build !linux

package store

import bolt "go.etcd.io/bbolt"

// releaseResident is a no-op where madvise is not used (see release_linux.go).
func releaseResident(*bolt.DB, int64) {}

// residentFileBytes is -1 where it is not read (see release_linux.go):
// release then always calls releaseResident, a no-op here.
func residentFileBytes() int64 { return -1 }
