package bundle

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/custos-mcp/custos/audit"
)

// keyedHash is the form of a patient's keyed hash (docs/audit-format.md,
// section 11).
var keyedHash = regexp.MustCompile(`^hk1-[0-9a-f]{32}$`)

// TestPatientEntityClaimsKeyedHashOnlyForKeyedHashes: an AuditEvent's
// patient entity names the identifier system of custos's keyed hashes
// only for a value that is one. Logs written before patient ids were
// keyed-hashed (v1 records, and the first v2 ones: the committed
// audit/testdata/v1log, written by the v1 code) hold the patient id
// itself; exporting it as a keyed hash told an auditor that a raw id was
// a pseudonym. The record is exported as it is (records.jsonl is the
// record), but the event no longer vouches for it.
func TestPatientEntityClaimsKeyedHashOnlyForKeyedHashes(t *testing.T) {
	records := []audit.Record{{V: 2, Seq: 9, EventID: "e9", Entry: audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow,
		Principal: audit.Principal{Sub: "dr"}, URIs: []string{"fhir://t/patients/hk1-0123456789abcdef0123456789abcdef/observation/o"},
		Patients: []string{"hk1-0123456789abcdef0123456789abcdef"}}}}
	for _, line := range lines(t, "../testdata/v1log/audit.jsonl") {
		r, err := audit.Decode(line)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, r)
	}
	hashed, unhashed := 0, 0
	for _, r := range records {
		evs, err := FHIRAuditEvents(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range evs {
			var ev auditEvent
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			for _, p := range ev.entities("1", "1") {
				id := p.What.Identifier
				switch {
				case keyedHash.MatchString(id.Value):
					hashed++
					if id.System != custosPatientHash {
						t.Errorf("record %d: keyed hash %s without the keyed-hash system (%q)", r.Seq, id.Value, id.System)
					}
				default:
					unhashed++
					if id.System == custosPatientHash {
						t.Errorf("record %d (v%d): patient %q is not a keyed hash, but its identifier system says it is (%s)", r.Seq, r.V, id.Value, id.System)
					}
				}
			}
		}
	}
	if hashed == 0 || unhashed == 0 {
		t.Fatalf("%d keyed-hash and %d other patient entities: the test needs both", hashed, unhashed)
	}
}
