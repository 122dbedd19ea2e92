package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/audit/audittest"
)

// TestCatalogScenarioShortRun runs the big-catalog scenario on a small
// catalog: every persona of the synthetic data set lists a first page,
// the outsider (whose tenant holds nothing) gets one empty page without a
// cursor, the researcher's first read after a reopen is measured, and the
// audit log the scenario left verifies.
func TestCatalogScenarioShortRun(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	rep, err := runCatalog(context.Background(), catalogOptions{Patients: 20, Rounds: 2, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	if sum := audittest.Verify(t, filepath.Join(dataDir, "audit.db")); sum.Records == 0 {
		t.Error("the scenario left an empty audit log")
	}
	if rep.Resources == 0 || len(rep.OpenMs) != 2 {
		t.Fatalf("resources %d, opens %v", rep.Resources, rep.OpenMs)
	}
	seen := map[string]personaResult{}
	for _, p := range rep.Personas {
		seen[p.Persona] = p
		if len(p.FirstPageMs) != 2 {
			t.Errorf("%s: %d first pages, want 2", p.Persona, len(p.FirstPageMs))
		}
	}
	for _, p := range []string{"clinician", "billing", "researcher", "auditor", "outsider"} {
		if _, ok := seen[p]; !ok {
			t.Errorf("persona %s not measured", p)
		}
	}
	if o := seen["outsider"]; o.Items != 0 || o.Cursor || o.PagesToEnd != 1 {
		t.Errorf("outsider: %+v, want one empty page without a cursor", o)
	}
	if c := seen["clinician"]; c.Items == 0 {
		t.Errorf("clinician sees nothing: %+v", c)
	}
	if len(rep.ResearchReadMs) != 3 {
		t.Errorf("research reads %v, want 3", rep.ResearchReadMs)
	}
	var out bytes.Buffer
	rep.print(&out)
	if !bytes.Contains(out.Bytes(), []byte("outsider")) {
		t.Errorf("report:\n%s", out.String())
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
}
