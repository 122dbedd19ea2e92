package server_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
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

// Research aliases are per tenant. Two tenants of one catalog can hold the
// same patient id and resource ids (ids are unique within a tenant only:
// here the same synthetic data set imported under a second tenant, as two
// hospitals' systems that number their patients alike, or one enterprise
// id used in both). A researcher of each tenant must not be shown the same
// alias for them: the two studies could otherwise join their de-identified
// data sets on it, and, since the researcher of one tenant could learn the
// other's records of "the same" patient, link a patient across tenants.
// Both researchers see every resource of their own tenant, each through
// its own aliases, and read them.
func TestResearchAliasesArePerTenant(t *testing.T) {
	other := "second-hospital"
	f := newServerFixture(t, fixtureOptions{imports: func(t testing.TB, catPath string) {
		o := defaultSeed
		o.Tenant = other
		if err := seedCatalog(filepath.Join(t.TempDir(), "synthetic"), catPath, o); err != nil {
			t.Fatal(err)
		}
	}})
	// The precondition: the same ids in both tenants.
	ids := map[string][]string{}
	for _, r := range f.allURIs() {
		u, err := store.ParseURI(r.URI)
		if err != nil {
			t.Fatal(err)
		}
		ids[u.Tenant] = append(ids[u.Tenant], u.Patient+"/"+u.ID)
	}
	if len(ids[other]) == 0 || len(ids[other]) != len(ids[synth.DefaultTenant]) {
		t.Fatalf("catalog holds %d resources of %s and %d of %s", len(ids[synth.DefaultTenant]), synth.DefaultTenant, len(ids[other]), other)
	}
	shown := func(tenant string) (patients, resources map[string]bool, obs string) {
		t.Helper()
		id := f.identity("researcher")
		id.Principal.Tenant = tenant
		cs := f.connect(id)
		patients, resources = map[string]bool{}, map[string]bool{}
		for r, err := range cs.Resources(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			u, err := store.ParseURI(r.URI)
			if err != nil || u.Tenant != tenant {
				t.Fatalf("%s's researcher is shown %s (%v)", tenant, r.URI, err)
			}
			if u.Patient != "" {
				patients[u.Patient] = true
			}
			resources[u.ID] = true
			if obs == "" && u.Type == "observation" {
				obs = r.URI
			}
		}
		if len(resources) < 20 || len(patients) < 5 || obs == "" {
			t.Fatalf("%s's researcher lists %d resources of %d patients (observation %q): the test would prove little", tenant, len(resources), len(patients), obs)
		}
		// The payload names the patient by the alias its URI carries.
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: obs})
		if err != nil {
			t.Fatalf("%s's researcher reads %s: %v", tenant, obs, err)
		}
		u, _ := store.ParseURI(obs)
		var body struct {
			Subject struct{ Reference string } `json:"subject"`
		}
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &body); err != nil || body.Subject.Reference != "Patient/"+u.Patient {
			t.Fatalf("%s's researcher reads %s with subject %q (%v), want Patient/%s", tenant, obs, body.Subject.Reference, err, u.Patient)
		}
		return patients, resources, obs
	}
	p1, r1, _ := shown(synth.DefaultTenant)
	p2, r2, _ := shown(other)
	both := func(what string, a, b map[string]bool) {
		t.Helper()
		n, one := 0, ""
		for x := range a {
			if b[x] {
				n, one = n+1, x
			}
		}
		if n > 0 {
			t.Errorf("%d %s aliases (%s among them) are shown to the researchers of both tenants", n, what, one)
		}
	}
	both("patient", p1, p2)
	both("resource", r1, r2)
}
