package audit

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func exportTestLog(t *testing.T) (string, []Record) {
	t.Helper()
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	l, path := mustOpen(t, Options{Now: stepClock(start, time.Second)})
	recs := appendN(t, l, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path, recs
}

func TestExportJSONL(t *testing.T) {
	path, recs := exportTestLog(t)
	var buf bytes.Buffer
	n, err := ExportFile(context.Background(), path, &buf, FormatJSONL, Filter{})
	if err != nil || n != len(recs) {
		t.Fatalf("ExportFile = %d, %v", n, err)
	}
	if !bytes.HasSuffix(buf.Bytes(), []byte("}\n")) {
		t.Fatal("JSONL does not end with one newline")
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(recs) {
		t.Fatalf("%d lines, want %d", len(lines), len(recs))
	}
	for i, line := range lines {
		if got := HashRecord([]byte(line)); got != recs[i].Hash {
			t.Errorf("line %d hashes to %s, stored %s", i+1, got, recs[i].Hash)
		}
		if !bytes.Equal([]byte(line), Encode(recs[i])) {
			t.Errorf("line %d is not the canonical bytes", i+1)
		}
	}
}

func TestExportCSV(t *testing.T) {
	path, recs := exportTestLog(t)
	var buf bytes.Buffer
	n, err := ExportFile(context.Background(), path, &buf, FormatCSV, Filter{})
	if err != nil || n != len(recs) {
		t.Fatalf("ExportFile = %d, %v", n, err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(recs)+1 {
		t.Fatalf("%d rows, want header + %d", len(rows), len(recs))
	}
	want := []string{"v", "seq", "event_id", "time", "node", "action", "outcome", "reason", "sub", "roles",
		"client_id", "purpose_of_use", "session", "source", "uris", "patients", "digests", "decision_id",
		"policy_revision", "obligations", "dev", "keys", "prev_hash", "hash"}
	if !slices.Equal(rows[0], want) {
		t.Fatalf("header = %v", rows[0])
	}
	col := func(name string) int { return slices.Index(want, name) }
	for i, row := range rows[1:] {
		r := recs[i]
		checks := map[string]string{
			"seq": strconv.FormatUint(r.Seq, 10), "event_id": r.EventID,
			"time": r.Time.Format(TimeLayout), "uris": strings.Join(r.URIs, ";"),
			"roles": "clinician", "dev": "false", "prev_hash": r.PrevHash, "hash": r.Hash,
			"sub": r.Principal.Sub, "patients": r.Patients[0],
			"v": "2", "keys": strings.Join(sampleKeysSorted, ";"),
		}
		for name, v := range checks {
			if got := row[col(name)]; got != v {
				t.Errorf("row %d %s = %q, want %q", i+1, name, got, v)
			}
		}
	}
}

func TestExportFilter(t *testing.T) {
	path, recs := exportTestLog(t)
	cases := []struct {
		name     string
		f        Filter
		from, to int // expected seqs [from, to]
	}{
		{"all", Filter{}, 1, 10},
		{"since inclusive", Filter{Since: recs[2].Time}, 3, 10},
		{"until exclusive", Filter{Until: recs[6].Time}, 1, 6},
		{"window", Filter{Since: recs[2].Time, Until: recs[6].Time}, 3, 6},
		{"between records", Filter{Since: recs[2].Time.Add(time.Millisecond), Until: recs[6].Time.Add(time.Millisecond)}, 4, 7},
		{"empty", Filter{Since: recs[9].Time.Add(time.Hour)}, 1, 0},
		{"non-UTC bounds", Filter{Since: recs[2].Time.In(time.FixedZone("X", -5*3600))}, 3, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytesBuffer
			n, err := ExportFile(context.Background(), path, &buf, FormatJSONL, c.f)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []uint64
			for _, line := range buf.lines() {
				r, err := Decode(line)
				if err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, r.Seq)
			}
			var want []uint64
			for s := c.from; s <= c.to; s++ {
				want = append(want, uint64(s))
			}
			if n != len(want) || !slices.Equal(seqs, want) {
				t.Fatalf("n=%d seqs=%v, want %v", n, seqs, want)
			}
		})
	}
}

func TestExportErrors(t *testing.T) {
	path, _ := exportTestLog(t)
	if _, err := ExportFile(context.Background(), path, &bytes.Buffer{}, "xml", Filter{}); err == nil {
		t.Fatal("unknown format accepted")
	}
	tamper(t, path, func(r, h, m *bolt.Bucket) { put(t, r, 4, append(get(r, 4), ' ')) })
	_, err := ExportFile(context.Background(), path, &bytes.Buffer{}, FormatJSONL, Filter{})
	var ce *CorruptError
	if !errors.Is(err, ErrNonCanonical) || !errors.As(err, &ce) || ce.Seq != 4 {
		t.Fatalf("export of a corrupt log = %v, want ErrNonCanonical at seq 4", err)
	}
	tamper(t, path, func(r, h, m *bolt.Bucket) { v := get(r, 4); put(t, r, 4, v[:len(v)-1]) })
}

// syntheticExportLog writes a log of n chained records (makeChain(n)) that
// spans several export chunks.
func syntheticExportLog(t *testing.T, n int) (string, [][]byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	writeSyntheticLog(t, path, n)
	mustVerify(t, path) // written behind Append's back: check it is a log Append could have written
	return path, makeChain(n)
}

// TestExportManyChunks: an export spanning several read transactions writes
// every record exactly once, in order: JSONL is the exact stored bytes and
// verifies offline as one chain; CSV has one row per record whose hash
// column is the hash of that record's bytes.
func TestExportManyChunks(t *testing.T) {
	const n = 2*exportChunk + 123
	path, recs := syntheticExportLog(t, n)

	var jsonl bytes.Buffer
	got, err := ExportFile(context.Background(), path, &jsonl, FormatJSONL, Filter{})
	if err != nil || got != n {
		t.Fatalf("ExportFile(jsonl) = %d, %v; want %d", got, err, n)
	}
	want := append(bytes.Join(recs, []byte("\n")), '\n')
	if !bytes.Equal(jsonl.Bytes(), want) {
		t.Fatalf("JSONL export differs from the stored records (%d bytes, want %d)", jsonl.Len(), len(want))
	}
	lines := bytes.Split(bytes.TrimSuffix(jsonl.Bytes(), []byte("\n")), []byte("\n"))
	if _, err := verifyChainOffline(lines, 1, ZeroHash); err != nil {
		t.Fatalf("exported chain does not verify: %v", err)
	}

	var csvOut bytes.Buffer
	got, err = ExportFile(context.Background(), path, &csvOut, FormatCSV, Filter{})
	if err != nil || got != n {
		t.Fatalf("ExportFile(csv) = %d, %v; want %d", got, err, n)
	}
	rows, err := csv.NewReader(&csvOut).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n+1 || !slices.Equal(rows[0], CSVHeader) {
		t.Fatalf("%d rows (header %v), want header + %d", len(rows), rows[0], n)
	}
	seqCol, hashCol := slices.Index(CSVHeader, "seq"), slices.Index(CSVHeader, "hash")
	for i, row := range rows[1:] {
		if row[seqCol] != strconv.Itoa(i+1) || row[hashCol] != HashRecord(recs[i]) {
			t.Fatalf("row %d: seq %s hash %s, want %d %s", i+1, row[seqCol], row[hashCol], i+1, HashRecord(recs[i]))
		}
	}
}

// TestExportFilterAcrossChunks: a time window whose ends fall in different
// chunks selects exactly the records inside it.
func TestExportFilterAcrossChunks(t *testing.T) {
	const n = 3 * exportChunk
	path, recs := syntheticExportLog(t, n)
	at := func(i int) time.Time { return chainStart.Add(time.Duration(i) * 250 * time.Microsecond) }
	from, to := exportChunk-10, 2*exportChunk+10 // 0-based, [from, to)
	var buf bytes.Buffer
	got, err := ExportFile(context.Background(), path, &buf, FormatJSONL, Filter{Since: at(from), Until: at(to)})
	if err != nil || got != to-from {
		t.Fatalf("ExportFile = %d, %v; want %d", got, err, to-from)
	}
	want := append(bytes.Join(recs[from:to], []byte("\n")), '\n')
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("filtered export is not exactly the records in the window")
	}
}

// failingWriter accepts ok writes, then fails.
type failingWriter struct{ ok int }

var errWriter = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.ok == 0 {
		return 0, errWriter
	}
	w.ok--
	return len(p), nil
}

// TestExportWriterError: a failing destination stops the export with its
// error; n counts the records of the chunks written before it failed.
func TestExportWriterError(t *testing.T) {
	path, _ := syntheticExportLog(t, 2*exportChunk+1)
	for _, f := range []Format{FormatJSONL, FormatCSV} {
		n, err := ExportFile(context.Background(), path, &failingWriter{ok: 1}, f, Filter{})
		if !errors.Is(err, errWriter) || n != exportChunk {
			t.Errorf("%s: ExportFile = %d, %v; want %d, %v", f, n, err, exportChunk, errWriter)
		}
	}
}

// TestExportCanceled: a canceled context stops the export before the next
// chunk.
func TestExportCanceled(t *testing.T) {
	path, _ := syntheticExportLog(t, 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var buf bytes.Buffer
	n, err := ExportFile(ctx, path, &buf, FormatJSONL, Filter{})
	if !errors.Is(err, context.Canceled) || n != 0 || buf.Len() != 0 {
		t.Fatalf("ExportFile = %d, %v (%d bytes); want 0, context.Canceled", n, err, buf.Len())
	}
}
