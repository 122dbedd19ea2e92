package rego_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/rego"
	"github.com/custos-mcp/custos/store/synth"
)

// The 18 HIPAA Safe Harbor identifier classes, 45 CFR 164.514(b)(2)(i)(A)-(R).
const (
	classNames       = "A names"
	classGeography   = "B geography smaller than a state"
	classDates       = "C dates (except year) and ages over 89"
	classPhone       = "D telephone numbers"
	classFax         = "E fax numbers"
	classEmail       = "F e-mail addresses"
	classSSN         = "G social security numbers"
	classMRN         = "H medical record numbers"
	classHealthPlan  = "I health plan beneficiary numbers"
	classAccount     = "J account numbers"
	classLicense     = "K certificate/license numbers"
	classVehicle     = "L vehicle identifiers"
	classDevice      = "M device identifiers and serial numbers"
	classURL         = "N web URLs"
	classIP          = "O IP addresses"
	classBiometric   = "P biometric identifiers"
	classPhoto       = "Q full-face photographs"
	classOtherUnique = "R other unique identifying numbers, characteristics, codes"
)

var allClasses = []string{classNames, classGeography, classDates, classPhone, classFax, classEmail,
	classSSN, classMRN, classHealthPlan, classAccount, classLicense, classVehicle, classDevice,
	classURL, classIP, classBiometric, classPhoto, classOtherUnique}

// fhirTypes are the synthetic FHIR resource types; the Safe Harbor profile
// must release every one of them, de-identified.
var fhirTypes = []string{"patient", "observation", "condition", "medicationrequest", "encounter", "coverage"}

// terminologySystems are code system URIs. They name vocabularies, not
// people, and may stay; any other URL or URN in an output is a leak.
var terminologySystems = []string{
	"http://loinc.org", "http://snomed.info/sct", "http://hl7.org/fhir/sid/icd-10-cm",
	"http://www.nlm.nih.gov/research/umls/rxnorm", "http://unitsofmeasure.org", "urn:ietf:bcp:47",
}

var (
	fullDateRE  = regexp.MustCompile(`(1[89]|20)\d\d-(0[1-9]|1[0-2])|\bT?\d\d:\d\d|\b\d{1,2}/\d{1,2}/\d{2,4}\b`)
	uuidRE      = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	referenceRE = regexp.MustCompile(`\b(Patient|RelatedPerson|Person|Practitioner|PractitionerRole|Organization|Location|` +
		`Encounter|EpisodeOfCare|Condition|Observation|MedicationRequest|Coverage|Device|Group|Account|` +
		`DocumentReference|DiagnosticReport|Procedure|ServiceRequest)/[A-Za-z0-9.-]{1,64}`) // literal FHIR references
	ipRE      = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b|\b[0-9a-f]{1,4}(:[0-9a-f]{0,4}){3,7}\b`)
	urlRE     = regexp.MustCompile(`(?i)\b(https?|ftp|urn|mailto|tel|file|data):|\bwww\.`)
	idTokenRE = regexp.MustCompile(`\b[A-Za-z]{1,5}-?\d{5,}\b`) // MRN-00123456, W123456789, ENC-..., GRP-...
	ageKeyRE  = regexp.MustCompile(`^age$|Age$`)                // age, onsetAge, abatementAge
)

// scanner finds the Safe Harbor identifier classes in a JSON document.
type scanner struct {
	known   map[string]string // identifying string -> class
	values  []string          // keys of known, longest first
	nowYear int               // reference year for ages
}

func newScanner(nowYear int) *scanner {
	return &scanner{known: map[string]string{}, nowYear: nowYear}
}

// add registers identifying strings of a class (short strings match
// anything and are ignored, as synth.Identifiers does).
func (s *scanner) add(class string, vals ...string) {
	for _, v := range vals {
		if len(v) >= 3 {
			if _, dup := s.known[v]; !dup {
				s.known[v] = class
				s.values = append(s.values, v)
			}
		}
	}
	sort.Slice(s.values, func(i, j int) bool { return len(s.values[i]) > len(s.values[j]) })
}

// A finding names a class and where it was found (a JSON pointer), never
// the value.
type finding struct{ class, where string }

// scan decodes doc and reports every identifier it holds.
func (s *scanner) scan(doc []byte) []finding {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return []finding{{classOtherUnique, "(not JSON)"}}
	}
	var out []finding
	s.walk("", "", v, &out)
	return out
}

func (s *scanner) walk(ptr, key string, v any, out *[]finding) {
	add := func(class string) { *out = append(*out, finding{class, ptr}) }
	switch x := v.(type) {
	case map[string]any:
		if ageKeyRE.MatchString(key) { // an Age quantity
			if n, ok := x["value"].(json.Number); ok {
				if f, err := n.Float64(); err == nil && f > 89 {
					add(classDates)
				}
			}
		}
		for k, c := range x {
			switch k {
			case "photo":
				add(classPhoto)
			case "id", "meta", "identifier", "extension", "modifierExtension", "contained":
				if ptr == "" {
					add(classOtherUnique) // resource ids and their bookkeeping
				}
			case "reference":
				add(classOtherUnique)
			}
			if ptr == "" && k == "text" {
				add(classOtherUnique) // the narrative repeats the resource
			}
			s.walk(ptr+"/"+k, k, c, out)
		}
	case []any:
		for i, c := range x {
			s.walk(ptr+"/"+strconv.Itoa(i), key, c, out)
		}
	case json.Number:
		if ageKeyRE.MatchString(key) {
			if f, err := x.Float64(); err == nil && f > 89 {
				add(classDates)
			}
		}
		s.scalar(ptr, key, string(x), add)
	case string:
		s.scalar(ptr, key, x, add)
	}
}

// isTerminology reports whether val, the value of a "system" member, names
// a code system.
func isTerminology(key, val string) bool {
	return key == "system" && (slices.Contains(terminologySystems, val) ||
		strings.HasPrefix(val, "http://terminology.hl7.org/CodeSystem/"))
}

func (s *scanner) scalar(ptr, key, val string, add func(string)) {
	for _, k := range s.values {
		if strings.Contains(val, k) {
			add(s.known[k])
		}
	}
	if isTerminology(key, val) {
		return
	}
	switch key {
	case "birthDate":
		y, err := strconv.Atoi(val)
		if val != "90+" && (err != nil || len(val) != 4 || s.nowYear-y-1 > 89) {
			add(classDates)
		}
	case "postalCode":
		if len(val) != 3 || strings.Trim(val, "0123456789") != "" {
			add(classGeography)
		}
	case "line", "city", "district", "county":
		add(classGeography)
	case "data", "valueBase64Binary":
		add(classBiometric) // encoded content: fingerprints, voice prints, images
	}
	if ageKeyRE.MatchString(key) {
		if f, err := strconv.ParseFloat(strings.TrimSuffix(val, "+"), 64); err == nil && f > 89 && val != "90+" {
			add(classDates)
		}
	}
	if fullDateRE.MatchString(val) {
		add(classDates)
	}
	if uuidRE.MatchString(val) || referenceRE.MatchString(val) {
		add(classOtherUnique)
	}
	if ipRE.MatchString(val) {
		add(classIP)
	}
	if idTokenRE.MatchString(val) {
		add(classOtherUnique)
	}
	if urlRE.MatchString(val) {
		add(classURL)
	}
	// The scrub patterns of package minimize, as a second opinion.
	for class, fn := range map[string]string{classPhone: "phone", classEmail: "email", classSSN: "ssn", classMRN: "mrn", classDates: "date"} {
		if out, err := minimize.Text([]byte(val), []minimize.Obligation{{Op: minimize.OpScrub, Fn: fn}}, minimize.Options{}); err != nil || string(out) != val {
			add(class)
		}
	}
}

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
	scanner *scanner
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
	d := &dataset{dir: dir, scanner: newScanner(synth.DefaultNow.Year())}
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
		d.scanner.add(classOtherUnique, l.Labels.Patient)
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
		collect(v, d.scanner)
	}
	ids, err := synth.Identifiers(dir)
	if err != nil {
		t.Fatal(err)
	}
	// synth.Identifiers does not say which class a string is; those the
	// files did not classify above are the names.
	d.scanner.add(classNames, ids...)
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

// collect registers the identifying strings of one raw FHIR resource.
func collect(v any, s *scanner) {
	switch x := v.(type) {
	case map[string]any:
		if id, ok := x["id"].(string); ok {
			s.add(classOtherUnique, id)
		}
		if r, ok := x["reference"].(string); ok {
			s.add(classOtherUnique, r)
		}
		_, coded := x["code"]
		_, sys := x["system"]
		if disp, ok := x["display"].(string); ok && !coded && !sys {
			s.add(classNames, disp) // a Reference's display: a person or a facility
		}
		if sub, ok := x["subscriberId"].(string); ok {
			s.add(classHealthPlan, sub)
		}
		for _, idf := range asSlice(x["identifier"]) {
			m, _ := idf.(map[string]any)
			val, _ := m["value"].(string)
			switch system, _ := m["system"].(string); {
			case strings.Contains(system, "ssn"):
				s.add(classSSN, val)
			case strings.Contains(system, "mrn"):
				s.add(classMRN, val)
			case strings.Contains(system, "member"):
				s.add(classHealthPlan, val)
			default:
				s.add(classAccount, val)
			}
		}
		for _, c := range asSlice(x["class"]) {
			if m, ok := c.(map[string]any); ok {
				if val, ok := m["value"].(string); ok {
					s.add(classHealthPlan, val) // the plan's group number
				}
			}
		}
		for _, t := range asSlice(x["telecom"]) {
			m, _ := t.(map[string]any)
			val, _ := m["value"].(string)
			switch m["system"] {
			case "email":
				s.add(classEmail, val)
			case "fax":
				s.add(classFax, val)
			default:
				s.add(classPhone, val)
			}
		}
		for _, a := range asSlice(x["address"]) {
			m, _ := a.(map[string]any)
			for _, k := range []string{"city", "postalCode", "district"} {
				if val, ok := m[k].(string); ok {
					s.add(classGeography, val)
				}
			}
			for _, line := range asSlice(m["line"]) {
				if val, ok := line.(string); ok {
					s.add(classGeography, val)
				}
			}
		}
		if bd, ok := x["birthDate"].(string); ok {
			s.add(classDates, bd)
		}
		for _, c := range x {
			collect(c, s)
		}
	case []any:
		for _, c := range x {
			collect(c, s)
		}
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
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
		out, err := minimize.Apply(l.MimeType, d.payload(t, l), dec.Obligations, minimize.Options{Now: synth.DefaultNow})
		if err != nil {
			t.Fatalf("Apply %s (%s): %v", l.URI, l.Labels.Type, err)
		}
		res.released[l.Labels.Type]++
		for _, f := range d.scanner.scan(out) {
			res.findings[f.class] = append(res.findings[f.class], l.URI+" at "+f.where)
		}
	}
	return res
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
		if res.released[typ] < 19 { // 20 patients, one opted out
			t.Errorf("%s: %d released, %d denied; want every resource of the 19 patients who did not opt out", typ, res.released[typ], res.denied[typ])
		}
	}
	for _, typ := range []string{"note", "report", "image"} {
		if res.released[typ] != 0 || res.denied[typ] == 0 {
			t.Errorf("%s: %d released, %d denied; free text and binary content must be denied for research", typ, res.released[typ], res.denied[typ])
		}
	}
	if len(d.scanner.known) < 200 {
		t.Fatalf("only %d identifying strings collected: the scan would prove little", len(d.scanner.known))
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
		for _, f := range d.scanner.scan(d.payload(t, l)) {
			found[f.class] = true
		}
	}
	for _, class := range []string{classNames, classGeography, classDates, classPhone, classEmail, classSSN,
		classMRN, classHealthPlan, classAccount, classURL, classOtherUnique} {
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
	classNames:       {"Evelyn", "Marsh", "Paul", "Ruth Okafor", "Kent County Clinic"},
	classGeography:   {"14 Orchard Lane", "Chestertown", "Kent", "05901"},
	classDates:       {"1931-07-19", "2025-11-02", "2001-04-01"},
	classPhone:       {"(410) 555-0134", "(410) 555-0145"},
	classFax:         {"(410) 555-0188"},
	classEmail:       {"evelyn.marsh@example.net"},
	classSSN:         {"912-44-8123"},
	classMRN:         {"MRN-77441123"},
	classLicense:     {"MD-4471923"},
	classVehicle:     {"1HGCM82633A004352"},
	classDevice:      {"SN-88231177"},
	classURL:         {"https://evelyn-marsh.example.net/", "https://ehr.general-hospital.example/fhir"},
	classIP:          {"192.168.14.27"},
	classBiometric:   {"RklOR0VSUFJJTlQ="},
	classPhoto:       {"/9j/4AAQSkZJRgABAQ=="},
	classOtherUnique: {"b0f7a1de-2c59-4e1b-9a3d-6c1e0f2a7b44", "Practitioner/4471", "Organization/12"},
}

// TestSafeHarborEveryClassFixture: the scanner finds all 18 classes in a
// Patient that has them (health plan and account numbers live in Coverage
// and Encounter, covered by the synthetic data), and the HRESCH
// obligations of the default policy leave none of them.
func TestSafeHarborEveryClassFixture(t *testing.T) {
	s := newScanner(synth.DefaultNow.Year())
	for class, vals := range everyClassKnown {
		s.add(class, vals...)
	}
	found := map[string]bool{}
	for _, f := range s.scan([]byte(everyClassPatient)) {
		found[f.class] = true
	}
	for _, class := range allClasses {
		if !found[class] && class != classHealthPlan && class != classAccount {
			t.Errorf("scanner misses class %s in the fixture", class)
		}
	}
	e := defaultEngine(t)
	d, err := e.Decide(context.Background(), policy.Input{Principal: safeHarborResearcher, PurposeOfUse: "HRESCH",
		Action: policy.ActionRead, Resource: &policy.Resource{Type: "patient", Patient: "p", Tenant: synth.DefaultTenant}})
	if err != nil || !d.Allow {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
	out, err := minimize.Apply("application/fhir+json", []byte(everyClassPatient), d.Obligations, minimize.Options{Now: synth.DefaultNow})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.scan(out) {
		t.Errorf("de-identified fixture still has class %s at %s", f.class, f.where)
	}
	const want = `{"address":[{"country":"US","postalCode":"000","state":"MD"}],"birthDate":"90+",` +
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
	{"birthDate not generalized",
		[][2]string{{`{"op": "generalize", "path": "/birthDate", "fn": "birthyear90"},`, ``}}, classDates},
	{"ZIP not generalized",
		[][2]string{{`{"op": "generalize", "path": "/address/*/postalCode", "fn": "zip3"},`, ``}}, classGeography},
	{"clinical dates not generalized",
		[][2]string{{`{"op": "generalize", "path": "/effectiveDateTime", "fn": "year"},`, ``}}, classDates},
	{"no allow-list",
		[][2]string{{`[research_allow_obligation(typ)]),`, `[]),`}}, classOtherUnique},
	{"observation allow-list lets the subject through",
		[][2]string{{`"/status", "/category", "/code", "/effectiveDateTime"`, `"/subject", "/status", "/category", "/code", "/effectiveDateTime"`}}, classOtherUnique},
	{"patient names allowed",
		[][2]string{{`{"op": "remove", "path": "/name"},`, ``}, {`"/gender", "/birthDate",`, `"/gender", "/birthDate", "/name",`}}, classNames},
	{"patient telecom allowed",
		[][2]string{{`{"op": "remove", "path": "/telecom"},`, ``}, {`"/gender", "/birthDate",`, `"/gender", "/birthDate", "/telecom",`}}, classPhone},
	{"member id allowed",
		[][2]string{{`{"op": "remove", "path": "/subscriberId"},`, ``}, {`"coverage": ["/status",`, `"coverage": ["/subscriberId", "/status",`}}, classHealthPlan},
}

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
