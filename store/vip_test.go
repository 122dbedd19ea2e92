package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"time"

	"fmt"
	bolt "go.etcd.io/bbolt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// vipPatient is the Patient of patient as fhirin yields it: labelled vip
// (v3 ActCode CEL in meta.security) or not.
func vipPatient(patient string, vip bool) Entry {
	e := itemEntry("Patient", patient, patient, false)
	if vip {
		e.Sensitivity = []string{"vip"}
	}
	return e
}

// vipLabels lists the live resources of n's tenant as "type id vN
// [sensitivity]" (the URI's type, the source id the test named it by),
// sorted.
func vipLabels(t *testing.T, path string, n *Namer, named map[string]string) []string {
	t.Helper()
	return tenantLabels(t, path, n, named, func(r Resource) []string { return r.Labels.Sensitivity })
}

// TestVIPPatientLabelsTheChart: a Patient labelled vip makes every live
// item of the patient's compartment carry vip, whichever import brought
// it. Before the fix only the Patient carried it: a clinician's read of
// the VIP's Observation had no vip_patient reason in its audit record.
func TestVIPPatientLabelsTheChart(t *testing.T) {
	n := testNamer(t, "gh")
	named := map[string]string{n.Link("Patient", "p1", "p1"): "p1", n.Link("Observation", "o1", "p1"): "o1"}
	path := filepath.Join(t.TempDir(), "catalog.db")
	if _, err := stagedImport(t, path, EntryOptions{}, vipPatient("p1", true), itemEntry("Observation", "o1", "p1", false)); err != nil {
		t.Fatal(err)
	}
	want := []string{"observation o1 v1 vip", "patient p1 v1 vip"}
	if got := vipLabels(t, path, n, named); !slices.Equal(got, want) {
		t.Errorf("live\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// vipItems is a VIP patient's chart as fhirin yields it, besides the
// Patient: linkEntries' Binaries b1 and b2, DocumentReference d linking
// b1 with its lifted attachment, QuestionnaireResponse q and List l
// mentioning them; and Observations o1 and o2. hint is the reader's first
// approximation (Entry.PatientWide): it held the patient's vip Patient.
func vipItems(n *Namer, hint bool) []Entry {
	es := append(linkEntries(n, "b1")[1:], itemEntry("Observation", "o1", srcPatient, false), itemEntry("Observation", "o2", srcPatient, false))
	if hint {
		for i := range es {
			es[i].PatientWide = []string{SensitivityVIP}
		}
	}
	return es
}

// vipNamed names the URIs of vipItems (and the Patient, p) for vipLines.
func vipNamed(n *Namer) map[string]string {
	named := map[string]string{n.Link("Patient", srcPatient, srcPatient): "p"}
	for _, e := range vipItems(n, false) {
		id := e.ID
		if e.Type == TypeAttachmentSource {
			id = "a"
		}
		named[n.Link(e.Type, e.ID, srcPatient)] = id
	}
	return named
}

// vipLines lists the live resources of n's tenant as "id vN
// [sensitivity] [pw=patient-wide]", sorted, and checks the catalog
// against a plain scan (patientWideAgreesWithScan).
func vipLines(t *testing.T, path string, opts Options, n *Namer, named map[string]string) []string {
	t.Helper()
	o := opts
	o.ReadOnly, o.Timeout = true, time.Second
	s, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := patientWideAgreesWithScan(s); err != nil {
		t.Error(err)
	}
	var out []string
	for _, r := range allResources(t, s) {
		if r.Labels.Tenant != n.tenant {
			continue
		}
		line := fmt.Sprintf("%s v%d", named[r.URI], r.Version)
		if len(r.Labels.Sensitivity) > 0 {
			line += " " + strings.Join(r.Labels.Sensitivity, ",")
		}
		if len(r.PatientWide) > 0 {
			line += " pw=" + strings.Join(r.PatientWide, ",")
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}

// patientWideAgreesWithScan holds the patient-wide label indexes and
// labels against a plain scan of the live catalog (store/doc.go,
// "Patient-wide labels"): the VIPs are the patients with a live Patient
// of a streaming import whose own labels hold vip, the opted-out ones
// those with a live Consent of a streaming import that records an
// opt-out (its body read, decrypted in an encrypted catalog); bucket "vip"
// lists exactly those Patients; every live item of a streaming import in
// a VIP's compartment carries vip, and carries opt-out iff its patient
// opted out; an item's patient-wide labels are a subset of its labels,
// and name vip only for a VIP's item that lacks it on its own account. It
// returns every disagreement.
func patientWideAgreesWithScan(s *Store) error {
	type patient struct{ tenant, id string }
	rs, err := s.Page("", 1<<20)
	if err != nil {
		return err
	}
	vips, outs, wantKeys, wantOut := map[patient]bool{}, map[patient]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range rs {
		u, err := ParseURI(r.URI)
		if err != nil || r.Source == "" || u.Patient == "" {
			continue
		}
		switch u.Type {
		case "patient":
			if slices.Contains(r.OwnSensitivity(), SensitivityVIP) {
				vips[patient{u.Tenant, u.Patient}] = true
				k, _ := vipKey(u)
				wantKeys[string(k)] = true
			}
		case "consent":
			body, err := s.Blob(context.Background(), r.Digest)
			if err != nil {
				return err
			}
			if out, err := consentOptsOut(body); err != nil {
				return err
			} else if out {
				outs[patient{u.Tenant, u.Patient}] = true
				k, _ := optOutKey(u)
				wantOut[string(k)] = true
			}
		}
	}
	var probs []string
	for _, r := range rs {
		u, err := ParseURI(r.URI)
		if err != nil {
			return err
		}
		for _, l := range r.PatientWide {
			if l != SensitivityVIP || !slices.Contains(r.Labels.Sensitivity, l) {
				probs = append(probs, fmt.Sprintf("%s: patient-wide %v not among its labels %v", r.URI, r.PatientWide, r.Labels.Sensitivity))
			}
		}
		if r.Source == "" || u.Patient == "" {
			if len(r.PatientWide) > 0 {
				probs = append(probs, fmt.Sprintf("%s: patient-wide labels outside a streamed compartment", r.URI))
			}
			continue
		}
		p := patient{u.Tenant, u.Patient}
		if vips[p] && !slices.Contains(r.Labels.Sensitivity, SensitivityVIP) {
			probs = append(probs, fmt.Sprintf("%s: a VIP's item without vip", r.URI))
		}
		if !vips[p] && slices.Contains(r.PatientWide, SensitivityVIP) {
			probs = append(probs, fmt.Sprintf("%s: a patient-wide vip of a patient who is no VIP", r.URI))
		}
		if got := slices.Contains(r.Labels.Consent, ConsentOptOut); got != outs[p] {
			probs = append(probs, fmt.Sprintf("%s: opt-out %v, the patient's Consents say %v", r.URI, got, outs[p]))
		}
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		for _, ix := range []struct {
			name   []byte
			want   map[string]bool
			source string
		}{{bucketVIP, wantKeys, "VIP Patient"}, {bucketOptOut, wantOut, "opt-out Consent"}} {
			b := tx.Bucket(ix.name)
			if b == nil {
				return fmt.Errorf("no %s index", ix.name)
			}
			got := map[string]bool{}
			b.ForEach(func(k, _ []byte) error { got[string(k)] = true; return nil })
			for k := range ix.want {
				if !got[k] {
					probs = append(probs, fmt.Sprintf("%s index lacks the %s %x", ix.name, ix.source, k[16:]))
				}
			}
			for k := range got {
				if !ix.want[k] {
					probs = append(probs, fmt.Sprintf("%s index lists %x, no live %s", ix.name, k[16:], ix.source))
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(probs) > 0 {
		slices.Sort(probs)
		return errors.New(strings.Join(probs, "\n"))
	}
	return nil
}

// TestVIPAcrossImports: a patient is a VIP while the catalog holds their
// live Patient labelled vip, whichever import brought it: every live item
// of the compartment (lifted attachment, Binaries and the resources naming
// them included) carries vip, in whatever order the Patient and the items
// arrive; a Patient re-imported without the label, deleted or retired by
// a full import takes it away again from every item but those whose own
// data carries it (o1 labelled CEL itself; d, a document labelled CEL,
// and its Binary component). In every batch size, plaintext and
// encrypted; each step is held against a plain scan of the catalog.
func TestVIPAcrossImports(t *testing.T) {
	defer func(n int) { relabelVisits = n }(relabelVisits)
	for _, enc := range []bool{false, true} {
		for _, batch := range []int{1, 96} {
			t.Run(fmt.Sprintf("encrypted=%v,batch=%d", enc, batch), func(t *testing.T) {
				relabelVisits = 4096
				if batch == 1 {
					relabelVisits = 1 // every relabelling transaction resumes
				}
				n := testNamer(t, "gh")
				named := vipNamed(n)
				var opts Options
				var path string
				fresh := func() {
					path = filepath.Join(t.TempDir(), "catalog.db")
					if enc {
						opts.DataKeys = newFakeKeys(testKEK)
						openKeyed(t, path, opts).Close()
					}
				}
				step := func(name string, full bool, wantRelabelled int, want []string, es ...Entry) {
					t.Helper()
					o := opts
					o.Timeout = time.Second
					rep, err := ImportEntriesStaged(context.Background(), path, entries(es...), EntryOptions{Namer: n, BatchEntries: batch, Full: full}, o)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					checkDB(t, path)
					if got := vipLines(t, path, opts, n, named); !slices.Equal(got, want) {
						t.Errorf("%s: live\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
					}
					if rep.Relabelled != wantRelabelled {
						t.Errorf("%s: %+v, want %d relabelled", name, rep, wantRelabelled)
					}
				}
				lines := func(v int, labels string, ids ...string) []string {
					var out []string
					for _, id := range ids {
						out = append(out, strings.TrimSpace(fmt.Sprintf("%s v%d %s", id, v, labels)))
					}
					return out
				}
				chart := []string{"a", "b1", "b2", "d", "l", "o1", "o2", "q"}
				all := func(parts ...[]string) []string {
					out := slices.Concat(parts...)
					slices.Sort(out)
					return out
				}

				// Items first, then the Patient alone: the probe. Before the
				// fix the Patient alone carried vip.
				fresh()
				step("items", false, 0, all(lines(1, "", chart...), lines(1, "", "p")),
					append([]Entry{vipPatient(srcPatient, false)}, vipItems(n, false)...)...)
				step("patient labelled vip", false, 8, all(lines(2, "vip pw=vip", chart...), lines(2, "vip", "p")),
					vipPatient(srcPatient, true))
				// o1 now labelled CEL itself; o2 re-imported by a sync
				// without the Patient keeps its patient-wide vip.
				o1 := itemEntry("Observation", "o1", srcPatient, false)
				o1.Sensitivity = []string{"vip"}
				step("o1 own vip", false, 0, all(lines(2, "vip pw=vip", "a", "b1", "b2", "d", "l", "o2", "q"), lines(3, "vip", "o1"), lines(2, "vip", "p")),
					o1, itemEntry("Observation", "o2", srcPatient, false))
				step("patient unlabelled", false, 7, all(lines(3, "", "a", "b1", "b2", "d", "l", "o2", "q"), lines(3, "vip", "o1"), lines(3, "", "p")),
					vipPatient(srcPatient, false))
				step("patient labelled again", false, 7, all(lines(4, "vip pw=vip", "a", "b1", "b2", "d", "l", "o2", "q"), lines(3, "vip", "o1"), lines(4, "vip", "p")),
					vipPatient(srcPatient, true))
				step("patient deleted", false, 7, all(lines(5, "", "a", "b1", "b2", "d", "l", "o2", "q"), lines(3, "vip", "o1")),
					Entry{Type: "Patient", ID: srcPatient, Deleted: true, Where: "deleted:p"})

				// A full import holding the Patient again, then one that
				// no longer holds it: the Patient is retired, and the
				// chart's patient-wide vip with it.
				es := append([]Entry{vipPatient(srcPatient, true)}, vipItems(n, true)...)
				step("full with the patient", true, 0, all(lines(6, "vip pw=vip", "a", "b1", "b2", "d", "l", "o2", "q"), lines(4, "vip pw=vip", "o1"), lines(6, "vip", "p")), es...)
				step("full without the patient", true, 8, all(lines(7, "", "a", "b1", "b2", "d", "l", "o2", "q"), lines(5, "", "o1")), es[1:]...)

				// Patient first, then the items by a sync without it: each
				// written labelled, no second version.
				fresh()
				step("patient first", false, 0, lines(1, "vip", "p"), vipPatient(srcPatient, true))
				step("items after", false, 0, all(lines(1, "vip pw=vip", chart...), lines(1, "vip", "p")), vipItems(n, false)...)

				// One import, the items before the Patient: the reader's
				// approximation labels them on their first write.
				fresh()
				step("items then patient, one import", false, 0, all(lines(1, "vip pw=vip", chart...), lines(1, "vip", "p")),
					append(vipItems(n, true), vipPatient(srcPatient, true))...)

				// A document labelled CEL itself gives its Binary component
				// vip on its own account (the document describes the
				// Binary): kept when the patient stops being a VIP.
				d, a := vipItems(n, true)[2], vipItems(n, true)[3]
				d.Sensitivity, a.Sensitivity = []string{"vip"}, []string{"vip"}
				step("document labelled vip", false, 4, all(lines(2, "vip", "a", "d", "b1", "b2", "l", "q"), lines(1, "vip pw=vip", "o1", "o2"), lines(1, "vip", "p")), d, a)
				step("patient unlabelled, document still vip", false, 2, all(lines(2, "vip", "a", "d", "b1", "b2", "l", "q"), lines(2, "", "o1", "o2"), lines(2, "", "p")),
					vipPatient(srcPatient, false))
			})
		}
	}
}

// TestPatientWideIndexAgreesWithScan: the check the tests above run after
// every import can fail: it finds a VIP's item that lost vip, an item of a
// patient who is no VIP with a patient-wide vip, an opted-out patient's
// item without opt-out, and an index that lost or kept a Patient. And a
// catalog written before the vip index (its VIPs' charts unlabelled, as
// the defect left them) gets the index and the labels on its next import,
// whatever that holds; another tenant's same patient id is untouched.
func TestPatientWideIndexAgreesWithScan(t *testing.T) {
	for _, enc := range []bool{false, true} {
		t.Run(fmt.Sprint("encrypted=", enc), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "catalog.db")
			gh, other := testNamer(t, "gh"), testNamer(t, "other")
			var opts Options
			if enc {
				opts.DataKeys = newFakeKeys(testKEK)
				openKeyed(t, path, opts).Close()
			}
			imp := func(n *Namer, es ...Entry) ImportReport {
				t.Helper()
				o := opts
				o.Timeout = time.Second
				rep, err := ImportEntriesStaged(context.Background(), path, entries(es...), EntryOptions{Namer: n}, o)
				if err != nil {
					t.Fatal(err)
				}
				return rep
			}
			check := func() error {
				t.Helper()
				o := opts
				o.ReadOnly, o.Timeout = true, time.Second
				s, err := Open(path, o)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				return patientWideAgreesWithScan(s)
			}
			imp(other, append([]Entry{vipPatient(srcPatient, false)}, vipItems(other, false)...)...)
			imp(gh, append([]Entry{vipPatient(srcPatient, true)}, vipItems(gh, false)...)...)
			imp(gh, itemEntry("Patient", "p2", "p2", false), consentEntry("c2", "p2", true), itemEntry("Observation", "o3", "p2", true))
			if err := check(); err != nil {
				t.Fatal(err)
			}

			// The catalog as a custos before the vip index left it: no
			// index, no patient-wide labels.
			editDB(t, path, func(tx *bolt.Tx) error { return withoutPatientWide(tx, bucketVIP) })
			if err := check(); err == nil {
				t.Error("a catalog without the vip index agrees with the scan")
			}
			if rep := imp(gh, fhirEntry("Organization", srcOrg, "", `{"resourceType":"Organization","id":"org-cityhospital"}`)); rep.Relabelled != 8 {
				t.Errorf("first import after the vip index: %+v, want the VIP's 8 items relabelled", rep)
			}
			if err := check(); err != nil {
				t.Fatal(err)
			}

			// Each kind of disagreement is found.
			for _, c := range []struct {
				name string
				edit func(r *Resource, u URI) bool
				tx   func(tx *bolt.Tx) error
			}{
				{name: "a VIP's item without vip", edit: func(r *Resource, u URI) bool {
					if u.Tenant != "gh" || u.Type != "observation" || !slices.Contains(r.PatientWide, SensitivityVIP) {
						return false
					}
					r.Labels.Sensitivity, r.PatientWide = nil, nil
					return true
				}},
				{name: "a patient-wide vip of no VIP", edit: func(r *Resource, u URI) bool {
					if u.Tenant != "other" || u.Type != "observation" {
						return false
					}
					r.Labels.Sensitivity, r.PatientWide = []string{SensitivityVIP}, []string{SensitivityVIP}
					return true
				}},
				{name: "an opted-out patient's item without opt-out", edit: func(r *Resource, u URI) bool {
					if u.Tenant != "gh" || u.Type != "observation" || !slices.Contains(r.Labels.Consent, ConsentOptOut) {
						return false
					}
					r.Labels.Consent = nil
					return true
				}},
				{name: "an index that lost the VIP", tx: func(tx *bolt.Tx) error {
					k, _ := tx.Bucket(bucketVIP).Cursor().First()
					return tx.Bucket(bucketVIP).Delete(bytes.Clone(k))
				}},
				// The labels still agree: only the opt-out index is wrong.
				{name: "an index that lost the opt-out Consent", tx: func(tx *bolt.Tx) error {
					k, _ := tx.Bucket(bucketOptOut).Cursor().First()
					if k == nil {
						return errors.New("no opt-out Consent indexed")
					}
					return tx.Bucket(bucketOptOut).Delete(bytes.Clone(k))
				}},
			} {
				backup := path + ".bak"
				copyFile(t, path, backup)
				editDB(t, path, func(tx *bolt.Tx) error {
					if c.tx != nil {
						return c.tx(tx)
					}
					res, vers := tx.Bucket(bucketResources), tx.Bucket(bucketVersions)
					var hit *Resource
					err := res.ForEach(func(k, v []byte) error {
						var r Resource
						if err := decodeResource(v, &r); err != nil {
							return err
						}
						u, err := ParseURI(string(k))
						if err != nil {
							return err
						}
						if hit == nil && c.edit(&r, u) {
							hit = &r
						}
						return nil
					})
					if err != nil {
						return err
					}
					if hit == nil {
						return fmt.Errorf("%s: nothing to edit", c.name)
					}
					return putLive(res, vers, *hit)
				})
				if err := check(); err == nil {
					t.Errorf("%s: agrees with the scan", c.name)
				}
				copyFile(t, backup, path)
			}
			checkDB(t, path)
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPatientWideIndexBuiltForEveryTenant: the import that builds the
// patient-wide indexes of a catalog written before them reads every
// tenant's Patients and Consents, and so must label every tenant's
// charts, not only those of the tenant it imports into. Before, it queued
// the other tenants' patients and then walked only its own tenant's URIs
// for them: another tenant's VIP (and, on the first import after the
// opt-out index, opted-out) charts stayed unlabelled, and no later import
// queued them again unless their Patient or Consent changed.
func TestPatientWideIndexBuiltForEveryTenant(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	gh, other := testNamer(t, "gh"), testNamer(t, "other")
	c1 := consentEntry("c1", "p2", true)
	c1.OptOut, c1.Consent = false, nil // as a custos before the opt-out index wrote it
	if _, err := stagedImport(t, path, EntryOptions{Namer: other}, vipPatient("p1", true), itemEntry("Observation", "o1", "p1", false),
		c1, itemEntry("Observation", "o2", "p2", false)); err != nil {
		t.Fatal(err)
	}
	editDB(t, path, func(tx *bolt.Tx) error { return withoutPatientWide(tx, bucketOptOut, bucketVIP) })
	rep, err := stagedImport(t, path, EntryOptions{Namer: gh}, fhirEntry("Organization", srcOrg, "", `{"resourceType":"Organization","id":"org-cityhospital"}`))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Relabelled != 3 {
		t.Errorf("%+v, want 3 relabelled (other's o1 vip, c1 and o2 opt-out)", rep)
	}
	if err := patientWideAgreesWithScan(openRead(t, path)); err != nil {
		t.Error(err)
	}
	checkDB(t, path)
}

// TestPatientGainsVIPThroughItsPhoto: a Patient whose photo names a Binary
// gains the Binary's vip through the link index when a later import
// labels the Binary (every label of a Patient counts, as when the reader
// gives it): the patient is then a VIP, and the chart says so in the same
// import. Before, the Patient carried vip and the index did not list it.
func TestPatientGainsVIPThroughItsPhoto(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	n := testNamer(t, "gh")
	p := vipPatient(srcPatient, false)
	p.Body = []byte(`{"resourceType":"Patient","id":"MRN-004711","photo":[{"url":"Binary/b1"}]}`)
	p.Links = []string{"b1"}
	bin := Entry{Type: "Binary", ID: "b1", Patient: srcPatient, Body: []byte("photo"), MIMEType: "text/plain", Where: "Binary.ndjson:1"}
	if _, err := stagedImport(t, path, EntryOptions{Namer: n}, p, bin, itemEntry("Observation", "o1", srcPatient, false)); err != nil {
		t.Fatal(err)
	}
	bin.Sensitivity = []string{"vip"}
	rep, err := stagedImport(t, path, EntryOptions{Namer: n}, bin)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Relabelled != 2 { // the Patient by the link index, o1 by the vip index
		t.Errorf("%+v, want 2 relabelled", rep)
	}
	if err := patientWideAgreesWithScan(openRead(t, path)); err != nil {
		t.Error(err)
	}
	checkDB(t, path)
}

// withoutPatientWide makes the catalog in tx what a custos before the
// patient-wide label indexes left: every live resource's patient-wide
// labels taken off, and the given index buckets deleted.
func withoutPatientWide(tx *bolt.Tx, indexes ...[]byte) error {
	res, vers := tx.Bucket(bucketResources), tx.Bucket(bucketVersions)
	var fix []Resource
	err := res.ForEach(func(_, v []byte) error {
		var r Resource
		if err := decodeResource(v, &r); err != nil {
			return err
		}
		if len(r.PatientWide) > 0 {
			r.Labels.Sensitivity, r.PatientWide = r.OwnSensitivity(), nil
			fix = append(fix, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range fix {
		if err := putLive(res, vers, r); err != nil {
			return err
		}
	}
	for _, b := range indexes {
		if err := tx.DeleteBucket(b); err != nil {
			return err
		}
	}
	return nil
}
