package secrets

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestPolicyDocumented: every rule of the embedded ACL policy appears in
// docs/vault.md, and the doc shows no rule the policy lacks, so the policy a
// security team copies from the docs is the one the tests load into Vault.
func TestPolicyDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/vault.md")
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`path\s+"([^"]+)"\s*\{\s*capabilities\s*=\s*\[([^\]]*)\]\s*\}`)
	norm := func(m []string) string {
		return m[1] + " " + strings.Join(strings.Fields(strings.ReplaceAll(m[2], ",", " ")), ",")
	}
	set := func(src string) map[string]bool {
		out := map[string]bool{}
		for _, m := range rule.FindAllStringSubmatch(src, -1) {
			out[norm(m)] = true
		}
		return out
	}
	policy, documented := set(PolicyHCL), set(string(doc))
	if len(policy) != 12 {
		t.Fatalf("the policy has %d rules, want 12 (update this test and docs/vault.md together)", len(policy))
	}
	for r := range policy {
		if !documented[r] {
			t.Errorf("docs/vault.md lacks the rule %s", r)
		}
	}
	for r := range documented {
		if !policy[r] {
			t.Errorf("docs/vault.md shows the rule %s, which the policy does not have", r)
		}
	}
	// Every rule names a path of DefaultLayout.
	l := DefaultLayout
	paths := map[string]bool{
		l.KVDataPath(l.CursorKeyPath): true, l.KVDataPath(l.AuditKeyPath): true,
		l.KVDataPath(l.IDKeyPath):           true,
		l.TransitPath("keys", l.SigningKey): true, l.TransitPath("sign", l.SigningKey): true,
		l.TransitPath("keys", l.BlobKey): true, l.TransitPath("datakey/wrapped", l.BlobKey): true,
		l.TransitPath("decrypt", l.BlobKey): true, l.TransitPath("rewrap", l.BlobKey): true,
		l.TransitPath("keys", l.PolicyKey):     true,
		l.TransitPath("keys", l.FHIRClientKey): true, l.TransitPath("sign", l.FHIRClientKey): true,
	}
	for r := range policy {
		if p, _, _ := strings.Cut(r, " "); !paths[p] {
			t.Errorf("policy rule for %s is not a path custos uses", p)
		}
	}
}

func TestLayoutRejectsValuesInPaths(t *testing.T) {
	for _, bad := range []string{"/custos/key", "custos/key/", "custos/key?version=1", "custos:key", "a@b", "a b", "a/../b", "k=v"} {
		l := DefaultLayout
		l.CursorKeyPath = bad
		if err := l.validate(); err == nil {
			t.Errorf("layout path %q accepted", bad)
		}
	}
	if err := DefaultLayout.validate(); err != nil {
		t.Fatal(err)
	}
}
