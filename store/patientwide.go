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

// Patient-wide labels of streaming imports (docs/import.md, "Patient-wide
// labels"): a label some resource gives its whole patient, so that every
// live item of the patient's compartment written by a streaming import
// carries it, and none does once the last such resource is gone. Two
// sources:
//
//   - opt-out: a live Consent in the compartment that records an opt-out
//     (Entry.OptOut) gives the consent label "opt-out" (bucketOptOut);
//   - vip: a live Patient whose own sensitivity labels hold "vip" (v3
//     ActCode CEL) gives the sensitivity label "vip" (bucketVIP).
//
// Every import maintains both indexes in the same all-or-nothing scratch
// copy, queues each patient whose sources it changed, or whose items it
// wrote with a label the indexes did not confirm (bucketImportOptOut), and
// at the end gives every live item of a queued patient whose labels
// disagree a new version with them set or cleared (relabelPatientWide).
//
// "opt-out" is the catalog's alone: an item's own data never carries it,
// so it is set or cleared outright. "vip" may also be an item's own label
// (its meta.security, or its Binary component's): an item that carries it
// only because of its patient lists it in Resource.PatientWide, and only
// such a "vip" is cleared; own labels (Sensitivity less PatientWide) are
// what the Binary label propagation unions (links.go), so a patient-wide
// label never turns into a component label that would outlive it.

// ConsentOptOut is the consent label of an opted-out patient's items.
const ConsentOptOut = "opt-out"

// SensitivityVIP is the sensitivity label of a VIP patient's items.
const SensitivityVIP = "vip"

// bucketOptOut indexes the live opt-out Consents of streaming imports:
// keyed id of the patient (16 bytes) || keyed id of the Consent (16 bytes)
// -> empty. A patient has opted out iff a key starts with their keyed id.
// Keyed ids are per tenant, so the index is too.
var bucketOptOut = []byte("optout")

// bucketVIP indexes the live Patients of streaming imports labelled vip:
// keyed id of the patient (16 bytes) || keyed id of the Patient resource
// (16 bytes) -> empty. A patient is a VIP iff a key starts with their
// keyed id.
var bucketVIP = []byte("vip")

// bucketImportOptOut is a streaming import's scratch bucket: keyed id of a
// patient (16 bytes) -> the patient's tenant, for every patient whose patient-wide labels
// the import may have changed, or whose items it wrote with a label the
// indexes did not confirm. relabelPatientWide drains and removes it (and
// begin a stale one). (Its name is older than vip.) The tenant is the
// value because keyed ids do not tell it, and the import that builds the
// indexes queues the patients of every tenant (fillPatientWide): relabelled
// under the importing tenant's URIs, another tenant's stayed unlabelled.
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

// vipKey is u's key in bucketVIP, if u names a Patient resource:
// patient keyed id || Patient keyed id.
func vipKey(u URI) ([]byte, bool) {
	if u.Scheme != SchemeFHIR || u.Type != "patient" || u.Patient == "" {
		return nil, false
	}
	p, id := uuid.MustParse(u.Patient), uuid.MustParse(u.ID)
	return append(p[:], id[:]...), true
}

// lists reports whether index (bucketOptOut, bucketVIP) lists a source of
// patient.
func lists(index *bolt.Bucket, patient []byte) bool {
	k, _ := index.Cursor().Seek(patient)
	return k != nil && bytes.HasPrefix(k, patient)
}

// OwnSensitivity is r's sensitivity labels on its own account: Sensitivity
// less PatientWide. Pure.
func (r *Resource) OwnSensitivity() []string {
	if len(r.PatientWide) == 0 {
		return r.Labels.Sensitivity
	}
	own := slices.DeleteFunc(slices.Clone(r.Labels.Sensitivity), func(l string) bool { return slices.Contains(r.PatientWide, l) })
	if len(own) == 0 {
		return nil
	}
	return own
}

// setVIP gives r the patient-wide "vip" (vip) or takes it away, keeping its
// own labels: Sensitivity is its own labels plus "vip" when vip and they
// lack it, then listed in PatientWide. Pure.
func setVIP(r *Resource, vip bool) {
	own := r.OwnSensitivity()
	r.PatientWide = nil
	if vip && !slices.Contains(own, SensitivityVIP) {
		own = slices.Sorted(slices.Values(append(slices.Clone(own), SensitivityVIP)))
		r.PatientWide = []string{SensitivityVIP}
	}
	r.Labels.Sensitivity = own
}

// vipDisagrees reports whether r's labels disagree with its patient being
// a VIP (vip): one lacks "vip", or one not a VIP's keeps a patient-wide one.
func vipDisagrees(r *Resource, vip bool) bool {
	if vip {
		return !slices.Contains(r.Labels.Sensitivity, SensitivityVIP)
	}
	return slices.Contains(r.PatientWide, SensitivityVIP)
}

// ConsentOptsOut reports whether a decoded FHIR Consent records an
// opt-out: status "active" and a base provision of type "deny", or R5's
// Consent.decision "deny" (R5 moved the base provision's type there), or a
// policyRule of v3 ActCode OPTOUT or OPTOUTE (optOutPolicy), whatever the
// base provision's type.
// Exceptions nested under that provision do not lift it: an opt-out with
// exceptions still stops every use but treatment under the default
// policy, the safer reading. provision.period is not evaluated: a Consent
// that no longer applies must not be active. It is the one definition of
// the rule: fhirin applies it to what it reads, the store to what it holds
// (fillOptOut). Pure: no I/O.
func ConsentOptsOut(m map[string]any) bool {
	p, _ := m["provision"].(map[string]any)
	return m["status"] == "active" && (p["type"] == "deny" || m["decision"] == "deny" || optOutPolicy(m["policyRule"]))
}

// ActCodeSystems are the URIs v3 ActCode is written with: canonical, the
// same under https (a common misspelling), pre-R4, and its OID (also
// written bare, as converters from C-CDA and HL7 v2 do). fhirin reads
// security labels in them too.
var ActCodeSystems = []string{"http://terminology.hl7.org/CodeSystem/v3-ActCode", "https://terminology.hl7.org/CodeSystem/v3-ActCode",
	"http://hl7.org/fhir/v3/ActCode", "urn:oid:2.16.840.1.113883.5.4", "2.16.840.1.113883.5.4"}

// optOutPolicy reports whether an R4 Consent.policyRule (a
// CodeableConcept) names v3 ActCode's OPTOUT ("a grantor's dissent to the
// collection, access, use or disclosure of individually identifiable
// health information") or OPTOUTE (the same with exceptions) as the
// Consent's base policy, in ActCode or in a coding without a system (not
// overlooked, as security labels without one are not). HL7's R4 example
// consent-example-Out records its patient's opt-out so, with no
// provision.type; the rule missed it until probe-import3. Pure.
func optOutPolicy(v any) bool {
	cc, _ := v.(map[string]any)
	codings, _ := cc["coding"].([]any)
	for _, c := range codings {
		c, _ := c.(map[string]any)
		system, _ := c["system"].(string)
		if code, _ := c["code"].(string); (code == "OPTOUT" || code == "OPTOUTE") && (system == "" || slices.Contains(ActCodeSystems, system)) {
			return true
		}
	}
	return false
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

// patientIndex is what one write transaction of an import uses of the
// patient-wide label indexes: the indexes and the queue of patients to
// check.
type patientIndex struct {
	optout, vip, queue *bolt.Bucket
	tenant             string // the import's: that of the items it writes (label)
}

func (imp *entryImport) patientIndex(tx *bolt.Tx) patientIndex {
	x := patientIndex{optout: tx.Bucket(bucketOptOut), vip: tx.Bucket(bucketVIP), queue: tx.Bucket(bucketImportOptOut)}
	if imp.opts.Namer != nil { // nil: a relabel, which labels no entry of its own
		x.tenant = imp.opts.Namer.tenant
	}
	return x
}

// set records in index whether the source of key (patient || resource, in
// tenant) gives its patient the label, and queues the patient if that
// changed the index.
func (x patientIndex) set(index *bolt.Bucket, key []byte, on bool, tenant string) error {
	switch had := index.Get(key) != nil; {
	case on && !had:
		if err := index.Put(key, nil); err != nil {
			return fmt.Errorf("store: put patient-wide label source: %w", err)
		}
	case !on && had:
		if err := index.Delete(key); err != nil {
			return fmt.Errorf("store: delete patient-wide label source: %w", err)
		}
	default:
		return nil
	}
	return x.enqueue(key[:16], tenant)
}

// enqueue queues patient (a keyed id of tenant) for relabelPatientWide.
func (x patientIndex) enqueue(patient []byte, tenant string) error {
	if err := x.queue.Put(patient, []byte(tenant)); err != nil {
		return fmt.Errorf("store: queue patient-wide label check: %w", err)
	}
	return nil
}

// forget removes uri from the indexes if it names a source (an opt-out
// Consent, a vip Patient): it is retired, deleted or moved.
func (x patientIndex) forget(uri string) error {
	u, err := ParseURI(uri)
	if err != nil {
		return fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
	}
	if key, ok := optOutKey(u); ok {
		return x.set(x.optout, key, false, u.Tenant)
	}
	if key, ok := vipKey(u); ok {
		return x.set(x.vip, key, false, u.Tenant)
	}
	return nil
}

// label sets or clears the patient-wide labels of r (an item of a
// streaming import in the compartment of patient, with its own labels) as
// the indexes say now. An item the caller labelled opted out, or marked
// vipHint (Entry.PatientWide), whose patient the index does not (yet)
// list keeps the label, and its patient is queued, so that
// relabelPatientWide settles it once the whole stream is written.
func (x patientIndex) label(r *Resource, patient []byte, vipHint bool) error {
	switch {
	case lists(x.optout, patient):
		r.Labels.Consent = []string{ConsentOptOut}
	case slices.Contains(r.Labels.Consent, ConsentOptOut):
		if err := x.enqueue(patient, x.tenant); err != nil {
			return err
		}
	}
	switch {
	case lists(x.vip, patient):
		setVIP(r, true)
	case vipHint:
		setVIP(r, true)
		return x.enqueue(patient, x.tenant)
	default:
		setVIP(r, false)
	}
	return nil
}

// asIndexed sets r's patient-wide labels as the indexes say now, both
// ways, if r is in a patient compartment (writers of a live item that is
// not an entry of the import: the stored-Binary and link relabels).
func (x patientIndex) asIndexed(r *Resource) error {
	u, err := ParseURI(r.URI)
	if err != nil {
		return fmt.Errorf("%w: stored uri does not parse", ErrCorrupt)
	}
	if u.Patient == "" {
		return nil
	}
	p := uuid.MustParse(u.Patient)
	setOptOut(r, lists(x.optout, p[:]))
	setVIP(r, lists(x.vip, p[:]))
	return nil
}

// retire is retire (the package function) for an import: it also removes
// a source of patient-wide labels it retires from its index, and what a
// resource it retires names from the link index.
func (imp *entryImport) retire(tx *bolt.Tx, uri string, now time.Time) (bool, error) {
	ok, err := retire(tx.Bucket(bucketResources), tx.Bucket(bucketVersions), uri, now)
	if err != nil {
		return false, err
	}
	if err := imp.linksOf(tx).forget(uri); err != nil {
		return false, err
	}
	return ok, imp.patientIndex(tx).forget(uri)
}

// indexBatchPatientWide updates the indexes for the queued batch before it
// is written, so that the batch's items are labelled by them: a Consent
// the batch moves leaves the opt-out index under its old patient, a
// Consent the batch writes enters or leaves it by its OptOut, a Patient
// the batch writes enters or leaves the vip index by its own labels, a
// Consent or Patient the batch deletes leaves its index.
func (imp *entryImport) indexBatchPatientWide(tx *bolt.Tx) error {
	x, ids := imp.patientIndex(tx), tx.Bucket(bucketIDs)
	for i := range imp.batch {
		rec := &imp.batch[i]
		index, on := x.optout, rec.optOut
		key, ok := optOutKey(rec.uri)
		if !ok {
			if key, ok = vipKey(rec.uri); !ok {
				continue
			}
			index, on = x.vip, slices.Contains(rec.res.Labels.Sensitivity, SensitivityVIP)
		}
		if old := ids.Get(rec.id[:]); old != nil && string(old) != rec.res.URI {
			if err := x.forget(string(old)); err != nil {
				return err
			}
		}
		if err := x.set(index, key, on, rec.uri.Tenant); err != nil {
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

// fillPatientWide fills the indexes of a catalog written before they
// existed (begin created them empty: buildOptOut, buildVIP). For opt-out,
// every live Consent of a streaming import is read (Blob: in an encrypted
// catalog decrypted outside any transaction) and entered if it opts out,
// and its patient is queued, as is every patient with a live item
// labelled "opt-out"; for vip, every live Patient of a streaming import
// whose own labels hold "vip" is entered and its patient queued, as is
// every patient with a live item holding a patient-wide "vip". So the
// import ends with every label as the indexes say (repairing labels
// earlier imports lost or kept wrongly). One page of the catalog per
// transaction.
func (imp *entryImport) fillPatientWide(ctx context.Context) error {
	return imp.eachStoredPage(ctx, func(page []Resource) error {
		type queued struct {
			key    []byte // a patient's, or an index key
			tenant string
		}
		var optouts, vips, queue []queued
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
			if imp.buildOptOut && slices.Contains(r.Labels.Consent, ConsentOptOut) ||
				imp.buildVIP && slices.Contains(r.PatientWide, SensitivityVIP) {
				queue = append(queue, queued{p[:], u.Tenant})
			}
			if key, ok := vipKey(u); ok && imp.buildVIP && slices.Contains(r.OwnSensitivity(), SensitivityVIP) {
				vips = append(vips, queued{key, u.Tenant})
			}
			key, ok := optOutKey(u)
			if !ok || !imp.buildOptOut {
				continue
			}
			body, err := imp.s.Blob(ctx, r.Digest)
			if err != nil {
				return err
			}
			if out, err := consentOptsOut(body); err != nil {
				return err
			} else if out {
				optouts = append(optouts, queued{key, u.Tenant})
			}
		}
		return imp.s.update(func(tx *bolt.Tx) error {
			x := imp.patientIndex(tx)
			for _, k := range optouts {
				if err := x.set(x.optout, k.key, true, k.tenant); err != nil {
					return err
				}
			}
			for _, k := range vips {
				if err := x.set(x.vip, k.key, true, k.tenant); err != nil {
					return err
				}
			}
			for _, p := range queue {
				if err := x.enqueue(p.key, p.tenant); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// relabelVisits bounds how many live items relabelPatientWide reads per
// transaction (a variable so that a test can make it small); it writes at
// most BatchEntries new versions per transaction.
var relabelVisits = 4096

// relabelPatientWide ends an import's patient-wide label work: for every
// queued patient it reads whether the indexes list an opt-out Consent or
// a vip Patient of theirs, and gives every live item of their compartment
// written by a streaming import (fhir:// and attachment:// URIs under the
// patient in their tenant, which the queue records; a manifest import's
// items keep their manifest's labels) whose
// labels disagree a new version with them set or cleared (Relabelled):
// "opt-out" set or cleared, a patient-wide "vip" added to an item that
// lacks "vip" or removed (an item's own "vip" stays). Retired items are
// left alone. It works in transactions of at most relabelVisits items
// read and BatchEntries versions written, draining the scratch bucket,
// and then removes it.
func (imp *entryImport) relabelPatientWide(ctx context.Context) error {
	after := "" // the last URI checked of the first queued patient
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done := false
		err := imp.s.update(func(tx *bolt.Tx) error {
			x, res, vers := imp.patientIndex(tx), tx.Bucket(bucketResources), tx.Bucket(bucketVersions)
			res.FillPercent, vers.FillPercent = streamFillPercent, streamFillPercent
			k, v := x.queue.Cursor().First()
			if k == nil {
				done = true
				return tx.DeleteBucket(bucketImportOptOut)
			}
			patient, tenant := bytes.Clone(k), string(v)
			out, vip := lists(x.optout, patient), lists(x.vip, patient)
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
					if r.Source == "" || slices.Contains(r.Labels.Consent, ConsentOptOut) == out && !vipDisagrees(&r, vip) {
						continue
					}
					fixes = append(fixes, r)
				}
				if !finished {
					break
				}
			}
			for _, r := range fixes {
				old := r
				setOptOut(&r, out)
				setVIP(&r, vip)
				r.Version++
				if err := putLive(res, vers, r); err != nil {
					return err
				}
				imp.delta.note(&old, &r)
			}
			imp.rep.Relabelled += len(fixes)
			if finished {
				after = ""
				if err := x.queue.Delete(patient); err != nil {
					return fmt.Errorf("store: dequeue patient-wide label check: %w", err)
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
