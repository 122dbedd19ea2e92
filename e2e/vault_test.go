package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/secrets/vaulttest"
)

// vaultEnv is a provisioned real Vault and the environment the CLI uses to
// reach it with the least-privilege custos-server token.
type vaultEnv struct {
	srv  *vaulttest.Server
	prov *vaulttest.Provisioned
	env  []string
}

func startVault(t *testing.T, po vaulttest.ProvisionOptions) *vaultEnv {
	t.Helper()
	srv := vaulttest.Start(t, vaulttest.Options{})
	po.Dir = t.TempDir()
	p, err := srv.Provision(context.Background(), po)
	if err != nil {
		t.Fatal(err)
	}
	return &vaultEnv{srv: srv, prov: p, env: []string{"VAULT_ADDR=" + srv.Addr, "VAULT_TOKEN=" + p.Token}}
}

// newVaultDataset seeds and imports a data set encrypted at rest.
func newVaultDataset(t *testing.T, v *vaultEnv) *dataset {
	t.Helper()
	return newDatasetEnv(t, v.env)
}

// serveVault starts `custos serve` without --dev, logging in to Vault with
// AppRole, over HTTPS on a free loopback port.
func serveVault(t *testing.T, v *vaultEnv, d *dataset, tokens, secretIDFile string, wrapped bool, extra ...string) *served {
	t.Helper()
	anchor := filepath.Join(filepath.Dir(d.data), "anchor") // outlives restarts within a test
	if err := os.MkdirAll(anchor, 0o700); err != nil {
		t.Fatal(err)
	}
	// Without --dev custos serves HTTPS only, loopback included.
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile, time.Now().UnixNano())
	args := []string{"--listen", loopback, "--anchor-dir", anchor,
		"--tls-cert", certFile, "--tls-key", keyFile,
		"--tokens", tokens, "--page-size", "20", "--log-level", "debug",
		"--vault-role-id-file", v.prov.RoleIDFile, "--vault-secret-id-file", secretIDFile}
	if wrapped {
		args = append(args, "--vault-secret-id-wrapped")
	}
	// Only the address: serve must log in with AppRole, not a token.
	return serve(t, d, []string{"VAULT_ADDR=" + v.srv.Addr}, append(args, extra...)...)
}

func connect(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-vault", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// leakScanner looks for secrets in every encoding they could leak in.
type leakScanner struct{ needles map[string]string }

func newLeakScanner() *leakScanner { return &leakScanner{needles: map[string]string{}} }

func (l *leakScanner) secret(what, s string) {
	if len(s) >= 6 {
		l.needles[s] = what
	}
}

func (l *leakScanner) key(what string, k []byte) {
	l.secret(what+" (raw)", string(k))
	l.secret(what+" (hex)", hex.EncodeToString(k))
	l.secret(what+" (base64)", base64.StdEncoding.EncodeToString(k))
	l.secret(what+" (base64url)", base64.RawURLEncoding.EncodeToString(k))
}

// scan returns a description of every secret found in data.
func (l *leakScanner) scan(where string, data []byte) []string {
	var hits []string
	for n, what := range l.needles {
		if bytes.Contains(data, []byte(n)) {
			hits = append(hits, fmt.Sprintf("%s contains the %s", where, what))
		}
	}
	return hits
}

// TestVaultCanarySecretsNeverLeak serves an encrypted catalog with keys from
// a real Vault whose every secret is a recognizable canary, drives it with
// real clients (including URIs that carry credentials), and then scans every
// URI served, every response, the server log, /metrics and /readyz, its
// command line, the audit database, the catalog, every other file beside
// the data (checkpoints, anchors) and every export: no canary appears
// anywhere.
func TestVaultCanarySecretsNeverLeak(t *testing.T) {
	cursorKey := []byte("CANARY-cursor-key-0123456789abcd")
	auditKey := []byte("CANARY-audit-hmac-key-0123456789")
	v := startVault(t, vaulttest.ProvisionOptions{CursorKey: cursorKey, AuditKey: auditKey, WrapSecretID: true})
	d := newVaultDataset(t, v)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	clinTok := newToken(t, d.principal("clinician"), tokens)
	resTok := newToken(t, d.principal("researcher"), tokens)
	wrappedFile := filepath.Join(t.TempDir(), "secret-id.wrapped")
	if err := os.WriteFile(wrappedFile, []byte(v.prov.WrappedSecretID), 0o600); err != nil {
		t.Fatal(err)
	}
	opsFile := filepath.Join(t.TempDir(), "ops")
	s := serveVault(t, v, d, tokens, wrappedFile, true, "--ops-listen", loopback, "--ops-addr-file", opsFile)
	opsURL := s.waitAddr(t, opsFile)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}

	const pwCanary, queryCanary = "CANARYpassw0rd-e2e", "CANARYquerytoken-e2e"
	var responses bytes.Buffer // every response, as JSON
	var served []string        // every URI served
	ctx := context.Background()
	for _, tok := range []string{clinTok, resTok} {
		cs := connect(t, s.url, tok)
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			served = append(served, r.URI)
			json.NewEncoder(&responses).Encode(r)
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI})
			if err != nil {
				t.Fatalf("read %s: %v", r.URI, err)
			}
			json.NewEncoder(&responses).Encode(res)
		}
		good := served[0]
		for _, bad := range []string{
			strings.Replace(good, "://", "://admin:"+pwCanary+"@", 1),
			good + "?access_token=" + queryCanary,
		} {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: bad})
			if err == nil || !strings.Contains(err.Error(), "credentials are never accepted") {
				t.Fatalf("read with credentials in the URI: %v", err)
			}
			fmt.Fprintln(&responses, err.Error())
		}
	}
	if len(served) < 20 {
		t.Fatalf("only %d resources served; the scan would prove little", len(served))
	}
	ts := runTSClient(t, s.url, clinTok, served[0])
	tsJSON, _ := json.Marshal(ts)
	responses.Write(tsJSON)
	var ops bytes.Buffer // what the ops listener shows
	for _, path := range []string{"/metrics", "/readyz"} {
		_, body := httpGet(t, opsURL+path)
		ops.WriteString(body)
	}
	if !strings.Contains(ops.String(), "custos_keys_stale") {
		t.Fatalf("/metrics lacks custos_keys_stale; the scan would prove little:\n%s", ops.String())
	}
	s.stop(t)
	// Every file the server left beside the data (checkpoints, anchors).
	var files bytes.Buffer
	anchored := false
	filepath.WalkDir(filepath.Dir(d.data), func(path string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() && path != filepath.Join(d.data, "catalog.db") && path != d.audit() {
			if b, err := os.ReadFile(path); err == nil {
				files.Write(b)
				anchored = anchored || (strings.HasSuffix(path, filepath.Join("anchor", "checkpoints.jsonl")) && len(b) > 0)
			}
		}
		return nil
	})
	if !anchored {
		t.Fatal("no anchored checkpoint among the files beside the data; the scan would prove little")
	}

	// Exports, the audit database and the catalog, as files.
	jsonl := mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "jsonl")
	csv := mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "csv")
	auditDB, err := os.ReadFile(d.audit())
	if err != nil {
		t.Fatal(err)
	}
	catalogDB, err := os.ReadFile(filepath.Join(d.data, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}

	l := newLeakScanner()
	l.key("cursor key", cursorKey)
	l.key("audit HMAC key", auditKey)
	l.secret("Vault root token", v.srv.RootToken)
	l.secret("custos-server Vault token", v.prov.Token)
	l.secret("AppRole secret id", v.prov.SecretID)
	l.secret("AppRole role id", v.prov.RoleID)
	l.secret("response-wrapping token", v.prov.WrappedSecretID)
	l.secret("clinician bearer token", clinTok)
	l.secret("researcher bearer token", resTok)
	l.secret("password in a URI", pwCanary)
	l.secret("token in a URI query", queryCanary)

	// The scanner can fail: a planted canary is found.
	if hits := l.scan("self-test", []byte("x"+hex.EncodeToString(auditKey)+"x")); len(hits) != 1 {
		t.Fatalf("leak scanner self-test: %v", hits)
	}
	logs := s.stderr.String()
	if !strings.Contains(logs, `"msg":"audited"`) || !strings.Contains(logs, "vault keys loaded") {
		t.Fatalf("debug log lacks per-request and Vault lines; the scan would prove nothing:\n%s", logs)
	}
	var hits []string
	hits = append(hits, l.scan("a served URI", []byte(strings.Join(served, "\n")))...)
	hits = append(hits, l.scan("a response", responses.Bytes())...)
	hits = append(hits, l.scan("the server log", []byte(logs))...)
	hits = append(hits, l.scan("audit.db", auditDB)...)
	hits = append(hits, l.scan("the JSONL export", []byte(jsonl))...)
	hits = append(hits, l.scan("the CSV export", []byte(csv))...)
	hits = append(hits, l.scan("catalog.db", catalogDB)...)
	hits = append(hits, l.scan("/metrics or /readyz", ops.Bytes())...)
	hits = append(hits, l.scan("the server's command line", cmdline)...)
	hits = append(hits, l.scan("a file beside the data", files.Bytes())...)
	for _, h := range hits {
		t.Error(h)
	}

	// Encrypted at rest: no note body is in the catalog file, while every
	// note was served in full above.
	notes, _ := filepath.Glob(filepath.Join(d.seed, "notes", "*"))
	served0 := 0
	for _, n := range notes {
		body, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		mid := body[len(body)/3 : len(body)/3+min(48, len(body)/3)]
		if bytes.Contains(catalogDB, mid) {
			t.Errorf("catalog.db holds plaintext of %s", filepath.Base(n))
		}
		if js, _ := json.Marshal(string(mid)); bytes.Contains(responses.Bytes(), js[1:len(js)-1]) {
			served0++
		}
	}
	// The same probe finds the notes in the responses (the clinician reads
	// them unminimized), so its silence about catalog.db means something.
	if len(notes) == 0 || served0 == 0 {
		t.Fatalf("%d notes seeded, %d found in the responses: the at-rest check proves nothing", len(notes), served0)
	}

	// Records name the Vault key versions, never key bytes.
	recs := d.records(t)
	want := "audit-hmac=secret/custos/audit-hmac-key@1 blob-kek=transit/custos-blob-kek@1 cursor=secret/custos/cursor-key@1 signing=transit/custos-audit-signing@1"
	for _, r := range recs {
		if r.Dev || strings.Join(r.Keys, " ") != want {
			t.Fatalf("record %d: dev=%v keys=%v; want Vault key versions %q", r.Seq, r.Dev, r.Keys, want)
		}
	}
}

// TestVaultRotationWhileServing rotates every key while custos serves:
// new records name the new versions, cursors issued before the rotation
// still work, old blobs stay readable, reencrypt rewraps them, and the
// audit log verifies throughout.
func TestVaultRotationWhileServing(t *testing.T) {
	v := startVault(t, vaulttest.ProvisionOptions{})
	d := newVaultDataset(t, v)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	s := serveVault(t, v, d, tokens, v.prov.SecretIDFile, false, "--key-refresh", "200ms")
	cs := connect(t, s.url, tok)
	ctx := context.Background()

	page1, err := cs.ListResources(ctx, nil)
	if err != nil || page1.NextCursor == "" || len(page1.Resources) == 0 {
		t.Fatalf("first page: %v", err)
	}
	// The first page's resources of a patient (the tenant's reference
	// data, the payers' Organizations among it, names none): the auditor
	// looks the first one's patient up below.
	var firsts []*mcp.Resource
	for _, r := range page1.Resources {
		if strings.Contains(r.URI, "/patients/") {
			firsts = append(firsts, r)
		}
	}
	if len(firsts) < 3 {
		t.Fatalf("first page: %d resources of a patient, want 3 or more", len(firsts))
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: firsts[0].URI}); err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{v.prov.Layout.CursorKeyPath, v.prov.Layout.AuditKeyPath} {
		if _, err := v.srv.RotateKV(ctx, p, bytes.Repeat([]byte{0x5a}, 32)); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.srv.RotateTransit(ctx, v.prov.Layout.BlobKey); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.stderr.String(), "cursor=secret/custos/cursor-key@2") ||
		!strings.Contains(s.stderr.String(), "blob-kek=transit/custos-blob-kek@2") {
		if time.Now().After(deadline) {
			t.Fatalf("server did not pick up the rotation:\n%s", s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The cursor sealed with version 1 still opens; reads of blobs wrapped
	// by KEK version 1 still work.
	page2, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: page1.NextCursor})
	if err != nil {
		t.Fatalf("cursor issued before the rotation: %v", err)
	}
	for _, r := range append(firsts[1:3], page2.Resources[:2]...) {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI}); err != nil {
			t.Fatalf("read after rotation: %v", err)
		}
	}
	s.stop(t)

	// Rewrap every data key under KEK version 2, then serve again.
	out, errOut, code := custos(t, v.env, "store", "reencrypt", "--data-dir", d.data, "--json")
	if code != 0 {
		t.Fatalf("store reencrypt: exit %d\n%s%s", code, out, errOut)
	}
	var stats struct{ Blobs, Rewrapped int }
	if err := json.Unmarshal([]byte(out), &stats); err != nil || stats.Blobs == 0 || stats.Rewrapped != stats.Blobs {
		t.Fatalf("reencrypt after KEK rotation: %s (%v)", out, err)
	}
	catalogDB, _ := os.ReadFile(filepath.Join(d.data, "catalog.db"))
	if bytes.Contains(catalogDB, []byte("vault:v1:")) {
		t.Error("catalog.db still holds data keys wrapped by KEK version 1")
	}
	s2 := serveVault(t, v, d, tokens, v.prov.SecretIDFile, false)
	cs2 := connect(t, s2.url, tok)
	for _, r := range firsts[:3] {
		if _, err := cs2.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI}); err != nil {
			t.Fatalf("read after rewrap: %v", err)
		}
	}
	s2.stop(t)

	recs := d.records(t)
	first, last := strings.Join(recs[0].Keys, " "), strings.Join(recs[len(recs)-1].Keys, " ")
	if !strings.Contains(first, "cursor=secret/custos/cursor-key@1") || !strings.Contains(first, "blob-kek=transit/custos-blob-kek@1") {
		t.Errorf("first record keys %q", first)
	}
	for _, want := range []string{"cursor=secret/custos/cursor-key@2", "audit-hmac=secret/custos/audit-hmac-key@2", "blob-kek=transit/custos-blob-kek@2"} {
		if !strings.Contains(last, want) {
			t.Errorf("last record keys %q lack %s", last, want)
		}
	}

	// The auditor's tools with the least-privilege auditor token: lookup
	// values under both audit key versions match the records written before
	// and after the rotation; the verifier keys from Vault verify the
	// checkpoints Vault signed while serving.
	atok, err := v.srv.TokenWithPolicy(ctx, secrets.AuditorPolicyName, secrets.AuditorPolicyHCL)
	if err != nil {
		t.Fatal(err)
	}
	aenv := []string{"VAULT_ADDR=" + v.srv.Addr, "VAULT_TOKEN=" + atok}
	patient := ""
	for _, l := range d.lines(t) {
		if l.URI == firsts[0].URI {
			patient = l.Labels.Patient
		}
	}
	hout, errOut, code := custos(t, aenv, "audit", "hash", patient, "--data-dir", d.data, "--purpose", "PATRQT", "--json")
	var hash struct {
		Values []struct {
			Key   string `json:"audit_key"`
			Value string `json:"lookup_value"`
		} `json:"lookup_values"`
		KeyVersions struct{ Searched []string } `json:"key_versions"`
	}
	if code != 0 || json.Unmarshal([]byte(hout), &hash) != nil || len(hash.Values) != 2 ||
		strings.Join(hash.KeyVersions.Searched, " ") != "secret/custos/audit-hmac-key@2 secret/custos/audit-hmac-key@1" {
		t.Fatalf("audit hash with the auditor token: exit %d %s %s", code, hout, errOut)
	}
	hs := hash.Values
	seen := map[string]bool{}
	for _, r := range recs {
		for _, p := range r.Patients {
			seen[p] = true
		}
	}
	for _, h := range hs {
		if !seen[h.Value] {
			t.Errorf("lookup value under %s is in no record", h.Key)
		}
	}
	vkeys := filepath.Join(t.TempDir(), "vkeys")
	if _, errOut, code := custos(t, aenv, "audit", "pubkey", "--data-dir", d.data, "-o", vkeys); code != 0 {
		t.Fatalf("audit pubkey with the auditor token: exit %d %s", code, errOut)
	}
	anchor := filepath.Join(filepath.Dir(d.data), "anchor")
	if out := mustCustos(t, "audit", "verify", "--data-dir", d.data, "--anchor-dir", anchor, "--pubkey", vkeys); !strings.Contains(out, "consistent with") {
		t.Fatalf("verify against the Vault-signed checkpoints: %s", out)
	}
}

// TestVaultOutageFailsClosedAndRecovers stops Vault (SIGSTOP) under a
// serving custos: past the staleness limit every request is refused and
// audited; when Vault answers again requests succeed without a restart.
func TestVaultOutageFailsClosedAndRecovers(t *testing.T) {
	v := startVault(t, vaulttest.ProvisionOptions{})
	d := newVaultDataset(t, v)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	s := serveVault(t, v, d, tokens, v.prov.SecretIDFile, false,
		"--key-max-staleness", "2s", "--key-refresh", "300ms", "--vault-timeout", "300ms")
	cs := connect(t, s.url, tok)
	ctx := context.Background()
	page, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	uri := page.Resources[0].URI
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
		t.Fatal(err)
	}

	if err := v.srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			v.srv.Resume()
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil && strings.Contains(err.Error(), "keys unavailable") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reads still served 30 s into a Vault outage with a 2 s staleness limit (last: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := cs.ListResources(ctx, nil); err == nil || !strings.Contains(err.Error(), "keys unavailable") {
		t.Fatalf("list during the outage: %v", err)
	}

	v.srv.Resume()
	resumed = true
	deadline = time.Now().Add(30 * time.Second)
	for {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("reads still refused 30 s after Vault came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.stop(t)
	logs := s.stderr.String()
	if !strings.Contains(logs, "keys are stale; request refused") {
		t.Errorf("the refusals were not logged")
	}

	var stale, allowAfter int
	for _, r := range d.records(t) {
		if r.Outcome == audit.OutcomeError && r.Reason == "keys_stale" {
			stale++
		}
		if stale > 0 && r.Outcome == audit.OutcomeAllow {
			allowAfter++
		}
	}
	if stale < 2 || allowAfter == 0 {
		t.Fatalf("audit log: %d keys_stale refusals, %d allowed reads after them", stale, allowAfter)
	}
}

// TestVaultStartupRefusals: wrong policy, VAULT_SKIP_VERIFY or
// VAULT_AGENT_ADDR set, plaintext catalog, dev keys on an encrypted
// catalog; then the plaintext catalog is migrated and served.
func TestVaultStartupRefusals(t *testing.T) {
	v := startVault(t, vaulttest.ProvisionOptions{})
	ctx := context.Background()
	plain := newDataset(t) // imported without Vault: plaintext
	enc := newVaultDataset(t, v)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, plain.principal("clinician"), tokens)

	// A token whose policy lacks one rule: the error names path and rule.
	var weaker []string
	for _, block := range strings.Split(secretsPolicy(t), "path ") {
		if !strings.HasPrefix(block, `"transit/datakey/wrapped/`) {
			weaker = append(weaker, block)
		}
	}
	weak, err := v.srv.TokenWithPolicy(ctx, "custos-weaker", strings.Join(weaker, "path "))
	if err != nil {
		t.Fatal(err)
	}
	anchor := t.TempDir()
	serveArgs := func(d *dataset, extra ...string) []string {
		return append([]string{"serve", "--data-dir", d.data, "--stdio", "--principal-file", d.principal("clinician"), "--anchor-dir", anchor}, extra...)
	}
	_, errOut, code := custos(t, []string{"VAULT_ADDR=" + v.srv.Addr, "VAULT_TOKEN=" + weak}, serveArgs(enc)...)
	if code != 1 || !strings.Contains(errOut, `permission denied`) || !strings.Contains(errOut, `transit/datakey/wrapped/custos-blob-kek`) ||
		!strings.Contains(errOut, `capabilities = ["update"]`) || !strings.Contains(errOut, `"custos-server"`) || strings.Contains(errOut, weak) {
		t.Errorf("serve with a policy lacking datakey: exit %d\n%s", code, errOut)
	}
	// The Vault client library's environment cannot turn off TLS
	// verification or redirect custos to another Vault.
	for _, env := range []string{"VAULT_SKIP_VERIFY=true", "VAULT_AGENT_ADDR=" + v.srv.Addr} {
		name, _, _ := strings.Cut(env, "=")
		_, errOut, code = custos(t, append(append([]string(nil), v.env...), env), serveArgs(enc)...)
		if code != 2 || !strings.Contains(errOut, "$"+name+" is set") {
			t.Errorf("serve with %s: exit %d\n%s", env, code, errOut)
		}
	}
	// No external anchor: refused (a rolled-back audit.db would go unseen).
	_, errOut, code = custos(t, v.env, "serve", "--data-dir", enc.data, "--stdio", "--principal-file", enc.principal("clinician"))
	if code != 2 || !strings.Contains(errOut, "--anchor-dir is required") {
		t.Errorf("serve without --anchor-dir: exit %d\n%s", code, errOut)
	}
	// Plaintext catalog with Vault: refused, pointing at reencrypt.
	_, errOut, code = custos(t, v.env, serveArgs(plain)...)
	if code != 1 || !strings.Contains(errOut, "custos store reencrypt") {
		t.Errorf("serve of a plaintext catalog with Vault: exit %d\n%s", code, errOut)
	}
	// Encrypted catalog with --dev: refused.
	_, errOut, code = custos(t, nil, serveArgs(enc, "--dev")...)
	if code != 1 || !strings.Contains(errOut, "encrypted at rest") {
		t.Errorf("serve --dev of an encrypted catalog: exit %d\n%s", code, errOut)
	}
	for _, d := range []*dataset{plain, enc} {
		if _, err := os.Stat(d.audit()); err == nil {
			t.Errorf("a refused start created %s/audit.db", d.data)
		}
	}

	// Migrate the plaintext catalog, then it serves with Vault.
	out, errOut, code := custos(t, v.env, "store", "reencrypt", "--data-dir", plain.data, "--json")
	var stats struct{ Blobs, Converted int }
	if code != 0 || json.Unmarshal([]byte(out), &stats) != nil || stats.Converted == 0 || stats.Converted != stats.Blobs {
		t.Fatalf("store reencrypt of a plaintext catalog: exit %d %s %s", code, out, errOut)
	}
	s := serveVault(t, v, plain, tokens, v.prov.SecretIDFile, false)
	cs := connect(t, s.url, tok)
	page, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: page.Resources[0].URI}); err != nil {
		t.Fatalf("read from the migrated catalog: %v", err)
	}
	s.stop(t)
}

func secretsPolicy(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "secrets", "vault-policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestVaultDevReadmeCommand runs the README's "run against a real Vault"
// command in its smoke mode: provision, import encrypted, serve without
// --dev, read through an MCP client, verify the audit log, and look a
// patient up with the auditor environment it prints (the one printed
// before, a custos-server token, is refused patient lookups: they need
// custos-auditor, docs/vault.md). Its token expires (serve warns of one
// that never does).
func TestVaultDevReadmeCommand(t *testing.T) {
	bin := vaulttest.Binary(t)
	cmd := exec.Command("go", "run", "./tools/vaultdev", "--smoke", "--listen", "127.0.0.1:0", "--patients", "5")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), vaulttest.EnvBinary+"="+bin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run ./tools/vaultdev --smoke: %v\n%s\n%s", err, out.String(), errb.String())
	}
	for _, want := range []string{"no --dev: keys from Vault, AppRole login", "smoke: listed and read", "smoke: OK:",
		"auditor CLI (custos-auditor", "smoke: audit hash: hk1-"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("vaultdev output lacks %q:\n%s", want, out.String())
		}
	}
	// The production path it shows mints its token with an expiry, as
	// docs/operations.md ("Token files") asks: serve warns of one without.
	if strings.Contains(out.String()+errb.String(), "never expire") {
		t.Errorf("vaultdev's serve warns of a token that never expires:\n%s\n%s", out.String(), errb.String())
	}
}

// TestVaultSignedPolicyBundle: the security team signs a policy bundle with
// the Vault Transit key (their own least-privilege token); the server,
// without --dev, verifies it with the public keys it reads from Vault and
// serves it; the server's own token cannot sign.
func TestVaultSignedPolicyBundle(t *testing.T) {
	v := startVault(t, vaulttest.ProvisionOptions{})
	d := newVaultDataset(t, v)
	ctx := context.Background()
	signer, err := v.srv.TokenWithPolicy(ctx, secrets.PolicySignerPolicyName, secrets.PolicySignerHCL)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "policy.tar.gz")
	policyDir := filepath.Join(repo, "rego", "custos")
	out, errOut, code := custos(t, []string{"VAULT_ADDR=" + v.srv.Addr, "VAULT_TOKEN=" + signer}, "policy", "bundle", policyDir, "-o", bundle, "--sequence", "1", "--vault")
	if code != 0 || !strings.Contains(out, "signed by vault:transit/custos-policy-signing@v1") {
		t.Fatalf("policy bundle --vault: exit %d\n%s%s", code, out, errOut)
	}
	// The server's token may read the public key but not sign.
	_, errOut, code = custos(t, v.env, "policy", "bundle", policyDir, "-o", bundle+".x", "--sequence", "1", "--vault")
	if code != 1 || !strings.Contains(errOut, "transit/sign/custos-policy-signing") {
		t.Fatalf("signing with the server's token: exit %d\n%s", code, errOut)
	}

	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	s := serveVault(t, v, d, tokens, v.prov.SecretIDFile, false, "--policy-bundle", bundle, "--policy-key-vault")
	cs := connect(t, s.url, tok)
	if _, err := cs.ListResources(ctx, nil); err != nil {
		t.Fatal(err)
	}
	s.stop(t)
	var loads int
	for _, r := range d.records(t) {
		if r.Action == "policy/load" {
			loads++
		}
		if r.Action == "resources/list" && !strings.Contains(r.PolicyRevision, " bundle=sha256:") {
			t.Errorf("record %d: policy revision %q names no bundle", r.Seq, r.PolicyRevision)
		}
	}
	if loads != 1 {
		t.Fatalf("%d policy/load records, want 1", loads)
	}
}

// TestVaultPolicyKeyRotationReachesRunningServer: a running server verifies
// each candidate bundle with the policy key's versions as Vault holds them
// at that load. Before, they were read once at startup: after the security
// team rotated the Transit key, the bundle signed with the new version was
// rejected as signed by a key "not configured" until a restart, and a
// version withdrawn by raising min_decryption_version (a key that may have
// leaked) still verified bundles until a restart. Found probing the rollout
// (app.bundleKeys was called once, by openPolicy).
func TestVaultPolicyKeyRotationReachesRunningServer(t *testing.T) {
	v := startVault(t, vaulttest.ProvisionOptions{})
	d := newVaultDataset(t, v)
	ctx := context.Background()
	signerTok, err := v.srv.TokenWithPolicy(ctx, secrets.PolicySignerPolicyName, secrets.PolicySignerHCL)
	if err != nil {
		t.Fatal(err)
	}
	signerEnv := []string{"VAULT_ADDR=" + v.srv.Addr, "VAULT_TOKEN=" + signerTok}
	dir := t.TempDir()
	policyDir := filepath.Join(repo, "rego", "custos")
	sign := func(seq, wantKey string) string {
		t.Helper()
		f := filepath.Join(dir, "seq"+seq+".tar.gz")
		out, errOut, code := custos(t, signerEnv, "policy", "bundle", policyDir, "-o", f, "--sequence", seq, "--revision", "r"+seq, "--vault")
		if code != 0 || !strings.Contains(out, "signed by vault:transit/custos-policy-signing@"+wantKey) {
			t.Fatalf("policy bundle --sequence %s: exit %d\n%s%s", seq, code, out, errOut)
		}
		return f
	}
	// Signed with v1 before the rotation: 1 is served, 3 comes back later.
	seq1, seq3 := sign("1", "v1"), sign("3", "v1")
	bundle := filepath.Join(dir, "policy.tar.gz")
	copyFile(t, seq1, bundle)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	newToken(t, d.principal("clinician"), tokens)
	s := serveVault(t, v, d, tokens, v.prov.SecretIDFile, false, "--policy-bundle", bundle, "--policy-key-vault")
	waitLog := func(what string, n int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); strings.Count(s.stderr.String(), what) < n; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %q ×%d:\n%s", what, n, s.stderr.String())
			}
		}
	}
	rollOut := func(f string) {
		t.Helper()
		copyFile(t, f, bundle+".new")
		if err := os.Rename(bundle+".new", bundle); err != nil {
			t.Fatal(err)
		}
	}

	// The key is rotated; the bundle signed with v2 loads without a restart.
	if err := v.srv.RotateTransit(ctx, secrets.DefaultLayout.PolicyKey); err != nil {
		t.Fatal(err)
	}
	rollOut(sign("2", "v2"))
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.stderr.String(), `"bundle_revision":"r2"`); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(s.stderr.String(), `"msg":"policy candidate rejected`) || time.Now().After(deadline) {
			t.Fatalf("the bundle signed with the rotated key did not load:\n%s", s.stderr.String())
		}
	}

	// v1 is withdrawn (it may have leaked): a bundle it signed is refused,
	// whatever its sequence, and the v2 bundle keeps serving.
	cfg := secrets.DefaultLayout.TransitMount + "/keys/" + secrets.DefaultLayout.PolicyKey + "/config"
	if _, err := v.srv.Root().Logical().WriteWithContext(ctx, cfg, map[string]any{"min_decryption_version": 2}); err != nil {
		t.Fatal(err)
	}
	rollOut(seq3)
	waitLog(`"msg":"policy candidate rejected`, 1)
	if log := s.stderr.String(); strings.Contains(log, `"bundle_revision":"r3"`) || !strings.Contains(log, "custos-policy-signing@v1") {
		t.Fatalf("the bundle signed with the withdrawn version:\n%s", log)
	}
	s.stop(t)
	var loads []string
	for _, r := range d.records(t) {
		if r.Action == "policy/load" {
			loads = append(loads, r.Reason)
		}
	}
	if len(loads) != 2 || !strings.Contains(loads[1], "sequence=2") {
		t.Fatalf("policy/load records %q, want the bundles of sequence 1 and 2", loads)
	}
}

// TestVaultEncryptedReimportWhileServing imports a changed note into an
// encrypted catalog while custos serves it without --dev: the staged import
// encrypts the new blob under Vault's key-encryption key, the server swaps
// in the new catalog and serves the new version, and the new text never
// lands in catalog.db in plaintext.
func TestVaultEncryptedReimportWhileServing(t *testing.T) {
	v := startVault(t, vaulttest.ProvisionOptions{})
	d := newVaultDataset(t, v)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	s := serveVault(t, v, d, tokens, v.prov.SecretIDFile, false)
	cs := connect(t, s.url, tok)
	ctx := context.Background()

	// A note the clinician may read, and its manifest line.
	var line map[string]any
	for _, m := range d.manifest(t) {
		if !strings.HasPrefix(m["uri"].(string), "note://") {
			continue
		}
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: m["uri"].(string)}); err == nil {
			line = m
			break
		}
	}
	if line == nil {
		t.Fatal("no note the clinician can read")
	}
	uri, file := line["uri"].(string), line["file"].(string)

	const marker = "REIMPORTED-WHILE-SERVING-7f3a"
	if out := d.reimport(t, v.env, line, append(d.seedFile(t, file), []byte("\n"+marker+"\n")...)); !strings.Contains(out, "1 updated") {
		t.Fatalf("encrypted import while serving: %s", out)
	}

	// The server notices the new catalog within a poll or two.
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read during the swap: %v", err)
		}
		if strings.Contains(res.Contents[0].Text, marker) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new version was not served:\n%s", s.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.stop(t)
	catalogDB, err := os.ReadFile(filepath.Join(d.data, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(catalogDB, []byte(marker)) {
		t.Fatal("catalog.db holds the re-imported note in plaintext")
	}
}

// TestVaultSigningKeyRotationWhileServing: the Transit signing key is
// rotated under a serving custos (key refresh at its 1 min default). The
// checkpoints signed right after the rotation are made by the new version
// and anchored at once (they failed, "no signing key version 2", until the
// next key refresh), and the new version is logged; `audit verify` passes
// with a verifier file written after the rotation and fails with one written
// before it, saying that the signing key may have been rotated; serve
// restarts on the log whose last checkpoint the new version signed.
func TestVaultSigningKeyRotationWhileServing(t *testing.T) {
	v := startVault(t, vaulttest.ProvisionOptions{})
	d := newVaultDataset(t, v)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	s := serveVault(t, v, d, tokens, v.prov.SecretIDFile, false, "--checkpoint-interval", "100ms", "--checkpoint-every", "1")
	cs := connect(t, s.url, tok)
	ctx := context.Background()
	page, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	atok, err := v.srv.TokenWithPolicy(ctx, secrets.AuditorPolicyName, secrets.AuditorPolicyHCL)
	if err != nil {
		t.Fatal(err)
	}
	aenv := []string{"VAULT_ADDR=" + v.srv.Addr, "VAULT_TOKEN=" + atok}
	pubkey := func() string {
		t.Helper()
		f := filepath.Join(t.TempDir(), "vkeys")
		if _, errOut, code := custos(t, aenv, "audit", "pubkey", "--data-dir", d.data, "-o", f); code != 0 {
			t.Fatalf("audit pubkey: exit %d %s", code, errOut)
		}
		return f
	}
	before := pubkey()
	anchorFile := filepath.Join(filepath.Dir(d.data), "anchor", "checkpoints.jsonl")
	anchored := func() int {
		b, _ := os.ReadFile(anchorFile)
		return bytes.Count(b, []byte("\n"))
	}
	waitFor(t, func() bool { return anchored() > 0 })

	if err := v.srv.RotateTransit(ctx, v.prov.Layout.SigningKey); err != nil {
		t.Fatal(err)
	}
	n := anchored()
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: page.Resources[0].URI}); err != nil {
		t.Fatal(err)
	}
	// Well within the 1 min key refresh.
	deadline := time.Now().Add(10 * time.Second)
	for anchored() == n {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint anchored 10 s after a read that followed the signing key's rotation:\n%s", s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop(t)
	if logs := s.stderr.String(); strings.Contains(logs, "audit checkpoint failed") || !strings.Contains(logs, "signing=transit/custos-audit-signing@2") {
		t.Errorf("checkpoints failed after the rotation, or the new version is not logged:\n%s", logs)
	}

	anchor := filepath.Dir(anchorFile)
	after := pubkey()
	if out, errOut, code := custos(t, nil, "audit", "verify", "--data-dir", d.data, "--anchor-dir", anchor, "--pubkey", after); code != 0 {
		t.Fatalf("audit verify with the verifier keys written after the rotation: exit %d %s %s", code, out, errOut)
	}
	out, errOut, code := custos(t, nil, "audit", "verify", "--data-dir", d.data, "--anchor-dir", anchor, "--pubkey", before)
	if code == 0 || !strings.Contains(out+errOut, "before the signing key was rotated") {
		t.Errorf("audit verify with the verifier keys written before the rotation: exit %d %s %s", code, out, errOut)
	}
	s2 := serveVault(t, v, d, tokens, v.prov.SecretIDFile, false)
	cs2 := connect(t, s2.url, tok)
	if _, err := cs2.ReadResource(ctx, &mcp.ReadResourceParams{URI: page.Resources[1].URI}); err != nil {
		t.Fatalf("read after a restart on checkpoints signed by the new version: %v", err)
	}
	s2.stop(t)
}
