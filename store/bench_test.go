package store

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// benchFixture builds n entries with files of roughly 2-3 KB.
func benchFixture(b *testing.B, n int) *fixture {
	b.Helper()
	f := newFixture(b)
	f.addN(n)
	f.writeManifest()
	return f
}

func BenchmarkImport10k(b *testing.B) {
	f := benchFixture(b, 10_000)
	var bytes int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, err := Open(filepath.Join(b.TempDir(), fmt.Sprintf("store-%d.db", i)), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := s.Import(context.Background(), f.dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		bytes = rep.Bytes
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	b.SetBytes(bytes)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/entry")
}

func benchStore(b *testing.B, n int) (*Store, []string) {
	b.Helper()
	s, _ := openTestStore(b)
	f := benchFixture(b, n)
	if _, err := s.Import(context.Background(), f.dir, nil); err != nil {
		b.Fatal(err)
	}
	uris := make([]string, len(f.entries))
	for i, e := range f.entries {
		uris[i] = e.URI
	}
	return s, uris
}

func BenchmarkGet(b *testing.B) {
	s, uris := benchStore(b, 10_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Get(uris[i%len(uris)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBlob(b *testing.B) {
	s, uris := benchStore(b, 1_000)
	etags := make([]string, len(uris))
	for i, u := range uris {
		r, err := s.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		etags[i] = r.Digest
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Blob(context.Background(), etags[i%len(etags)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPage(b *testing.B) {
	s, _ := benchStore(b, 10_000)
	for _, limit := range []int{50, 500} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			b.ReportAllocs()
			after := ""
			for i := 0; i < b.N; i++ {
				page, err := s.Page(after, limit)
				if err != nil {
					b.Fatal(err)
				}
				if len(page) < limit {
					after = ""
				} else {
					after = page[len(page)-1].URI
				}
			}
		})
	}
}

func BenchmarkParseURI(b *testing.B) {
	raw := "fhir://general-hospital/patients/" + tPatient + "/observation/" + tID
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParseURI(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// staticKeys is a DataKeys provider without crypto or I/O: one fixed key and
// wrapped form, so that BenchmarkBlob16KiB/envelope measures the store's own
// cost (envelope parsing, AES-256-GCM, the format) rather than a provider's.
type staticKeys struct{ key, wrapped []byte }

func (k staticKeys) KEK() string { return "static:bench" }
func (k staticKeys) NewDataKey(context.Context) ([]byte, []byte, error) {
	return k.key, k.wrapped, nil
}
func (k staticKeys) UnwrapDataKey(context.Context, []byte) ([]byte, error) { return k.key, nil }

func BenchmarkBlob16KiB(b *testing.B) {
	f := newFixture(b)
	const n = 64
	for i := range n {
		j := f.add("note")
		body := bytes.Repeat([]byte(fmt.Sprintf("line %d of a synthetic note. ", i)), 1<<14)
		f.writeFile(f.entries[j].File, body[:16<<10])
	}
	f.writeManifest()
	wrapped := []byte("vault:v1:" + strings.Repeat("A", 80)) // Vault-sized ciphertext
	for _, tc := range []struct {
		name string
		dk   DataKeys
	}{
		{"plaintext", nil},
		{"envelope", staticKeys{key: make([]byte, DataKeySize), wrapped: wrapped}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "catalog.db"), Options{DataKeys: tc.dk})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Import(context.Background(), f.dir, nil); err != nil {
				b.Fatal(err)
			}
			etags := make([]string, n)
			for i, e := range f.entries {
				r, err := s.Get(e.URI)
				if err != nil {
					b.Fatal(err)
				}
				etags[i] = r.Digest
			}
			ctx := context.Background()
			b.SetBytes(16 << 10)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.Blob(ctx, etags[i%n]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
