package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

// fixture is a data directory with an imported synthetic catalog, and the
// seed it came from (principals under seed/principals).
type fixture struct {
	data, seed string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	f := fixture{data: filepath.Join(dir, "data"), seed: filepath.Join(dir, "seed")}
	if _, err := synth.Generate(ctx, f.seed, synth.Options{Patients: 6, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(f.data, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(f.data, app.CatalogFile), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(ctx, f.seed, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

// tokens maps token "clinician-token" to the seed's clinician.
func (f fixture) tokens(t *testing.T) *server.Tokens {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(f.seed, "principals", "clinician.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(server.TokenFile{Tokens: []server.TokenEntry{{TokenSHA256: server.HashToken("clinician-token"), Principal: raw}}})
	tok, err := server.ParseTokenFile(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestValidateReportsEveryProblem: one Validate names every problem, each by
// its key, and none of them opens anything.
func TestValidateReportsEveryProblem(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	o := app.Options{
		DataDir:        missing,
		PageSize:       900,
		Node:           "a b",
		Policy:         app.PolicyOptions{Dir: missing, Bundle: "b.tar.gz"},
		Stdio:          &app.StdioOptions{},
		HTTP:           &app.HTTPOptions{Listen: "10.0.0.1:8080", CertFile: "c.pem"},
		Ops:            app.OpsOptions{AddrFile: "ops.url"},
		BreakGlass:     app.BreakGlassOptions{MaxTTL: 720 * time.Hour, GrantRoles: []string{"btg-operator", "ed supervisor"}},
		AuditRetention: -time.Hour,
		AuditSegments:  app.AuditSegmentOptions{RollSize: 4096, RollPeriod: time.Second, ArchiveDir: missing},
	}
	err := o.Validate()
	if !errors.Is(err, app.ErrInvalid) {
		t.Fatalf("Validate = %v, want ErrInvalid", err)
	}
	var ps app.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Validate returned %T", err)
	}
	for _, want := range []struct{ key, msg string }{
		{"data_dir", "directory not found"},
		{"page_size", "from 1 to 500, got 900"},
		{"node", "checkpoint origin"},
		{"policy.dir", "not both"},
		{"policy.dir", "development only"},
		{"policy.bundle", "signature verification is mandatory"},
		{"stdio.enabled", "exactly one of stdio.enabled or http.listen"},
		{"stdio.principal_file", "required"},
		{"http.tokens_file", "required with http.listen"},
		{"tls.cert_file", "needs tls.key_file too"},
		{"audit.anchor_dir", "required without dev"},
		{"vault.address", "required without dev"},
		{"ops.addr_file", "only used with ops.listen"},
		{"btg.max_ttl", "at most 24h0m0s"},
		{"btg.grant_roles[1]", "without spaces"},
		{"audit.retention", "more than 0"},
		{"audit.roll_size", "65536 bytes or more, got 4096"},
		{"audit.roll_period", "1m0s or more, got 1s"},
		{"audit.archive_dir", "must not be the data directory"},
	} {
		found := false
		for _, p := range ps {
			found = found || p.Key == want.key && strings.Contains(p.Message, want.msg)
		}
		if !found {
			t.Errorf("no problem %s: ...%s... in\n%v", want.key, want.msg, err)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Validate created %s", missing)
	}
	// Open refuses the same options with the same problems.
	if _, err := app.Open(context.Background(), o); !errors.Is(err, app.ErrInvalid) {
		t.Errorf("Open = %v, want ErrInvalid", err)
	}
}

// TestCheckNamesAndGiven: messages name other options as the caller
// names them, and a given zero is checked rather than taken as default.
func TestCheckNamesAndGiven(t *testing.T) {
	o := app.Options{DataDir: t.TempDir(), Dev: true, HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", TokensFile: "t.json", CertFile: "c.pem"}}
	flags := map[string]string{"tls.key_file": "--tls-key"}
	ps := o.Check(app.CheckOptions{SkipFiles: true, Name: func(k string) string { return flags[k] }, Given: func(k string) bool { return k == "page_size" }})
	var got []string
	for _, p := range ps {
		got = append(got, p.String())
	}
	want := []string{"page_size: must be from 1 to 500, got 0", "tls.cert_file: needs --tls-key too"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestServeHTTP assembles a dev App over loopback HTTP, reads through a
// real go-sdk MCP client, scrapes the metrics (custos_checkpoint_size
// reaches the audit records written), and verifies the audit log.
func TestServeHTTP(t *testing.T) {
	f := newFixture(t)
	audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
	addrFile := filepath.Join(t.TempDir(), "url")
	a, err := app.Open(context.Background(), app.Options{
		DataDir: f.data, Dev: true, Node: "test", Version: "test",
		Checkpoints: app.CheckpointOptions{Every: 1, Interval: 20 * time.Millisecond},
		HTTP:        &app.HTTPOptions{Listen: "127.0.0.1:0", AddrFile: addrFile, Tokens: f.tokens(t)},
		Ops:         app.OpsOptions{Listen: "127.0.0.1:0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if b, err := os.ReadFile(addrFile); err != nil || strings.TrimSpace(string(b)) != a.URL() {
		t.Errorf("addr file = %q, %v; want %s", b, err, a.URL())
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "app-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.URL(), HTTPClient: &http.Client{Transport: bearer{"clinician-token"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	page, err := cs.ListResources(ctx, nil)
	if err != nil || len(page.Resources) == 0 {
		t.Fatalf("list: %v, %v", page, err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: page.Resources[0].URI}); err != nil {
		t.Fatalf("read: %v", err)
	}
	cs.Close()
	head, _ := a.AuditLog().Head()
	if head < 2 {
		t.Fatalf("audit head %d after a list and a read", head)
	}

	// Every record is under an anchored checkpoint soon (Every: 1).
	re := regexp.MustCompile(`(?m)^custos_checkpoint_size (\S+)$`)
	var size float64
	for deadline := time.Now().Add(10 * time.Second); size < float64(head) && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(a.OpsURL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m := re.FindSubmatch(body); m != nil {
			size, _ = strconv.ParseFloat(string(m[1]), 64)
		}
	}
	if size < float64(head) {
		t.Errorf("custos_checkpoint_size = %v, want at least %d (the records written)", size, head)
	}
	resp, err := http.Get(a.OpsURL() + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	// The retention period (six years by default) and the oldest record's
	// age are details of /readyz.
	var ready struct {
		Details struct {
			Retention app.AuditRetention `json:"audit_retention"`
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	ret := ready.Details.Retention
	if err != nil || ret.Period != app.DefaultRetention.String() || ret.PeriodDays != 2191.5 || ret.Records < head ||
		ret.OldestRecord.IsZero() || time.Since(ret.OldestRecord) > time.Minute || ret.PastRetention || ret.DeletesOldRecord {
		t.Errorf("readyz audit_retention = %+v (%v)", ret, err)
	}

	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// TestServeStdio serves one session as the principal of the file, over an
// in-memory transport, and reopens the data directory afterwards: the
// audit log holds the session's records and the anchors agree.
func TestServeStdio(t *testing.T) {
	f := newFixture(t)
	audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
	ct, st := mcp.NewInMemoryTransports()
	o := app.Options{DataDir: f.data, Dev: true, Node: "test",
		Stdio: &app.StdioOptions{PrincipalFile: filepath.Join(f.seed, "principals", "clinician.json"), Transport: st}}
	for run := 0; run < 2; run++ {
		a, err := app.Open(context.Background(), o)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- a.Serve(ctx) }()
		if run == 0 {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.ListResources(ctx, nil); err != nil {
				t.Fatal(err)
			}
			cs.Close()
		}
		cancel()
		<-served
		if err := a.Close(); err != nil {
			t.Fatalf("run %d: Close = %v", run, err)
		}
		ct, st = mcp.NewInMemoryTransports()
		o.Stdio.Transport = st
	}
}

// TestOpenFailsClosed: a start refused at any step leaves no file locked
// and creates no audit log.
func TestOpenFailsClosed(t *testing.T) {
	badPolicy := t.TempDir()
	if err := os.WriteFile(filepath.Join(badPolicy, "authz.rego"), []byte("package custos.authz\nallow if {\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, f fixture, o *app.Options)
		want  string
	}{
		{"bad policy dir", func(t *testing.T, f fixture, o *app.Options) { o.Policy.Dir = badPolicy }, "loading policy"},
		{"unwritable audit log", func(t *testing.T, f fixture, o *app.Options) {
			// audit.db cannot be created: a directory is in its place.
			if err := os.Mkdir(filepath.Join(f.data, app.AuditFile), 0o700); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"port taken", func(t *testing.T, f fixture, o *app.Options) {
			other, err := app.Open(context.Background(), app.Options{DataDir: newFixture(t).data, Dev: true, Node: "other",
				HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: f.tokens(t)}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { other.Close() })
			o.HTTP.Listen = strings.TrimSuffix(strings.TrimPrefix(other.URL(), "http://"), server.MCPPath)
		}, "http.listen"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			o := app.Options{DataDir: f.data, Dev: true, Node: "test", HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: f.tokens(t)}}
			tc.setup(t, f, &o)
			a, err := app.Open(context.Background(), o)
			if err == nil {
				a.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open = %v, want ...%s...", err, tc.want)
			}
			// Nothing stays locked: the catalog opens read-write at once.
			st, err := store.Open(filepath.Join(f.data, app.CatalogFile), store.Options{Timeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatalf("catalog still locked: %v", err)
			}
			st.Close()
			if fi, err := os.Stat(filepath.Join(f.data, app.AuditFile)); err == nil && !fi.IsDir() && tc.name == "bad policy dir" {
				t.Error("a refused start created audit.db")
			}
			// And the same options, repaired, open.
			if tc.name == "bad policy dir" {
				o.Policy.Dir = ""
				a, err := app.Open(context.Background(), o)
				if err != nil {
					t.Fatalf("repaired: %v", err)
				}
				audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
				if err := a.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	// Without the dev key file the catalog of a Vault deployment is not
	// served with dev keys; checked by 'secrets' tests, and here only that
	// dev keys are persisted in the data directory.
	f := newFixture(t)
	a, err := app.Open(context.Background(), app.Options{DataDir: f.data, Dev: true, Node: "test", HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: f.tokens(t)}})
	if err != nil {
		t.Fatal(err)
	}
	audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
	a.Close()
	if _, err := os.Stat(filepath.Join(f.data, secrets.DevKeyFile)); err != nil {
		t.Errorf("dev keys not persisted: %v", err)
	}
}
