package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// The patient opt-out of streaming imports (docs/import.md, "Opt-out"): a
// patient has opted out when the catalog holds a live Consent in their
// compartment that records an opt-out (Entry.OptOut); every live item of
// that compartment written by a streaming import then carries the consent
// label "opt-out", and none does otherwise. The catalog keeps the live
// opt-out Consents in bucketOptOut; every import maintains it in the same
// all-or-nothing scratch copy, queues each patient whose Consents it
// changed (bucketImportOptOut) and, at the end, gives every live item of
// a queued patient whose label disagrees a new version with the label set
// or cleared (relabelOptOut).

// ConsentOptOut is the consent label of an opted-out patient's items.
const ConsentOptOut = "opt-out"

// bucketOptOut indexes the live opt-out Consents of streaming imports:
// keyed id of the patient (16 bytes) || keyed id of the Consent (16 bytes)
// -> empty. A patient has opted out iff a key starts with their keyed id.
// Keyed ids are per tenant, so the index is too.
var bucketOptOut = []byte("optout")

// bucketImportOptOut is a streaming import's scratch bucket: keyed id of a
// patient (16 bytes) -> empty, for every patient whose opt-out the import
// may have changed, or whose items it wrote with a label the index did not
// confirm. relabelOptOut drains and removes it (and begin a stale one).
var bucketImportOptOut = []byte("import-optout")

// optOutKey is u's key in bucketOptOut, if u names a Consent in a patient
// compartment: patient keyed id || Consent keyed id.
func optOutKey(u URI) ([]byte, bool) {
	if u.Scheme != SchemeFHIR || u.Type != "consent" || u.Patient == "" {
		return nil, false
	}
	p, id := uuid.MustParse(u.Patient), uuid.MustParse(u.ID)
	return append(p[:], id[:]...), true
}

// optedOut reports whether the index lists an opt-out Consent of patient.
func optedOut(optout *bolt.Bucket, patient []byte) bool {
	k, _ := optout.Cursor().Seek(patient)
	return k != nil && bytes.HasPrefix(k, patient)
}

// ConsentOptsOut reports whether a decoded FHIR Consent records an
// opt-out: status "active" and a base provision of type "deny", or R5's
// Consent.decision "deny" (R5 moved the base provision's type there).
// Exceptions nested under that provision do not lift it: an opt-out with
// exceptions still stops every use but treatment under the default
// policy, the safer reading. provision.period is not evaluated: a Consent
// that no longer applies must not be active. It is the one definition of
// the rule: fhirin applies it to what it reads, the store to what it holds
// (fillOptOut). Pure: no I/O.
func ConsentOptsOut(m map[string]any) bool {
	p, _ := m["provision"].(map[string]any)
	return m["status"] == "active" && (p["type"] == "deny" || m["decision"] == "deny")
}

// consentOptsOut reports whether the FHIR JSON of a stored Consent records
// an opt-out (ConsentOptsOut). It reads catalogs written before the index
// existed (fillOptOut). Pure: no I/O.
func consentOptsOut(body []byte) (bool, error) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return false, fmt.Errorf("%w: a stored Consent is not a JSON object", ErrCorrupt)
	}
	return ConsentOptsOut(m), nil
}

// optOutIndex is what one write transaction of an import uses of the
// opt-out index: the index and the queue of patients to check.
type optOutIndex struct {
	index, queue *bolt.Bucket
}

func (imp *entryImport) optOutIndex(tx *bolt.Tx) optOutIndex {
	return optOutIndex{tx.Bucket(bucketOptOut), tx.Bucket(bucketImportOptOut)}
}

// set records whether the Consent of key opts its patient out, and queues
// the patient if that changed the index.
func (x optOutIndex) set(key []byte, optOut bool) error {
	switch had := x.index.Get(key) != nil; {
	case optOut && !had:
		if err := x.index.Put(key, nil); err != nil {
			return fmt.Errorf("store: put opt-out: %w", err)
		}
	case !optOut && had:
		if err := x.index.Delete(key); err != nil {
			return fmt.Errorf("store: delete opt-out: %w", err)
		}
	default:
		return nil
	}
	return x.enqueue(key[:16])
}

// enqueue queues patient (a keyed id) for relabelOptOut.
func (x optOutIndex) enqueue(patient []byte) error {
	if err := x.queue.Put(patient, nil); err != nil {
		return fmt.Errorf("store: queue opt-out check: %w", err)
	}
	return nil
}

// forget removes uri from the index if it names an opt-out Consent: it is
// retired, deleted or moved.
func (x optOutIndex) forget(uri string) error {
	u, err := ParseURI(uri)
	if err != nil {
		return fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
	}
	if key, ok := optOutKey(u); ok {
		return x.set(key, false)
	}
	return nil
}

// label sets or clears the consent label "opt-out" of r (an item of a
// streaming import in the compartment of patient) as the index says now.
// An item the caller labelled opted out whose patient the index does not
// (yet) list keeps the label, and its patient is queued, so that
// relabelOptOut settles it once the whole stream is written.
func (x optOutIndex) label(r *Resource, patient []byte) error {
	switch {
	case optedOut(x.index, patient):
		r.Labels.Consent = []string{ConsentOptOut}
	case slices.Contains(r.Labels.Consent, ConsentOptOut):
		return x.enqueue(patient)
	}
	return nil
}

// retire is retire (the package function) for an import: it also removes
// an opt-out Consent it retires from the opt-out index, and what a
// resource it retires names from the link index.
func (imp *entryImport) retire(tx *bolt.Tx, uri string, now time.Time) (bool, error) {
	ok, err := retire(tx.Bucket(bucketResources), tx.Bucket(bucketVersions), uri, now)
	if err != nil {
		return false, err
	}
	if err := imp.linksOf(tx).forget(uri); err != nil {
		return false, err
	}
	return ok, imp.optOutIndex(tx).forget(uri)
}

// indexBatchOptOut updates the index for the queued batch before it is
// written, so that the batch's items are labelled by it: a Consent the
// batch moves leaves it under its old patient, a Consent the batch writes
// enters or leaves it by its OptOut, a Consent the batch deletes leaves
// it.
func (imp *entryImport) indexBatchOptOut(tx *bolt.Tx) error {
	x, ids := imp.optOutIndex(tx), tx.Bucket(bucketIDs)
	for i := range imp.batch {
		rec := &imp.batch[i]
		key, ok := optOutKey(rec.uri)
		if !ok {
			continue
		}
		if old := ids.Get(rec.id[:]); old != nil && string(old) != rec.res.URI {
			if err := x.forget(string(old)); err != nil {
				return err
			}
		}
		if err := x.set(key, rec.optOut); err != nil {
			return err
		}
	}
	for _, d := range imp.deletes {
		if uri := ids.Get(d.id[:]); uri != nil {
			if err := x.forget(string(uri)); err != nil {
				return err
			}
		}
	}
	return nil
}

// fillOptOut fills the index of a catalog written before it existed
// (begin created it empty): every live Consent of a streaming import is
// read (Blob: in an encrypted catalog decrypted outside any transaction)
// and entered if it opts out, and its patient is queued, as is every
// patient with a live item labelled "opt-out", so that the import ends
// with every label as the index says (repairing labels earlier imports
// lost or kept wrongly). One page of the catalog per transaction.
func (imp *entryImport) fillOptOut(ctx context.Context) error {
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := imp.s.Page(after, diffPage)
		if err != nil {
			return err
		}
		var puts, queue [][]byte
		for _, r := range page {
			if r.Source == "" {
				continue // a manifest import's: labelled by its manifest
			}
			u, err := ParseURI(r.URI)
			if err != nil {
				return fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
			}
			if u.Patient == "" {
				continue
			}
			p := uuid.MustParse(u.Patient)
			if slices.Contains(r.Labels.Consent, ConsentOptOut) {
				queue = append(queue, p[:])
			}
			key, ok := optOutKey(u)
			if !ok {
				continue
			}
			body, err := imp.s.Blob(ctx, r.Digest)
			if err != nil {
				return err
			}
			if out, err := consentOptsOut(body); err != nil {
				return err
			} else if out {
				puts = append(puts, key)
			}
		}
		err = imp.s.update(func(tx *bolt.Tx) error {
			x := imp.optOutIndex(tx)
			for _, k := range puts {
				if err := x.set(k, true); err != nil {
					return err
				}
			}
			for _, p := range queue {
				if err := x.enqueue(p); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		imp.s.release()
		if len(page) < diffPage {
			return nil
		}
		after = page[len(page)-1].URI
	}
}

// relabelVisits bounds how many live items relabelOptOut reads per
// transaction (a variable so that a test can make it small); it writes at
// most BatchEntries new versions per transaction.
var relabelVisits = 4096

// relabelOptOut ends an import's opt-out work: for every queued patient it
// reads whether the index lists an opt-out Consent of theirs, and gives
// every live item of their compartment written by a streaming import
// (fhir:// and attachment:// URIs under the patient; a manifest import's
// items keep their manifest's labels) whose consent label disagrees a new
// version with the label set or cleared (Relabelled). Retired items are
// left alone. It works in transactions of at most relabelVisits items
// read and BatchEntries versions written, draining the scratch bucket,
// and then removes it.
func (imp *entryImport) relabelOptOut(ctx context.Context) error {
	tenant := imp.opts.Namer.tenant
	after := "" // the last URI checked of the first queued patient
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done := false
		err := imp.s.update(func(tx *bolt.Tx) error {
			x, res, vers := imp.optOutIndex(tx), tx.Bucket(bucketResources), tx.Bucket(bucketVersions)
			res.FillPercent, vers.FillPercent = streamFillPercent, streamFillPercent
			k, _ := x.queue.Cursor().First()
			if k == nil {
				done = true
				return tx.DeleteBucket(bucketImportOptOut)
			}
			patient := bytes.Clone(k)
			out := optedOut(x.index, patient)
			var fixes []Resource
			visits, finished := 0, true
			c := res.Cursor()
			// The prefixes in byte order, so that after orders the walk.
			for _, scheme := range []string{SchemeAttachment, SchemeFHIR} {
				prefix := scheme + "://" + tenant + "/patients/" + uuid.UUID(patient).String() + "/"
				seek := prefix
				if after > prefix {
					seek = after + "\x00"
				}
				for k, v := c.Seek([]byte(seek)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
					if visits >= relabelVisits || len(fixes) >= imp.opts.BatchEntries {
						finished = false
						break
					}
					visits++
					after = string(k)
					var r Resource
					if err := decodeResource(v, &r); err != nil {
						return err
					}
					if r.Source == "" || slices.Contains(r.Labels.Consent, ConsentOptOut) == out {
						continue
					}
					fixes = append(fixes, r)
				}
				if !finished {
					break
				}
			}
			for _, r := range fixes {
				setOptOut(&r, out)
				r.Version++
				if err := putLive(res, vers, r); err != nil {
					return err
				}
			}
			imp.rep.Relabelled += len(fixes)
			if finished {
				after = ""
				if err := x.queue.Delete(patient); err != nil {
					return fmt.Errorf("store: dequeue opt-out check: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		imp.s.release()
		if done {
			return nil
		}
	}
}
