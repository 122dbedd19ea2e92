package storetest

import (
	"maps"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestDump: every key of every bucket, named bucket/hex(key), with the
// values the mask returns; a pair the mask drops is left out.
func TestDump(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for bucket, pairs := range map[string]map[string]string{"meta": {"a": "1", "txid": "7"}, "blobs": {"\x01": "sealed"}} {
			b, err := tx.CreateBucket([]byte(bucket))
			if err != nil {
				return err
			}
			for k, v := range pairs {
				if err := b.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"meta/61": "1", "meta/74786964": "7", "blobs/01": "sealed"}
	if got := Dump(t, path, nil); !maps.Equal(got, want) {
		t.Errorf("Dump = %v, want %v", got, want)
	}
	masked := Dump(t, path, func(bucket, key, v []byte) ([]byte, bool) {
		switch {
		case string(bucket) == "blobs":
			return nil, true
		case string(key) == "txid":
			return nil, false
		}
		return v, true
	})
	if want := map[string]string{"meta/61": "1", "blobs/01": ""}; !maps.Equal(masked, want) {
		t.Errorf("Dump masked = %v, want %v", masked, want)
	}
}
