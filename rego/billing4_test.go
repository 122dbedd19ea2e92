package rego_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// billing4Canaries are the values planted in rego/testdata/billing4
// (README.md there): the patient's name, SSN, telephone number, street,
// town and birth date, a clinician's name and NPI, an MRN and a patient
// account number in supportingInfo, a member number in a coverage's
// display, claim, prior-claim, prior-authorization, payment and business
// arrangement numbers, an attachment's data, and the members that hold
// only free text or what a biller must not read (narrative, contained
// resources, extensions, displays, disposition, processNote).
var billing4Canaries = []string{
	"Wilhelmina", "Quarrington", "219-77-4410", "555-734-9012", "Marrowbone", "Easthollow", "1938-02-11",
	"Feldspar", "1497758544", "88120457", "PACCT-30017744", "MBR55120987",
	"9612345", "987654321", "R3500-88341277", "PRIOR-CLM-99001122", "PAYCLM-55667788", "PA-20140815-3321",
	"201408-2-1569478", "EFT-0090017723", "BA-44129876", "UC1234", "HOSP1234", "V2lsaGVsbWluYSBRdWFycmluZ3Rvbg==",
	`"text"`, `"contained"`, `"extension"`, `"display"`, `"disposition"`, `"processNote"`, `"form"`,
	`"locationAddress"`, `"valueAttachment"`, `"businessArrangement"`, `"noteNumber"`, `"name"`, `"description"`,
	// Source ids (billing, source ids in docs/policy.md): the patient's,
	// the coverage's, the claim's and the claim response's.
	"Patient/1", "Coverage/9876B1", "Claim/100150", "ClaimResponse/R3500",
}

// TestBillingViewOfClaimsAndRemittances reads R4 Claim, ClaimResponse and
// ExplanationOfBenefit examples (HL7 FHIR R4's and CARIN Blue Button's,
// rego/testdata/billing4, README.md there names the sources) as a biller
// (HPAYMT) under the default policy, applying the decision's obligations
// as the server does. What a claim or remittance carries (X12 837, 835;
// CARIN BB) is kept: codes, sequences, dates, amounts, references to
// organizations, practitioners, locations and encounters, claim numbers
// masked to their last four characters (no source id of the patient, the
// coverage or a claim: the id and references renamed to keyed ids,
// pseudonymize:keyedid, which viewOptions names under a test key; the
// expected fragments are written with source ids, keyedRefs); every planted canary is
// gone (checked present in the input: the positive control). Until
// h-biller4 (2026-12-07) a biller was denied all three types.
func TestBillingViewOfClaimsAndRemittances(t *testing.T) {
	e := defaultEngine(t)
	var all strings.Builder
	for _, c := range []struct {
		file, typ string
		kept      []string
	}{
		{"claim-example-institutional.json", "claim", []string{
			`"use":"claim"`, `"code":"institutional"`, `"code":"emergency"`,
			`"billablePeriod":{"end":"2014-08-16","start":"2014-08-15"}`, `"created":"2014-08-16"`,
			`"insurer":{"reference":"Organization/2"}`, `"provider":{"reference":"Organization/1"}`, `"code":"normal"`,
			`"value":"***2345"`, `"relationship":{"coding":[{"code":"prior"`,
			`"careTeam":[{"provider":{"reference":"Practitioner/example"},"role":{"coding":[{"code":"primary"`,
			`"code":{"coding":[{"code":"0131","system":"https://www.nubc.org/CodeSystem/TypeOfBill"}]},"sequence":1`,
			`"valueString":"***0457"`,
			`"diagnosisCodeableConcept":{"coding":[{"code":"654456"}]},"sequence":1`, `"code":"principal"`,
			`"date":"2014-08-15","procedureCodeableConcept":{"coding":[{"code":"0HQ9XZZ"`,
			`"focal":true,"identifier":{"system":"http://happypayer.com/claim","value":"***7788"},"preAuthRef":["***3321"],"sequence":1}]`,
			`"accident":{"date":"2014-08-15","type":{"coding":[{"code":"HNACC"`,
			`"careTeamSequence":[1],"diagnosisSequence":[1],"encounter":[{"reference":"Encounter/example"}]`,
			`"modifier":[{"coding":[{"code":"25"`, `"net":{"currency":"USD","value":125.0}`, `"procedureSequence":[1]`,
			`"productOrService":{"coding":[{"code":"exam"`, `"quantity":{"value":1}`, `"code":"0450"`,
			`"servicedDate":"2014-08-16","unitPrice":{"currency":"USD","value":125.0}`, `"total":{"currency":"USD","value":125.0}`,
		}},
		{"claimresponse-example.json", "claimresponse", []string{
			`"outcome":"complete"`, `"value":"***1277"`,
			`"requestor":{"reference":"Organization/1"}`, `"payeeType":{"coding":[{"code":"provider"`,
			`"category":{"coding":[{"code":"eligpercent"}]},"value":80.0`,
			`"reason":{"coding":[{"code":"45","system":"https://x12.org/codes/claim-adjustment-reason-codes"}]}}],"itemSequence":1`,
			`"total":[{"amount":{"currency":"USD","value":135.57},"category":{"coding":[{"code":"submitted"}]}}`,
			`"payment":{"amount":{"currency":"USD","value":100.47},"date":"2014-08-31","identifier":{"system":"http://www.BenefitsInc.com/fhir/paymentRef","value":"***9478"},"type":{"coding":[{"code":"complete"`,
			`"formCode":{"coding":[{"code":"2"`, `"focal":true,"sequence":1}]`,
		}},
		{"explanationofbenefit-example.json", "explanationofbenefit", []string{
			`"outcome":"complete"`,
			`"value":"***4321"`, `"facility":{"reference":"Location/1"}`,
			`"adjudication":[{"amount":{"currency":"USD","value":120.0},"category":{"coding":[{"code":"eligible"}]}}`,
			`"code":"1205"`, `"total":[{"amount":{"currency":"USD","value":135.57}`,
			`"financial":[{"allowedMoney":{"currency":"USD","value":1000},"type":{"coding":[{"code":"benefit"`,
		}},
		{"c4bb-eob-professional-example1.json", "explanationofbenefit", []string{
			`"billablePeriod":{"end":"2020-08-04","start":"2020-08-04"}`, `"value":"***ple1"`,
			`"code":"I70.249"`, `"code":"L97.929"`, `"code":"secondary"`, `"code":"referring"`, `"code":"contracted"`,
			`"sequence":2,"timingDate":"2020-08-24"`, `"valueString":"***7744"`,
			`"locationCodeableConcept":{"coding":[{"code":"21"`, `"modifier":[{"coding":[{"code":"26"`, `"code":"75710"`,
			`"code":"innetwork"`, `"reason":{"coding":[{"code":"45"`, `"code":"memberliability"`,
			`"payment":{"amount":{"currency":"USD","value":258.91},"date":"2020-09-01","identifier":{"value":"***7723"}`,
			`"meta":{"lastUpdated":"2020-10-20T14:46:05-04:00","profile":`,
		}},
	} {
		t.Run(c.file, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", "billing4", c.file))
			if err != nil {
				t.Fatal(err)
			}
			all.Write(in)
			out := string(billingView(t, e, c.typ, in))
			for _, g := range billing4Canaries {
				if strings.Contains(string(in), g) && strings.Contains(withoutAbsentMarks([]byte(out)), g) {
					t.Errorf("the biller's view holds %s: %s", g, out)
				}
			}
			for _, k := range c.kept {
				if k = keyedRefs(k); !strings.Contains(out, k) {
					t.Errorf("the biller's view lost %s: %s", k, out)
				}
			}
		})
	}
	for _, g := range billing4Canaries {
		if !strings.Contains(all.String(), g) {
			t.Errorf("positive control: %s is in no fixture", g)
		}
	}
}
