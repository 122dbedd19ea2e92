package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit/audittest"
)

// TestDemo runs the README's first command, `custos demo`, as a new user
// would (here with --json): it seeds, imports the seed's FHIR Bulk export,
// serves, and drives four personas. Each persona's outcome is what the
// policy promises, and the audit log verifies.
func TestDemo(t *testing.T) {
	out, errOut, code := custos(t, nil, "demo", "--json", "--keep")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s%s", code, out, errOut)
	}
	var rep struct {
		DataDir string `json:"data_dir"`
		Audit   struct {
			Problems, Records int
		} `json:"audit"`
		Steps []struct{ Persona, Action, Target, Outcome, Detail string } `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("demo --json: %v\n%s", err, out)
	}
	if rep.Audit.Problems != 0 || rep.Audit.Records < len(rep.Steps) { // every step, plus the policy load and the like
		t.Fatalf("audit: %+v for %d steps", rep.Audit, len(rep.Steps))
	}
	if rep.DataDir == "" {
		t.Fatal("demo --keep named no data directory")
	}
	t.Cleanup(func() { os.RemoveAll(rep.DataDir) })
	// The log itself, not the demo's summary of it: it verifies, and every
	// read the demo made has its own read record.
	reads := 0
	for _, s := range rep.Steps {
		if s.Action == "read" {
			reads++
		}
	}
	logPath := filepath.Join(rep.DataDir, "data", "audit.db")
	audittest.Verify(t, logPath)
	n := 0
	for _, r := range (&dataset{data: filepath.Dir(logPath)}).records(t) {
		if r.Action == "resources/read" {
			n++
		}
	}
	if n != reads {
		t.Fatalf("%d read records in the demo's audit log for %d reads", n, reads)
	}
	got := map[string][]string{}
	for _, s := range rep.Steps {
		got[s.Persona] = append(got[s.Persona], s.Action+" "+strings.Fields(s.Target)[0]+" "+s.Outcome)
	}
	want := map[string][]string{
		"clinician":  {"list all allowed", "read fhir allowed", "read attachment allowed", "read attachment refused"},
		"biller":     {"list all allowed", "read fhir minimized", "read attachment refused"},
		"researcher": {"list all allowed", "read fhir minimized", "read attachment refused"},
		"outsider":   {"list all allowed", "read fhir refused", "read fhir refused"},
	}
	for p, w := range want {
		if strings.Join(got[p], "; ") != strings.Join(w, "; ") {
			t.Errorf("%s: %v, want %v", p, got[p], w)
		}
	}
	for _, s := range rep.Steps {
		if s.Persona == "outsider" && s.Action == "list" && s.Detail != "0 visible resources (1 page)" {
			t.Errorf("the outsider lists %q", s.Detail)
		}
		// "minimized" must show in the content, not only in the missing
		// etag: the biller's coverage loses its identifiers, the
		// researcher's patient its name.
		if s.Outcome == "minimized" && !strings.Contains(s.Detail, "identifiers removed") {
			t.Errorf("%s: minimized read without removed identifiers: %q", s.Persona, s.Detail)
		}
		if s.Persona == "researcher" && s.Outcome == "minimized" && !strings.Contains(s.Detail, "name removed") {
			t.Errorf("researcher read keeps the name: %q", s.Detail)
		}
	}
}
