package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// consentEntry is a Consent of patient as fhirin yields it: an opt-out
// (active, base provision deny) or not (inactive), the reader's first
// approximation of the label with it.
func consentEntry(id, patient string, optOut bool) Entry {
	status := "inactive"
	if optOut {
		status = "active"
	}
	e := fhirEntry("Consent", id, patient, `{"resourceType":"Consent","id":"`+id+`","status":"`+status+`","patient":{"reference":"Patient/`+patient+`"},"provision":{"type":"deny"}}`)
	e.OptOut = optOut
	if optOut {
		e.Consent = []string{ConsentOptOut}
	}
	return e
}

// itemEntry is an Observation (or, for typ "Patient", the Patient) of
// patient, labelled opt-out when the reader saw an opt-out in its import.
func itemEntry(typ, id, patient string, labelled bool) Entry {
	e := fhirEntry(typ, id, patient, `{"resourceType":"`+typ+`","id":"`+id+`","subject":{"reference":"Patient/`+patient+`"}}`)
	if labelled {
		e.Consent = []string{ConsentOptOut}
	}
	return e
}

// optOutLabels lists the live resources of tenant as "type id version
// [opt-out]" (the URI's type, the source id the test named it by), sorted.
func optOutLabels(t *testing.T, path string, n *Namer, named map[string]string) []string {
	t.Helper()
	return tenantLabels(t, path, n, named, func(r Resource) []string { return r.Labels.Consent })
}

// tenantLabels lists the live resources of n's tenant as "type id vN
// [labels]", labels being what of names (the URI's type, the source id
// the test named it by), sorted.
func tenantLabels(t *testing.T, path string, n *Namer, named map[string]string, of func(Resource) []string) []string {
	t.Helper()
	var out []string
	for _, r := range allResources(t, openRead(t, path)) {
		if r.Labels.Tenant != n.tenant {
			continue
		}
		line := fmt.Sprintf("%s %s v%d", r.Labels.Type, named[r.URI], r.Version)
		if l := of(r); len(l) > 0 {
			line += " " + strings.Join(l, ",")
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}

// TestOptOutAcrossImports: a patient's opt-out is the catalog's, not the
// import's: every live item of a patient with a live opt-out Consent
// carries the label "opt-out", whichever import brought it, and none once
// the last such Consent is revoked, deleted, dropped by a full import or
// moved; in every batch size. Before the fix an incremental import
// without the Consent stripped the label, and one with only the Consent
// left the earlier items unlabelled.
func TestOptOutAcrossImports(t *testing.T) {
	defer func(n int) { relabelVisits = n }(relabelVisits)
	n := testNamer(t, "gh")
	named := map[string]string{}
	for _, x := range []struct{ typ, id, patient string }{
		{"Patient", "p1", "p1"}, {"Patient", "p2", "p2"}, {"Consent", "c1", "p1"}, {"Consent", "c2", "p1"},
		{"Consent", "c1", "p2"}, {"Observation", "o1", "p1"}, {"Observation", "o2", "p1"}, {"Observation", "o3", "p2"},
	} {
		named[n.Link(x.typ, x.id, x.patient)] = x.id
	}
	for _, batch := range []int{1, 2, 96} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			relabelVisits = 4096
			if batch == 1 {
				relabelVisits = 1 // every relabelling transaction resumes
			}
			opts := EntryOptions{BatchEntries: batch}
			var path string
			step := func(name string, wantRelabelled int, want []string, es ...Entry) {
				t.Helper()
				rep, err := stagedImport(t, path, opts, es...)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkDB(t, path)
				if got := optOutLabels(t, path, n, named); !slices.Equal(got, want) {
					t.Errorf("%s: live\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if rep.Relabelled != wantRelabelled {
					t.Errorf("%s: %+v, want %d relabelled", name, rep, wantRelabelled)
				}
			}

			// The probe: day 1 holds the opt-out, day 2 only o1 unchanged and
			// a new o2, labelled by nobody.
			path = filepath.Join(t.TempDir(), "catalog.db")
			step("day 1", 0, []string{"consent c1 v1 opt-out", "observation o1 v1 opt-out", "patient p1 v1 opt-out"},
				itemEntry("Patient", "p1", "p1", true), consentEntry("c1", "p1", true), itemEntry("Observation", "o1", "p1", true))
			step("day 2", 0, []string{"consent c1 v1 opt-out", "observation o1 v1 opt-out", "observation o2 v1 opt-out", "patient p1 v1 opt-out"},
				itemEntry("Observation", "o1", "p1", false), itemEntry("Observation", "o2", "p1", false))

			// A second opt-out Consent, then the first revoked: still opted
			// out, nothing relabelled.
			step("second consent", 0, []string{"consent c1 v1 opt-out", "consent c2 v1 opt-out", "observation o1 v1 opt-out", "observation o2 v1 opt-out", "patient p1 v1 opt-out"},
				consentEntry("c2", "p1", true))
			step("one revoked", 0, []string{"consent c1 v2 opt-out", "consent c2 v1 opt-out", "observation o1 v1 opt-out", "observation o2 v1 opt-out", "patient p1 v1 opt-out"},
				consentEntry("c1", "p1", false))

			// The last one deleted: every live item loses the label (c1,
			// re-imported inactive, kept it while c2 stood).
			step("last deleted", 4, []string{"consent c1 v3", "observation o1 v2", "observation o2 v2", "patient p1 v2"},
				Entry{Type: "Consent", ID: "c2", Deleted: true, Where: "del.json:1"})

			// The reverse probe: an import of only the opt-out labels what
			// earlier imports brought; a revocation clears it again.
			step("opt-out alone", 3, []string{"consent c1 v4 opt-out", "observation o1 v3 opt-out", "observation o2 v3 opt-out", "patient p1 v3 opt-out"},
				consentEntry("c1", "p1", true))
			step("revoked", 3, []string{"consent c1 v5", "observation o1 v4", "observation o2 v4", "patient p1 v4"},
				consentEntry("c1", "p1", false))

			// Moved to p2: p1 loses the opt-out it had regained, p2's items
			// gain it.
			step("opt-out again", 3, []string{"consent c1 v6 opt-out", "observation o1 v5 opt-out", "observation o2 v5 opt-out", "patient p1 v5 opt-out"},
				consentEntry("c1", "p1", true))
			step("p2 imported", 0, []string{"consent c1 v6 opt-out", "observation o1 v5 opt-out", "observation o2 v5 opt-out", "observation o3 v1", "patient p1 v5 opt-out", "patient p2 v1"},
				itemEntry("Patient", "p2", "p2", false), itemEntry("Observation", "o3", "p2", false))
			step("moved", 5, []string{"consent c1 v1 opt-out", "observation o1 v6", "observation o2 v6", "observation o3 v2 opt-out", "patient p1 v6", "patient p2 v2 opt-out"},
				consentEntry("c1", "p2", true))

			// A full import that no longer mentions the Consent retires it,
			// and with it p2's opt-out; it names p2's items, which the
			// catalog still labelled while the Consent stood.
			opts.Full = true
			rep, err := stagedImport(t, path, opts, itemEntry("Patient", "p2", "p2", false), itemEntry("Observation", "o3", "p2", false))
			opts.Full = false
			if err != nil {
				t.Fatal(err)
			}
			checkDB(t, path)
			want := []string{"observation o3 v3", "patient p2 v3"}
			if got := optOutLabels(t, path, n, named); !slices.Equal(got, want) {
				t.Errorf("full import: live %v, want %v", got, want)
			}
			if rep.Retired != 4 {
				t.Errorf("full import: %+v, want 4 retired (c1, o1, o2, p1)", rep)
			}
			openRead(t, path).db.View(func(tx *bolt.Tx) error {
				if tx.Bucket(bucketImportOptOut) != nil {
					t.Error("the scratch bucket of opt-out checks left in the catalog")
				}
				if k, _ := tx.Bucket(bucketOptOut).Cursor().First(); k != nil {
					t.Error("the opt-out index still lists a retired Consent")
				}
				return nil
			})
		})
	}
}

// TestOptOutStaysInTenant: an opt-out labels its patient's items in its
// tenant only; the same source patient id in another tenant is another
// patient (keyed ids are per tenant).
func TestOptOutStaysInTenant(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	gh, other := testNamer(t, "gh"), testNamer(t, "other")
	if _, err := stagedImport(t, path, EntryOptions{Namer: other}, itemEntry("Patient", "p1", "p1", false), itemEntry("Observation", "o1", "p1", false)); err != nil {
		t.Fatal(err)
	}
	if _, err := stagedImport(t, path, EntryOptions{Namer: gh}, itemEntry("Observation", "o1", "p1", false)); err != nil {
		t.Fatal(err)
	}
	rep, err := stagedImport(t, path, EntryOptions{Namer: gh}, consentEntry("c1", "p1", true))
	if err != nil || rep.Relabelled != 1 {
		t.Fatalf("opt-out in gh: %+v %v, want 1 relabelled", rep, err)
	}
	for _, r := range allResources(t, openRead(t, path)) {
		if got := slices.Contains(r.Labels.Consent, ConsentOptOut); got != (r.Labels.Tenant == "gh") {
			t.Errorf("%s (tenant %s): opt-out %v", r.Labels.Type, r.Labels.Tenant, got)
		}
	}
	checkDB(t, path)
}

// TestOptOutIndexBuilt: a catalog written before the opt-out index (no
// bucket "optout") gets it on its next import, from the bodies of its
// live Consents, and every label of the patients it lists, or that carry
// the label, is set as the index says, whatever the import holds.
func TestOptOutIndexBuilt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	// The state the defect left: an opt-out Consent whose patient's items
	// lost the label, and a patient labelled without one.
	c1 := consentEntry("c1", "p1", true)
	c1.OptOut, c1.Consent = false, nil // as an older custos wrote it
	if _, err := stagedImport(t, path, EntryOptions{}, c1, itemEntry("Observation", "o1", "p1", false), itemEntry("Observation", "o2", "p2", false)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o2 := testNamer(t, "gh").Link("Observation", "o2", "p2")
	err = s.db.Update(func(tx *bolt.Tx) error {
		// o2 labelled in place (the catalog's labels before the index
		// could be anything), and no index.
		var r Resource
		if err := decodeResource(tx.Bucket(bucketResources).Get([]byte(o2)), &r); err != nil {
			return err
		}
		r.Labels.Consent = []string{ConsentOptOut}
		enc, _ := json.Marshal(r)
		if err := tx.Bucket(bucketVersions).Put(versionKey(o2, r.Version), enc); err != nil {
			return err
		}
		if err := tx.Bucket(bucketResources).Put([]byte(o2), enc); err != nil {
			return err
		}
		return tx.DeleteBucket(bucketOptOut)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	rep, err := stagedImport(t, path, EntryOptions{}, fhirEntry("Organization", srcOrg, "", `{"resourceType":"Organization","id":"org-cityhospital"}`))
	if err != nil || rep.Relabelled != 3 {
		t.Fatalf("first import after the index: %+v %v, want 3 relabelled (c1, o1, o2)", rep, err)
	}
	for _, r := range allResources(t, openRead(t, path)) {
		if got, want := slices.Contains(r.Labels.Consent, ConsentOptOut), r.Labels.Patient == "p1"; got != want {
			t.Errorf("%s of %q: opt-out %v, want %v", r.Labels.Type, r.Labels.Patient, got, want)
		}
	}
	checkDB(t, path)
}

// TestConsentOptsOut pins the one opt-out rule, which fhirin applies to
// what it reads and the store to the Consents it holds.
func TestConsentOptsOut(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		{`{"status":"active","provision":{"type":"deny"}}`, true},
		{`{"status":"active","provision":{"type":"deny","provision":[{"type":"permit"}]}}`, true},
		{`{"status":"active","provision":{"type":"permit"}}`, false},
		{`{"status":"inactive","provision":{"type":"deny"}}`, false},
		{`{"status":"active"}`, false},
		{`{"status":"active","provision":[{"type":"deny"}]}`, false},
		{`{"status":["active"],"provision":{"type":"deny"}}`, false},
		{`{"status":"active","decision":"deny","provision":{"type":"permit"}}`, true}, // R5: decision
		{`{"status":"active","decision":"permit"}`, false},
		// R4's policyRule: v3 ActCode OPTOUT (a grantor's dissent) is the
		// base policy, with or without provision.type; HL7's own R4
		// example consent-example-Out has no provision.type, and was
		// missed (probe-import3). OPTOUTE is opt-out with exceptions.
		{`{"status":"active","policyRule":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"OPTOUT"}]},"provision":{"actor":[{"role":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ParticipationType","code":"CST"}]},"reference":{"reference":"Organization/f001"}}]}}`, true},
		{`{"status":"active","policyRule":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"OPTOUTE"}]}}`, true},
		{`{"status":"active","policyRule":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"OPTOUT"}]},"provision":{"type":"permit"}}`, true},
		{`{"status":"active","policyRule":{"coding":[{"system":"http://example.org/policy","code":"x"},{"system":"http://hl7.org/fhir/v3/ActCode","code":"OPTOUT"}]}}`, true},
		{`{"status":"active","policyRule":{"coding":[{"system":"urn:oid:2.16.840.1.113883.5.4","code":"OPTOUT"}]}}`, true},
		{`{"status":"active","policyRule":{"coding":[{"system":"2.16.840.1.113883.5.4","code":"OPTOUT"}]}}`, true},
		{`{"status":"active","policyRule":{"coding":[{"code":"OPTOUT"}]}}`, true}, // no system: not overlooked
		{`{"status":"inactive","policyRule":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"OPTOUT"}]}}`, false},
		{`{"status":"active","policyRule":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"OPTIN"}]}}`, false},
		{`{"status":"active","policyRule":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"OPTINR"}]}}`, false},
		{`{"status":"active","policyRule":{"coding":[{"system":"http://example.org/policy","code":"OPTOUT"}]}}`, false},
		{`{"status":"active","policyRule":{"text":"opt out"}}`, false},
		{`{"status":"active","policyRule":"OPTOUT"}`, false},
	} {
		got, err := consentOptsOut([]byte(c.body))
		if err != nil || got != c.want {
			t.Errorf("%s: %v %v, want %v", c.body, got, err, c.want)
		}
	}
	if _, err := consentOptsOut([]byte(`[]`)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a Consent that is no object: %v, want ErrCorrupt", err)
	}
}
