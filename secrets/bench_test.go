package secrets_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/secrets/vaulttest"
	"github.com/custos-mcp/custos/store"
)

// benchVault starts a real Vault dev server, provisions it as custos
// expects and opens custos's client to it (closed when b ends).
func benchVault(b *testing.B) (*vaulttest.Server, *secrets.Vault) {
	b.Helper()
	srv := vaulttest.Start(b, vaulttest.Options{})
	ctx := context.Background()
	p, err := srv.Provision(ctx, vaulttest.ProvisionOptions{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	v, err := secrets.OpenVault(ctx, secrets.VaultOptions{Address: srv.Addr, Token: p.Token})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { v.Close() })
	return srv, v
}

// BenchmarkEnvelopeRead16KiB reads 16 KiB text blobs from a real catalog,
// plaintext and encrypted at rest with data keys from a real Vault. The
// encrypted reads run while Vault is paused (SIGSTOP): any Vault round trip
// on the hot path would stall for the 2 s call timeout and fail the
// benchmark, so it also proves that cached keys need no Vault call.
func BenchmarkEnvelopeRead16KiB(b *testing.B) {
	ctx := context.Background()
	srv, v := benchVault(b)

	// 64 notes of 16 KiB each.
	const n = 64
	dir := b.TempDir()
	var manifest strings.Builder
	var uris []string
	for i := range n {
		patient := fmt.Sprintf("0b5c1f7e-3c2a-4d7e-9f10-%012d", i)
		id := fmt.Sprintf("3f2a9c1e-8b7d-4e6f-a5b4-%012d", i)
		uri := "note://general-hospital/patients/" + patient + "/notes/" + id
		file := fmt.Sprintf("n%d.md", i)
		body := strings.Repeat(fmt.Sprintf("line %d of a synthetic progress note. ", i), 1<<10)[:16<<10]
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o600); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&manifest, `{"uri":%q,"name":"note-%d","mimeType":"text/markdown","labels":{"tenant":"general-hospital","patient":%q,"type":"note"},"file":%q}`+"\n", uri, i, patient, file)
		uris = append(uris, uri)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.jsonl"), []byte(manifest.String()), 0o600); err != nil {
		b.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		dk   store.DataKeys
	}{{"plaintext", nil}, {"vault-envelope-cached", v}} {
		st, err := store.Open(filepath.Join(b.TempDir(), "catalog.db"), store.Options{DataKeys: tc.dk})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Import(ctx, filepath.Join(dir, "manifest.jsonl"), nil); err != nil {
			b.Fatal(err)
		}
		etags := make([]string, n)
		for i, u := range uris {
			r, err := st.Get(u)
			if err != nil {
				b.Fatal(err)
			}
			etags[i] = r.Digest
			if _, err := st.Blob(ctx, r.Digest); err != nil { // warm the key cache
				b.Fatal(err)
			}
		}
		if tc.dk != nil {
			if err := srv.Pause(); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(16 << 10)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := st.Blob(ctx, etags[i%n]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		if tc.dk != nil {
			srv.Resume()
		}
		st.Close()
	}
}

// BenchmarkEncryptedImport measures the staged streaming FHIR import
// (store.ImportEntriesStaged, what `custos import` runs) of a batch of
// Observations, plaintext and encrypted at rest with data keys from a real
// Vault (two Transit calls per resource: datakey/wrapped and decrypt, eight
// in flight). One op is one import of importEntries resources into a new
// catalog; resources/s is reported.
func BenchmarkEncryptedImport(b *testing.B) {
	const importEntries = 2000
	ctx := context.Background()
	_, v := benchVault(b)
	namer, err := store.NewNamer("general-hospital", make([]byte, 32), "bench:id-key@1")
	if err != nil {
		b.Fatal(err)
	}
	entries := func(yield func(store.Entry, error) bool) {
		for i := range importEntries {
			pat := fmt.Sprintf("pat-%05d", i/20)
			e := store.Entry{Type: "Observation", ID: fmt.Sprintf("obs-%d", i), Patient: pat, Where: fmt.Sprintf("bench.ndjson:%d", i+1),
				Body: fmt.Appendf(nil, `{"resourceType":"Observation","id":"obs-%d","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8867-4","display":"Heart rate"}]},"subject":{"reference":"Patient/%s"},"effectiveDateTime":"2026-10-01T08:00:00Z","valueQuantity":{"value":%d,"unit":"/min","system":"http://unitsofmeasure.org","code":"/min"}}`, i, pat, 50+i%60)}
			if !yield(e, nil) {
				return
			}
		}
	}
	for _, tc := range []struct {
		name string
		dk   store.DataKeys
	}{{"plaintext", nil}, {"vault-envelope", v}} {
		b.Run(tc.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				path := filepath.Join(b.TempDir(), "catalog.db")
				rep, err := store.ImportEntriesStaged(ctx, path, entries, store.EntryOptions{Namer: namer}, store.Options{DataKeys: tc.dk})
				if err != nil {
					b.Fatal(err)
				}
				if rep.Created != importEntries {
					b.Fatalf("created %d of %d", rep.Created, importEntries)
				}
				n += importEntries
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "resources/s")
		})
	}
}
