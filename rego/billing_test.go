package rego_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store/synth"
)

// TestBillingViewOutsideExamples reads outside-shaped Coverage and Encounter
// resources (minimize/testdata/outside, README.md there names the sources)
// as a biller (HPAYMT) under the default policy, applying the decision's
// obligations as the server does. What the billing view says it removes,
// identifiers and people's names, must be gone wherever the resource holds
// them: a Reference's identifier or display, a contained subscriber or
// practitioner, an extension's valueString, an Encounter's
// preAdmissionIdentifier. Every gone string is checked present in the input
// (the positive control), and what claims work needs is kept.
func TestBillingViewOutsideExamples(t *testing.T) {
	biller := policy.NewSubject(policy.Principal{Sub: "bob.billing", Roles: []string{"billing"},
		ClientID: "claims-assistant", Tenant: synth.DefaultTenant})
	e := defaultEngine(t)
	for _, c := range []struct {
		file, typ  string
		gone, kept []string
	}{
		{"pas-coverage-subscriber-contained.json", "coverage",
			[]string{"77441123", "219099999", "88112233", "0945345", "7843574536", "Marsh", "Evelyn", "SMITH", "555-867-5309", "1931", `"contained"`, `"extension"`,
				"MARYLAND CAPITAL INSURANCE COMPANY"},
			[]string{`"subscriberId":"***4536"`, `"payor":[{"reference":"Organization/InsurerExample"}]`,
				`"value":"***0016"`, `"code":"PPO"`, `"code":"child"`}},
		{"hl7-encounter-preadmission-contained.json", "encounter",
			[]string{"77441123", "987654321", "93042", "Encounter_Roel", "WATSON", "SMITH", "Marsh", "4029993456", "Canary", `"contained"`, `"extension"`},
			[]string{`"period":{"end":"2013-03-20","start":"2013-03-11"}`, `"code":"34068001"`,
				`"code":"305956004"`, `"code":"306689006"`, `"display":"Burgers University Medical Centre"`, `"reference":"Location/1"`}},
	} {
		t.Run(c.file, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("..", "minimize", "testdata", "outside", c.file))
			if err != nil {
				t.Fatal(err)
			}
			dec, err := e.Decide(context.Background(), policy.Input{Subject: biller, PurposeOfUse: "HPAYMT", Action: policy.ActionRead,
				Resource: &policy.Resource{Type: c.typ, Patient: "p", Tenant: synth.DefaultTenant}})
			if err != nil || !dec.Allow {
				t.Fatalf("Decide: %+v %v", dec, err)
			}
			out, err := minimize.Apply("application/fhir+json", in, dec.Obligations, viewOptions())
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range c.gone {
				if !strings.Contains(string(in), g) {
					t.Errorf("positive control: %q is not in the input", g)
				}
				if strings.Contains(withoutAbsentMarks(out), g) {
					t.Errorf("the biller's view holds %q: %s", g, out)
				}
			}
			for _, k := range c.kept {
				if k = keyedRefs(k); !strings.Contains(string(out), k) {
					t.Errorf("the biller's view lost %s: %s", k, out)
				}
			}
		})
	}
}

// A modifier extension changes the meaning of the element that holds it,
// and FHIR R4 forbids processing that element as if it were absent
// (Extensibility, "Modifier Extensions"): the biller's view keeps every
// modifierExtension of a backbone element it keeps, as it keeps the
// resource's own. Until h-review56 (2026-12-07) only the resource's root
// kept its own; a diagnosis, a participant, a location, hospitalization,
// a Coverage's class, a cost and its exception lost theirs, and the biller
// read them as unmodified.
func TestBillingViewKeepsNestedModifierExtensions(t *testing.T) {
	biller := policy.NewSubject(policy.Principal{Sub: "bob.billing", Roles: []string{"billing"},
		ClientID: "claims-assistant", Tenant: synth.DefaultTenant})
	e := defaultEngine(t)
	const me = `"modifierExtension":[{"url":"http://example.org/fhir/StructureDefinition/%s","valueBoolean":true}]`
	mod := func(name string) string { return fmt.Sprintf(me, name) }
	for _, c := range []struct {
		typ, in string
		kept    []string
	}{
		{"coverage", `{"resourceType":"Coverage","id":"c","status":"active","beneficiary":{"reference":"Patient/p"},` +
			`"payor":[{"reference":"Organization/o"}],` +
			`"class":[{` + mod("class") + `,"type":{"text":"group"},"value":"G1"}],` +
			`"costToBeneficiary":[{` + mod("cost") + `,"valueMoney":{"value":20,"currency":"USD"},` +
			`"exception":[{` + mod("exception") + `,"type":{"text":"retired"}}]}]}`,
			[]string{"class", "cost", "exception"}},
		{"encounter", `{"resourceType":"Encounter","id":"e","status":"finished","class":{"code":"IMP"},"subject":{"reference":"Patient/p"},` +
			`"participant":[{` + mod("participant") + `,"individual":{"reference":"Practitioner/x"}}],` +
			`"diagnosis":[{` + mod("diagnosis") + `,"condition":{"reference":"Condition/c"},"rank":1}],` +
			`"hospitalization":{` + mod("hospitalization") + `,"admitSource":{"text":"emergency"}},` +
			`"location":[{` + mod("location") + `,"location":{"reference":"Location/l"}}]}`,
			[]string{"participant", "diagnosis", "hospitalization", "location"}},
		// A complex modifier (its value in sub-extensions) at the root, where
		// the list names modifierExtension itself: until h-review58 it lost
		// its sub-extensions and went out as a bare url.
		{"encounter", `{"resourceType":"Encounter","id":"e","status":"finished","class":{"code":"IMP"},"subject":{"reference":"Patient/p"},` +
			`"modifierExtension":[{"url":"http://example.org/fhir/StructureDefinition/root","extension":[{"url":"part","valueCode":"x"}]}]}`,
			[]string{"root", "part"}},
	} {
		t.Run(c.typ, func(t *testing.T) {
			dec, err := e.Decide(context.Background(), policy.Input{Subject: biller, PurposeOfUse: "HPAYMT", Action: policy.ActionRead,
				Resource: &policy.Resource{Type: c.typ, Patient: "p", Tenant: synth.DefaultTenant}})
			if err != nil || !dec.Allow {
				t.Fatalf("Decide: %+v %v", dec, err)
			}
			out, err := minimize.Apply("application/fhir+json", []byte(c.in), dec.Obligations, viewOptions())
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range c.kept {
				want := "StructureDefinition/" + k + `"`
				if k == "part" {
					want = `"url":"part","valueCode":"x"`
				}
				if !strings.Contains(string(out), want) {
					t.Errorf("the biller's view dropped the %s's modifierExtension: %s", k, out)
				}
			}
		})
	}
}

// A self-pay Coverage names the patient (or a relative) as its payor (R4
// Coverage.payor: Reference(Organization | Patient | RelatedPerson), "such
// as patient-pay agreements"), and a Reference's display is then their
// name: the biller's view, which removes the beneficiary's display, drops
// every payor's display (an insurer is named by its Organization, which a
// biller reads as reference data). Until h-review56 (2026-12-07) a payor's
// display was kept, the patient's name with it.
func TestBillingViewDropsASelfPayPayorsName(t *testing.T) {
	dec := billerCoverageDecision(t)
	in := `{"resourceType":"Coverage","id":"c","status":"active","type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/coverage-selfpay","code":"pay"}]},` +
		`"beneficiary":{"reference":"Patient/p","display":"Evelyn Marsh"},` +
		`"payor":[{"reference":"Patient/p","display":"Evelyn Marsh"},{"reference":"RelatedPerson/r","display":"Roel Marsh"}]}`
	out, err := minimize.Apply("application/fhir+json", []byte(in), dec.Obligations, viewOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"Evelyn", "Roel", "Marsh"} {
		if strings.Contains(string(out), g) {
			t.Errorf("the biller's view of a self-pay Coverage holds %q: %s", g, out)
		}
	}
	if want := keyedRefs(`"payor":[{"reference":"Patient/p"},{"reference":"RelatedPerson/r"}]`); !strings.Contains(string(out), want) {
		t.Errorf("the biller's view lost the payors' references (want %s): %s", want, out)
	}
}

// A Coverage's class value is, for the class type rxid, "a Pharmacy
// Benefit Manager specified Member ID" (R4 CodeSystem coverage-class): the
// member's number on their pharmacy card, as HL7's BSeR example
// (coverage-bser-coverage-eve-everywoman, class rxid "MDF12345") and the
// Specialty Rx IG ("Coverage.class=rxid. Pharmacy benefit Member ID")
// write it. The biller's view masks subscriberId to its last four
// characters and removes the identifiers, but kept every class value
// whole, and the member number with it. An obligation is a path and
// cannot select a class by its type, so every class value is masked to its
// last four characters, as subscriberId is (a group or plan number keeps
// its last four; a value of four characters or fewer becomes "***").
func TestBillingViewMasksAPharmacyMemberID(t *testing.T) {
	dec := billerCoverageDecision(t)
	class := func(code, value string) string {
		return `{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/coverage-class","code":"` + code + `"}]},"value":"` + value + `"}`
	}
	in := `{"resourceType":"Coverage","id":"c","status":"active","beneficiary":{"reference":"Patient/p"},"subscriberId":"MBR88112233","class":[` +
		class("group", "CB135") + `,` + class("rxid", "RXM88112233") + `,` + class("rxbin", "987654") + `,` + class("sequence", "9") + `]}`
	out, err := minimize.Apply("application/fhir+json", []byte(in), dec.Obligations, viewOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"RXM88112233", "MBR88112233"} {
		if strings.Contains(string(out), g) {
			t.Errorf("the biller's view holds the member number %q: %s", g, out)
		}
	}
	masked := func(code, value string) string {
		return `"code":"` + code + `","system":"http://terminology.hl7.org/CodeSystem/coverage-class"}]},"value":"` + value + `"`
	}
	for _, k := range []string{`"subscriberId":"***2233"`, masked("group", "***B135"), masked("rxid", "***2233"), masked("rxbin", "***7654"), masked("sequence", "***")} {
		if !strings.Contains(string(out), k) {
			t.Errorf("the biller's view lacks %s: %s", k, out)
		}
	}
}

// billerCoverageDecision is the default policy's decision on a biller's
// (HPAYMT) read of a Coverage.
func billerCoverageDecision(t *testing.T) policy.Decision {
	t.Helper()
	biller := policy.NewSubject(policy.Principal{Sub: "bob.billing", Roles: []string{"billing"},
		ClientID: "claims-assistant", Tenant: synth.DefaultTenant})
	dec, err := defaultEngine(t).Decide(context.Background(), policy.Input{Subject: biller, PurposeOfUse: "HPAYMT", Action: policy.ActionRead,
		Resource: &policy.Resource{Type: "coverage", Patient: "p", Tenant: synth.DefaultTenant}})
	if err != nil || !dec.Allow {
		t.Fatalf("Decide: %+v %v", dec, err)
	}
	return dec
}

// billingView decides a read of a resource of type typ as a biller (HPAYMT)
// under the default policy and applies the decision's obligations to in, as
// the server does.
func billingView(t *testing.T, e *policy.Engine, typ string, in []byte) []byte {
	t.Helper()
	biller := policy.NewSubject(policy.Principal{Sub: "bob.billing", Roles: []string{"billing"},
		ClientID: "claims-assistant", Tenant: synth.DefaultTenant})
	dec, err := e.Decide(context.Background(), policy.Input{Subject: biller, PurposeOfUse: "HPAYMT", Action: policy.ActionRead,
		Resource: &policy.Resource{Type: typ, Patient: "p", Tenant: synth.DefaultTenant}})
	if err != nil || !dec.Allow {
		t.Fatalf("Decide: %+v %v", dec, err)
	}
	out, err := minimize.Apply("application/fhir+json", in, dec.Obligations, viewOptions())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The biller's view keeps the codes of the CodeableConcepts and Codings it
// keeps (system, version, code) and drops their free text: a
// CodeableConcept's text, where clinicians write narrative, a coding's
// display, which a sender may fill as it likes, and an extension of either;
// and drops the hospitalization elements no claim carries (dietPreference,
// specialCourtesy, specialArrangement: a religion, a VIP, a disability).
// Coverage.class.name, the group or plan name a claim carries (X12 837
// SBR04), is kept, scrubbed of identifier patterns. Each canary below sits
// in one element; until h-biller3 the billing view released every one of
// them (45 CFR 164.502(b), minimum necessary: claims need the codes).
func TestBillingViewDropsCodesFreeText(t *testing.T) {
	e := defaultEngine(t)
	cc := func(canary, system, code string) string {
		return `{"coding":[{"system":"` + system + `","code":"` + code + `","display":"` + canary + `-display",` +
			`"extension":[{"url":"http://example.org/x","valueString":"` + canary + `-ext"}]}],"text":"` + canary + `-text"}`
	}
	for _, c := range []struct {
		typ, in      string
		canaries     []string
		kept, absent []string
	}{
		{"coverage", `{"resourceType":"Coverage","id":"c","status":"active",` +
			`"type":` + cc("CovType", "http://terminology.hl7.org/CodeSystem/v3-ActCode", "HIP") + `,` +
			`"beneficiary":{"reference":"Patient/p"},` +
			`"relationship":` + cc("Relationship", "http://terminology.hl7.org/CodeSystem/subscriber-relationship", "child") + `,` +
			`"payor":[{"reference":"Organization/o"}],` +
			`"class":[{"type":` + cc("ClassType", "http://terminology.hl7.org/CodeSystem/coverage-class", "group") + `,"value":"G1","name":"Acme Corp Gold PPO, call 410-555-0134"}],` +
			`"costToBeneficiary":[{"type":` + cc("CostType", "http://terminology.hl7.org/CodeSystem/coverage-copay-type", "gpvisit") + `,"valueMoney":{"value":20,"currency":"USD"},` +
			`"exception":[{"type":` + cc("ExceptionType", "http://terminology.hl7.org/CodeSystem/ex-coverage-financial-exception", "retired") + `}]}]}`,
			[]string{"CovType", "Relationship", "ClassType", "CostType", "ExceptionType"},
			[]string{`"code":"HIP"`, `"code":"child"`, `"code":"group"`, `"code":"gpvisit"`, `"code":"retired"`, `"value":"***"`,
				`"name":"Acme Corp Gold PPO, call [PHONE]"`, `"valueMoney":{"currency":"USD","value":20}`},
			[]string{"410-555-0134"}},
		{"encounter", `{"resourceType":"Encounter","id":"e","status":"finished",` +
			`"statusHistory":[{"status":"arrived","period":{"start":"2024-03-05"},"extension":[{"url":"http://example.org/x","valueString":"StatusHistory-ext"}]}],` +
			`"class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"IMP","display":"Class-display"},` +
			`"classHistory":[{"class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"EMER","display":"ClassHistory-display"},"period":{"start":"2024-03-05"}}],` +
			`"type":[` + cc("EncType", "http://snomed.info/sct", "183452005") + `],` +
			`"serviceType":` + cc("ServiceType", "http://terminology.hl7.org/CodeSystem/service-type", "124") + `,` +
			`"priority":` + cc("Priority", "http://terminology.hl7.org/CodeSystem/v3-ActPriority", "EM") + `,` +
			`"subject":{"reference":"Patient/p"},` +
			`"participant":[{"type":[` + cc("ParticipantType", "http://terminology.hl7.org/CodeSystem/v3-ParticipationType", "ATND") + `],"individual":{"reference":"Practitioner/x"}}],` +
			`"period":{"start":"2024-03-05","end":"2024-03-09"},` +
			`"reasonCode":[{"coding":[{"system":"http://hl7.org/fhir/sid/icd-10-cm","code":"W19.XXXA","display":"ReasonCode-display"}],"text":"fall at home, daughter Jane found her"}],` +
			`"diagnosis":[{"condition":{"reference":"Condition/c"},"use":` + cc("DiagnosisUse", "http://terminology.hl7.org/CodeSystem/diagnosis-role", "AD") + `,"rank":1}],` +
			`"hospitalization":{"admitSource":` + cc("AdmitSource", "http://terminology.hl7.org/CodeSystem/admit-source", "emd") + `,` +
			`"reAdmission":` + cc("ReAdmission", "http://terminology.hl7.org/CodeSystem/v2-0092", "R") + `,` +
			`"dietPreference":[` + cc("DietPreference", "http://terminology.hl7.org/CodeSystem/diet", "kosher") + `],` +
			`"specialCourtesy":[` + cc("SpecialCourtesy", "http://terminology.hl7.org/CodeSystem/v3-EncounterSpecialCourtesy", "VIP") + `],` +
			`"specialArrangement":[` + cc("SpecialArrangement", "http://terminology.hl7.org/CodeSystem/encounter-special-arrangements", "wheel") + `],` +
			`"dischargeDisposition":` + cc("Discharge", "http://terminology.hl7.org/CodeSystem/discharge-disposition", "home") + `},` +
			`"location":[{"location":{"reference":"Location/l"},"physicalType":` + cc("PhysicalType", "http://terminology.hl7.org/CodeSystem/location-physical-type", "ro") + `}]}`,
			[]string{"StatusHistory", "Class", "ClassHistory", "EncType", "ServiceType", "Priority", "ParticipantType", "ReasonCode", "DiagnosisUse",
				"AdmitSource", "ReAdmission", "DietPreference", "SpecialCourtesy", "SpecialArrangement", "Discharge", "PhysicalType"},
			[]string{`"code":"IMP"`, `"code":"EMER"`, `"code":"183452005"`, `"code":"124"`, `"code":"EM"`, `"code":"ATND"`, `"code":"W19.XXXA"`,
				`"code":"AD"`, `"code":"emd"`, `"code":"R"`, `"code":"home"`, `"code":"ro"`, `"status":"arrived"`,
				`"period":{"end":"2024-03-09","start":"2024-03-05"}`, `"rank":1`},
			[]string{"fall at home", "Jane", "kosher", `"VIP"`, "wheel"}},
	} {
		t.Run(c.typ, func(t *testing.T) {
			out := string(billingView(t, e, c.typ, []byte(c.in)))
			gone := c.absent
			for _, k := range c.canaries {
				gone = append(gone, k+"-")
			}
			for _, g := range gone {
				if !strings.Contains(c.in, g) {
					t.Errorf("positive control: %q is not in the input", g)
				}
				if strings.Contains(out, g) {
					t.Errorf("the biller's view holds %q: %s", g, out)
				}
			}
			for _, k := range c.kept {
				if !strings.Contains(out, k) {
					t.Errorf("the biller's view lost %s: %s", k, out)
				}
			}
		})
	}
}

// The 20-patient synthetic data set (custos seed, the demo's data) read as
// a biller keeps what claims work needs: every Coverage its status, type
// code, relationship code, period, payor (a reference to the payer's
// Organization, since h-views), masked member id and group number
// (every class value is masked: TestBillingViewMasksAPharmacyMemberID);
// every Encounter its class and type codes, status and period (the dates
// of service; its subject's source id is dropped:
// TestBillingViewDropsSourceIDs); and no code's text or display survives (the
// service provider's display, the facility's name, is no code's).
func TestBillingViewOfTheSyntheticData(t *testing.T) {
	e := defaultEngine(t)
	d := newDataset(t)
	n := map[string]int{}
	for _, l := range d.lines {
		typ := l.Labels.Type
		if typ != "coverage" && typ != "encounter" {
			continue
		}
		n[typ]++
		in := d.payload(t, l)
		var v struct {
			Period struct{ Start, End string }
		}
		if err := json.Unmarshal(in, &v); err != nil {
			t.Fatal(err)
		}
		out := string(billingView(t, e, typ, in))
		kept := map[string][]string{
			"coverage": {`"status":"active"`, `"code":"HIP"`, `"code":"self"`, `"code":"group"`, `"value":"***`, `"subscriberId":"***`,
				`"start":"` + v.Period.Start + `"`, `"payor":[{"reference":"Organization/`},
			"encounter": {`"status":"finished"`, `"class":{"code":"AMB","system":"http://terminology.hl7.org/CodeSystem/v3-ActCode"}`,
				`"type":[{"coding":[{"code":"185349003","system":"http://snomed.info/sct"}]}]`,
				`"period":{"end":"` + v.Period.End + `","start":"` + v.Period.Start + `"}`},
		}[typ]
		for _, k := range kept {
			if !strings.Contains(out, k) {
				t.Errorf("%s %s: the biller's view lost %s: %s", typ, l.URI, k, out)
			}
		}
		for _, g := range []string{`"display":"ambulatory"`, `"display":"Encounter for check up"`, `"display":"health insurance plan policy"`, `"text"`, "Office visit"} {
			if strings.Contains(out, g) {
				t.Errorf("%s %s: the biller's view holds %s: %s", typ, l.URI, g, out)
			}
		}
	}
	if n["coverage"] == 0 || n["encounter"] == 0 {
		t.Fatalf("no billing reads in the synthetic data: %v", n)
	}
	t.Logf("billing reads: %v", n)
}

// The biller's view keeps an Encounter's serviceProvider display, the
// facility's name a claim carries, scrubbed of identifier patterns as a
// Coverage class's name is: the display is free text its sender fills as
// it likes. h-outside3 found the biller's view releasing it whole
// (a home care agency's display with the patient's MRN and telephone).
func TestBillingViewScrubsTheServiceProviderDisplay(t *testing.T) {
	in := `{"resourceType":"Encounter","id":"e","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HH"},` +
		`"subject":{"reference":"Patient/p"},"serviceProvider":{"reference":"Organization/o","display":"Harrowgate Home Care, MRN 66330217, call 555-310-4477"}}`
	out := string(billingView(t, defaultEngine(t), "encounter", []byte(in)))
	for _, c := range []string{"66330217", "555-310-4477"} {
		if strings.Contains(out, c) {
			t.Errorf("the biller's view holds %q: %s", c, out)
		}
	}
	for _, k := range []string{`"display":"Harrowgate Home Care`, `"reference":"Organization/o"`, `"code":"HH"`} {
		if k = keyedRefs(k); !strings.Contains(out, k) {
			t.Errorf("the biller's view lost %s: %s", k, out)
		}
	}
}

// A resource's logical id and the ids its references carry are the
// source's, and a source may make them of a national number: gematik's
// VSDM 2 examples name the Coverage of KVNR E567890127
// VSDMCoverage-GKV-E567890127 and its beneficiary
// Patient/VSDMPatient-GKV-E567890127 (gematik/spec-VSDM2), the NHS's
// Personal Demographics Service serves a Patient under its NHS number
// (Patient/9000000009), and Synthea's MRN equals the Patient id. The
// biller's view removes identifiers and masks the member id to its last
// four characters, but kept the ids whole (the h-outside4 probe): the
// KVNR and the NHS number came out in /id, beneficiary and subject. A
// custos URI names the resource and its patient by keyed ids
// (docs/uris.md), so the biller's view keeps no source id: until h-billref
// it dropped the id and the reference of the beneficiary, the subscriber,
// the policy holder, the subject, a participant and an account (their
// type kept), and a Claim could not be joined to its Coverage; since
// then the id and every reference are renamed by the keyed ids of the
// resources' URIs (pseudonymize:keyedid; viewOptions names every
// resource as held), and an account's stays dropped.
func TestBillingViewDropsSourceIDs(t *testing.T) {
	e := defaultEngine(t)
	for _, c := range []struct {
		typ, in    string
		gone, kept []string
	}{
		{"coverage", `{"resourceType":"Coverage","id":"VSDMCoverage-GKV-V731904826","status":"active",` +
			`"type":{"coding":[{"system":"http://fhir.de/CodeSystem/versicherungsart-de-basis","code":"GKV"}]},"subscriberId":"V731904826",` +
			`"policyHolder":{"reference":"Patient/VSDMPatient-GKV-V731904826"},"subscriber":{"reference":"Patient/VSDMPatient-GKV-V731904826","type":"Patient"},` +
			`"beneficiary":{"reference":"Patient/VSDMPatient-GKV-V731904826"},"period":{"start":"1992-11-13"},` +
			`"payor":[{"reference":"Organization/VSDMPayorOrganization-105929412"}]}`,
			[]string{"V731904826"},
			[]string{`"id":"` + keyedID("Coverage", "VSDMCoverage-GKV-V731904826") + `"`, `"subscriberId":"***4826"`,
				`"subscriber":{"reference":"Patient/VSDMPatient-GKV-V731904826","type":"Patient"}`,
				`"beneficiary":{"reference":"Patient/VSDMPatient-GKV-V731904826"}`,
				`"payor":[{"reference":"Organization/VSDMPayorOrganization-105929412"}]`, `"code":"GKV"`}},
		{"encounter", `{"resourceType":"Encounter","id":"enc-9434765919","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"AMB"},` +
			`"subject":{"reference":"Patient/9434765919","type":"Patient"},"participant":[{"individual":{"reference":"RelatedPerson/rp-9434765919"}}],` +
			`"account":[{"reference":"Account/ACCT-9434765919"}],"serviceProvider":{"reference":"Organization/RXA"}}`,
			[]string{"9434765919"},
			[]string{`"subject":{"reference":"Patient/9434765919","type":"Patient"}`, `"code":"AMB"`,
				`"participant":[{"individual":{"reference":"RelatedPerson/rp-9434765919"}}]`,
				`"serviceProvider":{"reference":"Organization/RXA"}`}},
	} {
		out := billingView(t, e, c.typ, []byte(c.in))
		for _, g := range c.gone {
			if !strings.Contains(c.in, g) {
				t.Errorf("positive control: %q is not in the input", g)
			}
			if strings.Contains(string(out), g) {
				t.Errorf("the biller's view of a %s holds the national number %q: %s", c.typ, g, out)
			}
		}
		for _, k := range c.kept {
			if k = keyedRefs(k); !strings.Contains(string(out), k) {
				t.Errorf("the biller's view of a %s lost %s: %s", c.typ, k, out)
			}
		}
	}
}

// Coverage.network is "the insurer-specific identifier for the
// insurer-defined network of providers" (R4), which decides whether the
// in-network terms apply: the biller keeps it (45 CFR 164.501, payment:
// determinations of coverage), but it is free text its sender fills as it
// likes, so it is scrubbed of identifier patterns, as a class's name is.
// Until h-biller4 it was released whole.
func TestBillingViewScrubsTheCoverageNetwork(t *testing.T) {
	in := `{"resourceType":"Coverage","id":"c","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"Organization/o"}],` +
		`"network":"Keystone Select PPO, member desk 410-555-0199, nw.desk@example.org"}`
	out := string(billingView(t, defaultEngine(t), "coverage", []byte(in)))
	for _, g := range []string{"410-555-0199", "nw.desk@example.org"} {
		if strings.Contains(out, g) {
			t.Errorf("the biller's view holds %q: %s", g, out)
		}
	}
	if k := `"network":"Keystone Select PPO, member desk [PHONE], [EMAIL]"`; !strings.Contains(out, k) {
		t.Errorf("the biller's view lacks %s: %s", k, out)
	}
}

// absentMark is the extension a view marks a withheld required element
// with (minimize: data-absent-reason masked), the one extension a
// biller's view may hold that its source did not put there.
const absentMark = `"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]`

// withoutAbsentMarks is a view without its absent marks, for tests that
// look for an "extension" the view must have dropped.
func withoutAbsentMarks(view []byte) string {
	return strings.ReplaceAll(string(view), absentMark, "")
}
