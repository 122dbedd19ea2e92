package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

func listAll(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	var uris []string
	for r, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	return uris
}

func rpcCode(err error) int64 {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// The central property: list shows exactly what read would allow, for every
// persona, over the whole synthetic catalog.
func TestListShowsExactlyWhatReadAllows(t *testing.T) {
	f := newFixture(t, "")
	all := f.allURIs()
	for _, persona := range []string{"clinician", "clinician-hiv", "billing", "researcher", "auditor", "outsider"} {
		t.Run(persona, func(t *testing.T) {
			cs := f.connect(f.identity(persona))
			listed := listAll(t, cs)
			if persona == "researcher" {
				// The research view shows aliases (research.go): each one
				// reads, the answer names the alias, and no catalog id is
				// shown; compared below by the catalog URI it stands for.
				// The list is in the order of the aliases, not of the
				// catalog URIs they stand for (no ordering shared with the
				// real ids).
				if !slices.IsSorted(listed) {
					t.Errorf("research list is not in alias order")
				}
				real := f.realIDs()
				for i, alias := range listed {
					res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: alias})
					if err != nil || res.Contents[0].URI != alias {
						t.Fatalf("read of listed alias %s: %v", alias, err)
					}
					listed[i] = f.realURI(real, alias)
					if listed[i] == alias {
						t.Fatalf("researcher shown a catalog URI: %s", alias)
					}
				}
			}
			if persona == "researcher" {
				slices.Sort(listed)
			}
			if !slices.IsSorted(listed) {
				t.Errorf("list is not in URI order")
			}
			var readable []string
			for _, r := range all {
				res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: r.URI})
				switch {
				case err == nil:
					if len(res.Contents) != 1 || res.Contents[0].MIMEType == "" {
						t.Fatalf("read %s: want one content with a mimeType, got %+v", r.URI, res.Contents)
					}
					readable = append(readable, r.URI)
				case rpcCode(err) == server.NotFoundCode(cs.InitializeResult().ProtocolVersion):
				default:
					t.Fatalf("read %s: unexpected error %v", r.URI, err)
				}
			}
			if !slices.Equal(listed, readable) {
				t.Fatalf("list and read disagree: listed %d, readable %d\nlisted:   %v\nreadable: %v", len(listed), len(readable), listed, readable)
			}
			switch persona {
			case "auditor", "outsider":
				if len(listed) != 0 {
					t.Fatalf("%s sees %d resources, want 0", persona, len(listed))
				}
			default:
				if len(listed) == 0 {
					t.Fatalf("%s sees nothing; the fixture should give it access", persona)
				}
			}
		})
	}
}

func TestDeniedAndNotFoundLookAlikeButAuditKnows(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connect(f.identity("outsider"))
	existing := f.allURIs()[0].URI
	u, _ := store.ParseURI(existing)
	u.ID = "00000000-0000-4000-8000-000000000000"
	missing := u.String()

	_, errDenied := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: existing})
	_, errMissing := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: missing})
	var d, m *jsonrpc.Error
	if !errors.As(errDenied, &d) || !errors.As(errMissing, &m) {
		t.Fatalf("want JSON-RPC errors, got %v / %v", errDenied, errMissing)
	}
	if want := server.NotFoundCode(cs.InitializeResult().ProtocolVersion); d.Code != want || d.Code != m.Code || d.Message != m.Message || string(d.Data) != `{"uri":"`+existing+`"}` {
		t.Fatalf("denied %d %q vs not found %d %q: must be identical %d with data.uri", d.Code, d.Message, m.Code, m.Message, want)
	}
	recs := f.records()
	last2 := recs[len(recs)-2:]
	if last2[0].Outcome != audit.OutcomeDeny || last2[0].Reason == "not_found" || last2[0].URIs[0] != f.audited(existing) {
		t.Errorf("denied read audited as %+v", last2[0].Entry)
	}
	if last2[1].Outcome != audit.OutcomeDeny || last2[1].Reason != "not_found" || last2[1].URIs[0] != f.audited(missing) {
		t.Errorf("missing read audited as %+v", last2[1].Entry)
	}
}

func TestEveryRequestIsAuditedExactlyOnce(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connect(f.identity("clinician"))
	before := len(f.records())
	if _, err := cs.ListResourceTemplates(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: res.Resources[0].URI}); err != nil {
		t.Fatal(err)
	}
	recs := f.records()[before:]
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action+":"+r.Outcome)
	}
	want := []string{"resources/templates/list:allow", "resources/list:allow", "resources/read:allow"}
	if !slices.Equal(actions, want) {
		t.Fatalf("audit records %v, want %v", actions, want)
	}
	lr := recs[1]
	if len(lr.URIs) != len(res.Resources) || len(lr.Patients) == 0 {
		t.Errorf("list record has %d uris and %d patients for %d listed resources", len(lr.URIs), len(lr.Patients), len(res.Resources))
	}
	rr := recs[2]
	if rr.DecisionID == "" || rr.PolicyRevision == "" || !rr.Dev || rr.Principal.Sub == "" || rr.PurposeOfUse != "TREAT" || len(rr.Digests) != 1 {
		t.Errorf("read record is missing fields: %+v", rr.Entry)
	}
}

func TestBadURIsAreRefusedWithoutEchoingSecrets(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connect(f.identity("clinician"))
	good := f.patientURI()
	const canary = "CANARY-s3cr3t-7d1f"
	bad := []string{
		"",
		strings.Replace(good, "://", "://admin:"+canary+"@", 1),
		good + "?access_token=" + canary,
		good + "#" + canary,
		strings.ToUpper(good[:4]) + good[4:],
		good + "/",
		strings.Replace(good, "/patients/", "/patients/../", 1),
		good + strings.Repeat("a", 300),
		"file:///etc/passwd",
	}
	before := len(f.records())
	for _, uri := range bad {
		_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if rpcCode(err) != jsonrpc.CodeInvalidParams {
			t.Errorf("read %q: want -32602, got %v", uri, err)
		}
		if err != nil && strings.Contains(err.Error(), canary) {
			t.Errorf("error echoes the secret: %v", err)
		}
	}
	recs := f.records()[before:]
	if len(recs) != len(bad) {
		t.Fatalf("%d audit records for %d bad reads", len(recs), len(bad))
	}
	for _, r := range recs {
		if r.Outcome != audit.OutcomeDeny || r.Reason != "bad_uri" {
			t.Errorf("bad uri audited as %s/%s", r.Outcome, r.Reason)
		}
		if strings.Contains(string(audit.Encode(r)), canary) {
			t.Errorf("audit record holds the secret")
		}
	}
}

func TestCursorsAreSealedAndBoundToTheCaller(t *testing.T) {
	f := newFixture(t, "")
	clin := f.connect(f.identity("clinician"))
	res, err := clin.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.NextCursor == "" {
		t.Fatal("expected a second page")
	}
	if strings.Contains(res.NextCursor, "fhir") || strings.Contains(res.NextCursor, res.Resources[len(res.Resources)-1].URI) {
		t.Fatal("cursor reveals the catalog position")
	}
	// The same cursor works for its owner ...
	if _, err := clin.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: res.NextCursor}); err != nil {
		t.Fatalf("owner's cursor refused: %v", err)
	}
	// ... and for nobody else, nor when altered.
	other := f.connect(f.identity("clinician-hiv"))
	tampered := res.NextCursor[:len(res.NextCursor)-2] + "AA"
	for name, c := range map[string]struct {
		cs     *mcp.ClientSession
		cursor string
	}{
		"foreign":  {other, res.NextCursor},
		"tampered": {clin, tampered},
		"garbage":  {clin, "not-a-cursor"},
		"sdk-gob":  {clin, "Iv+BAwEBCXBhZ2VUb2tlbgH/ggABAQEHTGFzdFVSSQEMAAAA"},
	} {
		_, err := c.cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: c.cursor})
		if rpcCode(err) != jsonrpc.CodeInvalidParams {
			t.Errorf("%s cursor: want -32602, got %v", name, err)
		}
	}
	last := f.records()
	if r := last[len(last)-1]; r.Reason != "bad_cursor" || r.Outcome != audit.OutcomeDeny {
		t.Errorf("bad cursor audited as %s/%s", r.Outcome, r.Reason)
	}
}

func TestAuditFailureReleasesNothing(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connect(f.identity("clinician"))
	listed := listAll(t, cs)
	f.log.Close() // every append now fails
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: listed[0]})
	if err == nil || res != nil {
		t.Fatalf("read with a closed audit log returned %v, %v", res, err)
	}
	if !strings.Contains(err.Error(), "nothing released") {
		t.Errorf("error does not say nothing was released: %v", err)
	}
	if _, err := cs.ListResources(context.Background(), nil); err == nil {
		t.Fatal("list with a closed audit log succeeded")
	}
}

func TestPolicyThatCannotDecideFailsClosed(t *testing.T) {
	dir := t.TempDir()
	// A runtime error under strict builtin errors: the policy cannot decide.
	pol := "package custos.authz\n\ndecision := {\"allow\": to_number(\"not a number\") > 0, \"reasons\": [], \"obligations\": []}\n"
	if err := os.WriteFile(filepath.Join(dir, "broken.rego"), []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, dir)
	cs := f.connect(f.identity("clinician"))
	uri := f.allURIs()[0].URI
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err == nil || res != nil {
		t.Fatalf("read under a broken policy returned %v, %v", res, err)
	}
	// A missing URI fails exactly the same way: a broken policy is no
	// existence oracle.
	u, _ := store.ParseURI(uri)
	u.ID = "00000000-0000-4000-8000-000000000000"
	_, errMissing := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: u.String()})
	a, b := rpcError(err), rpcError(errMissing)
	if a == nil || b == nil || a.Code != b.Code || a.Message != b.Message || a.Code != jsonrpc.CodeInternalError {
		t.Fatalf("existing %v vs missing %v under a broken policy: want the same -32603", err, errMissing)
	}
	// A list whose items cannot be decided is refused, not returned short.
	res2, lerr := cs.ListResources(context.Background(), nil)
	if lerr == nil || res2 != nil {
		t.Fatalf("list under a broken policy returned %v, %v", res2, lerr)
	}
	recs := f.records()
	var outcomes []string
	for _, r := range recs {
		outcomes = append(outcomes, r.Action+":"+r.Outcome)
		if r.Outcome == audit.OutcomeError && (len(r.URIs) > 1 || len(r.Digests) > 1) {
			t.Errorf("refused request %d records %d uris", r.Seq, len(r.URIs))
		}
	}
	want := []string{"resources/read:error", "resources/read:error", "resources/list:error"}
	if !slices.Equal(outcomes, want) {
		t.Fatalf("audit outcomes %v, want %v", outcomes, want)
	}
}

func rpcError(err error) *jsonrpc.Error {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

func TestResearcherGetsDeidentifiedPayload(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connect(f.identity("researcher"))
	var patientURI, rawPatient string
	for _, r := range f.allURIs() {
		if r.Labels.Type == "patient" && len(r.Labels.Consent) == 0 && len(r.Labels.Sensitivity) == 0 {
			patientURI = r.URI
			b, err := f.catalog.Blob(context.Background(), r.Digest)
			if err != nil {
				t.Fatal(err)
			}
			rawPatient = string(b)
			break
		}
	}
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: patientURI})
	if err != nil {
		t.Fatal(err)
	}
	var raw, got map[string]any
	json.Unmarshal([]byte(rawPatient), &raw)
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &got); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"name", "telecom", "identifier"} {
		if _, ok := raw[field]; !ok {
			t.Fatalf("fixture patient has no %s", field)
		}
		if _, ok := got[field]; ok {
			t.Errorf("de-identified patient still has %s", field)
		}
	}
	if bd, _ := got["birthDate"].(string); len(bd) != 4 && bd != "90+" {
		t.Errorf("birthDate not generalized: %q", bd)
	}
	if _, ok := res.Contents[0].Meta["etag"]; ok {
		t.Error("a minimized read must not carry the raw content digest")
	}
	rec := f.records()
	if last := rec[len(rec)-1]; len(last.Obligations) == 0 {
		t.Error("audit record does not name the obligations applied")
	}
}

// Concurrent requests from several sessions are group-committed, and each
// still gets exactly one record (run under -race by make test).
func TestConcurrentRequestsAreEachAudited(t *testing.T) {
	f := newFixture(t, "")
	id := f.identity("clinician")
	uris := listAll(t, f.connect(id))
	before := len(f.records())
	const sessions, reads = 8, 12
	var wg sync.WaitGroup
	errs := make(chan error, sessions*reads)
	for s := range sessions {
		cs := f.connect(id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range reads {
				if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uris[(s*reads+i)%len(uris)]}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	recs := f.records()[before:]
	if len(recs) != sessions*reads {
		t.Fatalf("%d records for %d reads", len(recs), sessions*reads)
	}
	seen := map[string]bool{}
	for i, r := range recs {
		if r.Action != server.ActionRead || r.Outcome != audit.OutcomeAllow {
			t.Errorf("record %d: %s/%s", r.Seq, r.Action, r.Outcome)
		}
		if seen[r.EventID] || (i > 0 && r.Seq != recs[i-1].Seq+1) {
			t.Errorf("record %d: duplicate event or gap", r.Seq)
		}
		seen[r.EventID] = true
	}
}

// Every resource a researcher can read, and every list item it sees, is
// free of the patients' direct identifiers and of any date more precise
// than a year.
func TestResearcherViewsCarryNoIdentifiersOrFullDates(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connect(f.identity("researcher"))
	identifiers, err := synth.Identifiers(f.seedDir)
	if err != nil {
		t.Fatal(err)
	}
	fullDate := regexp.MustCompile(`(19|20)\d\d-(0[1-9]|1[0-2])`)
	uuids := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	check := func(what, s string) {
		t.Helper()
		s = uuids.ReplaceAllString(s, "") // opaque ids, not dates
		if m := fullDate.FindString(s); m != "" {
			t.Errorf("%s has a date more precise than a year (%s…)", what, m)
		}
		for _, id := range identifiers {
			if strings.Contains(s, id) {
				t.Errorf("%s holds a patient identifier", what)
			}
		}
	}
	read := 0
	for r, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := json.Marshal(r)
		check("list item "+r.URI, strings.ReplaceAll(string(meta), r.URI, ""))
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: r.URI})
		if err != nil {
			t.Fatalf("read %s: %v", r.URI, err)
		}
		check("read "+r.URI, res.Contents[0].Text)
		read++
	}
	if read < 20 || len(identifiers) < 50 {
		t.Fatalf("only %d resources read and %d identifiers collected: the test would prove little", read, len(identifiers))
	}
}

// Whether a page carries a cursor depends only on what the caller sees
// (a full page always does), never on hidden entries after it.
func TestCursorPresenceDependsOnlyOnVisibleItems(t *testing.T) {
	f := newFixture(t, "") // PageSize 10
	for _, persona := range []string{"clinician", "billing", "researcher"} {
		cs := f.connect(f.identity(persona))
		cursor, pages := "", 0
		for {
			res, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			full := len(res.Resources) == 10
			if full != (res.NextCursor != "") {
				t.Fatalf("%s page %d: %d items, cursor %v", persona, pages, len(res.Resources), res.NextCursor != "")
			}
			if res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
		}
	}
}

// realIDs maps every research alias of the fixture's catalog ids (under the
// current audit key) back to the id; other strings map to themselves.
func (f *fixture) realIDs() func(string) string {
	f.t.Helper()
	k, err := f.keys.AuditKey(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	m := map[string]string{}
	for _, r := range f.allURIs() {
		u, _ := store.ParseURI(r.URI)
		m[server.ResearchAlias(k.Bytes, u.Tenant, u.Patient)] = u.Patient
		m[server.ResearchAlias(k.Bytes, u.Tenant, u.ID)] = u.ID
	}
	return func(s string) string {
		if r, ok := m[s]; ok {
			return r
		}
		return s
	}
}

// realURI is uri with research aliases replaced by the catalog's ids.
func (f *fixture) realURI(real func(string) string, uri string) string {
	u, err := store.ParseURI(uri)
	if err != nil {
		return uri
	}
	u.Patient, u.ID = real(u.Patient), real(u.ID)
	return u.String()
}
