package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Interoperability with real MCP clients installed from the project's
// lockfiles: the official TypeScript MCP SDK, both generations
// (e2e/tsclient, installed from its lockfile), scenario by scenario, over
// Streamable HTTP (2025-11-25 sessions, 2026-07-28 stateless) and stdio:
// e2e/tsclient/interop.mjs runs each scenario and reports it; this test
// keeps every one that passes passing. What a client refuses on its own
// (v2 sends no ping on 2026-07-28) is asserted as such.

type interopScenario struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	ProtocolVersion string `json:"protocolVersion"`
	OnExpired       *struct {
		Message string `json:"message"`
	} `json:"onExpired"`
	NewSession bool `json:"newSession"`
	RoundTrips *int `json:"roundTrips"`
}

// runInterop runs interop.mjs with args and env; onSubscribed, if set, is
// called once the client has subscribed. It returns the scenarios by name
// and the client's stderr.
func runInterop(t *testing.T, env []string, onSubscribed func(), args ...string) (map[string]interopScenario, string) {
	t.Helper()
	cmd := exec.Command("node", append([]string{"interop.mjs"}, args...)...)
	cmd.Dir = tsClientDir(t)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	errb := &syncBuf{}
	cmd.Stdout, cmd.Stderr = &out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	for waiting := onSubscribed != nil; ; {
		if waiting && strings.Contains(errb.String(), "interop: subscribed") {
			onSubscribed()
			waiting = false
		}
		select {
		case err = <-done:
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	if err != nil {
		t.Fatalf("interop.mjs %v: %v\nstdout: %s\nstderr: %s", args, err, out.String(), errb)
	}
	var o struct{ Scenarios []interopScenario }
	if err := json.Unmarshal(out.Bytes(), &o); err != nil {
		t.Fatalf("interop output: %v\n%s", err, out.String())
	}
	m := map[string]interopScenario{}
	for _, s := range o.Scenarios {
		m[s.Name] = s
	}
	return m, errb.String()
}

func TestInteropTypeScriptSDK(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	var text, blob, denied string
	for _, l := range d.manifest(t) {
		uri := l["uri"].(string)
		switch {
		case strings.Contains(fmt.Sprint(l["labels"]), "hiv"):
			denied = uri // the clinician may not read HIV-labelled resources
		case strings.Contains(uri, d.summary.EdgeCases["aged_92"]) && strings.HasPrefix(uri, "fhir://") && text == "":
			text = uri
		case strings.Contains(uri, d.summary.EdgeCases["aged_92"]) && strings.HasPrefix(uri, "image://") && blob == "":
			blob = uri
		}
	}
	common := []string{"--text", text, "--blob", blob, "--denied", denied, "--missing", missingURI(text),
		"--template", "fhir://{tenant}/patients/{patient}/{type}/{id}", "--argument", "type"}
	always := []string{"connect", "templates", "list-all-pages", "read-text", "read-blob", "read-denied",
		"read-missing", "read-malformed-uri", "read-not-a-uri", "read-non-ascii-uri", "read-empty-uri", "complete"}
	check := func(t *testing.T, got map[string]interopScenario, wantPV string, modern bool, extra ...string) {
		t.Helper()
		for _, n := range append(always, extra...) {
			if s, ok := got[n]; !ok || !s.OK {
				t.Errorf("scenario %s: %+v", n, s)
			}
		}
		if pv := got["connect"].ProtocolVersion; wantPV != "" && pv != wantPV {
			t.Errorf("negotiated %q, want %s", pv, wantPV)
		}
		// A denied read and a not-found read look the same to the client.
		if dn, nf := got["read-denied"].Error, got["read-missing"].Error; dn == nil || nf == nil || dn.Message != nf.Message || *dn.Code != *nf.Code {
			t.Errorf("denied %+v vs not found %+v", dn, nf)
		}
		// A URI with a non-ASCII character is refused for what is wrong
		// with it, at every revision: on 2026-07-28 the client sends the
		// Mcp-Name header in Base64 form, which custos compared undecoded
		// and answered -32020 "header mismatch".
		if e := got["read-non-ascii-uri"].Error; e == nil || e.Code == nil || *e.Code != -32602 || !strings.Contains(e.Message, "uri contains non-ascii characters") {
			t.Errorf("non-ASCII uri: %+v, want -32602 naming the non-ASCII characters", e)
		}
		// An empty URI is told so at every revision: on 2026-07-28 the
		// go-sdk answered -32020 "missing required Mcp-Name header", which
		// no client can send for an empty URI.
		if e := got["read-empty-uri"].Error; e == nil || e.Code == nil || *e.Code != -32602 || !strings.Contains(e.Message, "uri is empty") {
			t.Errorf("empty uri: %+v, want -32602 saying the uri is empty", e)
		}
		// v2 refuses ping on 2026-07-28 itself (the revision has no ping);
		// every earlier revision pings.
		if p := got["ping"]; p.OK == modern {
			t.Errorf("ping on modern=%v: %+v", modern, p)
		}
	}

	srv := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--page-size", "20", "--http-session-idle-timeout", "2s")
	env := []string{"CUSTOS_TOKEN=" + tok}
	update := func() {
		for _, l := range d.manifest(t) {
			if l["uri"] == text {
				c := d.seedFile(t, l["file"].(string))
				d.reimport(t, nil, l, bytes.Replace(c, []byte(`{`), []byte(`{"language":"en",`), 1))
				return
			}
		}
	}
	t.Run("http/v1", func(t *testing.T) {
		got, _ := runInterop(t, env, nil, append([]string{"--url", srv.url, "--sdk", "v1", "--expire-after-ms", "3500"}, common...)...)
		check(t, got, "2025-11-25", false, "expired-session")
		// The expired session is a 404 the SDK surfaces; a new initialize works.
		if e := got["expired-session"]; e.OnExpired == nil || !strings.Contains(e.OnExpired.Message, "session not found") || !e.NewSession {
			t.Errorf("expired session: %+v", e)
		}
	})
	t.Run("http/v2-2025-11-25", func(t *testing.T) {
		got, _ := runInterop(t, env, nil, append([]string{"--url", srv.url, "--sdk", "v2", "--protocol-version", "2025-11-25"}, common...)...)
		check(t, got, "2025-11-25", false)
	})
	t.Run("http/v2-2026-07-28", func(t *testing.T) {
		got, stderr := runInterop(t, env, update, append([]string{"--url", srv.url, "--sdk", "v2", "--protocol-version", "2026-07-28", "--subscribe", text}, common...)...)
		check(t, got, "2026-07-28", true, "subscribe-updated", "cache-hint-honoured", "templates-cached")
		// The client honours the cache hints: a read (ttlMs 0) goes to the
		// server again, the templates (ttlMs 60000) come from its cache.
		if r := got["cache-hint-honoured"].RoundTrips; r == nil || *r != 1 {
			t.Errorf("second read: %v round trips, want 1", r)
		}
		if r := got["templates-cached"].RoundTrips; r == nil || *r != 0 {
			t.Errorf("second templates list: %v round trips, want 0 (cached)", r)
		}
		// Closing the listen stream sends notifications/cancelled without
		// Mcp-Method: accepted, not a client error.
		if strings.Contains(stderr, "client error") {
			t.Errorf("client errors:\n%s", stderr)
		}
	})
	srv.stop(t)
	stdio := `["` + bin + `","serve","--dev","--data-dir","` + d.data + `","--stdio","--page-size","20"]`
	penv := []string{"CUSTOS_PRINCIPAL_FILE=" + d.principal("clinician")}
	t.Run("stdio/v1", func(t *testing.T) {
		got, _ := runInterop(t, penv, nil, append([]string{"--stdio-cmd", stdio, "--sdk", "v1"}, common...)...)
		check(t, got, "", false)
	})
	t.Run("stdio/v2-2026-07-28", func(t *testing.T) {
		got, _ := runInterop(t, penv, nil, append([]string{"--stdio-cmd", stdio, "--sdk", "v2", "--protocol-version", "2026-07-28"}, common...)...)
		check(t, got, "2026-07-28", true)
	})
}

// The MCP Inspector CLI (e2e/inspector) on what TestInspectorCLIOverHTTPS
// leaves out: resources/templates/list, a blob read and a malformed URI
// over plain HTTP at both eras, and resources/list over stdio at both.
// The CLI has no ping, completion or subscribe method.
func TestInteropInspectorCLI(t *testing.T) {
	node, launcher := inspectorCLI(t)
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	var blob string
	for _, l := range d.manifest(t) {
		if u := l["uri"].(string); strings.HasPrefix(u, "image://") && strings.Contains(u, d.summary.EdgeCases["aged_92"]) {
			blob = u
		}
	}
	type result struct {
		ResourceTemplates []struct{ URITemplate string }    `json:"resourceTemplates"`
		Resources         []struct{ URI string }            `json:"resources"`
		Contents          []struct{ MIMEType, Blob string } `json:"contents"`
	}
	run := func(t *testing.T, args ...string) (int, result, string) {
		t.Helper()
		cmd := exec.Command(node, append([]string{launcher, "--cli", "--stored-auth-only", "--format", "json", "--connect-timeout", "30000"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		code := 0
		if err := cmd.Run(); err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		var o struct{ Result result }
		if code == 0 {
			if err := json.Unmarshal(out.Bytes(), &o); err != nil {
				t.Fatalf("inspector %v: %v\n%s", args, err, out.String())
			}
		}
		return code, o.Result, errb.String()
	}
	srv := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--page-size", "20")
	listed := map[string]int{}
	for _, era := range []string{"legacy", "modern"} {
		t.Run("http/"+era, func(t *testing.T) {
			h := []string{srv.url, "--transport", "http", "--header", "Authorization: Bearer " + tok, "--protocol-era", era}
			if code, r, e := run(t, append(h, "--method", "resources/templates/list")...); code != 0 || len(r.ResourceTemplates) == 0 || r.ResourceTemplates[0].URITemplate != "fhir://{tenant}/patients/{patient}/{type}/{id}" {
				t.Errorf("templates: exit %d %+v %s", code, r, e)
			}
			code, r, e := run(t, append(h, "--method", "resources/read", "--uri", blob)...)
			if code != 0 || len(r.Contents) != 1 || r.Contents[0].MIMEType != "image/png" {
				t.Fatalf("blob read: exit %d %s", code, e)
			}
			if b, err := base64.StdEncoding.DecodeString(r.Contents[0].Blob); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
				t.Errorf("blob is not base64 PNG: %v", err)
			}
			if code, _, e := run(t, append(h, "--method", "resources/read", "--uri", "fhir://general-hospital/patients/../x")...); code != 1 || !strings.Contains(e, "invalid resource uri: uri has a dot segment") {
				t.Errorf("malformed URI: exit %d %s", code, e)
			}
			_, r, _ = run(t, append(h, "--method", "resources/list")...)
			listed[era] = len(r.Resources)
		})
	}
	srv.stop(t)
	for _, era := range []string{"legacy", "modern"} {
		t.Run("stdio/"+era, func(t *testing.T) {
			code, r, e := run(t, "--protocol-era", era, "-e", "CUSTOS_PRINCIPAL_FILE="+d.principal("clinician"), "--method", "resources/list",
				bin, "serve", "--dev", "--data-dir", d.data, "--stdio")
			if code != 0 || len(r.Resources) == 0 || len(r.Resources) != listed[era] {
				t.Errorf("stdio list: exit %d, %d resources (HTTP: %d) %.500s", code, len(r.Resources), listed[era], e)
			}
		})
	}
}
