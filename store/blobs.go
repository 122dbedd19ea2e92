package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// blobInlineMax is the largest stored blob value (content, or its envelope)
// kept inline in the "blobs" bucket. A larger one is written as a nested
// bucket under its digest holding the value under blobNestedKey: it gets
// pages of its own, so inserting a random digest next to it rewrites only
// the parent leaf's small bucket header instead of reading the large value
// back through the mapping and copying it (see doc.go, "Storage layout").
const blobInlineMax = 1024

// blobNestedKey is the one key of a nested blob bucket.
var blobNestedKey = []byte("v")

// getBlob returns the stored value of the blob under key in blobs, inline
// or nested, or nil if there is none. A nested bucket without its value is
// corrupt.
func getBlob(blobs *bolt.Bucket, key []byte) ([]byte, error) {
	if v := blobs.Get(key); v != nil {
		return v, nil
	}
	nb := blobs.Bucket(key)
	if nb == nil {
		return nil, nil
	}
	v := nb.Get(blobNestedKey)
	if v == nil {
		return nil, fmt.Errorf("%w: nested blob %x has no value", ErrCorrupt, key)
	}
	return v, nil
}

// blobValue returns the stored value for the blobs bucket entry (k, v) seen
// by ForEach or a cursor, where v is nil for a nested bucket.
func blobValue(blobs *bolt.Bucket, k, v []byte) ([]byte, error) {
	if v != nil {
		return v, nil
	}
	return getBlob(blobs, k)
}

// blobWriter writes blobs in one write transaction and moves the catalog to
// schema version 3 when it writes the first nested blob, so that a binary
// which only knows inline blobs refuses the catalog instead of finding no
// content under a digest its resources name.
type blobWriter struct {
	tx       *bolt.Tx
	b        *bolt.Bucket
	upgraded bool
}

func newBlobWriter(tx *bolt.Tx) *blobWriter {
	return &blobWriter{tx: tx, b: tx.Bucket(bucketBlobs)}
}

// hasBlob reports whether a blob is stored under key in blobs, in either
// form, with one cursor search.
func hasBlob(blobs *bolt.Bucket, key []byte) bool {
	k, _ := blobs.Cursor().Seek(key)
	return bytes.Equal(k, key)
}

// put stores v under key, which must not hold a blob yet.
func (w *blobWriter) put(key, v []byte) error {
	if len(v) <= blobInlineMax {
		if err := w.b.Put(key, v); err != nil {
			return fmt.Errorf("store: put blob: %w", err)
		}
		return nil
	}
	if err := w.upgrade(); err != nil {
		return err
	}
	nb, err := w.b.CreateBucket(key)
	if err != nil {
		return fmt.Errorf("store: put blob: %w", err)
	}
	if err := nb.Put(blobNestedKey, v); err != nil {
		return fmt.Errorf("store: put blob: %w", err)
	}
	return nil
}

// replace stores v under key in place of the blob there (in either form).
func (w *blobWriter) replace(key, v []byte) error {
	var err error
	if w.b.Bucket(key) != nil {
		err = w.b.DeleteBucket(key)
	} else {
		err = w.b.Delete(key)
	}
	if err != nil {
		return fmt.Errorf("store: replace blob: %w", err)
	}
	return w.put(key, v)
}

// upgrade records schema version 3 once per transaction. A schema 1
// catalog is plaintext: it also gets its encryption mode recorded.
func (w *blobWriter) upgrade() error {
	if w.upgraded {
		return nil
	}
	meta := w.tx.Bucket(bucketMeta)
	if v := meta.Get(metaSchemaKey); len(v) != 4 || binary.BigEndian.Uint32(v) != SchemaVersion {
		mode, _, err := encryption(w.tx)
		if err != nil {
			return err
		}
		if mode != EncryptionNone {
			// Only schemas 2 and 3 record the envelope mode; encryption()
			// accepted the catalog, so this is schema 2 with its KEK.
			if err := meta.Put(metaSchemaKey, binary.BigEndian.AppendUint32(nil, SchemaVersion)); err != nil {
				return fmt.Errorf("store: write meta: %w", err)
			}
		} else if err := putEncryption(w.tx, EncryptionNone, nil); err != nil {
			return err
		}
	}
	w.upgraded = true
	return nil
}
