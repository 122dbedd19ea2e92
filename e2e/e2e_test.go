package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store/synth"
)

var (
	bin     string // the custos binary under test
	repo    string // repository root
	workDir string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		var err error
		workDir, err = os.MkdirTemp("", "custos-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(workDir)
		// The tests configure Vault themselves; a developer's own Vault
		// settings must not leak into the binaries they start.
		for _, k := range []string{"VAULT_ADDR", "VAULT_TOKEN", "VAULT_CACERT", "VAULT_SKIP_VERIFY", "VAULT_AGENT_ADDR"} {
			os.Unsetenv(k)
		}
		repo, _ = filepath.Abs("..")
		bin = filepath.Join(workDir, "custos")
		build := exec.Command("go", "build", "-o", bin, "./cmd/custos")
		build.Dir = repo
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building custos: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}())
}

// custos runs the binary and returns stdout, stderr and the exit code.
func custos(t testing.TB, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func mustCustos(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, code := custos(t, nil, args...)
	if code != 0 {
		t.Fatalf("custos %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// records exports the audit log with the CLI and decodes every line. It
// leaves out the access records of auditor commands (client_id
// custos-cli; the export's own is the last line): the tests that use it
// look at what the server recorded. TestAuditorCommandsNextToARunningServer
// checks the access records.
func (d *dataset) records(t *testing.T) []audit.Record {
	t.Helper()
	out := mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "jsonl")
	var recs []audit.Record
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		r, err := audit.Decode(sc.Bytes())
		if err != nil {
			t.Fatalf("exported line does not decode canonically: %v", err)
		}
		if r.Principal.ClientID == access.ClientID {
			continue
		}
		recs = append(recs, r)
	}
	return recs
}

func summarize(recs []audit.Record) []string {
	var s []string
	for _, r := range recs {
		s = append(s, r.Action+":"+r.Outcome+":"+r.Reason)
	}
	return s
}

// session is what a scripted client did, for checking against the audit log.
type session struct {
	pages       int
	listed      []string
	expectAudit []string // action:outcome[:reason] per request, in order
}

func (s *session) expect(action, outcome, reason string) {
	s.expectAudit = append(s.expectAudit, action+":"+outcome+":"+reason)
}

func rpcError(err error) *jsonrpc.Error {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// script runs the same scripted session over any go-sdk client session as
// the seeded clinician: templates, every list page, a text read, a blob
// read, a denied read (HIV resource without the role) and a not-found read.
func script(t *testing.T, ctx context.Context, cs *mcp.ClientSession, d *dataset) *session {
	t.Helper()
	s := &session{}
	tl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.ResourceTemplates) < 4 {
		t.Fatalf("templates: %d, want one per family", len(tl.ResourceTemplates))
	}
	s.expect("resources/templates/list", "allow", "*")
	cursor := ""
	for {
		res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		s.pages++
		s.expect("resources/list", "allow", "*")
		for _, r := range res.Resources {
			s.listed = append(s.listed, r.URI)
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	if s.pages < 2 {
		t.Fatalf("want several pages to exercise cursors, got %d", s.pages)
	}
	var text, blob string
	for _, u := range s.listed {
		if text == "" && strings.HasPrefix(u, "note://") {
			text = u
		}
		if blob == "" && (strings.HasPrefix(u, "report://") || strings.HasPrefix(u, "image://")) {
			blob = u
		}
	}
	if text == "" || blob == "" {
		t.Fatalf("clinician list has no note or binary resource: %v", s.listed)
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: text})
	if err != nil || res.Contents[0].Text == "" || res.Contents[0].MIMEType != "text/markdown" {
		t.Fatalf("text read: %v %+v", err, res)
	}
	s.expect("resources/read", "allow", "*")
	res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: blob})
	if err != nil || len(res.Contents[0].Blob) == 0 || res.Contents[0].Text != "" {
		t.Fatalf("blob read: %v", err)
	}
	if mt := res.Contents[0].MIMEType; mt != "application/pdf" && mt != "image/png" {
		t.Fatalf("blob mimeType %q", mt)
	}
	s.expect("resources/read", "allow", "*")

	hivPatient := d.summary.EdgeCases["hiv"]
	denied := ""
	for _, l := range d.lines(t) {
		if l.Labels.Patient == hivPatient && slices.Contains(l.Labels.Sensitivity, "hiv") {
			denied = l.URI
		}
	}
	if denied == "" || slices.Contains(s.listed, denied) {
		t.Fatalf("HIV resource %q missing from the data set or listed to a clinician without the role", denied)
	}
	_, errDenied := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: denied})
	s.expect("resources/read", "deny", "*")
	missing := missingURI(denied)
	_, errMissing := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: missing})
	s.expect("resources/read", "deny", "not_found")
	a, b := rpcError(errDenied), rpcError(errMissing)
	// -32002 up to 2025-11-25, -32602 with data.uri from 2026-07-28 on.
	want := server.NotFoundCode(cs.InitializeResult().ProtocolVersion)
	if a == nil || b == nil || a.Code != want || a.Code != b.Code || a.Message != b.Message {
		t.Fatalf("denied (%v) and not-found (%v) must be the same %d error", errDenied, errMissing, want)
	}
	return s
}

type manifestLine struct {
	URI    string `json:"uri"`
	Labels struct {
		Patient     string   `json:"patient"`
		Type        string   `json:"type"`
		Sensitivity []string `json:"sensitivity"`
	} `json:"labels"`
}

func (d *dataset) lines(t *testing.T) []manifestLine {
	raw, err := os.ReadFile(filepath.Join(d.seed, "manifest.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []manifestLine
	for _, l := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var m manifestLine
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// checkAudit compares the audit log with what the session expected: the
// same requests in the same order; "*" matches any reason.
func checkAudit(t *testing.T, got []audit.Record, want []string, sub string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("audit log has %d records, want %d\ngot:  %v\nwant: %v", len(got), len(want), summarize(got), want)
	}
	for i, r := range got {
		parts := strings.SplitN(want[i], ":", 3)
		if r.Action != parts[0] || r.Outcome != parts[1] || (parts[2] != "*" && r.Reason != parts[2]) {
			t.Errorf("record %d: %s:%s:%s, want %s", r.Seq, r.Action, r.Outcome, r.Reason, want[i])
		}
		if r.Principal.Sub != sub || !r.Dev || r.PolicyRevision == "" {
			t.Errorf("record %d: sub=%q dev=%v revision=%q", r.Seq, r.Principal.Sub, r.Dev, r.PolicyRevision)
		}
	}
}

func subOf(t *testing.T, principalFile string) string {
	raw, err := os.ReadFile(principalFile)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Sub string `json:"sub"`
	}
	json.Unmarshal(raw, &p)
	return p.Sub
}

func TestStdioGoSDKClient(t *testing.T) {
	d := newDataset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "serve", "--dev", "--data-dir", d.data, "--stdio", "--page-size", "20")
	cmd.Env = append(os.Environ(), "CUSTOS_PRINCIPAL_FILE="+d.principal("clinician"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-stdio", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := script(t, ctx, cs, d)
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	cmd.Wait()
	if !strings.Contains(stderr.String(), "DEV MODE") {
		t.Errorf("dev mode not announced at startup: %s", stderr.String())
	}
	checkAudit(t, d.records(t), s.expectAudit, subOf(t, d.principal("clinician")))
}

func newToken(t *testing.T, principal, tokens string) string {
	t.Helper()
	return strings.TrimSpace(mustCustos(t, "token", "new", "--principal", principal, "--tokens", tokens))
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return testTransport.RoundTrip(r)
}

// testCAs holds every certificate the tests generate (writeCert), so that
// the go-sdk clients of any test trust the servers started over HTTPS.
var (
	testCAs       = x509.NewCertPool()
	testPEMsMu    sync.Mutex
	testPEMs      []byte // the same certificates, PEM, for node
	testTransport = func() *http.Transport {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: testCAs}
		return t
	}()
)

func TestHTTPGoSDKAndTypeScriptClients(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	clinTok := newToken(t, d.principal("clinician"), tokens)
	billTok := newToken(t, d.principal("billing"), tokens)
	url, stop, logs := httpServer(t, d, tokens)

	// No token, wrong token: 401 before any MCP processing.
	for _, tok := range []string{"", "wrong-token-wrong-token-wrong-token"} {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q: status %d, want 401", tok, resp.StatusCode)
		}
	}

	// go-sdk client as the clinician.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-http", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer{clinTok}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	goSession := script(t, ctx, cs, d)
	cs.Close()

	// The official TypeScript SDK client, as the clinician (text, blob,
	// denied, not found) and as the biller (minimized coverage, denied note).
	var note, report, hiv, coverage, billNote string
	for _, l := range d.lines(t) {
		switch {
		case l.Labels.Patient == d.summary.EdgeCases["hiv"] && slices.Contains(l.Labels.Sensitivity, "hiv"):
			hiv = l.URI
		case slices.Contains(goSession.listed, l.URI) && l.Labels.Type == "note" && note == "":
			note = l.URI
		case slices.Contains(goSession.listed, l.URI) && l.Labels.Type == "report" && report == "":
			report = l.URI
		}
		if coverage == "" && l.Labels.Type == "coverage" {
			coverage = l.URI
		}
		if billNote == "" && l.Labels.Type == "note" {
			billNote = l.URI
		}
	}
	missing := missingURI(coverage)
	tsClin := runTSClient(t, url, clinTok, note, report, hiv, missing)
	tsBill := runTSClient(t, url, billTok, coverage, billNote, missing)
	stop()

	recs := d.records(t)
	clinSub, billSub := subOf(t, d.principal("clinician")), subOf(t, d.principal("billing"))
	var clinRecs, billRecs []audit.Record
	var rejects []string
	for _, r := range recs {
		switch r.Principal.Sub {
		case "":
			// The two 401s above, refused before MCP and audited.
			if r.Action != "auth/reject" || r.Outcome != "deny" {
				t.Errorf("record %d without a principal: %s %s", r.Seq, r.Action, r.Outcome)
			}
			rejects = append(rejects, r.Reason)
		case clinSub:
			clinRecs = append(clinRecs, r)
		case billSub:
			billRecs = append(billRecs, r)
		default:
			t.Errorf("record %d for unexpected principal %q", r.Seq, r.Principal.Sub)
		}
	}

	if len(rejects) != 2 || !strings.HasPrefix(rejects[0], "http_401,") || !strings.HasPrefix(rejects[1], "http_401,") {
		t.Errorf("the 401s were audited as %v", rejects)
	}

	// Clinician: the go-sdk session, then the TypeScript session.
	wantClin := slices.Clone(goSession.expectAudit)
	wantClin = append(wantClin, tsExpect(t, tsClin, goSession.listed)...)
	if r := tsClin.Reads; len(r) != 4 || !r[0].OK || r[0].Contents[0].Kind != "text" || !r[1].OK ||
		r[1].Contents[0].Kind != "blob" || r[1].Contents[0].MIMEType != "application/pdf" || r[1].Contents[0].Bytes == 0 {
		t.Errorf("clinician TypeScript reads (text, blob): %+v", r)
	}
	wantClin = append(wantClin, "resources/read:allow:*", "resources/read:allow:*")
	wantClin = append(wantClin, tsDenials(t, tsClin.Reads[2:])...)
	wantClin = append(wantClin, "resources/list:deny:bad_cursor")
	checkAudit(t, clinRecs, wantClin, clinSub)

	// Biller: coverage and encounters only, minimized, and the tenant's
	// reference data (the payers' Organizations the Coverages reference).
	for _, p := range tsBill.Resources.Pages {
		for _, u := range p.URIs {
			if !strings.HasPrefix(u, "fhir://") || !(strings.Contains(u, "/coverage/") || strings.Contains(u, "/encounter/") || strings.Contains(u, "/organization/")) {
				t.Errorf("biller listed %s: only coverage, encounters and reference data are allowed", u)
			}
		}
	}
	wantBill := tsExpect(t, tsBill, nil)
	if r := tsBill.Reads; len(r) != 3 || !r[0].OK || r[0].Contents[0].Kind != "text" || r[0].Contents[0].MIMEType != "application/fhir+json" {
		t.Errorf("biller coverage read: %+v", r)
	}
	wantBill = append(wantBill, "resources/read:allow:*")
	wantBill = append(wantBill, tsDenials(t, tsBill.Reads[1:])...)
	wantBill = append(wantBill, "resources/list:deny:bad_cursor")
	checkAudit(t, billRecs, wantBill, billSub)
	for _, r := range billRecs {
		if r.Action == "resources/read" && r.Outcome == "allow" && len(r.Obligations) == 0 {
			t.Errorf("biller's coverage read has no obligations recorded")
		}
	}
	checkNoPHIInLogs(t, d, logs.String(), clinTok, billTok)
}

// checkNoPHIInLogs scans the server's debug log for every direct identifier
// of every synthetic patient, every resource URI, and the bearer tokens.
func checkNoPHIInLogs(t *testing.T, d *dataset, logs string, secrets ...string) {
	t.Helper()
	if !strings.Contains(logs, `"msg":"audited"`) {
		t.Fatalf("debug log has no per-request lines; the scan would prove nothing:\n%s", logs)
	}
	needles := map[string]string{}
	for _, s := range secrets {
		needles[s] = "bearer token"
	}
	ids, err := synth.Identifiers(d.seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		needles[id] = "patient identifier"
	}
	if len(needles) < 50 {
		t.Fatalf("only %d identifiers collected; the scan would prove little", len(needles))
	}
	for _, l := range d.lines(t) {
		needles[l.URI] = "resource uri"
		needles[l.Labels.Patient] = "patient id"
	}
	for n, what := range needles {
		if len(n) < 4 {
			continue
		}
		if at := leakAt(logs, n); at >= 0 {
			// The data set is synthetic: naming the needle is safe here.
			t.Errorf("server log contains a %s (%q) in: …%s…", what, n, logs[max(0, at-60):min(len(logs), at+len(n)+20)])
		}
	}
}

// leakAt returns where needle first occurs in logs as an identifier, or -1.
// An all-digit identifier (a ZIP code, a phone number's digits) counts only
// where it is not part of a longer hexadecimal run: timestamps and
// durations are full of digit runs, and the random ids and digests of every
// log line (decision ids, SHA-256 revisions) hold any five digits in a row
// now and then ("…2e62720d87a5…").
func leakAt(logs, needle string) int {
	for rest, off := logs, 0; ; {
		i := strings.Index(rest, needle)
		if i < 0 {
			return -1
		}
		at := off + i
		if !isDigits(needle) || ((at == 0 || !isHex(logs[at-1])) && (at+len(needle) == len(logs) || !isHex(logs[at+len(needle)]))) {
			return at
		}
		rest, off = rest[i+1:], at+1
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') }

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

type tsOutput struct {
	Fatal           string `json:"fatal"`
	ProtocolVersion string `json:"protocolVersion"`
	Templates       struct {
		PageCount int `json:"pageCount"`
	} `json:"templates"`
	Resources struct {
		PageCount int  `json:"pageCount"`
		Complete  bool `json:"complete"`
		Pages     []struct {
			URIs       []string `json:"uris"`
			NextCursor *string  `json:"nextCursor"`
		} `json:"pages"`
	} `json:"resources"`
	Reads     []tsRead `json:"reads"`
	BadCursor struct {
		OK    bool `json:"ok"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	} `json:"badCursor"`
}

type tsRead struct {
	URI      string `json:"uri"`
	OK       bool   `json:"ok"`
	Contents []struct {
		MIMEType string `json:"mimeType"`
		Kind     string `json:"kind"`
		Bytes    int    `json:"bytes"`
	} `json:"contents"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// tsExpect checks the TypeScript client's templates and list and returns
// the audit records they must have produced. If listed is non-nil, the
// TypeScript list must equal it (same principal, same catalog).
func tsExpect(t *testing.T, ts tsOutput, listed []string) []string {
	t.Helper()
	if ts.Fatal != "" {
		t.Fatalf("ts client: %s", ts.Fatal)
	}
	if ts.ProtocolVersion == "" || !ts.Resources.Complete || ts.Resources.PageCount < 1 {
		t.Fatalf("ts client list incomplete: %+v", ts.Resources)
	}
	var want, got []string
	for range ts.Templates.PageCount {
		want = append(want, "resources/templates/list:allow:*")
	}
	for _, p := range ts.Resources.Pages {
		want = append(want, "resources/list:allow:*")
		got = append(got, p.URIs...)
		if p.NextCursor != nil && (strings.Contains(*p.NextCursor, "fhir") || strings.Contains(*p.NextCursor, "patients")) {
			t.Errorf("cursor reveals the catalog position: %s", *p.NextCursor)
		}
	}
	if listed != nil && !slices.Equal(got, listed) {
		t.Errorf("TypeScript and go-sdk clients see different lists for one principal")
	}
	if ts.BadCursor.OK || ts.BadCursor.Error == nil || ts.BadCursor.Error.Code != -32602 {
		t.Errorf("bad cursor: %+v", ts.BadCursor)
	}
	return want
}

// tsDenials checks that a denied read and a not-found read came back as the
// same -32002 error and returns their expected audit records.
func tsDenials(t *testing.T, reads []tsRead) []string {
	t.Helper()
	if len(reads) != 2 {
		t.Fatalf("want a denied and a not-found read, got %d reads", len(reads))
	}
	for i, r := range reads {
		if r.OK || r.Error == nil || r.Error.Code != -32002 {
			t.Errorf("read %d (%s): want -32002, got %+v", i, r.URI, r)
		}
	}
	if reads[0].Error != nil && reads[1].Error != nil && reads[0].Error.Message != reads[1].Error.Message {
		t.Errorf("denied and not-found messages differ: %q vs %q", reads[0].Error.Message, reads[1].Error.Message)
	}
	return []string{"resources/read:deny:*", "resources/read:deny:not_found"}
}

func runTSClient(t *testing.T, url, token string, reads ...string) tsOutput {
	t.Helper()
	dir := tsClientDir(t) // installed by `make deps`, from the lockfile
	args := []string{"client.mjs", "--url", url}
	for _, r := range reads {
		args = append(args, "--read", r)
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CUSTOS_TOKEN="+token)
	if strings.HasPrefix(url, "https://") {
		// node trusts the test certificates through NODE_EXTRA_CA_CERTS.
		cas := filepath.Join(t.TempDir(), "cas.pem")
		testPEMsMu.Lock()
		err := os.WriteFile(cas, testPEMs, 0o644)
		testPEMsMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, "NODE_EXTRA_CA_CERTS="+cas)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("ts client: %v\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
	}
	if strings.Contains(out.String()+errb.String(), token) {
		t.Fatal("the token appears in the client's output")
	}
	var o tsOutput
	if err := json.Unmarshal(out.Bytes(), &o); err != nil {
		t.Fatalf("ts client output: %v\n%s", err, out.String())
	}
	return o
}

// Tamper: one byte of one stored record changed → verify fails and names
// it, and so does the data-set fixture's own check when the test ends: the
// data set is made under a recorder that catches that check's verdict.
func TestTamperedRecordIsNamed(t *testing.T) {
	r := audittest.NewRecorder(t)
	d := newDataset(r)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	url, stop, _ := httpServer(t, d, tokens)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-tamper", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer{tok}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := cs.ListResources(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	cs.Close()
	stop()
	if out := mustCustos(t, "audit", "verify", "--data-dir", d.data); !strings.HasPrefix(out, "OK:") {
		t.Fatalf("audit verify before tampering: %s", out)
	}

	const victim = 2
	db, err := bolt.Open(d.audit(), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("records"))
		key := binary.BigEndian.AppendUint64(nil, victim)
		v := slices.Clone(b.Get(key))
		if v == nil {
			return fmt.Errorf("record %d not found", victim)
		}
		i := bytes.Index(v, []byte(`"resources/list"`)) + 3
		v[i] ^= 0x01 // one byte, inside a string, so the JSON stays well-formed
		return b.Put(key, v)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _, code := custos(t, nil, "audit", "verify", "--data-dir", d.data)
	if code != 1 {
		t.Fatalf("verify of a tampered log exited %d, want 1:\n%s", code, out)
	}
	if !strings.Contains(out, fmt.Sprintf("seq=%d ", victim)) {
		t.Fatalf("verify does not name record %d:\n%s", victim, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		// The tree root over all records differs as a consequence; that
		// problem is the tree's, reported at the head, not a record's.
		if strings.HasPrefix(line, "BROKEN") && !strings.Contains(line, fmt.Sprintf("seq=%d ", victim)) &&
			!strings.Contains(line, "kind=tree_root_mismatch") {
			t.Errorf("verify blames an untouched record: %s", line)
		}
	}
	r.RunCleanups()
	if !r.Failed() {
		t.Fatal("the data set's cleanup check passed a tampered audit log")
	}
}

// The shipped `custos serve --stdio` answers a line that is not a JSON-RPC
// message, or a call with an id the go-sdk would change, with an error
// naming what is wrong and without quoting the line, and goes on serving
// the session (server.StdioTransport); the line reaches neither stdout's
// answers nor stderr's log.
func TestStdioMalformedLinesAnsweredByTheShippedServer(t *testing.T) {
	d := newDataset(t)
	const canary = "Zq7canaryTOKEN"
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + canary + `"`,
		`{"jsonrpc":"2.0","id":2.5,"method":"resources/read","params":{"uri":"` + canary + `"}}`,
		`[{"jsonrpc":"2.0","id":3,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/list"}`,
	}, "\n") + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--dev", "--data-dir", d.data, "--stdio")
	cmd.Env = append(os.Environ(), "CUSTOS_PRINCIPAL_FILE="+d.principal("clinician"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, in)
	// Read answers until the list's (the last line sent), then close stdin.
	var stdout strings.Builder
	var answers []map[string]any
	sc := bufio.NewScanner(stdoutPipe)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		stdout.WriteString(sc.Text() + "\n")
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stdout line %q is not a JSON object: %v", sc.Text(), err)
		}
		answers = append(answers, m)
		if m["id"] == float64(4) {
			break
		}
	}
	stdin.Close()
	io.Copy(io.Discard, stdoutPipe)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve --stdio: %v\n%s", err, stderr.String())
	}
	if len(answers) == 0 {
		t.Fatalf("no answers; stderr %s", stderr.String())
	}
	codes := []float64{}
	for _, a := range answers {
		if e, ok := a["error"].(map[string]any); ok && a["id"] == nil {
			codes = append(codes, e["code"].(float64))
		}
	}
	if fmt.Sprint(codes) != "[-32700 -32600 -32600]" {
		t.Errorf("refusals with id null: codes %v, want parse error, inexact id and batch (stdout %s)", codes, stdout.String())
	}
	if last := answers[len(answers)-1]; last["id"] != float64(4) || last["result"] == nil {
		t.Errorf("the list after the refusals answered %v", last)
	}
	if strings.Contains(stdout.String(), canary) || strings.Contains(stderr.String(), canary) {
		t.Errorf("the line was quoted:\nstdout %s\nstderr %s", stdout.String(), stderr.String())
	}
	checkAudit(t, d.records(t), []string{"resources/list:allow:*"}, subOf(t, d.principal("clinician")))
}
