package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
)

// A research read names aliases of its own tenant only: the tenant
// boundary denies every other tenant's resource whatever the policy says.
// A research read of a URI of another tenant made the server compute that
// tenant's aliases (one keyed hash per patient, kept afterwards), so its
// first such read cost time in proportion to the other tenant's patients
// (nothing for a tenant that does not exist): a researcher of one tenant
// could learn whether another exists and how large it is. It is now
// decided as named, like any URI that is no alias, and is not found.
func TestResearchReadResolvesAliasesOfItsOwnTenantOnly(t *testing.T) {
	f, _ := twoTenantFixture(t, nil)
	researcher := f.identity("researcher")
	if researcher.PurposeOfUse != server.ResearchPurpose || researcher.Principal.Tenant != "general-hospital" {
		t.Fatalf("fixture researcher: %+v", researcher)
	}
	var other string
	for _, r := range f.allURIs() {
		if r.Labels.Tenant == "other-clinic" && strings.Contains(r.URI, "/patients/") {
			other = r.URI
			break
		}
	}
	if other == "" {
		t.Fatal("no patient resource of the other tenant")
	}
	cs := f.connect(researcher)
	before := len(f.records())
	_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: other})
	if err == nil || !strings.Contains(err.Error(), "Resource not found") {
		t.Fatalf("research read of another tenant's uri: %v, want not found", err)
	}
	if recs := f.records()[before:]; len(recs) != 1 || recs[0].Outcome != audit.OutcomeDeny {
		t.Errorf("records %+v, want one deny", recs)
	}
	if slices.Contains(f.srv.AliasedTenants(), "other-clinic") {
		t.Errorf("a research read of another tenant's uri made that tenant's aliases (aliased tenants %v)", f.srv.AliasedTenants())
	}
	// Its own tenant's aliases still resolve.
	res, err := cs.ListResources(context.Background(), nil)
	if err != nil || len(res.Resources) == 0 {
		t.Fatalf("research list: %v", err)
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: res.Resources[0].URI}); err != nil {
		t.Errorf("research read of a listed alias: %v", err)
	}
}
