package audit

import (
	"context"
	"testing"
)

// BenchmarkTreeHead: the tree head of a 5,000-record log (one read
// transaction, at most 1 + log2(n) stored hashes).
func BenchmarkTreeHead(b *testing.B) {
	l, _ := mustOpen(b, Options{})
	appendConcurrently(b, l, 5000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := l.TreeHead(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProveRecord: an inclusion proof in a 5,000-record tree.
func BenchmarkProveRecord(b *testing.B) {
	l, _ := mustOpen(b, Options{})
	appendConcurrently(b, l, 5000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.ProveRecord(uint64(i%5000)+1, 5000); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMigrateTree: building the tree of a 5,000-record log written
// before the tree existed (what Open does once), per record.
func BenchmarkMigrateTree(b *testing.B) {
	const n = 5000
	l, path := mustOpen(b, Options{})
	appendConcurrently(b, l, n)
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		stripTree(b, path)
		b.StartTimer()
		m, err := Open(path, Options{Node: "n"})
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
}
