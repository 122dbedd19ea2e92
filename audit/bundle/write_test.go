package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
)

// TestWriteVerifyRealLog exports ranges of a real audit log and verifies
// each bundle offline.
//
// Under -race (tools/racetests): verify.go reads and checks records on a pool of goroutines.
//
//custos:race
func TestWriteVerifyRealLog(t *testing.T) {
	ctx := context.Background()
	l := openRealLog(t, 30)
	k := newTestKey(t, testOrigin, 1)
	// Anchor lines out of order, with a duplicate, as an anchor file may hold.
	ck := checkpoints(t, k, l, 12, 5, 20, 30, 20)
	for _, tc := range []struct {
		from, to     uint64
		lower, upper int64
	}{
		{1, 1, 0, 5}, {1, 5, 0, 5}, {6, 12, 5, 12}, {7, 12, 5, 12}, {13, 20, 12, 20},
		{3, 30, 0, 30}, {30, 30, 20, 30}, {21, 25, 20, 30}, {6, 6, 5, 12}, {2, 13, 0, 20},
	} {
		dir := filepath.Join(t.TempDir(), "bundle")
		m, err := Write(ctx, dir, l, WriteOptions{From: tc.from, To: tc.to, Checkpoints: ck, Formats: []Format{FormatCSV, FormatFHIR, FormatOCSF}, VKeys: []string{k.vkey}})
		if err != nil {
			t.Fatalf("Write %d..%d: %v", tc.from, tc.to, err)
		}
		if m.Lower != tc.lower || m.Upper != tc.upper || m.Records != int64(tc.to-tc.from+1) || m.Origin != testOrigin || m.Format != BundleFormat {
			t.Errorf("Write %d..%d: manifest %+v, want lower %d upper %d", tc.from, tc.to, m, tc.lower, tc.upper)
		}
		for _, name := range []string{FileRecords, FileCheckpoints, FileProof, "audit.csv", "auditevent.ndjson", "ocsf.ndjson"} {
			if !strings.HasPrefix(m.Files[name], "sha256:") {
				t.Errorf("manifest lacks %s", name)
			}
		}
		tr, err := Verify(dir, []byte(k.vkey+"\n"))
		if err != nil || !tr.OK {
			t.Fatalf("Verify %d..%d: %v\n%s", tc.from, tc.to, err, tr.Text())
		}
		if tr.Records != int64(tc.to-tc.from+1) || tr.From != tc.from || tr.To != tc.to || tr.Upper.Size != tc.upper {
			t.Errorf("transcript %+v", tr)
		}
		if (tr.Lower == nil) != (tc.lower == 0) {
			t.Errorf("transcript lower %+v, want size %d", tr.Lower, tc.lower)
		}
		// records.jsonl is the exact stored bytes.
		var want bytes.Buffer
		l.Records(ctx, tc.from, tc.to, func(_ uint64, c []byte) error { want.Write(c); want.WriteByte('\n'); return nil })
		got, _ := os.ReadFile(filepath.Join(dir, FileRecords))
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("records.jsonl %d..%d differs from the stored bytes", tc.from, tc.to)
		}
		lines := bytes.Count(mustRead(t, filepath.Join(dir, "auditevent.ndjson")), []byte("\n"))
		if lines != int(tc.to-tc.from+1) {
			t.Errorf("auditevent.ndjson has %d lines", lines)
		}
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteErrors(t *testing.T) {
	ctx := context.Background()
	src := newMemSource(t, 30)
	k := newTestKey(t, testOrigin, 1)
	ck := checkpoints(t, k, src, 10, 20)
	other := newMemSource(t, 31) // same records, one more: the same roots at 10 and 20, different at 25..
	other.records[4] = []byte("x")
	other.tree = memTree{}
	for _, r := range other.records {
		other.tree.add(t, r)
	}
	forged := checkpoints(t, k, other, 20)

	tests := []struct {
		name string
		opts WriteOptions
		prep func(dir string)
		want error
	}{
		{"no checkpoint covers to", WriteOptions{From: 15, To: 25, Checkpoints: ck}, nil, ErrNoCheckpoint},
		{"no checkpoints at all", WriteOptions{From: 1, To: 2}, nil, ErrNoCheckpoint},
		{"root differs from local tree", WriteOptions{From: 11, To: 20, Checkpoints: forged}, nil, ErrCheckpointMismatch},
		{"zero from", WriteOptions{From: 0, To: 2, Checkpoints: ck}, nil, ErrBadRange},
		{"inverted", WriteOptions{From: 5, To: 2, Checkpoints: ck}, nil, ErrBadRange},
		{"beyond head", WriteOptions{From: 5, To: 31, Checkpoints: ck}, nil, ErrBadRange},
		{"unparsable anchor only", WriteOptions{From: 1, To: 2, Checkpoints: [][]byte{[]byte("{")}}, nil, ErrNoCheckpoint},
		{"non-empty dir", WriteOptions{From: 1, To: 2, Checkpoints: ck}, func(dir string) {
			os.MkdirAll(dir, 0o700)
			os.WriteFile(filepath.Join(dir, "x"), nil, 0o600)
		}, ErrNotEmpty},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			if tc.prep != nil {
				tc.prep(dir)
			}
			_, err := Write(ctx, dir, src, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			// Nothing but what the test put there.
			entries, _ := os.ReadDir(filepath.Dir(dir))
			for _, e := range entries {
				if strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("temporary directory %s left behind", e.Name())
				}
			}
		})
	}

	// An existing empty directory is fine.
	dir := filepath.Join(t.TempDir(), "empty")
	os.Mkdir(dir, 0o700)
	if _, err := Write(ctx, dir, src, WriteOptions{From: 1, To: 2, Checkpoints: ck}); err != nil {
		t.Fatalf("Write into empty dir: %v", err)
	}
	// A log whose records do not match its stored tree is refused.
	bad := newMemSource(t, 30)
	bad.records[14] = audit.Encode(testRecord(15, "0000000000000000000000000000000000000000000000000000000000000001"))
	_, err := Write(ctx, filepath.Join(t.TempDir(), "b"), bad, WriteOptions{From: 11, To: 20, Checkpoints: ck})
	if !errors.Is(err, audit.ErrCorrupt) {
		t.Fatalf("Write from corrupt source: %v, want audit.ErrCorrupt", err)
	}
}

func TestResolveTimeRange(t *testing.T) {
	ctx := context.Background()
	src := newMemSource(t, 50) // record i at testEpoch + i ms
	ms := func(i int) time.Time { return testEpoch.Add(time.Duration(i) * time.Millisecond) }
	for _, tc := range []struct {
		since, until time.Time
		from, to     uint64
		err          error
	}{
		{time.Time{}, time.Time{}, 1, 50, nil},
		{ms(10), ms(20), 10, 19, nil},
		{ms(10), time.Time{}, 10, 50, nil},
		{time.Time{}, ms(2), 1, 1, nil},
		{ms(10).Add(time.Nanosecond), ms(11).Add(time.Nanosecond), 11, 11, nil},
		{ms(51), time.Time{}, 0, 0, ErrBadRange},
		{time.Time{}, ms(1), 0, 0, ErrBadRange},
		{ms(20), ms(10), 0, 0, ErrBadRange},
	} {
		from, to, err := ResolveTimeRange(ctx, src, tc.since, tc.until)
		if !errors.Is(err, tc.err) || from != tc.from || to != tc.to {
			t.Errorf("ResolveTimeRange(%v, %v) = %d, %d, %v; want %d, %d, %v", tc.since, tc.until, from, to, err, tc.from, tc.to, tc.err)
		}
	}
	// An empty period is named, so that the auditor sees what was asked.
	_, _, err := ResolveTimeRange(ctx, src, ms(20), ms(10))
	if want := "no record in the time range [" + ms(20).UTC().Format(time.RFC3339Nano) + ", " + ms(10).UTC().Format(time.RFC3339Nano) + ") of a log of 50 records"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("empty range: %v, want it to say %q", err, want)
	}
	if _, _, err := ResolveTimeRange(ctx, src, ms(51), time.Time{}); err == nil || !strings.Contains(err.Error(), ", open) of a log") {
		t.Errorf("empty range to the open end: %v", err)
	}
}

func TestResolveTimeRangeRealLog(t *testing.T) {
	ctx := context.Background()
	l := openRealLog(t, 12)
	var times []time.Time
	l.Records(ctx, 1, 12, func(_ uint64, c []byte) error {
		r, err := audit.Decode(c)
		if err != nil {
			t.Fatal(err)
		}
		times = append(times, r.Time)
		return nil
	})
	from, to, err := ResolveTimeRange(ctx, l, times[3], times[8].Add(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	// Equal times are possible in a real log: the range is every record whose time is in it.
	for s := uint64(1); s <= 12; s++ {
		in := !times[s-1].Before(times[3]) && times[s-1].Before(times[8].Add(time.Nanosecond))
		if in != (s >= from && s <= to) {
			t.Fatalf("seq %d (time %v) in=%v, resolved %d..%d", s, times[s-1], in, from, to)
		}
	}
}

// TestManifestJSON pins the manifest's field names.
func TestManifestJSON(t *testing.T) {
	b, _ := json.Marshal(Manifest{Format: BundleFormat, Files: map[string]string{"b": "sha256:1", "a": "sha256:2"}})
	want := `{"format":"custos-audit-bundle/v1","origin":"","from":0,"to":0,"records":0,"lower_size":0,"upper_size":0,"files":{"a":"sha256:2","b":"sha256:1"},"created":""}`
	if string(b) != want {
		t.Fatalf("manifest JSON\n got %s\nwant %s", b, want)
	}
}

// TestWriteAsksSpace: WriteOptions.Space is asked before every byte the
// bundle's files take, at most a buffer's worth at a time; a refusal stops
// Write at once with Space's error, before those bytes are written, and
// nothing of the bundle is left.
func TestWriteAsksSpace(t *testing.T) {
	ctx := context.Background()
	l := openRealLog(t, 300)
	k := newTestKey(t, testOrigin, 1)
	opts := WriteOptions{From: 1, To: 300, Checkpoints: checkpoints(t, k, l, 300), Formats: []Format{FormatCSV, FormatFHIR, FormatOCSF}}
	var asked, calls uint64
	opts.Space = func(need uint64) error {
		if need == 0 || need > 256<<10 {
			t.Errorf("Space asked for %d bytes, want 1..256 KiB", need)
		}
		asked += need
		calls++
		return nil
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	m, err := Write(ctx, dir, l, opts)
	if err != nil {
		t.Fatal(err)
	}
	var size uint64
	for name := range m.Files {
		size += uint64(len(mustRead(t, filepath.Join(dir, name))))
	}
	size += uint64(len(mustRead(t, filepath.Join(dir, FileManifest))))
	if asked != size {
		t.Errorf("Space was asked for %d bytes, the bundle's files hold %d", asked, size)
	}

	if calls < 8 { // six files, and more than one buffer
		t.Fatalf("Space was asked %d times: too few to test", calls)
	}
	refusal := errors.New("no room")
	for _, stop := range []uint64{1, calls / 2, calls} {
		var n uint64
		opts.Space = func(uint64) error {
			if n++; n == stop {
				return refusal
			}
			return nil
		}
		parent := t.TempDir()
		_, err := Write(ctx, filepath.Join(parent, "bundle"), l, opts)
		if !errors.Is(err, refusal) || n != stop {
			t.Errorf("refused at call %d: Write = %v after %d calls, want the refusal at once", stop, err, n)
		}
		if left, _ := os.ReadDir(parent); len(left) > 0 {
			t.Errorf("refused at call %d: %d entries left beside the bundle", stop, len(left))
		}
	}
}
