package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestExportOfDamagedLogSaysSo: an export of a log with a record changed
// in place (its bytes no longer hash to its stored hash), or changed and
// rehashed (the next record's prev_hash no longer links to it), is
// written whole, each record as stored, and fails with an
// *ExportDamagedError naming the first damaged record, what was expected
// and what was found. Until h-audit12 both exported with no error: only
// someone who recomputed the hashes saw it. An intact log's export is
// unchanged and has no error; a damaged record outside the time range is
// not the export's (verify reports it).
func TestExportOfDamagedLogSaysSo(t *testing.T) {
	ctx := context.Background()
	clean := newTenRecordLog(t)
	want := map[Format][]byte{}
	for _, f := range []Format{FormatJSONL, FormatCSV} {
		var buf bytes.Buffer
		if n, err := ExportFile(ctx, clean, &buf, f, Filter{}); err != nil || n != 10 {
			t.Fatalf("%s export of an intact log = %d, %v", f, n, err)
		}
		want[f] = buf.Bytes()
	}
	flip := func(r, h *bolt.Bucket, seq uint64, rehash bool) {
		v := get(r, seq)
		i := len(fmt.Sprintf(`{"v":2,"seq":%d,"event_id":"`, seq))
		v[i] ^= 0x01 // still a valid record: only the hash catches it
		put(t, r, seq, v)
		if rehash {
			put(t, h, seq, rawHash(t, v))
		}
	}
	for _, tc := range []struct {
		name                string
		edit                func(r, h *bolt.Bucket)
		kind                string
		seq                 uint64
		problems            int
		expectStored, gotOf uint64 // Expected is seq expectStored's stored hash; Got: HashRecord of gotOf (hash_mismatch) or its prev_hash
		filter              Filter
		records             int
		intactUnlessDamaged bool
	}{
		{name: "changed in place", edit: func(r, h *bolt.Bucket) { flip(r, h, 5, false) }, kind: KindHashMismatch, seq: 5, problems: 1, records: 10},
		{name: "two changed", edit: func(r, h *bolt.Bucket) { flip(r, h, 7, false); flip(r, h, 3, false) }, kind: KindHashMismatch, seq: 3, problems: 2, records: 10},
		{name: "changed and rehashed", edit: func(r, h *bolt.Bucket) { flip(r, h, 5, true) }, kind: KindChainBreak, seq: 6, problems: 1, records: 10},
		{name: "the first record", edit: func(r, h *bolt.Bucket) { flip(r, h, 1, true) }, kind: KindChainBreak, seq: 2, problems: 1, records: 10},
		// Record 5 deleted, its hash too: record 6 links to no record
		// the export read (the records asked for are those left).
		{name: "deleted", edit: func(r, h *bolt.Bucket) { del(t, r, 5); del(t, h, 5) }, kind: KindChainBreak, seq: 6, problems: 1, records: 9},
		{name: "the one before the last deleted", edit: func(r, h *bolt.Bucket) { del(t, r, 9); del(t, h, 9) }, kind: KindChainBreak, seq: 10, problems: 1, records: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := newTenRecordLog(t)
			var stored [][]byte
			tamper(t, path, func(r, h, _ *bolt.Bucket) {
				tc.edit(r, h)
				for seq := uint64(1); seq <= 10; seq++ {
					if v := get(r, seq); v != nil {
						stored = append(stored, v)
					}
				}
			})
			for _, f := range []Format{FormatJSONL, FormatCSV} {
				var buf bytes.Buffer
				n, err := ExportFile(ctx, path, &buf, f, tc.filter)
				var de *ExportDamagedError
				if !errors.As(err, &de) || !errors.Is(err, ErrExportDamaged) || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s export of a damaged log: err = %v, want an *ExportDamagedError", f, err)
				}
				if n != tc.records || de.Records != tc.records || de.Problems != tc.problems || de.First.Seq != tc.seq || de.First.Kind != tc.kind {
					t.Errorf("%s: n=%d, %+v; want %d records, %d problem(s), the first %s at seq %d", f, n, de, tc.records, tc.problems, tc.kind, tc.seq)
				}
				if de.First.Expected == "" || de.First.Got == "" || de.First.Expected == de.First.Got {
					t.Errorf("%s: the first problem names no disagreement: %+v", f, de.First)
				}
				if f == FormatJSONL {
					var all []byte
					for _, v := range stored {
						all = append(append(all, v...), '\n')
					}
					if !bytes.Equal(buf.Bytes(), all) {
						t.Errorf("the JSONL export is not every record as stored:\n%s", buf.Bytes())
					}
				} else if bytes.Count(buf.Bytes(), []byte("\n")) != tc.records+1 {
					t.Errorf("the CSV export is not a header and %d rows:\n%s", tc.records, buf.Bytes())
				}
			}
		})
	}
	t.Run("intact", func(t *testing.T) {
		for _, f := range []Format{FormatJSONL, FormatCSV} {
			var buf bytes.Buffer
			if n, err := ExportFile(ctx, clean, &buf, f, Filter{}); err != nil || n != 10 || !bytes.Equal(buf.Bytes(), want[f]) {
				t.Errorf("%s export of an intact log changed: %d, %v", f, n, err)
			}
		}
	})
	t.Run("damage outside the range", func(t *testing.T) {
		path := newTenRecordLog(t)
		tamper(t, path, func(r, h, _ *bolt.Bucket) { flip(r, h, 2, false) })
		since := time.Date(2026, 11, 21, 9, 0, 6, 0, time.UTC) // records 6..10
		n, err := ExportFile(ctx, path, &bytes.Buffer{}, FormatJSONL, Filter{Since: since})
		if err != nil || n != 5 {
			t.Errorf("an export of intact records 6..10 = %d, %v", n, err)
		}
	})
}
