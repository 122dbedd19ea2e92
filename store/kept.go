package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// A kept entry (Entry.Kept) names a live resource of the catalog that the
// stream keeps as it is: a conditional create whose search found it (R4
// http.html#ccreate: the server does not create, and leaves the resource
// found unchanged). Nothing of it is written; a full import does not
// retire it, nor the attachments it carries or the Binaries it links
// (which the input need not hold: the resource kept is the catalog's).
// Kept entries are held in memory, 16 bytes and a Where each (the
// distinct resources of a source that conditional creates find), and
// checked once the stream is written (checkKept), so that their order
// against the entries writing, moving or deleting the same resource does
// not matter.
//
// What a full import keeps with a kept resource is what it would keep if
// the input held the resource as the catalog does: the attachments it
// carries (bucketCarried) and the Binaries its lifted attachments link,
// which its stored body names by their custos attachment URI (the one
// of its compartment; a Binary live elsewhere is not named so). A Binary
// it only mentions (a Reference or url "Binary/<id>", bucketLinks lists
// those too) is not kept, as a written resource's mention keeps none:
// until 2026-12-06 every Binary in bucketLinks was, another patient's
// included.

// keptEntry is a kept entry: its URI, Where and number in the stream (the
// first, for a resource kept more than once).
type keptEntry struct {
	uri, where string
	n          int
}

// addKept validates a kept entry and records it; false when the problem
// list is full.
func (imp *entryImport) addKept(e *Entry, u URI, id [16]byte, where string, n int) bool {
	if e.Deleted || e.Stored || u.Scheme != SchemeFHIR || len(e.Sensitivity)+len(e.Consent)+len(e.PatientWide)+len(e.Body) > 0 {
		return imp.probs.add(where, "a kept entry names a live FHIR resource only (no content, labels, deletion or stored Binary)")
	}
	if imp.kept == nil {
		imp.kept = map[[16]byte]keptEntry{}
	}
	if k, dup := imp.kept[id]; dup && k.uri != u.String() {
		return imp.probs.add(where, "the same resource is kept twice, in different patient compartments (first at "+k.where+")")
	} else if !dup {
		imp.kept[id] = keptEntry{uri: u.String(), where: where, n: n}
	}
	return true
}

// checkKept checks, once every batch is written, that each kept resource
// is live under its URI and of the import's source (the input did not
// delete or move it), counts those the input did not write Unchanged, and,
// in a full import, records in keptAlso what they carry or link
// (retireUnmentioned keeps them; see above). It reports every kept entry
// that fails, in stream order (entryProblems).
func (imp *entryImport) checkKept(ctx context.Context) error {
	if len(imp.kept) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	imp.keptAlso = map[[16]byte]struct{}{}
	var linking []Resource // the kept resources' live versions naming a Binary (Full)
	err := imp.s.view(func(tx *bolt.Tx) error {
		res, vers, seen, carried, links := tx.Bucket(bucketResources), tx.Bucket(bucketVersions), tx.Bucket(bucketImportSeen), tx.Bucket(bucketCarried), tx.Bucket(bucketLinks)
		ids := slices.SortedFunc(maps.Keys(imp.kept), func(a, b [16]byte) int { return cmp.Compare(imp.kept[a].n, imp.kept[b].n) })
		for _, id := range ids {
			k := imp.kept[id]
			r, live, err := lastVersion(res, vers, k.uri)
			if err != nil {
				return err
			}
			if !live {
				imp.probs.add(k.where, "keeps a resource (a conditional create found it) that is not live in the catalog in its compartment: the input deletes or moves it")
				continue
			}
			if otherSource(r.Source, imp.opts.Source) {
				imp.probs.add(k.where, heldByAnotherSource)
				continue
			}
			if seen.Get(id[:]) == nil {
				imp.rep.Unchanged++
			}
			if !imp.opts.Full {
				continue
			}
			if k, _ := links.Cursor().Seek(id[:]); k != nil && bytes.HasPrefix(k, id[:]) {
				linking = append(linking, *r) // it names a Binary: which does it link?
			}
			c := carried.Cursor()
			for key, _ := c.Seek(id[:]); key != nil && bytes.HasPrefix(key, id[:]); key, _ = c.Next() {
				imp.keptAlso[[16]byte(key[len(id):])] = struct{}{}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := imp.probs.err(); err != nil {
		return err
	}
	imp.keptLinked = map[string]struct{}{}
	for _, r := range linking {
		if err := ctx.Err(); err != nil {
			return err
		}
		body, err := imp.s.Blob(ctx, r.Digest)
		if err != nil {
			return err
		}
		u, err := ParseURI(r.URI)
		if err != nil {
			return fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
		}
		for _, u := range liftedLinks(body, u) {
			imp.keptLinked[u] = struct{}{}
		}
	}
	return nil
}

// liftedLinks are the custos attachment URIs that the stored FHIR body of
// resource of names in its tenant and compartment (a lifted attachment or
// the Binary a lifted attachment links), each as URI.String writes it. A
// mention as the reader keeps it (Binary/<id>) is not one, nor is another
// compartment's URI (which no lifted link writes). Not JSON: none. Pure.
func liftedLinks(body []byte, of URI) []string {
	if !bytes.Contains(body, []byte(SchemeAttachment+"://")) {
		return nil
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var out []string
	EachNaming(v, func(s string) {
		if u, err := ParseURI(s); err == nil && u.Scheme == SchemeAttachment && u.Tenant == of.Tenant && u.Patient == of.Patient {
			out = append(out, u.String())
		}
	})
	return out
}

// keeps reports whether a full import keeps the live resource u,
// unmentioned: it is kept (Entry.Kept), carried by one that is, or what
// the lifted attachment of one that is links, at that URI (checkKept).
func (imp *entryImport) keeps(u URI) bool {
	id := [16]byte(uuid.MustParse(u.ID))
	_, kept := imp.kept[id]
	_, carried := imp.keptAlso[id]
	_, linked := imp.keptLinked[u.String()]
	return kept || carried || linked
}
