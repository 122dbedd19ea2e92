package audit

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden")

// goldenRecords pin the canonical encoding and the hash. The same vectors are
// listed in docs/audit-format.md. If this test fails, the format changed:
// that is a new format version, not a fix to the test.
var goldenRecords = []struct {
	name string
	rec  Record
}{
	{"minimal", Record{
		Entry: Entry{
			Action:  "resources/list",
			Outcome: "deny",
		},
		EventID:  "00000000-0000-4000-8000-000000000001",
		Seq:      1,
		Time:     time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC),
		Node:     "node-a",
		PrevHash: ZeroHash,
	}},
	{"full", Record{
		Entry: Entry{
			Action:  "resources/read",
			Outcome: "allow",
			Reason:  "clinician_care_team",
			Principal: Principal{
				Sub:      "dr.house@example.org",
				Roles:    []string{"clinician", "attending"},
				ClientID: "claude-desktop",
			},
			PurposeOfUse:   "TREAT",
			Session:        "9b2f6c1e-5a7d-4e1b-9c3a-0d4e5f6a7b8c",
			Source:         "10.0.0.7:53122",
			URIs:           []string{"phi://patients/6f1c2a44-3b1e-4c8a-9d2f-0a1b2c3d4e5f/summary"},
			Patients:       []string{"6f1c2a44-3b1e-4c8a-9d2f-0a1b2c3d4e5f"},
			Digests:        []string{"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08@v2"},
			DecisionID:     "d-7f3a",
			PolicyRevision: "rev-2026-11-20.1",
			Obligations:    []string{"remove:/ssn", "mask:/phone"},
			Dev:            true,
		},
		EventID:  "3d4c2b1a-9e8f-4a7b-8c6d-5e4f3a2b1c0d",
		Seq:      42,
		Time:     time.Date(2026, 11, 21, 9, 30, 1, 123456789, time.UTC),
		Node:     "node-b",
		PrevHash: "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
	}},
	{"unicode", Record{
		Entry: Entry{
			Action:  "resources/read",
			Outcome: "error",
			Reason:  "not_found",
			Principal: Principal{
				Sub:      "José Ñúñez 日本語 🩺",
				Roles:    []string{`quote"back\slash`, "<script>&amp;</script>"},
				ClientID: "tab\tnl\ncr\rbs\bff\f",
			},
			PurposeOfUse: "ETREAT",
			Session:      "ctl\x00\x01\x1f\x7f",
			Source:       "stdio",
			URIs:         []string{"phi://patients/x/notes?q=a/b", "line\u2028sep\u2029para"},
		},
		EventID:  "ffffffff-ffff-4fff-bfff-ffffffffffff",
		Seq:      18446744073709551615,
		Time:     time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		Node:     "nœud-ü",
		PrevHash: "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
	}},
}

func TestGolden(t *testing.T) {
	for _, g := range goldenRecords {
		t.Run(g.name, func(t *testing.T) {
			canon := Encode(g.rec)
			hash := HashRecord(canon)
			jsonPath := filepath.Join("testdata", "golden", g.name+".json")
			hashPath := filepath.Join("testdata", "golden", g.name+".sha256")
			if *update {
				if err := os.WriteFile(jsonPath, canon, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(hashPath, []byte(hash+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(jsonPath)
			if err != nil {
				t.Fatal(err)
			}
			wantHash, err := os.ReadFile(hashPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(canon, want) {
				t.Errorf("Encode changed:\n got %s\nwant %s", canon, want)
			}
			if hash != strings.TrimSpace(string(wantHash)) {
				t.Errorf("HashRecord = %s, want %s", hash, wantHash)
			}
			got, err := Decode(want)
			if err != nil {
				t.Fatalf("Decode(golden): %v", err)
			}
			wantRec := g.rec
			wantRec.Hash = strings.TrimSpace(string(wantHash))
			if !reflect.DeepEqual(got, wantRec) {
				t.Errorf("Decode(golden) = %+v\nwant %+v", got, wantRec)
			}
		})
	}
}

// TestGoldenMinimalLiteral spells one vector out in the test source so the
// format is readable here too.
func TestGoldenMinimalLiteral(t *testing.T) {
	const want = `{"v":1,"seq":1,"event_id":"00000000-0000-4000-8000-000000000001","time":"2026-11-21T09:30:00.000000000Z","node":"node-a","action":"resources/list","outcome":"deny","reason":"","principal":{"sub":"","roles":[],"client_id":""},"purpose_of_use":"","session":"","source":"","uris":[],"patients":[],"digests":[],"decision_id":"","policy_revision":"","obligations":[],"dev":false,"prev_hash":"0000000000000000000000000000000000000000000000000000000000000000"}`
	if got := string(Encode(goldenRecords[0].rec)); got != want {
		t.Errorf("Encode(minimal) =\n%s\nwant\n%s", got, want)
	}
}
