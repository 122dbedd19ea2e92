package minimize

import "testing"

// viewBenchCoverage is a Coverage as the synthetic data set writes one.
const viewBenchCoverage = `{"resourceType":"Coverage","id":"2b6f01b3-4a3b-4aaa-9d5a-a5e469e7e031","meta":{"lastUpdated":"2025-09-30T14:18:00Z"},` +
	`"identifier":[{"system":"urn:oid:2.16.840.1.113883.3.7777.5","value":"W123456789"}],"status":"active",` +
	`"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIP","display":"health insurance plan policy"}]},` +
	`"subscriberId":"W123456789","beneficiary":{"reference":"Patient/fd7ef8a9-9188-4a48-88f5-e0c3191b20fa","display":"Jane Q. Doe"},` +
	`"relationship":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/subscriber-relationship","code":"self"}]},` +
	`"period":{"start":"2025-01-01","end":"2026-12-31"},"payor":[{"display":"Synthetic Mutual Health Plan"}],` +
	`"class":[{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/coverage-class","code":"group"}]},"value":"GRP-01234"}]}`

// viewBenchObligations are the shape of the default policy's billing
// obligations for a Coverage (rego billing_obligations), shortened.
var viewBenchObligations = []Obligation{
	{Op: OpMask, Path: "/subscriberId", Fn: MaskLast4},
	{Op: OpMask, Path: "/class/*/value", Fn: MaskLast4},
	{Op: OpRemove, Path: "/identifier"},
	{Op: OpRemove, Path: "/beneficiary/display"},
	{Op: OpRemove, Path: "/text"},
	{Op: OpScrub, Path: "/class/*/name"},
	{Op: OpAllow, Fn: "/meta/versionId,/meta/lastUpdated,/meta/security,/id,/status,/subscriberId,/beneficiary/reference,/period," +
		"/payor/*/reference,/class/*/value,/class/*/name,/type/coding/*/system,/type/coding/*/code," +
		"/relationship/coding/*/system,/relationship/coding/*/code,/class/*/type/coding/*/system,/class/*/type/coding/*/code"},
}

// BenchmarkJSONNoObligations is the common read: a resource released as
// it is (decoded, re-encoded), never pruned.
func BenchmarkJSONNoObligations(b *testing.B) {
	doc := []byte(viewBenchCoverage)
	for b.Loop() {
		if _, err := JSON(doc, nil, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJSONBillingView is a biller's view of a Coverage: obligations,
// then (since h-views) pruneView.
func BenchmarkJSONBillingView(b *testing.B) {
	doc := []byte(viewBenchCoverage)
	for b.Loop() {
		if _, err := JSON(doc, viewBenchObligations, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
