package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// RelabelOptions configure Relabel.
type RelabelOptions struct {
	// Rules is the version of the label rules Derive applies
	// (fhirin.LabelRules), recorded in the catalog when it succeeds.
	Rules uint32
	// Derive returns the sensitivity labels the rules derive from the
	// stored body of a FHIR resource (fhirin.BodyLabels); an error means
	// the body is undecodable. Required.
	Derive func(body []byte) ([]string, error)
	// DryRun does everything in the scratch copy and then discards it: the
	// report says what Relabel would change, and the catalog is not
	// touched.
	DryRun bool
	// Progress, if not nil, is called with the number of live resources
	// read so far and their total.
	Progress func(done, total int)
}

// RelabelReport says what Relabel changed (or, DryRun, would change). It
// holds counts and label values only, no URI or content.
type RelabelReport struct {
	// Resources is the number of live resources of the catalog; Read
	// those whose stored body was read (the live FHIR resources of
	// streaming imports).
	Resources int `json:"resources"`
	Read      int `json:"read"`
	// Relabelled is the number of live items given a new version to
	// change their labels: a resource whose body the rules now label, and
	// those that follow it (its lifted attachments, its Binary component,
	// its patient's items for a patient-wide label).
	Relabelled int `json:"relabelled"`
	// Added and Removed count, by label, the items that gained or lost it.
	// Relabel never removes a label a body was given (a label leaves only
	// by a full import: docs/import.md); Removed is a patient-wide label
	// that its index takes away.
	Added   map[string]int `json:"added"`
	Removed map[string]int `json:"removed"`
	// Rules is the label rules version the catalog records now (DryRun:
	// would record); zero for a catalog without streaming data, whose
	// labels are its manifests'.
	Rules  uint32 `json:"rules"`
	DryRun bool   `json:"dry_run"`
}

// labelDelta counts, by label, the items that gained (added) or lost
// (removed) a label.
type labelDelta struct{ added, removed map[string]int }

// note counts the labels that differ between old and cur, an item's
// records before and after a new version.
func (d *labelDelta) note(old, cur *Resource) {
	if d == nil {
		return
	}
	for _, pair := range [][2][]string{{old.Labels.Sensitivity, cur.Labels.Sensitivity}, {old.Labels.Consent, cur.Labels.Consent}} {
		for _, l := range pair[1] {
			if !slices.Contains(pair[0], l) {
				d.added[l]++
			}
		}
		for _, l := range pair[0] {
			if !slices.Contains(pair[1], l) {
				d.removed[l]++
			}
		}
	}
}

// Relabel derives the labels of every live FHIR resource of a streaming
// import in the catalog at catalogPath anew from its stored body with the
// current rules (o.Derive) and records o.Rules as the catalog's label
// rules version, so that a catalog imported before the rules changed can
// be served (ErrOldLabelRules) without its FHIR input. It is staged like
// ImportStaged (import lock, scratch copy, rename: while a server serves
// the catalog, too, and all or nothing for the file): every body is read
// first (Blob: decrypted with opts.DataKeys in an encrypted catalog), then
// one write transaction gives each resource the labels the rules derive
// that it lacks (a new version, Relabelled) and its lifted attachments
// the same, settles the Binary components it is a member of (links.go)
// and records the version; only a patient-wide label a Patient gains
// (vip) takes the further transactions of the patient-wide relabelling.
// Labels are only added. The catalog is replaced only when a label or the
// version changed, and never with DryRun.
//
// It refuses, changing nothing, a catalog whose labels are not settled
// (ErrUnsettledLabels: import first), and one where a body is missing or
// does not decode (ErrCorrupt, with the count). A manifest-only catalog
// has no derived labels: nothing to do.
func Relabel(ctx context.Context, catalogPath string, o RelabelOptions, opts Options) (RelabelReport, error) {
	if o.Derive == nil {
		return RelabelReport{}, errors.New("store: relabel: no label rules")
	}
	if _, err := os.Stat(catalogPath); err != nil {
		return RelabelReport{}, fmt.Errorf("store: relabel: %w", pathless(err))
	}
	var rep RelabelReport
	err := staged(ctx, catalogPath, opts, func(st *Store) (bool, error) {
		var err error
		var changed bool
		rep, changed, err = st.relabel(ctx, o)
		return changed && !o.DryRun, err
	})
	if err != nil {
		return RelabelReport{}, err
	}
	rep.DryRun = o.DryRun
	return rep, nil
}

// gain is a resource and the labels the rules derive from its body that
// it lacks.
type gain struct {
	uri string
	add []string
}

// relabel is Relabel on the scratch copy s; changed says whether it wrote
// anything.
func (s *Store) relabel(ctx context.Context, o RelabelOptions) (RelabelReport, bool, error) {
	rep := RelabelReport{Added: map[string]int{}, Removed: map[string]int{}}
	var stream, current bool
	err := s.view(func(tx *bolt.Tx) error {
		mode, _, err := encryption(tx)
		if err != nil {
			return err
		}
		if err := s.checkMode(mode); err != nil {
			return err
		}
		rep.Resources = tx.Bucket(bucketResources).Stats().KeyN
		if stream = streamingData(tx); !stream {
			return nil
		}
		current = checkLabelRules(tx, tx.ID(), o.Rules) == nil
		return settled(tx, tx.ID())
	})
	if err != nil || !stream {
		return rep, false, err
	}
	imp := &entryImport{s: s, opts: EntryOptions{BatchEntries: DefaultBatchEntries}, delta: &labelDelta{rep.Added, rep.Removed}}
	var gains []gain
	var missing, undecodable, seen int
	err = imp.eachStoredPage(ctx, func(page []Resource) error {
		for _, r := range page {
			seen++
			if o.Progress != nil && seen%1000 == 0 {
				o.Progress(seen, rep.Resources)
			}
			if r.Source == "" || r.MIMEType != MIMEFHIR {
				continue
			}
			if u, err := ParseURI(r.URI); err != nil {
				return fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
			} else if u.Scheme != SchemeFHIR {
				continue
			}
			rep.Read++
			body, err := s.Blob(ctx, r.Digest)
			switch {
			case errors.Is(err, ErrNotFound):
				missing++
				continue
			case errors.Is(err, ErrCorrupt):
				undecodable++
				continue
			case err != nil:
				return err
			}
			labels, err := o.Derive(body)
			if err != nil {
				undecodable++
				continue
			}
			if labels, err = normalizeSet(labels, knownSensitivity); err != nil {
				return fmt.Errorf("store: relabel: the rules derived a label the catalog does not know: %w", err)
			}
			own := r.OwnSensitivity()
			if add := slices.DeleteFunc(labels, func(l string) bool { return slices.Contains(own, l) }); len(add) > 0 {
				gains = append(gains, gain{r.URI, add})
			}
		}
		return nil
	})
	if err != nil {
		return RelabelReport{}, false, err
	}
	if o.Progress != nil {
		o.Progress(rep.Resources, rep.Resources)
	}
	if missing+undecodable > 0 {
		return RelabelReport{}, false, fmt.Errorf("%w: relabel: %d of the %d stored FHIR resources cannot be read (%d bodies missing, %d undecodable); nothing was changed: restore the catalog from a backup, or re-import its FHIR input (custos import --full)",
			ErrCorrupt, missing+undecodable, rep.Read, missing, undecodable)
	}
	if len(gains) == 0 && current {
		rep.Rules = o.Rules
		return rep, false, nil
	}
	var patientWide bool
	err = s.update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketImportOptOut) != nil {
			if err := tx.DeleteBucket(bucketImportOptOut); err != nil {
				return fmt.Errorf("store: remove a stale import bucket: %w", err)
			}
		}
		queue, err := tx.CreateBucket(bucketImportOptOut)
		if err != nil {
			return fmt.Errorf("store: create bucket: %w", err)
		}
		if err := imp.gainAll(tx, gains); err != nil {
			return err
		}
		x := imp.linksOf(tx)
		for len(imp.touched) > 0 {
			var b [16]byte
			for b = range imp.touched {
				break
			}
			delete(imp.touched, b)
			if err := imp.settle(tx, x, b[:]); err != nil {
				return err
			}
		}
		if k, _ := queue.Cursor().First(); k != nil {
			patientWide = true
		} else if err := tx.DeleteBucket(bucketImportOptOut); err != nil {
			return fmt.Errorf("store: remove an import bucket: %w", err)
		}
		return putLabelRules(tx, o.Rules)
	})
	if err == nil && patientWide {
		err = imp.relabelPatientWide(ctx)
	}
	if err != nil {
		return RelabelReport{}, false, err
	}
	rep.Relabelled, rep.Rules = imp.rep.Relabelled, o.Rules
	return rep, true, nil
}

// gainAll gives each resource of gains the labels it lacks (addLabels),
// and, when it gained one, its lifted attachments the same (a lifted
// attachment has its carrier's labels), and queues the Binaries it names
// to be settled.
func (imp *entryImport) gainAll(tx *bolt.Tx, gains []gain) error {
	ids, res, vers, carried, fwd := tx.Bucket(bucketIDs), tx.Bucket(bucketResources), tx.Bucket(bucketVersions), tx.Bucket(bucketCarried), tx.Bucket(bucketLinks)
	optout, x := imp.patientIndex(tx), imp.linksOf(tx)
	relabel := func(uri []byte, add []string) (bool, error) {
		v := res.Get(uri)
		if v == nil {
			return false, nil
		}
		var r Resource
		if err := decodeResource(v, &r); err != nil {
			return false, err
		}
		return imp.addLabels(res, vers, optout, r, add)
	}
	for _, g := range gains {
		gained, err := relabel([]byte(g.uri), g.add)
		if err != nil {
			return err
		}
		if !gained {
			continue
		}
		u, err := ParseURI(g.uri)
		if err != nil {
			return fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
		}
		id := uuid.MustParse(u.ID)
		c := carried.Cursor()
		for k, _ := c.Seek(id[:]); k != nil && bytes.HasPrefix(k, id[:]); k, _ = c.Next() {
			if uri := ids.Get(k[16:]); uri != nil {
				if _, err := relabel(uri, g.add); err != nil {
					return err
				}
			}
		}
		fc := fwd.Cursor()
		for k, _ := fc.Seek(id[:]); k != nil && bytes.HasPrefix(k, id[:]); k, _ = fc.Next() {
			x.touch(k[16:])
		}
	}
	return nil
}
