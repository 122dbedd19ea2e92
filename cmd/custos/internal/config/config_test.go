package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// want is one expected problem: the field it names and a part of its message.
type want struct{ field, msg string }

func problemsOf(t *testing.T, err error) Problems {
	t.Helper()
	if err == nil {
		return nil
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %T %v is not Problems", err, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
	}
	return ps
}

// checkProblems fails unless ps holds exactly the wanted problems (in any
// order), each naming its field.
func checkProblems(t *testing.T, ps Problems, wants []want) {
	t.Helper()
	used := make([]bool, len(ps))
	for _, w := range wants {
		found := false
		for i, p := range ps {
			if !used[i] && p.Field == w.field && strings.Contains(p.Message, w.msg) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("missing problem %s: ...%s...", w.field, w.msg)
		}
	}
	for i, p := range ps {
		if !used[i] {
			t.Errorf("unexpected problem: %s", p)
		}
	}
}

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		wants []want
		line  int // line of the first problem, if not 0
	}{
		{"misspelled field", "data_dir: /d\nhttp:\n  listn: 127.0.0.1:1\n", []want{{"http.listn", `unknown field "listn" (did you mean "listen"?)`}}, 3},
		{"unknown section", "htp:\n  listen: x\n", []want{{"htp", `did you mean "http"?`}}, 1},
		{"unknown far field", "frobnicate: 1\n", []want{{"frobnicate", "known here: audit, btg, data_dir"}}, 1},
		{"duplicate key", "dev: true\ndev: false\n", []want{{"dev", "defined twice (first on line 1)"}}, 2},
		{"wrong type int", "page_size: many\n", []want{{"page_size", "want an integer"}}, 1},
		{"wrong type bool", "dev: maybe\n", []want{{"dev", "want true or false"}}, 1},
		{"bare number duration", "http:\n  read_timeout: 30\n", []want{{"http.read_timeout", "want a Go duration"}}, 2},
		{"bad duration", "vault:\n  timeout: soon\n", []want{{"vault.timeout", "want a Go duration"}}, 2},
		{"roles not a list", "btg:\n  grant_roles: custos-btg\n", []want{{"btg.grant_roles", "want a list of strings"}}, 2},
		{"role not a string", "btg:\n  grant_roles: [[a]]\n", []want{{"btg.grant_roles[0]", "want a string"}}, 2},
		{"section not mapping", "tls: yes\n", []want{{"tls", "want a mapping of fields"}}, 1},
		{"leaf is list", "node: [a, b]\n", []want{{"node", "want a string, not a list"}}, 1},
		{"policy keys not list", "policy:\n  keys: k=f\n", []want{{"policy.keys", "want a list of {id, file}"}}, 2},
		{"policy key unknown field", "policy:\n  keys:\n    - id: a\n      pem: f\n", []want{{"policy.keys[0].pem", `unknown field "pem"`}}, 4},
		{"vault token key", "vault:\n  token: not-a-token-shape\n", []want{{"vault.token", "secrets never go in the configuration file"}}, 2},
		{"password key", "oauth:\n  client_secret: x\n", []want{{"oauth.client_secret", "secrets never go"}}, 2},
		{"vault token value", "node: hvs.CAESIJ0123456789abcdefghijklmnop\n", []want{{"node", "looks like a Vault token"}}, 1},
		{"legacy vault token value", "log:\n  level: s.ABCDEFGHIJKLMNOPQRSTUVWX\n", []want{{"log.level", "looks like a Vault token"}}, 2},
		{"jwt value", "oauth:\n  audience: eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln\n", []want{{"oauth.audience", "bearer token (JWT)"}}, 2},
		{"inline pem", "tls:\n  key_file: |\n    -----BEGIN PRIVATE KEY-----\n    AAAA\n", []want{{"tls.key_file", "inline PEM"}}, 2},
		{"url with password", "vault:\n  address: https://admin:pw@vault:8200\n", []want{{"vault.address", "URL carrying credentials"}}, 2},
		{"secret under unknown key", "extra: hvs.CAESIJ0123456789abcdefghijklmnop\n", []want{{"extra", "unknown field"}, {"extra", "looks like a Vault token"}}, 1},
		{"syntax error", "http:\n  listen: [\n", []want{{"", "did not find expected"}}, 0},
		{"two documents", "dev: true\n---\ndev: false\n", []want{{"", "more than one YAML document"}}, 0},
		{"not a mapping", "- a\n- b\n", []want{{"", "want a mapping of fields"}}, 1},
		{"several at once", "listen: x\nhttp:\n  rate_limt: 5\n  rate_burst: lots\n", []want{
			{"listen", `unknown field "listen"`}, {"http.rate_limt", `did you mean "rate_limit"?`}, {"http.rate_burst", "want an integer"},
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("c.yaml", []byte(tc.yaml))
			if f != nil {
				t.Errorf("Parse returned a File with an error")
			}
			ps := problemsOf(t, err)
			checkProblems(t, ps, tc.wants)
			if tc.line != 0 && len(ps) > 0 && ps[0].Line != tc.line {
				t.Errorf("line = %d, want %d (%s)", ps[0].Line, tc.line, ps[0])
			}
			for _, p := range ps {
				if p.File != "c.yaml" {
					t.Errorf("problem does not name the file: %s", p)
				}
				for _, secret := range []string{"hvs.CAES", "s.ABCDEF", "eyJhbGci", "BEGIN PRIVATE", "admin:pw"} {
					if strings.Contains(p.String(), secret) {
						t.Errorf("problem repeats a secret: %s", p)
					}
				}
			}
		})
	}
}

func TestProblemString(t *testing.T) {
	f, err := Parse("config.yaml", []byte("\n\ntls:\n  cert_file: /no/such/cert.pem\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = f.Validate(Options{CheckFiles: true})
	got := err.Error()
	for _, w := range []string{
		"config.yaml: line 4: tls.cert_file: file not found",
		"config.yaml: line 4: tls.cert_file: needs tls.key_file too",
		"2 configuration problems:",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("error %q lacks %q", got, w)
		}
	}
}

func TestParseEmptyAndValid(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "---\n", "~\n"} {
		f, err := Parse("c.yaml", []byte(src))
		if err != nil || f == nil {
			t.Fatalf("Parse(%q) = %v, %v", src, f, err)
		}
		if err := f.Validate(Options{}); err != nil {
			t.Errorf("empty file: %v", err)
		}
	}
	f, err := Parse("c.yaml", []byte("dev: true\nhttp:\n  listen: 127.0.0.1:0\n  read_timeout: 1m30s\npolicy:\n  keys:\n    - {id: a, file: a.pem}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !*f.Dev || *f.HTTP.Listen != "127.0.0.1:0" || *f.HTTP.ReadTimeout != 90*time.Second || f.Policy.Keys[0] != (PolicyKey{"a", "a.pem"}) {
		t.Errorf("decoded %+v", f)
	}
	if f.TLS.CertFile != nil || f.HTTP.RateLimit != nil {
		t.Errorf("absent fields are set")
	}
	if f.lines["http.read_timeout"] != 4 {
		t.Errorf("line of http.read_timeout = %d, want 4", f.lines["http.read_timeout"])
	}
}

// TestInspectPartial: an invalid file still yields its valid fields for the
// report, but never a field whose value looked like a secret or did not
// decode.
func TestInspectPartial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	src := "listn: x\npage_size: 900\nnode: hvs.CAESIJ0123456789abcdefghijklmnop\nhttp:\n  read_timeout: 30\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Inspect(path)
	if err == nil || f == nil {
		t.Fatalf("Inspect = %v, %v; want a partial File and problems", f, err)
	}
	if f.Node != nil || f.HTTP.ReadTimeout != nil {
		t.Errorf("partial File kept a secret-looking or undecodable value: node=%v read_timeout=%v", f.Node, f.HTTP.ReadTimeout)
	}
	ps := problemsOf(t, f.Validate(Options{}))
	checkProblems(t, ps, []want{{"page_size", "must be from 1 to 500, got 900"}})
	if _, err := Load(path); err == nil {
		t.Error("Load accepted an invalid file")
	}
}

func TestLoadMissingAndLarge(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(filepath.Join(dir, "none.yaml"))
	checkProblems(t, problemsOf(t, err), []want{{"", "file not found"}})
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxFileSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(big)
	checkProblems(t, problemsOf(t, err), []want{{"", "larger than"}})
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.pem")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	world := filepath.Join(dir, "world")
	if err := os.WriteFile(world, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("WORLDFILE", world, "FILE", file, "DIR", sub, "MISSING", filepath.Join(dir, "missing"))
	tests := []struct {
		name  string
		yaml  string
		opts  Options
		wants []want
	}{
		{"dev http loopback ok", "dev: true\nhttp:\n  listen: 127.0.0.1:8080\n", Options{}, nil},
		{"https anywhere ok", "http:\n  listen: 0.0.0.0:8443\ntls:\n  cert_file: FILE\n  key_file: FILE\n", Options{CheckFiles: true}, nil},
		{"plain http without dev", "http:\n  listen: 127.0.0.1:8080\n", Options{}, []want{{"http.listen", "plain HTTP is only served with dev"}}},
		{"plain http off loopback", "dev: true\nhttp:\n  listen: 10.0.0.1:8080\n", Options{}, []want{{"http.listen", "only served on a loopback address"}}},
		{"listen not host port", "dev: true\nhttp:\n  listen: localhost\n", Options{}, []want{{"http.listen", "want HOST:PORT"}}},
		{"listen bad port", "dev: true\nhttp:\n  listen: 127.0.0.1:99999\n", Options{}, []want{{"http.listen", "port must be"}}},
		{"cert without key", "tls:\n  cert_file: FILE\n", Options{}, []want{{"tls.cert_file", "needs tls.key_file too"}}},
		{"key without cert", "tls:\n  key_file: FILE\n", Options{}, []want{{"tls.key_file", "needs tls.cert_file too"}}},
		{"tls files missing", "tls:\n  cert_file: MISSING\n  key_file: DIR\n", Options{CheckFiles: true}, []want{{"tls.cert_file", "file not found"}, {"tls.key_file", "is a directory"}}},
		{"tls files unchecked", "tls:\n  cert_file: MISSING\n  key_file: MISSING\n", Options{}, nil},
		{"min version", "tls:\n  min_version: \"1.1\"\n", Options{}, []want{{"tls.min_version", `want "1.3"`}}},
		{"stdio and listen", "dev: true\nstdio:\n  enabled: true\nhttp:\n  listen: 127.0.0.1:1\n", Options{}, []want{{"stdio.enabled", "exactly one of stdio.enabled or http.listen"}}},
		{"http settings with stdio", "dev: true\nstdio:\n  enabled: true\nhttp:\n  rate_limit: -1\n  max_sessions_per_principal: 3\ntls:\n  min_version: \"1.2\"\n", Options{}, []want{
			{"http.rate_limit", "only used with http.listen"}, {"http.max_sessions_per_principal", "only used with http.listen"}, {"tls.min_version", "only used with http.listen"}}},
		{"principal without stdio", "stdio:\n  principal_file: FILE\n", Options{}, []want{{"stdio.principal_file", "only used with stdio.enabled"}}},
		{"oauth issuer alone", "dev: true\nhttp:\n  listen: 127.0.0.1:1\noauth:\n  issuer: https://idp\n", Options{}, []want{
			{"oauth.jwks_url", "required with the other oauth fields"}, {"oauth.audience", "required with the other oauth fields"}}},
		{"oauth and tokens", "dev: true\nhttp:\n  listen: 127.0.0.1:1\n  tokens_file: FILE\noauth:\n  issuer: https://idp\n  jwks_url: https://idp/keys\n  audience: https://me/mcp\n", Options{}, []want{
			{"http.tokens_file", "not both"}}},
		{"oauth urls", "oauth:\n  issuer: http://idp.example\n  jwks_url: ftp://idp/keys\n  audience: https://me/mcp#frag\n", Options{}, []want{
			{"oauth.issuer", "only on a loopback host"}, {"oauth.jwks_url", "want an absolute https:// URL"}, {"oauth.audience", "fragment"}}},
		{"oauth claim without oauth", "oauth:\n  claims:\n    roles: groups\n", Options{}, []want{{"oauth.claims.roles", "only used with oauth.issuer"}}},
		{"client claim without oauth", "oauth:\n  claims:\n    client: cid\n", Options{}, []want{{"oauth.claims.client", "only used with oauth.issuer"}}},
		{"client claim sub", "oauth:\n  issuer: https://idp\n  jwks_url: https://idp/k\n  audience: https://me/mcp\n  claims:\n    client: sub\n", Options{}, []want{{"oauth.claims.client", "registered JWT claim"}}},
		{"bad client claim", "oauth:\n  issuer: https://idp\n  jwks_url: https://idp/k\n  audience: https://me/mcp\n  claims:\n    client: \"c i d\"\n", Options{}, []want{{"oauth.claims.client", "without spaces"}}},
		{"oauth bad claim", "oauth:\n  issuer: https://idp\n  jwks_url: https://idp/k\n  audience: https://me/mcp\n  scopes:\n    read: \"a b\"\n", Options{}, []want{{"oauth.scopes.read", "without spaces"}}},
		{"dev with vault", "dev: true\nvault:\n  address: https://vault:8200\n  approle:\n    role_id_file: FILE\n", Options{}, []want{
			{"vault.address", "cannot be combined with dev"}, {"vault.approle.role_id_file", "cannot be combined with dev"}}},
		{"secret id readable by all", "vault:\n  approle:\n    role_id_file: WORLDFILE\n    secret_id_file: WORLDFILE\n", Options{CheckFiles: true}, []want{
			{"vault.approle.secret_id_file", "readable by every local user"}}},
		{"approle half", "vault:\n  approle:\n    secret_id_file: FILE\n", Options{}, []want{{"vault.approle.secret_id_file", "AppRole needs both"}}},
		{"wrapped without file", "vault:\n  approle:\n    secret_id_wrapped: true\n", Options{}, []want{{"vault.approle.secret_id_wrapped", "needs vault.approle.secret_id_file"}}},
		{"vault paths", "vault:\n  kv_mount: /secret/\n  cursor_key: a b\n  blob_key: ../x\n", Options{}, []want{
			{"vault.kv_mount", "want a Vault path"}, {"vault.cursor_key", "want a Vault path"}, {"vault.blob_key", "want a Vault path"}}},
		{"vault address scheme", "vault:\n  address: vault:8200\n", Options{}, []want{{"vault.address", "want an absolute https:// URL"}}},
		{"vault address plain http", "vault:\n  address: http://vault.internal:8200\n", Options{}, []want{{"vault.address", "only on a loopback host"}}},
		{"refresh vs staleness", "vault:\n  key_refresh: 20m\n  key_max_staleness: 15m\n", Options{}, []want{{"vault.key_refresh", "must be shorter than vault.key_max_staleness"}}},
		{"zero durations", "vault:\n  timeout: 0s\naudit:\n  checkpoint_interval: 0s\nhttp:\n  read_header_timeout: 0s\n  write_timeout: -1s\n", Options{}, []want{
			{"vault.timeout", "more than 0"}, {"audit.checkpoint_interval", "more than 0"}, {"http.read_header_timeout", "more than 0"}, {"http.write_timeout", "must not be negative"}}},
		{"scrub schedule", "audit:\n  scrub_interval: 10ms\n  scrub_rate: 0\n", Options{}, []want{
			{"audit.scrub_interval", "1s or more"}, {"audit.scrub_rate", "1 or more records per second"}}},
		{"auditor share", "audit:\n  auditor_cpu: 0\n", Options{}, []want{{"audit.auditor_cpu", "must be more than 0 (a share of one CPU; 1 or more: not paced), got 0"}}},
		{"auditor share negative", "audit:\n  auditor_cpu: -0.5\n", Options{}, []want{{"audit.auditor_cpu", "got -0.5"}}},
		{"header over read", "http:\n  read_header_timeout: 1m\n  read_timeout: 30s\n", Options{}, []want{{"http.read_header_timeout", "must not exceed"}}},
		{"ranges", "page_size: 0\nhttp:\n  rate_limit: -1\n  rate_burst: 0\n  max_header_bytes: 10\n  max_request_body_bytes: 2000000\naudit:\n  checkpoint_every: 0\n", Options{}, []want{
			{"page_size", "1 to 500"}, {"http.rate_limit", "0 (off) or more"}, {"http.rate_burst", "1 or more"}, {"http.max_header_bytes", "from 4096"},
			{"http.max_request_body_bytes", "MCP handler's own limit"}, {"audit.checkpoint_every", "1 or more"}}},
		{"abuse limits", "http:\n  max_sessions_per_principal: 0\n  max_connections: 0\n  refusals_per_source: -1\n  refusal_window: 0s\naudit:\n  disk_low_watermark: 1000\n  disk_reserve: 2000\n", Options{}, []want{
			{"http.max_sessions_per_principal", "1 or more"}, {"http.max_connections", "1 or more"}, {"http.refusals_per_source", "1 or more"}, {"http.refusal_window", "more than 0"},
			{"audit.disk_reserve", "must not exceed audit.disk_low_watermark"}}},
		{"jwks staleness", "dev: true\nhttp:\n  listen: 127.0.0.1:1\noauth:\n  issuer: https://idp.test\n  jwks_url: https://idp.test/jwks\n  audience: https://custos.test/mcp\n  jwks_max_staleness: 1m\n", Options{}, []want{
			{"oauth.jwks_max_staleness", "more than the JWKS refresh interval"}}},
		{"jwks staleness without oauth", "oauth:\n  jwks_max_staleness: 48h\n", Options{}, []want{
			{"oauth.jwks_max_staleness", "only used with oauth.issuer"}}},
		{"trusted proxies", "http:\n  trusted_proxies: [10.0.0.0/8, 0.0.0.0/0, 10.0.0.1/8, proxy.internal]\n", Options{}, []want{
			{"http.trusted_proxies", "every client"}}},
		{"trusted proxy header unknown", "dev: true\nhttp:\n  listen: 127.0.0.1:1\n  trusted_proxies: [10.0.0.0/8]\n  trusted_proxy_header: x-real-ip\n", Options{}, []want{
			{"http.trusted_proxy_header", `unknown forwarding header "x-real-ip": want forwarded or x-forwarded-for`}}},
		{"trusted proxy header without proxies", "dev: true\nhttp:\n  listen: 127.0.0.1:1\n  trusted_proxy_header: forwarded\n", Options{}, []want{
			{"http.trusted_proxy_header", "only used with http.trusted_proxies"}}},
		{"origin names", "node: \"a b\"\naudit:\n  deployment: x+y\n", Options{}, []want{{"node", "checkpoint origin"}, {"audit.deployment", "checkpoint origin"}}},
		{"empty strings", "node: \"\"\ndata_dir: \"\"\n", Options{}, []want{{"node", "must not be empty"}, {"data_dir", "must not be empty"}}},
		{"policy dir without dev", "policy:\n  dir: DIR\n", Options{}, []want{{"policy.dir", "development only"}}},
		{"policy dir and bundle", "dev: true\npolicy:\n  dir: DIR\n  bundle: FILE\n  keys: [{id: a, file: FILE}]\n", Options{}, []want{{"policy.dir", "not both"}}},
		{"bundle without keys", "policy:\n  bundle: FILE\n", Options{}, []want{{"policy.bundle", "signature verification is mandatory"}}},
		{"keys without bundle", "policy:\n  keys: [{id: a, file: FILE}]\n", Options{}, []want{{"policy.keys", "only used with policy.bundle"}}},
		{"min sequence without bundle", "dev: true\npolicy:\n  min_sequence: 5\n", Options{}, []want{{"policy.min_sequence", "only used with policy.bundle"}}},
		{"negative min sequence", "policy:\n  bundle: FILE\n  keys: [{id: a, file: FILE}]\n  min_sequence: -1\n", Options{}, []want{{"policy.min_sequence", "from 1 to 9007199254740991"}}},
		{"min sequence over 2^53-1", "policy:\n  bundle: FILE\n  keys: [{id: a, file: FILE}]\n  min_sequence: 9007199254740992\n", Options{}, []want{{"policy.min_sequence", "from 1 to 9007199254740991"}}},
		{"policy keys bad", "policy:\n  bundle: FILE\n  keys:\n    - {id: a, file: MISSING}\n    - {id: a, file: FILE}\n    - {id: \"\", file: \"\"}\n", Options{CheckFiles: true}, []want{
			{"policy.keys[0].file", "file not found"}, {"policy.keys[1].id", "appears twice"}, {"policy.keys[2].id", "want a key id"}, {"policy.keys[2].file", "want the PEM file"}}},
		{"vault key with dev", "dev: true\npolicy:\n  bundle: FILE\n  vault_key: true\n", Options{}, []want{{"policy.vault_key", "needs Vault"}}},
		{"btg rules", "btg:\n  max_ttl: 720h\n  grant_roles: [custos-btg, \"ed supervisor\"]\n", Options{}, []want{
			{"btg.max_ttl", "at most 24h0m0s"}, {"btg.grant_roles[1]", "without spaces"}}},
		{"btg zero ttl", "btg:\n  max_ttl: 0s\n", Options{}, []want{{"btg.max_ttl", "more than 0"}}},
		{"anchor is data dir", "data_dir: DIR\naudit:\n  anchor_dir: DIR/\n", Options{}, []want{{"audit.anchor_dir", "must not be the data directory"}}},
		{"anchor missing", "audit:\n  anchor_dir: MISSING\n", Options{CheckFiles: true}, []want{{"audit.anchor_dir", "directory not found"}}},
		{"log", "log:\n  level: loud\n  format: xml\n", Options{}, []want{{"log.level", "want debug"}, {"log.format", "want json"}}},
		{"ops", "dev: true\nhttp:\n  listen: 127.0.0.1:1\nops:\n  listen: 127.0.0.1:1\n", Options{}, []want{{"ops.listen", "must differ from http.listen"}}},
		{"ops port 0 twice", "dev: true\nhttp:\n  listen: 127.0.0.1:0\nops:\n  listen: 127.0.0.1:0\n", Options{}, nil},
		{"ops addr file alone", "ops:\n  addr_file: FILE\n", Options{}, []want{{"ops.addr_file", "only used with ops.listen"}}},
		{"addr file dir missing", "dev: true\nhttp:\n  listen: 127.0.0.1:1\n  addr_file: MISSING/url\n", Options{CheckFiles: true}, []want{{"http.addr_file", "directory does not exist"}}},
		{"complete empty", "", Options{Complete: true, Getenv: func(string) string { return "" }}, []want{
			{"data_dir", "required"}, {"http.listen", "required"}, {"audit.anchor_dir", "required without dev"}, {"vault.address", "required without dev"}}},
		{"complete http needs identity", "dev: true\ndata_dir: DIR\nhttp:\n  listen: 127.0.0.1:1\n", Options{Complete: true, CheckFiles: true}, []want{{"http.tokens_file", "required with http.listen"}}},
		{"complete stdio needs principal", "dev: true\ndata_dir: DIR\nstdio:\n  enabled: true\n", Options{Complete: true, Getenv: func(string) string { return "" }}, []want{{"stdio.principal_file", "required with stdio.enabled"}}},
		{"complete vault from env", "data_dir: DIR\nstdio:\n  enabled: true\n  principal_file: FILE\naudit:\n  anchor_dir: /elsewhere\n", Options{Complete: true, Getenv: func(k string) string {
			if k == "VAULT_ADDR" {
				return "https://vault:8200"
			}
			return ""
		}}, nil},
		{"complete data dir missing", "dev: true\ndata_dir: MISSING\nstdio:\n  enabled: true\n  principal_file: FILE\n", Options{Complete: true, CheckFiles: true}, []want{{"data_dir", "directory not found"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("c.yaml", []byte(r.Replace(tc.yaml)))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			ps := problemsOf(t, f.Validate(tc.opts))
			checkProblems(t, ps, tc.wants)
			for _, p := range ps {
				if p.File != "c.yaml" || (p.Field != "" && !strings.HasPrefix(p.String(), "c.yaml: ")) {
					t.Errorf("problem not located in the file: %s", p)
				}
			}
		})
	}
}

func TestFieldsMapOneToOne(t *testing.T) {
	seen := map[string]string{}
	for _, f := range Fields() {
		if prev, dup := seen[f.Flag]; dup {
			t.Errorf("flag --%s stands for both %s and %s", f.Flag, prev, f.Path)
		}
		seen[f.Flag] = f.Path
		if fl, ok := FlagFor(f.Path); !ok || fl != f.Flag {
			t.Errorf("FlagFor(%s) = %q, %v", f.Path, fl, ok)
		}
		if p, ok := FieldFor(f.Flag); !ok || p != f.Path {
			t.Errorf("FieldFor(%s) = %q, %v", f.Flag, p, ok)
		}
	}
	if len(seen) < 50 {
		t.Errorf("only %d fields", len(seen))
	}
}

// flagSet registers a few serve flags with their serve defaults.
func flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.String("listen", "", "")
	fs.Bool("dev", false, "")
	fs.Bool("tls12", false, "")
	fs.String("tls-cert", "", "")
	fs.String("tls-key", "", "")
	fs.Float64("rate-limit", 100, "")
	fs.Duration("http-read-timeout", 30*time.Second, "")
	fs.StringArray("policy-key", nil, "")
	fs.String("policy-bundle", "", "")
	fs.Duration("btg-max-ttl", 4*time.Hour, "")
	fs.StringArray("btg-grant-role", nil, "")
	fs.String("vault-addr", "", "")
	return fs
}

func TestApplyPrecedence(t *testing.T) {
	fs := flagSet()
	if err := fs.Parse([]string{"--listen", "127.0.0.1:9", "--policy-key", "cli=cli.pem"}); err != nil {
		t.Fatal(err)
	}
	f, err := Parse("c.yaml", []byte(`dev: true
http:
  listen: 127.0.0.1:1
  rate_limit: 0
tls:
  min_version: "1.2"
policy:
  bundle: b.tar.gz
  keys: [{id: file, file: file.pem}]
btg:
  max_ttl: 1h
  grant_roles: [custos-btg, ed-supervisor]
`))
	if err != nil {
		t.Fatal(err)
	}
	eff, err := Apply(fs, f)
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) string { return fs.Lookup(name).Value.String() }
	keys, _ := fs.GetStringArray("policy-key")
	roles, _ := fs.GetStringArray("btg-grant-role")
	if o := eff.AppOptions(func(string) string { return "" }); o.BreakGlass.MaxTTL != time.Hour || strings.Join(o.BreakGlass.GrantRoles, ",") != "custos-btg,ed-supervisor" {
		t.Errorf("break-glass options: %+v", o.BreakGlass)
	}
	for _, c := range []struct{ name, got, want string }{
		{"listen (flag wins)", get("listen"), "127.0.0.1:9"},
		{"rate-limit (file's 0 is not the default)", get("rate-limit"), "0"},
		{"dev (file)", get("dev"), "true"},
		{"tls12 (file 1.2)", get("tls12"), "true"},
		{"http-read-timeout (default)", get("http-read-timeout"), "30s"},
		{"policy-key (flag list replaces file list)", strings.Join(keys, ","), "cli=cli.pem"},
		{"btg-max-ttl (file)", get("btg-max-ttl"), "1h0m0s"},
		{"btg-grant-role (file list)", strings.Join(roles, ","), "custos-btg,ed-supervisor"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if !eff.fromFlag["http.listen"] || eff.fromFlag["dev"] || eff.fromFlag["http.rate_limit"] {
		t.Errorf("sources: %v", eff.fromFlag)
	}
	if eff.HTTP.ReadTimeout != nil {
		t.Errorf("a default flag appears in the effective File")
	}
	// A problem with a value from the command line names the flag; one
	// from the file names the field and line.
	fs2 := flagSet()
	if err := fs2.Parse([]string{"--tls-cert", "c.pem"}); err != nil {
		t.Fatal(err)
	}
	f2, _ := Parse("c.yaml", []byte("dev: true\n\nhttp:\n  listen: 127.0.0.1:1\n  rate_limit: -3\n"))
	eff2, err := Apply(fs2, f2)
	if err != nil {
		t.Fatal(err)
	}
	ps := problemsOf(t, eff2.Validate(Options{}))
	var got []string
	for _, p := range ps {
		got = append(got, p.String())
	}
	wantStr := []string{
		"c.yaml: line 5: http.rate_limit: must be 0 (off) or more, got -3",
		"--tls-cert: needs tls.key_file (--tls-key) too",
	}
	for _, w := range wantStr {
		if !strings.Contains(strings.Join(got, "\n"), w) {
			t.Errorf("problems %q lack %q", got, w)
		}
	}
}

func TestApplyRefusesLossyValues(t *testing.T) {
	fs := flagSet()
	f, err := Parse("c.yaml", []byte("tls:\n  min_version: \"1.0\"\npolicy:\n  keys: [{id: \"a=b\", file: f}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Apply(fs, f)
	checkProblems(t, problemsOf(t, err), []want{{"tls.min_version", `want "1.3"`}, {"policy.keys", "without '='"}})
	if fs.Lookup("tls12").Changed || fs.Lookup("policy-key").Changed {
		t.Error("a refused value was applied")
	}
}

func TestSettingsNoCredentials(t *testing.T) {
	fs := flagSet()
	eff, err := Apply(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"VAULT_ADDR": "https://user:pw@vault:8200"}
	ss := Settings(fs, eff, func(k string) string { return env[k] })
	var addr *Setting
	for i := range ss {
		if ss[i].Field == "vault.address" {
			addr = &ss[i]
		}
		if ss[i].Field == "tls.min_version" && ss[i].Value != "1.3" {
			t.Errorf("tls.min_version = %q", ss[i].Value)
		}
	}
	if addr == nil || addr.Source != "environment ($VAULT_ADDR)" || strings.Contains(addr.Value, "pw") {
		t.Errorf("vault.address setting = %+v", addr)
	}
}

func TestParseRefusesAliases(t *testing.T) {
	for _, src := range []string{
		"&n\nhttp: *n\n", // a cycle: must not recurse forever
		"dev: &n [*n]\n",
		"node: &n x\naudit:\n  deployment: *n\n",
		"http:\n  <<: {listen: 127.0.0.1:1}\n",
	} {
		f, err := Parse("c.yaml", []byte(src))
		if f != nil || err == nil || !strings.Contains(err.Error(), "not supported") {
			t.Errorf("Parse(%q) = %v, %v; want refused", src, f, err)
		}
	}
}

// --http-trusted-proxy is repeatable and takes comma-separated lists; the
// file's list maps the same way.
func TestTrustedProxiesMapping(t *testing.T) {
	fs := flagSet()
	fs.StringArray("http-trusted-proxy", nil, "")
	if err := fs.Parse([]string{"--listen", "127.0.0.1:9", "--http-trusted-proxy", "10.0.0.0/8, 192.0.2.7", "--http-trusted-proxy", "2001:db8::/32"}); err != nil {
		t.Fatal(err)
	}
	f, err := Parse("c.yaml", []byte("dev: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	eff, err := Apply(fs, f)
	if err != nil {
		t.Fatal(err)
	}
	o := eff.AppOptions(func(string) string { return "" })
	if o.HTTP == nil || strings.Join(o.HTTP.TrustedProxies, " ") != "10.0.0.0/8 192.0.2.7 2001:db8::/32" {
		t.Fatalf("trusted proxies from flags: %+v", o.HTTP)
	}
	f2, err := Parse("c.yaml", []byte("dev: true\nhttp:\n  listen: 127.0.0.1:1\n  trusted_proxies: [10.20.0.0/24]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o := f2.AppOptions(func(string) string { return "" }); o.HTTP == nil || strings.Join(o.HTTP.TrustedProxies, " ") != "10.20.0.0/24" {
		t.Fatalf("trusted proxies from the file: %+v", o.HTTP)
	}
	f3, err := Parse("c.yaml", []byte("dev: true\nhttp:\n  listen: 127.0.0.1:1\n  trusted_proxies: [10.20.0.0/24]\n  trusted_proxy_header: forwarded\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o := f3.AppOptions(func(string) string { return "" }); o.HTTP == nil || o.HTTP.TrustedProxyHeader != "forwarded" {
		t.Fatalf("trusted proxy header from the file: %+v", o.HTTP)
	}
}
