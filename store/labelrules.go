package store

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// metaLabelRulesKey holds the version of the labelling rules the labels of
// the catalog's streaming (FHIR) imports were derived with (the reader's,
// fhirin.LabelRules, stated by each writer: EntryOptions.LabelRules,
// RelabelOptions.Rules) and, like the marker of settled labels
// (settled.go), the bbolt transaction id of the last write this custos
// committed: uint32be(version) || uint64be(txid). The version is the
// oldest any live item may have been labelled with: an incremental import
// lowers it to its own (min), only a writer that derives every live item's
// labels anew raises it (the first streaming import into a catalog without
// streaming data, a full import that writes every live streaming item,
// Relabel). Every write this custos commits keeps it (commit); a write by
// a custos that does not keep it leaves its transaction id behind, and the
// version no longer counts. A catalog without the key was labelled before
// the first version (before the residence rule).
var metaLabelRulesKey = []byte("label-rules")

// streamingData reports whether the catalog holds what a streaming import
// wrote: the id key it named its resources under, or the ids bucket. Only
// such a catalog has labels derived by rules (a manifest's items carry the
// labels their manifest gives).
func streamingData(tx *bolt.Tx) bool {
	meta := tx.Bucket(bucketMeta)
	return meta != nil && meta.Get(metaIDKeyKey) != nil || tx.Bucket(bucketIDs) != nil
}

// labelRules reads the version of the label rules recorded in the catalog
// as tx sees it, id being the last committed transaction's (a View passes
// tx.ID(), a write transaction before it changes anything tx.ID()-1). why
// is "" when the version counts, else why it does not (its words follow
// "its labels").
func labelRules(tx *bolt.Tx, id int) (version uint32, why string) {
	var m []byte
	if meta := tx.Bucket(bucketMeta); meta != nil {
		m = meta.Get(metaLabelRulesKey)
	}
	switch {
	case m == nil:
		return 0, "predate every label rules version (before the residence rule of 2026-12-07): a patient's home may be unlabelled and served as reference data"
	case len(m) != 12:
		return 0, "have a label rules version that is not readable"
	case binary.BigEndian.Uint64(m[4:]) != uint64(id):
		return 0, "were changed by a custos that does not keep the label rules version (older than this one)"
	}
	return binary.BigEndian.Uint32(m), ""
}

// putLabelRules records version as the catalog's label rules, at tx.
func putLabelRules(tx *bolt.Tx, version uint32) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return fmt.Errorf("store: create bucket: %w", err)
	}
	v := binary.BigEndian.AppendUint32(nil, version)
	if err := meta.Put(metaLabelRulesKey, binary.BigEndian.AppendUint64(v, uint64(tx.ID()))); err != nil {
		return fmt.Errorf("store: write meta: %w", err)
	}
	return nil
}

// keepLabelRules ends a write transaction of this custos (commit): a
// version that counted before it (before, whyBefore: labelRules at
// tx.ID()-1) is carried to tx unless the transaction recorded one itself.
func keepLabelRules(tx *bolt.Tx, before uint32, whyBefore string) error {
	if whyBefore != "" {
		return nil
	}
	if _, why := labelRules(tx, tx.ID()); why == "" {
		return nil // recorded by the transaction
	}
	return putLabelRules(tx, before)
}

// checkLabelRules returns ErrOldLabelRules when the catalog holds what a
// streaming import wrote and its labels were not derived with rules of
// version want or later (or the version is unknown), saying why.
func checkLabelRules(tx *bolt.Tx, id int, want uint32) error {
	if !streamingData(tx) {
		return nil
	}
	v, why := labelRules(tx, id)
	if why == "" && v >= want {
		return nil
	}
	if why == "" {
		why = fmt.Sprintf("were derived with label rules version %d, and this custos's are version %d", v, want)
	}
	return fmt.Errorf("%w: its labels %s", ErrOldLabelRules, why)
}
