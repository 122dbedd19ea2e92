package bundle

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestVerifyProgress checks VerifyProgress's reports against the bytes it
// must read (records.jsonl and each human-format file once compared and
// once hashed, the other listed files once hashed), and that its
// transcript is Verify's.
func TestVerifyProgress(t *testing.T) {
	l := openRealLog(t, 300)
	k := newTestKey(t, testOrigin, 1)
	vkeys := []byte(k.vkey + "\n")
	dir := filepath.Join(t.TempDir(), "bundle")
	ck := checkpoints(t, k, l, 10, 290, 300)
	if _, err := Write(context.Background(), dir, l, WriteOptions{From: 11, To: 280, Checkpoints: ck, Formats: Formats}); err != nil {
		t.Fatal(err)
	}
	size := func(name string) int64 {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	want := size(FileRecords) + size(FileCheckpoints) + size(FileProof)
	for _, f := range Formats {
		want += 2 * size(f.FileName())
	}

	type report struct{ done, total int64 }
	var reports []report
	tr, err := VerifyProgress(dir, vkeys, func(done, total int64) { reports = append(reports, report{done, total}) })
	if err != nil || !tr.OK {
		t.Fatalf("VerifyProgress: %v\n%s", err, tr.Text())
	}
	if len(reports) < 3 {
		t.Fatalf("%d reports, want several: %v", len(reports), reports)
	}
	if reports[0].done != 0 || reports[0].total != want {
		t.Errorf("first report %v, want 0 of %d (the files' sizes)", reports[0], want)
	}
	for i, r := range reports {
		if r.done > r.total {
			t.Errorf("report %d: done %d over total %d", i, r.done, r.total)
		}
		if i > 0 && (r.done < reports[i-1].done || r.total < reports[i-1].total && i < len(reports)-1) {
			t.Errorf("report %d went back: %v after %v", i, r, reports[i-1])
		}
	}
	if last := reports[len(reports)-1]; last.done != want || last.total != want {
		t.Errorf("last report %v, want %d of %d", last, want, want)
	}

	plain, err := Verify(dir, vkeys)
	if err != nil {
		t.Fatal(err)
	}
	plain.Time, plain.Elapsed, tr.Time, tr.Elapsed = time.Time{}, 0, time.Time{}, 0
	if plain.Text() != tr.Text() {
		t.Errorf("transcripts differ:\n%s\n---\n%s", plain.Text(), tr.Text())
	}

	// A tampered bundle: the checks still run to the end and the last
	// report is done of done.
	if err := os.WriteFile(filepath.Join(dir, FileRecords), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reports = nil
	if _, err := VerifyProgress(dir, vkeys, func(done, total int64) { reports = append(reports, report{done, total}) }); err == nil {
		t.Fatal("a tampered bundle verified")
	}
	if last := reports[len(reports)-1]; last.done != last.total || last.done == 0 {
		t.Errorf("tampered bundle: last report %v, want done == total > 0", last)
	}
}
