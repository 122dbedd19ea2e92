package rego_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store/synth"
)

// outside2Canaries are the values planted in minimize/testdata/outside2
// (README.md there): the patient's and her brother's names, MRN, SSN,
// telephone number, e-mail, street, city, ZIP, birth dates, a
// practitioner's name and NPI, member, claim, account, pre-admission,
// accession, lot, serial and UDI numbers, DICOM UIDs, full dates.
var outside2Canaries = []string{
	"Quillon", "Bexworth", "Thistlewick", "Tobiah", "Hesper", "Galloway",
	"77441123", "219-09-9999", "555-867-5309", "quillon.bexworth", "Canary Lane", "Wrenfield", "02139",
	"1931", "1929", "1234567893", "MBR88112233", "RXM88112233", "CLM5566778899", "ACCT-4471123",
	"PA-77441123", "ACSN20240314099", "2.16.124.113543", "SPX-778899", "23234352356", "48736-15394",
	"LOTQX7731", "09504000059118", "00844588003288", "10987654d321", "7654321D", "SN4C7Q2Z9",
	"A9999XYZ100T0474", "Ward 4B", "2024-03-14", "2024-03-18", "Shoshone",
}

// TestOutside2Examples replays the h-outside2 probe's outside-shaped
// resources (CARIN Blue Button, US Core, mCODE and genomics, UDI, DICOM,
// Synthea; minimize/testdata/outside2) under the default policy, deciding
// and minimizing each read as the server does, for the biller (HPAYMT)
// and the researcher (HRESCH): every type either persona may read must
// come out without any planted canary found in it (checked present in the
// input: the positive control). Which types each may read is pinned too,
// so that the test cannot pass by deciding nothing. Each resource is
// decided with the compartment and labels custos import gives it
// (fhirin.Read), so the Synthea home Location, labelled residence, is read
// by neither (until h-review58 the test placed it by hand, unlabelled, and
// skipped its canaries: the biller's view released the home's address
// here). Left out, as findings of areas other work owns (README.md
// there): the biller's reading of tenant-level Device reference data,
// which is read whole.
func TestOutside2Examples(t *testing.T) {
	e := defaultEngine(t)
	dir := filepath.Join("..", "minimize", "testdata", "outside2", "fhir")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	imported := map[string]fhirin.Item{}
	link := func(typ, id, patient string) string { return "attachment://demo/attachments/placeholder" }
	if err := fhirin.Read(context.Background(), dir, fhirin.Options{Link: link}, func(it fhirin.Item) error {
		imported[it.Type+"/"+it.ID] = it
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		role, purpose string
		reads         []string // the types this persona reads of the fixtures
		skip          []string // read, but left out of the canary check (see above)
		allowed       []string // canaries the view may show (a biller reads dates)
		kept          []string // what the view must keep
	}{
		// Since h-biller4 the biller reads the Claim and the CARIN BB
		// ExplanationOfBenefits too, claim numbers masked.
		{"billing", "HPAYMT", []string{"claim", "coverage", "device", "encounter", "explanationofbenefit"}, []string{"device"}, []string{"2024-03-14", "2024-03-18"},
			[]string{`"subscriberId":"***2233"`, `"value":"***2233"`, `"code":"rxid"`, `"code":"IMP"`, `"code":"hosp-trans"`,
				`"value":"***8899"`, `"code":"99231"`, `"code":"A0"`, `"valueString":"***1123"`, `"code":"32485007"`}},
		{"researcher", "HRESCH", []string{"careplan", "coverage", "device", "encounter", "goal", "imagingstudy", "immunization", "observation", "patient", "specimen"}, nil, nil,
			[]string{`"code":"69548-6"`, `"code":"140"`, `"code":"CT"`, `"postalCode":"021"`, `"code":"122555007"`}},
	} {
		t.Run(v.role, func(t *testing.T) {
			sub := policy.NewSubject(policy.Principal{Sub: "probe-" + v.role, Roles: []string{v.role}, ClientID: "outside2", Tenant: synth.DefaultTenant})
			var read []string
			var all strings.Builder
			for _, f := range files {
				in, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				var head struct {
					ResourceType string `json:"resourceType"`
					ID           string `json:"id"`
				}
				if err := json.Unmarshal(in, &head); err != nil {
					t.Fatal(err)
				}
				typ := strings.ToLower(head.ResourceType)
				it, ok := imported[head.ResourceType+"/"+head.ID]
				if !ok {
					t.Fatalf("%s: not read by fhirin", filepath.Base(f))
				}
				it.Body = in
				out, ok := readImported(t, e, sub, v.purpose, it)
				if !ok {
					continue
				}
				if !slices.Contains(read, typ) {
					read = append(read, typ)
				}
				all.Write(out)
				if slices.Contains(v.skip, typ) {
					continue
				}
				for _, c := range outside2Canaries {
					if !slices.Contains(v.allowed, c) && strings.Contains(string(out), c) {
						t.Errorf("%s: the %s's view holds %q: %s", filepath.Base(f), v.role, c, out)
					}
				}
			}
			slices.Sort(read)
			if !slices.Equal(read, v.reads) {
				t.Errorf("the %s reads %v of the fixtures, want %v", v.role, read, v.reads)
			}
			for _, k := range v.kept {
				if !strings.Contains(all.String(), k) {
					t.Errorf("the %s's views lost %s", v.role, k)
				}
			}
		})
	}
	// The positive control: every canary is in the input.
	var in strings.Builder
	for _, f := range files {
		b, _ := os.ReadFile(f)
		in.Write(b)
	}
	for _, c := range outside2Canaries {
		if !strings.Contains(in.String(), c) {
			t.Errorf("positive control: %q is in no fixture", c)
		}
	}
}
