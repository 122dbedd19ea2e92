package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
)

// The protocol revisions custos serves over HTTP: the newest session-based
// one and the stateless one (server/discover, no initialize, no session).
const (
	revLegacy = "2025-11-25"
	revModern = "2026-07-28"
)

// httpsOAuth is `custos serve` over HTTPS (a self-signed certificate the
// clients trust explicitly) verifying real JWT access tokens from a loopback
// issuer.
type httpsOAuth struct {
	url, aud, iss string
	certFile      string // PEM of the self-signed certificate (NODE_EXTRA_CA_CERTS for node)
	pool          *x509.CertPool
	is            *issuer
	stderr        *syncBuf
	stop          func()
}

// startHTTPSOAuth serves d on a fixed loopback port (the audience is the
// canonical https URL, so the port must be known) with 20 resources a page.
func startHTTPSOAuth(t *testing.T, d *dataset) *httpsOAuth {
	t.Helper()
	dir := t.TempDir()
	h := &httpsOAuth{is: newIssuer(t), certFile: filepath.Join(dir, "cert.pem")}
	h.iss = h.is.srv.URL
	keyFile := filepath.Join(dir, "key.pem")
	cert := writeCert(t, h.certFile, keyFile, 1)
	h.pool = x509.NewCertPool()
	h.pool.AddCert(cert)
	ln, _ := net0{}.free(t)
	h.aud = "https://" + ln + "/mcp"
	s := serve(t, d, nil, "--dev", "--listen", ln,
		"--tls-cert", h.certFile, "--tls-key", keyFile, "--page-size", "20",
		"--oauth-issuer", h.iss, "--oauth-jwks", h.iss+"/jwks", "--oauth-audience", h.aud)
	h.url, h.stderr, h.stop = s.url, s.stderr, func() { s.stop(t) }
	if h.url != h.aud {
		t.Fatalf("server endpoint %s, want %s", h.url, h.aud)
	}
	return h
}

// oauthPrincipal is who a token names: the seeded principal's roles,
// patients and purpose of use, under subject "dr-oauth" (the issuer's), and
// a client id (azp) per client so each client's audit records can be told
// apart.
func (h *httpsOAuth) token(t *testing.T, d *dataset, principal, clientID string) string {
	t.Helper()
	var p struct {
		Roles        []string `json:"roles"`
		Patients     []string `json:"patients"`
		PurposeOfUse string   `json:"purpose_of_use"`
	}
	b, err := os.ReadFile(d.principal(principal))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if p.Patients == nil {
		p.Patients = []string{}
	}
	return h.is.token(t, h.aud, h.iss, time.Hour, "resources:list resources:read", map[string]any{
		"roles": p.Roles, "patients": p.Patients, "purpose_of_use": p.PurposeOfUse, "azp": clientID})
}

// goClient connects the go-sdk client over HTTPS, trusting only the
// server's certificate, asking for protocol revision rev, and fails the test
// unless that revision was negotiated.
func (h *httpsOAuth) goClient(t *testing.T, token, rev string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearer2{token, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.pool}}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-https-go", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("go-sdk connect at %s: %v", rev, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != rev {
		t.Fatalf("go-sdk client asked for %s, negotiated %s", rev, got)
	}
	return cs
}

// goList walks every resources/list page and returns the URIs and the
// number of pages.
func goList(t *testing.T, cs *mcp.ClientSession) ([]string, int) {
	t.Helper()
	var uris []string
	pages := 0
	for cursor := ""; ; {
		res, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("go-sdk list: %v", err)
		}
		pages++
		for _, r := range res.Resources {
			uris = append(uris, r.URI)
		}
		if res.NextCursor == "" {
			return uris, pages
		}
		cursor = res.NextCursor
	}
}

// contentDigest is the sha256 (hex) of a read's first content: the UTF-8
// text, or the decoded blob bytes (what client.mjs reports).
func contentDigest(c *mcp.ResourceContents) string {
	b := []byte(c.Text)
	if c.Text == "" {
		b = c.Blob
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// tsRun is client.mjs's output, with the fields the HTTPS tests read.
type tsRun struct {
	Fatal string `json:"fatal"`
	SDK   struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"sdk"`
	ProtocolVersion string `json:"protocolVersion"`
	HasSession      bool   `json:"hasSession"`
	Templates       struct {
		PageCount int  `json:"pageCount"`
		Complete  bool `json:"complete"`
	} `json:"templates"`
	Resources struct {
		PageCount int  `json:"pageCount"`
		Complete  bool `json:"complete"`
		Pages     []struct {
			URIs []string `json:"uris"`
		} `json:"pages"`
	} `json:"resources"`
	Reads []struct {
		URI      string `json:"uri"`
		OK       bool   `json:"ok"`
		Contents []struct {
			MIMEType string `json:"mimeType"`
			Kind     string `json:"kind"`
			SHA256   string `json:"sha256"`
		} `json:"contents"`
		Error *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	} `json:"reads"`
	BadCursor struct {
		OK    bool `json:"ok"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	} `json:"badCursor"`
}

// tsClientDir returns e2e/tsclient with both TypeScript SDK packages
// installed; a missing install fails under CI=true and skips otherwise.
func tsClientDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repo, "e2e", "tsclient")
	for _, pkg := range []string{"sdk", "client"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "package.json")); err != nil {
			const hint = "the TypeScript SDK clients are not installed: run `make deps` (npm ci --prefix e2e/tsclient)"
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s (CI=true: a missing dependency fails): %v", hint, err)
			}
			t.Skipf("%s: %v", hint, err)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is required for the TypeScript SDK e2e test: %v", err)
	}
	return dir
}

// runTSHTTPS runs client.mjs with the machine's node against the HTTPS
// server, trusting its certificate through NODE_EXTRA_CA_CERTS (node reads
// it at start-up; its fetch honours it).
func runTSHTTPS(t *testing.T, h *httpsOAuth, token string, args ...string) tsRun {
	t.Helper()
	dir := tsClientDir(t)
	cmd := exec.Command("node", append([]string{"client.mjs", "--url", h.url}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CUSTOS_TOKEN="+token, "NODE_EXTRA_CA_CERTS="+h.certFile)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if strings.Contains(out.String()+errb.String(), token) {
		t.Fatal("the token appears in the TypeScript client's output")
	}
	var o tsRun
	if jerr := json.Unmarshal(out.Bytes(), &o); jerr != nil || err != nil || o.Fatal != "" {
		t.Fatalf("ts client %v: %v %v\nstdout: %s\nstderr: %s", args, err, jerr, out.String(), errb.String())
	}
	return o
}

// TestTypeScriptClientOverHTTPSWithOAuth: the official TypeScript SDK
// clients read from custos over HTTPS with real OAuth access tokens, on
// both protocol revisions: 2025-11-25 with @modelcontextprotocol/sdk 1.x
// and with @modelcontextprotocol/client 2.x, and 2026-07-28 (stateless)
// with @modelcontextprotocol/client 2.x (sdk 1.x cannot speak it) and the
// go-sdk client. Each sees the same list as a go-sdk reference session of
// the same principal, reads the same bytes, gets one indistinguishable
// error for a denied and for a missing resource, and leaves exactly the
// audit records its requests imply, under its own client id.
func TestTypeScriptClientOverHTTPSWithOAuth(t *testing.T) {
	d := newDataset(t)
	h := startHTTPSOAuth(t, d)

	// The reference: go-sdk over HTTPS at 2025-11-25 as the clinician.
	ref := h.goClient(t, h.token(t, d, "clinician", "e2e-go-reference"), revLegacy)
	listed, listPages := goList(t, ref)
	tpl, err := ref.ListResourceTemplates(context.Background(), nil)
	if err != nil || tpl.NextCursor != "" || len(tpl.ResourceTemplates) == 0 {
		t.Fatalf("go-sdk templates: %v (want one page)", err)
	}
	var note, report, hiv string
	for _, l := range d.lines(t) {
		switch {
		case l.Labels.Patient == d.summary.EdgeCases["hiv"] && slices.Contains(l.Labels.Sensitivity, "hiv"):
			hiv = l.URI
		case slices.Contains(listed, l.URI) && l.Labels.Type == "note" && note == "":
			note = l.URI
		case slices.Contains(listed, l.URI) && l.Labels.Type == "report" && report == "":
			report = l.URI
		}
	}
	if note == "" || report == "" || hiv == "" || slices.Contains(listed, hiv) || listPages < 2 {
		t.Fatalf("data set: note %q report %q hiv %q (listed: %v), %d list pages", note, report, hiv, slices.Contains(listed, hiv), listPages)
	}
	missing := missingURI(note)
	want := map[string]string{} // uri → sha256 of the content the go-sdk client read
	for _, u := range []string{note, report} {
		res, err := ref.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: u})
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("go-sdk read: %v", err)
		}
		want[u] = contentDigest(res.Contents[0])
	}
	ref.Close()

	type run struct {
		name, sdk, rev string
		notFoundCode   int // as the SDK reports it
	}
	runs := []run{
		// sdk 1.x reports the server's legacy -32002; client 2.x maps a
		// not-found error (data {uri}) to -32602 on every revision, which is
		// also the 2026-07-28 wire code.
		{"sdk-v1", "v1", revLegacy, -32002},
		{"client-v2", "v2", revLegacy, -32602},
		{"client-v2", "v2", revModern, -32602},
	}
	clientIDs := map[string]string{} // client id → expected session shape ("session" or "")
	for _, r := range runs {
		t.Run(r.rev+"/"+r.name, func(t *testing.T) {
			clientID := "e2e-ts-" + r.name + "-" + r.rev
			tok := h.token(t, d, "clinician", clientID)
			ts := runTSHTTPS(t, h, tok, "--sdk", r.sdk, "--protocol-version", r.rev,
				"--read", note, "--read", report, "--read", hiv, "--read", missing)
			if ts.ProtocolVersion != r.rev || ts.SDK.Version == "" {
				t.Fatalf("%s %s negotiated %q, want %s", ts.SDK.Name, ts.SDK.Version, ts.ProtocolVersion, r.rev)
			}
			t.Logf("%s %s spoke %s (session: %v)", ts.SDK.Name, ts.SDK.Version, ts.ProtocolVersion, ts.HasSession)
			if ts.HasSession != (r.rev == revLegacy) {
				t.Errorf("hasSession=%v at %s: 2025 revisions have a session, 2026-07-28 none", ts.HasSession, r.rev)
			}
			var got []string
			for _, p := range ts.Resources.Pages {
				got = append(got, p.URIs...)
			}
			if !ts.Resources.Complete || !ts.Templates.Complete || !slices.Equal(got, listed) {
				t.Errorf("TypeScript list (%d URIs, complete=%v) differs from the go-sdk list (%d) for the same principal",
					len(got), ts.Resources.Complete, len(listed))
			}
			if len(ts.Reads) != 4 {
				t.Fatalf("%d reads, want 4", len(ts.Reads))
			}
			for _, rd := range ts.Reads[:2] {
				if !rd.OK || len(rd.Contents) != 1 || rd.Contents[0].SHA256 != want[rd.URI] {
					t.Errorf("read %s: ok=%v (error %+v), content differs from the go-sdk read", rd.URI, rd.OK, rd.Error)
				}
			}
			if c := ts.Reads[1].Contents; len(c) == 1 && (c[0].Kind != "blob" || c[0].MIMEType != "application/pdf") {
				t.Errorf("report read as %s %s, want a PDF blob", c[0].Kind, c[0].MIMEType)
			}
			denied, gone := ts.Reads[2], ts.Reads[3]
			if denied.OK || gone.OK || denied.Error == nil || gone.Error == nil {
				t.Fatalf("denied (%+v) and missing (%+v) reads must fail", denied, gone)
			}
			if denied.Error.Code != r.notFoundCode || gone.Error.Code != r.notFoundCode || denied.Error.Message != gone.Error.Message {
				t.Errorf("denied %d %q and missing %d %q: want one indistinguishable %d", denied.Error.Code, denied.Error.Message,
					gone.Error.Code, gone.Error.Message, r.notFoundCode)
			}
			if ts.BadCursor.OK || ts.BadCursor.Error == nil || ts.BadCursor.Error.Code != -32602 {
				t.Errorf("bad cursor: %+v", ts.BadCursor)
			}
			clientIDs[clientID] = map[bool]string{true: "session", false: ""}[r.rev == revLegacy]
		})
	}

	modernGoLists := 0 // list requests the go-sdk subtest made at 2026-07-28
	// The go-sdk client at 2026-07-28: stateless, private cache scope,
	// not-found as -32602 with data.uri on the wire, same list and bytes.
	t.Run(revModern+"/go-sdk", func(t *testing.T) {
		clientID := "e2e-go-" + revModern
		cs := h.goClient(t, h.token(t, d, "clinician", clientID), revModern)
		if cs.ID() != "" {
			t.Errorf("a 2026-07-28 connection has session id %q", cs.ID())
		}
		ctx := context.Background()
		res, err := cs.ListResources(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.CacheScope != "private" {
			t.Errorf("resources/list cacheScope %q, want private (per-user data)", res.CacheScope)
		}
		rest, pages := goList(t, cs)
		if !slices.Equal(rest, listed) || pages != listPages {
			t.Errorf("go-sdk at %s lists %d URIs in %d pages, at %s %d in %d", revModern, len(rest), pages, revLegacy, len(listed), listPages)
		}
		for _, u := range []string{note, report} {
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: u})
			if err != nil || len(rr.Contents) != 1 || contentDigest(rr.Contents[0]) != want[u] {
				t.Fatalf("read at %s: %v", revModern, err)
			}
			if rr.CacheScope != "private" {
				t.Errorf("resources/read cacheScope %q, want private", rr.CacheScope)
			}
		}
		_, errDenied := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: hiv})
		_, errMissing := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: missing})
		a, b := rpcError(errDenied), rpcError(errMissing)
		if a == nil || b == nil || a.Code != -32602 || b.Code != -32602 || a.Message != b.Message {
			t.Fatalf("denied (%v) and missing (%v) at %s must be one -32602 error (codes %d, %d)", errDenied, errMissing, revModern, code(a), code(b))
		}
		for _, e := range []struct {
			err  []byte
			want string
		}{{a.Data, hiv}, {b.Data, missing}} {
			var data struct{ URI string }
			if json.Unmarshal(e.err, &data) != nil || data.URI != e.want {
				t.Errorf("not-found data %s, want the requested uri", e.err)
			}
		}
		if _, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: "not-a-cursor"}); rpcError(err) == nil || rpcError(err).Code != -32602 {
			t.Errorf("bad cursor at %s: %v", revModern, err)
		}
		clientIDs[clientID] = ""
		modernGoLists = pages + 1 // the first page alone, then a full walk
	})
	h.stop()

	// Audit: per client id, exactly the records its requests imply.
	byClient := map[string][]audit.Record{}
	for _, r := range d.records(t) {
		byClient[r.Principal.ClientID] = append(byClient[r.Principal.ClientID], r)
		if r.Principal.Sub != "dr-oauth" || r.PurposeOfUse != "TREAT" || r.PolicyRevision == "" {
			t.Errorf("record %d: %s %s sub=%q purpose=%q revision=%q", r.Seq, r.Action, r.Outcome, r.Principal.Sub, r.PurposeOfUse, r.PolicyRevision)
		}
	}
	listAll := func(n int) []string {
		var l []string
		for range n {
			l = append(l, "resources/list:allow:*")
		}
		return l
	}
	reads := []string{"resources/read:allow:*", "resources/read:allow:*", "resources/read:deny:*",
		"resources/read:deny:not_found", "resources/list:deny:bad_cursor"}
	refWant := append(listAll(listPages), "resources/templates/list:allow:*", "resources/read:allow:*", "resources/read:allow:*")
	checkClientAudit(t, "e2e-go-reference", byClient["e2e-go-reference"], refWant, "session")
	for id, session := range clientIDs {
		var want []string
		if strings.HasPrefix(id, "e2e-go-") {
			want = append(listAll(modernGoLists), reads...)
		} else {
			want = append(append([]string{"resources/templates/list:allow:*"}, listAll(listPages)...), reads...)
		}
		checkClientAudit(t, id, byClient[id], want, session)
	}
	if len(clientIDs) != len(runs)+1 {
		t.Errorf("%d of %d client runs completed", len(clientIDs), len(runs)+1)
	}
}

// checkClientAudit compares one client's audit records with the expected
// action:outcome:reason sequence ("*" matches any reason). session says what
// MCP session ids the records must carry: "" none (2026-07-28 is
// stateless), "session" one id shared by all, "sessions" any non-empty id
// (a client that connects afresh for every request).
func checkClientAudit(t *testing.T, clientID string, got []audit.Record, want []string, session string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d audit records, want %d\ngot:  %v\nwant: %v", clientID, len(got), len(want), summarize(got), want)
		return
	}
	for i, r := range got {
		parts := strings.SplitN(want[i], ":", 3)
		if r.Action != parts[0] || r.Outcome != parts[1] || (parts[2] != "*" && r.Reason != parts[2]) {
			t.Errorf("%s record %d: %s:%s:%s, want %s", clientID, r.Seq, r.Action, r.Outcome, r.Reason, want[i])
		}
		if (session == "") != (r.Session == "") || (session == "session" && r.Session != got[0].Session) {
			t.Errorf("%s record %d: session %q, want %s", clientID, r.Seq, r.Session,
				map[string]string{"": "none (stateless)", "session": "one session", "sessions": "a session"}[session])
		}
		if r.Action == "resources/read" && r.Outcome == "allow" && len(r.Digests) != 1 {
			t.Errorf("%s record %d: read without a content digest", clientID, r.Seq)
		}
	}
}

// code is a JSON-RPC error's code, 0 for none.
func code(e *jsonrpc.Error) int64 {
	if e == nil {
		return 0
	}
	return e.Code
}
