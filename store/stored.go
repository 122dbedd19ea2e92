package store

import (
	"crypto/sha256"
	"slices"
	"strings"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// A stored entry (Entry.Stored) names a Binary that the stream links but
// does not hold: an incremental import of a DocumentReference whose Binary
// did not change (docs/import.md, "Attachments"). The reader accepted the
// link because the Binary was live in this catalog in the carrier's
// compartment, and labelled the carrier with the Binary's labels; the
// import makes sure the Binary has every label of the carrier (a carrier
// that gained "hiv" gives it to its Binary), in the same all-or-nothing
// import, and fails if the Binary is no longer live there.

// storedEntry is a queued stored entry.
type storedEntry struct {
	id          [16]byte
	uri         string
	patient     string // keyed id, "" for tenant-level
	sensitivity []string
	occ         occurrence
}

// storedMeta is the occurrence digest of a stored entry with labels sens:
// never that of an entry with content (a metaDigest), so that a stream
// holding the Binary both ways is refused as a contradiction.
func storedMeta(sens []string) [sha256.Size]byte {
	return sha256.Sum256([]byte("stored\x00" + strings.Join(sens, "\x00")))
}

// addStored validates a stored entry and queues it; false when the problem
// list is full.
func (imp *entryImport) addStored(e *Entry, u URI, id [16]byte, where string) bool {
	if e.Type != "Binary" || e.Deleted {
		return imp.probs.add(where, "only a Binary that is not deleted can be a stored entry")
	}
	sens, err := normalizeSet(e.Sensitivity, knownSensitivity)
	if err != nil {
		return imp.probs.add(where, "sensitivity: "+err.Error())
	}
	occ := occurrence{meta: storedMeta(sens), where: where}
	if u.Patient != "" {
		occ.patient = uuid.MustParse(u.Patient)
	}
	if first, dup := imp.pending[id]; dup {
		if rel, reason := compareStored(first.occ, occ); rel != repeats {
			return imp.probs.add(where, reason)
		}
		imp.rep.Repeated++
		return true
	}
	if len(imp.probs.list) > 0 {
		return true
	}
	imp.pending[id] = pendingEntry{occ, -1}
	imp.partial = true // its content's labels are not derived again
	imp.stored = append(imp.stored, storedEntry{id: id, uri: u.String(), patient: u.Patient, sensitivity: sens, occ: occ})
	return true
}

// compareStored is first.compare(later) for a stored entry later, with the
// problem in its words when first deletes the Binary: the input does not
// import the Binary, it links it ("both deleted and imported" named
// neither the link nor the deletion as such).
func compareStored(first, later occurrence) (repetition, string) {
	if first.meta == ([sha256.Size]byte{}) {
		return contradicts, "links a Binary that the input deletes (at " + first.where + ")"
	}
	return first.compare(later)
}

// notStored is the problem of a stored entry whose Binary is not live
// under its URI. It reads the same whether the Binary exists elsewhere
// (another patient, another tenant, retired) or nowhere.
const notStored = "links a Binary that is neither in the input nor live in the catalog in the compartment of the resource linking it"

// writeStored writes the queued stored entries in tx: each Binary must be
// live under its URI; one lacking a label of its entry gets a new version
// with the union (content, metadata and source unchanged; the
// patient-wide labels as the indexes say, set or cleared), counted Relabelled;
// else Unchanged.
// Each is marked seen, so a full import keeps it.
func (imp *entryImport) writeStored(tx *bolt.Tx, optout patientIndex) error {
	res, vers, seen := tx.Bucket(bucketResources), tx.Bucket(bucketVersions), tx.Bucket(bucketImportSeen)
	links := imp.linksOf(tx)
	for _, st := range imp.stored {
		if err := markSeen(seen, st.id, st.occ); err != nil {
			return err
		}
		links.touch(st.id[:]) // its links may name it from other imports
		prev, live, err := lastVersion(res, vers, st.uri)
		if err != nil {
			return err
		}
		if !live {
			return &EntryError{Where: st.occ.where, Reason: notStored}
		}
		if otherSource(prev.Source, imp.opts.Source) {
			return &EntryError{Where: st.occ.where, Reason: heldByAnotherSource}
		}
		r := *prev
		r.Labels.Sensitivity = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(prev.OwnSensitivity()), st.sensitivity...))))
		r.PatientWide = nil
		if len(r.Labels.Sensitivity) == 0 {
			r.Labels.Sensitivity = nil
		}
		// The patient-wide labels as the indexes say now, both ways:
		// patientIndex.label keeps an "opt-out" the index does not
		// confirm (the reader's, for a Consent still to come), but this
		// one is the catalog's own, of a Consent this import retired or
		// changed; kept, relabelPatientWide cleared it with a second
		// version, counting the Binary Relabelled twice (found by
		// h-review6). A Consent or Patient a later batch writes queues the
		// patient again (patientIndex.set).
		if err := optout.asIndexed(&r); err != nil {
			return err
		}
		same, err := sameResource(r, *prev)
		if err != nil {
			return err
		}
		if same {
			imp.rep.Unchanged++
			continue
		}
		r.Version++
		if err := putLive(res, vers, r); err != nil {
			return err
		}
		imp.rep.Relabelled++
	}
	return nil
}
