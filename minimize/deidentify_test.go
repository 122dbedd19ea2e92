package minimize_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/minimize/safeharbortest"
	"github.com/custos-mcp/custos/store/synth"
)

var (
	safeHarbor = []minimize.Obligation{{Op: minimize.OpDeidentify, Fn: minimize.DeidentifySafeHarbor}}
	deidNow    = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
)

// testAlias stands in for the server's research alias: a UUID made from a
// hash of the id (the server keys it; see server/research.go).
func testAlias(id string) string {
	h := sha256.Sum256([]byte("test-alias\x00" + id))
	u, _ := uuid.FromBytes(h[:16])
	return u.String()
}

// testSubject is the patient the rule cases are about ("Patient/p").
const testSubject = "p"

// corpusPatient is the patient of the realistic corpus.
const corpusPatient = "MRN-77441123"

func deidentify(t testing.TB, raw []byte, alias func(string) string) []byte {
	t.Helper()
	return deidentifyAbout(t, raw, alias, testSubject)
}

// deidentifyAbout is deidentify of a resource about patient subject.
func deidentifyAbout(t testing.TB, raw []byte, alias func(string) string, subject string) []byte {
	t.Helper()
	out, err := minimize.Apply("application/fhir+json", raw, safeHarbor, minimize.Options{Now: deidNow, Alias: alias, Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// aliasReference reports whether ref is "Patient/<alias>" of some id.
func aliasReference(ids []string) func(string) bool {
	ok := map[string]bool{}
	for _, id := range ids {
		ok["Patient/"+testAlias(id)] = true
	}
	return func(ref string) bool { return ok[ref] }
}

// TestDeidentifyCorpus is the Safe Harbor check on FHIR nobody tuned the
// policy to: every resource of testdata/fhir-corpus, de-identified by the
// deidentify obligation, holds none of the 18 classes; the raw corpus holds
// every class it was written with (the positive control).
func TestDeidentifyCorpus(t *testing.T) {
	corpus, s := safeharbortest.Corpus(t, deidNow.Year())
	rawFound := map[string]int{}
	for _, r := range corpus {
		for _, f := range s.Scan(r.Raw) {
			rawFound[f.Class]++
		}
	}
	for _, class := range safeharbortest.AllClasses {
		if rawFound[class] == 0 && class != safeharbortest.ClassVehicle {
			t.Errorf("positive control: class %s not found in the raw corpus", class)
		}
	}
	s.PermitReferences(aliasReference([]string{corpusPatient}))
	for _, r := range corpus {
		for _, alias := range []func(string) string{nil, testAlias} {
			out := deidentifyAbout(t, r.Raw, alias, corpusPatient)
			for _, f := range s.Scan(out) {
				t.Errorf("%s (alias %v): class %s at %s", r.Name, alias != nil, f.Class, f.Where)
			}
		}
	}
}

// TestDeidentifiedIsValidFHIR: the outside validators accept every
// de-identified resource of the corpus and of a synthetic data set, with and
// without aliases (required elements the walk drops carry a
// data-absent-reason extension), and the raw corpus too.
func TestDeidentifiedIsValidFHIR(t *testing.T) {
	corpus, _ := safeharbortest.Corpus(t, deidNow.Year())
	var docs [][]byte
	var names []string
	add := func(name string, b []byte) { docs, names = append(docs, b), append(names, name) }
	for _, r := range corpus {
		add(r.Name+" raw", r.Raw)
		add(r.Name, deidentifyAbout(t, r.Raw, testAlias, corpusPatient))
		add(r.Name+" without alias", deidentifyAbout(t, r.Raw, nil, corpusPatient))
	}
	for _, p := range synthPayloads(t) {
		add(p.name, deidentifyAbout(t, p.raw, testAlias, p.patient))
	}
	for _, inv := range safeharbortest.ValidateFHIR(t, docs) {
		t.Errorf("%s is not valid FHIR R4 (%s): %s", names[inv.Index], inv.Validator, inv.Message)
	}
	t.Logf("%d resources validated", len(docs))
}

// TestDeidentifyKeepsInvariants: where the walk drops every element an
// invariant of FHIR R4 asks for one of (pat-1, cmp-1, obs-3, mad-1, imm-1,
// prr-1, gol-1, app-1, apr-1, con-1, ppc-1, imr-1) or the identity of a document (bdl-9, bdl-10), the output
// is still valid R4: the outside validators accept the raw inputs and
// their de-identified forms. The document is the shape of HL7's IPS
// minimal example (HL7/fhir-ips, Bundle-IPS-examples-Bundle-minimal.json,
// CC0), trimmed; the MessageHeader is that of microsoft/FHIR-Converter's
// ADT^A01 sample output (docs/samples/Messages/HL7v2/Response), whose
// required endpoints are data-absent-reason companions only.
func TestDeidentifyKeepsInvariants(t *testing.T) {
	ips := `{"resourceType":"Bundle","identifier":{"system":"urn:oid:2.16.724.4.8.10.200.10","value":"28b95815-76ce-457b-b7ae-a972e527db40"},"type":"document","timestamp":"2020-12-11T14:30:00+01:00","entry":[` +
		`{"fullUrl":"urn:uuid:30551ce1-5a28-4356-b684-1e639094ad4d","resource":{"resourceType":"Composition","id":"30551ce1-5a28-4356-b684-1e639094ad4d","status":"final","type":{"coding":[{"code":"60591-5","system":"http://loinc.org"}]},"subject":{"reference":"Patient/2b90dd2b-2dab-4c75-9bb9-a355e07401e8"},"date":"2020-12-11T14:30:00+01:00","author":[{"reference":"Practitioner/1c616b24-3895-48c4-9a02-9a64110351ef"}],"title":"Patient Summary as of December 11, 2020 14:30",` +
		`"section":[{"title":"Active Problems","code":{"coding":[{"code":"11450-4","system":"http://loinc.org"}]},"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">Hot flushes</div>"},"entry":[{"reference":"Condition/c64139e7-f02d-409c-bf34-75e8bf23bc80"}]},` +
		`{"title":"Allergies","code":{"coding":[{"code":"48765-2","system":"http://loinc.org"}]},"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">No known allergies</div>"},"emptyReason":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/list-empty-reason","code":"nilknown"}]}}]}},` +
		`{"fullUrl":"urn:uuid:2b90dd2b-2dab-4c75-9bb9-a355e07401e8","resource":{"resourceType":"Patient","id":"2b90dd2b-2dab-4c75-9bb9-a355e07401e8","gender":"female","birthDate":"1972-05-01","contact":[{"relationship":[{"coding":[{"code":"MTH","system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode"}]}],"name":{"family":"Mum","given":["Martha"]},"telecom":[{"system":"phone","value":"+33-555-20036"}]}]}}]}`
	inputs := []string{
		ips,
		`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"2160-0"}]},"valueQuantity":{"value":1.1,"unit":"mg/dL"},"referenceRange":[{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/referencerange-meaning","code":"normal"}]},"text":"0.6-1.2 (Dr. Varma's lab)"}]}`,
		`{"resourceType":"MedicationAdministration","status":"completed","medicationCodeableConcept":{"coding":[{"system":"http://www.nlm.nih.gov/research/umls/rxnorm","code":"197361"}]},"subject":{"reference":"Patient/p"},"effectiveDateTime":"2025-03-14","dosage":{"route":{"coding":[{"system":"http://snomed.info/sct","code":"26643006"}]},"dose":{"unit":"see Dr. Alvarez's note"}}}`,
		`{"resourceType":"Immunization","status":"completed","vaccineCode":{"coding":[{"system":"http://hl7.org/fhir/sid/cvx","code":"140"}]},"patient":{"reference":"Patient/p"},"occurrenceDateTime":"2024-10-02","education":[{"documentType":"VIS for Evelyn Marsh","publicationDate":"2021-08-06","presentationDate":"2024-10-02"}]}`,
		`{"resourceType":"ServiceRequest","status":"active","intent":"order","subject":{"reference":"Patient/p"},"code":{"text":"CBC for Evelyn Marsh"},"orderDetail":[{"coding":[{"system":"http://snomed.info/sct","code":"243144002"}]}]}`,
		`{"resourceType":"MessageHeader","eventCoding":{"code":"A01","system":"http://terminology.hl7.org/CodeSystem/v2-0003","display":"ADT^A01"},"source":{"name":"SIMHOSP","_endpoint":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"unknown"}]}},"destination":[{"name":"RAPP","_endpoint":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"unknown"}]}}]}`,
		`{"resourceType":"Appointment","status":"booked","start":"2025-03-14T08:30:00-05:00","end":"2025-03-14T09:00:00-05:00","participant":[{"actor":{"reference":"Patient/p"},"status":"accepted"},{"actor":{"reference":"Practitioner/dr-varma","display":"Dr. Anil Varma"},"required":"required","status":"accepted"}]}`,
		`{"resourceType":"AppointmentResponse","appointment":{"reference":"Appointment/appt-20250314"},"actor":{"reference":"Practitioner/dr-varma"},"participantStatus":"accepted"}`,
		`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"code":{"coding":[{"system":"http://snomed.info/sct","code":"254637007"}]},"stage":[{"summary":{"text":"Stage IIA per Dr. Varma"},"type":{"coding":[{"system":"http://snomed.info/sct","code":"260998006"}]}}]}`,
		`{"resourceType":"Consent","status":"active","scope":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/consentscope","code":"patient-privacy"}]},"category":[{"coding":[{"system":"http://loinc.org","code":"59284-0"}]}],"patient":{"reference":"Patient/p"},"policy":[{"uri":"https://ehr.chesapeake-health.example/consent/evelyn-marsh.pdf"}]}`,
		`{"resourceType":"ImmunizationRecommendation","patient":{"reference":"Patient/p"},"date":"2025-03-14","recommendation":[{"vaccineCode":[{"text":"Shingrix for Evelyn"}],"forecastStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/immunization-recommendation-status","code":"due"}]}}]}`,
		`{"resourceType":"Goal","lifecycleStatus":"active","description":{"coding":[{"system":"http://snomed.info/sct","code":"281004"}]},"subject":{"reference":"Patient/p"},"target":[{"measure":{"text":"HbA1c per Dr. Varma"},"detailQuantity":{"value":7,"unit":"%"}}]}`,
	}
	var docs [][]byte
	for i, in := range inputs {
		out := deidentify(t, []byte(in), testAlias)
		docs = append(docs, []byte(in), out)
		var raw any
		if err := json.Unmarshal([]byte(in), &raw); err != nil {
			t.Fatal(err)
		}
		s := safeharbortest.NewScanner(deidNow.Year())
		s.Collect(raw)
		s.PermitReferences(aliasReference([]string{testSubject, "2b90dd2b-2dab-4c75-9bb9-a355e07401e8"}))
		for _, f := range s.Scan(out) {
			t.Errorf("input %d: class %s at %s", i, f.Class, f.Where)
		}
	}
	for _, inv := range safeharbortest.ValidateFHIR(t, docs) {
		what := "de-identified"
		if inv.Index%2 == 0 {
			what = "raw"
		}
		t.Errorf("%s input %d is not valid FHIR R4 (%s): %s\n%s", what, inv.Index/2, inv.Validator, inv.Message, docs[inv.Index])
	}
}

type synthPayload struct {
	name, typ, patient string
	raw                []byte
}

// synthPayloads generates a 20-patient synthetic data set and returns its
// FHIR payloads.
func synthPayloads(t testing.TB) []synthPayload {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "synth")
	if _, err := synth.Generate(context.Background(), dir, synth.Options{Patients: 20}); err != nil {
		t.Fatal(err)
	}
	mf, err := os.ReadFile(filepath.Join(dir, synth.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []synthPayload
	for line := range strings.SplitSeq(strings.TrimSpace(string(mf)), "\n") {
		var l struct {
			MimeType, File string
			Labels         struct{ Type, Patient string }
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		if l.MimeType != "application/fhir+json" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, l.File))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, synthPayload{name: l.File, typ: l.Labels.Type, patient: l.Labels.Patient, raw: raw})
	}
	return out
}

// TestDeidentifyRules pins the walk's rules on small inputs.
func TestDeidentifyRules(t *testing.T) {
	for _, tc := range deidentifyRuleCases() {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(deidentify(t, []byte(tc.in), testAlias)); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// deidentifyRuleCases are TestDeidentifyRules' cases: a name, an input
// about Patient/p and the walk's output.
func deidentifyRuleCases() []struct{ name, in, want string } {
	dar := `{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}`
	return []struct{ name, in, want string }{
		{"codeable concept text and coding display dropped, local coding dropped",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8480-6","display":"Jane Doe"},{"system":"http://acme.example/codes","code":"X1"}],"text":"Jane Doe"}}`,
			`{"code":{"coding":[{"code":"8480-6","system":"http://loinc.org"}]},"resourceType":"Observation","status":"final"}`},
		{"a recent year as a bare number counts with an age beside it (born in 1929 or 1930)",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueInteger":2000,"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"30972-4"}]},"valueQuantity":{"value":70,"unit":"a","system":"http://unitsofmeasure.org","code":"a"}}]}`,
			`{"code":{"coding":[{"code":"1-8","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"30972-4","system":"http://loinc.org"}]}}],"resourceType":"Observation","status":"final","valueInteger":2000}`},
		{"a recent year in a quantity without unit counts with an age beside it",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":{"value":2000},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"30972-4"}]},"valueQuantity":{"value":70,"unit":"a","system":"http://unitsofmeasure.org","code":"a"}}]}`,
			`{"code":{"coding":[{"code":"1-8","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"30972-4","system":"http://loinc.org"}]}}],"resourceType":"Observation","status":"final","valueQuantity":{"value":2000}}`},
		{"a supportingInfo number under a withheld code is dropped, whatever its category (info says nothing of what it is)",
			`{"resourceType":"ExplanationOfBenefit","status":"active","supportingInfo":[{"sequence":1,"category":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/claiminformationcategory","code":"info"}]},"code":{"coding":[{"system":"http://acme.example/codes","code":"member-no"}]},"valueQuantity":{"value":77441123}},{"sequence":2,"category":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/claiminformationcategory","code":"info"}]},"code":{"text":"zip"},"valueQuantity":{"value":90210}},{"sequence":3,"category":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/claiminformationcategory","code":"info"}]},"valueQuantity":{"value":2}}]}`,
			`{"resourceType":"ExplanationOfBenefit","status":"active","supportingInfo":[{"category":{"coding":[{"code":"info","system":"http://terminology.hl7.org/CodeSystem/claiminformationcategory"}]},"sequence":1},{"category":{"coding":[{"code":"info","system":"http://terminology.hl7.org/CodeSystem/claiminformationcategory"}]},"sequence":2},{"category":{"coding":[{"code":"info","system":"http://terminology.hl7.org/CodeSystem/claiminformationcategory"}]},"sequence":3,"valueQuantity":{"value":2}}]}`},
		{"a goal target's number under a withheld measure is dropped (and the target with it), one under a kept measure kept",
			`{"resourceType":"Goal","lifecycleStatus":"active","description":{"coding":[{"system":"http://snomed.info/sct","code":"281004"}]},"target":[{"measure":{"coding":[{"system":"http://acme.example/codes","code":"member-no"}]},"detailInteger":77441123},{"measure":{"coding":[{"system":"http://loinc.org","code":"39156-5"}]},"detailInteger":25}]}`,
			`{"description":{"coding":[{"code":"281004","system":"http://snomed.info/sct"}]},"lifecycleStatus":"active","resourceType":"Goal","target":[{"detailInteger":25,"measure":{"coding":[{"code":"39156-5","system":"http://loinc.org"}]}}]}`},
		{"a number whose unit is a word naming an identifier, not a unit, is dropped with its quantity; a unit of UCUM or of common clinical use keeps it",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":77441124,"unit":"MRN"},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":77441125,"unit":"acct","system":"http://acme.example/units","code":"acct"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":77441126,"unit":"MRN","system":"http://unitsofmeasure.org","code":"MRN"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":5558675,"unit":"Marsh"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":72,"unit":"beats/min","system":"http://unitsofmeasure.org","code":"/min"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":7.2,"unit":"x10E3/uL"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":120,"unit":"mmHg"}}]}`,
			`{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]},"valueQuantity":{"code":"/min","system":"http://unitsofmeasure.org","unit":"beats/min","value":72}},{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]},"valueQuantity":{"unit":"x10E3/uL","value":7.2}},{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]},"valueQuantity":{"unit":"mmHg","value":120}}],"resourceType":"Observation","status":"final"}`},
		{"a Coverage's costToBeneficiary value is judged by its type, as an Observation's by its code: under a withheld type a bare number is dropped, an amount with its currency and a quantity with its unit kept; under a kept type all kept",
			`{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"Organization/o"}],"costToBeneficiary":[{"type":{"coding":[{"system":"http://acme.example/codes","code":"member-no"}]},"valueQuantity":{"value":77441123}},{"type":{"text":"account"},"valueMoney":{"value":77441124}},{"valueQuantity":{"value":77441125}},{"type":{"coding":[{"system":"http://acme.example/codes","code":"copay"}]},"valueMoney":{"value":25,"currency":"USD"}},{"type":{"coding":[{"system":"http://acme.example/codes","code":"coins"}]},"valueQuantity":{"value":20,"unit":"%","system":"http://unitsofmeasure.org","code":"%"}},{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/coverage-copay-type","code":"gpvisit"}]},"valueMoney":{"value":40,"currency":"USD"}},{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/coverage-copay-type","code":"copaypct"}]},"valueQuantity":{"value":20}}]}`,
			`{"beneficiary":{"reference":"Patient/517ad53f-7745-6881-16ef-28eba30de765"},"costToBeneficiary":[{"valueQuantity":` + dar + `},{"valueMoney":` + dar + `},{"valueQuantity":` + dar + `},{"valueMoney":{"currency":"USD","value":25}},{"valueQuantity":{"code":"%","system":"http://unitsofmeasure.org","unit":"%","value":20}},{"type":{"coding":[{"code":"gpvisit","system":"http://terminology.hl7.org/CodeSystem/coverage-copay-type"}]},"valueMoney":{"currency":"USD","value":40}},{"type":{"coding":[{"code":"copaypct","system":"http://terminology.hl7.org/CodeSystem/coverage-copay-type"}]},"valueQuantity":{"value":20}}],"payor":[` + dar + `],"resourceType":"Coverage","status":"active"}`},
		{"an amount of money under a withheld type (a cost, a task's input) keeps its value with its currency only below 100,000: an account or member number with a currency is dropped",
			`{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"Organization/o"}],"costToBeneficiary":[{"type":{"coding":[{"system":"http://acme.example/codes","code":"member-no"}]},"valueMoney":{"value":77441123,"currency":"USD"}},{"type":{"coding":[{"system":"http://acme.example/codes","code":"acct"}]},"valueMoney":{"value":219099.99,"currency":"USD"}},{"type":{"coding":[{"system":"http://acme.example/codes","code":"copay"}]},"valueMoney":{"value":99999.5,"currency":"USD"}}]}`,
			`{"beneficiary":{"reference":"Patient/517ad53f-7745-6881-16ef-28eba30de765"},"costToBeneficiary":[{"valueMoney":{"currency":"USD"}},{"valueMoney":{"currency":"USD"}},{"valueMoney":{"currency":"USD","value":99999.5}}],"payor":[` + dar + `],"resourceType":"Coverage","status":"active"}`},
		{"a task's input of money under a local type: its value dropped when it has an identifier's size",
			`{"resourceType":"Task","status":"completed","intent":"order","input":[{"type":{"coding":[{"system":"http://acme.example/codes","code":"member-no"}]},"valueMoney":{"value":77441123,"currency":"USD"}},{"type":{"coding":[{"system":"http://acme.example/codes","code":"fee"}]},"valueMoney":{"value":40,"currency":"USD"}}]}`,
			`{"input":[{"type":` + dar + `,"valueMoney":{"currency":"USD"}},{"type":` + dar + `,"valueMoney":{"currency":"USD","value":40}}],"intent":"order","resourceType":"Task","status":"completed"}`},
		{"a payment's amount and adjustment are judged by its type: under a local one money keeps its value with its currency only below 100,000",
			`{"resourceType":"ExplanationOfBenefit","status":"active","payment":{"type":{"coding":[{"system":"http://acme.example/codes","code":"acct"}]},"amount":{"value":77441124,"currency":"USD"},"adjustment":{"value":77441125,"currency":"USD"}}}`,
			`{"payment":{"adjustment":{"currency":"USD"},"amount":{"currency":"USD"}},"resourceType":"ExplanationOfBenefit","status":"active"}`},
		{"a payment of an HL7 payment type keeps its amount",
			`{"resourceType":"ClaimResponse","status":"active","payment":{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/ex-paymenttype","code":"complete"}]},"amount":{"value":135.57,"currency":"USD"}}}`,
			`{"payment":{"amount":{"currency":"USD","value":135.57},"type":{"coding":[{"code":"complete","system":"http://terminology.hl7.org/CodeSystem/ex-paymenttype"}]}},"resourceType":"ClaimResponse","status":"active"}`},
		{"a reconciliation detail's amount is judged by its type",
			`{"resourceType":"PaymentReconciliation","status":"active","detail":[{"type":{"coding":[{"system":"http://acme.example/codes","code":"member-no"}]},"amount":{"value":77441126,"currency":"USD"}},{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/payment-type","code":"payment"}]},"amount":{"value":135.57,"currency":"USD"}}]}`,
			`{"detail":[{"amount":{"currency":"USD"},"type":` + dar + `},{"amount":{"currency":"USD","value":135.57},"type":{"coding":[{"code":"payment","system":"http://terminology.hl7.org/CodeSystem/payment-type"}]}}],"resourceType":"PaymentReconciliation","status":"active"}`},
		{"an adjudication's amount and a claim's total are judged by their category: under a local one money keeps its value with its currency only below 100,000",
			`{"resourceType":"ExplanationOfBenefit","status":"active","item":[{"sequence":1,"adjudication":[{"category":{"coding":[{"system":"http://acme.example/codes","code":"acct"}]},"amount":{"value":77441124,"currency":"USD"}},{"category":{"coding":[{"system":"http://acme.example/codes","code":"copay"}]},"amount":{"value":25,"currency":"USD"}},{"category":{"coding":[{"system":"http://acme.example/codes","code":"acct"}]},"amount":{"value":7744}},{"category":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/adjudication","code":"submitted"}]},"amount":{"value":135.57,"currency":"USD"}}]}],"total":[{"category":{"coding":[{"system":"http://acme.example/codes","code":"member-no"}]},"amount":{"value":77441126,"currency":"USD"}},{"category":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/adjudication","code":"submitted"}]},"amount":{"value":135.57,"currency":"USD"}}]}`,
			`{"item":[{"adjudication":[{"amount":{"currency":"USD"},"category":` + dar + `},{"amount":{"currency":"USD","value":25},"category":` + dar + `},{"category":` + dar + `},{"amount":{"currency":"USD","value":135.57},"category":{"coding":[{"code":"submitted","system":"http://terminology.hl7.org/CodeSystem/adjudication"}]}}],"sequence":1}],"resourceType":"ExplanationOfBenefit","status":"active","total":[{"amount":{"currency":"USD"},"category":` + dar + `},{"amount":{"currency":"USD","value":135.57},"category":{"coding":[{"code":"submitted","system":"http://terminology.hl7.org/CodeSystem/adjudication"}]}}]}`},
		{"a claim's benefit amounts are judged by their type and an adjudication's value by its category: under a local one a bare number is dropped, under HL7's kept",
			`{"resourceType":"ExplanationOfBenefit","status":"active","benefitBalance":[{"category":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/ex-benefitcategory","code":"1"}]},"financial":[{"type":{"coding":[{"system":"http://acme.example/codes","code":"member-no"}]},"allowedUnsignedInt":77441123},{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/benefit-type","code":"visit"}]},"usedUnsignedInt":3}]}],"item":[{"sequence":1,"adjudication":[{"category":{"coding":[{"system":"http://acme.example/codes","code":"acct"}]},"value":77441124},{"category":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/adjudication","code":"benefit"}]},"value":80}]}]}`,
			`{"benefitBalance":[{"category":{"coding":[{"code":"1","system":"http://terminology.hl7.org/CodeSystem/ex-benefitcategory"}]},"financial":[{"type":` + dar + `},{"type":{"coding":[{"code":"visit","system":"http://terminology.hl7.org/CodeSystem/benefit-type"}]},"usedUnsignedInt":3}]}],"item":[{"adjudication":[{"category":` + dar + `},{"category":{"coding":[{"code":"benefit","system":"http://terminology.hl7.org/CodeSystem/adjudication"}]},"value":80}],"sequence":1}],"resourceType":"ExplanationOfBenefit","status":"active"}`},
		{"ICD-9-CM procedure codes named by their OID (THO's NamingSystem ICD-9CM-procedurecodes: 2.16.840.1.113883.6.104, URI http://hl7.org/fhir/sid/icd-9-cm) are judged, and released, as ICD-9-CM: a procedure code kept, an MRN as a code dropped",
			`{"resourceType":"Procedure","status":"completed","subject":{"reference":"Patient/p"},"code":{"coding":[{"system":"urn:oid:2.16.840.1.113883.6.104","code":"36.06"},{"system":"2.16.840.1.113883.6.104","code":"77441123"}]}}`,
			`{"code":{"coding":[{"code":"36.06","system":"http://hl7.org/fhir/sid/icd-9-cm"}]},"resourceType":"Procedure","status":"completed","subject":{"reference":"Patient/517ad53f-7745-6881-16ef-28eba30de765"}}`},
		{"LOINC, SNOMED CT and UCUM named by their OIDs or with https are judged, and released, as under their URIs: an age over 89 dropped, an MRN as a code dropped",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"urn:oid:2.16.840.1.113883.6.1","code":"8867-4"},{"system":"2.16.840.1.113883.6.96","code":"364075005"}]},"valueInteger":72,"component":[{"code":{"coding":[{"system":"https://loinc.org","code":"30525-0"}]},"valueInteger":93},{"code":{"coding":[{"system":"urn:oid:2.16.840.1.113883.6.1","code":"77441123"}]},"valueInteger":5},{"code":{"coding":[{"system":"urn:oid:2.16.840.1.113883.6.1","code":"8310-5"}]},"valueQuantity":{"value":37.1,"unit":"Cel","system":"urn:oid:2.16.840.1.113883.6.8","code":"Cel"}}]}`,
			`{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"},{"code":"364075005","system":"http://snomed.info/sct"}]},"component":[{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}},{"code":{"coding":[{"code":"8310-5","system":"http://loinc.org"}]},"valueQuantity":{"code":"Cel","system":"http://unitsofmeasure.org","unit":"Cel","value":37.1}}],"resourceType":"Observation","status":"final","valueInteger":72}`},
		{"required code left empty gets data-absent-reason",
			`{"resourceType":"Observation","status":"final","code":{"text":"Jane Doe"}}`,
			`{"code":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]},"resourceType":"Observation","status":"final"}`},
		{"patient reference aliased, others dropped, display dropped",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"subject":{"reference":"Patient/p","display":"Jane"},"performer":[{"reference":"Practitioner/9"}]}`,
			`{"code":{"coding":[{"code":"1-8","system":"http://loinc.org"}]},"resourceType":"Observation","status":"final","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"a reference to another patient (a spouse as subscriber, another record) dropped",
			`{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"subscriber":{"reference":"Patient/spouse"},"policyHolder":{"reference":"Patient/spouse"},"relationship":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/subscriber-relationship","code":"spouse"}]},"payor":[{"reference":"Patient/spouse"}]}`,
			`{"beneficiary":{"reference":"Patient/` + testAlias("p") + `"},"payor":[{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}],"relationship":{"coding":[{"code":"spouse","system":"http://terminology.hl7.org/CodeSystem/subscriber-relationship"}]},"resourceType":"Coverage","status":"active"}`},
		{"required subject that is not a patient gets data-absent-reason",
			`{"resourceType":"Condition","subject":{"reference":"Group/g1"}}`,
			`{"resourceType":"Condition","subject":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}}`},
		{"dates to the year, instant dropped, nested extension with a date dropped",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"effectiveDateTime":"2025-03-14T08:42:17-05:00","issued":"2025-03-14T08:44:59Z","valueQuantity":{"value":1,"unit":"mmHg","extension":[{"url":"http://x.example/at","valueDateTime":"2025-03-14"}]}}`,
			`{"code":{"coding":[{"code":"1-8","system":"http://loinc.org"}]},"effectiveDateTime":"2025","resourceType":"Observation","status":"final","valueQuantity":{"unit":"mmHg","value":1}}`},
		// A postal code alone does not say the address is in the United
		// States (Paris's 75004 came out "750"): it is dropped.
		{"address: state, ZIP3, country only; restricted ZIP3 is 000; a postal code naming no country nor state dropped",
			`{"resourceType":"Patient","address":[{"line":["1 Main"],"city":"X","state":"VT","postalCode":"05901-1234","country":"US","period":{"start":"2001"}},{"postalCode":"21620"},{"postalCode":"21620","state":"MD"}]}`,
			`{"address":[{"country":"US","postalCode":"000","state":"VT"},{"postalCode":"216","state":"MD"}],"resourceType":"Patient"}`},
		// The 2010 Census's restricted ZIP3s (Dallas's 753, Houston's
		// 772, Washington's 202 and 204, Alabama's 369) were released
		// as their digits until h-deid11 (restrictedZIP3).
		{"address: a ZIP3 restricted by the 2010 Census is 000, a populated neighbour kept",
			`{"resourceType":"Patient","address":[{"state":"TX","postalCode":"75301","country":"US"},{"state":"TX","postalCode":"77210"},{"state":"DC","postalCode":"20201"},{"state":"DC","postalCode":"20415"},{"state":"AL","postalCode":"36901"},{"state":"TX","postalCode":"75201"}]}`,
			`{"address":[{"country":"US","postalCode":"000","state":"TX"},{"postalCode":"000","state":"TX"},{"postalCode":"000","state":"DC"},{"postalCode":"000","state":"DC"},{"postalCode":"000","state":"AL"},{"postalCode":"752","state":"TX"}],"resourceType":"Patient"}`},
		// A name in braces in small letters, in capitals or run together
		// was released as a unit with its number until h-deid11
		// (knownAnnotation).
		{"a name in an annotation is no unit: the quantity is dropped whole, a UCUM coding too; a UCUM code beside it keeps the value",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"85354-9"}]},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]},"valueQuantity":{"value":77441124,"unit":"{smith}"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8462-4"}]},"valueQuantity":{"value":80,"unit":"mm[Hg]{JaneDoe}","system":"http://unitsofmeasure.org","code":"mm[Hg]"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]},"valueCodeableConcept":{"coding":[{"system":"http://unitsofmeasure.org","code":"mg{SMITH}"}]}},{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":72,"unit":"{beats}/min","system":"http://unitsofmeasure.org","code":"{beats}/min"}}]}`,
			`{"code":{"coding":[{"code":"85354-9","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"8480-6","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8462-4","system":"http://loinc.org"}]},"valueQuantity":{"code":"mm[Hg]","system":"http://unitsofmeasure.org","value":80}},{"code":{"coding":[{"code":"8480-6","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]},"valueQuantity":{"code":"{beats}/min","system":"http://unitsofmeasure.org","unit":"{beats}/min","value":72}}],"resourceType":"Observation","status":"final"}`},
		// A form's capitalisation of pg/mL, fL, g and each was dropped
		// with its value until h-deid11 (capitalisedSymbols); the
		// identifiers and names beside such units stay dropped.
		{"capitalised Pg/mL, Fl, Gm, Ea are units and keep their values; the identifier beside them dropped, and In (a name's form) with its value",
			`{"resourceType":"Observation","status":"final","identifier":[{"system":"http://acme.example/mrn","value":"77441124"}],"code":{"coding":[{"system":"http://loinc.org","code":"85354-9"}]},"valueQuantity":{"value":88,"unit":"Fl"},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"2132-9"}]},"valueQuantity":{"value":450,"unit":"Pg/mL"}},{"code":{"coding":[{"system":"http://loinc.org","code":"2132-9"}]},"valueQuantity":{"value":2,"unit":"Gm"}},{"code":{"coding":[{"system":"http://loinc.org","code":"2132-9"}]},"valueQuantity":{"value":1,"unit":"Ea"}},{"code":{"coding":[{"system":"http://loinc.org","code":"2132-9"}]},"valueQuantity":{"value":77441124,"unit":"In"}}]}`,
			`{"code":{"coding":[{"code":"85354-9","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"2132-9","system":"http://loinc.org"}]},"valueQuantity":{"unit":"Pg/mL","value":450}},{"code":{"coding":[{"code":"2132-9","system":"http://loinc.org"}]},"valueQuantity":{"unit":"Gm","value":2}},{"code":{"coding":[{"code":"2132-9","system":"http://loinc.org"}]},"valueQuantity":{"unit":"Ea","value":1}},{"code":{"coding":[{"code":"2132-9","system":"http://loinc.org"}]}}],"resourceType":"Observation","status":"final","valueQuantity":{"unit":"Fl","value":88}}`},
		// A unit word written as a name is, alone, was released with its
		// number until h-deid11 (nameCaseUnit).
		{"a unit word capitalised or in capitals alone is dropped with its quantity, beside an agreeing UCUM code kept, in small letters kept",
			`{"resourceType":"Observation","status":"final","identifier":[{"value":"77441124"}],"code":{"coding":[{"system":"http://loinc.org","code":"85354-9"}]},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"2132-9"}]},"valueQuantity":{"value":77441124,"unit":"Stone"}},{"code":{"coding":[{"system":"http://loinc.org","code":"2132-9"}]},"valueQuantity":{"value":5558675,"unit":"MIN"}},{"code":{"coding":[{"system":"http://loinc.org","code":"2132-9"}]},"valueQuantity":{"value":12,"unit":"Days","system":"http://unitsofmeasure.org","code":"d"}},{"code":{"coding":[{"system":"http://loinc.org","code":"2132-9"}]},"valueQuantity":{"value":12,"unit":"stone"}}]}`,
			`{"code":{"coding":[{"code":"85354-9","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"2132-9","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"2132-9","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"2132-9","system":"http://loinc.org"}]},"valueQuantity":{"code":"d","system":"http://unitsofmeasure.org","unit":"Days","value":12}},{"code":{"coding":[{"code":"2132-9","system":"http://loinc.org"}]},"valueQuantity":{"unit":"stone","value":12}}],"resourceType":"Observation","status":"final"}`},
		{"birthDate: year, withheld over 89; allowed extension kept",
			`{"resourceType":"Patient","birthDate":"1980-05-06","extension":[{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"F"},{"url":"http://x.example/mmn","valueString":"Smith"}]}`,
			`{"birthDate":"1980","extension":[{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"F"}],"resourceType":"Patient"}`},
		{"US Core race and ethnicity keep their OMB categories and detailed codes of CDC Race & Ethnicity, system and code: text and displays dropped (both extensions dropped whole until h-race)",
			usCorePatient,
			`{"birthDate":"2007","extension":[{"extension":[{"url":"ombCategory","valueCoding":{"code":"2106-3","system":"urn:oid:2.16.840.1.113883.6.238"}},{"url":"ombCategory","valueCoding":{"code":"1002-5","system":"urn:oid:2.16.840.1.113883.6.238"}},{"url":"ombCategory","valueCoding":{"code":"2028-9","system":"urn:oid:2.16.840.1.113883.6.238"}},{"url":"detailed","valueCoding":{"code":"1586-7","system":"urn:oid:2.16.840.1.113883.6.238"}},{"url":"detailed","valueCoding":{"code":"2036-2","system":"urn:oid:2.16.840.1.113883.6.238"}}],"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-race"},{"extension":[{"url":"ombCategory","valueCoding":{"code":"2135-2","system":"urn:oid:2.16.840.1.113883.6.238"}},{"url":"detailed","valueCoding":{"code":"2184-0","system":"urn:oid:2.16.840.1.113883.6.238"}},{"url":"detailed","valueCoding":{"code":"2148-5","system":"urn:oid:2.16.840.1.113883.6.238"}}],"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-ethnicity"},{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"F"}],"gender":"female","resourceType":"Patient"}`},
		{"US Core race keeps no text, local code, identifier as a code, string, nested extension, id or value of its own; an ethnicity of its text alone is dropped whole",
			raceLeaks,
			`{"extension":[{"extension":[{"url":"ombCategory","valueCoding":{"code":"2054-5","system":"urn:oid:2.16.840.1.113883.6.238"}}],"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-race"}],"gender":"female","resourceType":"Patient"}`},
		{"age over 89 dropped",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"onsetAge":{"value":92,"unit":"a"}}`,
			`{"resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"contained renumbered, local reference follows, unreferenced contained dropped",
			`{"resourceType":"MedicationRequest","status":"active","intent":"order","subject":{"reference":"Patient/p"},"contained":[{"resourceType":"Medication","id":"m-jane","code":{"coding":[{"system":"http://www.nlm.nih.gov/research/umls/rxnorm","code":"1"}]}},{"resourceType":"Practitioner","id":"dr","name":[{"family":"Who"}]}],"medicationReference":{"reference":"#m-jane"}}`,
			`{"contained":[{"code":{"coding":[{"code":"1","system":"http://www.nlm.nih.gov/research/umls/rxnorm"}]},"id":"c1","resourceType":"Medication"}],"intent":"order","medicationReference":{"reference":"#c1"},"resourceType":"MedicationRequest","status":"active","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"unknown modifier extension drops the element",
			`{"resourceType":"Patient","contact":[{"modifierExtension":[{"url":"http://x.example/not","valueBoolean":true}],"gender":"male"},{"gender":"female"}]}`,
			`{"contact":[{"gender":"female"}],"resourceType":"Patient"}`},
		{"required instant: primitive companion with data-absent-reason",
			`{"resourceType":"Provenance","target":[{"reference":"Patient/p"}],"recorded":"2024-10-02T10:41:13Z"}`,
			`{"_recorded":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]},"resourceType":"Provenance","target":[{"reference":"Patient/` + testAlias("p") + `"}]}`},
		{"an age in a unit of time over 89 dropped, in any quantity; an age Observation's unitless values are years",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":94,"unit":"years","system":"http://unitsofmeasure.org","code":"a"},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"21612-7"}]},"valueInteger":93},{"code":{"coding":[{"system":"http://loinc.org","code":"29553-5"}]},"valueQuantity":{"value":91}},{"code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]},"valueQuantity":{"value":120,"unit":"mm[Hg]"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":1100,"unit":"months"}}]}`,
			`{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"21612-7","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"29553-5","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8480-6","system":"http://loinc.org"}]},"valueQuantity":{"unit":"mm[Hg]","value":120}},{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]}}],"resourceType":"Observation","status":"final"}`},
		{"age ranges: unitless values are years, ages over 89 dropped, others kept; an age in days is no age over 89",
			`{"resourceType":"FamilyMemberHistory","status":"completed","patient":{"reference":"Patient/p"},"relationship":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode","code":"MTH"}]},"ageRange":{"low":{"value":96},"high":{"value":99}},"deceasedAge":{"value":95,"unit":"d","system":"http://unitsofmeasure.org","code":"d"},"condition":[{"code":{"coding":[{"system":"http://snomed.info/sct","code":"38341003"}]},"onsetRange":{"low":{"value":41,"unit":"a"},"high":{"value":93,"unit":"a"}}}]}`,
			`{"condition":[{"code":{"coding":[{"code":"38341003","system":"http://snomed.info/sct"}]},"onsetRange":{"low":{"unit":"a","value":41}}}],"deceasedAge":{"code":"d","system":"http://unitsofmeasure.org","unit":"d","value":95},"patient":{"reference":"Patient/` + testAlias("p") + `"},"relationship":{"coding":[{"code":"MTH","system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode"}]},"resourceType":"FamilyMemberHistory","status":"completed"}`},
		{"a reference range for ages over 89 loses its age",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"2160-0"}]},"referenceRange":[{"low":{"value":0.6,"unit":"mg/dL"},"age":{"low":{"value":90}}},{"age":{"low":{"value":18},"high":{"value":65}}}]}`,
			`{"code":{"coding":[{"code":"2160-0","system":"http://loinc.org"}]},"referenceRange":[{"low":{"unit":"mg/dL","value":0.6}},{"age":{"high":{"value":65},"low":{"value":18}}}],"resourceType":"Observation","status":"final"}`},
		{"dates of birth anywhere: withheld over 89, else the year",
			`{"resourceType":"FamilyMemberHistory","status":"completed","patient":{"reference":"Patient/p"},"relationship":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode","code":"FTH"}]},"bornDate":"1925-03-14","condition":[{"code":{"coding":[{"system":"http://snomed.info/sct","code":"38341003"}]},"contributedToDeath":true}]}`,
			`{"_bornDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]},"condition":[{"code":{"coding":[{"code":"38341003","system":"http://snomed.info/sct"}]},"contributedToDeath":true}],"patient":{"reference":"Patient/` + testAlias("p") + `"},"relationship":{"coding":[{"code":"FTH","system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode"}]},"resourceType":"FamilyMemberHistory","status":"completed"}`},
		{"born as a period: each end judged as a birth date",
			`{"resourceType":"FamilyMemberHistory","status":"completed","patient":{"reference":"Patient/p"},"relationship":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode","code":"FTH"}]},"bornPeriod":{"start":"1920","end":"1960-02-03"}}`,
			`{"bornPeriod":{"end":"1960"},"patient":{"reference":"Patient/` + testAlias("p") + `"},"relationship":{"coding":[{"code":"FTH","system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode"}]},"resourceType":"FamilyMemberHistory","status":"completed"}`},
		{"a birth date Observation's value judged as a birth date",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"21112-8"}]},"valueDateTime":"1930-05-01","component":[{"code":{"coding":[{"system":"http://loinc.org","code":"80904-6"}]},"valueDateTime":"1990"},{"code":{"coding":[{"system":"http://loinc.org","code":"80904-6"}]},"valueInteger":1990}]}`,
			`{"code":{"coding":[{"code":"21112-8","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"80904-6","system":"http://loinc.org"}]},"valueDateTime":"1990"},{"code":{"coding":[{"code":"80904-6","system":"http://loinc.org"}]}}],"resourceType":"Observation","status":"final"}`},
		{"an age at an event and the event's year that tell a birth year of someone now over 89: the age is withheld",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"onsetAge":{"value":70,"unit":"a"},"recordedDate":"2000-04-02"}`,
			`{"recordedDate":"2000","resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"an age at an event and the event's year of someone now 89 or younger: both kept",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"onsetAge":{"value":62,"unit":"a"},"recordedDate":"2000-04-02"}`,
			`{"onsetAge":{"unit":"a","value":62},"recordedDate":"2000","resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"an age in one entry of a Bundle and a year in another: one document, the age withheld",
			`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Condition","subject":{"reference":"Patient/p"},"onsetAge":{"value":70,"unit":"a"}}},{"resource":{"resourceType":"Encounter","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"AMB"},"period":{"start":"2000-04-02"}}}]}`,
			`{"entry":[{"resource":{"resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}},{"resource":{"class":{"code":"AMB","system":"http://terminology.hl7.org/CodeSystem/v3-ActCode"},"period":{"start":"2000"},"resourceType":"Encounter","status":"finished"}}],"resourceType":"Bundle","type":"collection"}`},
		{"a geocode dropped, in a contained Location too",
			`{"resourceType":"Encounter","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HH"},"contained":[{"resourceType":"Location","id":"home","position":{"longitude":-71.1003,"latitude":42.3876},"address":{"state":"MA","postalCode":"02143"}}],"location":[{"location":{"reference":"#home"}}]}`,
			`{"class":{"code":"HH","system":"http://terminology.hl7.org/CodeSystem/v3-ActCode"},"contained":[{"address":{"postalCode":"021","state":"MA"},"id":"c1","resourceType":"Location"}],"location":[{"location":{"reference":"#c1"}}],"resourceType":"Encounter","status":"finished"}`},
		{"postal codes: ZIP3 in the United States only",
			`{"resourceType":"Patient","address":[{"city":"Berlin","postalCode":"10117","country":"DE"},{"postalCode":"75007","state":"Ile-de-France"},{"postalCode":"02143","state":"MA"},{"postalCode":"02143","country":"United States"},{"postalCode":"101","country":"IS"},{"postalCode":"00901","country":"USA","state":"PR"}]}`,
			`{"address":[{"country":"DE"},{"postalCode":"021","state":"MA"},{"country":"United States","postalCode":"021"},{"country":"IS"},{"country":"USA","postalCode":"009","state":"PR"}],"resourceType":"Patient"}`},
		{"a state or country that is free text dropped; codes and names of states kept",
			`{"resourceType":"Patient","address":[{"country":"US","postalCode":"62704","state":"Sangamon County, Springfield IL 62704"},{"state":"Cook County","postalCode":"60614"},{"country":"NLD","state":"Zwolle"},{"country":"Netherlands","state":"NL-OV"},{"state":"New York"}]}`,
			`{"address":[{"country":"US","postalCode":"627"},{"country":"NLD"},{"state":"NL-OV"},{"state":"New York"}],"resourceType":"Patient"}`},
		{"codes with Unicode spaces or invisible characters dropped; an HL7 system that is a path dropped",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"Jane\u00a0Roe\u00a0555\u00a0201\u00a04477"}]},"verificationStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-ver-status","code":"confirmed\u200bMRN\u200b00123456"}]},"category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/patient/Jane.Roe/ssn/123456789","code":"x"},{"system":"http://terminology.hl7.org/CodeSystem/condition-category","code":"problem-list-item"}]}]}`,
			`{"category":[{"coding":[{"code":"problem-list-item","system":"http://terminology.hl7.org/CodeSystem/condition-category"}]}],"resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"ages in other spellings and SNOMED age concepts judged; the age-and-year rule counts the birthday not yet passed",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://snomed.info/sct","code":"424144002"}]},"valueInteger":97,"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":95,"unit":"Yrs."}},{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":95,"unit":"years old"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":95,"unit":"y/o"}}]}`,
			`{"code":{"coding":[{"code":"424144002","system":"http://snomed.info/sct"}]},"component":[{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8867-4","system":"http://loinc.org"}]}}],"resourceType":"Observation","status":"final"}`},
		{"an age at onset that, with the year recorded, may mean 90 today: withheld",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"onsetAge":{"value":53,"unit":"a","code":"a"},"recordedDate":"1990-01-01"}`,
			`{"recordedDate":"1990","resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"a measurement at birth dates the birth; a birth date with a zone is judged a day early",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8339-4"}]},"effectiveDateTime":"1931-02-03","valueQuantity":{"value":3.2,"unit":"kg"},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"21112-8"}]},"valueDateTime":"1936-11-02T01:00:00+14:00"}]}`,
			`{"code":{"coding":[{"code":"8339-4","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"21112-8","system":"http://loinc.org"}]}}],"resourceType":"Observation","status":"final","valueQuantity":{"unit":"kg","value":3.2}}`},
		{"codes of FHIR's own systems and of DICOM kept; FHIR identifier systems are no code systems",
			`{"resourceType":"ImagingStudy","status":"available","subject":{"reference":"Patient/p"},"modality":[{"system":"http://dicom.nema.org/resources/ontology/DCM","code":"CT"}],"reasonCode":[{"coding":[{"system":"http://hl7.org/fhir/sid/us-ssn","code":"123456789"},{"system":"http://hl7.org/fhir/device-action","code":"implanted"}]}]}`,
			`{"modality":[{"code":"CT","system":"http://dicom.nema.org/resources/ontology/DCM"}],"reasonCode":[{"coding":[{"code":"implanted","system":"http://hl7.org/fhir/device-action"}]}],"resourceType":"ImagingStudy","status":"available","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"estimatedAge goes with a withheld age (fhs-2)",
			`{"resourceType":"FamilyMemberHistory","status":"completed","patient":{"reference":"Patient/p"},"relationship":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode","code":"MTH"}]},"ageAge":{"value":95,"unit":"a"},"estimatedAge":true}`,
			`{"patient":{"reference":"Patient/` + testAlias("p") + `"},"relationship":{"coding":[{"code":"MTH","system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode"}]},"resourceType":"FamilyMemberHistory","status":"completed"}`},
		{"free text in a code or a unit dropped; an allowed extension only with its own codes; a malformed integer dropped",
			`{"resourceType":"Patient","language":"Jane Roe's preferred: en","gender":"female","multipleBirthInteger":1e400,"extension":[{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueString":"Jane Roe"},{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"Jane"},{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"M","extension":[{"url":"http://x.example/by","valueString":"Jane Roe"}]}]}`,
			`{"extension":[{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"M"}],"gender":"female","resourceType":"Patient"}`},
		{"a unit that is prose dropped, its UCUM code kept; a duration in days kept",
			`{"resourceType":"MedicationRequest","status":"active","intent":"order","subject":{"reference":"Patient/p"},"dosageInstruction":[{"doseAndRate":[{"doseQuantity":{"value":5,"unit":"mg (per Dr. Alvarez, Mercy)","system":"http://unitsofmeasure.org","code":"mg"}}]}],"dispenseRequest":{"expectedSupplyDuration":{"value":30,"unit":"days","system":"http://unitsofmeasure.org","code":"d"}}}`,
			`{"dispenseRequest":{"expectedSupplyDuration":{"code":"d","system":"http://unitsofmeasure.org","unit":"days","value":30}},"dosageInstruction":[{"doseAndRate":[{"doseQuantity":{"code":"mg","system":"http://unitsofmeasure.org","value":5}}]}],"intent":"order","resourceType":"MedicationRequest","status":"active","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"a questionnaire answer is judged without its question: a date as a date of birth, a number dropped; codings kept",
			`{"resourceType":"QuestionnaireResponse","status":"completed","subject":{"reference":"Patient/p"},"item":[{"linkId":"Practitioner.birthDate","answer":[{"valueDate":"1931-10-22"}]},{"linkId":"PractitionerRole.period.start","answer":[{"valueDate":"2020-01-20"}]},{"linkId":"ssn","answer":[{"valueInteger":912448123}]},{"linkId":"weight","answer":[{"valueDecimal":3.75}]},{"linkId":"Practitioner.gender","answer":[{"valueCoding":{"system":"http://hl7.org/fhir/administrative-gender","code":"male"}}]}]}`,
			`{"item":[{"_linkId":` + dar + `},{"_linkId":` + dar + `,"answer":[{"valueDate":"2020"}]},{"_linkId":` + dar + `},{"_linkId":` + dar + `},{"_linkId":` + dar + `,"answer":[{"valueCoding":{"code":"male","system":"http://hl7.org/fhir/administrative-gender"}}]}],"resourceType":"QuestionnaireResponse","status":"completed","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"an open value[x] (Task.input, Parameters) is judged without its meaning: its code dropped, its date as a date of birth",
			`{"resourceType":"Task","status":"requested","intent":"order","for":{"reference":"Patient/p"},"input":[{"type":{"coding":[{"system":"http://loinc.org","code":"76435-7"}]},"valueCode":"W123456789"},{"type":{"text":"dob"},"valueDate":"1930-01-01"},{"type":{"text":"n"},"valueInteger":12}],"output":[{"type":{"text":"user"},"valueCode":"jane.doe"}]}`,
			`{"for":{"reference":"Patient/` + testAlias("p") + `"},"input":[{"_valueCode":` + dar + `,"type":{"coding":[{"code":"76435-7","system":"http://loinc.org"}]}},{"_valueDate":` + dar + `,"type":` + dar + `},{"_valueInteger":` + dar + `,"type":` + dar + `}],"intent":"order","output":[{"_valueCode":` + dar + `,"type":` + dar + `}],"resourceType":"Task","status":"requested"}`},
		{"a Parameters parameter whose value was dropped is dropped (inv-1)",
			`{"resourceType":"Parameters","parameter":[{"name":"mrn","valueCode":"MRN77441123"},{"name":"flag","valueBoolean":true}]}`,
			`{"parameter":[{"_name":` + dar + `,"valueBoolean":true}],"resourceType":"Parameters"}`},
		{"integers beyond FHIR R4's 32 bits dropped",
			`{"resourceType":"ImagingStudy","status":"available","subject":{"reference":"Patient/p"},"numberOfSeries":6175551234,"numberOfInstances":2,"series":[{"uid":"1.2","number":3735064194,"modality":{"system":"http://dicom.nema.org/resources/ontology/DCM","code":"DX"},"instance":[{"uid":"1.2.1","number":0,"sopClass":{"system":"urn:ietf:rfc:3986","code":"urn:oid:1.2.840.10008.5.1.4.1.1.2"}}]}]}`,
			`{"numberOfInstances":2,"resourceType":"ImagingStudy","series":[{"_uid":` + dar + `,"instance":[{"_uid":` + dar + `,"number":0,"sopClass":` + dar + `}],"modality":{"code":"DX","system":"http://dicom.nema.org/resources/ontology/DCM"}}],"status":"available","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"a bare whole number of nine digits or more (a value[x], a quantity without unit) dropped; a measurement with its unit kept",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":912448123,"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"777-3"}]},"valueQuantity":{"value":250000000,"unit":"/L","system":"http://unitsofmeasure.org","code":"/L"}},{"code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":{"value":10987654321}},{"code":{"coding":[{"system":"http://loinc.org","code":"2-6"}]},"valueDecimal":123456789.5}]}`,
			`{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"777-3","system":"http://loinc.org"}]},"valueQuantity":{"code":"/L","system":"http://unitsofmeasure.org","unit":"/L","value":250000000}},{"code":{"coding":[{"code":"1-8","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"2-6","system":"http://loinc.org"}]}}],"resourceType":"Observation","status":"final"}`},
		{"an ISO 3166-2 code of a unit smaller than a state dropped; first-level subdivisions kept",
			`{"resourceType":"Patient","address":[{"city":"London","state":"GB-LND","country":"GB"},{"state":"GB-CMD"},{"state":"FR-75","country":"FR"},{"state":"NL-BQ2","country":"NL"},{"state":"ES-M"},{"state":"AU-NSW","country":"AU"},{"state":"CA-ON"},{"state":"DE-BE"}]}`,
			`{"address":[{"country":"GB"},{"country":"FR"},{"country":"NL"},{"country":"AU","state":"AU-NSW"},{"state":"CA-ON"},{"state":"DE-BE"}],"resourceType":"Patient"}`},
		{"a country or territory of 20,000 people or fewer dropped (by any ISO 3166 code), the US Minor Outlying Islands as a state too; Mississippi and Virginia kept",
			`{"resourceType":"Patient","address":[{"country":"PN"},{"country":"PCN","state":"Adamstown"},{"country":"574"},{"state":"UM","postalCode":"96898"},{"state":"US-UM"},{"state":"MS","country":"US"},{"state":"VA"},{"country":"NZ"}]}`,
			`{"address":[{"postalCode":"968"},{"country":"US","state":"MS"},{"state":"VA"},{"country":"NZ"}],"resourceType":"Patient"}`},
		{"a US address without country whose ZIP is its state's though the ZIP3 is mostly a neighbour's (USPS ZIP Locale Detail: Fishers Island NY 06390, Alta WY 83414, Rossville GA 37316, Dulles VA 20041, Bristol VA 37620, Texarkana AR 75504, Lemmon ND 57640) keeps state and ZIP3; Milan's MI 20121 still keeps neither",
			`{"resourceType":"Patient","address":[{"state":"NY","postalCode":"06390"},{"state":"WY","postalCode":"83414"},{"state":"GA","postalCode":"37316"},{"state":"VA","postalCode":"20041"},{"state":"VA","postalCode":"37620"},{"state":"AR","postalCode":"75504"},{"state":"ND","postalCode":"57640"},{"state":"MI","postalCode":"20121"}]}`,
			`{"address":[{"postalCode":"000","state":"NY"},{"postalCode":"834","state":"WY"},{"postalCode":"373","state":"GA"},{"postalCode":"200","state":"VA"},{"postalCode":"376","state":"VA"},{"postalCode":"755","state":"AR"},{"postalCode":"576","state":"ND"}],"resourceType":"Patient"}`},
		{"an ISO 3166-2 code of a country's first-level subdivisions is one of its codes, not any letters after the country's: BR-FN (Fernando de Noronha, some 3,000 people, a code until 2007) dropped; BR-PE, IN-OR and IN-OD, MX-CMX kept",
			`{"resourceType":"Patient","address":[{"state":"BR-FN","country":"BR"},{"state":"BR-PE"},{"state":"DE-XX"},{"state":"IN-OR"},{"state":"IN-OD"},{"state":"MX-CMX"},{"state":"MX-ABC"}]}`,
			`{"address":[{"country":"BR"},{"state":"BR-PE"},{"state":"IN-OR"},{"state":"IN-OD"},{"state":"MX-CMX"}],"resourceType":"Patient"}`},
		{"a coding of the root of FHIR's identifier systems (http://hl7.org/fhir/sid) dropped",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"code":{"coding":[{"system":"http://hl7.org/fhir/sid","code":"W123456789"},{"system":"http://hl7.org/fhir/sid/ndc","code":"0069-3150-83"}]}}`,
			`{"code":{"coding":[{"code":"0069-3150-83","system":"http://hl7.org/fhir/sid/ndc"}]},"resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"a unit text or UCUM code holding the digits of an identifier dropped; units with digits kept; a quantity whose unit and code both are dropped is dropped whole",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"777-3"},{"system":"http://unitsofmeasure.org","code":"{MRN77441123}"}]},"valueQuantity":{"value":1,"unit":"912448123","system":"http://unitsofmeasure.org","code":"912448123"},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"777-3"}]},"valueQuantity":{"value":250,"unit":"10*3/uL","system":"http://unitsofmeasure.org","code":"10*3/uL"}}]}`,
			`{"code":{"coding":[{"code":"777-3","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"777-3","system":"http://loinc.org"}]},"valueQuantity":{"code":"10*3/uL","system":"http://unitsofmeasure.org","unit":"10*3/uL","value":250}}],"resourceType":"Observation","status":"final"}`},
		{"a code of HL7's or FHIR's code systems holding the digits of an identifier dropped; long SNOMED CT and LOINC codes kept",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"active"}]},"category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0203","code":"912448123"},{"system":"http://hl7.org/fhir/condition-category","code":"MR77441123"}]}],"code":{"coding":[{"system":"http://snomed.info/sct","code":"443391000124108"},{"system":"http://loinc.org","code":"100081-9"}]}}`,
			`{"clinicalStatus":{"coding":[{"code":"active","system":"http://terminology.hl7.org/CodeSystem/condition-clinical"}]},"code":{"coding":[{"code":"443391000124108","system":"http://snomed.info/sct"},{"code":"100081-9","system":"http://loinc.org"}]},"resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"a code element or a BCP-47 code holding the digits of an identifier dropped",
			`{"resourceType":"Patient","language":"en-x-912448123","gender":"female","communication":[{"language":{"coding":[{"system":"urn:ietf:bcp:47","code":"en-x-7744112"},{"system":"urn:ietf:bcp:47","code":"en-US"}]}}]}`,
			`{"communication":[{"language":{"coding":[{"code":"en-US","system":"urn:ietf:bcp:47"}]}}],"gender":"female","resourceType":"Patient"}`},
		{"a coding whose code has not the form of its terminology's codes (a name as a SNOMED CT code, an MRN as a LOINC code) dropped",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"code":{"coding":[{"system":"http://snomed.info/sct","code":"JaneRoe"},{"system":"http://loinc.org","code":"MRN-77441123"},{"system":"http://hl7.org/fhir/sid/icd-10-cm","code":"Whittingham"},{"system":"http://hl7.org/fhir/sid/cvx","code":"W1234"},{"system":"http://snomed.info/sct","code":"44054006"},{"system":"http://loinc.org","code":"LA6751-7"},{"system":"http://hl7.org/fhir/sid/icd-10-cm","code":"E11.9"}]}}`,
			`{"code":{"coding":[{"code":"44054006","system":"http://snomed.info/sct"},{"code":"LA6751-7","system":"http://loinc.org"},{"code":"E11.9","system":"http://hl7.org/fhir/sid/icd-10-cm"}]},"resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"an element the walk leaves empty is dropped whole, not kept for an invariant's data-absent-reason (pat-1)",
			`{"resourceType":"Patient","gender":"female","contact":[{"name":{"family":"Marsh"},"telecom":[{"system":"phone","value":"410-555-0145"}]},{"relationship":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0131","code":"N"}]}],"name":{"family":"Marsh"}}]}`,
			`{"contact":[{"name":` + dar + `,"relationship":[{"coding":[{"code":"N","system":"http://terminology.hl7.org/CodeSystem/v2-0131"}]}]}],"gender":"female","resourceType":"Patient"}`},
		{"a Ratio whose bare numerator was dropped keeps a data-absent-reason for it (rat-1: both or neither; the validators do not check it)",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueRatio":{"numerator":{"value":912448123},"denominator":{"value":1}}}`,
			`{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"resourceType":"Observation","status":"final","valueRatio":{"denominator":{"value":1},"numerator":` + dar + `}}`},
		// HL7's own R4 examples write a tablet's strength so
		// (Medication-med0304.json, MedicationStatement-example001.json,
		// Medication-med0313.json's amount "per vial": a denominator coded
		// in v3-orderableDrugForm or medicationknowledge-package-type, no
		// unit text), and the walk, which keeps a quantity's code only for
		// UCUM and ISO 4217, dropped the denominator and left the
		// numerator alone (rego TestR4ExamplesViews, by the invariants).
		// (Since h-terms a code of the code system's is kept, TAB; med0304's
		// "Tab" is none.)
		{"a Ratio whose denominator was dropped keeps a data-absent-reason for it (rat-1: a numerator needs its denominator)",
			`{"resourceType":"Medication","ingredient":[{"itemCodeableConcept":{"coding":[{"system":"http://snomed.info/sct","code":"387138002"}]},"strength":{"numerator":{"value":2,"system":"http://unitsofmeasure.org","code":"mg"},"denominator":{"value":1,"system":"http://terminology.hl7.org/CodeSystem/v3-orderableDrugForm","code":"Tab"}}}]}`,
			`{"ingredient":[{"itemCodeableConcept":{"coding":[{"code":"387138002","system":"http://snomed.info/sct"}]},"strength":{"denominator":` + dar + `,"numerator":{"code":"mg","system":"http://unitsofmeasure.org","value":2}}}],"resourceType":"Medication"}`},
		{"a UCUM code of a quantity that has not UCUM's form (a serial, a plate) dropped, its unit kept; a quantity without system keeps no code",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":5,"unit":"mg","system":"http://unitsofmeasure.org","code":"SN4C7Q2Z9"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":5,"unit":"mg","code":"mg"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":120,"unit":"mm[Hg]","system":"http://unitsofmeasure.org","code":"mm[Hg]"}}]}`,
			`{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"valueQuantity":{"unit":"mg","value":5}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"valueQuantity":{"unit":"mg","value":5}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"valueQuantity":{"code":"mm[Hg]","system":"http://unitsofmeasure.org","unit":"mm[Hg]","value":120}}],"resourceType":"Observation","status":"final"}`},
		// The shape of eCR's Country of usual residence Observation
		// (HL7/case-reporting, input/fsh/instances/observation-country-
		// of-residence-*.fsh, CC0: LOINC 77983-5, an ISO 3166 coding) and
		// its travel history's coded location, with codes of the areas an
		// address's country and state withhold.
		{"an ISO 3166 coding of a country of 20,000 people or fewer or of a subdivision smaller than a state dropped, as in an address; countries and first-level subdivisions kept",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"77983-5"}]},"subject":{"reference":"Patient/p"},"effectiveDateTime":"2020-11-10T22:33:22Z","valueCodeableConcept":{"coding":[{"system":"urn:iso:std:iso:3166","code":"PN"}]},"component":[{"code":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ParticipationType","code":"LOC"}]},"valueCodeableConcept":{"coding":[{"system":"urn:iso:std:iso:3166","code":"GB-LND"},{"system":"urn:iso:std:iso:3166","code":"FR-75"},{"system":"urn:iso:std:iso:3166","code":"US-UM"},{"system":"urn:iso:std:iso:3166","code":"VAT"},{"system":"urn:iso:std:iso:3166","code":"GB"},{"system":"urn:iso:std:iso:3166","code":"CA-ON"},{"system":"urn:iso:std:iso:3166","code":"840"}]}}]}`,
			`{"code":{"coding":[{"code":"77983-5","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"LOC","system":"http://terminology.hl7.org/CodeSystem/v3-ParticipationType"}]},"valueCodeableConcept":{"coding":[{"code":"GB","system":"urn:iso:std:iso:3166"},{"code":"CA-ON","system":"urn:iso:std:iso:3166"},{"code":"840","system":"urn:iso:std:iso:3166"}]}}],"effectiveDateTime":"2020","resourceType":"Observation","status":"final","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"a SNOMED CT code without a concept's partition and check digit, and an RxNorm code of eight digits or more, dropped (an SSN, an MRN typed as one); real codes kept",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"code":{"coding":[{"system":"http://snomed.info/sct","code":"912448123"},{"system":"http://snomed.info/sct","code":"219099999"},{"system":"http://snomed.info/sct","code":"77441123"},{"system":"http://www.nlm.nih.gov/research/umls/rxnorm","code":"912448123"},{"system":"http://www.nlm.nih.gov/research/umls/rxnorm","code":"77441123"},{"system":"http://snomed.info/sct","code":"44054006"},{"system":"http://snomed.info/sct","code":"443391000124108"},{"system":"http://snomed.info/sct","code":"281004"},{"system":"http://www.nlm.nih.gov/research/umls/rxnorm","code":"2599543"}]}}`,
			`{"code":{"coding":[{"code":"44054006","system":"http://snomed.info/sct"},{"code":"443391000124108","system":"http://snomed.info/sct"},{"code":"281004","system":"http://snomed.info/sct"},{"code":"2599543","system":"http://www.nlm.nih.gov/research/umls/rxnorm"}]},"resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"a BCP-47 private-use tag (free text after x-: a name) dropped as a coding and as a language code; registered tags kept",
			`{"resourceType":"Patient","language":"en-x-Marsh","gender":"female","communication":[{"language":{"coding":[{"system":"urn:ietf:bcp:47","code":"x-evelyn-marsh"},{"system":"urn:ietf:bcp:47","code":"es-MX-x-Marsh"},{"system":"urn:ietf:bcp:47","code":"zh-Hant-TW"}]}}]}`,
			`{"communication":[{"language":{"coding":[{"code":"zh-Hant-TW","system":"urn:ietf:bcp:47"}]}}],"gender":"female","resourceType":"Patient"}`},
		// IPS examples are written in other languages (HL7/fhir-ips has
		// Spanish, Italian, Dutch, Japanese narrative): a quantity's unit
		// text is the source's language when no UCUM code says the unit.
		{"an age over 89 in a unit of years in another language (años, ans, anni, jaar, lat, 歳, meses) dropped; under 90 kept (the value of an age code: elsewhere such a unit needs a UCUM code saying it since h-deid13, foreignTimeText)",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"años"},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"ans"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"anni"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"jaar"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"lat"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"歳"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":1130,"unit":"meses"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":45,"unit":"años"}}]}`,
			`{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]},"valueQuantity":{"unit":"años","value":45}}],"resourceType":"Observation","status":"final"}`},
		// Years and months in the other languages of the EU, upper case
		// without accents, traditional Chinese and large national bases:
		// 93 "ani" (Romanian), "év" (Hungarian), "歲", "godina" (Croatian),
		// "ΕΤΩΝ", ... were released.
		{"an age over 89 in a unit of years or months of the other EU languages, traditional Chinese, Turkish, Arabic, Hebrew, Indonesian dropped; under 90 kept (the value of an age code: elsewhere such a unit needs a UCUM code saying it since h-deid13, foreignTimeText)",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"ani"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"év"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"歲"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"godina"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"ΕΤΩΝ"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"metų"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"aastat"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"gadi"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"rokov"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"yaş"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"tahun"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"سنة"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"שנים"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":93,"unit":"ANOS"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":1130,"unit":"개월"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":1130,"unit":"miesięcy"}},{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":{"value":45,"unit":"ani"}}]}`,
			`{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"30525-0","system":"http://loinc.org"}]},"valueQuantity":{"unit":"ani","value":45}}],"resourceType":"Observation","status":"final"}`},
		// The vaccineCode of HL7's SMART Health Cards: Vaccination &
		// Testing IG (HL7/fhir-shc-vaccination-ig, the Immunization
		// profile's usage notes, CC0): CVX 207 and SNOMED CT 1119349007,
		// the SARS-CoV-2 mRNA vaccine, ten digits as a US telephone number
		// has; beside it NDCs, one of ten and one of eleven digits (the
		// HIPAA form) that a telephone number also fits.
		{"a code is released as it is or dropped, never scrubbed: a SNOMED CT concept of ten digits kept whole; another code with a telephone number's form dropped",
			`{"resourceType":"Immunization","status":"completed","patient":{"reference":"Patient/p"},"occurrenceDateTime":"2021-01-01","vaccineCode":{"coding":[{"system":"http://hl7.org/fhir/sid/cvx","code":"207"},{"system":"http://snomed.info/sct","code":"1119349007"},{"system":"http://hl7.org/fhir/sid/ndc","code":"0069100001"},{"system":"http://hl7.org/fhir/sid/ndc","code":"10019055302"},{"system":"http://hl7.org/fhir/sid/ndc","code":"59267-1000-01"}]}}`,
			`{"occurrenceDateTime":"2021","patient":{"reference":"Patient/` + testAlias("p") + `"},"resourceType":"Immunization","status":"completed","vaccineCode":{"coding":[{"code":"207","system":"http://hl7.org/fhir/sid/cvx"},{"code":"1119349007","system":"http://snomed.info/sct"},{"code":"59267-1000-01","system":"http://hl7.org/fhir/sid/ndc"}]}}`},
		// One number in 500 of a telephone number's form passes SNOMED
		// CT's partition and check digit: 212-555-1001 (partition 00)
		// was kept whole as a SNOMED CT concept, where it used to come
		// out as [PHONE]. 123451109 has the long format's partition 10
		// without room for its namespace of seven digits.
		{"a telephone number that passes SNOMED CT's check digit dropped, not kept whole; a partition 10 id of fewer than eleven digits dropped",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"code":{"coding":[{"system":"http://snomed.info/sct","code":"2125551001"},{"system":"http://snomed.info/sct","code":"2125550102"},{"system":"http://snomed.info/sct","code":"123451109"},{"system":"http://snomed.info/sct","code":"1119349007"},{"system":"http://snomed.info/sct","code":"44054006"}]}}`,
			`{"code":{"coding":[{"code":"1119349007","system":"http://snomed.info/sct"},{"code":"44054006","system":"http://snomed.info/sct"}]},"resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"a LOINC code without its mod-10 check digit dropped (a seven-digit MRN or telephone number typed as one); LOINC codes and answer parts kept",
			`{"resourceType":"Observation","status":"final","subject":{"reference":"Patient/p"},"code":{"coding":[{"system":"http://loinc.org","code":"7744112"},{"system":"http://loinc.org","code":"5550145"},{"system":"http://loinc.org","code":"5550145-3"},{"system":"http://loinc.org","code":"5550145-6"},{"system":"http://loinc.org","code":"8480-6"},{"system":"http://loinc.org","code":"100081-9"}]},"valueCodeableConcept":{"coding":[{"system":"http://loinc.org","code":"LA6751-7"}]}}`,
			`{"code":{"coding":[{"code":"8480-6","system":"http://loinc.org"},{"code":"100081-9","system":"http://loinc.org"}]},"resourceType":"Observation","status":"final","subject":{"reference":"Patient/` + testAlias("p") + `"},"valueCodeableConcept":{"coding":[{"code":"LA6751-7","system":"http://loinc.org"}]}}`},
		// LOINC answer and part codes were judged by their form only: an
		// MRN behind "LA" ("LA7744112") or a wrong check digit passed.
		{"a LOINC answer or part code without its check digit dropped; LA33-6, LA6751-7, LP14082-9, LL1000-0 kept",
			`{"resourceType":"Observation","status":"final","subject":{"reference":"Patient/p"},"code":{"coding":[{"system":"http://loinc.org","code":"LP14082-9"},{"system":"http://loinc.org","code":"LP14082-8"},{"system":"http://loinc.org","code":"LL1000-0"}]},"valueCodeableConcept":{"coding":[{"system":"http://loinc.org","code":"LA7744112"},{"system":"http://loinc.org","code":"LA6751-8"},{"system":"http://loinc.org","code":"LA33-6"},{"system":"http://loinc.org","code":"LA6751-7"}]}}`,
			`{"code":{"coding":[{"code":"LP14082-9","system":"http://loinc.org"},{"code":"LL1000-0","system":"http://loinc.org"}]},"resourceType":"Observation","status":"final","subject":{"reference":"Patient/` + testAlias("p") + `"},"valueCodeableConcept":{"coding":[{"code":"LA33-6","system":"http://loinc.org"},{"code":"LA6751-7","system":"http://loinc.org"}]}}`},
		// A four-letter name fits BCP 47's script subtag.
		{"a BCP-47 tag whose script subtag is no script (a name: en-Anna, de-Mark-DE) dropped as a coding and as a language code; real scripts kept",
			`{"resourceType":"Patient","language":"en-Anna","gender":"female","communication":[{"language":{"coding":[{"system":"urn:ietf:bcp:47","code":"de-Mark-DE"},{"system":"urn:ietf:bcp:47","code":"sr-Cyrl-RS"},{"system":"urn:ietf:bcp:47","code":"zh-hans"}]}}]}`,
			`{"communication":[{"language":{"coding":[{"code":"sr-Cyrl-RS","system":"urn:ietf:bcp:47"},{"code":"zh-hans","system":"urn:ietf:bcp:47"}]}}],"gender":"female","resourceType":"Patient"}`},
		// HL7 v2 writes dates as YYYYMMDD (DT, DTM); an OBX of type NM
		// mapped to FHIR carries one as a bare number.
		{"a bare whole number of eight digits that reads as a date YYYYMMDD dropped (a date of birth from HL7 v2); since h-scrub3 any other of seven digits or more too (12345678: TestDeidentifyBareNumberOfSevenDigits); measurements with a unit kept",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":19310314,"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":20240315}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":19310314.0}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":12345678},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":19310314,"unit":"/L","system":"http://unitsofmeasure.org","code":"/L"}}]}`,
			`{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"valueQuantity":{"code":"/L","system":"http://unitsofmeasure.org","unit":"/L","value":19310314}}],"resourceType":"Observation","status":"final"}`},
		// A date of birth as a bare number in other orders than HL7 v2's:
		// DDMMYYYY (14031931), MMDDYYYY (12251931), MMDDYYYY that lost its
		// leading zero (3141931 is 03141931), and two-digit years
		// (YYMMDD 310314, DDMMYY 140331, MMDDYY 121431) were released.
		{"a bare whole number of six to eight digits that reads as a date in another order (DDMMYYYY, MMDDYYYY, seven digits, YYMMDD, DDMMYY, MMDDYY) dropped; other numbers of six digits or fewer kept (since h-scrub3 one of seven or more is withheld whatever it reads as: TestDeidentifyBareNumberOfSevenDigits)",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":14031931},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":12251931},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":3141931},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":310314},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":140331},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":121431},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":12345678},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":1234567},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":123456},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueInteger":99999}]}`,
			`{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"valueInteger":123456},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"valueInteger":99999}],"resourceType":"Observation","status":"final"}`},
		{"a BCP-47 tag with a variant or extension subtag (where a name fits: en-Marsh) dropped as a coding and as a language code; language, script and region kept",
			`{"resourceType":"Patient","language":"en-Marsh","gender":"female","communication":[{"language":{"coding":[{"system":"urn:ietf:bcp:47","code":"de-Evelyn-Marsh"},{"system":"urn:ietf:bcp:47","code":"en-US-u-Marsh"},{"system":"urn:ietf:bcp:47","code":"sr-Latn-RS"},{"system":"urn:ietf:bcp:47","code":"es-419"},{"system":"urn:ietf:bcp:47","code":"fr"}]}}]}`,
			`{"communication":[{"language":{"coding":[{"code":"sr-Latn-RS","system":"urn:ietf:bcp:47"},{"code":"es-419","system":"urn:ietf:bcp:47"},{"code":"fr","system":"urn:ietf:bcp:47"}]}}],"gender":"female","resourceType":"Patient"}`},
		{"a unit text the scrub would change (a telephone number, a date) dropped, not released as a token (and its quantity with it)",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":1,"unit":"555-867-5309"},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":2,"unit":"3/14/31"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":3,"unit":"mg/dL"}}]}`,
			`{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"valueQuantity":{"unit":"mg/dL","value":3}}],"resourceType":"Observation","status":"final"}`},
		{"a MIME type with a parameter other than charset or fhirVersion (a file name) dropped",
			`{"resourceType":"Binary","contentType":"application/pdf;name=EvelynMarsh.pdf"}`,
			`{"_contentType":` + dar + `,"resourceType":"Binary"}`},
		{"a MIME type with a charset or fhirVersion kept",
			`{"resourceType":"Binary","contentType":"application/fhir+json;fhirVersion=4.0"}`,
			`{"contentType":"application/fhir+json;fhirVersion=4.0","resourceType":"Binary"}`},
		// An event dated 1931 was released as "1931": whoever it
		// happened to was alive then, so is now over 89, which Safe
		// Harbor's dates "including year" indicative of such an age
		// withhold (HL7's and Synthea's Conditions and Immunizations of
		// the oldest patients carry such dates).
		{"an event year 90 years or more before now dropped (anyone alive then is now over 89); later years kept",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"resolved"}]},"onsetPeriod":{"start":"1931-05-01","end":"1937-06-01"},"abatementDateTime":"1940","recordedDate":"1936-12-31"}`,
			`{"abatementDateTime":"1940","clinicalStatus":{"coding":[{"code":"resolved","system":"http://terminology.hl7.org/CodeSystem/condition-clinical"}]},"onsetPeriod":{"end":"1937"},"resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		{"a required event date 90 years or more before now withheld with a data-absent-reason",
			`{"resourceType":"Immunization","status":"completed","patient":{"reference":"Patient/p"},"vaccineCode":{"coding":[{"system":"http://hl7.org/fhir/sid/cvx","code":"03"}]},"occurrenceDateTime":"1931-05-01"}`,
			`{"_occurrenceDateTime":` + dar + `,"patient":{"reference":"Patient/` + testAlias("p") + `"},"resourceType":"Immunization","status":"completed","vaccineCode":{"coding":[{"code":"03","system":"http://hl7.org/fhir/sid/cvx"}]}}`},
		// Unit texts of ages as clinicians write them: "93 y.o.", "yr(s)",
		// "years of age", "yrs. old" were not taken for units of time
		// (timeUnits knew "y/o", "yrs" and "yrsold" only), so an age over
		// 89 in a quantity outside an age element was released.
		{"an age over 89 whose unit text has dots, a plural in parentheses, 'old' or 'of age' dropped",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":93,"unit":"y.o."}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":93,"unit":"yr(s)"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":91,"unit":"years of age"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":92,"unit":"yrs. old"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":94,"unit":"Yr old"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":1100,"unit":"mo(s)"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":95,"unit":"y.o"}},{"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"valueQuantity":{"value":120,"unit":"mg/dL"}}]}`,
			`{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"component":[{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"8302-2","system":"http://loinc.org"}]},"valueQuantity":{"unit":"mg/dL","value":120}}],"resourceType":"Observation","status":"final"}`},
		// RadLex's form admitted nine digits after RID: an SSN
		// (RID219099999) or an MRN (RID77441123) typed as a RadLex code
		// was kept; RadLex's ids have at most six.
		{"a RadLex code of more than six digits (an SSN or MRN behind RID) dropped; RadLex terms and Playbook codes kept",
			`{"resourceType":"ImagingStudy","status":"available","subject":{"reference":"Patient/p"},"procedureCode":[{"coding":[{"system":"http://www.radlex.org","code":"RID219099999"},{"system":"http://www.radlex.org","code":"RID77441123"},{"system":"http://www.radlex.org","code":"RPID5558675"},{"system":"http://www.radlex.org","code":"RID10312"},{"system":"http://www.radlex.org","code":"RPID16"}]}]}`,
			`{"procedureCode":[{"coding":[{"code":"RID10312","system":"http://www.radlex.org"},{"code":"RPID16","system":"http://www.radlex.org"}]}],"resourceType":"ImagingStudy","status":"available","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		// UCUM's form had no underscore, so an Age in mean Julian months
		// ("mo_j") lost its code and system and kept its value: R4's
		// age-1 (a value needs a code) broke, and the unit was lost. The
		// R4 definitions' UCUM value sets hold 1,357 codes; these were the
		// ones without spaces that the form refused.
		{"UCUM codes with an underscore (a_j, mo_s, cal_IT), a bare 10* and an annotation after a parenthesis kept",
			`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"onsetAge":{"value":3,"unit":"months","system":"http://unitsofmeasure.org","code":"mo_j"},"abatementAge":{"value":4,"unit":"a","system":"http://unitsofmeasure.org","code":"a_g"},"evidence":[{"code":[{"coding":[{"system":"http://unitsofmeasure.org","code":"cal_IT"},{"system":"http://unitsofmeasure.org","code":"10*"},{"system":"http://unitsofmeasure.org","code":"g/(8.h){shift}"},{"system":"http://unitsofmeasure.org","code":"SN4C7Q2Z9"}]}]}]}`,
			`{"abatementAge":{"code":"a_g","system":"http://unitsofmeasure.org","unit":"a","value":4},"evidence":[{"code":[{"coding":[{"code":"cal_IT","system":"http://unitsofmeasure.org"},{"code":"10*","system":"http://unitsofmeasure.org"},{"code":"g/(8.h){shift}","system":"http://unitsofmeasure.org"}]}]}],"onsetAge":{"code":"mo_j","system":"http://unitsofmeasure.org","unit":"months","value":3},"resourceType":"Condition","subject":{"reference":"Patient/` + testAlias("p") + `"}}`},
		// Organization (reference data a researcher reads) and
		// InsurancePlan ask for a name or an identifier (org-1, ipn-1),
		// both withheld: the output broke them (Medplum's validator skips
		// org-1, HL7's does not).
		{"an Organization whose name and identifiers are withheld keeps org-1",
			`{"resourceType":"Organization","active":true,"name":"Wrenfield Family Clinic","identifier":[{"system":"http://hl7.org/fhir/sid/us-npi","value":"1234567893"}],"address":[{"line":["1420 Wrenfield Lane"],"state":"VT","postalCode":"05501"}]}`,
			`{"_name":` + dar + `,"active":true,"address":[{"postalCode":"000","state":"VT"}],"resourceType":"Organization"}`}, // 055: the IRS at Andover, no resident population

		{"an InsurancePlan whose name is withheld keeps ipn-1",
			`{"resourceType":"InsurancePlan","status":"active","name":"Wrenfield Gold"}`,
			`{"_name":` + dar + `,"resourceType":"InsurancePlan","status":"active"}`},
		// The repair skipped an object the walk left empty, which is
		// dropped whole; but a resource is never dropped, and one whose
		// only content was its identifiers came out empty and broke
		// ipn-1, org-1 (and ppc-1, apr-1, nor-1 alike).
		{"a resource left empty but for what the invariant asks for keeps it (an InsurancePlan or Organization with identifiers only)",
			`{"resourceType":"InsurancePlan","identifier":[{"system":"https://wrenfield.example/plans","value":"GI8-77441123"}]}`,
			`{"_name":` + dar + `,"resourceType":"InsurancePlan"}`},
		// A required element of a type with required elements of its own
		// (Signature: type, when, who; Annotation: text) came out as
		// {"extension":[DAR]} alone, which lacks them.
		{"a required Signature or Annotation withheld: its own required elements carry a data-absent-reason too",
			`{"resourceType":"Task","status":"draft","intent":"order","for":{"reference":"Patient/p"},"input":[{"type":{"coding":[{"system":"http://snomed.info/sct","code":"38341003"}]},"valueAnnotation":{"text":"Evelyn Marsh called"}},{"type":{"coding":[{"system":"http://snomed.info/sct","code":"38341003"}]},"valueSignature":{"type":[{"system":"urn:iso-astm:E1762-95:2013","code":"1.2.840.10065.1.12.1.1"}],"when":"2019-03-14T08:30:00.000-05:00","who":{"reference":"Patient/p"},"data":"RXZlbHluIE1hcnNo"}}]}`,
			`{"for":{"reference":"Patient/` + testAlias("p") + `"},"input":[{"type":{"coding":[{"code":"38341003","system":"http://snomed.info/sct"}]},"valueAnnotation":{"_text":` + dar + `,"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}},{"type":{"coding":[{"code":"38341003","system":"http://snomed.info/sct"}]},"valueSignature":{"_when":` + dar + `,"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}],"type":[` + dar + `],"who":` + dar + `}}],"intent":"order","resourceType":"Task","status":"draft"}`},
		// A birth year was released when the person is 89 today and
		// withheld at 90, so a released 1936 (in 2026-11) said "born
		// after November 1st": a date element finer than the year. A
		// birth year is now judged as any year: withheld when anyone
		// born in it may be over 89.
		{"a birth year some of whose people are over 89 withheld, even for one who is 89 (its release would tell the birthday is late in the year)",
			`{"resourceType":"Patient","birthDate":"1936-12-31","contact":[{"name":{"family":"Marsh"},"gender":"male"}]}`,
			`{"_birthDate":` + dar + `,"contact":[{"gender":"male","name":` + dar + `}],"resourceType":"Patient"}`},
		{"a birth year whose people are all 89 or younger kept",
			`{"resourceType":"Patient","birthDate":"1937-01-05"}`,
			`{"birthDate":"1937","resourceType":"Patient"}`},
		{"unknown element, id, meta, text, identifier dropped",
			`{"resourceType":"Patient","id":"MRN1","meta":{"source":"x"},"text":{"status":"generated","div":"<div>x</div>"},"identifier":[{"value":"1"}],"nickname":"Janey","gender":"female"}`,
			`{"gender":"female","resourceType":"Patient"}`},
		{"a tablet's strength keeps its dose form, a code of HL7's v3-orderableDrugForm, with its system (2 mg per [masked] until h-terms); a dose form R4 does not list (med0304's Tab, a name) does not",
			`{"resourceType":"Medication","ingredient":[{"itemCodeableConcept":{"coding":[{"system":"http://snomed.info/sct","code":"387138002"}]},"strength":{"numerator":{"value":2,"system":"http://unitsofmeasure.org","code":"mg"},"denominator":{"value":1,"system":"http://terminology.hl7.org/CodeSystem/v3-orderableDrugForm","code":"TAB"}}},{"itemCodeableConcept":{"coding":[{"system":"http://snomed.info/sct","code":"387138002"}]},"strength":{"numerator":{"value":2,"system":"http://unitsofmeasure.org","code":"mg"},"denominator":{"value":1,"system":"http://terminology.hl7.org/CodeSystem/v3-orderableDrugForm","code":"Tab"}}},{"itemCodeableConcept":{"coding":[{"system":"http://snomed.info/sct","code":"387138002"}]},"strength":{"numerator":{"value":2,"system":"http://unitsofmeasure.org","code":"mg"},"denominator":{"value":77441123,"system":"http://terminology.hl7.org/CodeSystem/v3-orderableDrugForm","code":"EvelynMarsh"}}}]}`,
			`{"ingredient":[{"itemCodeableConcept":{"coding":[{"code":"387138002","system":"http://snomed.info/sct"}]},"strength":{"denominator":{"code":"TAB","system":"http://terminology.hl7.org/CodeSystem/v3-orderableDrugForm","value":1},"numerator":{"code":"mg","system":"http://unitsofmeasure.org","value":2}}},{"itemCodeableConcept":{"coding":[{"code":"387138002","system":"http://snomed.info/sct"}]},"strength":{"denominator":` + dar + `,"numerator":{"code":"mg","system":"http://unitsofmeasure.org","value":2}}},{"itemCodeableConcept":{"coding":[{"code":"387138002","system":"http://snomed.info/sct"}]},"strength":{"denominator":` + dar + `,"numerator":{"code":"mg","system":"http://unitsofmeasure.org","value":2}}}],"resourceType":"Medication"}`},
		{"a dispensed quantity in a dose form of HL7's keeps it: a number with its dose form is a count of tablets, as beside its unit text",
			`{"resourceType":"MedicationDispense","status":"completed","subject":{"reference":"Patient/p"},"medicationCodeableConcept":{"coding":[{"system":"http://www.nlm.nih.gov/research/umls/rxnorm","code":"309311"}]},"quantity":{"value":30,"system":"http://terminology.hl7.org/CodeSystem/v3-orderableDrugForm","code":"CAP"}}`,
			`{"medicationCodeableConcept":{"coding":[{"code":"309311","system":"http://www.nlm.nih.gov/research/umls/rxnorm"}]},"quantity":{"code":"CAP","system":"http://terminology.hl7.org/CodeSystem/v3-orderableDrugForm","value":30},"resourceType":"MedicationDispense","status":"completed","subject":{"reference":"Patient/517ad53f-7745-6881-16ef-28eba30de765"}}`},
		{"a genomic finding as mCODE codes it keeps its codes of the genomics reporting guide, HGNC, the Sequence Ontology and NCI Thesaurus (dropped until h-terms); a gene as a bare number, a variant in HGVS dropped",
			`{"resourceType":"Observation","status":"final","subject":{"reference":"Patient/p"},"code":{"coding":[{"system":"http://hl7.org/fhir/uv/genomics-reporting/CodeSystem/tbd-codes-cs","code":"diagnostic-implication","display":"Diagnostic Implication"}]},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"48018-6"}]},"valueCodeableConcept":{"coding":[{"system":"http://www.genenames.org","code":"HGNC:950","display":"BAP1"},{"system":"http://www.genenames.org","code":"950"}]}},{"code":{"coding":[{"system":"http://hl7.org/fhir/uv/genomics-reporting/CodeSystem/tbd-codes-cs","code":"functional-effect"}]},"valueCodeableConcept":{"coding":[{"system":"http://www.sequenceontology.org/","code":"SO:0002054"}]}},{"code":{"coding":[{"system":"http://loinc.org","code":"48004-6"}]},"valueCodeableConcept":{"coding":[{"system":"http://varnomen.hgvs.org","code":"NM_004656.4:c.1768C>T"}]}},{"code":{"coding":[{"system":"http://loinc.org","code":"21908-9"}]},"valueCodeableConcept":{"coding":[{"system":"http://ncicb.nci.nih.gov/xml/owl/EVS/Thesaurus.owl","code":"C141207"},{"system":"http://terminology.hl7.org/CodeSystem/icd-o-3","code":"8140/3"}]}}]}`,
			`{"code":{"coding":[{"code":"diagnostic-implication","system":"http://hl7.org/fhir/uv/genomics-reporting/CodeSystem/tbd-codes-cs"}]},"component":[{"code":{"coding":[{"code":"48018-6","system":"http://loinc.org"}]},"valueCodeableConcept":{"coding":[{"code":"HGNC:950","system":"http://www.genenames.org"}]}},{"code":{"coding":[{"code":"functional-effect","system":"http://hl7.org/fhir/uv/genomics-reporting/CodeSystem/tbd-codes-cs"}]},"valueCodeableConcept":{"coding":[{"code":"SO:0002054","system":"http://www.sequenceontology.org"}]}},{"code":{"coding":[{"code":"48004-6","system":"http://loinc.org"}]}},{"code":{"coding":[{"code":"21908-9","system":"http://loinc.org"}]},"valueCodeableConcept":{"coding":[{"code":"C141207","system":"http://ncicb.nci.nih.gov/xml/owl/EVS/Thesaurus.owl"},{"code":"8140/3","system":"http://terminology.hl7.org/CodeSystem/icd-o-3"}]}}],"resourceType":"Observation","status":"final","subject":{"reference":"Patient/517ad53f-7745-6881-16ef-28eba30de765"}}`},
	}
}

// TestDeidentifyWithholds: what cannot be de-identified is not released.
func TestDeidentifyWithholds(t *testing.T) {
	for _, in := range []string{
		`[1,2]`, `"x"`, `{"resourceType":"NotAType","id":"x"}`, `{"name":"no resourceType"}`,
		`{"resourceType":"Patient","modifierExtension":[{"url":"http://x.example/confidential","valueBoolean":true}]}`,
		// Race is no modifier: kept only as an extension.
		`{"resourceType":"Patient","modifierExtension":[{"url":"` + raceURL + `","extension":[` + raceCoding("ombCategory", cdcRace, "2106-3", "White") + `]}]}`,
	} {
		out, err := minimize.Apply("application/fhir+json", []byte(in), safeHarbor, minimize.Options{Now: deidNow})
		if !errors.Is(err, minimize.ErrWithheld) || out != nil {
			t.Errorf("%s: %q, %v; want ErrWithheld", in, out, err)
		}
	}
	if _, err := minimize.Apply("application/fhir+json", []byte(`{"resourceType":"Patient"}`), safeHarbor, minimize.Options{}); !errors.Is(err, minimize.ErrNoReferenceTime) {
		t.Errorf("without Now: %v", err)
	}
	if _, err := minimize.Apply("text/markdown", []byte("x"), safeHarbor, minimize.Options{Now: deidNow}); !errors.Is(err, minimize.ErrNotApplicable) {
		t.Errorf("on text: %v", err)
	}
	if !slices.Contains(minimize.AllowedExtensions(), "http://hl7.org/fhir/StructureDefinition/data-absent-reason") {
		t.Error("data-absent-reason, which the walk writes, is not an allowed extension")
	}
	for _, o := range []minimize.Obligation{{Op: minimize.OpDeidentify}, {Op: minimize.OpDeidentify, Path: "/code", Fn: "safeharbor"}} {
		if o.Validate() == nil {
			t.Errorf("%s validates", o)
		}
	}
}

// BenchmarkDeidentify measures the deidentify obligation per resource type
// of the synthetic data set (and the corpus), decode and encode included.
func BenchmarkDeidentify(b *testing.B) {
	byType := map[string][][]byte{}
	for _, p := range synthPayloads(b) {
		byType[p.typ] = append(byType[p.typ], p.raw)
	}
	corpus, _ := safeharbortest.Corpus(b, deidNow.Year())
	for _, r := range corpus {
		byType["corpus"] = append(byType["corpus"], r.Raw)
	}
	for _, typ := range []string{"patient", "observation", "condition", "medicationrequest", "encounter", "coverage", "corpus"} {
		docs := byType[typ]
		b.Run(typ, func(b *testing.B) {
			opts := minimize.Options{Now: deidNow, Alias: testAlias}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := minimize.Apply("application/fhir+json", docs[i%len(docs)], safeHarbor, opts); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// FuzzDeidentify: on any input the walk either withholds (an error, no
// payload) or returns a JSON object naming a known resource type; it never
// panics.
func FuzzDeidentify(f *testing.F) {
	corpus, _ := safeharbortest.Corpus(f, deidNow.Year())
	for _, r := range corpus {
		f.Add(r.Raw)
	}
	f.Add([]byte(`{"resourceType":"Patient","contained":[{"resourceType":"Patient","id":"x"}],"link":[{"other":{"reference":"#x"}}]}`))
	for _, tc := range deidentifyRuleCases() {
		f.Add([]byte(tc.in)) // the terminologies and quantities of the rules, the research ones among them
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, err := minimize.Apply("application/fhir+json", doc, safeHarbor, minimize.Options{Now: deidNow, Alias: testAlias})
		if err != nil {
			if out != nil {
				t.Fatal("a payload with an error")
			}
			return
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil || v["resourceType"] == nil {
			t.Fatalf("output %q is not a resource: %v", out, err)
		}
	})
}

// TestDeidentifyKeepsUnits: the unit texts of real data (Synthea, US
// Core, UCUM's common units, laboratories' and devices' own notations)
// are units, kept as they are with their values.
func TestDeidentifyKeepsUnits(t *testing.T) {
	for _, unit := range []string{"mm[Hg]", "kg/m2", "/min", "{beats}/min", "%", "mg/dL", "mmol/L", "10*3/uL",
		"{#}/[HPF]", "[degF]", "Cel", "g/dL", "mL/min/{1.73_m2}", "[lb_av]", "[in_i]", "cm", "kg", "{score}",
		"[ppm]", "ug/L", "µg/L", "°C", "years", "mo", "U/L", "[IU]/L", "fL", "pg", "10*6/uL", "ng/mL",
		"mg/(24.h)", "1", "{ratio}", "[arb'U]/mL", "m2", "meq/L", "cm[H2O]", "L/min", "mL",
		// Units as laboratories and devices write them, not UCUM's codes
		// (every word a unit: knownUnitText).
		"beats/min", "breaths/min", "bpm", "x10E3/uL", "mEq/L", "mIU/mL", "IU/L", "µg/dL", "cells/uL",
		"copies/mL", "kg/m²", "°F", "lbs", "in", "mL/min/1.73m2", "mcg", "cmH2O", "10^9/L", "mOsm/kg",
		"/HPF", "mmHg", "kcal/d", "24h", "mg/24h", "score", "ratio", "puffs",
		// Laboratories' counts and ratios (LabCorp's "M/uL", Cerner's
		// "x10(3)/mcL", "THOU/uL", a screen's "S/CO"), written with a
		// space as style guides and reports do ("mm Hg", "mL/min/1.73 m2",
		// "mg/24 h", "log copies/mL"): kept until h-deid9, or released
		// with their value only, then dropped with their value.
		// ("Thousand/uL", "Million/uL", capitalised as a name is, need a
		// UCUM code saying them since h-deid12: nameCaseText.)
		"M/uL", "thou/uL", "THOU/uL", "thousand/uL", "million/uL", "mill/uL", "x10(3)/mcL", "x10(6)/mcL",
		// ("INR" alone, three capitals, a name's initials' form, needs a
		// code that says it since h-deid15: TestDeidentifyThreeCapitalsAloneNeedACode.)
		"S/CO", "ppm", "gtt/min", "respirations/min", "degrees", "%O2", "mL/min/1.73sq.m",
		"mm Hg", "mL/min/1.73 m2", "mL/min per 1.73 m2", "mg/24 h", "g/24 h", "log copies/mL", "log IU/mL",
		"cm H2O", "in Hg", "deg F", "deg C", "degrees F", "per min", "per minute", "fl oz", "/100 WBC", "% O2",
		// Medications' dose and supply units (a MedicationRequest's dose,
		// a MedicationDispense's quantity): kept until h-deid9, then
		// dropped with their values. ("Patch", capitalised as a name
		// is, alone: kept until h-deid11, see nameCaseUnit.)
		"patch", "vial", "vials", "application", "actuation", "suppository", "packet", "syringe", "lozenge",
		"ampule", "ampoule", "bottle", "bag", "pen", "inhaler", "teaspoon", "tablespoon", "tsp", "tbsp", "applicatorful",
		"film", "troche", "wafer", "strip", "sachet", "dropperful", "container", "cartridge", "box", "tube", "jar",
		"chewable tablet", "pill", "implant", "injection", "enema", "scoop", "piece",
		// Frequencies, intakes, growth and lung-function references
		// (pediatric percentiles, spirometry's % predicted), METs.
		// ("SD" alone, two capitals, a name's initials' form, needs a
		// UCUM code since h-deid14: TestDeidentifyTwoCapitalsAloneNeedACode.)
		"times/day", "times", "x", "servings", "servings/day", "cups/day", "hours/night", "hrs/night", "z-score",
		"percentile", "%ile", "METs", "%pred", "% predicted", "% pred", "ohms", "casts/lpf", "% blasts", "words"} {
		in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":{"value":3,"unit":` + strconvQuote(unit) + `}}`
		want := `{"code":{"coding":[{"code":"1-8","system":"http://loinc.org"}]},"resourceType":"Observation","status":"final","valueQuantity":{"unit":` + strconvQuote(unit) + `,"value":3}}`
		if got := string(deidentify(t, []byte(in), nil)); got != want {
			t.Errorf("unit %q:\n got %s\nwant %s", unit, got, want)
		}
	}
}

// TestDeidentifyDropsSpacedNonUnits: a unit text with spaces is released
// only when every word names a unit; a number split by spaces, prose and a
// name are dropped with the quantity's value.
func TestDeidentifyDropsSpacedNonUnits(t *testing.T) {
	for _, unit := range []string{"77 441 124", "7744 1124", "mg 7744112", "acct no 7", "Dr Lee", "mg/dL per Dr Marsh",
		"219 09 9999", "555 867 5309", "mm Hg Smith", "Wood", "Wood Smith", "BMI Smith", "Ct Marsh", "14 Mar 1931", "Mar 1931", "mm  Hg", " mm Hg", "a b c d e"} {
		in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":{"value":77441124,"unit":` + strconvQuote(unit) + `}}`
		want := `{"code":{"coding":[{"code":"1-8","system":"http://loinc.org"}]},"resourceType":"Observation","status":"final"}`
		if got := string(deidentify(t, []byte(in), nil)); got != want {
			t.Errorf("unit %q:\n got %s\nwant %s", unit, got, want)
		}
	}
}

// TestDeidentifyBinaryPrefixesOnlyOfBits: UCUM's binary prefixes (Ki, Mi,
// Gi, Ti) prefix a unit of information only; before a metre or a litre
// they made names units ("Kim", kibimetre; "Tim"; "Gil", gibilitre), and
// {"value": 77441124, "unit": "Kim"} was released with its number.
func TestDeidentifyBinaryPrefixesOnlyOfBits(t *testing.T) {
	for unit, keep := range map[string]bool{"Kim": false, "Tim": false, "Gil": false, "Kim Min": false, "Mig": false, "KiBy": true, "Mibit": true, "GiBy/s": true, "km": true, "mg": true} {
		for _, q := range []string{`{"value":77441124,"unit":` + strconvQuote(unit) + `}`, `{"value":77441124,"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}`} {
			in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":` + q + `}`
			want := `{"code":{"coding":[{"code":"1-8","system":"http://loinc.org"}]},"resourceType":"Observation","status":"final"}`
			got := string(deidentify(t, []byte(in), nil))
			if keep == (got == want) || keep && !strings.Contains(got, "77441124") {
				t.Errorf("%s (kept: %v):\n got %s", q, keep, got)
			}
		}
	}
}

// TestDeidentifyIdentifierAnnotations: a quantity whose unit text or code
// is an annotation naming an identifier ("{MRN}", "mg{acct}") says its
// number is that identifier; it is dropped whole. An annotation of a count
// or a score ("{score}", "{cells}", "{#}") keeps its number (below a
// million when it is the whole unit: bareIdentifier, and
// TestDeidentifyCountOfIdentifierSize).
func TestDeidentifyIdentifierAnnotations(t *testing.T) {
	for unit, keep := range map[string]bool{"{MRN}": false, "{acct}": false, "{SSN}": false, "{member_id}": false, "{Account}": false,
		"{policy_no}": false, "{tel}": false, "{phone}": false, "{subscriber}": false, "{serial}": false, "{license}": false, "{NPI}": false,
		"mg{MRN}": false, "{MRN}/min": false, "1{MRN}": false, "{ID}": false,
		"{score}": true, "{cells}/uL": true, "{#}": true, "{beats}/min": true, "{copies}/mL": true, "mg/g{creat}": true, "{INR}": true, "{titer}": true} {
		for _, q := range []string{`{"value":774411,"unit":` + strconvQuote(unit) + `}`, `{"value":774411,"system":"http://unitsofmeasure.org","code":` + strconvQuote(unit) + `}`} {
			in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":` + q + `}`
			got := string(deidentify(t, []byte(in), nil))
			if keep != strings.Contains(got, "774411") {
				t.Errorf("%s (kept: %v):\n got %s", q, keep, got)
			}
		}
	}
}

// TestDeidentifyCountOfIdentifierSize: a whole number of seven digits or
// more whose unit and code are only annotations or UCUM's unity ("{#}",
// "{count}", "1") is withheld, as an identifier (a record, member or
// telephone number) is: its unit says only that it is a count. A smaller
// count, a decimal, and a count of that size with a unit are kept.
func TestDeidentifyCountOfIdentifierSize(t *testing.T) {
	for q, keep := range map[string]bool{
		`{"value":77441124,"unit":"{#}"}`: false, `{"value":5558675,"unit":"{count}"}`: false,
		`{"value":77441124,"system":"http://unitsofmeasure.org","code":"{#}"}`: false, `{"value":7744112,"unit":"1"}`: false,
		`{"value":-7744112,"unit":"{#}"}`: false, `{"value":77441124,"unit":"{cells}","system":"http://unitsofmeasure.org","code":"{cells}"}`: false,
		`{"value":999999,"unit":"{#}"}`: true, `{"value":42,"unit":"{score}"}`: true, `{"value":7744112.5,"unit":"{ratio}"}`: true,
		`{"value":7744112,"unit":"{cells}/uL"}`: true, `{"value":250000000,"unit":"/L"}`: true, `{"value":7744112,"unit":"[IU]/L"}`: true} {
		in := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8"}]},"valueQuantity":` + q + `}`
		got := string(deidentify(t, []byte(in), nil))
		if keep != strings.Contains(got, `"valueQuantity"`) {
			t.Errorf("%s (kept: %v):\n got %s", q, keep, got)
		}
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestDeidentifyBareNumberOfSevenDigits: a whole number of seven digits or
// more with no unit (a value[x], a quantity whose unit and code are absent,
// UCUM's unity "1" or annotations alone) is withheld as an identifier, a
// record, account or telephone number (Safe Harbor (R)): 77441123 in a
// ServiceRequest's quantityRatio.numerator under a kept code was released
// until h-scrub3, where only nine digits or more, or six to eight that read
// as a date, were withheld. A smaller number, a decimal, and a number of
// that size with a unit are kept.
func TestDeidentifyBareNumberOfSevenDigits(t *testing.T) {
	const code = `"code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]}`
	for _, tt := range []struct {
		in   string
		keep string // a string the output must hold ("" if none)
		gone string // a string it must not
	}{
		{`{"resourceType":"ServiceRequest","status":"active","intent":"order","subject":{"reference":"Patient/p"},` + code + `,"quantityRatio":{"numerator":{"value":77441123},"denominator":{"value":1}}}`, `"denominator"`, "77441123"},
		{`{"resourceType":"Observation","status":"final",` + code + `,"valueInteger":7744112}`, `"8302-2"`, "7744112"},
		{`{"resourceType":"Observation","status":"final",` + code + `,"valueInteger":-7744112}`, `"8302-2"`, "7744112"},
		{`{"resourceType":"Observation","status":"final",` + code + `,"valueQuantity":{"value":5558675}}`, `"8302-2"`, "5558675"},
		{`{"resourceType":"Observation","status":"final",` + code + `,"valueQuantity":{"value":77441123,"unit":"1"}}`, `"8302-2"`, "77441123"},
		{`{"resourceType":"Observation","status":"final",` + code + `,"valueDecimal":77441123.0}`, `"8302-2"`, "77441123"},
		{`{"resourceType":"Observation","status":"final",` + code + `,"valueRange":{"low":{"value":4471123}}}`, `"8302-2"`, "4471123"},
		// Kept: below a million, a decimal, a measurement with its unit.
		{`{"resourceType":"Observation","status":"final",` + code + `,"valueInteger":999999}`, "999999", ""},
		{`{"resourceType":"Observation","status":"final",` + code + `,"valueQuantity":{"value":1234567.5,"unit":"{ratio}"}}`, "1234567.5", ""},
		{`{"resourceType":"Observation","status":"final",` + code + `,"valueQuantity":{"value":7744112,"unit":"10*3/uL","system":"http://unitsofmeasure.org","code":"10*3/uL"}}`, "7744112", ""},
		{`{"resourceType":"Specimen","subject":{"reference":"Patient/p"},"collection":{"quantity":{"value":1500000,"unit":"uL","system":"http://unitsofmeasure.org","code":"uL"}}}`, "1500000", ""},
	} {
		got := string(deidentify(t, []byte(tt.in), nil))
		if tt.keep != "" && !strings.Contains(got, tt.keep) || tt.gone != "" && strings.Contains(got, tt.gone) {
			t.Errorf("%s\n got %s\nwant %q kept, %q gone", tt.in, got, tt.keep, tt.gone)
		}
	}
}
