package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
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

// inputJSON is byte for byte json.Marshal(pseudonymInput(...)): for every
// shape of input (with and without resource, grant, lists, characters JSON
// escapes), for a principal seen before (from the memo) and under a
// rotated key (never the old key's encoding).
func TestInputJSONEqualsMarshal(t *testing.T) {
	var c pseudonymCache
	k1 := secrets.Key{ID: "secret/custos/audit-key@1", Bytes: []byte("0123456789abcdef0123456789abcdef")}
	k1b := secrets.Key{ID: k1.ID, Bytes: []byte("another key with the id of key 1")}
	pat := "7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01"
	team := policy.Principal{Sub: "dr.<a>&\"b\"", Roles: []string{"clinician"}, ClientID: "ai\u2028", Tenant: "t", Patients: []string{pat, "0c6e2b7d-5a44-4d39-8f0f-9b1e7c3a2d02"}}
	bare := policy.Principal{Sub: "x"}
	res := &policy.Resource{URI: "note://t/patients/" + pat + "/notes/n1", Type: "note", Patient: pat, Tenant: "t", Sensitivity: []string{"hiv"}}
	noLists := &policy.Resource{URI: "note://t/patients/" + pat + "/notes/n2", Type: "note", Patient: pat, Tenant: "t"}
	inputs := []policy.Input{
		{Principal: team, PurposeOfUse: "TREAT", Action: policy.ActionRead, Resource: res},
		{Principal: team, PurposeOfUse: "ETREAT", Action: policy.ActionRead, Resource: noLists, BreakGlass: &policy.BreakGlass{Grant: "g", Patient: pat}},
		{Principal: team, PurposeOfUse: "TREAT", Action: policy.ActionTemplates},
		{Principal: bare, PurposeOfUse: "", Action: policy.ActionList, Resource: &policy.Resource{URI: "bogus"}},
	}
	for round, k := range []secrets.Key{k1, k1, k1b, k1} {
		p := c.under(k)
		for i, in := range inputs {
			want, err := json.Marshal(pseudonymInput(p, in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.inputJSON(k, p, in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d, input %d:\n got %s\nwant %s", round, i, got, want)
			}
		}
	}
}
