package bundle

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkVerifyBundle verifies a synthetic bundle of 200,000 records
// (records 1..200000 of a 200,001-record log, checkpoints at 0 and 200001
// bracketing them). It reports records/s; the target is >= 200,000.
func BenchmarkVerifyBundle(b *testing.B) {
	const n = 200_000
	src := newMemSource(b, n+1)
	k := newTestKey(b, testOrigin, 1)
	dir := filepath.Join(b.TempDir(), "bundle")
	if _, err := Write(context.Background(), dir, src, WriteOptions{From: 1, To: n, Checkpoints: checkpoints(b, k, src, n+1)}); err != nil {
		b.Fatal(err)
	}
	vkeys := []byte(k.vkey)
	b.ResetTimer()
	for b.Loop() {
		tr, err := Verify(dir, vkeys)
		if err != nil || tr.Records != n {
			b.Fatalf("Verify: %v (%d records)", err, tr.Records)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkExamineLine is the per-record work of Verify (two SHA-256 and
// audit.Decode), single-threaded.
func BenchmarkExamineLine(b *testing.B) {
	src := newMemSource(b, 2)
	line := src.records[1]
	for b.Loop() {
		examineLine(line, nil)
	}
}

// BenchmarkVerifyBundleFormats verifies a 50,000-record bundle with all
// three human formats, which Verify regenerates and compares byte for byte.
func BenchmarkVerifyBundleFormats(b *testing.B) {
	const n = 50_000
	src := newMemSource(b, n)
	k := newTestKey(b, testOrigin, 1)
	dir := filepath.Join(b.TempDir(), "bundle")
	if _, err := Write(context.Background(), dir, src, WriteOptions{From: 1, To: n, Checkpoints: checkpoints(b, k, src, n), Formats: Formats}); err != nil {
		b.Fatal(err)
	}
	vkeys := []byte(k.vkey)
	b.ResetTimer()
	for b.Loop() {
		tr, err := Verify(dir, vkeys)
		if err != nil || tr.Records != n {
			b.Fatalf("Verify: %v (%d records)", err, tr.Records)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
