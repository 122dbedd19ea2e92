package server_test

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/report"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

// TestRecordsOfACompartmentWithoutPatientAgree: FHIR input whose
// compartments hold no Patient resource (an export without Patients, as
// the outside examples of fhirin/testdata/outside; or a Patient retired
// later, then the compartment's last resource) is read and listed by a
// clinician of the patient, and retired. Every record
// names the patient by one keyed hash, that of the source id
// (labels.patient), in its URIs and its patients alike, so that a patient
// report by the source id in the tenant finds every record, in the
// tenant, with the imported URIs among its resources. Before, the URIs
// held the hash of the keyed segment: the read records were in no tenant
// and the list records named the imported URIs under no patient; the
// retirement of a compartment's last resource named the segment's hash.
func TestRecordsOfACompartmentWithoutPatientAgree(t *testing.T) {
	lf := newLiveFixture(t)
	ctx := context.Background()
	clin := lf.identity("clinician")
	if len(clin.Principal.Patients) < 2 {
		t.Fatalf("the clinician's care team has %d patients; the test needs 2", len(clin.Principal.Patients))
	}
	never, retired := clin.Principal.Patients[0], clin.Principal.Patients[1] // source ids
	n := testNamer(t)
	obs := func(id, p string) store.Entry {
		return store.Entry{Type: "Observation", ID: id, Patient: p, Body: []byte(`{"resourceType":"Observation","id":"` + id + `","status":"final","code":{"text":"Heart rate"}}`)}
	}
	imp := func(es ...store.Entry) { t.Helper(); lf.importLive(n, es...) }
	// never's compartment never had a Patient; retired's loses it.
	patient := store.Entry{Type: "Patient", ID: retired, Patient: retired, Body: []byte(`{"resourceType":"Patient","id":"` + retired + `"}`)}
	imp(obs("obs-never-1", never), obs("obs-never-2", never),
		store.Entry{Type: "Attachment", ID: "DocumentReference/doc-1/content/0", Patient: never, MIMEType: "text/plain; charset=utf-8",
			Carrier: store.Carrier{Type: "DocumentReference", ID: "doc-1"}, Body: []byte("Progress note: stable.")},
		patient, obs("obs-retired-1", retired))
	start := len(lf.records())
	patient.Deleted, patient.Body = true, nil
	imp(patient)
	if _, err := lf.catalog.Get(n.Link("Patient", retired, retired)); err == nil {
		t.Fatal("the Patient was not retired")
	}
	imported := map[string]string{ // URI -> source patient id
		n.Link("Observation", "obs-never-1", never):                      never,
		n.Link("Observation", "obs-never-2", never):                      never,
		n.Link("Attachment", "DocumentReference/doc-1/content/0", never): never,
		n.Link("Observation", "obs-retired-1", retired):                  retired,
	}

	cs := lf.connect(clin)
	for uri := range imported {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
			t.Fatalf("clinician read %s: %v", uri, err)
		}
	}
	// A URI of a known compartment naming no resource: not found, on record.
	missing := n.Link("Observation", "obs-never-missing", never)
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: missing}); err == nil {
		t.Fatalf("read of %s succeeded", missing)
	}
	listed := map[string]bool{}
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed[r.URI] = true
	}
	for uri := range imported {
		if !listed[uri] {
			t.Fatalf("the clinician's list lacks %s", uri)
		}
	}

	// Then retired's whole compartment leaves the catalog: its retirement
	// is recorded under the patient it was served as, also by a server
	// that never resolved its segment (restarted: patientOf's memo empty).
	lf.reconfigure(nil)
	gone := obs("obs-retired-1", retired)
	gone.Deleted, gone.Body = true, nil
	imp(gone)
	if n := len(lf.actions(start, server.ActionRetire)); n != 2 {
		t.Fatalf("%d retirement records, want 2 (the Patient, then the Observation)", n)
	}

	k, err := lf.keys.AuditKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hashed := func(uri string) string { // uri as a record names it
		u, err := store.ParseURI(uri)
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(uri, u.Patient, audit.Pseudonym(k.Bytes, imported[uri]))
	}
	// Every record: the keyed hash in each URI's patient segment is one of
	// the record's patients.
	recs := lf.records()[start:]
	checked := 0
	for _, r := range recs {
		for _, uri := range r.URIs {
			_, rest, ok := strings.Cut(uri, "/patients/")
			if !ok {
				continue
			}
			seg, _, _ := strings.Cut(rest, "/")
			if checked++; !slices.Contains(r.Patients, seg) {
				t.Errorf("record %d (%s): URI %s names the patient %s, its patients are %v", r.Seq, r.Action, uri, seg, r.Patients)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no record names a URI of a patient")
	}
	for _, r := range recs {
		if r.Action == server.ActionRetire && !slices.Equal(r.Patients, []string{audit.Pseudonym(k.Bytes, retired)}) {
			t.Errorf("retirement record %d names %v, want the source id's hash", r.Seq, r.Patients)
		}
	}
	// The patient report of each source id in the tenant finds each of its
	// records in the tenant, with the imported URIs among its resources.
	for _, src := range []string{never, retired} {
		want := map[uint64]bool{}
		for _, r := range recs {
			if slices.Contains(r.Patients, audit.Pseudonym(k.Bytes, src)) {
				want[r.Seq] = true
			}
		}
		rep, err := report.Run(ctx, lf.log, report.Query{Patients: []string{audit.Pseudonym(k.Bytes, src)}, Tenant: "general-hospital"}, recs[len(recs)-1].Seq, nil)
		if err != nil {
			t.Fatal(err)
		}
		shown := map[string]bool{}
		for _, row := range rep.Rows {
			if row.Seq < recs[0].Seq {
				continue
			}
			if row.Tenant != "general-hospital" {
				t.Errorf("report of %s: record %d (%s) is in tenant %q", src, row.Seq, row.Action, row.Tenant)
			}
			delete(want, row.Seq)
			for _, u := range row.Resources {
				shown[u] = true
			}
		}
		if len(want) > 0 {
			t.Errorf("report of %s misses records %v", src, slices.Sorted(maps.Keys(want)))
		}
		for uri, p := range imported {
			if p == src && !shown[hashed(uri)] {
				t.Errorf("report of %s never shows %s", src, hashed(uri))
			}
		}
	}
	// The not-found read names the patient of the compartment too.
	imported[missing] = never
	if got := hashed(missing); !slices.ContainsFunc(recs, func(r audit.Record) bool { return slices.Contains(r.URIs, got) }) {
		t.Errorf("no record names the not-found read %s as %s", missing, got)
	}
}

// TestReadRecordNamesTheDecidedPatient: over a catalog that keeps no index
// (a store.Store, not what custos serves), patientOf finds a keyed segment
// only through the compartment's Patient resource; a read record still
// names the URI of the resource decided under that resource's
// labels.patient, the patient the decision saw and its patients name.
func TestReadRecordNamesTheDecidedPatient(t *testing.T) {
	var src, uri string
	f := newServerFixture(t, fixtureOptions{imports: func(t testing.TB, catPath string) {
		seedDir, _ := seedOnce(t)
		id, err := server.LoadPrincipalFile(filepath.Join(seedDir, "principals", "clinician.json"))
		if err != nil {
			t.Fatal(err)
		}
		src = id.Principal.Patients[0]
		n := testNamer(t)
		importEntries(t, catPath, n, store.Entry{Type: "Observation", ID: "obs-1", Patient: src, Body: []byte(`{"resourceType":"Observation","id":"obs-1","status":"final","code":{"text":"Heart rate"}}`)})
		uri = n.Link("Observation", "obs-1", src)
	}})
	ctx := context.Background()
	start := len(f.records())
	if _, err := f.connect(f.identity("clinician")).ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
		t.Fatalf("clinician read %s: %v", uri, err)
	}
	k, err := f.keys.AuditKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := store.ParseURI(uri)
	p := audit.Pseudonym(k.Bytes, src)
	recs := f.records()[start:]
	if len(recs) != 1 || !slices.Equal(recs[0].Patients, []string{p}) || !slices.Equal(recs[0].URIs, []string{strings.ReplaceAll(uri, u.Patient, p)}) {
		t.Fatalf("read records %+v; want one naming %s in its patients and its URI", recs, p)
	}
}
