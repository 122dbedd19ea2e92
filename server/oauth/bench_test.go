package oauth

import (
	"context"
	"fmt"
	jose "github.com/go-jose/go-jose/v4"
	"testing"
)

// BenchmarkVerifyCached measures Verify with the JWKS cached. "hit": the
// token was verified before (verified-token cache; claims rechecked);
// "full": the cache is disabled, so every call parses the JWS, checks the
// signature, decodes and checks the claims. Target: ≤ 50 µs/op.
func BenchmarkVerifyCached(b *testing.B) {
	is := newIssuer(b, rsaKey, ecKey, edKey)
	ctx := context.Background()
	for _, mode := range []struct {
		name string
		size int
	}{{"hit", 0}, {"full", -1}} {
		v := is.verifier(b, func(c *Config) { c.CacheSize = mode.size })
		for _, k := range []signingKey{rsaKey, ecKey, edKey} {
			tok := sign(b, k, is.claims())
			b.Run(fmt.Sprintf("%s/%s", k.alg, mode.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := v.Verify(ctx, tok); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	if n := is.fetches.Load(); n != 2 {
		b.Fatalf("JWKS fetched %d times, want 2 (once per verifier)", n)
	}
}

// BenchmarkVerifyParts splits a first-seen (uncached) verification into its
// parts, to show where the time goes: parsing the compact JWS, checking the
// signature alone (go-jose over the standard library), and decoding and
// checking the claims.
func BenchmarkVerifyParts(b *testing.B) {
	is := newIssuer(b, rsaKey, ecKey, edKey)
	v := is.verifier(b, func(c *Config) { c.CacheSize = -1 })
	for _, k := range []signingKey{rsaKey, ecKey, edKey} {
		tok := sign(b, k, is.claims())
		jws, err := jose.ParseSignedCompact(tok, allowedAlgs)
		if err != nil {
			b.Fatal(err)
		}
		payload, err := jws.Verify(k.public().Key)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(string(k.alg)+"/parse", func(b *testing.B) {
			for b.Loop() {
				if _, err := jose.ParseSignedCompact(tok, allowedAlgs); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(k.alg)+"/signature", func(b *testing.B) {
			for b.Loop() {
				if _, err := jws.Verify(k.public().Key); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(k.alg)+"/claims", func(b *testing.B) {
			for b.Loop() {
				c, err := parseClaims(payload, v.names)
				if err != nil {
					b.Fatal(err)
				}
				if err := v.checkClaims(&c); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The same with the map-based decode parseClaims replaced, for
		// comparison.
		b.Run(string(k.alg)+"/claims-reference", func(b *testing.B) {
			for b.Loop() {
				c, err := parseClaimsReference(payload, v.names)
				if err != nil {
					b.Fatal(err)
				}
				if err := v.checkClaims(&c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
