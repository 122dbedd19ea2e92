package server_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/policy"
)

// A research list item says what the loaded policy's decision applied to
// it, never more: "de-identified under HIPAA Safe Harbor" only when the
// decision demands the deidentify obligation; otherwise that it was
// minimized (field by field) or released as stored, under the policy
// revision that decided. Until 2026-12-06 every research item claimed Safe
// Harbor whatever the policy: under an allow-all policy a researcher read a
// Patient's full birth date and address from an item described as
// de-identified. Custom policies are loaded through the real loader and
// read and listed by a go-sdk client. The refusal of a research
// subscription claims no de-identification either.
func TestResearchListClaimsOnlyWhatWasApplied(t *testing.T) {
	fullDate := regexp.MustCompile(`"birthDate":\s*"\d{4}-\d{2}-\d{2}"`)
	for _, c := range []struct {
		name, obligations string
		want              string // in every item's description
		identifiable      bool   // a Patient read keeps its full birth date
	}{
		{"released whole", `[]`, ": not de-identified (research view).", true},
		{"minimized field by field", `[{"op": "remove", "path": "/telecom"}]`, "; not de-identified under HIPAA Safe Harbor (research view).", true},
		{"safe harbor", `[{"op": "deidentify", "path": "", "fn": "safeharbor"}]`, ", de-identified under HIPAA Safe Harbor (research view).", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			pol := "package custos.authz\n\ndecision := {\"allow\": true, \"reasons\": [], \"obligations\": " + c.obligations + "}\n"
			if err := os.WriteFile(filepath.Join(dir, "research.rego"), []byte(pol), 0o600); err != nil {
				t.Fatal(err)
			}
			eng, err := policy.LoadDir(context.Background(), dir, policy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rev := eng.Revision()
			f := newFixture(t, dir)
			cs := f.connect(f.identity("researcher"))
			var patient string
			n := 0
			for r, err := range cs.Resources(context.Background(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				claims := strings.Contains(r.Description, "de-identified under HIPAA Safe Harbor") && !strings.Contains(r.Description, "not de-identified") ||
					strings.HasSuffix(r.Title, " (de-identified)")
				if claims != !c.identifiable {
					t.Fatalf("%s: item %q %q claims Safe Harbor: %v, want %v", c.name, r.Title, r.Description, claims, !c.identifiable)
				}
				if !strings.HasSuffix(r.Description, c.want) {
					t.Fatalf("%s: description %q does not end %q", c.name, r.Description, c.want)
				}
				if c.identifiable && !strings.Contains(r.Description, "policy "+rev) {
					t.Fatalf("%s: description %q does not name the policy revision %s", c.name, r.Description, rev)
				}
				if strings.HasPrefix(r.Name, "patient-") && patient == "" {
					patient = r.URI
				}
			}
			if n == 0 || patient == "" {
				t.Fatalf("the researcher listed %d items and no Patient: the test would prove little", n)
			}
			res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: patient})
			if err != nil {
				t.Fatal(err)
			}
			// The description is true of the payload: what it calls not
			// de-identified carries the full birth date, what it calls
			// Safe Harbor does not.
			if got := fullDate.MatchString(res.Contents[0].Text); got != c.identifiable {
				t.Fatalf("%s: the Patient read has a full birth date: %v, want %v", c.name, got, c.identifiable)
			}
			// Nor does the refusal of a research subscription call the
			// view de-identified: it said "the de-identified research
			// view has no change feed" whatever the policy.
			legacy := f.connectRev(f.identity("researcher"), rev2025)
			serr := legacy.Subscribe(context.Background(), &mcp.SubscribeParams{URI: patient})
			if serr == nil || !strings.Contains(serr.Error(), "no change feed") {
				t.Fatalf("%s: research subscribe: %v, want refused", c.name, serr)
			}
			if strings.Contains(serr.Error(), "de-identified") {
				t.Fatalf("%s: the refusal of a research subscription claims de-identification: %v", c.name, serr)
			}
		})
	}
}
