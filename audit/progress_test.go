package audit

import (
	"bytes"
	"context"
	"testing"
)

// TestVerifyAndExportReportProgress: VerifyPaced's pace counts every
// record walked, once, chunk by chunk, and Export's Filter.Progress names
// the last record read after each chunk, ending at To; the output is the
// output without the hook.
func TestVerifyAndExportReportProgress(t *testing.T) {
	const n = 2*verifyChunk + 77
	l, _ := mustOpen(t, Options{})
	appendN(t, l, n)
	ctx := context.Background()

	var chunks []int
	sum, err := l.VerifyPaced(ctx, nil, func(_ context.Context, k int) error { chunks = append(chunks, k); return nil })
	total := 0
	for _, k := range chunks {
		total += k
	}
	if err != nil || sum.Records != n || total != n || len(chunks) != 3 {
		t.Fatalf("VerifyPaced: %+v, %v; pace calls %v (sum %d), want %d records in 3 chunks", sum, err, chunks, total, n)
	}

	const to = n - 5
	var plain, hooked bytes.Buffer
	if _, err := l.Export(ctx, &plain, FormatJSONL, Filter{To: to}); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	got, err := l.Export(ctx, &hooked, FormatJSONL, Filter{To: to, Progress: func(seq uint64) { seqs = append(seqs, seq) }})
	if err != nil || got != to {
		t.Fatalf("Export = %d, %v; want %d", got, err, to)
	}
	if len(seqs) < 3 || seqs[0] != exportChunk || seqs[len(seqs)-1] != to {
		t.Fatalf("Progress seqs %v, want %d first and %d last", seqs, exportChunk, to)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] < seqs[i-1] {
			t.Fatalf("Progress seqs go back: %v", seqs)
		}
	}
	if !bytes.Equal(plain.Bytes(), hooked.Bytes()) {
		t.Fatal("the export with a Progress hook differs from the one without")
	}
}
