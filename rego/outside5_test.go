package rego_test

import (
	"context"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store/synth"
)

// outside5Canaries are the values planted in minimize/testdata/outside5
// (README.md there), in the shapes converters and EHR vendor APIs give
// them: names (an HL7 v2 XPN in capitals, Epic's official and usual
// names, a contact's, a relative's, clinicians'), MRNs and other record
// numbers (PID-3, Epic's MRN and EPI under urn:oid:1.2.840.114350, Oracle
// Health's MRN with its rendered value, a federated person principal),
// SSNs, account (PID-18), visit (PV1-19), CSN and FIN numbers, member and
// policy numbers, lot numbers, telephone numbers (also as v2 XTN parts
// and bare digits), e-mail addresses, streets, towns, ZIP codes, full
// dates of birth (also in v2 and US forms), a v2 location, the original
// HL7 v2 message and notes in HTML and RTF naming the patient, and ids
// and URLs (meta.source, link) that carry the MRN.
var outside5Canaries = []string{
	"HAVERBROOK", "Haverbrook", "PERPETUA", "Perpetua", "LISLE", "58203391", "531-86-2047", "555-0162", "5550162",
	"perpetua.haverbrook", "TAMARACK", "Tamarack", "RHINELANDER", "Rhinelander", "54501", "1946-11-04", "19461104",
	"7730019452", "V00488213", "LUCIUS", "555-0177", "Imelda", "555-0199", "MSG00417", "4W^412", "GALLOWAY",
	"1234567893", "POL-58203", "NWM772019452", "IZ-58203391", "LOTPH58203391",
	"Ashgrove", "Cordelia", "Delia", "Fenwick", "E4417206", "40918273", "468-22-7391", "555-0138",
	"cordelia.at", "Lindenhurst", "LINDENHURST", "Excelsior", "55331", "1949-02-17", "02/17/1949", "Ambrose",
	"555-0184", "Wren Hollow", "81773920145", "Penhallow", "993302871", "993302874", "90417206", "LKH468227391",
	"TqvM4",
	"NESSELRODE", "BARTHOLOMEW", "PHILIPPA", "Philippa", "00000710948", "289-41-7702", "289417702", "8165550147",
	"816-555-0147", "8165550193", "816-555-0193", "b.nesselrode", "Osage", "64081", "Summit", "1932-09-30",
	"09/30/1932", "FIN-00551207", "551207", "Threlkeld", "5E14",
	"Ostrander", "OSTRANDER", "Winifred", "33019827", "Cobble", "Grafton", "05146", "1951-07-08", "802-555-0116",
	"stcuthbert",
	"Delacorte", "Evander", "61840275", "Heron Weir", "Castine", "04421", "1958-12-19", "207-555-0151", "evander.dw",
}

// TestOutside5Examples replays the h-outside5 probe's converter and EHR
// vendor API shapes (minimize/testdata/outside5) under the default policy
// as TestOutside4Examples does, for every persona the probe served: each
// resource custos import reads of them is decided and minimized as the
// server does. The clinician of the care team reads every resource whole;
// a clinician without a care relationship, the auditor and a clinician of
// another tenant read none of the patients' (the first two read the
// insurer, tenant-level reference data holding no canary); the biller
// reads Coverages, Encounters and the insurer, the researcher the research
// types de-identified, and no planted canary may come out of their views
// but those listed. The attachments and Binaries (the original HL7 v2
// message, a C-CDA, Epic's HTML and RTF notes, Oracle Health's HTML
// discharge summary) are read by the care team's clinician alone
// (docs/policy.md, "Attachments"). The types each reads are pinned so that
// the test cannot pass by deciding nothing.
func TestOutside5Examples(t *testing.T) {
	e := defaultEngine(t)
	items, careTeam := probeItems(t, "outside5", outside5Canaries)
	everything := []string{"account", "appointment", "condition", "coverage", "documentreference", "encounter", "immunization",
		"medicationrequest", "observation", "organization", "patient", "provenance", "relatedperson", "servicerequest"}
	research := []string{"condition", "coverage", "encounter", "immunization", "medicationrequest", "observation", "organization",
		"patient", "servicerequest"}
	for _, v := range []probePersona{
		{name: "clinician", p: policy.Principal{Roles: []string{"clinician"}, Patients: careTeam}, purpose: "TREAT",
			reads: everything, wholeAll: true},
		{name: "clinician-no-care", p: policy.Principal{Roles: []string{"clinician"}}, purpose: "TREAT", reads: []string{"organization"}},
		{name: "auditor", p: policy.Principal{Roles: []string{"auditor"}}, purpose: "HOPERAT"},
		{name: "outsider", p: policy.Principal{Roles: []string{"clinician"}, Patients: careTeam, Tenant: synth.OutsiderTenant}, purpose: "TREAT"},
		{name: "billing", p: policy.Principal{Roles: []string{"billing"}}, purpose: "HPAYMT", reads: []string{"coverage", "encounter", "organization"},
			kept: []string{`"subscriberId":"***9452"`, `"value":"***1120"`, `"code":"spouse"`, `"code":"IMP"`, `"code":"emd"`,
				`"display":"Baseline West Medical Center"`, keyedRefs(`"reference":"Location/eLkShore4W"`)}},
		{name: "researcher", p: policy.Principal{Roles: []string{"researcher"}}, purpose: "HRESCH", reads: research,
			kept: []string{`"birthDate":"1946"`, `"birthDate":"1949"`, `"postalCode":"545"`, `"postalCode":"553"`, `"postalCode":"640"`,
				`"state":"MN"`, `"code":"8867-4"`, `"code":"38341003"`, `"code":"2345-7"`, `"code":"141"`, `"code":"E11.9"`,
				`"valueCode":"F"`, `"publicationDate":"2023"`}},
	} {
		t.Run(v.name, func(t *testing.T) {
			// The care team's clinician alone reads the attachments and
			// Binaries, whole.
			attachments := v.wholeAll
			sub, all := replayPersona(t, e, "outside5", v, items, outside5Canaries)
			n := 0
			for _, it := range items {
				if it.MIMEType == "application/fhir+json" {
					continue
				}
				n++
				dec, err := e.Decide(context.Background(), policy.Input{Subject: sub, PurposeOfUse: v.purpose, Action: policy.ActionRead,
					Resource: &policy.Resource{Type: "attachment", Patient: it.Patient, Tenant: synth.DefaultTenant, Sensitivity: it.Sensitivity}})
				if err != nil {
					t.Fatal(err)
				}
				if dec.Allow != attachments || dec.Allow && len(dec.Obligations) != 0 {
					t.Errorf("%s %s (%s): the %s's read is allowed %v with obligations %v, want allowed %v and whole",
						it.Type, it.ID, it.MIMEType, v.name, dec.Allow, dec.Obligations, attachments)
				}
				if dec.Allow {
					all += string(it.Body)
				}
			}
			if n != 5 {
				t.Errorf("%d attachments and Binaries read, want 5", n)
			}
			for _, c := range outside5Canaries {
				if v.wholeAll && !strings.Contains(all, c) {
					t.Errorf("the %s's views and attachments lost %q", v.name, c)
				}
			}
		})
	}
}
