package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/store"
)

// TestBillerJoinsClaimsByKeyedIDs: R4's claim examples (a Claim, its
// ClaimResponse and ExplanationOfBenefit, rego/testdata/billing4), the
// Coverage and Claim they name, and gematik VSDM 2's Patient and Coverage
// named by a KVNR (minimize/testdata/outside4) with a self-pay Coverage
// whose payor is that Patient, imported with `custos import` and read by a
// biller's MCP client over `custos serve`. Each view names itself and every
// resource the catalog holds by the keyed id of its URI, so a Claim's
// insurance.coverage, an EOB's claim and claimResponse, a ClaimResponse's
// request and a self-pay payor match the URIs the biller lists; no source
// id comes out; a reference to a resource custos does not hold is keyed
// all the same (a view must not tell a resource the biller may not read
// from a missing one); one custos cannot key (an absolute URL, a
// contained #x) keeps only its type. Until
// h-billref these references kept only their type (and a self-pay payor
// its source id, Patient/VSDMPatient-GKV-<KVNR>).
func TestBillerJoinsClaimsByKeyedIDs(t *testing.T) {
	dir := t.TempDir()
	in, data := filepath.Join(dir, "in"), filepath.Join(dir, "data")
	audittest.VerifyOnCleanup(t, filepath.Join(data, "audit.db"))
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	copyInput := func(src, name string, edit func(map[string]any)) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		// The fixtures' canary Patient contained in a claim (README.md
		// there) is refused by an import: whose compartment it is, no id
		// says.
		var kept []any
		for _, c := range asList(m["contained"]) {
			if c.(map[string]any)["resourceType"] != "Patient" {
				kept = append(kept, c)
			}
		}
		if m["contained"] = kept; kept == nil {
			delete(m, "contained")
		}
		if edit != nil {
			edit(m)
		}
		if b, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(in, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	billing4 := filepath.Join("..", "rego", "testdata", "billing4")
	for _, f := range []string{"claim-example-institutional.json", "claimresponse-example.json", "explanationofbenefit-example.json", "c4bb-eob-professional-example1.json"} {
		copyInput(filepath.Join(billing4, f), f, nil)
	}
	// The claim the ClaimResponse and the EOB name (Claim/100150), with a
	// facility on another server.
	copyInput(filepath.Join(billing4, "claim-example-institutional.json"), "claim-100150.json", func(m map[string]any) {
		m["id"] = "100150"
		m["facility"] = map[string]any{"reference": "https://other.example/fhir/Location/9", "type": "Location"}
	})
	copyInput(filepath.Join("..", "minimize", "testdata", "outside4", "fhir", "de-vsdm-coverage.json"), "de-vsdm-coverage.json", nil)
	for name, body := range map[string]string{
		"patient-1.json": `{"resourceType":"Patient","id":"1","gender":"male"}`,
		"coverage-9876B1.json": `{"resourceType":"Coverage","id":"9876B1","status":"active","subscriberId":"AB9876",` +
			`"beneficiary":{"reference":"Patient/1"},"relationship":{"coding":[{"code":"self"}]},"payor":[{"reference":"Organization/2"}]}`,
		"coverage-selfpay.json": `{"resourceType":"Coverage","id":"VSDMCoverage-SEL-V731904826","status":"active",` +
			`"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/coverage-selfpay","code":"pay"}]},` +
			`"beneficiary":{"reference":"Patient/VSDMPatient-GKV-V731904826"},"payor":[{"reference":"Patient/VSDMPatient-GKV-V731904826"}]}`,
	} {
		if err := os.WriteFile(filepath.Join(in, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if rep := importJSON(t, data, in); rep.Created == 0 {
		t.Fatalf("import: %+v", rep)
	}

	principal := filepath.Join(dir, "billing.json")
	if err := os.WriteFile(principal, []byte(`{"sub":"bob.billing","roles":["billing"],"client_id":"claims-assistant",`+
		`"tenant":"general-hospital","patients":[],"purpose_of_use":"HPAYMT"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "serve", "--dev", "--data-dir", data, "--stdio", "--page-size", "50")
	cmd.Env = append(os.Environ(), "CUSTOS_PRINCIPAL_FILE="+principal)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-billref", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); cmd.Wait() }()

	// Every resource the biller reads, by its view's resourceType and id:
	// the view's id must be its URI's.
	views := map[string]map[string]any{} // "Type/id" as the view names it
	ids := map[string]bool{}             // the ids of the URIs listed, their patient segments too
	var all strings.Builder
	for _, r := range listAll(t, ctx, cs) {
		ids[r.URI[strings.LastIndexByte(r.URI, '/')+1:]] = true
		if _, rest, ok := strings.Cut(r.URI, "/patients/"); ok {
			ids[rest[:strings.IndexByte(rest, '/')]] = true // the Patient's keyed id
		}
		body := readText(t, ctx, cs, r.URI)
		all.WriteString(body)
		var v map[string]any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%s: %v", r.URI, err)
		}
		id, _ := v["id"].(string)
		if !strings.HasSuffix(r.URI, "/"+id) {
			t.Errorf("the view of %s names itself %q, not its URI's id", r.URI, id)
		}
		views[v["resourceType"].(string)+"/"+id] = v
	}
	// Source ids never come out: not the KVNR, not a claim's or a
	// coverage's id.
	for _, src := range []string{"V731904826", "9876B1", "100150", "960150", "R3500", "EB3500", "ProfessionalEOBExample1",
		"CoverageEx1", "Patient/1\"", "other.example", "#referrer"} {
		if strings.Contains(all.String(), src) {
			t.Errorf("a source id comes out in the biller's views: %s", src)
		}
	}
	ref := func(v map[string]any, path ...string) (string, string) {
		var x any = v
		for _, p := range path {
			switch y := x.(type) {
			case map[string]any:
				x = y[p]
			case []any:
				if len(y) == 0 {
					return "", ""
				}
				x = y[0].(map[string]any)[p]
			}
		}
		if l, ok := x.([]any); ok && len(l) > 0 {
			x = l[0]
		}
		m, _ := x.(map[string]any)
		r, _ := m["reference"].(string)
		typ, _ := m["type"].(string)
		return r, typ
	}
	byType := func(typ string) []map[string]any {
		var out []map[string]any
		for k, v := range views {
			if strings.HasPrefix(k, typ+"/") {
				out = append(out, v)
			}
		}
		return out
	}
	joined, unheld := 0, 0
	for _, c := range []struct {
		typ  string
		path []string
		want string // the referenced type that must be held
	}{
		{"Claim", []string{"insurance", "coverage"}, "Coverage"},
		{"Claim", []string{"patient"}, "Patient"},
		{"ClaimResponse", []string{"request"}, "Claim"},
		{"ClaimResponse", []string{"insurance", "coverage"}, "Coverage"},
		{"ExplanationOfBenefit", []string{"claim"}, "Claim"},
		{"ExplanationOfBenefit", []string{"claimResponse"}, "ClaimResponse"},
		{"ExplanationOfBenefit", []string{"insurance", "coverage"}, "Coverage"},
		{"Coverage", []string{"beneficiary"}, "Patient"},
	} {
		for _, v := range byType(c.typ) {
			r, _ := ref(v, c.path...)
			if r == "" {
				continue // not in the source (the C4BB EOB names no claim)
			}
			typ, id, _ := strings.Cut(r, "/")
			if typ != c.want || !store.HasKeyedIDForm(id) {
				t.Errorf("%s %v = %q is no keyed reference to a %s", c.typ, c.path, r, c.want)
				continue
			}
			if !ids[id] {
				// The C4BB EOB names a Coverage custos does not hold:
				// keyed all the same, so that a view does not tell a
				// resource the biller may not read from a missing one.
				unheld++
				continue
			}
			if c.want != "Patient" {
				if _, ok := views[r]; !ok {
					t.Errorf("%s %v = %q is no view the biller read", c.typ, c.path, r)
				}
			}
			joined++
		}
	}
	if joined < 8 || unheld < 1 {
		t.Errorf("only %d references join the biller's views, %d name a resource custos does not hold", joined, unheld)
	}
	// A self-pay Coverage's payor, the patient: keyed like her URI.
	selfPay := 0
	for _, v := range byType("Coverage") {
		if p, _ := ref(v, "payor"); strings.HasPrefix(p, "Patient/") {
			if b, _ := ref(v, "beneficiary"); p != b || !ids[strings.TrimPrefix(p, "Patient/")] {
				t.Errorf("a self-pay payor %q is not its beneficiary's keyed id %q", p, b)
			}
			selfPay++
		}
	}
	if selfPay != 1 {
		t.Errorf("%d self-pay Coverages read, want 1", selfPay)
	}
	// The insurer, an Organization custos does not hold, is keyed as one
	// it holds would be (its id names no URI); what custos cannot key
	// keeps only its type: a facility on another server.
	unkeyed := 0
	for _, v := range byType("Claim") {
		if r, _ := ref(v, "insurer"); !strings.HasPrefix(r, "Organization/") || !store.HasKeyedIDForm(strings.TrimPrefix(r, "Organization/")) || ids[strings.TrimPrefix(r, "Organization/")] {
			t.Errorf("an insurer custos does not hold: %q, want a keyed id that names no URI", r)
		}
		if r, typ := ref(v, "facility"); r == "" && typ == "Location" {
			unkeyed++
		} else if r != "" {
			t.Errorf("a facility on another server came out as %q", r)
		}
	}
	if unkeyed != 1 {
		t.Errorf("%d Claims keep the type of their facility on another server, want 1", unkeyed)
	}
}

func asList(v any) []any { l, _ := v.([]any); return l }
