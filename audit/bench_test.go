package audit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAppendSerial: one writer, one commit (two fdatasyncs) per record.
func BenchmarkAppendSerial(b *testing.B) {
	l, _ := mustOpen(b, Options{})
	e := sampleEntry(1)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append(context.Background(), e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkAppendParallel64: 64 concurrent writers, fsync on, group commit
// with the default MaxBatchDelay (and a few alternatives for tuning).
func BenchmarkAppendParallel64(b *testing.B) {
	for _, d := range []time.Duration{0, 500 * time.Microsecond, time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		name := "delay=default"
		if d != 0 {
			name = "delay=" + d.String()
		}
		b.Run(name, func(b *testing.B) {
			l, _ := mustOpen(b, Options{MaxBatchDelay: d})
			e := sampleEntry(1)
			const writers = 64
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := l.Append(context.Background(), e); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// BenchmarkVerify: verification speed over a 5,000-record log.
func BenchmarkVerify(b *testing.B) {
	const n = 5000
	l, path := mustOpen(b, Options{})
	appendConcurrently(b, l, n)
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		sum, err := VerifyFile(context.Background(), path, nil)
		if err != nil || sum.Problems != 0 || sum.Records != n {
			b.Fatalf("VerifyFile = %+v, %v", sum, err)
		}
	}
	b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "records/s")
}

func BenchmarkEncode(b *testing.B) {
	r := goldenRecords[1].rec
	for i := 0; i < b.N; i++ {
		Encode(r)
	}
}

func BenchmarkDecode(b *testing.B) {
	canon := Encode(goldenRecords[1].rec)
	for i := 0; i < b.N; i++ {
		if _, err := Decode(canon); err != nil {
			b.Fatal(err)
		}
	}
}
