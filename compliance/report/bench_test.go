package report

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
)

// BenchmarkBuild: a quarter of a busy log (100,000 records over 90 days,
// 2,000 patients, 200 users) counted, then rendered as JSON and HTML.
func BenchmarkBuild(b *testing.B) {
	const n = 100_000
	rs := make([]audit.Record, n)
	outcomes := []string{"allow", "allow", "allow", "deny", "error"}
	purposes := []string{"TREAT", "TREAT", "HPAYMT", "HRESCH", "ETREAT"}
	for i := range rs {
		rs[i] = audit.Record{Seq: uint64(i + 1), Time: t0.Add(time.Duration(i) * 90 * 24 * time.Hour / n),
			Entry: audit.Entry{Action: "resources/read", Outcome: outcomes[i%5], Reason: "clinician_care_team",
				Principal: audit.Principal{Sub: fmt.Sprintf("user-%d", i%200)}, PurposeOfUse: purposes[i%5],
				Patients: []string{fmt.Sprintf("hk1-%04d", i%2000)}, PolicyRevision: "rev-a", Keys: []string{"audit-hmac=k@1"}}}
	}
	b.ReportAllocs()
	for b.Loop() {
		bl := NewBuilder()
		for _, r := range rs {
			if err := bl.Add(r); err != nil {
				b.Fatal(err)
			}
		}
		rep, err := bl.Build(Inputs{})
		if err != nil {
			b.Fatal(err)
		}
		if err := rep.WriteJSON(io.Discard); err != nil {
			b.Fatal(err)
		}
		if err := rep.WriteHTML(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
