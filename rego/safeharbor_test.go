package rego_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/minimize/safeharbortest"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/rego"
	"github.com/custos-mcp/custos/store/synth"
)

// fhirTypes are the synthetic FHIR resource types (the payers'
// Organizations, reference data, since h-views); the Safe Harbor profile
// must release every one of them, de-identified.
var fhirTypes = []string{"patient", "observation", "condition", "medicationrequest", "encounter", "coverage", "organization"}

// manifestLine is the part of a synth manifest line the test needs.
type manifestLine struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType"`
	File     string `json:"file"`
	Labels   struct {
		Tenant      string   `json:"tenant"`
		Patient     string   `json:"patient"`
		Type        string   `json:"type"`
		Sensitivity []string `json:"sensitivity"`
		Consent     []string `json:"consent"`
	} `json:"labels"`
}

// dataset is a generated synthetic data set and a scanner primed with every
// identifying string in it.
type dataset struct {
	dir     string
	lines   []manifestLine
	scanner *safeharbortest.Scanner
}

// newDataset generates 20 patients (every edge case: aged 92, a restricted
// ZIP3, VIP, opted out, HIV, SUD) and collects their identifiers: those
// synth.Identifiers reports, plus every resource id, reference, reference
// display (patient and clinician names, the facility) and identifier value
// (encounter numbers, member ids, group numbers) found in the FHIR files.
func newDataset(t testing.TB) *dataset {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "synth")
	if _, err := synth.Generate(context.Background(), dir, synth.Options{Patients: 20}); err != nil {
		t.Fatal(err)
	}
	d := &dataset{dir: dir, scanner: safeharbortest.NewScanner(synth.DefaultNow.Year())}
	f, err := os.Open(filepath.Join(dir, synth.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l manifestLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		d.lines = append(d.lines, l)
		d.scanner.Add(safeharbortest.ClassOtherUnique, l.Labels.Patient)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, l := range d.lines {
		if l.MimeType != "application/fhir+json" {
			continue
		}
		var v any
		if err := json.Unmarshal(d.payload(t, l), &v); err != nil {
			t.Fatal(err)
		}
		d.scanner.Collect(v)
	}
	ids, err := synth.Identifiers(dir)
	if err != nil {
		t.Fatal(err)
	}
	// synth.Identifiers does not say which class a string is; those the
	// files did not classify above are the names.
	d.scanner.Add(safeharbortest.ClassNames, ids...)
	return d
}

func (d *dataset) payload(t testing.TB, l manifestLine) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, l.File))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// researcher may read every sensitive category, so that the scan covers the
// HIV and SUD resources too.
var safeHarborResearcher = policy.Principal{
	Sub: "rita.research", Roles: []string{"researcher", "sensitive:hiv", "sensitive:sud"},
	ClientID: "study-assistant", Tenant: synth.DefaultTenant,
}

// scanResult is what deidentifyAll saw.
type scanResult struct {
	findings map[string][]string // class -> "uri at pointer"
	released map[string]int      // type -> resources released
	denied   map[string]int      // type -> resources denied
	wrong    []string            // resources allowed that should be denied, or the reverse
}

// researchReadable reports whether the Safe Harbor profile releases l: every
// FHIR resource except those of a patient who opted out.
func researchReadable(l manifestLine) bool {
	return slices.Contains(fhirTypes, l.Labels.Type) && !slices.Contains(l.Labels.Consent, "opt-out")
}

// deidentifyAll decides an HRESCH read of every resource of the data set
// with engine e, applies the obligations of each allowed decision with
// minimize.Apply exactly as the server does, and scans the output.
func deidentifyAll(t *testing.T, e *policy.Engine, d *dataset) scanResult {
	t.Helper()
	ctx := context.Background()
	subj := policy.NewSubject(safeHarborResearcher)
	res := scanResult{findings: map[string][]string{}, released: map[string]int{}, denied: map[string]int{}}
	for _, l := range d.lines {
		dec, err := e.Decide(ctx, policy.Input{Subject: subj, PurposeOfUse: "HRESCH", Action: policy.ActionRead,
			Resource: &policy.Resource{URI: l.URI, Type: l.Labels.Type, Patient: l.Labels.Patient, Tenant: l.Labels.Tenant,
				Sensitivity: l.Labels.Sensitivity, Consent: l.Labels.Consent}})
		if err != nil {
			t.Fatalf("Decide %s: %v", l.URI, err)
		}
		if dec.Allow != researchReadable(l) {
			res.wrong = append(res.wrong, fmt.Sprintf("%s (%s): allow=%v %v", l.URI, l.Labels.Type, dec.Allow, dec.Reasons))
		}
		if !dec.Allow {
			res.denied[l.Labels.Type]++
			continue
		}
		out, err := minimize.Apply(l.MimeType, d.payload(t, l), dec.Obligations, viewOptions())
		if err != nil {
			t.Fatalf("Apply %s (%s): %v", l.URI, l.Labels.Type, err)
		}
		res.released[l.Labels.Type]++
		for _, f := range d.scanner.Scan(out) {
			res.findings[f.Class] = append(res.findings[f.Class], l.URI+" at "+f.Where)
		}
	}
	return res
}

// deidentifyCorpus decides an HRESCH read of every resource of the
// realistic corpus (testdata/fhir-corpus) whose type custos serves, applies
// the obligations as the server does (no research aliases: references to
// the patient are dropped too), and returns the findings by class.
func deidentifyCorpus(t *testing.T, e *policy.Engine) map[string][]string {
	t.Helper()
	corpus, s := safeharbortest.Corpus(t, synth.DefaultNow.Year())
	subj := policy.NewSubject(safeHarborResearcher)
	findings := map[string][]string{}
	released := 0
	for _, r := range corpus {
		typ := strings.ToLower(r.Type)
		if !slices.Contains(fhirTypes, typ) {
			continue
		}
		dec, err := e.Decide(context.Background(), policy.Input{Subject: subj, PurposeOfUse: "HRESCH", Action: policy.ActionRead,
			Resource: &policy.Resource{Type: typ, Patient: "p", Tenant: synth.DefaultTenant}})
		if err != nil || !dec.Allow {
			t.Fatalf("Decide %s: %+v %v", r.Name, dec, err)
		}
		out, err := minimize.Apply("application/fhir+json", r.Raw, dec.Obligations, viewOptions())
		if err != nil {
			t.Fatalf("Apply %s: %v", r.Name, err)
		}
		released++
		for _, f := range s.Scan(out) {
			findings[f.Class] = append(findings[f.Class], r.Name+" at "+f.Where)
		}
	}
	if released < 7 {
		t.Fatalf("only %d corpus resources released", released)
	}
	return findings
}

// TestSafeHarborDeidentifiesCorpus: the default policy's research view of
// the realistic corpus holds none of the 18 classes (package minimize's
// TestDeidentifyCorpus has the positive control and every corpus type).
func TestSafeHarborDeidentifiesCorpus(t *testing.T) {
	for class, where := range deidentifyCorpus(t, defaultEngine(t)) {
		t.Errorf("class %s found %d times, e.g. %s", class, len(where), where[0])
	}
}

func defaultEngine(t *testing.T) *policy.Engine {
	t.Helper()
	e, err := policy.Default(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestSafeHarborDeidentifiesEveryResourceType is the Safe Harbor check of the
// default policy: a researcher (purpose HRESCH) reading every resource of a
// synthetic data set gets every FHIR type, de-identified, and none of the 18
// identifier classes in any output; notes, PDFs and images are denied.
func TestSafeHarborDeidentifiesEveryResourceType(t *testing.T) {
	d := newDataset(t)
	res := deidentifyAll(t, defaultEngine(t), d)
	for class, where := range res.findings {
		t.Errorf("class %s found %d times, e.g. %s", class, len(where), where[0])
	}
	for _, w := range res.wrong {
		t.Errorf("unexpected decision: %s", w)
	}
	for _, typ := range fhirTypes {
		if typ == "organization" {
			if res.released[typ] != 4 || res.denied[typ] != 0 { // the payers: reference data, no patient
				t.Errorf("organization: %d released, %d denied; want the 4 payers", res.released[typ], res.denied[typ])
			}
			continue
		}
		if res.released[typ] < 19 { // 20 patients, one opted out
			t.Errorf("%s: %d released, %d denied; want every resource of the 19 patients who did not opt out", typ, res.released[typ], res.denied[typ])
		}
	}
	for _, typ := range []string{"note", "report", "image"} {
		if res.released[typ] != 0 || res.denied[typ] == 0 {
			t.Errorf("%s: %d released, %d denied; free text and binary content must be denied for research", typ, res.released[typ], res.denied[typ])
		}
	}
	if d.scanner.Known() < 200 {
		t.Fatalf("only %d identifying strings collected: the scan would prove little", d.scanner.Known())
	}
}

// TestSafeHarborScannerDetectsRawData is the positive control: the scanner
// finds, in the raw synthetic FHIR resources, every class the data set has.
func TestSafeHarborScannerDetectsRawData(t *testing.T) {
	d := newDataset(t)
	found := map[string]bool{}
	for _, l := range d.lines {
		if l.MimeType != "application/fhir+json" {
			continue
		}
		for _, f := range d.scanner.Scan(d.payload(t, l)) {
			found[f.Class] = true
		}
	}
	for _, class := range []string{safeharbortest.ClassNames, safeharbortest.ClassGeography, safeharbortest.ClassDates, safeharbortest.ClassPhone, safeharbortest.ClassEmail, safeharbortest.ClassSSN,
		safeharbortest.ClassMRN, safeharbortest.ClassHealthPlan, safeharbortest.ClassAccount, safeharbortest.ClassURL, safeharbortest.ClassOtherUnique} {
		if !found[class] {
			t.Errorf("scanner does not detect class %s in the raw data", class)
		}
	}
}

// everyClassPatient is a hand-written Patient carrying at least one
// identifier of each of the 18 classes, including those the synthetic data
// set does not have (fax, licence, vehicle, device, URL, IP, biometric,
// photo).
const everyClassPatient = `{
  "resourceType": "Patient",
  "id": "b0f7a1de-2c59-4e1b-9a3d-6c1e0f2a7b44",
  "meta": {"lastUpdated": "2025-11-02T10:15:00Z", "source": "https://ehr.general-hospital.example/fhir"},
  "text": {"status": "generated", "div": "<div>Evelyn Marsh, 14 Orchard Lane</div>"},
  "extension": [
    {"url": "http://example.org/fhir/StructureDefinition/last-login-ip", "valueString": "192.168.14.27"},
    {"url": "http://example.org/fhir/StructureDefinition/fingerprint", "valueBase64Binary": "RklOR0VSUFJJTlQ="},
    {"url": "http://example.org/fhir/StructureDefinition/vehicle", "valueString": "1HGCM82633A004352"}
  ],
  "identifier": [
    {"system": "urn:oid:2.16.840.1.113883.19.5.mrn", "value": "MRN-77441123"},
    {"system": "http://hl7.org/fhir/sid/us-ssn", "value": "912-44-8123"},
    {"system": "urn:state:drivers-license", "value": "MD-4471923"},
    {"system": "urn:device:pacemaker-serial", "value": "SN-88231177"}
  ],
  "active": true,
  "name": [{"use": "official", "family": "Marsh", "given": ["Evelyn"]}],
  "telecom": [
    {"system": "phone", "value": "(410) 555-0134"},
    {"system": "fax", "value": "(410) 555-0188"},
    {"system": "email", "value": "evelyn.marsh@example.net"},
    {"system": "url", "value": "https://evelyn-marsh.example.net/"}
  ],
  "gender": "female",
  "birthDate": "1931-07-19",
  "deceasedBoolean": false,
  "address": [{"line": ["14 Orchard Lane"], "city": "Chestertown", "district": "Kent", "state": "MD",
               "postalCode": "05901", "country": "US", "period": {"start": "2001-04-01"}}],
  "photo": [{"contentType": "image/jpeg", "data": "/9j/4AAQSkZJRgABAQ=="}],
  "contact": [{"name": {"family": "Marsh", "given": ["Paul"]}, "telecom": [{"system": "phone", "value": "(410) 555-0145"}]}],
  "communication": [{"language": {"coding": [{"system": "urn:ietf:bcp:47", "code": "en"}]}}],
  "generalPractitioner": [{"reference": "Practitioner/4471", "display": "Dr. Ruth Okafor"}],
  "managingOrganization": {"reference": "Organization/12", "display": "Kent County Clinic"}
}`

// everyClassKnown lists the identifying strings of everyClassPatient by class.
var everyClassKnown = map[string][]string{
	safeharbortest.ClassNames:       {"Evelyn", "Marsh", "Paul", "Ruth Okafor", "Kent County Clinic"},
	safeharbortest.ClassGeography:   {"14 Orchard Lane", "Chestertown", "Kent", "05901"},
	safeharbortest.ClassDates:       {"1931-07-19", "2025-11-02", "2001-04-01"},
	safeharbortest.ClassPhone:       {"(410) 555-0134", "(410) 555-0145"},
	safeharbortest.ClassFax:         {"(410) 555-0188"},
	safeharbortest.ClassEmail:       {"evelyn.marsh@example.net"},
	safeharbortest.ClassSSN:         {"912-44-8123"},
	safeharbortest.ClassMRN:         {"MRN-77441123"},
	safeharbortest.ClassLicense:     {"MD-4471923"},
	safeharbortest.ClassVehicle:     {"1HGCM82633A004352"},
	safeharbortest.ClassDevice:      {"SN-88231177"},
	safeharbortest.ClassURL:         {"https://evelyn-marsh.example.net/", "https://ehr.general-hospital.example/fhir"},
	safeharbortest.ClassIP:          {"192.168.14.27"},
	safeharbortest.ClassBiometric:   {"RklOR0VSUFJJTlQ="},
	safeharbortest.ClassPhoto:       {"/9j/4AAQSkZJRgABAQ=="},
	safeharbortest.ClassOtherUnique: {"b0f7a1de-2c59-4e1b-9a3d-6c1e0f2a7b44", "Practitioner/4471", "Organization/12"},
}

// TestSafeHarborEveryClassFixture: the scanner finds all 18 classes in a
// Patient that has them (health plan and account numbers live in Coverage
// and Encounter, covered by the synthetic data), and the HRESCH
// obligations of the default policy leave none of them.
func TestSafeHarborEveryClassFixture(t *testing.T) {
	s := safeharbortest.NewScanner(synth.DefaultNow.Year())
	for class, vals := range everyClassKnown {
		s.Add(class, vals...)
	}
	found := map[string]bool{}
	for _, f := range s.Scan([]byte(everyClassPatient)) {
		found[f.Class] = true
	}
	for _, class := range safeharbortest.AllClasses {
		if !found[class] && class != safeharbortest.ClassHealthPlan && class != safeharbortest.ClassAccount {
			t.Errorf("scanner misses class %s in the fixture", class)
		}
	}
	e := defaultEngine(t)
	d, err := e.Decide(context.Background(), policy.Input{Principal: safeHarborResearcher, PurposeOfUse: "HRESCH",
		Action: policy.ActionRead, Resource: &policy.Resource{Type: "patient", Patient: "p", Tenant: synth.DefaultTenant}})
	if err != nil || !d.Allow {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
	out, err := minimize.Apply("application/fhir+json", []byte(everyClassPatient), d.Obligations, viewOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Scan(out) {
		t.Errorf("de-identified fixture still has class %s at %s", f.Class, f.Where)
	}
	// birthDate over age 89 is withheld with data-absent-reason "masked"
	// (a date cannot hold "90+"); the address keeps state, ZIP3, country.
	const want = `{"_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]},` +
		`"active":true,"address":[{"country":"US","postalCode":"000","state":"MD"}],` +
		`"communication":[{"language":{"coding":[{"code":"en","system":"urn:ietf:bcp:47"}]}}],` +
		`"deceasedBoolean":false,"gender":"female","resourceType":"Patient"}`
	if string(out) != want {
		t.Errorf("de-identified fixture\n got %s\nwant %s", out, want)
	}
}

// safeHarborMutations weaken the default policy; each must make the scan
// find the named class, which shows the scan can fail.
var safeHarborMutations = []struct {
	name  string
	edits [][2]string // old, new (each old must occur in authz.rego)
	class string
}{
	{"no de-identification",
		[][2]string{{researchDeidentify, `research_deidentify := []`}}, safeharbortest.ClassOtherUnique},
	{"pattern scrub instead of the walk",
		[][2]string{{researchDeidentify, `research_deidentify := [{"op": "scrub", "path": ""}]`}}, safeharbortest.ClassNames},
	{"allow-list of whole subtrees instead of the walk (the old profile)",
		[][2]string{{researchDeidentify, `research_deidentify := [{"op": "generalize", "path": "/birthDate", "fn": "birthyear90"}, ` +
			`{"op": "allow", "path": "", "fn": "/gender,/birthDate,/code,/valueQuantity,/reasonCode,/type,/status"}]`}}, safeharbortest.ClassNames},
	{"walk after a removal-only step that keeps names",
		[][2]string{{researchDeidentify, `research_deidentify := [{"op": "remove", "path": "/meta"}]`}}, safeharbortest.ClassNames},
}

// researchDeidentify is the research obligation of the default policy.
const researchDeidentify = `research_deidentify := [{"op": "deidentify", "path": "", "fn": "safeharbor"}]`

// TestSafeHarborScanDetectsMutations runs the scan against weakened copies
// of the default policy.
func TestSafeHarborScanDetectsMutations(t *testing.T) {
	orig, err := fs.ReadFile(rego.FS, "custos/authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	d := newDataset(t)
	for _, m := range safeHarborMutations {
		t.Run(m.name, func(t *testing.T) {
			src := string(orig)
			for _, ed := range m.edits {
				if !strings.Contains(src, ed[0]) {
					t.Fatalf("mutation target %q not in authz.rego", ed[0])
				}
				src = strings.Replace(src, ed[0], ed[1], 1)
			}
			e, err := policy.Load(context.Background(), fstest.MapFS{"custos/authz.rego": {Data: []byte(src)}}, policy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res := deidentifyAll(t, e, d)
			for class, where := range deidentifyCorpus(t, e) {
				res.findings[class] = append(res.findings[class], where...)
			}
			if len(res.findings[m.class]) == 0 {
				t.Errorf("mutation survived: class %s not found (found: %s)", m.class, summarize(res.findings))
			}
		})
	}
}

func summarize(f map[string][]string) string {
	var parts []string
	for c, w := range f {
		parts = append(parts, fmt.Sprintf("%s×%d", c, len(w)))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
