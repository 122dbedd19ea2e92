package app

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/store"
	bolt "go.etcd.io/bbolt"
)

// condBundle is a transaction Bundle as an exporter that mints new uuids
// per export writes it: the Patient by conditional update on its MRN, the
// Practitioner by conditional create on its NPI (as Synthea writes its
// Practitioners), an Encounter naming both by urn:uuid.
func condBundle(patientUUID, practitionerUUID, encounterUUID string) string {
	return `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:` + patientUUID + `","resource":{"resourceType":"Patient","identifier":[{"system":"http://hospital.example.org/identifiers/mrn","value":"12345"}],"name":[{"family":"Marsh","given":["Evelyn"]}]},
 "request":{"method":"PUT","url":"Patient?identifier=http://hospital.example.org/identifiers/mrn|12345"}},
{"fullUrl":"urn:uuid:` + practitionerUUID + `","resource":{"resourceType":"Practitioner","identifier":[{"system":"http://hl7.org/fhir/sid/us-npi","value":"9999994392"}]},
 "request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=http://hl7.org/fhir/sid/us-npi|9999994392"}},
{"fullUrl":"urn:uuid:` + encounterUUID + `","resource":{"resourceType":"Encounter","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"AMB"},
 "subject":{"reference":"urn:uuid:` + patientUUID + `"},"participant":[{"individual":{"reference":"urn:uuid:` + practitionerUUID + `"}}]},
 "request":{"method":"POST","url":"Encounter"}}]}`
}

// A re-import of an export whose uuids are new each time updates the
// Patient its conditional update matches and the Practitioner its
// conditional create matches, in the catalog, instead of adding a second
// Patient and Practitioner each time (fhirin.Options.Match,
// matchResources): the catalog holds one of each, at the URI of the first
// import, and the new Encounter names them. A catalog holding two matches
// refuses the import and changes nothing.
func TestImportConditionalUpdateMatchesCatalog(t *testing.T) {
	f := newLinkFixture(t)
	imp := func(full bool, body string) error {
		path := filepath.Join(t.TempDir(), "bundle.json")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ImportFHIR(context.Background(), f.cat, path, FHIRImport{Tenant: f.tenant, IDKey: f.key, Full: full})
		return err
	}
	live := func() map[string][]string { // live source ids by type
		st, err := store.Open(f.cat, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		out := map[string][]string{}
		rs, err := st.Page("", 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			out[r.Labels.Type] = append(out[r.Labels.Type], r.URI)
		}
		return out
	}
	const (
		p1, pr1, e1 = "9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f", "4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7a8b", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
		p2, pr2, e2 = "1d2e3f40-5a6b-4c7d-8e9f-a0b1c2d3e4f5", "2e3f4051-6b7c-4d8e-9fa0-b1c2d3e4f5a6", "3f405162-7c8d-4e9f-a0b1-c2d3e4f5a6b7"
	)
	if err := imp(false, condBundle(p1, pr1, e1)); err != nil {
		t.Fatal(err)
	}
	if err := imp(false, condBundle(p2, pr2, e2)); err != nil {
		t.Fatal(err)
	}
	got := live()
	if len(got["patient"]) != 1 || len(got["practitioner"]) != 1 || len(got["encounter"]) != 2 {
		t.Fatalf("live after a re-import with new uuids: %d Patients, %d Practitioners, %d Encounters; want 1, 1, 2",
			len(got["patient"]), len(got["practitioner"]), len(got["encounter"]))
	}
	if got["patient"][0] != f.namer.Link("Patient", p1, p1) || got["practitioner"][0] != f.namer.Link("Practitioner", pr1, "") {
		t.Error("the Patient or Practitioner moved to another URI")
	}
	_, enc := f.get("Encounter", e2, p1)
	if !strings.Contains(string(enc), `"Patient/`+p1+`"`) || !strings.Contains(string(enc), `"Practitioner/`+pr1+`"`) {
		t.Errorf("the second Encounter does not name the first import's Patient and Practitioner: %s", enc)
	}
	// A full import of the same export keeps the one Patient live.
	if err := imp(true, condBundle("4a516273-8d9e-4fa0-b1c2-d3e4f5a6b7c8", "5b627384-9eaf-40b1-c2d3-e4f5a6b7c8d9", e2)); err != nil {
		t.Fatal(err)
	}
	if got := live(); len(got["patient"]) != 1 || got["patient"][0] != f.namer.Link("Patient", p1, p1) || len(got["practitioner"]) != 1 {
		t.Fatalf("after a full import: %v", got)
	}

	// Two Patients of the source carrying the MRN: the conditional update
	// names no one of them (FHIR 412), and the import changes nothing.
	other := strings.Replace(strings.Replace(condBundle("6c738495-afb0-41c2-d3e4-f5a6b7c8d9ea", pr1, "7d8495a6-b0c1-42d3-e4f5-a6b7c8d9eafb"),
		`"request":{"method":"PUT","url":"Patient?identifier=http://hospital.example.org/identifiers/mrn|12345"}`, `"request":{"method":"POST","url":"Patient"}`, 1),
		`"ifNoneExist":"identifier=http://hl7.org/fhir/sid/us-npi|9999994392"`, `"ifNoneExist":"_id=`+pr1+`"`, 1)
	if err := imp(false, other); err != nil {
		t.Fatal(err)
	}
	before := f.catalogBytes()
	err := imp(false, condBundle("8e95a6b7-c1d2-43e4-f5a6-b7c8d9eafb0c", "9fa6b7c8-d2e3-44f5-a6b7-c8d9eafb0c1d", "a0b7c8d9-e3f4-45a6-b7c8-d9eafb0c1d2e"))
	if err == nil || !strings.Contains(err.Error(), "412") || !strings.Contains(err.Error(), "Bundle.entry[0].request.url") {
		t.Fatalf("err = %v, want the conditional update refused (412) naming the entry", err)
	}
	if strings.Contains(err.Error(), "12345") || strings.Contains(err.Error(), "Evelyn") {
		t.Errorf("the error quotes the input: %v", err)
	}
	if string(before) != string(f.catalogBytes()) {
		t.Error("a refused import changed the catalog file")
	}
}

// A conditional update or create resolves within the compartment its
// resource is in: an Observation of Patient A whose identifier (or _id)
// search finds Patient B's Observation in the catalog is refused
// (fhirin.ErrCompartment, naming the entry's query) and changes nothing.
// Before, it took B's Observation's id, and the import retired B's
// Observation and wrote A's content under its id in A's compartment: a
// search by identifier (by value alone, in any system) moved a record out
// of one patient's compartment into another's. A match in the entry's own
// compartment still updates the resource.
func TestImportConditionalMatchStaysInItsCompartment(t *testing.T) {
	f := newLinkFixture(t)
	imp := func(body string) error {
		path := filepath.Join(t.TempDir(), "bundle.json")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ImportFHIR(context.Background(), f.cat, path, FHIRImport{Tenant: f.tenant, IDKey: f.key})
		return err
	}
	const (
		pa, pb = "a1a1a1a1-0000-4000-8000-000000000001", "b2b2b2b2-0000-4000-8000-000000000002"
		obs    = "c3c3c3c3-0000-4000-8000-000000000003"
	)
	observation := func(fullURL, patient, text, request string) string {
		return `{"fullUrl":"` + fullURL + `","resource":{"resourceType":"Observation","identifier":[{"system":"urn:lab","value":"77"}],"status":"final","code":{"text":"` + text + `"},"subject":{"reference":"Patient/` + patient + `"}},"request":` + request + `}`
	}
	bundle := func(entries ...string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[` + strings.Join(entries, ",\n") + `]}`
	}
	if err := imp(bundle(
		`{"fullUrl":"urn:uuid:`+pa+`","resource":{"resourceType":"Patient"},"request":{"method":"PUT","url":"Patient/`+pa+`"}}`,
		`{"fullUrl":"urn:uuid:`+pb+`","resource":{"resourceType":"Patient"},"request":{"method":"PUT","url":"Patient/`+pb+`"}}`,
		observation("urn:uuid:"+obs, pb, "first", `{"method":"PUT","url":"Observation/`+obs+`"}`))); err != nil {
		t.Fatal(err)
	}
	before := f.catalogBytes()
	for _, request := range []string{
		`{"method":"PUT","url":"Observation?identifier=urn:lab|77"}`,
		`{"method":"PUT","url":"Observation?identifier=77"}`,
		`{"method":"PUT","url":"Observation?_id=` + obs + `"}`,
		`{"method":"POST","url":"Observation","ifNoneExist":"identifier=urn:lab|77"}`,
	} {
		err := imp(bundle(observation("urn:uuid:d4d4d4d4-0000-4000-8000-000000000004", pa, "A's", request)))
		var fe *fhirin.Error
		if !errors.Is(err, fhirin.ErrCompartment) || !errors.As(err, &fe) || !strings.HasPrefix(fe.Path, "Bundle.entry[0].request.") {
			t.Errorf("%s: err = %v, want ErrCompartment at the entry's query", request, err)
		}
		if err != nil && (strings.Contains(err.Error(), "77") || strings.Contains(err.Error(), pa) || strings.Contains(err.Error(), obs)) {
			t.Errorf("the error quotes the input: %v", err)
		}
		if string(before) != string(f.catalogBytes()) {
			t.Fatalf("%s: a refused import changed the catalog file", request)
		}
	}
	if _, body := f.get("Observation", obs, pb); !strings.Contains(string(body), `"first"`) {
		t.Errorf("B's Observation changed: %s", body)
	}
	// In its own compartment the match updates B's Observation.
	if err := imp(bundle(observation("urn:uuid:e5e5e5e5-0000-4000-8000-000000000005", pb, "second", `{"method":"PUT","url":"Observation?identifier=urn:lab|77"}`))); err != nil {
		t.Fatal(err)
	}
	if r, body := f.get("Observation", obs, pb); r.Version != 2 || !strings.Contains(string(body), `"second"`) {
		t.Errorf("B's Observation after a conditional update of B's: version %d, %s", r.Version, body)
	}
}

// liveVersions is the live URIs of the catalog at f.cat, each with its
// version and content digest.
func (f *linkFixture) liveVersions() map[string]string {
	f.t.Helper()
	st, err := store.Open(f.cat, store.Options{ReadOnly: true})
	if err != nil {
		f.t.Fatal(err)
	}
	defer st.Close()
	rs, err := st.Page("", 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rs {
		out[r.URI] = fmt.Sprintf("%s v%d %s", r.Labels.Type, r.Version, r.Digest)
	}
	return out
}

// impBundles imports the Bundles, one file each, as one import (a
// directory of Bundle files).
func (f *linkFixture) impBundles(full bool, bundles ...string) (FHIRReport, error) {
	f.t.Helper()
	dir := f.t.TempDir()
	for i, b := range bundles {
		if err := os.WriteFile(filepath.Join(dir, "bundle"+string(rune('a'+i))+".json"), []byte(b), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	return ImportFHIR(context.Background(), f.cat, dir, FHIRImport{Tenant: f.tenant, IDKey: f.key, Full: full})
}

// A conditional create (POST with ifNoneExist) whose search finds one
// resource of the catalog leaves that resource as it is (R4 http.html#ccreate:
// "the server ignores the post and returns 200 OK"): same content, same
// version, and a full import keeps it live (it was seen) together with
// the attachment it carries. Before, the entry's content was written as a
// new version of the match.
func TestImportConditionalCreateKeepsItsMatch(t *testing.T) {
	f := newLinkFixture(t)
	const pat = "a1a1a1a1-0000-4000-8000-0000000000a1"
	practitioner := func(uuid, family string) string {
		return `{"fullUrl":"urn:uuid:` + uuid + `","resource":{"resourceType":"Practitioner","identifier":[{"system":"http://hl7.org/fhir/sid/us-npi","value":"9999994392"}],"name":[{"family":"` + family + `"}]},
 "request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=http://hl7.org/fhir/sid/us-npi|9999994392"}}`
	}
	document := func(uuid, text string) string {
		return `{"fullUrl":"urn:uuid:` + uuid + `","resource":{"resourceType":"DocumentReference","identifier":[{"system":"urn:doc","value":"d1"}],"status":"current","subject":{"reference":"Patient/` + pat + `"},
 "content":[{"attachment":{"contentType":"text/plain","data":"` + text + `"}}]},
 "request":{"method":"POST","url":"DocumentReference","ifNoneExist":"identifier=urn:doc|d1"}}`
	}
	bundle := func(entries ...string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[` + strings.Join(entries, ",\n") + `]}`
	}
	patient := `{"fullUrl":"urn:uuid:` + pat + `","resource":{"resourceType":"Patient","id":"` + pat + `"},"request":{"method":"PUT","url":"Patient/` + pat + `"}}`
	const pr1, doc1 = "4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7a8b", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	if _, err := f.impBundles(false, bundle(patient, practitioner(pr1, "First"), document(doc1, "Zmlyc3Q="))); err != nil {
		t.Fatal(err)
	}
	r0, body0 := f.get("Practitioner", pr1, "")
	d0, dbody0 := f.get("DocumentReference", doc1, pat)
	before := f.liveVersions()
	for _, full := range []bool{false, true} {
		_, err := f.impBundles(full, bundle(patient, practitioner("2e3f4051-6b7c-4d8e-9fa0-b1c2d3e4f5a6", "Second"), document("3f405162-7c8d-4e9f-a0b1-c2d3e4f5a6b7", "c2Vjb25k")))
		if err != nil {
			t.Fatalf("full %v: %v", full, err)
		}
		r, body := f.get("Practitioner", pr1, "")
		if r.Version != r0.Version || string(body) != string(body0) {
			t.Errorf("full %v: the Practitioner a conditional create matched changed: version %d (was %d), %s", full, r.Version, r0.Version, body)
		}
		d, dbody := f.get("DocumentReference", doc1, pat)
		if d.Version != d0.Version || string(dbody) != string(dbody0) {
			t.Errorf("full %v: the DocumentReference a conditional create matched changed: version %d (was %d), %s", full, d.Version, d0.Version, dbody)
		}
		if got := f.liveVersions(); !maps.Equal(got, before) {
			t.Errorf("full %v: live after the import %v, want %v", full, got, before)
		}
	}
	// An input that keeps the Practitioner and then deletes it is
	// refused (in one Bundle too), and changes nothing.
	del := `{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"DELETE","url":"Practitioner/` + pr1 + `"}}]}`
	delEntry := `{"request":{"method":"DELETE","url":"Practitioner/` + pr1 + `"}}`
	const pr3 = "5b627384-9eaf-40b1-c2d3-e4f5a6b7c8d9"
	cat := f.catalogBytes()
	for _, order := range [][]string{{bundle(practitioner(pr3, "Third")), del}, {bundle(practitioner(pr3, "Third"), delEntry)}} {
		_, err := f.impBundles(false, order...)
		if err == nil || !strings.Contains(err.Error(), "deletes or moves") {
			t.Errorf("err = %v, want the kept Practitioner's deletion refused", err)
		}
		if string(cat) != string(f.catalogBytes()) {
			t.Fatal("a refused import changed the catalog file")
		}
	}
	// Deleted by an earlier Bundle, it is found no more (as a server
	// handling the Bundles in turn): the later conditional create creates
	// its own. Until 2026-12-06 the search found it in the catalog as it
	// was before the import, and the import was refused.
	if _, err := f.impBundles(false, del, bundle(practitioner(pr3, "Third"))); err != nil {
		t.Fatal(err)
	}
	if _, body := f.get("Practitioner", pr3, ""); !strings.Contains(string(body), `"Third"`) {
		t.Errorf("the created Practitioner: %s", body)
	}
	if _, ok := f.liveVersions()[f.namer.Link("Practitioner", pr1, "")]; ok {
		t.Error("the deleted Practitioner is live")
	}
}

// A conditional update whose search finds one resource of the catalog
// and whose body names another id is refused (R5 http.html#cond-update,
// "One Match, resource id provided but does not match resource found":
// 400 Bad Request), naming the entry and not the ids, and changes nothing.
// Before, the body's id was replaced by the match's without a word. A body
// with the match's id, or without one, updates it.
func TestImportConditionalUpdateBodyIDMustBeTheMatch(t *testing.T) {
	f := newLinkFixture(t)
	imp := func(body string) error {
		_, err := f.impBundles(false, body)
		return err
	}
	const p1 = "9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f"
	if err := imp(condBundle(p1, "4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7a8b", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")); err != nil {
		t.Fatal(err)
	}
	put := func(id, family string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:6c738495-afb0-41c2-d3e4-f5a6b7c8d9ea","resource":{"resourceType":"Patient"` + id +
			`,"identifier":[{"system":"http://hospital.example.org/identifiers/mrn","value":"12345"}],"name":[{"family":"` + family + `"}]},"request":{"method":"PUT","url":"Patient?identifier=http://hospital.example.org/identifiers/mrn|12345"}}]}`
	}
	before := f.catalogBytes()
	err := imp(put(`,"id":"other-7"`, "Moss"))
	var fe *fhirin.Error
	if !errors.Is(err, fhirin.ErrValue) || !errors.As(err, &fe) || fe.Path != "Bundle.entry[0].request.url" {
		t.Fatalf("err = %v, want ErrValue at Bundle.entry[0].request.url", err)
	}
	for _, s := range []string{"other-7", p1, "12345", "Moss"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error quotes the input (%s): %v", s, err)
		}
	}
	if string(before) != string(f.catalogBytes()) {
		t.Fatal("a refused import changed the catalog file")
	}
	for i, id := range []string{`,"id":"` + p1 + `"`, ""} {
		if err := imp(put(id, "Moss"+string(rune('a'+i)))); err != nil {
			t.Fatalf("body id %q: %v", id, err)
		}
		if r, body := f.get("Patient", p1, p1); r.Version != 2+i || !strings.Contains(string(body), `"Moss`+string(rune('a'+i))+`"`) {
			t.Errorf("body id %q: the Patient was not updated: version %d, %s", id, r.Version, body)
		}
	}
}

// A conditional update or create whose query is an absolute URL on
// another server than the import's (request.url
// https://other.example/fhir/Patient?identifier=..., or such an
// ifNoneExist) is refused (fhirin.ErrUnsupported), naming the entry and
// the host and never the query's values, and changes nothing: it searches
// that server, not this catalog. Before, it was resolved against this
// catalog and updated its Patient. One on the base of the entry's own
// RESTful fullUrl is resolved as before.
func TestImportConditionalOnAnotherServerRefused(t *testing.T) {
	f := newLinkFixture(t)
	const p1 = "9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f"
	if _, err := f.impBundles(false, condBundle(p1, "4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7a8b", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")); err != nil {
		t.Fatal(err)
	}
	entry := func(fullURL, resource, request string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"` + fullURL + `","resource":` + resource + `,"request":` + request + `}]}`
	}
	const (
		patient      = `{"resourceType":"Patient","identifier":[{"system":"http://hospital.example.org/identifiers/mrn","value":"12345"}],"name":[{"family":"Moss"}]}`
		practitioner = `{"resourceType":"Practitioner","identifier":[{"system":"http://hl7.org/fhir/sid/us-npi","value":"9999994392"}],"name":[{"family":"Moss"}]}`
	)
	before := f.catalogBytes()
	for _, tc := range []struct{ name, bundle, path string }{
		{"PUT", entry("urn:uuid:6c738495-afb0-41c2-d3e4-f5a6b7c8d9ea", patient, `{"method":"PUT","url":"https://Other.example/fhir/Patient?identifier=http://hospital.example.org/identifiers/mrn|12345"}`), "Bundle.entry[0].request.url"},
		{"ifNoneExist", entry("urn:uuid:6c738495-afb0-41c2-d3e4-f5a6b7c8d9ea", practitioner, `{"method":"POST","url":"Practitioner","ifNoneExist":"https://other.example/fhir/Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|9999994392"}`), "Bundle.entry[0].request.ifNoneExist"},
		{"PUT, another base than the fullUrl's", entry("https://ehr.example/fhir/Patient/p9", patient, `{"method":"PUT","url":"https://other.example/fhir/Patient?identifier=http://hospital.example.org/identifiers/mrn|12345"}`), "Bundle.entry[0].request.url"},
	} {
		_, err := f.impBundles(false, tc.bundle)
		var fe *fhirin.Error
		if !errors.Is(err, fhirin.ErrUnsupported) || !errors.As(err, &fe) || fe.Path != tc.path || !strings.Contains(err.Error(), "other.example") {
			t.Errorf("%s: err = %v, want ErrUnsupported at %s naming the host", tc.name, err, tc.path)
		}
		for _, s := range []string{"12345", "9999994392", "Moss", "hospital.example.org"} {
			if err != nil && strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error quotes the input (%s): %v", tc.name, s, err)
			}
		}
		if string(before) != string(f.catalogBytes()) {
			t.Fatalf("%s: a refused import changed the catalog file", tc.name)
		}
	}
	// On the base of its own RESTful fullUrl: resolved (no match: created).
	if _, err := f.impBundles(false, entry("https://ehr.example/fhir/Patient/p9", strings.Replace(strings.Replace(patient, "12345", "777", 1), `"Patient",`, `"Patient","id":"p9",`, 1), `{"method":"PUT","url":"https://ehr.example/fhir/Patient?identifier=http://hospital.example.org/identifiers/mrn|777"}`)); err != nil {
		t.Fatal(err)
	}
	f.get("Patient", "p9", "p9")
}

// Two Bundles of one import (two files of a directory) whose conditional
// update and create search for the same Patient and Practitioner, which
// the catalog lacks, import one of each: the later Bundle's searches find
// what the earlier one created, as a FHIR server processing them in turn
// would. Before, each Bundle was resolved against the catalog as it was
// before the import, and the import created two Patients and two
// Practitioners. A later conditional update of such a resource with other
// content is refused as two contents of one resource (store: naming both
// places), not imported twice.
func TestImportConditionalAcrossBundlesOfOneImport(t *testing.T) {
	f := newLinkFixture(t)
	const (
		p1, pr1, e1 = "9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f", "4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7a8b", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
		p2, pr2, e2 = "1d2e3f40-5a6b-4c7d-8e9f-a0b1c2d3e4f5", "2e3f4051-6b7c-4d8e-9fa0-b1c2d3e4f5a6", "3f405162-7c8d-4e9f-a0b1-c2d3e4f5a6b7"
	)
	if _, err := f.impBundles(false, condBundle(p1, pr1, e1), condBundle(p2, pr2, e2)); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, v := range f.liveVersions() {
		typ, _, _ := strings.Cut(v, " ")
		got[typ]++
	}
	if got["patient"] != 1 || got["practitioner"] != 1 || got["encounter"] != 2 {
		t.Fatalf("live after one import of two Bundles: %v; want 1 Patient, 1 Practitioner, 2 Encounters", got)
	}
	_, enc := f.get("Encounter", e2, p1)
	if !strings.Contains(string(enc), `"Patient/`+p1+`"`) || !strings.Contains(string(enc), `"Practitioner/`+pr1+`"`) {
		t.Errorf("the second Bundle's Encounter does not name the first Bundle's Patient and Practitioner: %s", enc)
	}
	// Other content for the Patient in the later Bundle: refused.
	g := newLinkFixture(t)
	_, err := g.impBundles(false, condBundle(p1, pr1, e1), strings.Replace(condBundle(p2, pr2, e2), `"Evelyn"`, `"Eve"`, 1))
	if err == nil || !strings.Contains(err.Error(), "appears twice") {
		t.Fatalf("err = %v, want the two contents of one Patient refused", err)
	}
	// A later Bundle's Observation of another patient whose search finds
	// the earlier Bundle's Observation: refused, as for a catalog match.
	obs := func(patient, obsUUID string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:` + patient + `","resource":{"resourceType":"Patient"},"request":{"method":"PUT","url":"Patient/` + patient + `"}},
{"fullUrl":"urn:uuid:` + obsUUID + `","resource":{"resourceType":"Observation","identifier":[{"system":"urn:lab","value":"77"}],"status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:` + patient + `"}},"request":{"method":"PUT","url":"Observation?identifier=urn:lab|77"}}]}`
	}
	h := newLinkFixture(t)
	_, err = h.impBundles(false, obs(p1, e1), obs(p2, e2))
	if !errors.Is(err, fhirin.ErrCompartment) || strings.Contains(err.Error(), "77") {
		t.Fatalf("err = %v, want ErrCompartment (not quoting the identifier)", err)
	}
}

// A resource without a recorded source (a custos manifest's, or a
// streaming import's from before sources were recorded) is not a match of
// a conditional search (docs/import.md, "Conditional updates and
// creates"): a manifest's Practitioner carrying the NPI a Bundle's
// conditional create searches is left as it is, and the Bundle creates
// its own. Pinned so that reading such a resource, whose URI is not the
// id key's name of its body's id, neither fails the import as a corrupt
// catalog nor adopts it.
func TestImportConditionalSourcelessNotMatched(t *testing.T) {
	f := newLinkFixture(t)
	dir := t.TempDir()
	const legacy = "12345678-0000-4000-8000-000000000001"
	uri := "fhir://" + f.tenant + "/practitioner/" + legacy
	body := `{"resourceType":"Practitioner","id":"` + legacy + `","identifier":[{"system":"http://hl7.org/fhir/sid/us-npi","value":"9999994392"}]}`
	line := `{"uri":"` + uri + `","name":"practitioner-1","mimeType":"application/fhir+json","annotations":{"audience":["user"],"priority":0.5,"lastModified":"2026-03-01T10:00:00Z"},"labels":{"tenant":"` + f.tenant + `","type":"practitioner"},"file":"p.json"}`
	if err := os.WriteFile(filepath.Join(dir, "p.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.jsonl"), []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ImportStaged(context.Background(), f.cat, dir, store.Options{}, nil); err != nil {
		t.Fatal(err)
	}
	before := f.liveVersions()
	const pr1 = "4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7a8b"
	if _, err := f.impBundles(false, condBundle("9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f", pr1, "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")); err != nil {
		t.Fatal(err)
	}
	after := f.liveVersions()
	if after[uri] != before[uri] || before[uri] == "" {
		t.Errorf("the manifest's Practitioner changed: %q, was %q", after[uri], before[uri])
	}
	f.get("Practitioner", pr1, "") // the Bundle's own, created
}

// A Binary whose securityContext names a resource that a conditional
// create keeps takes that resource's labels and compartment as the
// catalog holds them, in a full import too (the kept resource is not
// retired, so the full import's answer for its source, "not live", does
// not apply): the HIV-labelled DocumentReference stays as it is and the
// new Binary, and the report linking it, carry hiv.
func TestImportKeptResourceAsSecurityContext(t *testing.T) {
	f := newLinkFixture(t)
	const pat = "a1a1a1a1-0000-4000-8000-0000000000a1"
	patient := `{"fullUrl":"urn:uuid:` + pat + `","resource":{"resourceType":"Patient","id":"` + pat + `"},"request":{"method":"PUT","url":"Patient/` + pat + `"}}`
	doc := func(uuid, security, request string) string {
		return `{"fullUrl":"urn:uuid:` + uuid + `","resource":{"resourceType":"DocumentReference"` + security + `,"identifier":[{"system":"urn:doc","value":"d1"}],"status":"current","subject":{"reference":"Patient/` + pat + `"},
 "content":[{"attachment":{"contentType":"text/plain","url":"https://elsewhere.example/doc/1"}}]},"request":` + request + `}`
	}
	bundle := func(entries ...string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[` + strings.Join(entries, ",\n") + `]}`
	}
	const d1, d2 = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "2a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	if _, err := f.impBundles(false, bundle(patient, doc(d1, `,"meta":{"security":[`+lnkHIV+`]}`, `{"method":"PUT","url":"DocumentReference/`+d1+`"}`))); err != nil {
		t.Fatal(err)
	}
	r0, _ := f.get("DocumentReference", d1, pat)
	binary := `{"fullUrl":"urn:uuid:b1b1b1b1-0000-4000-8000-0000000000b1","resource":{"resourceType":"Binary","securityContext":{"reference":"urn:uuid:` + d2 + `"},"contentType":"text/plain","data":"aGk="},"request":{"method":"POST","url":"Binary"}}`
	report := `{"fullUrl":"urn:uuid:c1c1c1c1-0000-4000-8000-0000000000c1","resource":{"resourceType":"DiagnosticReport","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/` + pat + `"},"presentedForm":[{"contentType":"text/plain","url":"urn:uuid:b1b1b1b1-0000-4000-8000-0000000000b1"}]},"request":{"method":"POST","url":"DiagnosticReport"}}`
	for _, full := range []bool{false, true} {
		if _, err := f.impBundles(full, bundle(patient, doc(d2, "", `{"method":"POST","url":"DocumentReference","ifNoneExist":"identifier=urn:doc|d1"}`), binary, report)); err != nil {
			t.Fatalf("full %v: %v", full, err)
		}
		if r, _ := f.get("DocumentReference", d1, pat); r.Version != r0.Version || !slices.Contains(r.Labels.Sensitivity, "hiv") {
			t.Errorf("full %v: the kept DocumentReference: version %d (was %d), labels %v", full, r.Version, r0.Version, r.Labels.Sensitivity)
		}
		for typ, id := range map[string]string{"Binary": "b1b1b1b1-0000-4000-8000-0000000000b1", "DiagnosticReport": "c1c1c1c1-0000-4000-8000-0000000000c1"} {
			if r, _ := f.get(typ, id, pat); !slices.Contains(r.Labels.Sensitivity, "hiv") {
				t.Errorf("full %v: %s labels %v, want hiv (its securityContext's kept DocumentReference)", full, typ, r.Labels.Sensitivity)
			}
		}
	}
}

// A full import keeps, with a resource a conditional create keeps, what
// it carries and the Binaries its lifted attachments link, as the same
// full import holding the resource does, and nothing it only mentions:
// a Binary it names in a Reference (its own patient's, or another
// patient's) is retired, as it is when the input writes the resource, and
// so is another patient's Binary whose custos attachment URI its content
// quotes as an attachment url (no lifted link names another compartment).
// Before, every Binary the kept resource named stayed live, another
// patient's included.
func TestImportFullKeptResourceKeepsOnlyWhatItLinks(t *testing.T) {
	const pat, q = "a1a1a1a1-0000-4000-8000-0000000000a1", "a2a2a2a2-0000-4000-8000-0000000000a2"
	bundle := func(entries ...string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[` + strings.Join(entries, ",\n") + `]}`
	}
	patient := func(id string) string {
		return `{"fullUrl":"urn:uuid:` + id + `","resource":{"resourceType":"Patient","id":"` + id + `"},"request":{"method":"PUT","url":"Patient/` + id + `"}}`
	}
	bin := func(id, p string) string {
		return `{"resource":{"resourceType":"Binary","id":"` + id + `","securityContext":{"reference":"Patient/` + p + `"},"contentType":"text/plain","data":"aGk="},"request":{"method":"PUT","url":"Binary/` + id + `"}}`
	}
	const d1 = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	doc := func(request, forged string) string {
		return `{"fullUrl":"urn:uuid:` + d1 + `","resource":{"resourceType":"DocumentReference","id":"` + d1 + `","identifier":[{"system":"urn:doc","value":"d1"}],"status":"current","subject":{"reference":"Patient/` + pat + `"},
 "context":{"related":[{"reference":"Binary/bm"},{"reference":"Binary/bq"}]},
 "content":[{"attachment":{"contentType":"text/plain","url":"Binary/bl"}},{"attachment":{"contentType":"text/plain","data":"aW5saW5l"}},{"attachment":{"contentType":"text/plain","url":"` + forged + `"}}]},"request":` + request + `}`
	}
	live := map[bool][]string{}
	for _, kept := range []bool{false, true} {
		f := newLinkFixture(t)
		forged := f.namer.Link("Binary", "bz", q)
		if _, err := f.impBundles(false, bundle(patient(pat), patient(q), bin("bm", pat), bin("bq", q), bin("bz", q), bin("bl", pat), doc(`{"method":"PUT","url":"DocumentReference/`+d1+`"}`, forged))); err != nil {
			t.Fatal(err)
		}
		req := `{"method":"PUT","url":"DocumentReference/` + d1 + `"}`
		if kept {
			req = `{"method":"POST","url":"DocumentReference","ifNoneExist":"identifier=urn:doc|d1"}`
		}
		if _, err := f.impBundles(true, bundle(patient(pat), patient(q), doc(req, forged))); err != nil {
			t.Fatalf("kept %v: %v", kept, err)
		}
		live[kept] = slices.Sorted(maps.Keys(f.liveVersions()))
		for _, b := range []struct{ id, patient string }{{"bm", pat}, {"bq", q}, {"bz", q}} {
			if _, ok := f.liveVersions()[f.namer.Link("Binary", b.id, b.patient)]; ok {
				t.Errorf("kept %v: Binary %s, which the DocumentReference only mentions, is live after a full import without it", kept, b.id)
			}
		}
		f.get("Binary", "bl", pat) // linked: live
	}
	if !slices.Equal(live[false], live[true]) {
		t.Errorf("a full import keeping the DocumentReference left live %v; holding it, %v", live[true], live[false])
	}
}

// A Binary of the input that only the content of a kept resource links
// (docs/import.md: that content counts for nothing) is a Binary no
// resource of the import links: one live in the catalog is placed where
// it is, with the labels it has there (the kept DocumentReference's hiv,
// which its catalog version still links), incremental and full; one live
// nowhere is refused (ErrCompartment) and changes nothing. Pinned: the
// docs said both were refused.
func TestImportKeptResourceOnlyLinkerOfABinary(t *testing.T) {
	const pat = "a1a1a1a1-0000-4000-8000-0000000000a1"
	bundle := func(entries ...string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[` + strings.Join(entries, ",\n") + `]}`
	}
	patient := `{"fullUrl":"urn:uuid:` + pat + `","resource":{"resourceType":"Patient","id":"` + pat + `"},"request":{"method":"PUT","url":"Patient/` + pat + `"}}`
	bin := func(id, data string) string {
		return `{"resource":{"resourceType":"Binary","id":"` + id + `","contentType":"text/plain","data":"` + data + `"},"request":{"method":"PUT","url":"Binary/` + id + `"}}`
	}
	const d1 = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	doc := func(security, bin, request string) string {
		return `{"fullUrl":"urn:uuid:` + d1 + `","resource":{"resourceType":"DocumentReference","id":"` + d1 + `"` + security + `,"identifier":[{"system":"urn:doc","value":"d1"}],"status":"current","subject":{"reference":"Patient/` + pat + `"},
 "content":[{"attachment":{"contentType":"text/plain","url":"Binary/` + bin + `"}}]},"request":` + request + `}`
	}
	const create = `{"method":"POST","url":"DocumentReference","ifNoneExist":"identifier=urn:doc|d1"}`
	for _, full := range []bool{false, true} {
		f := newLinkFixture(t)
		if _, err := f.impBundles(false, bundle(patient, bin("bl", "aGk="), doc(`,"meta":{"security":[`+lnkHIV+`]}`, "bl", `{"method":"PUT","url":"DocumentReference/`+d1+`"}`))); err != nil {
			t.Fatal(err)
		}
		if _, err := f.impBundles(full, bundle(patient, bin("bl", "bmV3"), doc("", "bl", create))); err != nil {
			t.Fatalf("full %v: %v", full, err)
		}
		if r, body := f.get("Binary", "bl", pat); string(body) != "new" || !slices.Contains(r.Labels.Sensitivity, "hiv") {
			t.Errorf("full %v: the Binary only the kept content links: %q, labels %v; want its new content, with hiv", full, body, r.Labels.Sensitivity)
		}
		cat := f.catalogBytes()
		_, err := f.impBundles(full, bundle(patient, bin("bn", "bmV3"), doc("", "bn", create)))
		if !errors.Is(err, fhirin.ErrCompartment) {
			t.Errorf("full %v: err = %v, want a Binary live nowhere that only kept content links refused (ErrCompartment)", full, err)
		}
		if string(cat) != string(f.catalogBytes()) {
			t.Fatalf("full %v: a refused import changed the catalog file", full)
		}
	}
}

// An input that keeps two resources (conditional creates) and deletes
// both is refused naming both kept entries, in input order, every time.
// Before, checkKept returned the first problem of a map iteration: one
// entry, a different one from run to run.
func TestImportKeptProblemsAllNamed(t *testing.T) {
	f := newLinkFixture(t)
	practitioner := func(uuid, npi string) string {
		return `{"fullUrl":"urn:uuid:` + uuid + `","resource":{"resourceType":"Practitioner","identifier":[{"system":"http://hl7.org/fhir/sid/us-npi","value":"` + npi + `"}]},"request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=http://hl7.org/fhir/sid/us-npi|` + npi + `"}}`
	}
	bundle := func(entries ...string) string {
		return "{\"resourceType\":\"Bundle\",\"type\":\"transaction\",\"entry\":[\n" + strings.Join(entries, ",\n") + "]}"
	}
	const prA, prB = "4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7a8b", "2e3f4051-6b7c-4d8e-9fa0-b1c2d3e4f5a6"
	if _, err := f.impBundles(false, bundle(practitioner(prA, "9999994392"), practitioner(prB, "9999994393"))); err != nil {
		t.Fatal(err)
	}
	del := bundle(`{"request":{"method":"DELETE","url":"Practitioner/`+prA+`"}}`, `{"request":{"method":"DELETE","url":"Practitioner/`+prB+`"}}`)
	keep := bundle(practitioner("5b627384-9eaf-40b1-82d3-e4f5a6b7c8d9", "9999994392"), practitioner("6c738495-afb0-41c2-93e4-f5a6b7c8d9ea", "9999994393"))
	for range 5 {
		_, err := f.impBundles(false, keep, del)
		if err == nil {
			t.Fatal("an input keeping and deleting two Practitioners imported")
		}
		msg := err.Error()
		a, b := strings.Index(msg, "bundlea.json:2"), strings.Index(msg, "bundlea.json:3")
		if a < 0 || b < a {
			t.Fatalf("err = %v, want both kept entries named (bundlea.json:2, then bundlea.json:3)", err)
		}
	}
}

// A plain PUT or POST whose request.url is an absolute URL on another
// server than the import's (PUT https://other.example/fhir/Patient/7) is
// refused (fhirin.ErrUnsupported), naming the entry's request.url and the
// host and never the id, and changes nothing: it writes that server's
// Patient/7, not this catalog's. Before, it was imported as this
// catalog's Patient/7. The rule is the conditional searches' (the
// $export manifest's server, or the base of the entry's own RESTful
// fullUrl): on the fullUrl's base it is imported.
func TestImportAbsoluteRequestURLOnAnotherServerRefused(t *testing.T) {
	f := newLinkFixture(t)
	const p7 = "a7a7a7a7-0000-4000-8000-0000000000a7"
	entry := func(fullURL, request string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"` + fullURL + `","resource":{"resourceType":"Patient","id":"` + p7 + `","name":[{"family":"Moss"}]},"request":` + request + `}]}`
	}
	if _, err := f.impBundles(false, entry("urn:uuid:"+p7, `{"method":"PUT","url":"Patient/`+p7+`"}`)); err != nil {
		t.Fatal(err)
	}
	before := f.catalogBytes()
	for _, tc := range []struct{ name, bundle string }{
		{"PUT, urn fullUrl", entry("urn:uuid:"+p7, `{"method":"PUT","url":"https://Other.example/fhir/Patient/`+p7+`"}`)},
		{"PUT, another base than the fullUrl's", entry("https://ehr.example/fhir/Patient/"+p7, `{"method":"PUT","url":"https://other.example/fhir/Patient/`+p7+`"}`)},
		{"POST, urn fullUrl", entry("urn:uuid:"+p7, `{"method":"POST","url":"https://other.example/fhir/Patient"}`)},
		{"POST, another base than the fullUrl's", entry("https://ehr.example/fhir/Patient/"+p7, `{"method":"POST","url":"https://other.example/fhir/Patient?_format=json"}`)},
	} {
		_, err := f.impBundles(false, tc.bundle)
		var fe *fhirin.Error
		if !errors.Is(err, fhirin.ErrUnsupported) || !errors.As(err, &fe) || fe.Path != "Bundle.entry[0].request.url" || !strings.Contains(err.Error(), "other.example") {
			t.Errorf("%s: err = %v, want ErrUnsupported at Bundle.entry[0].request.url naming the host", tc.name, err)
		}
		if err != nil && (strings.Contains(err.Error(), p7) || strings.Contains(err.Error(), "Moss")) {
			t.Errorf("%s: the error quotes the input: %v", tc.name, err)
		}
		if string(before) != string(f.catalogBytes()) {
			t.Fatalf("%s: a refused import changed the catalog file", tc.name)
		}
	}
	// On the base of its own RESTful fullUrl: imported (a new version).
	for i, request := range []string{`{"method":"PUT","url":"HTTPS://ehr.example/fhir/Patient/` + p7 + `"}`, `{"method":"POST","url":"https://ehr.example/fhir/Patient"}`} {
		if _, err := f.impBundles(false, strings.Replace(entry("https://ehr.example/fhir/Patient/"+p7, request), "Moss", "Moss"+string(rune('a'+i)), 1)); err != nil {
			t.Fatalf("%s: %v", request, err)
		}
		if r, _ := f.get("Patient", p7, p7); r.Version != 2+i {
			t.Errorf("%s: version %d, want %d", request, r.Version, 2+i)
		}
	}
}

// A conditional update (or create) whose search finds nothing and whose
// resource's id (its own, or its urn:uuid fullUrl's) is that of a live
// resource of the catalog is refused (R5 http.html#cond-update, "No
// matches, id provided and already exist: The server rejects the update
// with a 409 Conflict error"), naming the entry's query and not the id,
// and changes nothing. Before, the entry overwrote that resource: patient
// B's Observation, which its search did not find, was moved into patient
// A's compartment with A's content. An id of no live resource still
// creates.
func TestImportConditionalNoMatchIDOfALiveResourceRefused(t *testing.T) {
	f := newLinkFixture(t)
	const (
		pa, pb = "a1a1a1a1-0000-4000-8000-000000000001", "b2b2b2b2-0000-4000-8000-000000000002"
		obs    = "c3c3c3c3-0000-4000-8000-000000000003"
	)
	bundle := func(entries ...string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[` + strings.Join(entries, ",\n") + `]}`
	}
	observation := func(fullURL, id, patient, text, request string) string {
		return `{"fullUrl":"` + fullURL + `","resource":{"resourceType":"Observation"` + id + `,"identifier":[{"system":"urn:lab","value":"88"}],"status":"final","code":{"text":"` + text + `"},"subject":{"reference":"Patient/` + patient + `"}},"request":` + request + `}`
	}
	if _, err := f.impBundles(false, bundle(
		`{"fullUrl":"urn:uuid:`+pa+`","resource":{"resourceType":"Patient"},"request":{"method":"PUT","url":"Patient/`+pa+`"}}`,
		`{"fullUrl":"urn:uuid:`+pb+`","resource":{"resourceType":"Patient"},"request":{"method":"PUT","url":"Patient/`+pb+`"}}`,
		strings.Replace(observation("urn:uuid:"+obs, "", pb, "B's", `{"method":"PUT","url":"Observation/`+obs+`"}`), `"value":"88"`, `"value":"77"`, 1))); err != nil {
		t.Fatal(err)
	}
	before := f.catalogBytes()
	const other = "urn:uuid:d4d4d4d4-0000-4000-8000-000000000004"
	for _, tc := range []struct{ name, entry, path string }{
		{"update, body id", observation(other, `,"id":"`+obs+`"`, pa, "A's", `{"method":"PUT","url":"Observation?identifier=urn:lab|88"}`), "Bundle.entry[0].request.url"},
		{"update, urn:uuid id", observation("urn:uuid:"+obs, "", pa, "A's", `{"method":"PUT","url":"Observation?identifier=urn:lab|88"}`), "Bundle.entry[0].request.url"},
		{"update, same patient", observation(other, `,"id":"`+obs+`"`, pb, "A's", `{"method":"PUT","url":"Observation?identifier=urn:lab|88"}`), "Bundle.entry[0].request.url"},
		{"create", observation("urn:uuid:"+obs, "", pa, "A's", `{"method":"POST","url":"Observation","ifNoneExist":"identifier=urn:lab|88"}`), "Bundle.entry[0].request.ifNoneExist"},
	} {
		_, err := f.impBundles(false, bundle(tc.entry))
		var ee *store.EntryError
		if !errors.Is(err, store.ErrBadEntry) || !errors.As(err, &ee) || ee.Path != tc.path || !strings.Contains(err.Error(), "409") {
			t.Errorf("%s: err = %v, want a store.EntryError (409) at %s", tc.name, err, tc.path)
		}
		for _, s := range []string{obs, "88", pa, pb} {
			if err != nil && strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error quotes the input (%s): %v", tc.name, s, err)
			}
		}
		if string(before) != string(f.catalogBytes()) {
			t.Fatalf("%s: a refused import changed the catalog file", tc.name)
		}
	}
	if _, body := f.get("Observation", obs, pb); !strings.Contains(string(body), `"B's"`) {
		t.Errorf("B's Observation changed: %s", body)
	}
	// An id of no live resource: created.
	if _, err := f.impBundles(false, bundle(observation(other, "", pa, "A's", `{"method":"PUT","url":"Observation?identifier=urn:lab|88"}`))); err != nil {
		t.Fatal(err)
	}
	f.get("Observation", "d4d4d4d4-0000-4000-8000-000000000004", pa)
}

// dropSource rewrites the live record of uri in the catalog at f.cat (and
// its version) without a source, as a streaming import from before
// imports recorded their source wrote it (a legacy record).
func (f *linkFixture) dropSource(uri string) {
	f.t.Helper()
	db, err := bolt.Open(f.cat, 0o600, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		res, vers := tx.Bucket([]byte("resources")), tx.Bucket([]byte("versions"))
		var r map[string]any
		if err := json.Unmarshal(res.Get([]byte(uri)), &r); err != nil {
			return err
		}
		if r["source"] == nil {
			return fmt.Errorf("%s has no source to drop", uri)
		}
		delete(r, "source")
		enc, err := json.Marshal(r)
		if err != nil {
			return err
		}
		v, _ := r["version"].(float64)
		key := binary.BigEndian.AppendUint32(append([]byte(uri), 0), uint32(v))
		if vers.Get(key) == nil {
			return fmt.Errorf("%s has no version %v", uri, v)
		}
		if err := vers.Put(key, enc); err != nil {
			return err
		}
		return res.Put([]byte(uri), enc)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// A conditional update or create whose own id is that of a live resource
// without a source (a streaming import's from before sources were
// recorded, which conditional searches do not find) is refused as FHIR's
// 409 Conflict, naming the entry, and the legacy resource stays as it is.
// Before, docs/import.md said such an entry "creates its own resource
// beside it", but it wrote over it at its URI (same id, same URI), taking
// it into the source. The legacy resource's own content is refused too:
// writing it would take it into the source all the same.
func TestImportConditionalDoesNotTakeOverASourcelessResource(t *testing.T) {
	f := newLinkFixture(t)
	const legacy = "12345678-0000-4000-8000-000000000001"
	practitioner := func(family, request string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:` + legacy + `","resource":{"resourceType":"Practitioner","id":"` + legacy + `","identifier":[{"system":"http://hl7.org/fhir/sid/us-npi","value":"9999994392"}],"name":[{"family":"` + family + `"}]},"request":` + request + `}]}`
	}
	if _, err := f.impBundles(false, practitioner("Legacy", `{"method":"PUT","url":"Practitioner/`+legacy+`"}`)); err != nil {
		t.Fatal(err)
	}
	uri := f.namer.Link("Practitioner", legacy, "")
	f.dropSource(uri)
	before := f.catalogBytes()
	for _, request := range []string{
		`{"method":"PUT","url":"Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|9999994392"}`,
		`{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=http://hl7.org/fhir/sid/us-npi|9999994392"}`,
	} {
		_, err := f.impBundles(false, practitioner("Taken", request))
		var ee *store.EntryError
		if !errors.Is(err, store.ErrBadEntry) || !errors.As(err, &ee) || !strings.HasPrefix(ee.Path, "Bundle.entry[0].request.") || !strings.Contains(err.Error(), "409") {
			t.Errorf("%s: err = %v, want a store.EntryError (409) at the entry's query", request, err)
		}
		if string(before) != string(f.catalogBytes()) {
			t.Fatalf("%s: a refused import changed the catalog file", request)
		}
		_, err = f.impBundles(false, practitioner("Legacy", request))
		ee = nil
		if !errors.Is(err, store.ErrBadEntry) || !errors.As(err, &ee) || !strings.HasPrefix(ee.Path, "Bundle.entry[0].request.") || !strings.Contains(err.Error(), "409") {
			t.Errorf("%s: err = %v, want a store.EntryError (409) at the entry's query", request, err)
		}
		if string(before) != string(f.catalogBytes()) {
			t.Fatalf("%s: a refused import changed the catalog file", request)
		}
	}
	r, body := f.get("Practitioner", legacy, "")
	if r.Source != "" || !strings.Contains(string(body), `"Legacy"`) {
		t.Errorf("the legacy Practitioner changed: source %q, %s", r.Source, body)
	}
}

// A conditional create or update of a Binary whose search finds a Binary
// of the catalog is refused as such (fhirin.ErrUnsupported at the entry's
// query, saying a Binary's compartment is set by its linkers), and changes
// nothing. Before, it was refused as a match "in another patient
// compartment than its resource's": a Binary's body places it nowhere, so
// every match was in "another" compartment, which named no real problem.
func TestImportConditionalBinaryMatchRefusedAsSuch(t *testing.T) {
	f := newLinkFixture(t)
	const pat, bin = "a1a1a1a1-0000-4000-8000-0000000000a1", "b1b1b1b1-0000-4000-8000-0000000000b1"
	bundle := func(request string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:` + pat + `","resource":{"resourceType":"Patient","id":"` + pat + `"},"request":{"method":"PUT","url":"Patient/` + pat + `"}},
{"fullUrl":"urn:uuid:` + bin + `","resource":{"resourceType":"Binary","id":"` + bin + `","contentType":"text/plain","data":"aGVsbG8=","securityContext":{"reference":"Patient/` + pat + `"}},"request":` + request + `}]}`
	}
	if _, err := f.impBundles(false, bundle(`{"method":"PUT","url":"Binary/`+bin+`"}`)); err != nil {
		t.Fatal(err)
	}
	before := f.catalogBytes()
	for _, tc := range []struct{ request, path string }{
		{`{"method":"POST","url":"Binary","ifNoneExist":"_id=` + bin + `"}`, "Bundle.entry[1].request.ifNoneExist"},
		{`{"method":"PUT","url":"Binary?_id=` + bin + `"}`, "Bundle.entry[1].request.url"},
	} {
		for _, full := range []bool{false, true} {
			b := bundle(tc.request)
			{
				// Another Binary than the match (its own id is
				// TestImportConditionalBinaryOwnIDReimport's and
				// TestImportConditionalCreateBinaryOwnIDReimport's).
				b = strings.Replace(strings.Replace(b, `"fullUrl":"urn:uuid:`+bin, `"fullUrl":"urn:uuid:c1c1c1c1-0000-4000-8000-0000000000c1`, 1), `"id":"`+bin+`",`, ``, 1)
			}
			_, err := f.impBundles(full, b)
			var fe *fhirin.Error
			if !errors.Is(err, fhirin.ErrUnsupported) || !errors.As(err, &fe) || fe.Path != tc.path || !strings.Contains(err.Error(), "of a Binary") || strings.Contains(err.Error(), bin) {
				t.Errorf("%s (full %v): err = %v, want ErrUnsupported at %s saying it is a Binary's match, naming no id", tc.request, full, err, tc.path)
			}
			if string(before) != string(f.catalogBytes()) {
				t.Fatalf("%s: a refused import changed the catalog file", tc.request)
			}
		}
	}
}

// A later Bundle of one import searches what the Bundles before it wrote
// with plain entries too, as a FHIR server handling them in turn would: a
// conditional create by identifier (or _id) finds the Practitioner an
// earlier Bundle's plain POST created, and keeps it (one Practitioner, not
// two); and a conditional update by an identifier that an earlier Bundle
// removed from the catalog's Patient (PUT Patient/id without it) no
// longer finds that Patient through the catalog as it was before the
// import: it creates its own. Before, only conditional entries were
// remembered: the import created two Practitioners, and the update
// matched the Patient by its dropped identifier (refused as two contents
// of one resource).
func TestImportConditionalFindsPlainWritesOfEarlierBundles(t *testing.T) {
	const npi = "http://hl7.org/fhir/sid/us-npi"
	bundle := func(entries ...string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[` + strings.Join(entries, ",\n") + `]}`
	}
	practitioner := func(uuid, request string) string {
		return `{"fullUrl":"urn:uuid:` + uuid + `","resource":{"resourceType":"Practitioner","identifier":[{"system":"` + npi + `","value":"9999994392"}],"name":[{"family":"Moss"}]},"request":` + request + `}`
	}
	const pr1, pr2 = "4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7a8b", "2e3f4051-6b7c-4d8e-9fa0-b1c2d3e4f5a6"
	for _, ifNoneExist := range []string{"identifier=" + npi + "|9999994392", "_id=" + pr1} {
		f := newLinkFixture(t)
		if _, err := f.impBundles(false, bundle(practitioner(pr1, `{"method":"POST","url":"Practitioner"}`)),
			bundle(practitioner(pr2, `{"method":"POST","url":"Practitioner","ifNoneExist":"`+ifNoneExist+`"}`))); err != nil {
			t.Fatalf("%s: %v", ifNoneExist, err)
		}
		got := f.liveVersions()
		if _, ok := got[f.namer.Link("Practitioner", pr1, "")]; !ok || len(got) != 1 {
			t.Errorf("%s: live %v, want the one Practitioner of the plain POST", ifNoneExist, got)
		}
	}

	const mrn = "http://hospital.example.org/identifiers/mrn"
	const p1, p2 = "9f6b3b56-0d4e-4c0e-8f7a-3a2b1c0d9e8f", "1d2e3f40-5a6b-4c7d-8e9f-a0b1c2d3e4f5"
	patient := func(uuid, value, family, request string) string {
		return `{"fullUrl":"urn:uuid:` + uuid + `","resource":{"resourceType":"Patient","identifier":[{"system":"` + mrn + `","value":"` + value + `"}],"name":[{"family":"` + family + `"}]},"request":` + request + `}`
	}
	f := newLinkFixture(t)
	if _, err := f.impBundles(false, bundle(patient(p1, "12345", "Marsh", `{"method":"PUT","url":"Patient/`+p1+`"}`))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.impBundles(false, bundle(patient(p1, "67890", "Marsh", `{"method":"PUT","url":"Patient/`+p1+`"}`)),
		bundle(patient(p2, "12345", "Moss", `{"method":"PUT","url":"Patient?identifier=`+mrn+`|12345"}`))); err != nil {
		t.Fatal(err)
	}
	if _, body := f.get("Patient", p1, p1); !strings.Contains(string(body), `"67890"`) || !strings.Contains(string(body), `"Marsh"`) {
		t.Errorf("the Patient the first Bundle wrote: %s", body)
	}
	if _, body := f.get("Patient", p2, p2); !strings.Contains(string(body), `"12345"`) {
		t.Errorf("the Patient the conditional update created: %s", body)
	}
}

// A Bundle whose conditional update or create matches nothing in the
// catalog (its resource lacks the identifier searched) imports again
// unchanged, as does the same Bundle twice in one import: the resource
// its first import created under the entry's id is this same content,
// which the entry does not overwrite (store.Entry.NoOverwrite). Other
// content under that id is still FHIR's 409, and changes nothing.
// Before, fhirin refused every such entry whose id was live, so the
// second import of the same Bundle failed (409).
func TestImportConditionalNoMatchReimportUnchanged(t *testing.T) {
	const p3, pr3, o3 = "0a1b2c3d-0000-4000-8000-000000000031", "0a1b2c3d-0000-4000-8000-000000000032", "0a1b2c3d-0000-4000-8000-000000000033"
	bundle := func(family string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:` + p3 + `","resource":{"resourceType":"Patient","name":[{"family":"` + family + `"}]},
 "request":{"method":"PUT","url":"Patient?identifier=urn:oid:1.2.3|M3"}},
{"fullUrl":"urn:uuid:` + pr3 + `","resource":{"resourceType":"Practitioner","name":[{"family":"Moss"}]},
 "request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=http://hl7.org/fhir/sid/us-npi|9999994392"}},
{"fullUrl":"urn:uuid:` + o3 + `","resource":{"resourceType":"Observation","id":"` + o3 + `","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:` + p3 + `"}},
 "request":{"method":"PUT","url":"Observation?identifier=urn:lab|88"}}]}`
	}
	f := newLinkFixture(t)
	if _, err := f.impBundles(false, bundle("Poe")); err != nil {
		t.Fatal(err)
	}
	first := f.liveVersions()
	if len(first) != 3 {
		t.Fatalf("live after the first import: %v", first)
	}
	for _, bundles := range [][]string{{bundle("Poe")}, {bundle("Poe"), bundle("Poe")}} {
		rep, err := f.impBundles(false, bundles...)
		if err != nil {
			t.Fatalf("%d Bundles again: %v", len(bundles), err)
		}
		if rep.Created != 0 || rep.Updated != 0 || !maps.Equal(first, f.liveVersions()) {
			t.Errorf("%d Bundles again: created %d, updated %d, live %v; want the first import's unchanged", len(bundles), rep.Created, rep.Updated, f.liveVersions())
		}
	}
	before := f.catalogBytes()
	_, err := f.impBundles(false, bundle("Roe"))
	var ee *store.EntryError
	if !errors.As(err, &ee) || ee.Path != "Bundle.entry[0].request.url" || !strings.Contains(err.Error(), "409") || strings.Contains(err.Error(), p3) {
		t.Errorf("other content: err = %v, want a store.EntryError (409) at Bundle.entry[0].request.url, naming no id", err)
	}
	if string(before) != string(f.catalogBytes()) {
		t.Fatal("a refused import changed the catalog file")
	}
}

// A conditional create that matched nothing whose id is a live
// DocumentReference of the same body but another inline attachment is
// refused (FHIR 409) and changes nothing: the attachment lifted out of it
// is its content too. Before, the lifted attachment was an item of its
// own without NoOverwrite, the carrier's body (the attachment replaced by
// its link) was the same, and the import replaced the note of a
// DocumentReference its search did not find. The same note again is
// unchanged.
func TestImportConditionalNoMatchLiftedAttachmentRefused(t *testing.T) {
	const p, d = "0a1b2c3d-0000-4000-8000-000000000091", "0a1b2c3d-0000-4000-8000-000000000092"
	bundle := func(note string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:` + p + `","resource":{"resourceType":"Patient","id":"` + p + `"},"request":{"method":"PUT","url":"Patient/` + p + `"}},
{"fullUrl":"urn:uuid:` + d + `","resource":{"resourceType":"DocumentReference","id":"` + d + `","status":"current","subject":{"reference":"urn:uuid:` + p + `"},
 "content":[{"attachment":{"contentType":"text/plain","data":"` + base64.StdEncoding.EncodeToString([]byte(note)) + `"}}]},
 "request":{"method":"POST","url":"DocumentReference","ifNoneExist":"identifier=urn:doc|d9"}}]}`
	}
	f := newLinkFixture(t)
	if _, err := f.impBundles(false, bundle("note one")); err != nil {
		t.Fatal(err)
	}
	first := f.liveVersions()
	if rep, err := f.impBundles(false, bundle("note one")); err != nil || rep.Created != 0 || rep.Updated != 0 || !maps.Equal(first, f.liveVersions()) {
		t.Fatalf("the same again: %+v, %v; want it unchanged", rep, err)
	}
	before := f.catalogBytes()
	for _, full := range []bool{false, true} {
		_, err := f.impBundles(full, bundle("note two"))
		var ee *store.EntryError
		if !errors.As(err, &ee) || ee.Path != "Bundle.entry[1].request.ifNoneExist" || !strings.Contains(err.Error(), "409") || strings.Contains(err.Error(), d) || strings.Contains(err.Error(), "note") {
			t.Errorf("full %v, another note: err = %v, want a store.EntryError (409) at Bundle.entry[1].request.ifNoneExist, naming no id", full, err)
		}
		if string(before) != string(f.catalogBytes()) {
			t.Fatalf("full %v: a refused import changed the catalog file", full)
		}
	}
}

// A conditional search of a type whose identifier R4 holds as one
// Identifier, not a list (QuestionnaireResponse, Composition), finds a
// catalog resource carrying it: the conditional create keeps it. Before,
// matchResources read identifier as a list only and failed the import,
// calling the catalog corrupt ("a live QuestionnaireResponse's body does
// not name its URI").
func TestImportConditionalSingleIdentifierType(t *testing.T) {
	const p, q1, q2 = "0a1b2c3d-0000-4000-8000-000000000071", "0a1b2c3d-0000-4000-8000-000000000072", "0a1b2c3d-0000-4000-8000-000000000073"
	qr := func(uuid, request string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:` + p + `","resource":{"resourceType":"Patient","name":[{"family":"Q"}]},"request":{"method":"PUT","url":"Patient/` + p + `"}},
{"fullUrl":"urn:uuid:` + uuid + `","resource":{"resourceType":"QuestionnaireResponse","identifier":{"system":"urn:qr","value":"Q1"},"status":"completed","subject":{"reference":"urn:uuid:` + p + `"}},"request":` + request + `}]}`
	}
	f := newLinkFixture(t)
	if _, err := f.impBundles(false, qr(q1, `{"method":"POST","url":"QuestionnaireResponse"}`)); err != nil {
		t.Fatal(err)
	}
	first := f.liveVersions()
	if _, err := f.impBundles(false, qr(q2, `{"method":"POST","url":"QuestionnaireResponse","ifNoneExist":"identifier=urn:qr|Q1"}`)); err != nil {
		t.Fatal(err)
	}
	if got := f.liveVersions(); !maps.Equal(first, got) {
		t.Errorf("live %v, want the first import's QuestionnaireResponse kept as it was: %v", got, first)
	}
}

// Within one import, a later Bundle's conditional create of a type whose
// identifier R4 holds as one Identifier (QuestionnaireResponse) finds the
// resource an earlier Bundle wrote with it, as the catalog search does:
// one QuestionnaireResponse, and the same Bundles import again unchanged.
// Before, fhirin read identifier as a list only, so the second Bundle
// created a second QuestionnaireResponse with the identifier, and every
// later import of the same Bundles was refused: its search found both in
// the catalog (FHIR 412).
func TestImportConditionalSingleIdentifierTypeInOneImport(t *testing.T) {
	const p, q1, q2 = "0a1b2c3d-0000-4000-8000-000000000081", "0a1b2c3d-0000-4000-8000-000000000082", "0a1b2c3d-0000-4000-8000-000000000083"
	qr := func(uuid string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:` + p + `","resource":{"resourceType":"Patient","name":[{"family":"Q"}]},"request":{"method":"PUT","url":"Patient/` + p + `"}},
{"fullUrl":"urn:uuid:` + uuid + `","resource":{"resourceType":"QuestionnaireResponse","identifier":{"system":"urn:qr","value":"Q1"},"status":"completed","subject":{"reference":"urn:uuid:` + p + `"}},"request":{"method":"POST","url":"QuestionnaireResponse","ifNoneExist":"identifier=urn:qr|Q1"}}]}`
	}
	f := newLinkFixture(t)
	if _, err := f.impBundles(false, qr(q1), qr(q2)); err != nil {
		t.Fatal(err)
	}
	first := f.liveVersions()
	n := 0
	for _, v := range first {
		if strings.HasPrefix(v, "questionnaireresponse ") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d QuestionnaireResponses live, want the first Bundle's one: %v", n, first)
	}
	rep, err := f.impBundles(false, qr(q1), qr(q2))
	if err != nil {
		t.Fatalf("again: %v", err)
	}
	if rep.Created != 0 || rep.Updated != 0 || !maps.Equal(first, f.liveVersions()) {
		t.Errorf("again: created %d, updated %d; want the first import unchanged", rep.Created, rep.Updated)
	}
}

// A conditional update of a Binary (PUT Binary?_id=x) whose one match is
// the Binary of its own id imports as PUT Binary/x would, so the same
// Bundle imports again unchanged. Before, every conditional Binary entry
// that found a Binary was refused (ErrUnsupported), and such a Bundle
// imported once and never again.
func TestImportConditionalBinaryOwnIDReimport(t *testing.T) {
	f := newLinkFixture(t)
	const pat, doc, bin = "a1a1a1a1-0000-4000-8000-0000000000a1", "d1d1d1d1-0000-4000-8000-0000000000d1", "b1b1b1b1-0000-4000-8000-0000000000b1"
	bundle := `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:` + pat + `","resource":{"resourceType":"Patient","id":"` + pat + `"},"request":{"method":"PUT","url":"Patient/` + pat + `"}},
{"fullUrl":"urn:uuid:` + doc + `","resource":{"resourceType":"DocumentReference","id":"` + doc + `","status":"current","subject":{"reference":"Patient/` + pat + `"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/` + bin + `"}}]},"request":{"method":"PUT","url":"DocumentReference/` + doc + `"}},
{"fullUrl":"urn:uuid:` + bin + `","resource":{"resourceType":"Binary","id":"` + bin + `","contentType":"text/plain","data":"aGVsbG8="},"request":{"method":"PUT","url":"Binary?_id=` + bin + `"}}]}`
	if _, err := f.impBundles(false, bundle); err != nil {
		t.Fatal(err)
	}
	first := f.liveVersions()
	rep, err := f.impBundles(false, bundle)
	if err != nil {
		t.Fatalf("again: %v", err)
	}
	if rep.Created != 0 || rep.Updated != 0 || !maps.Equal(first, f.liveVersions()) {
		t.Errorf("again: created %d, updated %d; want the first import unchanged", rep.Created, rep.Updated)
	}
}

// A directory mixing a Bulk export (Practitioner.ndjson) or a resource
// file with a transaction Bundle whose conditional create searches the
// identifier of a resource that file holds imports once with that one
// resource (the Bundle's entry is Kept), and again unchanged, writing
// nothing. Before, resources outside a Bundle were not remembered within
// an import: the first import created a second Practitioner, and every
// later import was refused (FHIR 412: the search found two).
func TestImportConditionalFindsNDJSONOfTheImport(t *testing.T) {
	const npi = "http://hl7.org/fhir/sid/us-npi"
	const pr1, pr2 = "5c6d7e8f-0000-4000-8000-0000000000b1", "5c6d7e8f-0000-4000-8000-0000000000b2"
	practitioner := `{"resourceType":"Practitioner","id":"` + pr1 + `","identifier":[{"system":"` + npi + `","value":"9999994392"}],"name":[{"family":"Moss"}]}`
	bundle := `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:` + pr2 + `","resource":{"resourceType":"Practitioner","identifier":[{"system":"` + npi + `","value":"9999994392"}],"name":[{"family":"Moss"}]},
 "request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=` + npi + `|9999994392"}}]}`
	for _, file := range []string{"Practitioner.ndjson", "practitioner.json"} {
		f := newLinkFixture(t)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, file), []byte(practitioner+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "z-bundle.json"), []byte(bundle), 0o644); err != nil {
			t.Fatal(err)
		}
		imp := func() (FHIRReport, error) {
			return ImportFHIR(context.Background(), f.cat, dir, FHIRImport{Tenant: f.tenant, IDKey: f.key})
		}
		if _, err := imp(); err != nil {
			t.Fatalf("%s: first import: %v", file, err)
		}
		first := f.liveVersions()
		if _, ok := first[f.namer.Link("Practitioner", pr1, "")]; !ok || len(first) != 1 {
			t.Errorf("%s: live %v, want the one Practitioner of the file", file, first)
		}
		rep, err := imp()
		if err != nil {
			t.Fatalf("%s: second import: %v", file, err)
		}
		if rep.Created != 0 || rep.Updated != 0 || rep.Retired != 0 || rep.Unchanged != 1 || !maps.Equal(first, f.liveVersions()) {
			t.Errorf("%s: second import %+v, live %v; want the one Practitioner unchanged", file, rep, f.liveVersions())
		}
	}
}

// The result of a directory import does not depend on its files' names:
// the same NDJSON file, resource file and transaction Bundle (its
// conditional creates search the Practitioner of the NDJSON file and the
// Organization of the resource file) import the same catalog whether the
// Bundle's name sorts before them or after, with one Practitioner and
// one Organization (the Bundle's entries kept), and again unchanged.
// Before, a Bundle read before the file its search should find was refused
// ("rename the files ..., or import it first").
func TestImportConditionalIndependentOfFileNames(t *testing.T) {
	const npi = "http://hl7.org/fhir/sid/us-npi"
	const pr1, pr2 = "5c6d7e8f-0000-4000-8000-0000000000c1", "5c6d7e8f-0000-4000-8000-0000000000c2"
	const org1, org2 = "5c6d7e8f-0000-4000-8000-0000000000e1", "5c6d7e8f-0000-4000-8000-0000000000e2"
	practitioner := `{"resourceType":"Practitioner","id":"` + pr1 + `","identifier":[{"system":"` + npi + `","value":"9999994392"}]}` + "\n"
	organization := `{"resourceType":"Organization","id":"` + org1 + `","identifier":[{"system":"urn:org","value":"77"}],"name":"Ward 7"}`
	bundle := `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:` + pr2 + `","resource":{"resourceType":"Practitioner","identifier":[{"system":"` + npi + `","value":"9999994392"}]},
 "request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=` + npi + `|9999994392"}},
{"fullUrl":"urn:uuid:` + org2 + `","resource":{"resourceType":"Organization","identifier":[{"system":"urn:org","value":"77"}],"name":"Ward 7"},
 "request":{"method":"POST","url":"Organization","ifNoneExist":"identifier=urn:org|77"}}]}`
	var catalogs []map[string]string
	var contents []map[string]string
	for _, names := range [][3]string{
		{"Practitioner.ndjson", "org.json", "z-bundle.json"}, // the Bundle last
		{"Practitioner.ndjson", "org.json", "A-bundle.json"}, // the Bundle first
		{"Practitioner.ndjson", "zz-org.json", "m-bundle.json"},
	} {
		f := newLinkFixture(t)
		imp := f.dirImport(map[string]string{names[0]: practitioner, names[1]: organization, names[2]: bundle})
		if _, err := imp(); err != nil {
			t.Fatalf("%v: %v", names, err)
		}
		live := f.liveVersions()
		_, okP := live[f.namer.Link("Practitioner", pr1, "")]
		_, okO := live[f.namer.Link("Organization", org1, "")]
		if !okP || !okO || len(live) != 2 {
			t.Errorf("%v: live %v, want the Practitioner and the Organization of the files alone", names, live)
		}
		catalogs = append(catalogs, live)
		contents = append(contents, f.catalogContent())
		rep, err := imp()
		if err != nil {
			t.Fatalf("%v: again: %v", names, err)
		}
		if rep.Created != 0 || rep.Updated != 0 || rep.Retired != 0 || rep.Unchanged != 2 || !maps.Equal(live, f.liveVersions()) {
			t.Errorf("%v: again: %+v; want everything unchanged", names, rep)
		}
	}
	for i := 1; i < len(catalogs); i++ {
		if !maps.Equal(catalogs[0], catalogs[i]) {
			t.Errorf("naming %d: catalog %v, naming 0: %v", i, catalogs[i], catalogs[0])
		}
		if !maps.Equal(contents[0], contents[i]) {
			t.Errorf("naming %d: the catalog's buckets differ from naming 0's", i)
		}
	}
}

// dirImport writes the files (name: content) into a directory and
// returns an import of it into f's catalog, to run as often as needed.
func (f *linkFixture) dirImport(files map[string]string) func() (FHIRReport, error) {
	f.t.Helper()
	dir := f.t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	return func() (FHIRReport, error) {
		return ImportFHIR(context.Background(), f.cat, dir, FHIRImport{Tenant: f.tenant, IDKey: f.key})
	}
}

// catalogContent is every key and value of every bucket of the catalog
// file, by bucket path and key: the same data byte for byte, whatever the
// pages bbolt laid it out in (which depend on the commits' timing).
func (f *linkFixture) catalogContent() map[string]string {
	f.t.Helper()
	db, err := bolt.Open(f.cat, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	var walk func(path string, b *bolt.Bucket) error
	walk = func(path string, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(path+"/"+string(k), b.Bucket(k))
			}
			out[path+"\x00"+string(k)] = string(v)
			return nil
		})
	}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	}); err != nil {
		f.t.Fatal(err)
	}
	if len(out) == 0 {
		f.t.Fatal("an empty catalog")
	}
	return out
}

// A POST to this server's type-level URL written with a trailing slash
// ([base]/Patient/) creates on this server, as [base]/Patient does, and so
// does a conditional create posted there (its search on that base); a
// trailing slash on another server's URL is still another server's.
// Before, the base was taken as everything before the last slash
// ([base]/Patient), another server's, and the entry refused.
func TestImportPostTypeURLTrailingSlash(t *testing.T) {
	f := newLinkFixture(t)
	const p7 = "a7a7a7a7-0000-4000-8000-0000000000b7"
	entry := func(request string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"https://ehr.example/fhir/Patient/` + p7 + `","resource":{"resourceType":"Patient","id":"` + p7 + `","identifier":[{"system":"urn:mrn","value":"7"}],"name":[{"family":"Moss"}]},"request":` + request + `}]}`
	}
	for i, request := range []string{
		`{"method":"POST","url":"https://ehr.example/fhir/Patient/"}`,
		`{"method":"POST","url":"https://EHR.example/fhir/Patient/?_format=json"}`,
		`{"method":"POST","url":"https://ehr.example/fhir/Patient/","ifNoneExist":"identifier=urn:mrn|7"}`,
		`{"method":"POST","url":"Patient","ifNoneExist":"https://ehr.example/fhir/Patient/?identifier=urn:mrn|7"}`,
	} {
		if _, err := f.impBundles(false, strings.Replace(entry(request), "Moss", "Moss"+string(rune('a'+i)), 1)); err != nil {
			t.Errorf("%s: %v", request, err)
		}
	}
	if _, err := f.impBundles(false, entry(`{"method":"POST","url":"https://other.example/fhir/Patient/"}`)); !errors.Is(err, fhirin.ErrUnsupported) || !strings.Contains(fmt.Sprint(err), "other.example") {
		t.Errorf("another server's Patient/: err = %v, want ErrUnsupported naming its host", err)
	}
}

// A conditional create of a Binary whose search finds the Binary of its
// own id (POST Binary with ifNoneExist _id=x, Binary x: what its first
// import created) imports again unchanged, writing nothing; other content
// under that id is FHIR's 409, as
// for a conditional entry that matched nothing. Before, the second import
// was refused ("a conditional update or create of a Binary that finds a
// Binary"): such a Bundle imported once and never again.
func TestImportConditionalCreateBinaryOwnIDReimport(t *testing.T) {
	f := newLinkFixture(t)
	const pat, doc, bin = "a1a1a1a1-0000-4000-8000-0000000000a2", "d1d1d1d1-0000-4000-8000-0000000000d2", "b1b1b1b1-0000-4000-8000-0000000000b2"
	bundle := func(data string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:` + pat + `","resource":{"resourceType":"Patient","id":"` + pat + `"},"request":{"method":"PUT","url":"Patient/` + pat + `"}},
{"fullUrl":"urn:uuid:` + doc + `","resource":{"resourceType":"DocumentReference","id":"` + doc + `","status":"current","subject":{"reference":"Patient/` + pat + `"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/` + bin + `"}}]},"request":{"method":"PUT","url":"DocumentReference/` + doc + `"}},
{"fullUrl":"urn:uuid:` + bin + `","resource":{"resourceType":"Binary","contentType":"text/plain","data":"` + data + `"},"request":{"method":"POST","url":"Binary","ifNoneExist":"_id=` + bin + `"}}]}`
	}
	if _, err := f.impBundles(false, bundle("aGVsbG8=")); err != nil {
		t.Fatal(err)
	}
	first := f.liveVersions()
	if len(first) != 3 {
		t.Fatalf("live %v, want the Patient, the DocumentReference and the Binary", first)
	}
	rep, err := f.impBundles(false, bundle("aGVsbG8="))
	if err != nil {
		t.Fatalf("again: %v", err)
	}
	if rep.Created != 0 || rep.Updated != 0 || rep.Unchanged != 3 || !maps.Equal(first, f.liveVersions()) {
		t.Errorf("again: %+v; want the first import unchanged", rep)
	}
	before := f.catalogBytes()
	if _, err := f.impBundles(false, bundle("b3RoZXI=")); !errors.Is(err, store.ErrBadEntry) || strings.Contains(err.Error(), bin) {
		t.Errorf("other content: err = %v, want store.ErrBadEntry (409) not naming the id", err)
	}
	if string(before) != string(f.catalogBytes()) {
		t.Fatal("a refused import changed the catalog file")
	}
}

// A resource of an NDJSON file that writes again, without the identifier
// searched, the catalog's resource a Bundle's conditional create would
// find by it takes that resource out of the search, as an earlier
// Bundle's write does: the create makes its own (two Practitioners, each
// once), and the same files again change nothing. The import remembers
// only the resources outside Bundles that its searches find, or whose id
// is one they find in the catalog (this one): without the latter the
// create kept the catalog's Practitioner that the NDJSON line rewrote.
func TestImportConditionalCatalogMatchRewrittenByNDJSON(t *testing.T) {
	const npi = "http://hl7.org/fhir/sid/us-npi"
	const pr1, pr2 = "5c6d7e8f-0000-4000-8000-0000000000f1", "5c6d7e8f-0000-4000-8000-0000000000f2"
	f := newLinkFixture(t)
	f.mustImp(false, map[string][]string{"Practitioner": {`{"resourceType":"Practitioner","id":"` + pr1 + `","identifier":[{"system":"` + npi + `","value":"9999994392"}]}`}})
	imp := f.dirImport(map[string]string{
		"Practitioner.ndjson": `{"resourceType":"Practitioner","id":"` + pr1 + `","name":[{"family":"Moss"}]}` + "\n",
		"A-bundle.json": `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:` + pr2 + `","resource":{"resourceType":"Practitioner","identifier":[{"system":"` + npi + `","value":"9999994392"}]},
 "request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=` + npi + `|9999994392"}}]}`,
	})
	if _, err := imp(); err != nil {
		t.Fatal(err)
	}
	live := f.liveVersions()
	if _, ok := live[f.namer.Link("Practitioner", pr2, "")]; !ok || len(live) != 2 {
		t.Errorf("live %v, want the NDJSON file's Practitioner and the Bundle's", live)
	}
	if _, body := f.get("Practitioner", pr1, ""); strings.Contains(string(body), "9999994392") {
		t.Errorf("the NDJSON file's Practitioner is %s, want it without the NPI", body)
	}
}

// An ifNoneExist is, in R4, the query alone ("This is just the query
// portion of the URL - what follows the ?", Bundle.entry.request.
// ifNoneExist); the forms servers also write, the entry's type-level URL
// before it (Type?query, Type/?query, /Type?query, [base]/Type/?query),
// are the same search and are resolved: the second create finds the first's Patient.
// So is the query after a "?" alone (?query, which HAPI FHIR takes as the
// query); until a later change on 2026-12-06 it was refused as "a path
// before the search's ?", where there is none.
// Before, the relative Patient/?query was read as a query whose parameter
// was named "Patient/?identifier", and refused. A path before the "?"
// that is not the entry's type-level URL is refused as such.
func TestImportIfNoneExistRelativeTypeLevel(t *testing.T) {
	const p1, p2 = "a7a7a7a7-0000-4000-8000-0000000000c1", "a7a7a7a7-0000-4000-8000-0000000000c2"
	entry := func(id, ifNoneExist string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:` + id + `","resource":{"resourceType":"Patient","identifier":[{"system":"urn:mrn","value":"7"}],"name":[{"family":"Moss"}]},"request":{"method":"POST","url":"Patient","ifNoneExist":"` + ifNoneExist + `"}}]}`
	}
	for _, q := range []string{"identifier=urn:mrn|7", "?identifier=urn:mrn|7", "Patient?identifier=urn:mrn|7", "Patient/?identifier=urn:mrn|7", "/Patient?identifier=urn:mrn|7"} {
		f := newLinkFixture(t)
		if _, err := f.impBundles(false, entry(p1, q)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rep, err := f.impBundles(false, entry(p2, q))
		if err != nil {
			t.Fatalf("%s, a second uuid: %v", q, err)
		}
		if live := f.liveVersions(); len(live) != 1 || rep.Created != 0 {
			t.Errorf("%s: %+v, live %v; want the create to find the first Patient", q, rep, live)
		}
	}
	for q, want := range map[string]string{
		"Observation?identifier=urn:mrn|7":  "another type",
		"Observation/?identifier=urn:mrn|7": "another type",
		"fhir/Patient?identifier=urn:mrn|7": "the query alone",
		"Patient/7?identifier=urn:mrn|7":    "the query alone",
	} {
		f := newLinkFixture(t)
		_, err := f.impBundles(false, entry(p1, q))
		if !errors.Is(err, fhirin.ErrValue) || !strings.Contains(fmt.Sprint(err), want) || !strings.Contains(fmt.Sprint(err), "request.ifNoneExist") || strings.Contains(fmt.Sprint(err), "urn:mrn") {
			t.Errorf("%s: err = %v, want ErrValue at request.ifNoneExist saying %q, not the query", q, err, want)
		}
		if _, err := os.Stat(f.cat); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a refused import wrote the catalog (%v)", q, err)
		}
	}
}

// One transaction Bundle given twice in an import (two files, as a
// re-sent hand-off holds it), holding HL7's R4 examples Binary/example and
// DocumentReference/example (fhirin/testdata/outside/hl7-r4-binary, CC0):
// the second copy's Binary is the same Binary, imported once (Repeated),
// like a re-import, and the import is unchanged when run again. Before,
// the first pass refused the second copy as "a second Binary with the
// same id". A Binary of other bytes, or other labels, under the same id in
// the second Bundle is refused, naming both places and not the id;
// nothing is written.
func TestImportBundleTwiceWithABinary(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "fhirin", "testdata", "outside", "hl7-r4-binary", name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	bin, doc := read("Binary.ndjson"), read("DocumentReference.ndjson")
	bundle := func(bin string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:d1d1d1d1-0000-4000-8000-0000000000d3","resource":` + doc + `,"request":{"method":"PUT","url":"DocumentReference/example"}},
{"fullUrl":"urn:uuid:b1b1b1b1-0000-4000-8000-0000000000b3","resource":` + bin + `,"request":{"method":"PUT","url":"Binary/example"}}]}`
	}
	f := newLinkFixture(t)
	rep, err := f.impBundles(false, bundle(bin), bundle(bin))
	if err != nil {
		t.Fatalf("the Bundle twice: %v", err)
	}
	live := f.liveVersions()
	if len(live) != 2 || rep.Created != 2 || rep.Repeated != 2 {
		t.Fatalf("the Bundle twice: %+v, live %v; want the Binary and the DocumentReference once each, each repeated once", rep, live)
	}
	if rep, err := f.impBundles(false, bundle(bin), bundle(bin)); err != nil || rep.Unchanged != 2 || !maps.Equal(live, f.liveVersions()) {
		t.Fatalf("again: %+v %v; want it unchanged", rep, err)
	}
	for what, other := range map[string]string{
		"other bytes":  strings.Replace(bin, `"data":"JVBERi0x`, `"data":"JVBERi0y`, 1),
		"other labels": strings.Replace(bin, `"contentType"`, `"meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV"}]},"contentType"`, 1),
	} {
		if other == bin {
			t.Fatalf("%s: the example changed", what)
		}
		f := newLinkFixture(t)
		_, err := f.impBundles(false, bundle(bin), bundle(other))
		msg := fmt.Sprint(err)
		if err == nil || !strings.Contains(msg, "bundleb.json:3") || !strings.Contains(msg, "bundlea.json:3") || strings.Contains(msg, "example") {
			t.Errorf("%s under the same id: err = %v, want one naming both places, not the id", what, err)
		}
		if _, err := os.Stat(f.cat); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a refused import wrote the catalog (%v)", what, err)
		}
	}
}
