package store

import (
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

// checkSettled returns ErrUnsettledLabels, naming the missing indexes, when
// the catalog holds what a streaming import wrote (the id key it named its
// resources under, or the ids bucket) but lacks an index of labelIndexes.
// A catalog of manifest imports only has neither: its items carry the
// labels their manifest gives.
func (s *Store) checkSettled() error {
	return s.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if (meta == nil || meta.Get(metaIDKeyKey) == nil) && tx.Bucket(bucketIDs) == nil {
			return nil
		}
		var missing []string
		for _, name := range labelIndexes {
			if tx.Bucket(name) == nil {
				missing = append(missing, string(name))
			}
		}
		if len(missing) == 0 {
			return nil
		}
		return fmt.Errorf("%w (it has no %s index)", ErrUnsettledLabels, strings.Join(missing, ", "))
	})
}
