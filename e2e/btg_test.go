package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/store"
)

// TestBreakTheGlass: an emergency clinician without a care relationship is
// refused; the server's configuration (btg.max_ttl, btg.grant_roles in its
// config file) caps what an operator may grant, and the granting command has
// no flag to raise it; a grant that breaks the rules anyway (written past the
// CLI) is refused by the server and audited. An operator's grant (made while
// the server runs) lets the clinician read, list and complete the patient's
// resources: each such request is one use of the grant, with purpose ETREAT
// and the grant id in its audit record. Revocation ends it, and the privacy
// officer's review lists every use and is signed off — every step in the
// audit log.
func TestBreakTheGlass(t *testing.T) {
	d := newDataset(t)
	// An ED clinician: purpose ETREAT, no care relationships.
	er := filepath.Join(t.TempDir(), "er.json")
	b, _ := json.Marshal(map[string]any{"sub": "dr-er", "roles": []string{"clinician"}, "client_id": "ed-assistant",
		"tenant": "general-hospital", "patients": []string{}, "purpose_of_use": "ETREAT"})
	os.WriteFile(er, b, 0o600)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, er, tokens)

	// Two patients with no special handling, and one FHIR resource of each.
	special := []string{}
	for _, p := range d.summary.EdgeCases {
		special = append(special, p)
	}
	var patients, uris []string
	for _, l := range d.lines(t) {
		if strings.HasPrefix(l.URI, "fhir://") && !slices.Contains(special, l.Labels.Patient) && len(l.Labels.Sensitivity) == 0 &&
			!slices.Contains(patients, l.Labels.Patient) && len(patients) < 2 {
			patients, uris = append(patients, l.Labels.Patient), append(uris, l.URI)
		}
	}
	patient, uri := patients[0], uris[0]

	// The break-the-glass rules are server configuration: a 1-hour cap, and
	// only members of the OS group of the account running this test grant.
	group := osGroup(t)
	cfg := filepath.Join(t.TempDir(), "custos.yaml")
	os.WriteFile(cfg, []byte("btg:\n  max_ttl: 1h\n  grant_roles: ["+group+"]\n"), 0o600)
	srv := serve(t, d, nil, "--config", cfg, "--dev", "--listen", loopback, "--tokens", tokens, "--page-size", "20")
	cs := connect(t, srv.url, tok)
	ctx := context.Background()
	read := func(uri string) error {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		return err
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	if read(uri) == nil {
		t.Fatal("an ETREAT read without a grant was allowed")
	}
	grantArgs := []string{"btg", "grant", "--data-dir", d.data, "--sub", "dr-er", "--patient", patient,
		"--reason", "unconscious patient in ED, no chart access", "--json"}

	// Over the configured cap: refused by the CLI, and no flag raises it.
	if out, errOut, code := custos(t, nil, append(grantArgs, "--ttl", "2h")...); code == 0 || !strings.Contains(errOut, "exceeds the maximum 1h0m0s") {
		t.Fatalf("a 2h grant under a 1h cap: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := custos(t, nil, append(grantArgs, "--ttl", "720h", "--max-ttl", "1000h")...); code == 0 || !strings.Contains(errOut, "unknown flag: --max-ttl") {
		t.Fatalf("--max-ttl is still a flag of the granting command: exit %d %s", code, errOut)
	}
	// Past the CLI (an older custos, an edited grants.db): the server
	// refuses the grant, audits why, and it never works.
	old := btg.New(filepath.Join(d.data, "grants.db"), btg.Options{Rules: &btg.Rules{MaxTTL: 1000 * time.Hour}})
	overCap, err := old.Grant(btg.Request{Sub: "dr-er", Patient: patients[1], Tenant: "general-hospital", By: "old-cli",
		Reason: "written past the configured cap", TTL: 720 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	waitFor("the server to refuse the over-cap grant", func() bool {
		var all []struct{ ID, Refused string }
		json.Unmarshal([]byte(mustCustos(t, "btg", "list", "--data-dir", d.data, "--json")), &all)
		return len(all) == 1 && all[0].ID == overCap.ID && all[0].Refused == "ttl_over_cap"
	})
	if read(uris[1]) == nil {
		t.Fatal("a read under a refused over-cap grant was allowed")
	}

	out := mustCustos(t, append(grantArgs, "--ttl", "10m")...)
	var g struct {
		ID, TTL, Expires string
		ByRole           string `json:"by_role"`
	}
	if err := json.Unmarshal([]byte(out), &g); err != nil || g.ID == "" || g.ByRole != group || g.TTL != "10m0s" || g.Expires == "" {
		t.Fatalf("grant: %v %s", err, out)
	}
	waitFor("the grant to take effect", func() bool { return read(uri) == nil })
	// A list and a completion under the grant reveal the patient's
	// resources: each is a use.
	var listed []string
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, r.URI)
	}
	if !slices.Contains(listed, uri) {
		t.Fatalf("the list under the grant lacks %s: %v", uri, listed)
	}
	u, _ := store.ParseURI(uri)
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "fhir://{tenant}/patients/{patient}/{type}/{id}"},
		Argument: mcp.CompleteParamsArgument{Name: "id"},
		Context:  &mcp.CompleteContext{Arguments: map[string]string{"tenant": u.Tenant, "patient": patient, "type": u.Type}}})
	if err != nil || !slices.Contains(comp.Completion.Values, u.ID) {
		t.Fatalf("completion under the grant: %v %v", comp, err)
	}

	type use struct {
		EventID string `json:"event_id"`
		Seq     uint64
		Action  string
		Outcome string
		Time    time.Time
	}
	var open []struct {
		ID   string
		Uses []use
	}
	waitFor("the read, list and completion uses to be recorded", func() bool {
		open = nil
		json.Unmarshal([]byte(mustCustos(t, "btg", "review", "--data-dir", d.data, "--json")), &open)
		if len(open) != 1 || open[0].ID != g.ID {
			return false
		}
		seen := map[string]bool{}
		for _, u := range open[0].Uses {
			seen[u.Action] = true
		}
		return seen["resources/read"] && seen["resources/list"] && seen["complete"]
	})
	// The text review shows every use recorded so far: time, action,
	// outcome and its audit record.
	reviewText := mustCustos(t, "btg", "review", "--data-dir", d.data, "--grant", g.ID)
	for _, u := range open[0].Uses {
		line := fmt.Sprintf("%s  %s", u.Time.UTC().Format(time.RFC3339), u.Action)
		if !strings.Contains(reviewText, line) || !strings.Contains(reviewText, strconv.FormatUint(u.Seq, 10)) || !strings.Contains(reviewText, u.EventID) {
			t.Errorf("btg review does not show use %+v:\n%s", u, reviewText)
		}
	}
	mustCustos(t, "btg", "revoke", "--data-dir", d.data, "--grant", g.ID, "--reason", "patient stable, care team assigned", "--by", "op-night")
	waitFor("the revocation to take effect", func() bool { return read(uri) != nil })
	mustCustos(t, "btg", "review", "--data-dir", d.data, "--grant", g.ID, "--verdict", "appropriate",
		"--note", "documented emergency", "--reviewer", "privacy-officer")
	if open := mustCustos(t, "btg", "review", "--data-dir", d.data, "--json"); strings.TrimSpace(open) != "[]" {
		t.Fatalf("still unreviewed after sign-off: %s", open)
	}
	time.Sleep(1500 * time.Millisecond) // one sync: the review event reaches the log
	srv.stop(t)
	// Every use, once the server's final sync has recorded the last ones.
	var final []struct {
		ID   string
		Uses []use
	}
	json.Unmarshal([]byte(mustCustos(t, "btg", "list", "--data-dir", d.data, "--json")), &final)
	var uses []use
	for _, fg := range final {
		if fg.ID == g.ID {
			uses = fg.Uses
		}
	}

	// Every use is an audit record of a request under the grant, and every
	// allowed request that revealed the patient is a use.
	var kinds []string
	bySeq := map[uint64]audit.Record{}
	reads, revealing := 0, 0
	for _, r := range d.records(t) {
		bySeq[r.Seq] = r
		switch {
		case strings.HasPrefix(r.Action, "btg/"):
			kinds = append(kinds, r.Action)
			if strings.Contains(r.Reason, patient) || strings.Contains(r.Reason, patients[1]) {
				t.Errorf("%s record reason %q names a patient", r.Action, r.Reason)
			}
			switch {
			case r.Action == "btg/refuse":
				if r.Outcome != "deny" || !strings.Contains(r.Reason, "grant="+overCap.ID) ||
					!strings.Contains(r.Reason, "ttl=720h0m0s refused=ttl_over_cap max_ttl=1h0m0s") {
					t.Errorf("refusal record: %s %q", r.Outcome, r.Reason)
				}
			case r.Action == "btg/grant" && strings.Contains(r.Reason, "grant="+overCap.ID):
				// The grant as written past the CLI, then its refusal.
			case !strings.Contains(r.Reason, "grant="+g.ID):
				t.Errorf("%s record reason %q", r.Action, r.Reason)
			case r.Action == "btg/grant" && !strings.Contains(r.Reason, "ttl=10m0s by_role="+group):
				t.Errorf("grant record lacks its duration or role: %q", r.Reason)
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
		if r.Outcome == "allow" && len(r.Patients) > 0 && (r.Action == "resources/read" || r.Action == "resources/list" || r.Action == "complete") {
			revealing++
		}
	}
	if strings.Join(kinds, " ") != "btg/grant btg/refuse btg/grant btg/revoke btg/review" || reads < 2 {
		t.Fatalf("btg events %v, %d reads under the grant", kinds, reads)
	}
	if len(uses) != revealing {
		t.Errorf("%d uses recorded for %d requests that revealed the patient", len(uses), revealing)
	}
	for _, u := range uses {
		r, ok := bySeq[u.Seq]
		if !ok || r.EventID != u.EventID || r.Action != u.Action || r.Outcome != u.Outcome || !r.Time.Equal(u.Time) {
			t.Errorf("use %+v does not match its audit record %+v", u, r)
		}
	}
	rep := mustCustos(t, "audit", "report", "--data-dir", d.data, "--purpose", "HOPERAT", "--break-glass", "--json")
	if !strings.Contains(rep, `"break_glass": true`) {
		t.Fatalf("break-glass report:\n%s", rep)
	}
}

// osGroup is the name of the primary OS group of the account running the
// test: the role 'custos btg grant' finds for it.
func osGroup(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		t.Fatal(err)
	}
	return g.Name
}
