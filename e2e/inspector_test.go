package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
)

// inspectorCLI returns the node (≥ 22.19) and the MCP Inspector launcher
// that e2e/inspector pins (see node22).
func inspectorCLI(t *testing.T) (node, launcher string) {
	t.Helper()
	return node22(t, "inspector", "make deps", "@modelcontextprotocol/inspector/clients/launcher/build/index.js")
}

// inspectorResult is what `inspector --cli --format json` prints: the
// method's result on stdout (exit 0) or an error envelope on stderr.
type inspectorResult struct {
	code   int
	Result struct {
		Resources []struct {
			URI string `json:"uri"`
		} `json:"resources"`
		NextCursor string `json:"nextCursor"`
		Contents   []struct {
			URI      string `json:"uri"`
			MIMEType string `json:"mimeType"`
			Text     string `json:"text"`
			Blob     string `json:"blob"`
		} `json:"contents"`
	} `json:"result"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Status  int    `json:"status"`
	} `json:"error"`
}

// runInspector runs the Inspector CLI against the HTTPS server with the
// bearer token as a header: node trusts the server's self-signed
// certificate through NODE_EXTRA_CA_CERTS, the Inspector's own state goes to
// a fresh HOME, and --stored-auth-only keeps it from ever starting an
// interactive OAuth login (a refused token is reported, not retried).
func runInspector(t *testing.T, h *httpsOAuth, token string, args ...string) inspectorResult {
	t.Helper()
	node, launcher := inspectorCLI(t)
	argv := append([]string{launcher, "--cli", h.url, "--transport", "http",
		"--header", "Authorization: Bearer " + token, "--stored-auth-only", "--format", "json", "--connect-timeout", "30000"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, argv...)
	cmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS="+h.certFile, "HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var r inspectorResult
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("inspector: %v", err)
	}
	if strings.Contains(out.String()+errb.String(), token) {
		t.Fatal("the token appears in the Inspector's output")
	}
	src := out.Bytes()
	if r.code != 0 {
		src = errb.Bytes()
	}
	if err := json.Unmarshal(src, &r); err != nil {
		t.Fatalf("inspector %v: exit %d, output is not one JSON object: %v\nstdout: %.2000s\nstderr: %.2000s", args, r.code, err, out.String(), errb.String())
	}
	return r
}

// TestInspectorCLIOverHTTPS: the MCP Inspector in CLI mode, over HTTPS with
// real OAuth access tokens, lists exactly what the go-sdk client lists for
// the same principal, reads the same (for a biller: minimized) content,
// gets the same error for a denied and for a missing resource, and is
// refused with a wrong-audience token; every request is an audit record
// under the Inspector's client id.
func TestInspectorCLIOverHTTPS(t *testing.T) {
	inspectorCLI(t) // skip or fail before starting anything
	d := newDataset(t)
	h := startHTTPSOAuth(t, d)
	ctx := context.Background()

	// The reference: go-sdk as the clinician and as the biller.
	clin := h.goClient(t, h.token(t, d, "clinician", "e2e-go-clinician"), revLegacy)
	listed, listPages := goList(t, clin)
	var note, coverage, hiv string
	for _, l := range d.lines(t) {
		switch {
		case l.Labels.Patient == d.summary.EdgeCases["hiv"] && slices.Contains(l.Labels.Sensitivity, "hiv"):
			hiv = l.URI
		case slices.Contains(listed, l.URI) && l.Labels.Type == "note" && note == "":
			note = l.URI
		case slices.Contains(listed, l.URI) && l.Labels.Type == "coverage" && coverage == "":
			coverage = l.URI
		}
	}
	if note == "" || coverage == "" || hiv == "" || slices.Contains(listed, hiv) || listPages < 2 {
		t.Fatalf("data set: note %q coverage %q hiv %q, %d list pages", note, coverage, hiv, listPages)
	}
	missing := missingURI(note)
	goRead := func(cs *mcp.ClientSession, uri string) *mcp.ResourceContents {
		t.Helper()
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(res.Contents) != 1 || res.Contents[0].Text == "" {
			t.Fatalf("go-sdk read: %v", err)
		}
		return res.Contents[0]
	}
	noteRef, coverageFull := goRead(clin, note), goRead(clin, coverage)
	bill := h.goClient(t, h.token(t, d, "billing", "e2e-go-billing"), revLegacy)
	coverageMin := goRead(bill, coverage)
	if coverageMin.Text == coverageFull.Text {
		t.Fatal("the biller's coverage read is not minimized; comparing it would prove nothing")
	}
	clin.Close()
	bill.Close()

	inspClin := h.token(t, d, "clinician", "e2e-inspector-clinician")
	inspBill := h.token(t, d, "billing", "e2e-inspector-billing")

	// resources/list: the Inspector follows every nextCursor itself.
	lst := runInspector(t, h, inspClin, "--method", "resources/list")
	var got []string
	for _, r := range lst.Result.Resources {
		got = append(got, r.URI)
	}
	if lst.code != 0 || lst.Result.NextCursor != "" || !slices.Equal(got, listed) {
		t.Errorf("Inspector list: exit %d, %d URIs (nextCursor %q); the go-sdk client lists %d for the same principal",
			lst.code, len(got), lst.Result.NextCursor, len(listed))
	}

	// resources/read: the same text as the go-sdk read.
	rd := runInspector(t, h, inspClin, "--method", "resources/read", "--uri", note)
	if rd.code != 0 || len(rd.Result.Contents) != 1 || rd.Result.Contents[0].Text != noteRef.Text ||
		rd.Result.Contents[0].MIMEType != noteRef.MIMEType || rd.Result.Contents[0].URI != note {
		t.Errorf("Inspector read of a note: exit %d, differs from the go-sdk read", rd.code)
	}
	// The biller's read is minimized exactly as the go-sdk client's was.
	rb := runInspector(t, h, inspBill, "--method", "resources/read", "--uri", coverage)
	if rb.code != 0 || len(rb.Result.Contents) != 1 || rb.Result.Contents[0].Text != coverageMin.Text {
		t.Errorf("Inspector read of coverage as the biller: exit %d, differs from the minimized go-sdk read", rb.code)
	}

	// A denied read and a missing resource: one indistinguishable error.
	den := runInspector(t, h, inspClin, "--method", "resources/read", "--uri", hiv)
	gone := runInspector(t, h, inspClin, "--method", "resources/read", "--uri", missing)
	if den.code == 0 || den.Error == nil || gone.Error == nil || den.code != gone.code || *den.Error != *gone.Error ||
		!strings.Contains(strings.ToLower(den.Error.Message), "not found") {
		t.Errorf("denied read %d %+v and missing read %d %+v must fail alike with not found", den.code, den.Error, gone.code, gone.Error)
	}

	// A token for another audience: refused before MCP, reported as such.
	wrongAud := h.is.token(t, "https://other.example/mcp", h.iss, time.Hour, "resources:list resources:read",
		map[string]any{"azp": "e2e-inspector-clinician"})
	ref := runInspector(t, h, wrongAud, "--method", "resources/list")
	if ref.code != 3 || ref.Error == nil || ref.Error.Code != "auth_required" {
		t.Errorf("wrong-audience token: exit %d %+v, want exit 3 auth_required", ref.code, ref.Error)
	}

	// 2026-07-28 (stateless): the Inspector's modern era (pinned to
	// 2026-07-28, no fallback) lists and reads the same.
	modernOK := t.Run(revModern, func(t *testing.T) {
		tok := h.token(t, d, "clinician", "e2e-inspector-modern")
		m := runInspector(t, h, tok, "--protocol-era", "modern", "--method", "resources/list")
		var uris []string
		for _, r := range m.Result.Resources {
			uris = append(uris, r.URI)
		}
		if m.code != 0 || !slices.Equal(uris, listed) {
			t.Errorf("Inspector list at %s: exit %d %+v, %d URIs, want %d", revModern, m.code, m.Error, len(uris), len(listed))
		}
		r := runInspector(t, h, tok, "--protocol-era", "modern", "--method", "resources/read", "--uri", note)
		if r.code != 0 || len(r.Result.Contents) != 1 || r.Result.Contents[0].Text != noteRef.Text {
			t.Errorf("Inspector read at %s: exit %d %+v, differs from the go-sdk read", revModern, r.code, r.Error)
		}
	})
	h.stop()

	byClient := map[string][]audit.Record{}
	var rejects []audit.Record
	for _, r := range d.records(t) {
		if r.Action == "auth/reject" {
			rejects = append(rejects, r)
			continue
		}
		byClient[r.Principal.ClientID] = append(byClient[r.Principal.ClientID], r)
	}
	var wantClin []string
	for range listPages {
		wantClin = append(wantClin, "resources/list:allow:*")
	}
	wantModern := append(slices.Clone(wantClin), "resources/read:allow:*")
	wantClin = append(wantClin, "resources/read:allow:*", "resources/read:deny:*", "resources/read:deny:not_found")
	checkClientAudit(t, "e2e-inspector-clinician", byClient["e2e-inspector-clinician"], wantClin, "sessions")
	// Records name the resource read (the patient segment is keyed, not
	// the raw id, so compare the type and resource id).
	tail := func(uri string) string { return uri[strings.LastIndex(uri[:strings.LastIndex(uri, "/")], "/"):] }
	recs := byClient["e2e-inspector-clinician"]
	if len(recs) == len(wantClin) {
		if r := recs[listPages]; len(r.URIs) != 1 || !strings.HasSuffix(r.URIs[0], tail(note)) {
			t.Errorf("read record URIs %v, want the note …%s", r.URIs, tail(note))
		}
		if r := recs[listPages+1]; len(r.URIs) != 1 || !strings.HasSuffix(r.URIs[0], tail(hiv)) || r.Reason == "not_found" {
			t.Errorf("denied read record: %v %s, want …%s denied by policy", r.URIs, r.Reason, tail(hiv))
		}
	}
	checkClientAudit(t, "e2e-inspector-billing", byClient["e2e-inspector-billing"], []string{"resources/read:allow:*"}, "sessions")
	if b := byClient["e2e-inspector-billing"]; len(b) == 1 && len(b[0].Obligations) == 0 {
		t.Error("the biller's read record names no minimization obligation")
	}
	if modernOK {
		checkClientAudit(t, "e2e-inspector-modern", byClient["e2e-inspector-modern"], wantModern, "")
	}
	if len(rejects) != 1 || rejects[0].Reason != "http_401,invalid_token,wrong_audience" || rejects[0].Outcome != "deny" {
		t.Errorf("the wrong-audience refusal was audited as %v", summarize(rejects))
	}
}
