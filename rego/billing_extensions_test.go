package rego_test

import (
	"strings"
	"testing"
)

// TestBillingViewDropsExtensionsInsideKeptElements: the biller's view keeps
// the R4 elements claims work needs and no extension, at any depth. The
// h-outside2 probe (2026-12-07) found a name in Encounter.class.extension,
// an MRN in period.extension, a telephone number in a statusHistory
// entry's extension and an account number in a cost's Money extension
// released: the allow-list kept each listed element whole, its
// extensions with it. A modifierExtension stays (R4 forbids reading an
// element as if its modifier were absent: TestBillingViewKeepsNestedModifierExtensions).
func TestBillingViewDropsExtensionsInsideKeptElements(t *testing.T) {
	e := defaultEngine(t)
	ext := func(v string) string { return `"extension":[{"url":"http://example.org/x","valueString":"` + v + `"}]` }
	for _, c := range []struct {
		typ, in string
		gone    []string
		kept    []string
	}{
		{"encounter", `{"resourceType":"Encounter","id":"e","status":"finished","_status":{` + ext("Status Canary") + `},` +
			`"class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"IMP",` + ext("Jane Canary") + `},` +
			`"period":{"start":"2024-03-01",` + ext("MRN 77441123") + `},` +
			`"statusHistory":[{"status":"arrived","period":{"start":"2024-03-01"},` + ext("555-867-5309") + `}],` +
			`"subject":{"reference":"Patient/p","type":"Patient",` + ext("Subject Canary") + `},` +
			`"diagnosis":[{"condition":{"reference":"Condition/c"},"use":{"coding":[{"code":"AD",` + ext("Dx Canary") + `}]},"rank":1}]}`,
			[]string{"Status Canary", "Jane Canary", "77441123", "555-867-5309", "Subject Canary", "Dx Canary", `"extension"`, `"_status"`},
			[]string{`"code":"IMP"`, `"period":{"start":"2024-03-01"}`, `"status":"arrived"`, `"subject":{"reference":"Patient/p","type":"Patient"}`, `"code":"AD"`}},
		{"coverage", `{"resourceType":"Coverage","id":"c","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"Organization/o"}],` +
			`"period":{"start":"2024-01-01",` + ext("Period Canary") + `},` +
			`"costToBeneficiary":[{"type":{"coding":[{"code":"copay"}]},"valueMoney":{"value":20,"currency":"USD",` + ext("ACCT-4471123") + `}}]}`,
			[]string{"Period Canary", "ACCT-4471123", `"extension"`},
			[]string{`"valueMoney":{"currency":"USD","value":20}`, `"period":{"start":"2024-01-01"}`, `"code":"copay"`}},
	} {
		t.Run(c.typ, func(t *testing.T) {
			out := billingView(t, e, c.typ, []byte(c.in))
			for _, g := range c.gone {
				if !strings.Contains(c.in, g) {
					t.Errorf("positive control: %q is not in the input", g)
				}
				if strings.Contains(withoutAbsentMarks(out), g) {
					t.Errorf("the biller's view holds %s: %s", g, out)
				}
			}
			for _, k := range c.kept {
				if k = keyedRefs(k); !strings.Contains(string(out), k) {
					t.Errorf("the biller's view lacks %s: %s", k, out)
				}
			}
		})
	}
}
