package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

const (
	rev2025 = "2025-11-25"
	rev2026 = "2026-07-28"
)

// httpServer serves f.srv's HTTPHandler with one bearer token per persona.
type httpServer struct {
	url    string
	tokens map[string]string
}

func (f *fixture) serveHTTP(personas ...string) *httpServer {
	f.t.Helper()
	h, hs := f.httpHandler(personas...)
	ts := httptest.NewServer(h)
	f.t.Cleanup(ts.Close)
	hs.url = ts.URL + server.MCPPath
	return hs
}

// httpHandler is f.srv's HTTP handler with a dev token for each persona
// (in hs.tokens; hs.url is left empty), for tests that call it directly.
func (f *fixture) httpHandler(personas ...string) (http.Handler, *httpServer) {
	f.t.Helper()
	hs := &httpServer{tokens: map[string]string{}}
	var tf server.TokenFile
	for i, p := range personas {
		raw, err := os.ReadFile(filepath.Join(f.seedDir, "principals", p+".json"))
		if err != nil {
			f.t.Fatal(err)
		}
		tok := fmt.Sprintf("test-token-%02d-%s", i, strings.Repeat("x", 40))
		hs.tokens[p] = tok
		tf.Tokens = append(tf.Tokens, server.TokenEntry{TokenSHA256: server.HashToken(tok), Principal: raw})
	}
	data, _ := json.Marshal(tf)
	toks, err := server.ParseTokenFile(data)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.srv.HTTPHandler(toks), hs
}

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens a go-sdk client session over HTTP as persona, asking for
// protocol revision rev.
func (hs *httpServer) connect(t *testing.T, persona, rev string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: hs.url, HTTPClient: &http.Client{Transport: bearer{hs.tokens[persona]}}, DisableStandaloneSSE: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("connect %s: %v", rev, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Both revisions on the one endpoint: 2025-11-25 gets a session (and its
// records name it), 2026-07-28 none; both are identified, decided and
// audited alike.
func TestHTTPServesBothProtocolRevisions(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	for _, rev := range []string{rev2025, rev2026} {
		t.Run(rev, func(t *testing.T) {
			cs := hs.connect(t, "clinician", rev)
			if got := cs.InitializeResult().ProtocolVersion; got != rev {
				t.Fatalf("negotiated %s, want %s", got, rev)
			}
			if (cs.ID() != "") != (rev == rev2025) {
				t.Fatalf("session id %q for %s", cs.ID(), rev)
			}
			if cs.InitializeResult().Capabilities.Completions == nil {
				t.Error("completions capability not advertised")
			}
			before := len(f.records())
			res, err := cs.ListResources(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: res.Resources[0].URI}); err != nil {
				t.Fatal(err)
			}
			recs := f.records()[before:]
			if len(recs) != 2 || recs[0].Action != server.ActionList || recs[1].Action != server.ActionRead {
				t.Fatalf("records %+v", recs)
			}
			for _, r := range recs {
				if r.Outcome != audit.OutcomeAllow || r.Principal.Sub == "" || !strings.HasPrefix(r.Source, "127.0.0.1:") || r.Session != cs.ID() {
					t.Errorf("%s record: outcome %s sub %q source %q session %q (client session %q)", rev, r.Outcome, r.Principal.Sub, r.Source, r.Session, cs.ID())
				}
			}
		})
	}
}

// post sends one raw JSON-RPC message and returns the status, the
// response headers and the JSON-RPC response (from JSON or SSE).
func post(t *testing.T, url, tok string, hdr map[string]string, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if req.Header.Get("Mcp-Protocol-Version") >= rev2026 {
		// The standard headers of the revision: Mcp-Method, and Mcp-Name
		// (the URI) for resources/read, unless hdr gives them.
		var m struct {
			Method string
			Params struct{ URI string }
		}
		json.Unmarshal([]byte(body), &m)
		if hdr["Mcp-Method"] == "" {
			req.Header.Set("Mcp-Method", m.Method)
		}
		if m.Method == "resources/read" && hdr["Mcp-Name"] == "" {
			req.Header.Set("Mcp-Name", m.Params.URI)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var msg map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(d), &m) == nil && m["id"] != nil {
					msg = m
				}
			}
		}
	} else {
		json.Unmarshal(b, &msg)
	}
	return resp.StatusCode, resp.Header, msg
}

func meta2026(extra string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}` + extra
}

// The routing, request by request, on raw HTTP.
func TestHTTPRoutesByProtocolRevision(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	h26 := map[string]string{"Mcp-Protocol-Version": rev2026}

	// 2026-07-28 with the header: stateless, no session.
	st, hdr, msg := post(t, hs.url, tok, h26, `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{`+meta2026("")+`}}`)
	if st != 200 || msg["result"] == nil || hdr.Get("Mcp-Session-Id") != "" {
		t.Fatalf("2026-07-28 list: %d %v session %q", st, msg, hdr.Get("Mcp-Session-Id"))
	}
	// One request, one JSON response (no SSE framing); the result says it
	// is complete.
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("2026-07-28 list answered as %q, want application/json", ct)
	}
	if res, _ := msg["result"].(map[string]any); res["resultType"] != "complete" {
		t.Fatalf("2026-07-28 list result without resultType complete: %v", msg)
	}
	// server/discover without the header is still routed to the stateless
	// handler, which insists on the header (a stateful one would not know
	// the method at all).
	_, _, msg = post(t, hs.url, tok, nil, `{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{`+meta2026("")+`}}`)
	if e, _ := msg["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "Mcp-Protocol-Version header is required") {
		t.Fatalf("discover without header: %v", msg)
	}
	_, _, msg = post(t, hs.url, tok, h26, `{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{`+meta2026("")+`}}`)
	res, _ := msg["result"].(map[string]any)
	if res == nil || !slices.Contains(toStrings(res["supportedVersions"]), rev2026) {
		t.Fatalf("discover: %v", msg)
	}
	// initialize without a header: the stateful handler, a session.
	st, hdr, msg = post(t, hs.url, tok, nil, `{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	res, _ = msg["result"].(map[string]any)
	if st != 200 || hdr.Get("Mcp-Session-Id") == "" || res == nil || res["protocolVersion"] != rev2025 {
		t.Fatalf("initialize: %d %v session %q", st, msg, hdr.Get("Mcp-Session-Id"))
	}

	// Identity, Origin and the rejection audit apply to the stateless path.
	before := len(f.records())
	if st, _, _ := post(t, hs.url, "", h26, `{"jsonrpc":"2.0","id":5,"method":"resources/list","params":{`+meta2026("")+`}}`); st != http.StatusUnauthorized {
		t.Fatalf("no token: %d", st)
	}
	if st, _, _ := post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2026, "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, `{"jsonrpc":"2.0","id":6,"method":"resources/list","params":{`+meta2026("")+`}}`); st != http.StatusForbidden {
		t.Fatalf("cross-origin: %d", st)
	}
	var reasons []string
	for _, r := range f.records()[before:] {
		reasons = append(reasons, r.Action+":"+r.Reason)
	}
	if want := []string{"auth/reject:http_401,no_token", "auth/reject:http_403,cross_origin" + tenantSuffix(f, "clinician")}; !slices.Equal(reasons, want) {
		t.Fatalf("rejections audited as %v, want %v", reasons, want)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// Rate limiting covers the stateless path too (one bucket per principal,
// whatever the revision).
func TestRateLimitAppliesToBothRevisions(t *testing.T) {
	f := newFixture(t, "")
	f.reconfigure(func(c *server.Config) { c.RateLimit = server.RateLimit{PerSecond: 0.001, Burst: 1} })
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	h26 := map[string]string{"Mcp-Protocol-Version": rev2026}
	body := `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{` + meta2026("") + `}}`
	if st, _, _ := post(t, hs.url, tok, h26, body); st != 200 {
		t.Fatalf("first request: %d", st)
	}
	if st, _, _ := post(t, hs.url, tok, h26, body); st != http.StatusTooManyRequests {
		t.Fatalf("second request: %d, want 429", st)
	}
	// The bucket is the principal's, shared with the stateful path.
	if st, _, _ := post(t, hs.url, tok, nil, `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`); st != http.StatusTooManyRequests {
		t.Fatalf("2025-11-25 request after the bucket ran dry: %d, want 429", st)
	}
}

// The cache hints on the wire, per revision: cacheScope "private" always;
// ttlMs as configured for 2026-07-28 and 0 for 2025-11-25 (the SDK sends
// both fields to every revision; it strips nothing).
func TestCacheHintsOnTheWirePerRevision(t *testing.T) {
	f := newFixture(t, "")
	f.reconfigure(func(c *server.Config) {
		c.Resources.CacheTTL = &server.CacheTTL{List: 5 * time.Second, Read: 7 * time.Second, Templates: 9 * time.Second}
	})
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	uri := listAll(t, f.connect(f.identity("clinician")))[0]

	calls := map[string]string{
		"resources/list":           `{}`,
		"resources/read":           `{"uri":"` + uri + `"}`,
		"resources/templates/list": `{}`,
	}
	want26 := map[string]float64{"resources/list": 5000, "resources/read": 7000, "resources/templates/list": 9000}

	// 2026-07-28: per-request _meta and header, no session.
	for method, params := range calls {
		p := strings.TrimSuffix(params, "}")
		if p != "{" {
			p += ","
		}
		st, _, msg := post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2026},
			`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+p+meta2026("}}"))
		if st != 200 {
			t.Errorf("2026-07-28 %s: status %d", method, st)
		}
		res, _ := msg["result"].(map[string]any)
		if rt := res["resultType"]; method != "resources/read" && rt != "complete" {
			t.Errorf("2026-07-28 %s: resultType %v, want complete", method, rt)
		}
		if res == nil || res["cacheScope"] != "private" || res["ttlMs"] != want26[method] {
			t.Errorf("2026-07-28 %s: cacheScope %v ttlMs %v, want private %v (%v)", method, res["cacheScope"], res["ttlMs"], want26[method], msg)
		}
	}

	// 2025-11-25: initialize, initialized, then the calls in the session.
	_, hdr, _ := post(t, hs.url, tok, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sess := map[string]string{"Mcp-Session-Id": hdr.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": rev2025}
	post(t, hs.url, tok, sess, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for method, params := range calls {
		_, _, msg := post(t, hs.url, tok, sess, `{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":`+params+`}`)
		res, _ := msg["result"].(map[string]any)
		if rt, ok := res["resultType"]; ok {
			t.Errorf("2025-11-25 %s: resultType %v", method, rt)
		}
		ttl, present := res["ttlMs"]
		if res == nil || res["cacheScope"] != "private" || !present || ttl != float64(0) {
			t.Errorf("2025-11-25 %s: cacheScope %v ttlMs %v (present %v), want private 0 (%v)", method, res["cacheScope"], ttl, present, msg)
		}
	}
}

// The defaults: nothing that carries PHI may be cached (ttlMs 0), the
// templates (no PHI) for a minute.
func TestDefaultCacheHints(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connectRev(f.identity("clinician"), rev2026)
	lr, err := cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: lr.Resources[0].URI})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.ListResourceTemplates(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if lr.Cacheable != (mcp.Cacheable{CacheScope: "private"}) || rr.Cacheable != (mcp.Cacheable{CacheScope: "private"}) ||
		tr.Cacheable != (mcp.Cacheable{TTLMs: int(server.DefaultTemplatesTTL / time.Millisecond), CacheScope: "private"}) {
		t.Fatalf("cache hints list %+v read %+v templates %+v", lr.Cacheable, rr.Cacheable, tr.Cacheable)
	}
	if server.DefaultListTTL != 0 || server.DefaultReadTTL != 0 {
		t.Fatal("PHI results must not be cacheable by default")
	}
}

// Templates come in pages of TemplatesPageSize, each page decided and
// audited; cursors are sealed, bound to the caller and to the templates
// listing.
func TestTemplatesArePaginated(t *testing.T) {
	f := newFixture(t, "")
	f.reconfigure(func(c *server.Config) { c.Resources.TemplatesPageSize = 2 })
	want := append(store.Templates(), store.PageTemplates()...)
	if len(want) < 5 {
		t.Fatalf("only %d templates: paging by 2 would prove little", len(want))
	}
	for _, rev := range []string{rev2025, rev2026} {
		cs := f.connectRev(f.identity("clinician"), rev)
		before := len(f.records())
		var got []string
		cursor, pages, last := "", 0, ""
		for {
			res, err := cs.ListResourceTemplates(context.Background(), &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(res.ResourceTemplates) > 2 || res.Meta[server.ReceiptKey] == nil {
				t.Fatalf("page %d: %d templates, receipt %v", pages, len(res.ResourceTemplates), res.Meta[server.ReceiptKey])
			}
			for _, tp := range res.ResourceTemplates {
				got = append(got, tp.URITemplate)
			}
			if res.NextCursor == "" {
				break
			}
			if strings.Contains(res.NextCursor, "://") {
				t.Fatal("cursor reveals the position")
			}
			cursor, last = res.NextCursor, res.NextCursor
		}
		var wantURIs []string
		for _, tp := range want {
			wantURIs = append(wantURIs, tp.URITemplate)
		}
		if !slices.Equal(got, wantURIs) || pages != (len(want)+1)/2 {
			t.Fatalf("%s: %d pages %v, want %v", rev, pages, got, wantURIs)
		}
		recs := f.records()[before:]
		if len(recs) != pages {
			t.Fatalf("%s: %d records for %d pages", rev, len(recs), pages)
		}
		for _, r := range recs {
			if r.Action != server.ActionTemplates || r.Outcome != audit.OutcomeAllow || r.DecisionID == "" {
				t.Errorf("page record %s/%s decision %q", r.Action, r.Outcome, r.DecisionID)
			}
		}

		// A list cursor is no templates cursor, nor the reverse; a foreign,
		// tampered or garbage cursor is refused and audited.
		lr, err := cs.ListResources(context.Background(), nil)
		if err != nil || lr.NextCursor == "" {
			t.Fatalf("list: %v (cursor %q)", err, lr.NextCursor)
		}
		other := f.connectRev(f.identity("clinician-hiv"), rev)
		before = len(f.records())
		bad := []struct {
			cs     *mcp.ClientSession
			cursor string
		}{
			{cs, lr.NextCursor}, {other, last}, {cs, last[:len(last)-2] + "AA"}, {cs, "garbage"},
		}
		for i, b := range bad {
			_, err := b.cs.ListResourceTemplates(context.Background(), &mcp.ListResourceTemplatesParams{Cursor: b.cursor})
			if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "invalid cursor") {
				t.Errorf("%s bad templates cursor %d: %v", rev, i, err)
			}
		}
		if _, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: last}); rpcCode(err) != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: a templates cursor opened as a list cursor: %v", rev, err)
		}
		for _, r := range f.records()[before:] {
			if r.Outcome != audit.OutcomeDeny || r.Reason != "bad_cursor" {
				t.Errorf("%s bad cursor audited as %s %s/%s", rev, r.Action, r.Outcome, r.Reason)
			}
		}
		if n := len(f.records()) - before; n != len(bad)+1 {
			t.Errorf("%s: %d records for %d bad cursors", rev, n, len(bad)+1)
		}
	}
}

// Every list item and every read content carries its entity tag; an
// unminimized one is the audit digest reference and comes with lastModified,
// a minimized one is a keyed tag that does not reveal the stored digest.
func TestETagsAndLastModified(t *testing.T) {
	f := newFixture(t, "")
	byURI := map[string]store.Resource{}
	for _, r := range f.allURIs() {
		byURI[r.URI] = r
	}
	tags := map[string]map[string]string{} // persona -> uri -> etag
	real := f.realIDs()
	for _, persona := range []string{"clinician", "researcher"} {
		cs := f.connect(f.identity(persona))
		tags[persona] = map[string]string{}
		n, withLM := 0, 0
		for item, err := range cs.Resources(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			r := byURI[f.realURI(real, item.URI)] // a researcher is shown aliases
			tag, _ := item.Meta[server.ETagKey].(string)
			tags[persona][f.realURI(real, item.URI)] = tag
			minimized := item.Size == 0 // size is withheld exactly when read would minimize
			digestRef := fmt.Sprintf("%s@v%d", r.Digest, r.Version)
			switch {
			case !minimized && tag != digestRef:
				t.Errorf("%s %s: etag %q, want %q", persona, item.URI, tag, digestRef)
			case minimized && (!strings.HasPrefix(tag, "m1:") || len(tag) != 35 || strings.Contains(tag, strings.TrimPrefix(r.Digest, "sha256:")[:16])):
				t.Errorf("%s %s: minimized etag %q", persona, item.URI, tag)
			}
			if lm := item.Annotations.LastModified; lm != "" {
				withLM++
				if minimized || lm != r.Annotations.LastModified.UTC().Format(time.RFC3339) {
					t.Errorf("%s %s: lastModified %q (minimized %v)", persona, item.URI, lm, minimized)
				}
			} else if !minimized && !r.Annotations.LastModified.IsZero() {
				t.Errorf("%s %s: unminimized item without lastModified", persona, item.URI)
			}
			if n < 5 {
				res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: item.URI})
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Contents[0].Meta[server.ETagKey]; got != tag {
					t.Errorf("%s %s: read etag %v, list etag %q", persona, item.URI, got, tag)
				}
			}
			n++
		}
		if n == 0 || (persona == "clinician" && withLM == 0) {
			t.Fatalf("%s: %d items, %d with lastModified: the test would prove little", persona, n, withLM)
		}
	}
	// The researcher's tags are its own: the same resource under
	// obligations never shares the clinician's (digest) tag.
	shared := 0
	for uri, tag := range tags["researcher"] {
		if c, ok := tags["clinician"][uri]; ok {
			shared++
			if strings.HasPrefix(tag, "m1:") && c == tag {
				t.Errorf("%s: minimized and unminimized views share a tag", uri)
			}
		}
	}
	if shared == 0 {
		t.Fatal("clinician and researcher share no resource: the test would prove little")
	}
}

func TestResourceOptionsAreValidated(t *testing.T) {
	f := newFixture(t, "")
	for name, o := range map[string]server.ResourceOptions{
		"templates page negative": {TemplatesPageSize: -1},
		"templates page too big":  {TemplatesPageSize: 101},
		"text page too small":     {TextPageSize: 3},
		"text page too big":       {TextPageSize: 2 << 20},
		"negative ttl":            {CacheTTL: &server.CacheTTL{Read: -time.Second}},
	} {
		cfg := f.config(loadPolicy(t, ""))
		cfg.Resources = o
		if _, err := server.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Automatic logoff: a 2025-11-25 session idle longer than
// Config.SessionTimeout is closed; the client must initialize again.
func TestIdleSessionIsLoggedOff(t *testing.T) {
	f := newFixture(t, "")
	f.reconfigure(func(c *server.Config) { c.SessionTimeout = 300 * time.Millisecond })
	hs := f.serveHTTP("clinician")
	cs := hs.connect(t, "clinician", rev2025)
	if _, err := cs.ListResources(context.Background(), nil); err != nil {
		t.Fatalf("list within the idle limit: %v", err)
	}
	time.Sleep(time.Second)
	if _, err := cs.ListResources(context.Background(), nil); err == nil {
		t.Fatal("a session idle past Config.SessionTimeout still served a list")
	}
	var bad error
	f.reconfigure(func(c *server.Config) {
		_, bad = server.New(server.Config{Catalog: c.Catalog, Policy: c.Policy, Audit: c.Audit, Keys: c.Keys, SessionTimeout: -time.Second})
	})
	if !errors.Is(bad, server.ErrBadConfig) || !strings.Contains(bad.Error(), "SessionTimeout") {
		t.Fatalf("negative SessionTimeout: %v", bad)
	}
}

// cacheControls records the Cache-Control header of every response.
type cacheControls struct {
	bearer
	mu  sync.Mutex
	got []string
}

func (c *cacheControls) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.bearer.RoundTrip(r)
	if err == nil {
		c.mu.Lock()
		c.got = append(c.got, r.Method+" "+resp.Status+": "+resp.Header.Get("Cache-Control"))
		c.mu.Unlock()
	}
	return resp, err
}

// Every response of the MCP endpoint says Cache-Control: no-store: the
// go-sdk's "no-cache, no-transform" let a proxy or the client's HTTP cache
// store a resource's PHI (it only had to revalidate before reusing it).
// Both revisions (SSE and JSON framing), a read, a list, the session's
// DELETE and a refused request are checked, behind the dev-token and the
// OAuth handlers.
func TestMCPResponsesAreNotStored(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	oauthURL, mint := f.oauthServer(t)
	for _, h := range []struct{ name, url, tok string }{
		{"tokens", hs.url, hs.tokens["clinician"]},
		{"oauth", oauthURL, mint("clinician", "resources:list resources:read")},
	} {
		for _, rev := range []string{rev2025, rev2026} {
			cc := &cacheControls{bearer: bearer{h.tok}}
			tr := &mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: cc}, DisableStandaloneSSE: true}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: rev})
			if err != nil {
				t.Fatal(err)
			}
			res, err := cs.ListResources(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: res.Resources[0].URI}); err != nil {
				t.Fatal(err)
			}
			cs.Close()
			cc.mu.Lock()
			got := slices.Clone(cc.got)
			cc.mu.Unlock()
			if len(got) < 3 {
				t.Fatalf("%s %s: %d responses seen: %q", h.name, rev, len(got), got)
			}
			for _, g := range got {
				if !strings.HasSuffix(g, ": no-store, no-transform") {
					t.Errorf("%s %s: response %q, want Cache-Control: no-store, no-transform", h.name, rev, g)
				}
			}
		}
		code, hdr, _ := post(t, h.url, "", map[string]string{"Mcp-Protocol-Version": rev2026}, `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`)
		if code != http.StatusUnauthorized || hdr.Get("Cache-Control") != "no-store, no-transform" {
			t.Errorf("%s: unauthenticated request: %d, Cache-Control %q", h.name, code, hdr.Get("Cache-Control"))
		}
	}
}
