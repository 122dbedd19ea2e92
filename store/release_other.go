//go:build !linux

package store

import bolt "go.etcd.io/bbolt"

// releaseResident is a no-op where madvise is not used (see release_linux.go).
func releaseResident(*bolt.DB, int64) {}
