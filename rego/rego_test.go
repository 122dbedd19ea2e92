package rego_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/rego"
	"github.com/custos-mcp/custos/store"
)

// TestFHIRTypesMatchStore: the policy's fhir_r4_types are exactly the
// types a fhir:// URI may carry (store.FHIRTypes, generated from the R4
// StructureDefinitions).
func TestFHIRTypesMatchStore(t *testing.T) {
	b, err := fs.ReadFile(rego.FS, "custos/authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "\nfhir_r4_types := {\n")
	block, _, ok2 := strings.Cut(block, "\n}")
	if !ok || !ok2 {
		t.Fatal("authz.rego has no fhir_r4_types set")
	}
	var got []string
	for _, line := range strings.Split(block, "\n") {
		got = append(got, strings.Trim(strings.TrimSpace(line), `",`))
	}
	slices.Sort(got)
	if want := store.FHIRTypes(); !slices.Equal(got, want) {
		t.Errorf("fhir_r4_types has %d types, store %d; they differ", len(got), len(want))
	}
}

// TestCommentsNameFilesThatExist: a file the built-in policy's comments
// name (fhirtypes.rego, rego_test.go, store/fhirtypes_gen.go) exists, next
// to the policy, in this package or from the repository's root, so that a
// reader sent to it finds it.
func TestCommentsNameFilesThatExist(t *testing.T) {
	fileName := regexp.MustCompile(`[A-Za-z0-9_./-]+\.(rego|go)\b`)
	for _, name := range []string{"custos/authz.rego", "custos/authz_test.rego"} {
		b, err := fs.ReadFile(rego.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			_, comment, ok := strings.Cut(line, "#")
			if !ok {
				continue
			}
			for _, f := range fileName.FindAllString(comment, -1) {
				found := false
				for _, dir := range []string{"custos", ".", ".."} {
					if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
						found = true
					}
				}
				if !found {
					t.Errorf("%s:%d names %s, which is not in rego/custos, rego or the repository's root", name, i+1, f)
				}
			}
		}
	}
}

func TestEmbeddedFiles(t *testing.T) {
	for _, name := range []string{"custos/authz.rego", "custos/authz_test.rego"} {
		b, err := fs.ReadFile(rego.FS, name)
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v (len %d)", name, err, len(b))
		}
	}
}

// TestWorkedExample evaluates the worked example of docs/policy.md: the
// first JSON block of that section is the input, the second the decision,
// so the document cannot drift from the policy.
func TestWorkedExample(t *testing.T) {
	ctx := context.Background()
	e, doc := defaultAndDoc(t)
	_, section, ok := strings.Cut(doc, "## Worked example")
	if !ok {
		t.Fatal("docs/policy.md has no worked example")
	}
	var blocks []string
	for _, part := range strings.Split(section, "```json\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		blocks = append(blocks, block)
	}
	if len(blocks) < 2 {
		t.Fatalf("worked example has %d JSON blocks, want input and decision", len(blocks))
	}
	var in policy.Input
	if err := json.Unmarshal([]byte(blocks[0]), &in); err != nil {
		t.Fatalf("worked example input: %v", err)
	}
	var want struct {
		Allow       bool
		Reasons     []string
		Obligations []minimize.Obligation
	}
	// The documented decision abbreviates ID and revision with "…"; drop them.
	if err := json.Unmarshal([]byte(stripAbbreviated(blocks[1])), &want); err != nil {
		t.Fatalf("worked example decision: %v", err)
	}
	d, err := e.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allow != want.Allow || !slices.Equal(d.Reasons, want.Reasons) || !slices.Equal(d.Obligations, want.Obligations) {
		t.Errorf("decision\n got %v %v %v\nwant %v %v %v", d.Allow, d.Reasons, d.Obligations, want.Allow, want.Reasons, want.Obligations)
	}
	in.Resource.Consent = []string{"opt-out"}
	d, err = e.Decide(ctx, in)
	if err != nil || d.Allow || len(d.Reasons) != 1 || d.Reasons[0] != "patient_opted_out" {
		t.Errorf("opt-out: %+v, %v; want deny [patient_opted_out]", d, err)
	}
}

// defaultAndDoc is the default policy and docs/policy.md.
func defaultAndDoc(t *testing.T) (*policy.Engine, string) {
	t.Helper()
	e, err := policy.Default(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	return e, string(doc)
}

func stripAbbreviated(block string) string {
	var keep []string
	for _, line := range strings.Split(block, "\n") {
		if !strings.Contains(line, "…") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// TestResearcherRowMatchesPolicy: the researcher's row of docs/policy.md's
// "Role × purpose of use" table names exactly the types the default
// policy lets a researcher (HRESCH) read in a patient's compartment. It
// named research_fhir_types alone, and the policy lets a researcher read
// the reference types there too (a patient's own Device, de-identified).
func TestResearcherRowMatchesPolicy(t *testing.T) {
	ctx := context.Background()
	e, doc := defaultAndDoc(t)
	_, row, ok := strings.Cut(doc, "\n| `researcher` | `HRESCH` | `patient`")
	row, _, _ = strings.Cut(row, "\n")
	cells := strings.Split(row, " | ")
	if !ok || len(cells) < 2 {
		t.Fatal("docs/policy.md has no researcher row")
	}
	var documented []string
	for _, m := range regexp.MustCompile("`([a-z]+)`").FindAllStringSubmatch("`patient`"+cells[0], -1) {
		if m[1] != "research_fhir_types" && m[1] != "reference_types" && m[1] != "research_obligations" && !slices.Contains(documented, m[1]) {
			documented = append(documented, m[1])
		}
	}
	slices.Sort(documented)
	var allowed []string
	for _, typ := range append(store.FHIRTypes(), "note", "report", "image", "attachment") {
		d, err := e.Decide(ctx, policy.Input{
			Principal:    policy.Principal{Sub: "rita", Roles: []string{"researcher"}, ClientID: "study", Tenant: "general-hospital"},
			PurposeOfUse: "HRESCH", Action: policy.ActionRead,
			Resource: &policy.Resource{URI: "fhir://general-hospital/patients/p1/" + typ + "/x", Type: typ, Patient: "p1", Tenant: "general-hospital"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allow {
			allowed = append(allowed, typ)
		}
	}
	if !slices.Equal(documented, allowed) {
		t.Errorf("the researcher row names\n%v\nthe policy allows in a patient's compartment\n%v", documented, allowed)
	}
}
