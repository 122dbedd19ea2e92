package bundle

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/scrub"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestIntegrityFailureIsCriticalInOCSF: an audit/integrity record (the
// scrubber or the startup check found the audit log broken: tampering or
// corruption of the evidence itself) is exported to OCSF as severity 5
// Critical, as the operations alert on it is (CustosAuditIntegrityBroken,
// docs/operations.md), not as the Medium of any failed request: a SIEM
// rule on High and above saw it before as it saw a read that failed on a
// store error. Every other error stays Medium. Both events pass the OCSF
// 1.3.0 schema.
func TestIntegrityFailureIsCriticalInOCSF(t *testing.T) {
	if actionIntegrity != scrub.Action {
		t.Fatalf("the export's integrity action %q is not audit/scrub's %q", actionIntegrity, scrub.Action)
	}
	broken := scrub.Pass{Size: 9, Problems: []audit.Problem{{Seq: 4, Kind: audit.KindHashMismatch}}, Found: 1}.Entry()
	failed := audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeError, Reason: "payload_unavailable",
		Principal: audit.Principal{Sub: "dr"}, Source: "stdio"}
	schema := compileOCSFSchema(t)
	for _, c := range []struct {
		e        audit.Entry
		id       int
		severity string
	}{{broken, 5, "Critical"}, {failed, 3, "Medium"}} {
		r := audit.Record{V: audit.FormatVersion, Entry: c.e, EventID: "e1", Seq: 10, Time: time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC), Node: "n1", PrevHash: audit.ZeroHash}
		b, err := OCSFAPIActivity(r)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			SeverityID int    `json:"severity_id"`
			Severity   string `json:"severity"`
			StatusID   int    `json:"status_id"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.SeverityID != c.id || ev.Severity != c.severity || ev.StatusID != 2 {
			t.Errorf("%s %s (%s): severity %d %q status %d, want %d %q, status 2 Failure", r.Action, r.Outcome, r.Reason, ev.SeverityID, ev.Severity, ev.StatusID, c.id, c.severity)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(v); err != nil {
			t.Errorf("%s: not valid OCSF 1.3.0 API Activity: %v", r.Action, err)
		}
	}
}
