package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/minimize/safeharbortest"
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
		ids = append(ids, u.ID)
		if u.Patient != "" { // none for tenant-level reference data
			ids = append(ids, u.Patient)
		}
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
	var u0 store.URI
	for _, r := range listed {
		if u0, _ = store.ParseURI(r.URI); u0.Patient != "" {
			break // an aliased patient, not tenant-level reference data
		}
	}
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

// corpusPatient is the catalog patient id of the realistic FHIR corpus
// (testdata/fhir-corpus) in fixtures built with fixtureOptions.corpus.
const corpusPatient = "3f2a9c1e-7b4d-4e8a-9f10-2c6d8e4b5a71"

// importCorpus imports the resources of the realistic corpus whose types
// the catalog serves into the catalog at catPath, as one patient's, with
// titles and descriptions written the way a source system might: with the
// patient's name, address, ZIP code, a full date and the patient id.
func importCorpus(t testing.TB, catPath string) {
	t.Helper()
	corpus, _ := safeharbortest.Corpus(t, 2026)
	dir := t.TempDir()
	var manifest bytes.Buffer
	for i, r := range corpus {
		typ := strings.ToLower(r.Type)
		if !slices.Contains([]string{"patient", "observation", "condition", "medicationrequest", "encounter", "coverage"}, typ) {
			continue
		}
		id := corpusPatient
		if typ != "patient" {
			id = fmt.Sprintf("3f2a9c1e-7b4d-4e8a-9f10-%012d", i)
		}
		if err := os.WriteFile(filepath.Join(dir, r.Name), r.Raw, 0o600); err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(store.ManifestEntry{
			URI:         fmt.Sprintf("fhir://general-hospital/patients/%s/%s/%s", corpusPatient, typ, id),
			Name:        typ + "-" + id[:8],
			Title:       r.Type + " of Evelyn Marsh, 14 Orchard Lane, Chestertown MD 21620",
			Description: "Recorded 2025-03-14 for patient " + corpusPatient + " (MRN-77441123, (410) 555-0134)",
			MIMEType:    store.MIMEFHIR,
			Labels:      store.Labels{Tenant: "general-hospital", Patient: corpusPatient, Type: typ},
			File:        r.Name,
		})
		manifest.Write(append(line, '\n'))
	}
	importManifest(t, catPath, dir, manifest.Bytes())
}

// importManifest writes manifest (JSON lines of store.ManifestEntry) into
// dir, beside the files it names, and imports dir into the catalog file at
// catPath.
func importManifest(t testing.TB, catPath, dir string, manifest []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "manifest.jsonl"), manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(catPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Import(context.Background(), dir, nil); err != nil {
		t.Fatal(err)
	}
}

// The research view of realistic FHIR, through the real server path (list,
// then read, over MCP): no list item (name, title, description, _meta) and
// no payload holds any of the 18 Safe Harbor classes of the corpus (the
// positive control: the catalog's own titles and descriptions hold them);
// references to the patient carry a research alias; the list is ordered by
// alias; a listed entity tag is never the tag of the real URI.
func TestResearchViewOfRealisticFHIR(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{corpus: true})
	_, s := safeharbortest.Corpus(t, 2026)
	s.Add(safeharbortest.ClassOtherUnique, corpusPatient)
	var catalogMeta []byte
	for _, r := range f.allURIs() {
		if strings.Contains(r.URI, corpusPatient) {
			s.Add(safeharbortest.ClassOtherUnique, strings.TrimPrefix(r.URI[strings.LastIndex(r.URI, "/"):], "/"))
			catalogMeta = append(catalogMeta, []byte(r.Title+" "+r.Description+"\n")...)
		}
	}
	if found := s.Scan(mustJSON(t, string(catalogMeta))); len(found) < 4 {
		t.Fatalf("positive control: the catalog's titles and descriptions show %d findings, want the classes planted there", len(found))
	}
	// A reference the research view shows is "Patient/<research alias>": a
	// version 8 UUID that is no catalog id.
	aliasRef := regexp.MustCompile(`^Patient/[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	s.PermitReferences(aliasRef.MatchString)

	cs := f.connect(f.identity("researcher"))
	real := f.realIDs()
	var listed []string
	corpusRead := 0
	for item, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, item.URI)
		realURI := f.realURI(real, item.URI)
		if !strings.Contains(realURI, corpusPatient) {
			continue
		}
		meta := *item
		meta.URI = ""
		for _, fd := range s.Scan(mustJSON(t, meta)) {
			t.Errorf("list item %s: class %s at %s", item.Name, fd.Class, fd.Where)
		}
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: item.URI})
		if err != nil {
			t.Fatalf("read %s: %v", item.Name, err)
		}
		for _, fd := range s.Scan([]byte(res.Contents[0].Text)) {
			t.Errorf("read %s: class %s at %s", item.Name, fd.Class, fd.Where)
		}
		if tag := res.Contents[0].Meta[server.ETagKey]; tag != item.Meta[server.ETagKey] || tag == nil {
			t.Errorf("%s: read tag %v, list tag %v", item.Name, tag, item.Meta[server.ETagKey])
		}
		if strings.Contains(res.Contents[0].Text, `"subject"`) && !strings.Contains(res.Contents[0].Text, `"subject":{"reference":"Patient/`) {
			t.Errorf("%s: the subject is not shown by alias: %s", item.Name, res.Contents[0].Text)
		}
		corpusRead++
	}
	t.Logf("%d corpus resources listed and read, %d listed in all", corpusRead, len(listed))
	if corpusRead < 7 {
		t.Fatalf("%d corpus resources listed and read by the researcher, want 7", corpusRead)
	}
	if !slices.IsSorted(listed) {
		t.Error("the research list is not ordered by alias")
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
