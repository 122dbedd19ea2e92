package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/e2e/validators"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestAuditorWorkflow is what a privacy officer and an auditor do with the
// CLI after custos has served: look a patient up by keyed hash, report
// accesses, disclosures, denials and a user's activity, write the verifier
// keys, export a bundle, verify it offline (and see a tampered copy fail),
// and prove one record's inclusion.
func TestAuditorWorkflow(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	anchor := t.TempDir()
	clin := newToken(t, d.principal("clinician"), tokens)
	res := newToken(t, d.principal("researcher"), tokens)
	out := newToken(t, d.principal("outsider"), tokens)

	// One patient's FHIR resources (the researcher may read FHIR, not notes).
	// A patient of the clinician's care team (not opted out, no sensitive
	// category).
	var pf struct{ Patients []string }
	b, _ := os.ReadFile(d.principal("clinician"))
	json.Unmarshal(b, &pf)
	var patient string
	for _, p := range pf.Patients {
		if p != d.summary.EdgeCases["opted_out"] && p != d.summary.EdgeCases["hiv"] && p != d.summary.EdgeCases["sud"] {
			patient = p
			break
		}
	}
	var uris []string
	for _, l := range d.lines(t) {
		if l.Labels.Patient == patient && strings.HasPrefix(l.URI, "fhir://") && len(l.Labels.Sensitivity) == 0 && len(uris) < 3 {
			uris = append(uris, l.URI)
		}
	}
	if patient == "" || len(uris) < 3 {
		t.Fatalf("no suitable patient (%q, %d resources)", patient, len(uris))
	}
	if f := devServeRead(t, d, tokens, clin, anchor, 0, uris); f != 0 {
		t.Fatalf("clinician: %d reads failed", f)
	}
	resFailed := devServeRead(t, d, tokens, res, anchor, 0, uris)
	if f := devServeRead(t, d, tokens, out, anchor, 0, uris); f != len(uris) {
		t.Fatalf("outsider: %d of %d reads refused, want all", f, len(uris))
	}

	// The lookup value; no raw patient id is in the log.
	hash := strings.Fields(mustCustos(t, "audit", "hash", patient, "--dev", "--purpose", "PATRQT", "--data-dir", d.data))[0]
	if !strings.HasPrefix(hash, "hk1-") {
		t.Fatalf("audit hash printed %q", hash)
	}
	raw, _ := os.ReadFile(d.audit())
	if strings.Contains(string(raw), patient) || !strings.Contains(string(raw), hash) {
		t.Fatal("audit.db must hold the patient's lookup value and never the id")
	}

	reportRows := func(args ...string) []map[string]any {
		t.Helper()
		var rep struct {
			Rows []map[string]any `json:"rows"`
		}
		outJSON := mustCustos(t, append([]string{"audit", "report", "--data-dir", d.data, "--dev", "--purpose", "HOPERAT", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(outJSON), &rep); err != nil {
			t.Fatalf("report %v: %v\n%s", args, err, outJSON)
		}
		return rep.Rows
	}
	count := func(rows []map[string]any, key, val string) int {
		n := 0
		for _, r := range rows {
			if r[key] == val {
				n++
			}
		}
		return n
	}
	all := reportRows("--patient", patient)
	clinSub, resSub, outSub := subOf(t, d.principal("clinician")), subOf(t, d.principal("researcher")), subOf(t, d.principal("outsider"))
	if count(all, "user", clinSub) < len(uris) || count(all, "user", outSub) != len(uris) || count(all, "user", resSub) != len(uris) {
		t.Fatalf("patient report: %d clinician, %d researcher, %d outsider rows", count(all, "user", clinSub), count(all, "user", resSub), count(all, "user", outSub))
	}
	disc := reportRows("--patient", patient, "--disclosures")
	if len(disc) != len(uris)-resFailed || count(disc, "user", resSub) != len(disc) {
		t.Fatalf("accounting of disclosures: %d rows (%d by the researcher); want the researcher's %d allowed reads only", len(disc), count(disc, "user", resSub), len(uris)-resFailed)
	}
	if den := reportRows("--denials"); count(den, "outcome", "deny") != len(den) || count(den, "user", outSub) != len(uris) {
		t.Fatalf("denials report: %v", den)
	}
	if mine := reportRows("--user", clinSub); count(mine, "user", clinSub) != len(mine) || len(mine) < len(uris) {
		t.Fatalf("user report: %d rows", len(mine))
	}
	table := mustCustos(t, "audit", "report", "--data-dir", d.data, "--dev", "--purpose", "PATRQT", "--patient", patient, "--disclosures")
	if !strings.Contains(table, "accounting of disclosures") || strings.Contains(table, patient) {
		t.Fatalf("disclosures table:\n%s", table)
	}

	// Verifier keys, bundle, offline verification, tamper, inclusion.
	vkeys := filepath.Join(t.TempDir(), "custos.vkeys")
	mustCustos(t, "audit", "pubkey", "--data-dir", d.data, "--dev", "-o", vkeys)
	bdir := filepath.Join(t.TempDir(), "bundle")
	mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--out", bdir, "--from-seq", "2")
	for _, f := range []string{"records.jsonl", "checkpoints.jsonl", "proof.json", "manifest.json", "audit.csv", "auditevent.ndjson", "ocsf.ndjson"} {
		if _, err := os.Stat(filepath.Join(bdir, f)); err != nil {
			t.Errorf("bundle lacks %s", f)
		}
	}
	tr := mustCustos(t, "audit", "verify", "--bundle", bdir, "--pubkey", vkeys)
	if !strings.Contains(tr, "VERIFIED") || strings.Contains(tr, "FAIL ") {
		t.Fatalf("transcript of a good bundle:\n%s", tr)
	}
	checkBundleExports(t, bdir, append([]string{patient}, pf.Patients...))
	recs, _ := os.ReadFile(filepath.Join(bdir, "records.jsonl"))
	bad := strings.Replace(string(recs), `"outcome":"deny"`, `"outcome":"allow"`, 1)
	if bad == string(recs) {
		t.Fatal("no deny record to tamper with")
	}
	os.WriteFile(filepath.Join(bdir, "records.jsonl"), []byte(bad), 0o600)
	tr2, _, code := custos(t, nil, "audit", "verify", "--bundle", bdir, "--pubkey", vkeys)
	if code != 1 || !strings.Contains(tr2, "seq") {
		t.Fatalf("tampered bundle: exit %d\n%s", code, tr2)
	}
	proof := mustCustos(t, "audit", "prove", "--data-dir", d.data, "--purpose", "HOPERAT", "--seq", "3")
	if !strings.Contains(proof, "custos.local/") {
		t.Fatalf("inclusion proof:\n%s", proof)
	}
}

// checkBundleExports runs the outside validators over the human formats
// of the bundle in dir, as a real server and CLI wrote them: every FHIR
// AuditEvent through HL7's FHIR R4 JSON schema and Medplum
// (e2e/validators; under CI=true a missing validator fails), every OCSF
// event through the OCSF 1.3.0 API Activity schema of audit/bundle's
// tests; and checks that no file of the bundle holds any of the raw
// patient ids (only their keyed hashes).
func checkBundleExports(t *testing.T, dir string, patients []string) {
	t.Helper()
	split := func(name string) [][]byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	}
	ocsf := split("ocsf.ndjson")
	const schemaPath = "../audit/bundle/testdata/ocsf/api_activity-1.3.0.schema.json"
	sf, err := os.Open(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	doc, err := jsonschema.UnmarshalJSON(sf)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(schemaPath, doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range ocsf {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(v); err != nil {
			t.Errorf("OCSF event %d of the bundle is not valid OCSF 1.3.0 API Activity: %v", i, err)
		}
	}
	// A subtest: without node (outside CI) only this part is skipped, not
	// the rest of the auditor's workflow.
	t.Run("fhir-r4-outside-validators", func(t *testing.T) {
		rep := validators.FHIR(t, split("auditevent.ndjson"))
		for _, inv := range rep.Invalid {
			t.Errorf("AuditEvent %d (id %s) of the bundle is not valid FHIR R4 (%s): %s", inv.Index, inv.ID, inv.Validator, inv.Message)
		}
		t.Logf("%d AuditEvents checked by %v", rep.Validated, rep.Validators)
	})
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range patients {
			if p != "" && bytes.Contains(b, []byte(p)) {
				t.Errorf("the bundle's %s holds the raw patient id %s", e.Name(), p)
			}
		}
	}
	t.Logf("bundle exports: %d OCSF events valid", len(ocsf))
}
