package server_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

// Channels through which a caller could learn of a resource it may not
// see, other than the answer to reading it (TestDeniedAndNotFoundLookAlike
// ButAuditKnows): each test here acts as a caller who may not see some
// resources and checks that what it is given says nothing of them.

// A list cursor is sealed, but its length is visible: it must not follow
// the length of the last URI examined, which is a hidden resource whenever
// a page ends on the scan budget (its scheme and FHIR type would show
// through the length). Every cursor has one length.
func TestCursorLengthSaysNothingOfTheLastURIExamined(t *testing.T) {
	f := newFixture(t, "")
	// A small scan budget (at least a page) ends many pages on an entry
	// the clinician may not see (another care team's patient, a sensitive
	// record).
	f.reconfigure(func(c *server.Config) { c.PageSize, c.ScanLimit = 4, 4 })
	cs := f.connect(f.identity("clinician"))
	lengths := map[int]int{}
	cursor, pages, seen := "", 0, 0
	for {
		res, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		seen += len(res.Resources)
		if res.NextCursor == "" {
			break
		}
		lengths[len(res.NextCursor)]++
		cursor = res.NextCursor
	}
	if pages < 20 || seen == 0 {
		t.Fatalf("%d pages, %d items: the listing should take many pages and show something", pages, seen)
	}
	if len(lengths) != 1 {
		ls := make([]int, 0, len(lengths))
		for l := range lengths {
			ls = append(ls, l)
		}
		slices.Sort(ls)
		t.Fatalf("cursor lengths vary with the position (%v over %d pages): they reveal the length of the last URI examined", ls, pages)
	}
}

// hiddenAndMissing returns a catalog URI persona may not read and a URI of
// the same family, patient and length that names nothing.
func hiddenAndMissing(t testing.TB, f *fixture, persona string) (hidden, missing string) {
	t.Helper()
	listed := listAll(t, f.connect(f.identity(persona)))
	for _, r := range f.allURIs() {
		u, _ := store.ParseURI(r.URI)
		if u.Scheme != "note" || slices.Contains(listed, r.URI) {
			continue // a note, so that its pages can be named too
		}
		u.ID = "00000000-0000-4000-8000-000000000000"
		return r.URI, u.String()
	}
	t.Fatalf("%s may read every note: the fixture should hide some", persona)
	return "", ""
}

// On the wire, over HTTP, in both protocol revisions: reading a resource
// the caller may not see and one that does not exist (whole or one page)
// answer the same status, the same headers and the same bytes but for the
// URI named; the audit log alone tells them apart.
func TestDeniedAndMissingAreAlikeOnTheWire(t *testing.T) {
	f := newFixture(t, "")
	hidden, missing := hiddenAndMissing(t, f, "clinician")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	sid := rawSession(t, hs.url, tok)
	revs := map[string]struct {
		hdr  map[string]string
		body func(uri string) string
	}{
		rev2026: {map[string]string{"Mcp-Protocol-Version": rev2026}, func(uri string) string {
			return `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"` + uri + `",` + meta2026("}}")
		}},
		rev2025: {map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid}, func(uri string) string {
			return `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"` + uri + `"}}`
		}},
	}
	for rev, c := range revs {
		for _, suffix := range []string{"", "/pages/1"} {
			answer := func(uri string) (int, http.Header, string) {
				h := maps.Clone(c.hdr)
				if rev == rev2026 {
					h["Mcp-Method"], h["Mcp-Name"] = "resources/read", uri
				}
				st, hdr, raw := postHeaders(t, hs.url, tok, h, c.body(uri))
				hdr.Del("Date")
				return st, hdr, string(raw)
			}
			before := len(f.records())
			stD, hdrD, bodyD := answer(hidden + suffix)
			stM, hdrM, bodyM := answer(missing + suffix)
			if stD != stM || !reflect.DeepEqual(hdrD, hdrM) || strings.ReplaceAll(bodyD, hidden, missing) != bodyM {
				t.Errorf("%s read%s: denied %d %v %s\nmissing %d %v %s", rev, suffix, stD, hdrD, bodyD, stM, hdrM, bodyM)
			}
			if want := fmt.Sprintf(`"code":%d`, server.NotFoundCode(rev)); !strings.Contains(bodyM, want) || !strings.Contains(bodyM, `"data":{"uri":"`+missing+suffix+`"}`) {
				t.Errorf("%s read%s: %s, want %s with data.uri", rev, suffix, bodyM, want)
			}
			recs := f.records()[before:]
			if len(recs) != 2 || recs[0].Outcome != audit.OutcomeDeny || strings.HasPrefix(recs[0].Reason, server.ReasonNotFound) ||
				recs[0].URIs[0] != f.audited(hidden) || recs[1].Outcome != audit.OutcomeDeny ||
				!strings.HasPrefix(recs[1].Reason, server.ReasonNotFound) || recs[1].URIs[0] != f.audited(missing) {
				t.Errorf("%s read%s audited as %+v", rev, suffix, recs)
			}
		}
	}
}

// postHeaders is post returning the raw body.
func postHeaders(t *testing.T, url, tok string, hdr map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	return postWith(t, http.DefaultClient, url, tok, hdr, body)
}

// postWith is postHeaders through client.
func postWith(t *testing.T, client *http.Client, url, tok string, hdr map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

// A research caller that names a catalog URI it holds from elsewhere reads
// it (docs/uris.md, "Research aliases"), but nothing of the answer may link
// it to the alias the research view shows for it: the entity tag is keyed
// by the URI named. An alias of a resource the caller may not read answers
// like an alias of nothing.
func TestResearchRealURIIsNotLinkedToItsAlias(t *testing.T) {
	f := newFixture(t, "")
	researcher := f.identity("researcher")
	cs := f.connect(researcher)
	page, err := cs.ListResources(context.Background(), nil)
	if err != nil || len(page.Resources) == 0 {
		t.Fatalf("research list: %v", err)
	}
	alias := page.Resources[0]
	real := f.realURI(f.realIDs(), alias.URI)
	tag := func(uri string) string {
		t.Helper()
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		s, _ := res.Contents[0].Meta[server.ETagKey].(string)
		return s
	}
	byAlias, byReal := tag(alias.URI), tag(real)
	if byAlias == "" || byAlias != alias.Meta[server.ETagKey] {
		t.Fatalf("alias read tag %q, listed %v: want the listed tag", byAlias, alias.Meta[server.ETagKey])
	}
	if byReal == byAlias {
		t.Fatalf("reading the real URI gives the alias's entity tag %s: the tag links the real URI to its alias", byReal)
	}
	if rec := f.records(); rec[len(rec)-1].Outcome != audit.OutcomeAllow || rec[len(rec)-1].URIs[0] != f.audited(real) {
		t.Fatalf("research read of the real URI audited as %+v", rec[len(rec)-1].Entry)
	}

	// An alias of a resource the researcher may not read, and an alias of
	// nothing (same length): the same answer; the record names the real
	// URI decided, or the alias that resolved to nothing.
	k, err := f.keys.AuditKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	listed := listAll(t, cs)
	var hiddenAlias, hiddenReal string
	for _, r := range f.allURIs() {
		u, _ := store.ParseURI(r.URI)
		if u.Patient == "" {
			continue
		}
		u.Patient, u.ID = server.ResearchAlias(k.Bytes, u.Tenant, u.Patient), server.ResearchAlias(k.Bytes, u.Tenant, u.ID)
		if !slices.Contains(listed, u.String()) {
			hiddenAlias, hiddenReal = u.String(), r.URI
			break
		}
	}
	if hiddenAlias == "" {
		t.Fatal("the researcher may read everything: the fixture should hide something")
	}
	u, _ := store.ParseURI(hiddenAlias)
	u.ID = server.ResearchAlias(k.Bytes, u.Tenant, "no-such-id")
	nothing := u.String()
	before := len(f.records())
	_, errH := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: hiddenAlias})
	_, errN := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: nothing})
	if errH == nil || errN == nil || strings.ReplaceAll(errH.Error(), hiddenAlias, nothing) != errN.Error() {
		t.Fatalf("hidden alias %v vs alias of nothing %v: want the same not-found answer", errH, errN)
	}
	recs := f.records()[before:]
	if recs[0].Outcome != audit.OutcomeDeny || recs[0].Reason == server.ReasonNotFound || recs[0].URIs[0] != f.audited(hiddenReal) ||
		recs[1].Outcome != audit.OutcomeDeny || recs[1].Reason != server.ReasonNotFound {
		t.Fatalf("hidden alias and alias of nothing audited as %+v / %+v", recs[0].Entry, recs[1].Entry)
	}
}

// The payload of a research read of a catalog URI held from elsewhere does
// not link it to its alias either: deidentify rewrites the reference to
// the resource's own patient to Patient/<alias>, the very alias the
// research view shows that patient's resources under, so with the real
// URI (which names the real patient) it would tie the real patient to the
// alias. Read by the real URI, the reference is dropped; read by the
// alias, it is kept. Over both catalogs: with an index (store.Live) and
// without, as aliases are resolved differently.
func TestResearchRealURIPayloadDoesNotNameTheAlias(t *testing.T) {
	t.Run("store", func(t *testing.T) { researchRealURIPayload(t, newFixture(t, "")) })
	t.Run("live", func(t *testing.T) { researchRealURIPayload(t, newLiveFixture(t).fixture) })
}

func researchRealURIPayload(t *testing.T, f *fixture) {
	cs := f.connect(f.identity("researcher"))
	real := f.realIDs()
	read := func(uri string) string {
		t.Helper()
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		return res.Contents[0].Text
	}
	n := 0
	for _, a := range listAll(t, cs) {
		u, _ := store.ParseURI(a)
		if u.Scheme != store.SchemeFHIR || u.Patient == "" || u.Type == store.TypePatient {
			continue
		}
		ref := `"Patient/` + u.Patient + `"`
		if !strings.Contains(read(a), ref) {
			continue // no reference to its patient to alias
		}
		n++
		if r := f.realURI(real, a); strings.Contains(read(r), u.Patient) {
			t.Fatalf("research read of %s names the patient alias %s of %s", r, u.Patient, a)
		}
	}
	if n == 0 {
		t.Fatal("no research read names its patient's alias: the test checks nothing")
	}
}
