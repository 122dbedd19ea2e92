package audit_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/custos-mcp/custos/audit"
)

// The server appends one record per request and releases the payload only
// after Append returned without error.
func ExampleLog_Append() {
	dir, err := os.MkdirTemp("", "audit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "audit.db")

	l, err := audit.Open(path, audit.Options{
		Node: "node-a",
		Now:  func() time.Time { return time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC) },
	})
	if err != nil {
		log.Fatal(err)
	}
	rec, err := l.Append(context.Background(), audit.Entry{
		Action:       audit.ActionResourcesRead,
		Outcome:      audit.OutcomeAllow,
		Reason:       "clinician_care_team",
		Principal:    audit.Principal{Sub: "dr.house", Roles: []string{"clinician"}, ClientID: "claude"},
		PurposeOfUse: "TREAT",
		Source:       "stdio",
		URIs:         []string{"phi://patients/6f1c2a44/summary"},
		Patients:     []string{"6f1c2a44"},
		// Key versions in force: names and versions, never key bytes.
		Keys: []string{"cursor=secret/custos/cursor-key@3", "audit-hmac=secret/custos/audit-hmac-key@2"},
	})
	if err != nil {
		// Fail closed: release nothing.
		log.Fatal(err)
	}
	fmt.Println("seq", rec.Seq, "time", rec.Time.Format(time.RFC3339), "prev", rec.PrevHash[:8])
	fmt.Println("v", rec.V, "keys", rec.Keys)
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}

	sum, err := audit.VerifyFile(context.Background(), path, func(p audit.Problem) { fmt.Println(p) })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("records", sum.Records, "problems", sum.Problems)
	// Output:
	// seq 1 time 2026-11-21T09:30:00Z prev 00000000
	// v 2 keys [audit-hmac=secret/custos/audit-hmac-key@2 cursor=secret/custos/cursor-key@3]
	// records 1 problems 0
}

// Records of both format versions decode and hash the same way; a v1
// record has no "keys" field.
func ExampleHashRecord() {
	canon := []byte(`{"v":1,"seq":1,"event_id":"00000000-0000-4000-8000-000000000001","time":"2026-11-21T09:30:00.000000000Z","node":"node-a","action":"resources/list","outcome":"deny","reason":"","principal":{"sub":"","roles":[],"client_id":""},"purpose_of_use":"","session":"","source":"","uris":[],"patients":[],"digests":[],"decision_id":"","policy_revision":"","obligations":[],"dev":false,"prev_hash":"0000000000000000000000000000000000000000000000000000000000000000"}`)
	if _, err := audit.Decode(canon); err != nil {
		log.Fatal(err)
	}
	fmt.Println(audit.HashRecord(canon))
	canon2 := []byte(`{"v":2,"seq":1,"event_id":"00000000-0000-4000-8000-000000000001","time":"2026-11-21T09:30:00.000000000Z","node":"node-a","action":"resources/list","outcome":"deny","reason":"","principal":{"sub":"","roles":[],"client_id":""},"purpose_of_use":"","session":"","source":"","uris":[],"patients":[],"digests":[],"decision_id":"","policy_revision":"","obligations":[],"dev":false,"keys":[],"prev_hash":"0000000000000000000000000000000000000000000000000000000000000000"}`)
	if _, err := audit.Decode(canon2); err != nil {
		log.Fatal(err)
	}
	fmt.Println(audit.HashRecord(canon2))
	// Output:
	// c6d0701e4260b598114eb47c2d1167aff17c2a16b0b418d1ac4a400bf50fb5d2
	// 08528c225c8fc247bf7150956332b41034be75b27b9237f1a91357147a53865b
}
