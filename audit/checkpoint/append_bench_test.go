package checkpoint_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/secrets"
)

// BenchmarkAppend64WithCheckpoints: durable appends by 64 concurrent
// writers to a real audit log (fsync, group commit, Merkle stored hashes in
// the same transaction), with and without the checkpointer signing
// (ed25519 dev key) into a local and an external anchor at the default
// cadence (every 1,000 records or 1 s). Target: ≥ 5,000 records/s with
// checkpointing on; the two sub-benchmarks run side by side for the ratio.
func BenchmarkAppend64WithCheckpoints(b *testing.B) {
	for _, withCP := range []bool{false, true} {
		name := "checkpoints=off"
		if withCP {
			name = "checkpoints=on"
		}
		b.Run(name, func(b *testing.B) {
			l, path := audittest.Open(b, audit.Options{Node: "bench"})
			dir := filepath.Dir(path) // the data directory, holding the local anchor
			var cp *checkpoint.Checkpointer
			if withCP {
				keys, err := secrets.NewDev()
				if err != nil {
					b.Fatal(err)
				}
				const origin = "custos.bench/node/audit"
				signer, _, err := checkpoint.NewSigner(context.Background(), origin, keys)
				if err != nil {
					b.Fatal(err)
				}
				cp, err = checkpoint.New(checkpoint.Config{Origin: origin, Signer: signer, Tree: l,
					Anchors: []*checkpoint.Anchor{{Dir: dir}, {Dir: b.TempDir()}}})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go cp.Run(ctx)
			}
			e := audit.Entry{Action: "resources/read", Outcome: audit.OutcomeAllow, Reason: "bench",
				Principal: audit.Principal{Sub: "s", Roles: []string{"clinician"}, ClientID: "c"}, PurposeOfUse: "TREAT",
				URIs: []string{"note://t/patients/hk1-00/notes/x"}, Patients: []string{"hk1-00"}, Digests: []string{},
				Obligations: []string{}, Keys: []string{"audit-hmac=dev:ephemeral"}}
			const writers = 64
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						rec, err := l.Append(context.Background(), e)
						if err != nil {
							b.Error(err)
							return
						}
						if cp != nil {
							cp.Notify(int64(rec.Seq))
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
			if cp != nil {
				b.StopTimer()
				if err := cp.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				if last, ok := cp.LastCheckpoint(); !ok || last.Size != int64(b.N) {
					b.Fatalf("final checkpoint size %d, want %d", last.Size, b.N)
				}
			}
		})
	}
}
