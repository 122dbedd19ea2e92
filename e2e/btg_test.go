package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBreakTheGlass: an emergency clinician without a care relationship is
// refused; an operator's grant (made while the server runs) lets them read
// the patient, the reads carry ETREAT and the grant id, revocation ends it,
// and the privacy officer's review is listed and signed off — every step in
// the audit log.
func TestBreakTheGlass(t *testing.T) {
	d := newDataset(t)
	// An ED clinician: purpose ETREAT, no care relationships.
	er := filepath.Join(t.TempDir(), "er.json")
	b, _ := json.Marshal(map[string]any{"sub": "dr-er", "roles": []string{"clinician"}, "client_id": "ed-assistant",
		"tenant": "general-hospital", "patients": []string{}, "purpose_of_use": "ETREAT"})
	os.WriteFile(er, b, 0o600)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, er, tokens)

	// A patient with no special handling, and one of their FHIR resources.
	special := []string{}
	for _, p := range d.summary.EdgeCases {
		special = append(special, p)
	}
	var patient, uri string
	for _, l := range d.lines(t) {
		if strings.HasPrefix(l.URI, "fhir://") && !slices.Contains(special, l.Labels.Patient) && len(l.Labels.Sensitivity) == 0 {
			patient, uri = l.Labels.Patient, l.URI
			break
		}
	}
	url, stop, _ := httpServer(t, d, tokens)
	cs := connect(t, url, tok)
	ctx := context.Background()
	read := func() error {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		return err
	}
	waitRead := func(wantOK bool, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for (read() == nil) != wantOK {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if read() == nil {
		t.Fatal("an ETREAT read without a grant was allowed")
	}
	out := mustCustos(t, "btg", "grant", "--data-dir", d.data, "--sub", "dr-er", "--patient", patient,
		"--reason", "unconscious patient in ED, no chart access", "--ttl", "10m", "--by", "op-night", "--json")
	var g struct{ ID string }
	if err := json.Unmarshal([]byte(out), &g); err != nil || g.ID == "" {
		t.Fatalf("grant: %v %s", err, out)
	}
	waitRead(true, "the grant to take effect")
	if err := read(); err != nil {
		t.Fatal(err)
	}
	// Listed for review while the server runs: 2+ uses, unreviewed.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("the uses to be recorded", func() bool {
		var open []struct {
			ID   string
			Uses []any
		}
		json.Unmarshal([]byte(mustCustos(t, "btg", "review", "--data-dir", d.data, "--json")), &open)
		return len(open) == 1 && open[0].ID == g.ID && len(open[0].Uses) >= 2
	})
	mustCustos(t, "btg", "revoke", "--data-dir", d.data, "--grant", g.ID, "--reason", "patient stable, care team assigned", "--by", "op-night")
	waitRead(false, "the revocation to take effect")
	mustCustos(t, "btg", "review", "--data-dir", d.data, "--grant", g.ID, "--verdict", "appropriate",
		"--note", "documented emergency", "--reviewer", "privacy-officer")
	if open := mustCustos(t, "btg", "review", "--data-dir", d.data, "--json"); strings.TrimSpace(open) != "[]" {
		t.Fatalf("still unreviewed after sign-off: %s", open)
	}
	time.Sleep(1500 * time.Millisecond) // one sync: the review event reaches the log
	stop()

	var kinds []string
	reads := 0
	for _, r := range d.records(t) {
		switch {
		case strings.HasPrefix(r.Action, "btg/"):
			kinds = append(kinds, r.Action)
			if !strings.Contains(r.Reason, "grant="+g.ID) || strings.Contains(r.Reason, patient) {
				t.Errorf("%s record reason %q", r.Action, r.Reason)
			}
		case r.Action == "resources/read" && r.Outcome == "allow":
			reads++
			if r.PurposeOfUse != "ETREAT" || r.Reason != "break_glass,grant="+g.ID {
				t.Errorf("read under the grant: purpose %s reason %q", r.PurposeOfUse, r.Reason)
			}
		case r.Action == "resources/read":
			if !strings.Contains(r.Reason, "break_glass_grant_required") {
				t.Errorf("refused ETREAT read: reason %q", r.Reason)
			}
		}
	}
	if strings.Join(kinds, " ") != "btg/grant btg/revoke btg/review" || reads < 2 {
		t.Fatalf("btg events %v, %d reads under the grant", kinds, reads)
	}
	rep := mustCustos(t, "audit", "report", "--data-dir", d.data, "--purpose", "HOPERAT", "--break-glass", "--json")
	if !strings.Contains(rep, `"break_glass": true`) {
		t.Fatalf("break-glass report:\n%s", rep)
	}
}
