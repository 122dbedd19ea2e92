package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/secrets/vaulttest"
	"github.com/custos-mcp/custos/store"
)

// The FHIR server of these tests is Medplum's FhirRouter and in-memory
// repository (npm, from e2e/fhirserver/package-lock.json) behind
// e2e/fhirserver/server.mjs, which adds only transport, a SMART token
// endpoint verifying client assertions with npm jose, Bulk $export on the
// router's search, and test controls (fault injection). See
// docs/import.md, "Sync from a live FHIR server".

// fhirServer is a running e2e/fhirserver.
type fhirServer struct {
	url string
	cmd *exec.Cmd
}

type fhirServerConfig struct {
	ClientID    string          `json:"clientId"`
	JWKS        json.RawMessage `json:"jwks"`
	Bulk        string          `json:"bulk"`
	Seed        map[string]int  `json:"seed"`
	TokenTTL    int             `json:"tokenTTL,omitempty"`
	ExportPolls int             `json:"exportPolls"`
	PublicFiles bool            `json:"publicFiles,omitempty"`
	Control     bool            `json:"control"`
	// SearchParameters are indexed besides R4's own (server.mjs).
	SearchParameters []json.RawMessage `json:"searchParameters,omitempty"`
}

// fhirServerDir is e2e/fhirserver with its npm packages installed (make
// deps), or skips (fails under CI).
func fhirServerDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repo, "e2e", "fhirserver")
	for _, pkg := range []string{"@medplum/fhir-router", "jose"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			const hint = "the FHIR server is not installed: run `make deps` (npm ci --prefix e2e/fhirserver)"
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s (CI=true: a missing dependency fails): %v", hint, err)
			}
			t.Skipf("%s: %v", hint, err)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is required for the FHIR server: %v", err)
	}
	return dir
}

// startFHIRServer starts the server seeded with n resources.
func startFHIRServer(t *testing.T, cfg fhirServerConfig) *fhirServer {
	t.Helper()
	dir := fhirServerDir(t)
	cfg.Control = true
	if cfg.JWKS == nil {
		cfg.JWKS = json.RawMessage("null")
	}
	b, _ := json.Marshal(cfg)
	cf := filepath.Join(t.TempDir(), "fhirserver.json")
	if err := os.WriteFile(cf, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "server.mjs", cf)
	cmd.Dir = dir
	var stderr syncBuf
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
	}()
	select {
	case l, ok := <-line:
		var hello struct {
			URL    string `json:"url"`
			Seeded int    `json:"seeded"`
		}
		if !ok || json.Unmarshal([]byte(l), &hello) != nil || hello.URL == "" {
			t.Fatalf("FHIR server did not start: %q\n%s", l, stderr.String())
		}
		if want := cfg.Seed["resources"]; hello.Seeded != want {
			t.Fatalf("FHIR server seeded %d resources, want %d", hello.Seeded, want)
		}
		return &fhirServer{url: hello.URL, cmd: cmd}
	case <-time.After(2 * time.Minute):
		t.Fatalf("FHIR server did not start within 2 minutes\n%s", stderr.String())
	}
	return nil
}

// control calls a test control of the server and decodes its answer.
func (f *fhirServer) control(t *testing.T, name string, args, out any) {
	t.Helper()
	b, _ := json.Marshal(args)
	root := strings.TrimSuffix(f.url, "/fhir")
	resp, err := http.Post(root+"/_control/"+name, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("control %s: HTTP %d", name, resp.StatusCode)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

type fhirStats struct {
	Requests              map[string]int `json:"requests"`
	Tokens                int            `json:"tokens"`
	ResourcesServed       int            `json:"resourcesServed"`
	JobsDeleted           int            `json:"jobsDeleted"`
	FileRequestsWithToken int            `json:"fileRequestsWithToken"`
}

func (f *fhirServer) stats(t *testing.T) fhirStats {
	var s fhirStats
	f.control(t, "stats", nil, &s)
	return s
}

// checkingImporter is the importer of these tests: it reads every staged
// file and checks it fully against the manifest (each listed file exists,
// its line count equals its count, every line is a resource of the file's
// type with an id, deleted files hold DELETE entries, nothing unlisted),
// then applies it to an in-memory catalog: type/id → meta.versionId, with
// retirement for deletions and, on a full sync, for everything missing.
type checkingImporter struct {
	t       *testing.T
	mu      sync.Mutex
	catalog map[string]string
	retired map[string]bool
	calls   []importCall
	fail    error // returned instead of importing, when set
	// real is the shipped importer (app.FHIRImporter) into catalogPath:
	// after the checks pass, the staged files are imported for real, and
	// the catalog must then list exactly the model's live resources.
	real        fhirsync.Importer
	catalogPath string
}

type importCall struct {
	full              bool
	imported, deleted int
	types             map[string]int
}

func newCheckingImporter(t *testing.T) *checkingImporter {
	return &checkingImporter{t: t, catalog: map[string]string{}, retired: map[string]bool{}}
}

// importInto makes c import for real into a catalog in dir, for tenant
// "e2e" under base's source label, after its checks.
func (c *checkingImporter) importInto(dir, base string) {
	c.catalogPath = filepath.Join(dir, "catalog.db")
	c.real = app.FHIRImporter(c.catalogPath, app.FHIRImport{
		Tenant: "e2e", Source: fhirsync.SourceLabel(base),
		IDKey: secrets.Key{ID: "e2e:id-key", Bytes: bytes.Repeat([]byte{7}, secrets.KeySize)},
	})
}

func (c *checkingImporter) Import(_ context.Context, manifest string, full bool) (fhirsync.Imported, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var got fhirsync.Imported
	err := c.checkAndImport(manifest, full, &got)
	return got, err
}

// checkAndImport is Import's work under c.mu; got is what the real
// importer said it did.
func (c *checkingImporter) checkAndImport(manifest string, full bool, got *fhirsync.Imported) error {
	if c.fail != nil {
		return c.fail
	}
	dir := filepath.Dir(manifest)
	if filepath.Base(manifest) != fhirsync.ManifestName {
		return fmt.Errorf("importer called with %s, want the staging manifest", manifest)
	}
	var m fhirsync.Manifest
	b, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("manifest: %v", err)
	}
	if _, err := time.Parse(time.RFC3339Nano, m.TransactionTime); err != nil {
		return fmt.Errorf("manifest transactionTime %q", m.TransactionTime)
	}
	listed := map[string]bool{fhirsync.ManifestName: true}
	seen := map[string]string{}
	call := importCall{full: full, types: map[string]int{}}
	var deletions []string
	read := func(f fhirsync.ManifestFile, deleted bool) error {
		listed[f.URL] = true
		data, err := os.ReadFile(filepath.Join(dir, f.URL))
		if err != nil {
			return err
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			return fmt.Errorf("%s: last line not terminated", f.URL)
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(data) == 0 {
			lines = nil
		}
		if len(lines) != f.Count {
			return fmt.Errorf("%s: %d lines, manifest says %d", f.URL, len(lines), f.Count)
		}
		for i, l := range lines {
			var r struct {
				ResourceType string `json:"resourceType"`
				ID           string `json:"id"`
				Meta         struct {
					VersionID string `json:"versionId"`
				} `json:"meta"`
				Entry []struct {
					Request struct{ Method, URL string } `json:"request"`
				} `json:"entry"`
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				return fmt.Errorf("%s:%d: %v", f.URL, i+1, err)
			}
			if deleted {
				for _, e := range r.Entry {
					if e.Request.Method != "DELETE" {
						return fmt.Errorf("%s:%d: %s entry in a deleted file", f.URL, i+1, e.Request.Method)
					}
					deletions = append(deletions, e.Request.URL)
				}
				continue
			}
			if r.ResourceType != f.Type || r.ID == "" || r.Meta.VersionID == "" {
				return fmt.Errorf("%s:%d: %s/%s version %q in a file of %s", f.URL, i+1, r.ResourceType, r.ID, r.Meta.VersionID, f.Type)
			}
			seen[r.ResourceType+"/"+r.ID] = r.Meta.VersionID
			call.types[r.ResourceType]++
		}
		return nil
	}
	for _, f := range m.Output {
		if err := read(f, false); err != nil {
			return err
		}
	}
	for _, f := range m.Deleted {
		if err := read(f, true); err != nil {
			return err
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !listed[e.Name()] {
			return fmt.Errorf("staged file %s is not in the manifest", e.Name())
		}
	}
	if c.real != nil {
		if *got, err = c.real.Import(context.Background(), manifest, full); err != nil {
			return err
		}
	}
	// Apply: all checks passed.
	if full {
		for k := range c.catalog {
			if _, ok := seen[k]; !ok {
				c.retired[k] = true
			}
		}
	}
	for k, v := range seen {
		c.catalog[k] = v
		delete(c.retired, k)
	}
	for _, k := range deletions {
		if _, held := c.catalog[k]; held { // a deletion of one never imported retires nothing
			c.retired[k] = true
		}
	}
	call.imported, call.deleted = len(seen), len(deletions)
	c.calls = append(c.calls, call)
	if c.real != nil {
		st, err := store.Open(c.catalogPath, store.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		n, err := st.Count()
		st.Close()
		if err != nil {
			return err
		}
		if live := len(c.catalog) - len(c.retired); n != live {
			return fmt.Errorf("the catalog lists %d resources after the import, the model %d", n, live)
		}
	}
	return nil
}

// live is the number of catalog entries not retired.
// LiveBinaries is the real importer's (fhirsync.BinaryCatalog): which
// Binaries its catalog holds live.
func (c *checkingImporter) LiveBinaries(ctx context.Context, ids []string) (map[string]bool, error) {
	bc, ok := c.real.(fhirsync.BinaryCatalog)
	if !ok {
		return nil, errors.New("the real importer is no fhirsync.BinaryCatalog")
	}
	return bc.LiveBinaries(ctx, ids)
}

func (c *checkingImporter) live() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.catalog) - len(c.retired)
}

// teeLog appends to a real audit log and keeps the entries.
type teeLog struct {
	l   *audit.Log
	mu  sync.Mutex
	got []audit.Entry
}

func (t *teeLog) Append(ctx context.Context, e audit.Entry) (audit.Record, error) {
	r, err := t.l.Append(ctx, e)
	if err == nil {
		t.mu.Lock()
		t.got = append(t.got, e)
		t.mu.Unlock()
	}
	return r, err
}

// syncEnv is a client (dev key, audit log, checking importer) for one server.
type syncEnv struct {
	runs  int // syncs run
	dir   string
	key   fhirsync.Options
	imp   *checkingImporter
	audit *teeLog
	jwks  json.RawMessage
}

func newSyncEnv(t *testing.T) *syncEnv {
	t.Helper()
	dir := t.TempDir()
	key, kid, err := fhirsync.DevKey(filepath.Join(dir, "client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := fhirsync.PublicJWKS(key, kid)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := audittest.Open(t, audit.Options{})
	tl := &teeLog{l: l}
	return &syncEnv{
		dir: dir, imp: newCheckingImporter(t), audit: tl, jwks: jwks,
		key: fhirsync.Options{ClientID: "custos-sync", Key: key, KeyID: kid},
	}
}

// options for a sync of srv, with fast backoff.
func (e *syncEnv) options(srv *fhirServer) fhirsync.Options {
	o := e.key
	o.Base, o.StateDir, o.Importer, o.Tenant = srv.url, e.dir, e.imp, "e2e"
	if e.imp.real == nil {
		e.imp.importInto(e.dir, srv.url)
	}
	o.Recorder = fhirsync.AuditRecorder{Log: e.audit, Dev: true, Principal: audit.Principal{Sub: "e2e", ClientID: o.ClientID}}
	o.BaseDelay, o.MaxDelay = 50*time.Millisecond, 2*time.Second
	return o
}

func (e *syncEnv) run(t *testing.T, o fhirsync.Options) (fhirsync.Result, error) {
	t.Helper()
	s, err := fhirsync.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.runs++
	return s.Run(context.Background())
}

// stateFiles lists the sync state files in dir.
func stateFiles(t *testing.T, dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "sync-*.json"))
	return m
}

// TestSyncBulkAndREST: 10,000 resources from the real FHIR server, once by
// Bulk $export and once by paged REST search, each in under 60 s; then an
// incremental rerun fetches only what changed, and a deletion retires (Bulk
// deleted file) or a full sync retires what is missing (REST).
func TestSyncBulkAndREST(t *testing.T) {
	const n = 10000
	for _, mode := range []string{"bulk", "rest"} {
		t.Run(mode, func(t *testing.T) {
			env := newSyncEnv(t)
			bulk := map[string]string{"bulk": "system", "rest": "none"}[mode]
			srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-sync", JWKS: env.jwks, Bulk: bulk, Seed: map[string]int{"resources": n}, ExportPolls: 1})

			// The server's Date header has second precision: a REST increment
			// refetches what changed in the second its predecessor started.
			// Let the seeding's second pass so the rerun below sees only the
			// test's changes.
			time.Sleep(time.Second)
			start := time.Now()
			res, err := env.run(t, env.options(srv))
			took := time.Since(start)
			if err != nil {
				t.Fatalf("full sync: %v", err)
			}
			t.Logf("%s: full sync of %d resources in %s (%d requests, %d tokens)", mode, res.Resources, took.Round(time.Millisecond), res.Requests, res.Tokens)
			if res.Mode != mode || !res.Full || res.Resources != n || env.imp.live() != n {
				t.Fatalf("full sync: mode %s full %v resources %d, catalog %d; want %s, full, %d", res.Mode, res.Full, res.Resources, env.imp.live(), mode, n)
			}
			if took > 60*time.Second {
				t.Errorf("full sync of %d resources took %s, target < 60 s", n, took)
			}
			if res.Tokens != 1 {
				t.Errorf("%d tokens fetched, want 1 (cached until expiry)", res.Tokens)
			}
			if len(stateFiles(t, env.dir)) != 1 {
				t.Fatalf("state files %v, want one", stateFiles(t, env.dir))
			}
			if st := srv.stats(t); mode == "bulk" && st.JobsDeleted != 1 {
				t.Errorf("%d export jobs deleted after the download, want 1", st.JobsDeleted)
			}

			// Change three resources and delete two.
			var obs, pats []string
			srv.control(t, "ids", map[string]string{"type": "Observation"}, &obs)
			srv.control(t, "ids", map[string]string{"type": "Patient"}, &pats)
			time.Sleep(1100 * time.Millisecond) // the REST increment refetches the second its predecessor started (_lastUpdated=ge, second precision)
			for _, id := range obs[:3] {
				srv.control(t, "update", map[string]string{"type": "Observation", "id": id}, nil)
			}
			for _, id := range obs[3:5] {
				srv.control(t, "delete", map[string]string{"type": "Observation", "id": id}, nil)
			}
			before := srv.stats(t).ResourcesServed
			res2, err := env.run(t, env.options(srv))
			if err != nil {
				t.Fatalf("incremental sync: %v", err)
			}
			served := srv.stats(t).ResourcesServed - before
			last := env.imp.calls[len(env.imp.calls)-1]
			t.Logf("%s: incremental sync: %d resources, %d deleted, %d served by the server", mode, res2.Resources, res2.Deleted, served)
			if res2.Full || last.full {
				t.Fatal("the rerun was a full sync; want incremental")
			}
			if res2.Resources != 3 || last.types["Observation"] != 3 || served > 3+2 {
				t.Fatalf("incremental sync fetched %d resources (%v), the server served %d; want only the 3 changed", res2.Resources, last.types, served)
			}
			for _, id := range obs[:3] {
				if v := env.imp.catalog["Observation/"+id]; v == "" {
					t.Fatalf("updated Observation/%s missing", id)
				}
			}
			if mode == "bulk" {
				// Nothing changed since: nothing imported, the state advances.
				calls := len(env.imp.calls)
				res0, err := env.run(t, env.options(srv))
				if err != nil || res0.Resources != 0 || res0.Full || len(env.imp.calls) != calls || !res0.Next.After(res2.Next) {
					t.Fatalf("a sync without changes: %+v, %v; %d import calls, want %d", res0, err, len(env.imp.calls), calls)
				}
				if res2.Deleted != 2 || !env.imp.retired["Observation/"+obs[3]] || !env.imp.retired["Observation/"+obs[4]] || env.imp.live() != n-2 {
					t.Fatalf("deletions: %d staged, catalog %d live; want 2 retired, %d live", res2.Deleted, env.imp.live(), n-2)
				}
			} else {
				// A REST search cannot see deletions: a full sync retires them.
				o := env.options(srv)
				o.Full = true
				res3, err := env.run(t, o)
				if err != nil {
					t.Fatal(err)
				}
				if !res3.Full || res3.Resources != n-2 || !env.imp.retired["Observation/"+obs[3]] || env.imp.live() != n-2 {
					t.Fatalf("full REST sync: %d resources, catalog %d live; want %d and the 2 deleted retired", res3.Resources, env.imp.live(), n-2)
				}
			}

			// Every sync is two audit records: start, then the outcome.
			env.audit.mu.Lock()
			defer env.audit.mu.Unlock()
			if len(env.audit.got) != 2*env.runs {
				t.Fatalf("%d audit records for %d syncs", len(env.audit.got), env.runs)
			}
			for i, e := range env.audit.got {
				want := fhirsync.ActionSyncStart
				if i%2 == 1 {
					want = fhirsync.ActionSyncEnd
				}
				if e.Action != want || e.Outcome != audit.OutcomeAllow || e.Source != srv.url || !e.Dev {
					t.Fatalf("audit record %d: %s %s source %q dev %v", i, e.Action, e.Outcome, e.Source, e.Dev)
				}
			}
			if r := env.audit.got[1].Reason; !strings.Contains(r, fmt.Sprintf("mode=%s resources=%d", mode, n)) {
				t.Fatalf("outcome record reason %q lacks the mode and count", r)
			}
		})
	}
}

// TestSyncBackoffAndReauth: 429 and 503 answers (with Retry-After) and a
// download that breaks off are retried; a 401 re-authenticates once; a server that keeps failing ends
// with a clear error naming the path and the attempts, and nothing is
// imported or saved.
func TestSyncBackoffAndReauth(t *testing.T) {
	env := newSyncEnv(t)
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-sync", JWKS: env.jwks, Bulk: "system", Seed: map[string]int{"resources": 200}, ExportPolls: 1})

	srv.control(t, "fault", map[string]any{"match": "/_bulk/status", "status": 429, "retryAfter": 1, "count": 2}, nil)
	srv.control(t, "fault", map[string]any{"match": "/_bulk/file", "status": 503, "count": 1}, nil)
	srv.control(t, "fault", map[string]any{"match": "/$export", "status": 401, "count": 1}, nil)
	srv.control(t, "fault", map[string]any{"match": "/Observation.ndjson", "reset": true, "count": 1}, nil)
	start := time.Now()
	res, err := env.run(t, env.options(srv))
	if err != nil {
		t.Fatalf("sync through 429, 503, 401 and a reset connection: %v", err)
	}
	if res.Resources != 200 || res.Tokens != 2 {
		t.Fatalf("resources %d tokens %d; want 200 and a second token after the 401", res.Resources, res.Tokens)
	}
	if n := srv.stats(t).Requests["GET /fhir/_bulk/file/:id/Observation.ndjson"]; n != 2 {
		t.Fatalf("Observation.ndjson fetched %d times, want 2 (the reset, then the retry)", n)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("sync took %s; the two 429s asked for Retry-After: 1 each", took)
	}

	// A server that keeps answering 503: a clear final error.
	state := stateFiles(t, env.dir)
	stBefore, _ := os.ReadFile(state[0])
	calls := len(env.imp.calls)
	srv.control(t, "fault", map[string]any{"match": "/metadata", "status": 503, "retryAfter": 1, "count": 100}, nil)
	o := env.options(srv)
	o.MaxAttempts = 3
	_, err = env.run(t, o)
	if !errors.Is(err, fhirsync.ErrUnavailable) || !strings.Contains(err.Error(), "GET /fhir/metadata: HTTP 503") || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("persistent 503: %v; want ErrUnavailable naming GET /fhir/metadata and 3 attempts", err)
	}
	if len(env.imp.calls) != calls {
		t.Fatal("the importer was called for a failed sync")
	}
	if st, _ := os.ReadFile(state[0]); !bytes.Equal(st, stBefore) {
		t.Fatal("a failed sync changed the state file")
	}
	last := env.audit.got[len(env.audit.got)-1]
	if last.Action != fhirsync.ActionSyncEnd || last.Outcome != audit.OutcomeError || !strings.Contains(last.Reason, "HTTP 503") {
		t.Fatalf("the failed sync's audit record: %s %s %q", last.Action, last.Outcome, last.Reason)
	}
}

// TestSyncStalledDownloadIsRetried: an export file whose body stops
// flowing mid-file with its connection left open (a stalled server or
// proxy) held the sync until the server closed the connection — forever,
// for a server that never does, with the base's lock held, so every later
// sync failed as busy. Found by probing custos sync against this server.
// Now a body read that waits longer than HeaderTimeout abandons the
// request, which is retried like a dropped connection.
func TestSyncStalledDownloadIsRetried(t *testing.T) {
	env := newSyncEnv(t)
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-sync", JWKS: env.jwks, Bulk: "system", Seed: map[string]int{"resources": 200}, ExportPolls: 1})
	srv.control(t, "fault", map[string]any{"match": "/Observation.ndjson", "stall": 60000, "count": 1}, nil)
	o := env.options(srv)
	o.HeaderTimeout = time.Second
	start := time.Now()
	done := make(chan struct{})
	var res fhirsync.Result
	var err error
	go func() {
		defer close(done)
		res, err = env.run(t, o)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the sync still waits on a stalled download after 30 s (HeaderTimeout is 1 s)")
	}
	if err != nil || res.Resources != 200 {
		t.Fatalf("sync through a stalled download: %v, %d resources; want 200", err, res.Resources)
	}
	if n := srv.stats(t).Requests["GET /fhir/_bulk/file/:id/Observation.ndjson"]; n != 2 {
		t.Fatalf("Observation.ndjson fetched %d times, want 2 (the stalled one, then the retry)", n)
	}
	t.Logf("synced through a stalled download in %s", time.Since(start).Round(time.Millisecond))
}

// syncedObservations starts a Bulk server seeded with 60 resources, syncs
// it in full, and returns the client, the server and its Observation ids.
func syncedObservations(t *testing.T) (*syncEnv, *fhirServer, []string) {
	t.Helper()
	env := newSyncEnv(t)
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-sync", JWKS: env.jwks, Bulk: "system", Seed: map[string]int{"resources": 60}, ExportPolls: 1})
	if _, err := env.run(t, env.options(srv)); err != nil {
		t.Fatal(err)
	}
	var obs []string
	srv.control(t, "ids", map[string]any{"type": "Observation"}, &obs)
	return env, srv, obs
}

// TestSyncDeletedThenRecreated: a resource deleted and created again with
// the same id between two syncs (FHIR lets an update create a deleted
// resource again) is in the increment's export twice: in an output file,
// as it is now, and in a deleted file. The importer refuses a resource
// both deleted and imported, and the state did not advance, so every
// later increment fetched the same window and failed the same way until
// someone ran a full sync. Found probing custos sync against this server.
// The resource in the output exists at the export's transactionTime: the
// sync drops its deletion, and the increment imports it live.
func TestSyncDeletedThenRecreated(t *testing.T) {
	env, srv, obs := syncedObservations(t)
	var back map[string]any
	srv.control(t, "delete", map[string]any{"type": "Observation", "id": obs[0]}, nil)
	srv.control(t, "delete", map[string]any{"type": "Observation", "id": obs[1]}, nil)
	srv.control(t, "create", map[string]any{"resourceType": "Observation", "id": obs[0], "status": "final",
		"code": map[string]any{"text": "heart rate"}, "subject": map[string]any{"reference": "Patient/" + firstPatient(t, srv)}}, &back)
	if back["id"] != obs[0] {
		t.Fatalf("the server did not create Observation/%s again: %v", obs[0], back)
	}
	res, err := env.run(t, env.options(srv))
	if err != nil {
		t.Fatalf("increment after a delete and a re-create of the same id: %v", err)
	}
	if res.Full || res.Deleted != 1 || res.Types["Observation"] != 1 {
		t.Fatalf("increment: full %v, %d deleted, %v; want the re-created Observation and one deletion (the other)", res.Full, res.Deleted, res.Types)
	}
	if env.imp.retired["Observation/"+obs[0]] || !env.imp.retired["Observation/"+obs[1]] {
		t.Fatalf("retired: re-created %v, deleted %v; want only the deleted one retired", env.imp.retired["Observation/"+obs[0]], env.imp.retired["Observation/"+obs[1]])
	}
}

// TestSyncCountsOnlyRetiredDeletions: the server's deleted files list
// every deletion since _since, also of a resource custos never held (here
// one created and deleted between two syncs). "N deleted" counted them
// all (2 here, though one resource left the catalog); it now counts what
// the import retired, and names the others apart (deletes_ignored), in
// the result and the sync/end audit record. Fails on the old code
// (Deleted was 2).
func TestSyncCountsOnlyRetiredDeletions(t *testing.T) {
	env, srv, obs := syncedObservations(t)
	var brief map[string]any
	srv.control(t, "create", map[string]any{"resourceType": "Observation", "status": "final",
		"code": map[string]any{"text": "heart rate"}, "subject": map[string]any{"reference": "Patient/" + firstPatient(t, srv)}}, &brief)
	id, _ := brief["id"].(string)
	if id == "" || slices.Contains(obs, id) {
		t.Fatalf("the server created no new Observation: %v", brief)
	}
	srv.control(t, "delete", map[string]any{"type": "Observation", "id": id}, nil)     // never synced
	srv.control(t, "delete", map[string]any{"type": "Observation", "id": obs[0]}, nil) // in the catalog
	res, err := env.run(t, env.options(srv))
	if err != nil {
		t.Fatalf("increment with two deletions: %v", err)
	}
	if last := env.imp.calls[len(env.imp.calls)-1]; last.deleted != 2 {
		t.Fatalf("the increment staged %d deletions, want the server's 2", last.deleted)
	}
	if res.Full || res.Deleted != 1 || res.DeletesIgnored != 1 {
		t.Errorf("increment: full %v, %d deleted, %d deletions ignored; want 1 deleted (the synced Observation) and 1 ignored (the one custos never held)", res.Full, res.Deleted, res.DeletesIgnored)
	}
	if !env.imp.retired["Observation/"+obs[0]] {
		t.Errorf("the deleted Observation was not retired")
	}
	env.audit.mu.Lock()
	defer env.audit.mu.Unlock()
	if r := env.audit.got[len(env.audit.got)-1].Reason; !strings.Contains(r, " deleted=1 ") || !strings.Contains(r, " deletes_ignored=1") {
		t.Errorf("sync/end reason %q, want deleted=1 and deletes_ignored=1", r)
	}
}

// firstPatient is the id of a Patient of srv.
func firstPatient(t *testing.T, srv *fhirServer) string {
	t.Helper()
	var pats []string
	srv.control(t, "ids", map[string]any{"type": "Patient"}, &pats)
	if len(pats) == 0 {
		t.Fatal("no Patient on the server")
	}
	return pats[0]
}

// TestSyncGarbageImportsNothing: bad JSON, a wrong content type and a
// truncated NDJSON file each fail with an error naming the URL path, and
// nothing is imported or saved.
func TestSyncGarbageImportsNothing(t *testing.T) {
	env := newSyncEnv(t)
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-sync", JWKS: env.jwks, Bulk: "system", Seed: map[string]int{"resources": 300}, ExportPolls: 0})
	for _, tc := range []struct {
		name  string
		fault map[string]any
		want  string
	}{
		{"bad JSON capability statement", map[string]any{"match": "/metadata", "status": 200, "body": `{"resourceType": "CapabilityStatement", "rest": [`}, "GET /fhir/metadata: body is not valid JSON"},
		{"HTML manifest", map[string]any{"match": "/_bulk/status", "status": 200, "contentType": "text/html", "body": "<html>maintenance</html>"}, "/fhir/_bulk/status/"},
		{"truncated NDJSON", map[string]any{"match": "/_bulk/file", "truncate": true}, "/fhir/_bulk/file/"},
		{"NDJSON of another type", map[string]any{"match": "/Patient.ndjson", "status": 200, "contentType": "application/fhir+ndjson", "body": `{"resourceType":"Observation","id":"x"}` + "\n"}, "resourceType \"Observation\" in a file of type \"Patient\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.control(t, "fault", tc.fault, nil)
			_, err := env.run(t, env.options(srv))
			if !errors.Is(err, fhirsync.ErrServer) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want ErrServer naming %q", err, tc.want)
			}
			if len(env.imp.calls) != 0 || len(stateFiles(t, env.dir)) != 0 {
				t.Fatal("something was imported or saved")
			}
			if entries, _ := filepath.Glob(filepath.Join(env.dir, "sync-staging-*")); len(entries) != 0 {
				t.Fatalf("staging left behind: %v", entries)
			}
		})
	}
}

// TestSyncEmptyFullSyncIsRefused: a full sync that gets no resources at
// all would retire everything of its base: it is refused instead.
func TestSyncEmptyFullSyncIsRefused(t *testing.T) {
	env := newSyncEnv(t)
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-sync", JWKS: env.jwks, Bulk: "system", Seed: map[string]int{"resources": 20}})
	o := env.options(srv)
	o.Types = []string{"Medication"} // the server holds none
	_, err := env.run(t, o)
	if !errors.Is(err, fhirsync.ErrServer) || !strings.Contains(err.Error(), "a full sync got no resources at all") {
		t.Fatalf("got %v; want the empty full sync refused", err)
	}
	if len(env.imp.calls) != 0 || len(stateFiles(t, env.dir)) != 0 {
		t.Fatal("something was imported or saved")
	}
}

// TestSyncAuthFailure: a client whose key the server does not hold gets a
// clear authorization error (no token, no assertion in it).
func TestSyncAuthFailure(t *testing.T) {
	env := newSyncEnv(t)
	other := newSyncEnv(t)
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-sync", JWKS: other.jwks, Bulk: "system", Seed: map[string]int{"resources": 10}})
	_, err := env.run(t, env.options(srv))
	if !errors.Is(err, fhirsync.ErrAuth) || !strings.Contains(err.Error(), "POST /auth/token: HTTP 401") || !strings.Contains(err.Error(), "--print-jwks") {
		t.Fatalf("got %v; want ErrAuth naming POST /auth/token and the fix", err)
	}
	if strings.Contains(err.Error(), "eyJ") {
		t.Fatal("the error carries a JWT")
	}
	if len(env.imp.calls) != 0 || srv.stats(t).Tokens != 0 {
		t.Fatal("a token was issued or something imported")
	}
}

// TestSyncCLI drives the real binary: --print-jwks registers the --dev key
// with the server, then a sync runs with audit records in D/audit.db.
func TestSyncCLI(t *testing.T) {
	fhirServerDir(t)
	d := t.TempDir()
	audittest.VerifyOnCleanup(t, filepath.Join(d, "audit.db"))
	out, errOut, code := custos(t, nil, "sync", "--help")
	if code != 0 || !strings.Contains(out, "SMART Backend Services") || !strings.Contains(out, "--fhir-base") {
		t.Fatalf("sync --help: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := custos(t, nil, "sync", "--tenant", "e2e", "--data-dir", d); code != 2 || !strings.Contains(errOut, "--fhir-base is required") {
		t.Fatalf("sync without --fhir-base: exit %d: %s", code, errOut)
	}
	if _, errOut, code := custos(t, nil, "sync", "--tenant", "e2e", "--data-dir", d, "--fhir-base", "http://user:pw@127.0.0.1/fhir"); code != 2 || strings.Contains(errOut, "pw") {
		t.Fatalf("a base with credentials: exit %d: %s", code, errOut)
	}
	if _, errOut, code := custos(t, nil, "sync", "--data-dir", d, "--fhir-base", "http://127.0.0.1:1/fhir"); code != 2 || !strings.Contains(errOut, "--tenant is required") {
		t.Fatalf("sync without --tenant: exit %d: %s", code, errOut)
	}
	jwks := mustCustos(t, "sync", "--dev", "--data-dir", d, "--fhir-base", "http://127.0.0.1:1/fhir", "--client-id", "custos-cli", "--print-jwks")
	var set struct {
		Keys []struct{ Kty, Crv, Alg, Kid string } `json:"keys"`
	}
	if err := json.Unmarshal([]byte(jwks), &set); err != nil || len(set.Keys) != 1 || set.Keys[0].Crv != "P-384" || set.Keys[0].Alg != "ES384" {
		t.Fatalf("--print-jwks: %v\n%s", err, jwks)
	}
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-cli", JWKS: json.RawMessage(jwks), Bulk: "system", Seed: map[string]int{"resources": 500}})
	// A volume below the low watermark: the sync stops, naming it, and
	// imports nothing (every volume is below 2^63-1 bytes free).
	_, errOut, code = custos(t, nil, "sync", "--tenant", "e2e", "--dev", "--data-dir", d, "--fhir-base", srv.url, "--client-id", "custos-cli",
		"--audit-disk-low-watermark", "9223372036854775807")
	if code != 1 || !strings.Contains(errOut, "no room to stage the sync") || !strings.Contains(errOut, "below its low watermark of 9223372036854775807 bytes") {
		t.Fatalf("sync on a volume below the watermark: exit %d: %s", code, errOut)
	}
	if len(stateFiles(t, d)) != 0 {
		t.Fatal("a sync stopped for room saved a state")
	}
	out, errOut, code = custos(t, nil, "sync", "--tenant", "e2e", "--dev", "--data-dir", d, "--fhir-base", srv.url, "--client-id", "custos-cli", "--json")
	if !strings.Contains(errOut, "sync: kick-off") {
		t.Errorf("no progress on stderr: %s", errOut)
	}
	if code != 0 {
		t.Fatalf("sync: exit %d\n%s%s", code, out, errOut)
	}
	var res fhirsync.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Resources != 500 {
		t.Fatalf("sync --json: %v\n%s", err, out)
	}
	if len(stateFiles(t, d)) != 1 {
		t.Fatal("no state saved after a successful sync")
	}
	st, err := store.Open(filepath.Join(d, "catalog.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	n, err := st.Count()
	st.Close()
	if err != nil || n != 500 {
		t.Fatalf("the catalog lists %d resources after the sync (%v), want 500", n, err)
	}
	if srv.stats(t).Tokens != 1 {
		t.Fatal("the CLI did not authenticate with its --dev key")
	}
	exp := mustCustos(t, "audit", "export", "--data-dir", d, "--purpose", "HOPERAT", "--format", "jsonl")
	if !strings.Contains(exp, `"sync/start"`) || !strings.Contains(exp, `"sync/end"`) || !strings.Contains(exp, srv.url) {
		t.Fatalf("audit export lacks the sync records:\n%s", exp)
	}
	// A wrong client id: a clear error, exit 1, no secret in it.
	_, errOut, code = custos(t, nil, "sync", "--tenant", "e2e", "--dev", "--data-dir", d, "--fhir-base", srv.url, "--client-id", "someone-else")
	if code != 1 || !strings.Contains(errOut, "authorization failed") || strings.Contains(errOut, "eyJ") {
		t.Fatalf("wrong client id: exit %d: %s", code, errOut)
	}
}

// TestServeSyncsOnSchedule: serve --sync-fhir-base runs a sync when it
// starts, recorded in the server's own audit log; 'custos sync' on the same
// data directory has the running server run it (admin socket), recorded as
// run by the caller's account, and is refused for another base.
func TestServeSyncsOnSchedule(t *testing.T) {
	fhirServerDir(t)
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	newToken(t, d.principal("clinician"), tokens)
	jwks := mustCustos(t, "sync", "--dev", "--data-dir", d.data, "--fhir-base", "http://127.0.0.1:1/fhir", "--client-id", "custos-serve", "--print-jwks")
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-serve", JWKS: json.RawMessage(jwks), Bulk: "system", Seed: map[string]int{"resources": 100}})
	s := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens,
		"--sync-fhir-base", srv.url, "--sync-client-id", "custos-serve", "--sync-every", "1h", "--sync-tenant", "e2e")

	deadline := time.Now().Add(60 * time.Second)
	var exp string
	for time.Now().Before(deadline) {
		exp = mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "jsonl")
		if strings.Contains(exp, `"sync/end"`) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(exp, `"sync/start"`) || !strings.Contains(exp, `"sync/end"`) || !strings.Contains(exp, srv.url) {
		t.Fatalf("no sync records from the scheduled sync:\n%s\nserver log:\n%s", exp, s.stderr)
	}
	if !strings.Contains(exp, "resources=100") {
		t.Fatalf("the scheduled sync did not fetch the server's 100 resources:\n%s", exp)
	}
	if srv.stats(t).Tokens != 1 {
		t.Fatal("the scheduled sync did not authenticate with the data directory's --dev key")
	}
	// custos sync next to the running server: the server runs it, recorded
	// in its log as run by this account.
	out, errOut, code := custos(t, nil, "sync", "--tenant", "e2e", "--dev", "--data-dir", d.data, "--fhir-base", srv.url+"/", "--full", "--json")
	if code != 0 && !(strings.Contains(errOut, "by the server") && strings.Contains(errOut, "no FHIR importer")) {
		t.Fatalf("custos sync next to a running server: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "it runs the sync") {
		t.Errorf("the CLI did not say the server runs the sync: %s", errOut)
	}
	exp = mustCustos(t, "audit", "export", "--data-dir", d.data, "--purpose", "HOPERAT", "--format", "jsonl")
	var byCLI int
	for _, line := range strings.Split(exp, "\n") {
		if strings.Contains(line, `"sync/start"`) && strings.Contains(line, `"sub":"os:uid=`) && strings.Contains(line, `"reason":"full tenant=e2e"`) {
			byCLI++
		}
	}
	if byCLI != 1 || srv.stats(t).Tokens != 2 {
		t.Fatalf("the delegated sync: %d start records by the caller's account, %d tokens; want 1 and 2\n%s", byCLI, srv.stats(t).Tokens, exp)
	}
	// Another base than the server's: refused, nothing fetched.
	if _, errOut, code := custos(t, nil, "sync", "--tenant", "e2e", "--dev", "--data-dir", d.data, "--fhir-base", "http://127.0.0.1:1/other"); code != 1 || !strings.Contains(errOut, "this server syncs "+srv.url) {
		t.Fatalf("custos sync of another base next to the server: exit %d: %s", code, errOut)
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}
}

// TestSyncBulkFilesWithoutToken: a manifest with requiresAccessToken false
// (files in object storage behind pre-signed URLs) is downloaded without
// the token; with true, the token goes along.
func TestSyncBulkFilesWithoutToken(t *testing.T) {
	for _, public := range []bool{false, true} {
		env := newSyncEnv(t)
		srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-sync", JWKS: env.jwks, Bulk: "system", Seed: map[string]int{"resources": 50}, PublicFiles: public})
		res, err := env.run(t, env.options(srv))
		if err != nil || res.Resources != 50 {
			t.Fatalf("public files %v: %d resources, %v", public, res.Resources, err)
		}
		if n := srv.stats(t).FileRequestsWithToken; public != (n == 0) {
			t.Fatalf("public files %v: %d file requests carried the token", public, n)
		}
	}
}

// TestVaultSyncSignsWithTransit: with Vault (the least-privilege
// custos-server token) the client assertion is signed by the Transit key
// transit/custos-fhir-client; the FHIR server's jose verifies it against
// the JWKS 'custos sync --print-jwks' printed, and the audit records name
// the key version.
func TestVaultSyncSignsWithTransit(t *testing.T) {
	fhirServerDir(t)
	v := startVault(t, vaulttest.ProvisionOptions{})
	d := t.TempDir()
	audittest.VerifyOnCleanup(t, filepath.Join(d, "audit.db"))
	jwks, errOut, code := custos(t, v.env, "sync", "--data-dir", d, "--fhir-base", "http://127.0.0.1:1/fhir", "--client-id", "custos-vault", "--print-jwks")
	if code != 0 || !strings.Contains(jwks, `"kid": "vault:transit/custos-fhir-client@v1"`) || strings.Contains(jwks, `"d"`) {
		t.Fatalf("--print-jwks with Vault: exit %d\n%s%s", code, jwks, errOut)
	}
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-vault", JWKS: json.RawMessage(jwks), Bulk: "none", Seed: map[string]int{"resources": 120}})
	out, errOut, code := custos(t, v.env, "sync", "--tenant", "e2e", "--data-dir", d, "--fhir-base", srv.url, "--client-id", "custos-vault", "--json")
	if code != 0 && !strings.Contains(errOut, "no FHIR importer") {
		t.Fatalf("sync with Vault: exit %d\n%s%s", code, out, errOut)
	}
	if srv.stats(t).Tokens != 1 {
		t.Fatalf("the server issued no token for the Transit-signed assertion:\n%s", errOut)
	}
	if strings.Contains(out+errOut, v.prov.Token) {
		t.Fatal("the Vault token reached the output")
	}
	exp := mustCustos(t, "audit", "export", "--data-dir", d, "--purpose", "HOPERAT", "--format", "jsonl")
	if !strings.Contains(exp, "fhir-client=transit/custos-fhir-client@1") || !strings.Contains(exp, "resources=120") {
		t.Fatalf("the sync records do not name the Transit key or the count:\n%s", exp)
	}
}

// TestSyncPatientLevelExport: a server that offers only Patient-level
// $export is exported there.
func TestSyncPatientLevelExport(t *testing.T) {
	env := newSyncEnv(t)
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-sync", JWKS: env.jwks, Bulk: "patient", Seed: map[string]int{"resources": 40}})
	res, err := env.run(t, env.options(srv))
	if err != nil || res.Mode != "bulk" || res.Resources != 40 {
		t.Fatalf("Patient-level export: %+v, %v", res, err)
	}
	st := srv.stats(t)
	if st.Requests["GET /fhir/Patient/$export"] != 1 || st.Requests["GET /fhir/$export"] != 0 {
		t.Fatalf("kick-offs: %v", st.Requests)
	}
}

// TestSyncLinksStoredBinary: a DocumentReference linking a Binary, synced
// from the real FHIR server; the DocumentReference changes, the Binary
// does not, so the incremental sync (Bulk _since, REST _lastUpdated)
// holds the DocumentReference alone. It was refused whole (ErrDangling)
// before h-links; now it imports, the DocumentReference links the stored
// Binary and both keep the DocumentReference's PSY label (the Binary, an
// attachment:// item, at version 1: no label to add).
func TestSyncLinksStoredBinary(t *testing.T) {
	for _, mode := range []string{"bulk", "rest"} {
		t.Run(mode, func(t *testing.T) {
			env, srv, pats := onePatientSync(t, mode)
			var bin, doc struct {
				ID string `json:"id"`
			}
			srv.control(t, "create", map[string]any{"resourceType": "Binary", "contentType": "text/plain", "data": "aGk=",
				"securityContext": map[string]string{"reference": "Patient/" + pats[0]}}, &bin)
			srv.control(t, "create", map[string]any{"resourceType": "DocumentReference", "status": "current",
				"meta":    map[string]any{"security": []map[string]string{{"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "PSY"}}},
				"subject": map[string]string{"reference": "Patient/" + pats[0]},
				"content": []map[string]any{{"attachment": map[string]string{"contentType": "text/plain", "url": "Binary/" + bin.ID}}}}, &doc)
			if bin.ID == "" || doc.ID == "" {
				t.Fatalf("created Binary %q DocumentReference %q", bin.ID, doc.ID)
			}
			time.Sleep(time.Second)
			if res, err := env.run(t, env.options(srv)); err != nil || !res.Full || res.Resources != 5 {
				t.Fatalf("full sync: %+v %v", res, err)
			}
			time.Sleep(1100 * time.Millisecond)
			srv.control(t, "update", map[string]string{"type": "DocumentReference", "id": doc.ID}, nil)
			res, err := env.run(t, env.options(srv))
			if err != nil {
				t.Fatalf("incremental sync of the changed DocumentReference alone: %v", err)
			}
			last := env.imp.calls[len(env.imp.calls)-1]
			if res.Full || last.types["DocumentReference"] != 1 || last.types["Binary"] != 0 {
				t.Fatalf("incremental sync: full %v types %v; want the DocumentReference alone", res.Full, last.types)
			}
			page, labelled := labelledCatalog(t, env.imp.catalogPath, func(r store.Resource) string {
				return fmt.Sprintf("%s v%d %v", r.Labels.Type, r.Version, r.Labels.Sensitivity)
			})
			if want := []string{"attachment v1 [psy]", "documentreference v2 [psy]"}; len(page) != 5 || !slices.Equal(labelled, want) {
				for _, r := range page {
					t.Logf("%s %s v%d %v", r.URI, r.Labels.Type, r.Version, r.Labels.Sensitivity)
				}
				t.Errorf("after the incremental sync: %d live, labelled %q, want 5 and %q", len(page), labelled, want)
			}
		})
	}
}

// onePatientSync is a sync environment and the real FHIR server it syncs
// from in mode ("bulk": a system-level Bulk export; "rest": searches),
// seeded with one patient's three resources, and that patient's id (in a
// slice of one, as the server lists them).
func onePatientSync(t *testing.T, mode string) (*syncEnv, *fhirServer, []string) {
	t.Helper()
	env := newSyncEnv(t)
	bulk := map[string]string{"bulk": "system", "rest": "none"}[mode]
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-sync", JWKS: env.jwks, Bulk: bulk, Seed: map[string]int{"resources": 3}, ExportPolls: 1})
	var pats []string
	srv.control(t, "ids", map[string]string{"type": "Patient"}, &pats)
	if len(pats) != 1 {
		t.Fatalf("patients %v", pats)
	}
	return env, srv, pats
}

// labelledCatalog reads the catalog at path after a sync: its live
// resources (the first 100) and, sorted, describe of each that carries a
// sensitivity label.
func labelledCatalog(t *testing.T, path string, describe func(store.Resource) string) (page []store.Resource, labelled []string) {
	t.Helper()
	st, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if page, err = st.Page("", 100); err != nil {
		t.Fatal(err)
	}
	for _, r := range page {
		if len(r.Labels.Sensitivity) > 0 {
			labelled = append(labelled, describe(r))
		}
	}
	slices.Sort(labelled)
	return page, labelled
}

// TestSyncFetchesLinkedBinary: a DocumentReference on the real FHIR server
// whose attachment url names a Binary of that server, synced by an export
// (or search) that does not hold Binaries (as Epic's and Oracle Health's
// Bulk exports do not: Binary is outside the Patient compartment): the
// sync fetches the Binary by its url (GET [base]/Binary/<id>, with its
// token) and imports it with the DocumentReference, so the note's bytes
// are in the catalog with the DocumentReference's label. Before, the whole
// sync failed on the reader's dangling link and imported nothing.
func TestSyncFetchesLinkedBinary(t *testing.T) {
	for _, mode := range []string{"bulk", "rest"} {
		t.Run(mode, func(t *testing.T) {
			env, srv, pats := onePatientSync(t, mode)
			note := "Progress note: patient doing well.\n"
			var bin, doc, doc2 struct {
				ID string `json:"id"`
			}
			// No securityContext: the Binary is placed by the
			// DocumentReference linking it.
			srv.control(t, "create", map[string]any{"resourceType": "Binary", "contentType": "text/plain",
				"data": base64.StdEncoding.EncodeToString([]byte(note))}, &bin)
			srv.control(t, "create", map[string]any{"resourceType": "DocumentReference", "status": "current",
				"meta":    map[string]any{"security": []map[string]string{{"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "PSY"}}},
				"subject": map[string]string{"reference": "Patient/" + pats[0]},
				"content": []map[string]any{{"attachment": map[string]string{"contentType": "text/plain", "url": "Binary/" + bin.ID}}}}, &doc)
			// The same Binary named absolutely, on this server's base.
			srv.control(t, "create", map[string]any{"resourceType": "DocumentReference", "status": "current",
				"subject": map[string]string{"reference": "Patient/" + pats[0]},
				"content": []map[string]any{{"attachment": map[string]string{"contentType": "text/plain", "url": srv.url + "/Binary/" + bin.ID}}}}, &doc2)
			if bin.ID == "" || doc.ID == "" || doc2.ID == "" {
				t.Fatalf("created Binary %q DocumentReferences %q %q", bin.ID, doc.ID, doc2.ID)
			}
			// The next increment starts at the second of this sync: none
			// of these in it.
			time.Sleep(time.Second)
			o := env.options(srv)
			// The export (its _type) and the search leave Binary out.
			o.Types = []string{"DocumentReference", "Organization", "Patient", "Practitioner"}
			before := srv.stats(t).Requests["GET /fhir/Binary/:id"]
			start := time.Now()
			res, err := env.run(t, o)
			if err != nil {
				t.Fatalf("sync of a DocumentReference whose Binary the export does not hold: %v", err)
			}
			t.Logf("%s: fetched %d Binaries; sync took %s, %d requests", mode, res.Binaries, time.Since(start).Round(time.Millisecond), res.Requests)
			if got := srv.stats(t).Requests["GET /fhir/Binary/:id"] - before; res.Binaries != 1 || res.Types["Binary"] != 1 || res.Resources != 6 || got != 1 {
				t.Fatalf("result %+v, server saw %d Binary reads; want 1 Binary fetched once, 6 resources", res, got)
			}
			st, err := store.Open(env.imp.catalogPath, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := st.Close(); err != nil {
					t.Errorf("closing the synced catalog: %v", err)
				}
			})
			page, err := st.Page("", 100)
			if err != nil {
				t.Fatal(err)
			}
			var bins []store.Resource
			var labelled []string
			for _, r := range page {
				if r.Labels.Type == "attachment" {
					bins = append(bins, r)
				}
				if len(r.Labels.Sensitivity) > 0 {
					labelled = append(labelled, fmt.Sprintf("%s %v", r.Labels.Type, r.Labels.Sensitivity))
				}
			}
			slices.Sort(labelled)
			if len(page) != 6 || len(bins) != 1 {
				t.Fatalf("catalog: %d live, %d Binaries; want 6 and 1", len(page), len(bins))
			}
			body, err := st.Blob(context.Background(), bins[0].Digest)
			if err != nil || string(body) != note || !strings.HasPrefix(bins[0].MIMEType, "text/plain") {
				t.Fatalf("the Binary in the catalog: %q (%s), %v; want the note", body, bins[0].MIMEType, err)
			}
			// The PSY label of the DocumentReference linking it labels the
			// Binary, and through it the other DocumentReference naming it.
			if want := []string{"attachment [psy]", "documentreference [psy]", "documentreference [psy]"}; !slices.Equal(labelled, want) {
				for _, r := range page {
					t.Logf("%s %s v%d %v", r.URI, r.Labels.Type, r.Version, r.Labels.Sensitivity)
				}
				t.Fatalf("labelled %q, want %q", labelled, want)
			}
			var sawEnd bool
			for _, e := range env.audit.got {
				if e.Action == fhirsync.ActionSyncEnd {
					sawEnd = strings.Contains(e.Reason, " binaries_fetched=1") && e.Outcome == audit.OutcomeAllow
				}
			}
			if !sawEnd {
				t.Fatalf("no sync/end record counting the fetched Binary: %+v", env.audit.got)
			}
			binURI := bins[0].URI
			st.Close()

			// An increment whose DocumentReference changed and whose Binary
			// did not: the Binary is live in the catalog, so it is not
			// fetched again (the reader links the stored one); a full sync
			// fetches it again, and the import finds it unchanged.
			for _, full := range []bool{false, true} {
				time.Sleep(1100 * time.Millisecond)
				srv.control(t, "update", map[string]string{"type": "DocumentReference", "id": doc.ID}, nil)
				before := srv.stats(t).Requests["GET /fhir/Binary/:id"]
				o := o
				o.Full = full
				res, err = env.run(t, o)
				want := map[bool]int{false: 0, true: 1}[full]
				if got := srv.stats(t).Requests["GET /fhir/Binary/:id"] - before; err != nil || res.Full != full || res.Binaries != want || got != want {
					t.Fatalf("sync (full %v) of the changed DocumentReference: %+v, %v, %d Binary reads; want %d fetched", full, res, err, got, want)
				}
				st, err = store.Open(env.imp.catalogPath, store.Options{ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				r, err := st.Get(binURI)
				st.Close()
				if err != nil || r.Version != 1 || !slices.Equal(r.Labels.Sensitivity, []string{"psy"}) {
					t.Fatalf("the Binary after the sync (full %v): v%d %v, %v; want v1 [psy], unchanged", full, r.Version, r.Labels.Sensitivity, err)
				}
			}

			// A Binary the server cannot serve fails the sync whole,
			// naming the attachment's place, not its content.
			time.Sleep(1100 * time.Millisecond)
			srv.control(t, "create", map[string]any{"resourceType": "DocumentReference", "status": "current",
				"subject": map[string]string{"reference": "Patient/" + pats[0]},
				"content": []map[string]any{{"attachment": map[string]string{"contentType": "text/plain", "url": "Binary/gone"}}}}, nil)
			calls := len(env.imp.calls)
			_, err = env.run(t, o)
			if !errors.Is(err, fhirsync.ErrServer) || !strings.Contains(err.Error(), "DocumentReference.content[0].attachment.url") ||
				!strings.Contains(err.Error(), "HTTP 404") || strings.Contains(err.Error(), pats[0]) {
				t.Fatalf("sync with an unservable Binary: %v; want ErrServer naming the attachment and the 404, not the patient", err)
			}
			if len(env.imp.calls) != calls {
				t.Fatalf("the failed sync imported")
			}
			// A server that refuses the token Binary reads (a scope
			// without Binary) fails it so, with a hint at the scope.
			srv.control(t, "fault", map[string]any{"match": "/Binary/", "status": 403, "count": 10}, nil)
			_, err = env.run(t, o)
			if !errors.Is(err, fhirsync.ErrAuth) || !strings.Contains(err.Error(), "content[0].attachment.url") || !strings.Contains(err.Error(), "system/Binary.read") {
				t.Fatalf("sync refused Binary reads: %v; want ErrAuth naming the attachment and the scope", err)
			}
			if len(env.imp.calls) != calls {
				t.Fatalf("the failed sync imported")
			}
		})
	}
}

// TestSyncSecurityContextNamesStoredResource: a Binary whose
// securityContext names a DocumentReference (R4: "a proxy of the security
// sensitivity" of the Binary) labelled HIV, created on the real FHIR server
// with an unlabelled DocumentReference linking it after the labelled one
// was synced. The incremental sync holds the new Binary and its carrier
// but not the unchanged DocumentReference its securityContext names: the
// reader counted that securityContext for nothing, so the Binary and its
// carrier were imported without hiv, while a full sync (or custos import
// of the same data) labels both hiv. Found by probe-sync3 syncing HL7's
// R4 Binary/example shape; fails on the old code in both modes.
func TestSyncSecurityContextNamesStoredResource(t *testing.T) {
	for _, mode := range []string{"bulk", "rest"} {
		t.Run(mode, func(t *testing.T) {
			env, srv, pats := onePatientSync(t, mode)
			var proxy, bin, doc struct {
				ID string `json:"id"`
			}
			srv.control(t, "create", map[string]any{"resourceType": "DocumentReference", "status": "current",
				"meta":    map[string]any{"security": []map[string]string{{"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "HIV"}}},
				"subject": map[string]string{"reference": "Patient/" + pats[0]},
				"content": []map[string]any{{"attachment": map[string]string{"contentType": "text/plain", "url": "https://elsewhere.example/doc/1"}}}}, &proxy)
			time.Sleep(time.Second)
			if res, err := env.run(t, env.options(srv)); err != nil || !res.Full || res.Resources != 4 {
				t.Fatalf("full sync: %+v %v", res, err)
			}
			time.Sleep(1100 * time.Millisecond)
			srv.control(t, "create", map[string]any{"resourceType": "Binary", "contentType": "text/plain", "data": "aGk=",
				"securityContext": map[string]string{"reference": "DocumentReference/" + proxy.ID}}, &bin)
			srv.control(t, "create", map[string]any{"resourceType": "DocumentReference", "status": "current",
				"subject": map[string]string{"reference": "Patient/" + pats[0]},
				"content": []map[string]any{{"attachment": map[string]string{"contentType": "text/plain", "url": "Binary/" + bin.ID}}}}, &doc)
			if proxy.ID == "" || bin.ID == "" || doc.ID == "" {
				t.Fatalf("created DocumentReference %q Binary %q DocumentReference %q", proxy.ID, bin.ID, doc.ID)
			}
			res, err := env.run(t, env.options(srv))
			if err != nil {
				t.Fatalf("incremental sync: %v", err)
			}
			last := env.imp.calls[len(env.imp.calls)-1]
			if res.Full || last.types["DocumentReference"] != 1 || last.types["Binary"] != 1 {
				t.Fatalf("incremental sync: full %v types %v; want the new Binary and DocumentReference", res.Full, last.types)
			}
			page, labelled := labelledCatalog(t, env.imp.catalogPath, func(r store.Resource) string {
				return fmt.Sprintf("%s %s v%d %v", r.Labels.Type, r.Labels.Patient, r.Version, r.Labels.Sensitivity)
			})
			p := pats[0]
			want := []string{"attachment " + p + " v1 [hiv]", "documentreference " + p + " v1 [hiv]", "documentreference " + p + " v1 [hiv]"}
			if len(page) != 6 || !slices.Equal(labelled, want) {
				for _, r := range page {
					t.Logf("%s %s v%d %v", r.URI, r.Labels.Type, r.Version, r.Labels.Sensitivity)
				}
				t.Errorf("after the incremental sync: %d live, labelled %q, want 6 and %q", len(page), labelled, want)
			}
		})
	}
}
