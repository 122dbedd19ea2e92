package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

// plainCatalog hides the index of a store.Live: a server over it scans
// the whole catalog and builds research aliases by a full scan, the plain
// path the indexed one must agree with.
type plainCatalog struct{ server.Catalog }

// plainServer is a server like f's, with the policy in policyDir ("" for
// the default), over f's catalog without its index.
func plainServer(t *testing.T, f *fixture, policyDir string) *server.Server {
	t.Helper()
	cfg := f.config(loadPolicy(t, policyDir))
	cfg.Catalog = plainCatalog{f.catalog}
	return newServer(t, cfg)
}

// newServer is server.New(cfg), which must succeed.
func newServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// twoTenantFixture is a live fixture whose catalog holds two tenants: the
// usual synthetic set (general-hospital) and a second one (other-clinic,
// whose principals are in otherSeed/principals).
func twoTenantFixture(t *testing.T, tune func(*server.Config)) (f *fixture, otherSeed string) {
	t.Helper()
	f = newServerFixture(t, fixtureOptions{live: true, seed: &synth.Options{Patients: 15, Seed: 3}, tune: tune})
	otherSeed = filepath.Join(t.TempDir(), "other")
	if _, err := synth.Generate(context.Background(), otherSeed, synth.Options{Patients: 8, Seed: 4, Tenant: "other-clinic"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ImportStaged(context.Background(), f.catPath, otherSeed, store.Options{}, nil); err != nil {
		t.Fatal(err)
	}
	// The other tenant also gets the same data as FHIR input (its Bulk
	// export, plus tenant-level reference data): URIs under keyed ids for
	// the same label patients as its manifest resources, and resources
	// without a patient, side by side.
	bulk := filepath.Join(otherSeed, "bulk")
	refData := `{"resourceType":"Organization","id":"org-1","name":"Other Clinic"}` + "\n" +
		`{"resourceType":"Organization","id":"org-2","name":"Other Lab"}` + "\n"
	if err := os.WriteFile(filepath.Join(bulk, "Organization.ndjson"), []byte(refData), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bulk, "Practitioner.ndjson"), []byte(`{"resourceType":"Practitioner","id":"pr-1","active":true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := app.ImportFHIR(context.Background(), f.catPath, bulk, app.FHIRImport{
		Tenant: "other-clinic", IDKey: secrets.Key{ID: "test:id-key", Bytes: []byte("0123456789abcdef0123456789abcdef")},
	}); err != nil {
		t.Fatal(err)
	}
	if _, swapped, err := f.live.Reload(); err != nil || !swapped {
		t.Fatalf("reload: swapped=%v err=%v", swapped, err)
	}
	return f, otherSeed
}

// listPages lists every page as id and returns the items of each page as
// JSON (URI, names, annotations, _meta: everything a client sees of them).
func listPages(t *testing.T, f *fixture, srv *server.Server, id server.Identity) [][]string {
	t.Helper()
	f.srv = srv
	cs := f.connect(id)
	var pages [][]string
	cursor := ""
	for {
		res, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		page := []string{}
		for _, r := range res.Resources {
			b, _ := json.Marshal(r)
			page = append(page, string(b))
		}
		pages = append(pages, page)
		if cursor = res.NextCursor; cursor == "" {
			return pages
		}
		if len(pages) > 1000 {
			t.Fatal("the list does not end")
		}
	}
}

func loadIdentity(t *testing.T, dir, name string) server.Identity {
	t.Helper()
	id, err := server.LoadPrincipalFile(filepath.Join(dir, "principals", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// The indexed list scan (the caller's tenant only, decided on indexed
// labels) answers exactly what the plain scan of the whole catalog
// answers, page by page, for every persona of both tenants; and research
// aliases resolve to the same resources.
func TestIndexedListAgreesWithPlain(t *testing.T) {
	for _, tc := range []struct {
		name       string
		scanLimit  int
		pageByPage bool
	}{
		{"default-scan-limit", 0, true},
		// A scan budget far below the catalog: the plain scan spends it on
		// the other tenant and returns short pages, so only the items in
		// order must agree.
		{"small-scan-limit", 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, other := twoTenantFixture(t, func(c *server.Config) { c.ScanLimit = tc.scanLimit })
			indexed, plain := f.srv, plainServer(t, f, "")
			ids := map[string]server.Identity{}
			for _, p := range []string{"clinician", "clinician-hiv", "billing", "researcher", "auditor", "outsider"} {
				ids[p] = f.identity(p)
				ids["other-"+p] = loadIdentity(t, other, p)
			}
			for name, id := range ids {
				a, b := listPages(t, f, indexed, id), listPages(t, f, plain, id)
				if !tc.pageByPage {
					a, b = [][]string{slices.Concat(a...)}, [][]string{slices.Concat(b...)}
				}
				if !slices.EqualFunc(a, b, slices.Equal) {
					t.Fatalf("%s: indexed and plain lists differ:\nindexed %d pages: %v\nplain   %d pages: %v", name, len(a), a, len(b), b)
				}
				n := len(slices.Concat(a...))
				switch {
				case strings.HasSuffix(name, "auditor"):
					if n != 0 {
						t.Fatalf("%s sees %d resources", name, n)
					}
				case strings.HasSuffix(name, "outsider"):
					// A clinician of other-clinic with no patients: only
					// that tenant's reference data, which its clinicians read.
					for _, item := range slices.Concat(a...) {
						if strings.Contains(item, "/patients/") || !strings.Contains(item, "other-clinic/") {
							t.Fatalf("%s sees a patient's resource: %s", name, item)
						}
					}
				case n == 0:
					t.Fatalf("%s sees nothing; the fixture should give it access", name)
				}
				if id.PurposeOfUse == server.ResearchPurpose {
					// Every alias listed reads the same through both paths.
					for _, item := range slices.Concat(a...) {
						var r mcp.Resource
						json.Unmarshal([]byte(item), &r)
						ri, rp := readAs(t, f, indexed, id, r.URI), readAs(t, f, plain, id, r.URI)
						if ri == "" || ri != rp {
							t.Fatalf("%s: read of %s: indexed %q, plain %q", name, r.URI, ri, rp)
						}
					}
				}
			}
		})
	}
}

// readAs reads uri as id and returns the text ("" if refused).
func readAs(t *testing.T, f *fixture, srv *server.Server, id server.Identity, uri string) string {
	t.Helper()
	f.srv = srv
	res, err := f.connect(id).ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return ""
	}
	return res.Contents[0].Text
}

// A caller whose tenant holds nothing gets one empty page without a
// cursor, however large the catalog beside it (the plain scan walks it in
// ScanLimit steps).
func TestNothingVisibleIsOneEmptyPage(t *testing.T) {
	f, _ := twoTenantFixture(t, func(c *server.Config) { c.ScanLimit = 5 })
	id := f.identity("outsider")
	id.Principal.Tenant = "no-such-clinic"
	start := len(f.records())
	pages := listPages(t, f, f.srv, id)
	if len(pages) != 1 || len(pages[0]) != 0 {
		t.Fatalf("pages: %v", pages)
	}
	recs := f.records()[start:]
	if len(recs) != 1 || recs[0].Outcome != audit.OutcomeAllow || recs[0].Reason != "returned=0 denied=0 scanned=0" {
		t.Fatalf("records: %+v", recs)
	}
	if n := len(listPages(t, f, plainServer(t, f, ""), id)); n < 10 {
		t.Fatalf("the plain scan took %d pages; the test needs a catalog many scan budgets long", n)
	}
}

// The tenant boundary holds whatever the policy says: under a policy that
// allows everything, a caller reads and lists only its own tenant's
// resources, and the refused read is recorded with tenant_boundary.
func TestTenantBoundaryHoldsUnderAnOpenPolicy(t *testing.T) {
	dir := t.TempDir()
	open := "package custos.authz\n\ndecision := {\"allow\": true, \"reasons\": [\"open\"], \"obligations\": []}\n"
	if err := os.WriteFile(filepath.Join(dir, "open.rego"), []byte(open), 0o600); err != nil {
		t.Fatal(err)
	}
	f, _ := twoTenantFixture(t, nil)
	f.reconfigurePolicy(dir, nil)
	id := f.identity("auditor")
	for _, srv := range []*server.Server{f.srv, plainServer(t, f, dir)} {
		listed := slices.Concat(listPages(t, f, srv, id)...)
		if len(listed) == 0 {
			t.Fatal("the open policy lists nothing")
		}
		for _, item := range listed {
			if !strings.Contains(item, "://general-hospital/") {
				t.Fatalf("listed another tenant's resource: %s", item)
			}
		}
	}
	otherURI := ""
	for _, r := range f.allURIs() {
		if r.Labels.Tenant == "other-clinic" {
			otherURI = r.URI
			break
		}
	}
	start := len(f.records())
	if readAs(t, f, f.srv, id, otherURI) != "" {
		t.Fatal("read another tenant's resource")
	}
	recs := f.records()[start:]
	if len(recs) != 1 || recs[0].Outcome != audit.OutcomeDeny || recs[0].Reason != "open,tenant_boundary" {
		t.Fatalf("records: %+v", recs)
	}
}

// A cursor issued before a catalog swap stays valid after it, on the
// indexed path as on the plain one, and both continue alike from it (for a
// research caller too, whose cursor is a position among research URIs).
func TestIndexedCursorAcrossSwap(t *testing.T) {
	f, _ := twoTenantFixture(t, nil)
	indexed, plain := f.srv, plainServer(t, f, "")
	ids := []server.Identity{f.identity("clinician"), f.identity("billing"), f.identity("researcher")}
	cursors := make([]string, len(ids))
	for i, id := range ids {
		f.srv = indexed
		res, err := f.connect(id).ListResources(context.Background(), &mcp.ListResourcesParams{})
		if err != nil || res.NextCursor == "" {
			t.Fatalf("first page: %v (cursor %q)", err, res.NextCursor)
		}
		cursors[i] = res.NextCursor
	}
	// Swap in a catalog with more resources of the same tenant.
	more := filepath.Join(t.TempDir(), "more")
	if _, err := synth.Generate(context.Background(), more, synth.Options{Patients: 6, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ImportStaged(context.Background(), f.catPath, more, store.Options{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, swapped, err := f.live.Reload(); err != nil || !swapped {
		t.Fatalf("reload: swapped=%v err=%v", swapped, err)
	}
	rest := func(srv *server.Server, id server.Identity, cursor string) []string {
		f.srv = srv
		cs := f.connect(id)
		var items []string
		for cursor != "" {
			res, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Resources {
				items = append(items, r.URI)
			}
			cursor = res.NextCursor
		}
		return items
	}
	for i, id := range ids {
		a, b := rest(indexed, id, cursors[i]), rest(plain, id, cursors[i])
		if len(a) == 0 || !slices.Equal(a, b) {
			t.Fatalf("%s: after the swap, indexed %d items, plain %d:\n%v\n%v", id.Principal.Sub, len(a), len(b), a, b)
		}
	}
}
