package server

import (
	"bytes"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store"
)

// Golden vectors of research aliases, computed independently (Python's
// hmac and uuid modules): key = bytes 0..31.
func TestResearchAliasGolden(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	for id, want := range map[string]string{
		"7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01": "67956e46-6679-80b2-a37e-97bc46958d62",
		"11111111-1111-4111-8111-111111111111": "5601172e-6311-8704-905e-34f744e16709",
	} {
		if got := researchAlias(key, id); got != want {
			t.Errorf("researchAlias(%s) = %s, want %s", id, got, want)
		}
	}
}

// A research entity tag is keyed by the URI the caller is shown: it is never
// the tag another caller gets for the real URI under the same obligations,
// and two aliases of one stored version get different tags.
func TestResearchEntityTagIsNotTheRealURIsTag(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	r := store.Resource{URI: "fhir://t/patients/p/observation/o", Digest: "sha256:" + strings.Repeat("ab", 32), Version: 2}
	d := policy.Decision{Allow: true, Obligations: []minimize.Obligation{{Op: minimize.OpDeidentify, Fn: minimize.DeidentifySafeHarbor}}}
	real := entityTag(r, d, key)
	a1 := researchEntityTag(r, d, key, "fhir://t/patients/a/observation/b")
	a2 := researchEntityTag(r, d, key, "fhir://t/patients/c/observation/d")
	if real == "" || a1 == "" || a1 == real || a2 == real || a1 == a2 {
		t.Fatalf("tags real %q, alias %q and %q must all differ", real, a1, a2)
	}
	if researchEntityTag(r, d, nil, "x") != "" {
		t.Fatal("a research tag without a key")
	}
}

// Research list titles and descriptions are made from the type alone.
func TestResearchTitleFromTypeOnly(t *testing.T) {
	title, desc := researchTitle("observation")
	if title != "Observation (de-identified)" || minimize.ScrubString(desc) != desc || strings.Contains(desc, "observation/") {
		t.Fatalf("researchTitle = %q, %q", title, desc)
	}
}
