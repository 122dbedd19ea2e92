package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/store"
)

// restrictedPatient has two observations of its own in
// TestVeryRestrictedIsDeniedWithoutFailingTheList: one without labels, one
// very-restricted (HL7 confidentiality V).
const restrictedPatient = "5a7c3e21-9d4b-4c6e-8f02-1b3d5e7f9a0c"

func importRestricted(t testing.TB, catPath string) (plain, restricted string) {
	t.Helper()
	dir := t.TempDir()
	var manifest strings.Builder
	for i, labels := range [][]string{nil, {"very-restricted"}} {
		id := fmt.Sprintf("9e8d7c6b-5a49-4382-9170-%012d", i)
		uri := fmt.Sprintf("fhir://general-hospital/patients/%s/observation/%s", restrictedPatient, id)
		if i == 0 {
			plain = uri
		} else {
			restricted = uri
		}
		name := fmt.Sprintf("observation-%d.json", i)
		doc := fmt.Sprintf(`{"resourceType":"Observation","id":%q,"status":"final","code":{"text":"heart rate"},"subject":{"reference":"Patient/%s"},"valueQuantity":{"value":72,"unit":"/min"}}`, id, restrictedPatient)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(store.ManifestEntry{
			URI: uri, Name: "observation-" + id[:8], Title: "Observation", MIMEType: store.MIMEFHIR,
			Labels: store.Labels{Tenant: "general-hospital", Patient: restrictedPatient, Type: "observation", Sensitivity: labels},
			File:   name,
		})
		manifest.Write(append(line, '\n'))
	}
	importManifest(t, catPath, dir, []byte(manifest.String()))
	return plain, restricted
}

// TestVeryRestrictedIsDeniedWithoutFailingTheList: a researcher and a
// biller, who hold no sensitive:very-restricted role and do not treat, list
// a catalog with a very-restricted resource. Each gets their list (the
// resource left out, its unlabelled sibling in for the researcher), and a
// read of it is refused like a resource that does not exist, recorded as a
// denial for both reasons. The policy once answered that case with an
// evaluation conflict: the read was a policy error, and so was every list
// page that held the resource.
func TestVeryRestrictedIsDeniedWithoutFailingTheList(t *testing.T) {
	var plain, restricted string
	f := newServerFixture(t, fixtureOptions{imports: func(t testing.TB, catPath string) {
		plain, restricted = importRestricted(t, catPath)
	}})
	base := newFixture(t, "")
	for _, persona := range []string{"researcher", "billing"} {
		cs := f.connect(f.identity(persona))
		got := listAll(t, cs)
		want := len(listAll(t, base.connect(base.identity(persona))))
		if persona == "researcher" {
			want++ // the unlabelled observation, under a research alias
		}
		if len(got) != want {
			t.Errorf("%s lists %d resources with the very-restricted one in the catalog, want %d", persona, len(got), want)
		}
		if slices.Contains(got, restricted) || slices.Contains(got, plain) {
			t.Errorf("%s's list holds a real URI of the restricted patient", persona)
		}
		_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: restricted})
		if err == nil || !strings.Contains(err.Error(), "Resource not found") {
			t.Fatalf("%s reads the very-restricted resource: %v, want not found", persona, err)
		}
	}
	denials := 0
	for _, r := range f.records() {
		if r.Entry.Action != audit.ActionResourcesRead || !slices.Contains(r.Entry.URIs, f.audited(restricted)) {
			continue
		}
		reasons := strings.Split(r.Entry.Reason, ",")
		if r.Entry.Outcome != audit.OutcomeDeny || !slices.Contains(reasons, "restricted_use_only_treatment") || !slices.Contains(reasons, "sensitive_category_requires_role") {
			t.Errorf("the read of the very-restricted resource is recorded as %s %q, want a denial for both of its labels' reasons", r.Entry.Outcome, r.Entry.Reason)
		}
		denials++
	}
	if denials != 2 {
		t.Fatalf("%d audit records of the very-restricted read, want 2 (researcher, biller)", denials)
	}
}
