// Package storetest gives tests a catalog file's whole content to compare:
// Dump reads every key and value of every top-level bucket of a bbolt
// file, opened read-only, so that two imports that must agree (a fast
// path and its plain reference: store's blank-import and prepared-entry
// tests, app's read-ahead tests) are compared key for key, not by their
// reports alone. It imports only bbolt (never package store), so store's
// own tests can use it too.
package storetest

import (
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Dump maps "bucket/hex(key)" to the value of every key of every
// top-level bucket of the bbolt file at path. mask, if not nil, sees each
// pair and returns the value to record and whether to record the pair:
// a caller leaves out what differs by design (fresh nonces, transaction
// ids) and nothing else. A dump with no pair at all fails the test: two
// empty dumps compare equal whatever the imports did, and a catalog
// always holds its meta bucket.
func Dump(t testing.TB, path string, mask func(bucket, key, value []byte) ([]byte, bool)) map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dump := map[string]string{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				if mask != nil {
					var keep bool
					if v, keep = mask(name, k, v); !keep {
						return nil
					}
				}
				dump[fmt.Sprintf("%s/%x", name, k)] = string(v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dump) == 0 {
		t.Fatalf("storetest: %s holds no key (after mask): nothing to compare", path)
	}
	return dump
}
