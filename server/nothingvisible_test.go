package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
)

// blindDecider hides its engine's NothingVisible (and Current): a server
// over it scans and decides every item of every list, the plain path the
// nothing-visible shortcut must agree with.
type blindDecider struct{ server.Decider }

// scanningServer is a server like f's whose lists always scan.
func scanningServer(t *testing.T, f *fixture, policyDir string) *server.Server {
	t.Helper()
	return newServer(t, f.config(blindDecider{loadPolicy(t, policyDir)}))
}

// A caller of the catalog's own tenant whom the policy denies everything
// (the auditor) gets one empty page without cursor and no scan, recorded
// as such; the plain path walks the whole tenant in ScanLimit steps to the
// same empty list. A cursor of that walk ends it at once. Every other
// persona, of both tenants, lists exactly what the plain path lists, page
// by page.
func TestNothingVisibleListsOneEmptyPageUnscanned(t *testing.T) {
	f, other := twoTenantFixture(t, func(c *server.Config) { c.ScanLimit = 5 })
	shortcut, plain := f.srv, scanningServer(t, f, "")
	id := f.identity("auditor")

	start := len(f.records())
	pages := listPages(t, f, shortcut, id)
	if len(pages) != 1 || len(pages[0]) != 0 {
		t.Fatalf("auditor pages: %v", pages)
	}
	recs := f.records()[start:]
	if len(recs) != 1 || recs[0].Action != server.ActionList || recs[0].Outcome != audit.OutcomeAllow ||
		recs[0].Reason != server.ReasonNothingVisible+" returned=0 denied=0 scanned=0" || len(recs[0].URIs) != 0 {
		t.Fatalf("records: %+v", recs)
	}

	start = len(f.records())
	walked := listPages(t, f, plain, id)
	if len(walked) < 10 || len(slices.Concat(walked...)) != 0 {
		t.Fatalf("the plain scan took %d pages listing %d items; the test needs an empty list many scan budgets long", len(walked), len(slices.Concat(walked...)))
	}
	denied := 0
	for _, r := range f.records()[start:] {
		var n, scanned int
		if _, err := fmt.Sscanf(r.Reason, "returned=0 denied=%d scanned=%d", &n, &scanned); err != nil || n != scanned {
			t.Fatalf("plain page record %q: want a scan that denied every item", r.Reason)
		}
		denied += n
	}
	if denied < 10*5-5 {
		t.Fatalf("the plain scan denied %d items in all", denied)
	}

	// A walk in progress (a cursor of the plain path) ends at once.
	f.srv = plain
	first, err := f.connect(id).ListResources(context.Background(), &mcp.ListResourcesParams{})
	if err != nil || first.NextCursor == "" {
		t.Fatalf("plain first page: %v, cursor %q", err, first.NextCursor)
	}
	f.srv = shortcut
	next, err := f.connect(id).ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: first.NextCursor})
	if err != nil || len(next.Resources) != 0 || next.NextCursor != "" {
		t.Fatalf("shortcut after a cursor: %+v, %v", next, err)
	}

	for _, p := range []string{"clinician", "clinician-hiv", "billing", "researcher", "outsider"} {
		for name, id := range map[string]server.Identity{p: f.identity(p), "other-" + p: loadIdentity(t, other, p)} {
			a, b := listPages(t, f, shortcut, id), listPages(t, f, plain, id)
			if !slices.EqualFunc(a, b, slices.Equal) {
				t.Fatalf("%s: shortcut and plain lists differ:\nshortcut %d pages: %v\nplain    %d pages: %v", name, len(a), a, len(b), b)
			}
		}
	}
}

// Under a custom policy whose nothing_visible its rules do not imply (it
// allows everything), the engine's enforcement makes the shortcut exact:
// the auditor lists one empty page, and a read is denied with
// nothing_visible; a policy whose nothing_visible fails to evaluate
// refuses the list, recording a policy error, and releases nothing.
func TestNothingVisibleUnderACustomPolicy(t *testing.T) {
	write := func(body string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package custos.authz\n\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	open := `decision := {"allow": true, "reasons": ["open"], "obligations": []}
default nothing_visible := false
`
	f, _ := twoTenantFixture(t, nil)
	id := f.identity("auditor")
	uri := ""
	for _, r := range f.allURIs() {
		if r.Labels.Tenant == id.Principal.Tenant {
			uri = r.URI
			break
		}
	}

	f.reconfigurePolicy(write(open+`nothing_visible if "auditor" in input.principal.roles`+"\n"), nil)
	start := len(f.records())
	if pages := listPages(t, f, f.srv, id); len(pages) != 1 || len(pages[0]) != 0 {
		t.Fatalf("pages: %v", pages)
	}
	if readAs(t, f, f.srv, id, uri) != "" {
		t.Fatal("the auditor read a resource while nothing is visible to it")
	}
	recs := f.records()[start:]
	if len(recs) != 2 || recs[0].Reason != "nothing_visible returned=0 denied=0 scanned=0" ||
		recs[1].Outcome != audit.OutcomeDeny || recs[1].Reason != "open,nothing_visible" {
		t.Fatalf("records: %+v", recs)
	}
	if len(slices.Concat(listPages(t, f, f.srv, f.identity("billing"))...)) == 0 {
		t.Fatal("billing lists nothing under the open policy")
	}

	f.reconfigurePolicy(write(open+`nothing_visible if to_number(input.principal.sub) > 0`+"\n"), nil)
	start = len(f.records())
	if _, err := f.connect(id).ListResources(context.Background(), &mcp.ListResourcesParams{}); err == nil {
		t.Fatal("a list whose nothing_visible cannot be evaluated was answered")
	}
	recs = f.records()[start:]
	if len(recs) != 1 || recs[0].Outcome != audit.OutcomeError || !strings.HasPrefix(recs[0].Reason, server.ReasonPolicyError) || len(recs[0].URIs) != 0 {
		t.Fatalf("records: %+v", recs)
	}
}

// A completion for a caller to whom nothing is visible suggests nothing
// and scans nothing; the scanning reference suggests the same nothing
// after deciding candidates.
func TestNothingVisibleCompletesNothingUnscanned(t *testing.T) {
	f := newFixture(t, "")
	id := f.identity("auditor")
	for _, tc := range []struct {
		srv    *server.Server
		prefix string
	}{{f.srv, server.ReasonNothingVisible + " argument=patient returned=0 denied=0 scanned=0"}, {scanningServer(t, f, ""), "argument=patient returned=0 denied="}} {
		f.srv = tc.srv
		before := len(f.records())
		res := complete(t, f.connect(id), fhirTemplate, "patient", "", nil)
		recs := f.records()[before:]
		if len(res.Completion.Values) != 0 || res.Completion.HasMore || len(recs) != 1 || recs[0].Outcome != audit.OutcomeAllow ||
			!strings.HasPrefix(recs[0].Reason, tc.prefix) || (tc.prefix[0] == 'a' && strings.HasSuffix(recs[0].Reason, "denied=0 scanned=0")) {
			t.Fatalf("values %v more %v, records %+v; want reason %q…", res.Completion.Values, res.Completion.HasMore, recs, tc.prefix)
		}
	}
}
