package minimize_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/store"
)

// pseudoKey and pseudoTenant are the fixed test key and tenant of the
// golden vectors below: docs/uris.md's (store/stream_test.go, 32 x 0x42).
var (
	pseudoKey    = bytes.Repeat([]byte{0x42}, 32)
	pseudoTenant = "general-hospital"
	keyedIDObl   = minimize.Obligation{Op: minimize.OpPseudonymize, Fn: minimize.PseudonymizeKeyedID}
)

// heldKeyID is a KeyID that names every resource of held by its keyed id
// under pseudoKey, and nothing else (a resource custos does not hold).
func heldKeyID(held ...string) func(typ, id string) (string, bool) {
	return func(typ, id string) (string, bool) {
		for _, h := range held {
			if h == typ+"/"+id {
				return store.ResourceID(pseudoKey, pseudoTenant, typ, id), true
			}
		}
		return "", false
	}
}

// TestPseudonymizeGoldenVectors pins the keyed ids pseudonymize:keyedid
// writes under the fixed test key: a Claim of R4's claim examples and its
// patient, coverage and claim response, and gematik VSDM 2's Coverage and
// Patient named by a KVNR. docs/uris.md's vector (Patient MRN-000123) is
// the first: the same function names the URI and the reference.
func TestPseudonymizeGoldenVectors(t *testing.T) {
	for _, c := range []struct{ typ, id, want string }{
		{"Patient", "MRN-000123", "cdcc52c3-6174-81ea-a7eb-916734a3d4fb"},
		{"Claim", "100150", "52c3f086-323e-84f3-9eaa-bd6a24e1be53"},
		{"Patient", "1", "41b486d1-7c67-8dcc-ad57-bf71c97ed08b"},
		{"Coverage", "9876B1", "5aaa5530-2edc-83d4-a874-426e278fd179"},
		{"ClaimResponse", "R3500", "d4896d1a-31d6-86de-99aa-bdb23b7c9380"},
		{"Coverage", "VSDMCoverage-GKV-V731904826", "32b438a5-10bb-862e-ba9a-bbc1c9077029"},
		{"Patient", "VSDMPatient-GKV-V731904826", "3d85c783-7801-85a1-93a3-4da86d59111c"},
	} {
		in := `{"resourceType":"Basic","id":"b","code":{"text":"x"},"subject":{"reference":"` + c.typ + "/" + c.id + `"}}`
		out, err := minimize.JSON([]byte(in), []minimize.Obligation{keyedIDObl}, minimize.Options{KeyID: heldKeyID(c.typ + "/" + c.id)})
		if err != nil {
			t.Fatal(err)
		}
		want := `"subject":{"reference":"` + c.typ + "/" + c.want + `"}`
		if !strings.Contains(string(out), want) {
			t.Errorf("%s/%s: got %s, want %s", c.typ, c.id, out, want)
		}
	}
}

// TestPseudonymizeRewritesIDsAndReferences: the resource's id and every
// literal reference to a resource the caller holds become keyed ids; a
// reference it cannot key keeps only its type (or nothing, and the view's
// prune drops the emptied Reference or marks a required one withheld).
func TestPseudonymizeRewritesIDsAndReferences(t *testing.T) {
	in := `{"resourceType":"ExplanationOfBenefit","id":"EB3500",
	"patient":{"reference":"Patient/1","type":"Patient"},
	"claim":{"reference":"Claim/100150/_history/2"},
	"claimResponse":{"reference":"ClaimResponse/R3500","_reference":{"id":"r"}},
	"insurer":{"reference":"https://other.example/fhir/Organization/2","type":"Organization"},
	"provider":{"reference":"urn:uuid:0d3b1a5e-8a66-4b1f-9c3f-0f6f0bb6c9a1","type":"Practitioner"},
	"facility":{"reference":"#loc"},
	"referral":{"reference":"ServiceRequest?identifier=http://x|1","type":"ServiceRequest"},
	"enterer":{"reference":"Practitioner/unheld","type":"Practitioner"},
	"prescription":{"reference":"Foo/1"},
	"originalPrescription":{"reference":7,"type":"MedicationRequest"},
	"related":[{"reference":{"system":"http://x","value":"PRIOR-CLM-99001122"}}],
	"insurance":[{"focal":true,"coverage":{"reference":"Coverage/9876B1"}}],
	"item":[{"sequence":1,"encounter":[{"reference":"Encounter/example"}]}],
	"contained":[{"resourceType":"Location","id":"loc","managingOrganization":{"reference":"Organization/2"}}],
	"extension":[{"url":"http://x","valueReference":{"reference":"Patient/1"}}]}`
	held := heldKeyID("ExplanationOfBenefit/EB3500", "Patient/1", "Claim/100150", "ClaimResponse/R3500", "Coverage/9876B1", "Encounter/example", "Organization/2")
	out, err := minimize.JSON([]byte(in), []minimize.Obligation{keyedIDObl}, minimize.Options{KeyID: held})
	if err != nil {
		t.Fatal(err)
	}
	k := func(typ, id string) string { return typ + "/" + store.ResourceID(pseudoKey, pseudoTenant, typ, id) }
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"id":"` + store.ResourceID(pseudoKey, pseudoTenant, "ExplanationOfBenefit", "EB3500") + `"`,
		`"patient":{"reference":"` + k("Patient", "1") + `","type":"Patient"}`,
		`"claim":{"reference":"` + k("Claim", "100150") + `"}`,
		`"claimResponse":{"_reference":{"id":"r"},"reference":"` + k("ClaimResponse", "R3500") + `"}`,
		`"insurer":{"type":"Organization"}`,
		`"provider":{"type":"Practitioner"}`,
		`"referral":{"type":"ServiceRequest"}`,
		`"enterer":{"type":"Practitioner"}`,
		`"originalPrescription":{"type":"MedicationRequest"}`,
		`"related":[{"reference":{"system":"http://x","value":"PRIOR-CLM-99001122"}}]`, // an Identifier
		`"coverage":{"reference":"` + k("Coverage", "9876B1") + `"}`,
		`"encounter":[{"reference":"` + k("Encounter", "example") + `"}]`,
		// A contained resource keeps its local id; its references are keyed.
		`"id":"loc","managingOrganization":{"reference":"` + k("Organization", "2") + `"}`,
		`"valueReference":{"reference":"` + k("Patient", "1") + `"}`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("missing %s in %s", want, out)
		}
	}
	for _, gone := range []string{"EB3500", "Patient/1\"", "100150", "_history", "R3500", "9876B1", "other.example", "urn:uuid", "#loc", "identifier=", "unheld", "Foo/1", "Encounter/example", "Organization/2\""} {
		if strings.Contains(string(out), gone) {
			t.Errorf("%s still in %s", gone, out)
		}
	}
	if _, ok := got["facility"]; ok {
		t.Errorf("facility (a local reference, emptied) kept: %s", out)
	}
	if _, ok := got["prescription"]; ok {
		t.Errorf("prescription (no R4 type, emptied) kept: %s", out)
	}
}

// TestPseudonymizeWithoutHeldResources: a KeyID that names nothing (a
// catalog that holds none of them, or no key) drops the id and every
// reference, and the view marks a required Reference withheld.
func TestPseudonymizeWithoutHeldResources(t *testing.T) {
	in := `{"resourceType":"Coverage","id":"VSDMCoverage-GKV-V731904826","status":"active",
	"beneficiary":{"reference":"Patient/VSDMPatient-GKV-V731904826"},
	"payor":[{"reference":"Patient/VSDMPatient-GKV-V731904826"}]}`
	out, err := minimize.JSON([]byte(in), []minimize.Obligation{keyedIDObl}, minimize.Options{KeyID: heldKeyID()})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "V731904826") {
		t.Errorf("a source id survives: %s", out)
	}
	for _, want := range []string{
		`"beneficiary":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}`,
		`"payor":[{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}]`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("missing %s in %s", want, out)
		}
	}
}

// TestPseudonymizeKeyerResultMustBeAnID: a KeyID that returns no FHIR id
// (a bug, or a keyer that leaks the source id with a slash) names
// nothing.
func TestPseudonymizeKeyerResultMustBeAnID(t *testing.T) {
	bad := func(typ, id string) (string, bool) { return "x/" + id, true }
	in := `{"resourceType":"Claim","id":"100150","patient":{"reference":"Patient/1","type":"Patient"}}`
	out, err := minimize.JSON([]byte(in), []minimize.Obligation{keyedIDObl}, minimize.Options{KeyID: bad})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "100150") || strings.Contains(string(out), "Patient/") {
		t.Errorf("a bad keyed id was written: %s", out)
	}
}

// TestPseudonymizeFailsClosed: the obligation validates only as
// pseudonymize:"":keyedid, and without a KeyID nothing is released.
func TestPseudonymizeFailsClosed(t *testing.T) {
	for _, c := range []struct {
		o    minimize.Obligation
		want error
	}{
		{minimize.Obligation{Op: minimize.OpPseudonymize, Fn: "keyedid"}, nil},
		{minimize.Obligation{Op: minimize.OpPseudonymize, Path: "/id", Fn: "keyedid"}, minimize.ErrBadPath},
		{minimize.Obligation{Op: minimize.OpPseudonymize}, minimize.ErrBadFn},
		{minimize.Obligation{Op: minimize.OpPseudonymize, Fn: "alias"}, minimize.ErrBadFn},
	} {
		if err := c.o.Validate(); !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
			t.Errorf("%v: %v, want %v", c.o, err, c.want)
		}
	}
	if got := keyedIDObl.HL7Code(); got != minimize.HL7Pseud {
		t.Errorf("HL7Code = %q", got)
	}
	out, err := minimize.JSON([]byte(`{"resourceType":"Claim","id":"1"}`), []minimize.Obligation{keyedIDObl}, minimize.Options{})
	if !errors.Is(err, minimize.ErrNoKeyer) || out != nil {
		t.Errorf("without KeyID: %s, %v", out, err)
	}
	if _, err := minimize.Apply("text/plain", []byte("Claim/1"), []minimize.Obligation{keyedIDObl}, minimize.Options{KeyID: heldKeyID()}); !errors.Is(err, minimize.ErrNotApplicable) {
		t.Errorf("text: %v", err)
	}
}

// TestPseudonymizeAgreesWithPlainRewrite holds the typed walk to a plain
// reference: on documents whose only "reference" members are
// References', every reference string of the form Type/id of a held
// resource becomes Type/<keyed id> and every other goes.
func TestPseudonymizeAgreesWithPlainRewrite(t *testing.T) {
	held := []string{"Patient/1", "Coverage/9876B1", "Organization/2"}
	refs := []string{"Patient/1", "Coverage/9876B1", "Organization/2", "Organization/3", "Patient/1/_history/4",
		"http://x/Patient/1", "#c", "Patient?identifier=1", "Patient/", "/Patient/1", "patient/1", "Patient/1/x", "Patient/a b", ""}
	for _, r := range refs {
		in := `{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/1"},"payor":[{"reference":` + strconvQuote(r) + `,"type":"Patient"}]}`
		out, err := minimize.JSON([]byte(in), []minimize.Obligation{keyedIDObl}, minimize.Options{KeyID: heldKeyID(held...)})
		if err != nil {
			t.Fatal(err)
		}
		want := `"payor":[{"type":"Patient"}]`
		if plain := plainKeyed(r, held); plain != "" {
			want = `"payor":[{"reference":"` + plain + `","type":"Patient"}]`
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("%q: %s, want %s", r, out, want)
		}
	}
}

// plainKeyed is the plain reference: r split at "/" as Type, id and an
// optional _history/version, looked up among held.
func plainKeyed(r string, held []string) string {
	typ, rest, ok := strings.Cut(r, "/")
	if !ok {
		return ""
	}
	id, hist, _ := strings.Cut(rest, "/_history/")
	if strings.ContainsAny(id, "/ ") || strings.Contains(rest, "/") && hist == "" {
		return ""
	}
	for _, h := range held {
		if h == typ+"/"+id {
			return typ + "/" + store.ResourceID(pseudoKey, pseudoTenant, typ, id)
		}
	}
	return ""
}
