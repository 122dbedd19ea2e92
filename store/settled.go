package store

import (
	"encoding/binary"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// labelIndexes are the indexes a streaming import keeps so that every
// item's labels follow its Binary component (links, linkedby) and its
// patient's opt-out and VIP standing (optout, vip). A catalog written
// before them has none of them, and its items none of those labels; the
// first streaming import by a custos that has them builds them and
// settles every label (fillLinks, fillPatientWide).
var labelIndexes = [][]byte{bucketLinks, bucketLinkedBy, bucketOptOut, bucketVIP}

// metaSettledKey holds the marker of settled labels: the bbolt transaction
// id (8 bytes, big-endian) of the last write transaction this custos
// committed to a catalog whose labels were settled before it or by it
// (commit). bbolt gives every committed write transaction the id of the
// previous one plus one, whichever binary commits it, and tx.WriteTo (the
// scratch copy of staged) keeps it; so a write by a custos that does not
// keep the marker (one older than it: before 2026-12-06) leaves the
// catalog's transaction id past the marker for good: its imports may have
// stored a Consent or an Observation without the labels the indexes give,
// as the indexes existed but it did not maintain them.
var metaSettledKey = []byte("settled-txid")

// settled reports whether the labels of the catalog as tx sees it are
// settled: it holds no streaming (FHIR) import data (its items carry the
// labels their manifest gives), or it has every index of labelIndexes and
// the marker names the last committed transaction, id. A View passes
// tx.ID(); a write transaction, before it changes anything, tx.ID()-1.
func settled(tx *bolt.Tx, id int) error {
	if !streamingData(tx) {
		return nil
	}
	var missing []string
	for _, name := range labelIndexes {
		if tx.Bucket(name) == nil {
			missing = append(missing, string(name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (it has no %s index)", ErrUnsettledLabels, strings.Join(missing, ", "))
	}
	var m []byte
	if meta := tx.Bucket(bucketMeta); meta != nil {
		m = meta.Get(metaSettledKey)
	}
	if len(m) != 8 || binary.BigEndian.Uint64(m) != uint64(id) {
		return fmt.Errorf("%w (the labels were changed by a custos older than this one, which does not keep them settled; re-import with this custos)", ErrUnsettledLabels)
	}
	return nil
}

// checkSettled returns ErrUnsettledLabels when the catalog holds what a
// streaming import wrote (the id key it named its resources under, or the
// ids bucket) but lacks an index of labelIndexes (naming them), or when a
// custos that does not keep the marker wrote to it after this one last
// settled it (metaSettledKey).
func (s *Store) checkSettled() error {
	return s.view(func(tx *bolt.Tx) error { return settled(tx, tx.ID()) })
}

// commit runs fn in a write transaction and, when the labels were settled
// before it (settled), records the transaction's id as the marker in the
// same transaction: every write this custos makes keeps a settled catalog
// settled, and none makes an unsettled one look settled. The one write that
// settles an unsettled catalog is the end of a streaming import that
// rebuilt every label index (ImportEntries, markSettled). It keeps the
// label rules version the same way (keepLabelRules, labelrules.go).
func (s *Store) commit(fn func(*bolt.Tx) error) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		before := settled(tx, tx.ID()-1) == nil
		rules, whyRules := labelRules(tx, tx.ID()-1)
		if err := fn(tx); err != nil {
			return err
		}
		if err := keepLabelRules(tx, rules, whyRules); err != nil {
			return err
		}
		if !before {
			return nil
		}
		return markSettled(tx)
	})
}

// markSettled records tx's id as the marker of settled labels.
func markSettled(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return fmt.Errorf("store: create bucket: %w", err)
	}
	if err := meta.Put(metaSettledKey, binary.BigEndian.AppendUint64(nil, uint64(tx.ID()))); err != nil {
		return fmt.Errorf("store: write meta: %w", err)
	}
	return nil
}
