package server

import (
	"fmt"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/secrets"
)

// The memo answers exactly audit.Pseudonym under the key it is asked with:
// a rotated key (same id, other bytes included) never gets the old key's
// pseudonyms, and a full cache starts afresh.
func TestPseudonymCacheFollowsTheKey(t *testing.T) {
	var c pseudonymCache
	k1 := secrets.Key{ID: "secret/custos/audit-key@1", Bytes: []byte("0123456789abcdef0123456789abcdef")}
	k2 := secrets.Key{ID: "secret/custos/audit-key@2", Bytes: []byte("fedcba9876543210fedcba9876543210")}
	k1b := secrets.Key{ID: k1.ID, Bytes: []byte("another key with the id of key 1")}
	ids := []string{"7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01", "11111111-1111-1111-1111-111111111111", ""}
	for round := 0; round < 2; round++ { // the second round is served from the memo
		for _, k := range []secrets.Key{k1, k2, k1b, k1} {
			p := c.under(k)
			for _, id := range ids {
				if got, want := p(id), audit.Pseudonym(k.Bytes, id); got != want {
					t.Fatalf("round %d, key %s: pseudonym of %q = %s, want %s", round, k.ID, id, got, want)
				}
			}
		}
	}
	p := c.under(k2)
	for i := 0; i < maxPseudonyms+10; i++ {
		p(fmt.Sprint(i))
	}
	if n := len(c.m); n > maxPseudonyms {
		t.Fatalf("cache holds %d entries, bound %d", n, maxPseudonyms)
	}
	if got := p("7"); got != audit.Pseudonym(k2.Bytes, "7") {
		t.Fatalf("after overflow: %s", got)
	}
}
