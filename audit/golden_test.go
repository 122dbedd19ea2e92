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
		V: FormatVersion1,
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
		V: FormatVersion1,
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
		V: FormatVersion1,
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
	// Version 2: "keys" between "dev" and "prev_hash".
	{"v2-minimal", Record{
		V: FormatVersion2,
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
	// v2-full is the first v2 record of a log migrated in place: it follows
	// the v1 "full" record (seq 42) and chains to its hash.
	{"v2-full", Record{
		V: FormatVersion2,
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
			DecisionID:     "d-7f3b",
			PolicyRevision: "rev-2026-11-20.1",
			Obligations:    []string{"remove:/ssn", "mask:/phone"},
			Keys: []string{
				"audit-hmac=secret/custos/audit-hmac-key@2",
				"blob-kek=transit/custos-blob-kek@1",
				"cursor=secret/custos/cursor-key@3",
			},
		},
		EventID:  "4e5d3c2b-0f9a-4b8c-9d7e-6f5a4b3c2d1e",
		Seq:      43,
		Time:     time.Date(2026, 11, 21, 9, 30, 2, 0, time.UTC),
		Node:     "node-b",
		PrevHash: "b7901a25cbe6cfc5c148ed2cb1a175c0c2d83ab4c2bafa6f2dcbf042d7c16b06", // hash of "full"
	}},
	// v2-dev: served with ephemeral --dev keys.
	{"v2-dev", Record{
		V: FormatVersion2,
		Entry: Entry{
			Action:         "resources/templates/list",
			Outcome:        "allow",
			Reason:         "templates_no_phi",
			Principal:      Principal{Sub: "dev", Roles: []string{"clinician"}, ClientID: "inspector"},
			PurposeOfUse:   "TREAT",
			Source:         "stdio",
			DecisionID:     "d-0001",
			PolicyRevision: "dev",
			Dev:            true,
			Keys:           []string{"audit-hmac=dev:ephemeral", "blob-kek=dev:ephemeral", "cursor=dev:ephemeral"},
		},
		EventID:  "7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d",
		Seq:      7,
		Time:     time.Date(2026, 11, 22, 0, 0, 0, 1, time.UTC),
		Node:     "laptop",
		PrevHash: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	}},
}

// golden returns the golden record named name.
func golden(t testing.TB, name string) Record {
	t.Helper()
	for _, g := range goldenRecords {
		if g.name == name {
			return g.rec
		}
	}
	t.Fatalf("no golden record %q", name)
	return Record{}
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

// TestGoldenMinimalLiteral spells one vector of each version out in the test
// source so the format is readable here too.
func TestGoldenMinimalLiteral(t *testing.T) {
	const want = `{"v":1,"seq":1,"event_id":"00000000-0000-4000-8000-000000000001","time":"2026-11-21T09:30:00.000000000Z","node":"node-a","action":"resources/list","outcome":"deny","reason":"","principal":{"sub":"","roles":[],"client_id":""},"purpose_of_use":"","session":"","source":"","uris":[],"patients":[],"digests":[],"decision_id":"","policy_revision":"","obligations":[],"dev":false,"prev_hash":"0000000000000000000000000000000000000000000000000000000000000000"}`
	if got := string(Encode(golden(t, "minimal"))); got != want {
		t.Errorf("Encode(minimal) =\n%s\nwant\n%s", got, want)
	}
	const want2 = `{"v":2,"seq":1,"event_id":"00000000-0000-4000-8000-000000000001","time":"2026-11-21T09:30:00.000000000Z","node":"node-a","action":"resources/list","outcome":"deny","reason":"","principal":{"sub":"","roles":[],"client_id":""},"purpose_of_use":"","session":"","source":"","uris":[],"patients":[],"digests":[],"decision_id":"","policy_revision":"","obligations":[],"dev":false,"keys":[],"prev_hash":"0000000000000000000000000000000000000000000000000000000000000000"}`
	if got := string(Encode(golden(t, "v2-minimal"))); got != want2 {
		t.Errorf("Encode(v2-minimal) =\n%s\nwant\n%s", got, want2)
	}
}

// TestGoldenV1Unchanged pins the v1 vectors' hashes in the source as well:
// adding v2 must not change a byte of how v1 records encode or hash, or
// every existing log would stop verifying.
func TestGoldenV1Unchanged(t *testing.T) {
	for name, want := range map[string]string{
		"minimal": "c6d0701e4260b598114eb47c2d1167aff17c2a16b0b418d1ac4a400bf50fb5d2",
		"full":    "b7901a25cbe6cfc5c148ed2cb1a175c0c2d83ab4c2bafa6f2dcbf042d7c16b06",
		"unicode": "5af2313c908d3bbb774acf336190334d86fd8f8fe971b697452eefdcd57ecced",
	} {
		if got := HashRecord(Encode(golden(t, name))); got != want {
			t.Errorf("%s: hash %s, want %s", name, got, want)
		}
	}
}

// TestGoldenChainAcrossVersions: the v2-full vector continues the v1 full
// vector's chain, as the first v2 record of a migrated log does.
func TestGoldenChainAcrossVersions(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("testdata", "golden", "full.json"))
	if err != nil {
		t.Fatal(err)
	}
	v2 := golden(t, "v2-full")
	if v2.PrevHash != HashRecord(v1) {
		t.Fatalf("v2-full prev_hash %s, want hash of full.json %s", v2.PrevHash, HashRecord(v1))
	}
	if r1, err := Decode(v1); err != nil || r1.Seq+1 != v2.Seq || r1.V != FormatVersion1 {
		t.Fatalf("full.json: %+v, %v", r1, err)
	}
}

// TestGoldenVectorsDocumented keeps docs/audit-format.md section 7 in step
// with the vectors: every hash appears there, and every vector's exact bytes
// except "unicode" (whose invisible characters the document spells out).
func TestGoldenVectorsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "audit-format.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goldenRecords {
		canon := Encode(g.rec)
		if !bytes.Contains(doc, []byte(HashRecord(canon))) {
			t.Errorf("%s: hash %s not in docs/audit-format.md", g.name, HashRecord(canon))
		}
		if g.name != "unicode" && !bytes.Contains(doc, canon) {
			t.Errorf("%s: canonical bytes not in docs/audit-format.md", g.name)
		}
	}
}
