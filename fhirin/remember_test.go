package fhirin

import (
	"fmt"
	"testing"
	"time"
)

// remember files what the Bundles of an import write in time linear in
// it, however many resources share an identifier: Synthea gives every
// ExplanationOfBenefit the identifier claim-group|99999999999. Before,
// each resource filed scanned every earlier one under that identifier
// (quadratic: 100,000 resources took minutes), since h-import6 filed the
// plain writes of every Bundle. A resource filed again (the same content
// in a later Bundle) is listed once, and one whose identifiers share a
// value once under the any-system search.
func TestRememberSharedIdentifierLinear(t *testing.T) {
	// remembered files n such resources, 100 to a Bundle, and times it.
	remembered := func(n int) (*reader, time.Duration) {
		rd := &reader{}
		entries := make([]*entry, n)
		for i := range entries {
			entries[i] = &entry{typ: "ExplanationOfBenefit", id: fmt.Sprintf("eob-%d", i), writes: true,
				identifiers: []string{"https://bluebutton.cms.gov/resources/variables/clm_id|" + fmt.Sprint(i), "https://bluebutton.cms.gov/resources/identifier/claim-group|99999999999"}}
		}
		start := time.Now()
		for i := 0; i < n; i += 100 {
			rd.remember(entries[i : i+100])
		}
		return rd, time.Since(start)
	}
	// The fastest of a few runs each, as the machine may be busy.
	fastest := func(n, runs int) (rd *reader, d time.Duration) {
		for range runs {
			r, t := remembered(n)
			if rd == nil || t < d {
				rd, d = r, t
			}
		}
		return rd, d
	}
	const n = 100_000
	_, small := fastest(n/10, 3)
	rd, large := fastest(n, 2)
	// Linear: about 10 times as long; quadratic: about 100.
	if large > 50*small+time.Second {
		t.Errorf("remembering %d resources sharing an identifier took %v, %d took %v: not linear", n, large, n/10, small)
	}
	if got := rd.writtenBy("ExplanationOfBenefit", Search{Value: "99999999999", AnySystem: true}); len(got) != n {
		t.Errorf("a search by the shared identifier finds %d, want %d", len(got), n)
	}
	// The same resource again, and one whose two identifiers share a value.
	again := &entry{typ: "Organization", id: "o1", writes: true, identifiers: []string{"urn:a|7", "urn:b|7"}}
	rd.remember([]*entry{again})
	rd.remember([]*entry{again})
	for _, q := range []Search{{Value: "7", AnySystem: true}, {System: "urn:a", Value: "7"}, {System: "urn:b", Value: "7"}} {
		if got := rd.writtenBy("Organization", q); len(got) != 1 || got[0].id != "o1" {
			t.Errorf("%+v finds %v, want o1 once", q, got)
		}
	}
}
