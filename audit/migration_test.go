package audit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The fixture testdata/v1log was written by the format-version-1 code (before
// Entry.Keys existed): audit.db is a closed 5-record log, node "node-v1",
// records one second apart from 2026-11-20T08:00:01Z; audit.jsonl is its
// JSONL export, taken at the same time. It must never be regenerated: it
// stands for a log in the field.
var (
	v1Fixture      = filepath.Join("testdata", "v1log", "audit.db")
	v1FixtureJSONL = filepath.Join("testdata", "v1log", "audit.jsonl")
)

// copyV1Fixture copies the v1 fixture log into a fresh temporary directory
// (Open writes to the file) and returns the copy's path and the fixture's
// exported lines.
func copyV1Fixture(t *testing.T) (string, [][]byte) {
	t.Helper()
	db, err := os.ReadFile(v1Fixture)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "audit.db")
	if err := os.WriteFile(path, db, 0o600); err != nil {
		t.Fatal(err)
	}
	jsonl, err := os.ReadFile(v1FixtureJSONL)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, l := range bytes.Split(bytes.TrimSuffix(jsonl, []byte("\n")), []byte("\n")) {
		lines = append(lines, l)
	}
	if len(lines) != 5 {
		t.Fatalf("fixture export has %d lines, want 5", len(lines))
	}
	return path, lines
}

// TestMigrateV1LogInPlace opens a log written by the v1 code, appends v2
// records to it and verifies the whole chain: the v1 records are kept byte
// for byte, the first v2 record chains to the last v1 record, and the log
// verifies before and after.
func TestMigrateV1LogInPlace(t *testing.T) {
	path, v1Lines := copyV1Fixture(t)
	for i, line := range v1Lines {
		r, err := Decode(line)
		if err != nil {
			t.Fatalf("fixture line %d: %v", i+1, err)
		}
		if r.V != FormatVersion1 || r.Keys != nil || bytes.Contains(line, []byte(`"keys"`)) {
			t.Fatalf("fixture line %d is not a v1 record: %s", i+1, line)
		}
	}
	v1Head := HashRecord(v1Lines[4])

	// The v1 log verifies as it is.
	sum := mustVerify(t, path)
	if sum.Records != 5 || sum.RecordsV1 != 5 || sum.RecordsV2 != 0 || sum.HeadSeq != 5 || sum.HeadHash != v1Head {
		t.Fatalf("v1 fixture summary = %+v, want 5 v1 records, head %s", sum, v1Head)
	}

	// The new code opens it and continues the chain with v2 records.
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	l := mustOpenPath(t, path, Options{Node: "node-v2", Now: stepClock(start, time.Second)})
	if seq, hash := l.Head(); seq != 5 || hash != v1Head {
		t.Fatalf("Head of the v1 log = %d %s, want 5 %s", seq, hash, v1Head)
	}
	recs := appendN(t, l, 3)
	prev := v1Head
	for i, r := range recs {
		if r.V != FormatVersion2 || r.Seq != uint64(6+i) || r.PrevHash != prev || !slices.Equal(r.Keys, sampleKeysSorted) {
			t.Fatalf("appended record %d: V=%d seq=%d prev=%s keys=%q", i, r.V, r.Seq, r.PrevHash, r.Keys)
		}
		prev = r.Hash
	}
	// A v2 head reopens too.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpenPath(t, path, Options{Node: "node-v2", Now: stepClock(start.Add(time.Hour), time.Second)})
	recs = append(recs, appendN(t, l, 1)...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// The whole chain verifies, v1 then v2.
	var problems []Problem
	sum, err := VerifyFile(context.Background(), path, func(p Problem) { problems = append(problems, p) })
	if err != nil || len(problems) != 0 {
		t.Fatalf("VerifyFile = %v, problems %v", err, problems)
	}
	if sum.Records != 9 || sum.RecordsV1 != 5 || sum.RecordsV2 != 4 || sum.HeadSeq != 9 || sum.HeadHash != recs[3].Hash {
		t.Fatalf("migrated summary = %+v", sum)
	}

	// Nothing was rewritten: the v1 records export byte for byte as before,
	// and an export re-hashes into one unbroken chain across the versions.
	var buf bytesBuffer
	if n, err := ExportFile(context.Background(), path, &buf, FormatJSONL, Filter{}); err != nil || n != 9 {
		t.Fatalf("ExportFile = %d, %v", n, err)
	}
	lines := buf.lines()
	for i := 0; i < 5; i++ {
		if !bytes.Equal(lines[i], v1Lines[i]) {
			t.Errorf("v1 record %d changed:\n got %s\nwant %s", i+1, lines[i], v1Lines[i])
		}
	}
	prev = ZeroHash
	for i, line := range lines {
		r, err := Decode(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if r.PrevHash != prev {
			t.Fatalf("line %d: prev_hash %s, want %s", i+1, r.PrevHash, prev)
		}
		wantV := FormatVersion1
		if i >= 5 {
			wantV = FormatVersion2
		}
		if r.V != wantV {
			t.Errorf("line %d: v%d, want v%d", i+1, r.V, wantV)
		}
		prev = HashRecord(line)
	}
	if prev != sum.HeadHash {
		t.Fatalf("export chain ends at %s, verify head %s", prev, sum.HeadHash)
	}
}

// TestMigratedLogTamper: in a mixed log, an altered v1 record is still found
// and blamed on that record, and so is an altered v2 record.
func TestMigratedLogTamper(t *testing.T) {
	path, _ := copyV1Fixture(t)
	l, err := Open(path, Options{Node: "node-v2"})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, path) // intact before the tampering below
	for _, seq := range []uint64{3, 6} {
		tamper(t, path, func(r, h, m *bolt.Bucket) {
			v := get(r, seq)
			v[40] ^= 1
			put(t, r, seq, v)
		})
		// Open built the Merkle tree over the v1 records too, so the tree
		// blames the same record (and the root, at tree size 7, no longer
		// matches).
		ps, _ := collect(t, path)
		want := []string{fmt.Sprintf("hash_mismatch@%d", seq), fmt.Sprintf("tree_mismatch@%d", seq), "tree_root_mismatch@7"}
		if got := kinds(ps); !slices.Equal(got, want) {
			t.Fatalf("tampered seq %d: problems %v, want %v", seq, got, want)
		}
		tamper(t, path, func(r, h, m *bolt.Bucket) {
			v := get(r, seq)
			v[40] ^= 1
			put(t, r, seq, v)
		})
	}
	mustVerify(t, path)
}
