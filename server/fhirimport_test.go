package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

// TestFHIRImportServed: resources of a streaming FHIR import (keyed URIs,
// labels naming the SOURCE patient) are served by the policy: a clinician of
// the patient reads the patient's Observation and attachment and the
// tenant's reference data (reason reference_data); a researcher sees the
// reference data under an alias URI without a patient segment and reads it
// de-identified, and never sees the attachment.
func TestFHIRImportServed(t *testing.T) {
	lf := newLiveFixture(t)
	ctx := context.Background()
	clin := lf.identity("clinician")
	src := clin.Principal.Patients[0] // the patient as the identity provider names it
	n, err := store.NewNamer("general-hospital", []byte("0123456789abcdef0123456789abcdef"), "test:id-key@1")
	if err != nil {
		t.Fatal(err)
	}
	entries := []store.Entry{
		{Type: "Observation", ID: "obs-src-1", Patient: src, Body: []byte(`{"resourceType":"Observation","id":"obs-src-1","status":"final","code":{"text":"Heart rate"}}`)},
		{Type: "Organization", ID: "org-src-1", Body: []byte(`{"resourceType":"Organization","id":"org-src-1","name":"City Hospital"}`)},
		{Type: "Attachment", ID: "DocumentReference/doc-1/content/0", Patient: src, MIMEType: "text/plain; charset=utf-8", Carrier: store.Carrier{Type: "DocumentReference", ID: "doc-1"},
			Body: []byte("Progress note: stable.")},
	}
	lf.importEntries(n, entries)
	obs := n.Link("Observation", "obs-src-1", src)
	org := n.Link("Organization", "org-src-1", "")
	att := n.Link("Attachment", "DocumentReference/doc-1/content/0", src)

	cs := lf.connect(clin)
	start := len(lf.records())
	for _, uri := range []string{obs, org, att} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("clinician read %s: %v", uri, err)
		}
	}
	reads := lf.actions(start, server.ActionRead)
	if len(reads) != 3 || reads[1].Reason != "reference_data" {
		t.Fatalf("read records: %+v", reads)
	}

	// Completion: the reference-data template offers the tenant-level
	// type and id; the patient template never offers them.
	if got := complete(t, cs, "fhir://{tenant}/{type}/{id}", "type", "", nil).Completion.Values; !slices.Equal(got, []string{"organization"}) {
		t.Errorf("reference-data types = %v", got)
	}
	// The imported Organization beside the synthetic payers' (h-views).
	var orgIDs []string
	for _, uri := range listAll(t, cs) {
		if id, ok := strings.CutPrefix(uri, "fhir://general-hospital/organization/"); ok {
			orgIDs = append(orgIDs, id)
		}
	}
	slices.Sort(orgIDs)
	if got := complete(t, cs, "fhir://{tenant}/{type}/{id}", "id", "", map[string]string{"type": "organization"}).Completion.Values; !slices.Equal(got, orgIDs) || !slices.Contains(got, org[strings.LastIndex(org, "/")+1:]) {
		t.Errorf("reference-data ids = %v", got)
	}
	if got := complete(t, cs, fhirTemplate, "type", "org", nil).Completion.Values; len(got) != 0 {
		t.Errorf("the patient template offers %v", got)
	}

	rcs := lf.connect(lf.identity("researcher"))
	var refs []string
	for r, err := range rcs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(r.URI, org[strings.LastIndex(org, "/")+1:]) || strings.HasPrefix(r.URI, "attachment://") {
			t.Fatalf("research list shows a catalog id or an attachment: %s", r.URI)
		}
		if strings.HasPrefix(r.URI, "fhir://general-hospital/organization/") {
			refs = append(refs, r.URI)
			if r.Title != "Organization (de-identified)" {
				t.Errorf("research title %q", r.Title)
			}
		}
	}
	if len(refs) != len(orgIDs) {
		t.Fatalf("research list has %d organizations, want %d", len(refs), len(orgIDs))
	}
	for _, ref := range refs {
		res, err := rcs.ReadResource(ctx, &mcp.ReadResourceParams{URI: ref})
		if err != nil || len(res.Contents) != 1 || strings.Contains(res.Contents[0].Text, "org-src-1") {
			t.Fatalf("research read of reference data: %v %+v", err, res)
		}
	}
	if _, err := rcs.ReadResource(ctx, &mcp.ReadResourceParams{URI: att}); err == nil {
		t.Fatal("a researcher read an attachment")
	}
}

// importEntries imports entries (FHIR input, named by n) into the live
// fixture's catalog file and swaps it in.
func (lf *liveFixture) importEntries(n *store.Namer, entries []store.Entry) {
	lf.t.Helper()
	stream := func(yield func(store.Entry, error) bool) {
		for _, e := range entries {
			if !yield(e, nil) {
				return
			}
		}
	}
	if _, err := store.ImportEntriesStaged(context.Background(), lf.catPath, stream, store.EntryOptions{Namer: n}, store.Options{}); err != nil {
		lf.t.Fatal(err)
	}
	if _, swapped, err := lf.live.Reload(); err != nil || !swapped {
		lf.t.Fatalf("Reload: %v %v", swapped, err)
	}
}

// TestPatientOfFastPathsAgree: the patient a record names for a URI comes
// from patientOf, which skips the catalog lookup for a segment without the
// form of a keyed id and memoizes resolved ones. Over a catalog holding
// custos's own data and a FHIR import (compartments with their Patients,
// one whose Patient was never imported, one whose Patient was retired),
// indexed (store.Live, as custos serves it) or not, asked twice so that
// the memo answers the second time, it gives what the plain lookup gives,
// for every URI and for keyed segments the catalog does not hold. Over the
// indexed catalog a compartment without its Patient resolves to its
// source id too (before, to the segment: records named the patient by
// two hashes).
func TestPatientOfFastPathsAgree(t *testing.T) {
	imports := func(t testing.TB, catPath string) {
		n := testNamer(t)
		patient := func(p string) store.Entry {
			return store.Entry{Type: "Patient", ID: p, Patient: p, Body: []byte(`{"resourceType":"Patient","id":"` + p + `"}`)}
		}
		obs := func(p string) store.Entry {
			return store.Entry{Type: "Observation", ID: "obs-" + p, Patient: p, Body: []byte(`{"resourceType":"Observation","id":"obs-` + p + `","status":"final","code":{"text":"Heart rate"}}`)}
		}
		var entries []store.Entry
		for _, p := range []string{"MRN-1", "MRN-2", "MRN-retired"} {
			entries = append(entries, patient(p), obs(p))
		}
		entries = append(entries, obs("MRN-never-imported"))
		retired := patient("MRN-retired")
		retired.Deleted, retired.Body = true, nil
		importEntries(t, catPath, n, entries...)
		importEntries(t, catPath, n, retired)
	}
	for _, live := range []bool{false, true} {
		t.Run(map[bool]string{false: "store", true: "live"}[live], func(t *testing.T) {
			f := newServerFixture(t, fixtureOptions{imports: imports, live: live})
			fast, plain := server.PatientOf(f.catalog)
			var uris []store.URI
			for _, r := range f.allURIs() {
				u, err := store.ParseURI(r.URI)
				if err != nil {
					t.Fatal(err)
				}
				uris = append(uris, u)
				if u.Patient != "" { // the same compartment under a segment no import made
					v := u
					v.Patient = store.ResourceID([]byte("another key, another catalog...."), u.Tenant, "Patient", u.Patient)
					uris = append(uris, v)
				}
				if live && u.Patient != "" {
					// Every compartment, with its Patient or not, resolves
					// to the patient its resources name.
					if got := plain(u); got != r.Labels.Patient {
						t.Errorf("%s: the plain lookup %q, labels.patient %q", u, got, r.Labels.Patient)
					}
				}
			}
			native, keyed := 0, 0
			for range 2 {
				for _, u := range uris {
					want := plain(u)
					if got := fast(u); got != want {
						t.Errorf("%s: patientOf %q, the plain lookup %q", u, got, want)
					}
					switch {
					case u.Patient == "":
					case want == u.Patient:
						native++
					default:
						keyed++
					}
				}
			}
			if native == 0 || keyed == 0 {
				t.Fatalf("%d URIs name their patient by the segment and %d by a source id: the test needs both", native, keyed)
			}
		})
	}
}

// TestVIPChartReadIsFlagged: a VIP is marked in EHR exports by a security
// label on the Patient only (v3 ActCode CEL). Imported through custos
// import (items first, the Patient labelled CEL by a later import), a
// clinician's read of the VIP's Observation is audited with the reason
// vip_patient, for the privacy officer's review of VIP chart accesses.
// Before the fix only the Patient carried vip, and the read of the chart
// was recorded as any other.
func TestVIPChartReadIsFlagged(t *testing.T) {
	lf := newLiveFixture(t)
	ctx := context.Background()
	clin := lf.identity("clinician")
	src := clin.Principal.Patients[0]
	key := secrets.Key{ID: "test:id-key@1", Bytes: []byte("0123456789abcdef0123456789abcdef")}
	n, err := store.NewNamer("general-hospital", key.Bytes, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	imp := func(name, ndjson string) {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(ndjson+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := app.ImportFHIR(ctx, lf.catPath, dir, app.FHIRImport{Tenant: "general-hospital", IDKey: key}); err != nil {
			t.Fatal(err)
		}
		if _, swapped, err := lf.live.Reload(); err != nil || !swapped {
			t.Fatalf("Reload: %v %v", swapped, err)
		}
	}
	read := func(uri string) string {
		t.Helper()
		cs := lf.connect(clin)
		start := len(lf.records())
		if res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil || len(res.Contents) != 1 {
			t.Fatalf("clinician read %s: %v", uri, err)
		}
		reads := lf.actions(start, server.ActionRead)
		if len(reads) != 1 {
			t.Fatalf("read records: %+v", reads)
		}
		return reads[0].Reason
	}
	imp("Observation.ndjson", `{"resourceType":"Observation","id":"obs-vip-1","status":"final","code":{"text":"Heart rate"},"subject":{"reference":"Patient/`+src+`"}}`)
	obs := n.Link("Observation", "obs-vip-1", src)
	if reason := read(obs); strings.Contains(reason, "vip_patient") {
		t.Fatalf("before the Patient is labelled CEL: reason %q", reason)
	}
	imp("Patient.ndjson", `{"resourceType":"Patient","id":"`+src+`","meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"CEL"}]}}`)
	for _, uri := range []string{n.Link("Patient", src, src), obs} {
		if reason := read(uri); !strings.Contains(reason, "vip_patient") {
			t.Errorf("read of %s: reason %q, want vip_patient among them", uri, reason)
		}
	}
}

// A research read of a resource imported from FHIR names its patient by
// the alias its URI carries. The catalog keeps the source ids in the
// payload and in labels.patient, while the URI's patient segment is the
// keyed id of the Patient (docs/import.md): the payload's
// Patient/<alias> must be the alias of that segment, the one the study
// sees in every URI of the patient (and in the Patient's own URI), not an
// alias of the source id that names nothing it is shown.
func TestResearchReadOfFHIRInputNamesTheURIsPatientAlias(t *testing.T) {
	lf := newLiveFixture(t)
	ctx := context.Background()
	src := lf.identity("clinician").Principal.Patients[0]
	n, err := store.NewNamer("general-hospital", []byte("0123456789abcdef0123456789abcdef"), "test:id-key@1")
	if err != nil {
		t.Fatal(err)
	}
	entries := []store.Entry{
		{Type: "Patient", ID: src, Patient: src, Body: []byte(`{"resourceType":"Patient","id":"` + src + `","gender":"female"}`)},
		{Type: "Observation", ID: "obs-src-1", Patient: src, Body: []byte(`{"resourceType":"Observation","id":"obs-src-1","status":"final","code":{"text":"Heart rate"},"subject":{"reference":"Patient/` + src + `"}}`)},
	}
	lf.importEntries(n, entries)
	seg := store.ResourceID([]byte("0123456789abcdef0123456789abcdef"), "general-hospital", "Patient", src)
	real := lf.realIDs()
	rcs := lf.connect(lf.identity("researcher"))
	var obs, pat string
	for r, err := range rcs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		u, _ := store.ParseURI(lf.realURI(real, r.URI))
		if u.Patient != seg {
			continue
		}
		switch u.Type {
		case "observation":
			obs = r.URI
		case "patient":
			pat = r.URI
		}
	}
	if obs == "" || pat == "" {
		t.Fatalf("the researcher lists observation %q and patient %q of the imported patient", obs, pat)
	}
	u, _ := store.ParseURI(obs)
	p, _ := store.ParseURI(pat)
	if u.Patient != p.Patient || p.ID != p.Patient {
		t.Fatalf("observation %s and patient %s: one patient alias expected", obs, pat)
	}
	res, err := rcs.ReadResource(ctx, &mcp.ReadResourceParams{URI: obs})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Subject struct{ Reference string } `json:"subject"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &body); err != nil || body.Subject.Reference != "Patient/"+u.Patient {
		t.Fatalf("research read of %s: subject %q (%v), want Patient/%s", obs, body.Subject.Reference, err, u.Patient)
	}
}
