package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

// A research caller (purpose HRESCH) is never shown a catalog id — not in
// list URIs or names, not in read answers, not in completion values — so
// the de-identified view carries no code shared with the clinical record
// (Safe Harbor identifier class R). Aliases are stable across sessions,
// resolve on read, and the audit log keeps the real (pseudonymized) URI.
func TestResearchViewShowsNoCatalogID(t *testing.T) {
	f := newFixture(t, "")
	var ids []string
	for _, r := range f.allURIs() {
		u, _ := store.ParseURI(r.URI)
		ids = append(ids, u.Patient, u.ID)
	}
	leaks := func(where string, v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		for _, id := range ids {
			if strings.Contains(string(b), id) {
				t.Fatalf("%s shows the catalog id %s", where, id)
			}
		}
	}
	researcher := f.identity("researcher")
	if researcher.PurposeOfUse != server.ResearchPurpose {
		t.Fatalf("fixture researcher has purpose %s", researcher.PurposeOfUse)
	}
	cs := f.connect(researcher)
	var listed []*mcp.Resource
	for r, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, r)
	}
	if len(listed) == 0 {
		t.Fatal("the researcher lists nothing: the test would prove little")
	}
	leaks("the research list", listed)
	again := f.connect(researcher)
	page, err := again.ListResources(context.Background(), nil)
	if err != nil || page.Resources[0].URI != listed[0].URI {
		t.Fatalf("aliases differ between sessions: %v", err)
	}
	for _, r := range listed[:5] {
		before := len(f.records())
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: r.URI})
		if err != nil {
			t.Fatalf("read %s: %v", r.URI, err)
		}
		leaks("a research read", res)
		rec := f.records()[before]
		real := f.realURI(f.realIDs(), r.URI)
		if rec.Outcome != audit.OutcomeAllow || len(rec.URIs) != 1 || rec.URIs[0] != f.audited(real) {
			t.Fatalf("research read audited as %s %v, want the real URI %s pseudonymized", rec.Outcome, rec.URIs, f.audited(real))
		}
	}
	// Completion of patients and of a patient's ids: aliases only.
	pats, err := cs.Complete(context.Background(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: fhirTemplate},
		Argument: mcp.CompleteParamsArgument{Name: "patient"}})
	if err != nil || len(pats.Completion.Values) == 0 {
		t.Fatalf("patient completion: %v", err)
	}
	leaks("patient completion", pats)
	u0, _ := store.ParseURI(listed[0].URI)
	idsOf, err := cs.Complete(context.Background(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: fhirTemplate},
		Argument: mcp.CompleteParamsArgument{Name: "id"}, Context: &mcp.CompleteContext{Arguments: map[string]string{"tenant": u0.Tenant, "patient": u0.Patient}}})
	if err != nil || len(idsOf.Completion.Values) == 0 {
		t.Fatalf("id completion in the context of an aliased patient: %v %v", idsOf, err)
	}
	leaks("id completion", idsOf)
	// An alias that stands for nothing is not found; subscriptions are not
	// offered to the research view, and the refusal is on record.
	u0.ID = "00000000-0000-8000-8000-000000000000"
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: u0.String()}); rpcCode(err) != server.NotFoundCode(cs.InitializeResult().ProtocolVersion) {
		t.Fatalf("read of an unknown alias: %v", err)
	}
	legacy := f.connectRev(researcher, rev2025)
	before := len(f.records())
	if err := legacy.Subscribe(context.Background(), &mcp.SubscribeParams{URI: listed[0].URI}); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("research subscribe: %v", err)
	}
	if r := f.records()[before]; r.Action != server.ActionSubscribe || r.Outcome != audit.OutcomeDeny || r.Reason != "research_no_subscriptions" {
		t.Fatalf("research subscribe audited as %s/%s %q", r.Action, r.Outcome, r.Reason)
	}
}
