package server_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

// The one server fixture of this package's tests and benchmarks: a Server
// assembled as custos serve assembles it, on real bbolt files in
// t.TempDir() (a catalog imported from synthetic data, an audit log opened
// with audittest, so that it is verified on cleanup), with the default
// policy or a policy directory, and dev keys or the keys given. Every test
// that serves requests builds it with newServerFixture (or newFixture,
// newFixtureKeys, newLiveFixture); no test assembles a server by hand.

// seeded is a synthetic data set imported once per test binary: generating
// and importing are deterministic, and each test opens its own copy.
var seeded struct {
	once sync.Once
	dir  string // seed output (principals/, SUMMARY.json)
	cat  string // a catalog.db to copy
	err  error
}

// The default seed: small enough for every test to copy.
var defaultSeed = synth.Options{Patients: 12, Seed: 7}

func seedOnce(t testing.TB) (seedDir, catalogPath string) {
	t.Helper()
	seeded.once.Do(func() {
		base, err := os.MkdirTemp("", "custos-server-test-")
		if err != nil {
			seeded.err = err
			return
		}
		seeded.dir = filepath.Join(base, "synthetic")
		seeded.cat = filepath.Join(base, "catalog.db")
		seeded.err = seedCatalog(seeded.dir, seeded.cat, defaultSeed)
	})
	if seeded.err != nil {
		t.Fatal(seeded.err)
	}
	return seeded.dir, seeded.cat
}

// seedCatalog generates a synthetic data set into seedDir and imports it
// into a new catalog at catPath.
func seedCatalog(seedDir, catPath string, o synth.Options) error {
	if _, err := synth.Generate(context.Background(), seedDir, o); err != nil {
		return err
	}
	st, err := store.Open(catPath, store.Options{})
	if err != nil {
		return err
	}
	_, err = st.Import(context.Background(), seedDir, nil)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return err
}

// copySeedCatalog copies the shared seeded catalog into a fresh directory
// dir (which also takes the test's audit log) as catPath.
func copySeedCatalog(t testing.TB) (seedDir, dir, catPath string) {
	t.Helper()
	seedDir, cat := seedOnce(t)
	dir = t.TempDir()
	catPath = filepath.Join(dir, "catalog.db")
	data, err := os.ReadFile(cat)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(catPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return seedDir, dir, catPath
}

// defaultPolicy is the default policy, compiled once per test binary: an
// engine is immutable and safe for concurrent use, so every fixture may
// share it.
var defaultPolicy = sync.OnceValues(func() (*policy.Engine, error) {
	return policy.Default(context.Background(), policy.Options{})
})

// loadPolicy is the default policy ("") or the policy in dir.
func loadPolicy(t testing.TB, dir string) *policy.Engine {
	t.Helper()
	var (
		eng *policy.Engine
		err error
	)
	if dir == "" {
		eng, err = defaultPolicy()
	} else {
		eng, err = policy.LoadDir(context.Background(), dir, policy.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// fixtureOptions choose what newServerFixture assembles. The zero value is
// the usual fixture: the shared 12-patient catalog (read-only), the default
// policy, dev keys, PageSize 10.
type fixtureOptions struct {
	policyDir string      // "" = the default policy
	keys      server.Keys // nil = dev keys
	// seed, if not nil, generates and imports a data set of its own
	// instead of copying the shared one (a large catalog).
	seed *synth.Options
	// live serves a store.Live catalog whose changes the server notifies
	// (Server.CatalogChanged), as custos serve wires it.
	live bool
	// tune adjusts the server configuration before New.
	tune func(*server.Config)
	// corpus also imports the realistic FHIR corpus (corpusPatient's
	// resources; research_test.go).
	corpus bool
	// imports, if not nil, imports more into the catalog file before it is
	// served.
	imports func(t testing.TB, catPath string)
}

type fixture struct {
	t       testing.TB
	seedDir string
	catPath string
	catalog server.Catalog // the catalog served (*store.Store or *store.Live)
	live    *store.Live    // the catalog if served live, else nil
	log     *audit.Log
	logPath string
	srv     *server.Server
	keys    server.Keys
	tune    func(*server.Config)
}

// newServerFixture assembles a server as o says. On cleanup the catalog
// and the audit log are closed and the log is verified (audittest): any
// test that breaks the chain fails.
func newServerFixture(t testing.TB, o fixtureOptions) *fixture {
	t.Helper()
	var seedDir, dir, catPath string
	if o.seed != nil {
		dir = t.TempDir()
		seedDir, catPath = filepath.Join(dir, "synthetic"), filepath.Join(dir, "catalog.db")
		if err := seedCatalog(seedDir, catPath, *o.seed); err != nil {
			t.Fatal(err)
		}
	} else {
		seedDir, dir, catPath = copySeedCatalog(t)
	}
	if o.corpus {
		importCorpus(t, catPath)
	}
	if o.imports != nil {
		o.imports(t, catPath)
	}
	f := &fixture{t: t, seedDir: seedDir, catPath: catPath, logPath: filepath.Join(dir, "audit.db"), keys: o.keys, tune: o.tune}
	if o.live {
		live, err := store.OpenLive(catPath, store.LiveOptions{OnChange: func(c store.Change) {
			f.srv.CatalogChanged(context.Background(), c)
		}})
		if err != nil {
			t.Fatal(err)
		}
		f.catalog, f.live = live, live
		t.Cleanup(func() { live.Close() })
	} else {
		st, err := store.Open(catPath, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		f.catalog = st
		t.Cleanup(func() { st.Close() })
	}
	f.log = audittest.OpenPath(t, f.logPath, audit.Options{})
	if f.keys == nil {
		keys, err := secrets.NewDev()
		if err != nil {
			t.Fatal(err)
		}
		f.keys = keys
	}
	f.reconfigurePolicy(o.policyDir, nil)
	return f
}

// newFixture is the usual fixture with the default policy (or policyDir).
func newFixture(t testing.TB, policyDir string) *fixture {
	t.Helper()
	return newServerFixture(t, fixtureOptions{policyDir: policyDir})
}

// newFixtureKeys is newFixture with the given keys (nil: dev keys).
func newFixtureKeys(t testing.TB, policyDir string, keys server.Keys) *fixture {
	t.Helper()
	return newServerFixture(t, fixtureOptions{policyDir: policyDir, keys: keys})
}

// liveFixture is a fixture over a store.Live catalog whose changes are
// notified (subscribe_test.go).
type liveFixture struct{ *fixture }

func newLiveFixture(t *testing.T) *liveFixture {
	t.Helper()
	return &liveFixture{newServerFixture(t, fixtureOptions{live: true})}
}

// config is the server configuration of f with policy eng: f's catalog,
// audit log and keys, PageSize 10, then the fixture's own tuning.
func (f *fixture) config(eng server.Decider) server.Config {
	cfg := server.Config{Catalog: f.catalog, Policy: eng, Audit: f.log, Keys: f.keys, PageSize: 10}
	if f.tune != nil {
		f.tune(&cfg)
	}
	return cfg
}

// reconfigure replaces f's server by one on the same catalog, audit log and
// keys with the default policy and cfg's tuning fields.
func (f *fixture) reconfigure(tune func(*server.Config)) {
	f.t.Helper()
	f.reconfigurePolicy("", tune)
}

// reconfigurePolicy is reconfigure with the policy in policyDir ("" for the
// default policy).
func (f *fixture) reconfigurePolicy(policyDir string, tune func(*server.Config)) {
	f.t.Helper()
	cfg := f.config(loadPolicy(f.t, policyDir))
	if tune != nil {
		tune(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.srv = srv
}

func (f *fixture) identity(name string) server.Identity {
	f.t.Helper()
	id, err := server.LoadPrincipalFile(filepath.Join(f.seedDir, "principals", name+".json"))
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

// connect serves f over an in-memory transport as id and returns a go-sdk
// client session.
func (f *fixture) connect(id server.Identity) *mcp.ClientSession {
	f.t.Helper()
	return f.connectFor(f.t, id, "")
}

// connectRev is connect with the client asking for protocol revision rev.
func (f *fixture) connectRev(id server.Identity, rev string) *mcp.ClientSession {
	f.t.Helper()
	return f.connectFor(f.t, id, rev)
}

// connectFor is connectRev for test t (a subtest or sub-benchmark of the
// fixture's own); rev "" is the client's default revision.
func (f *fixture) connectFor(t testing.TB, id server.Identity, rev string) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	srv := f.srv
	go func() {
		defer close(done)
		srv.ServeStdio(ctx, st, id)
	}()
	var opts *mcp.ClientSessionOptions
	if rev != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: rev}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if got := cs.InitializeResult().ProtocolVersion; rev != "" && got != rev {
		t.Fatalf("client speaks %s, want %s", got, rev)
	}
	t.Cleanup(func() { cs.Close(); cancel(); <-done })
	return cs
}

// audited is how uri appears in an audit record: its patient segment is the
// keyed hash of the patient id (an implementation independent of the
// server's, from the documented formula).
func (f *fixture) audited(uri string) string {
	f.t.Helper()
	u, err := store.ParseURI(uri)
	if err != nil {
		f.t.Fatal(err)
	}
	k, err := f.keys.AuditKey(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	if u.Patient == "" {
		return uri // tenant-level reference data: no patient to pseudonymize
	}
	return strings.ReplaceAll(uri, u.Patient, audit.Pseudonym(k.Bytes, u.Patient))
}

// patientURI is the URI of the catalog's first resource that concerns a
// patient: the synthetic data holds tenant-level reference data too (its
// payers' Organizations, since h-views), which sorts first.
func (f *fixture) patientURI() string {
	f.t.Helper()
	for _, r := range f.allURIs() {
		if r.Labels.Patient != "" {
			return r.URI
		}
	}
	f.t.Fatal("no resource of a patient in the fixture")
	return ""
}

// pseudonym is the keyed hash an audit record names patient id by.
func (f *fixture) pseudonym(id string) string {
	f.t.Helper()
	k, err := f.keys.AuditKey(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return audit.Pseudonym(k.Bytes, id)
}

// auditedAs is uri as a record names it when its patient segment stands
// for patient id (FHIR input: the segment is a keyed id of it).
func (f *fixture) auditedAs(uri, id string) string {
	f.t.Helper()
	u, err := store.ParseURI(uri)
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.ReplaceAll(uri, u.Patient, f.pseudonym(id))
}

// records returns every audit record so far.
func (f *fixture) records() []audit.Record {
	f.t.Helper()
	var buf bytes.Buffer
	if _, err := f.log.Export(context.Background(), &buf, audit.FormatJSONL, audit.Filter{}); err != nil {
		f.t.Fatal(err)
	}
	var out []audit.Record
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		r, err := audit.Decode(sc.Bytes())
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// allURIs is every resource of the catalog served, in URI order.
func (f *fixture) allURIs() []store.Resource {
	f.t.Helper()
	var all []store.Resource
	after := ""
	for {
		page, err := f.catalog.Page(after, 100)
		if err != nil {
			f.t.Fatal(err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].URI
	}
}

// testNamer is the namer of the tests' FHIR imports: tenant
// general-hospital under a fixed id key.
func testNamer(t testing.TB) *store.Namer {
	t.Helper()
	n, err := store.NewNamer("general-hospital", []byte("0123456789abcdef0123456789abcdef"), "test:id-key@1")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// importEntries imports es, named by n, into the catalog file at catPath
// (an incremental import: Deleted entries retire what they name).
func importEntries(t testing.TB, catPath string, n *store.Namer, es ...store.Entry) {
	t.Helper()
	if _, err := store.ImportEntriesStaged(context.Background(), catPath, slicesEntries(es), store.EntryOptions{Namer: n}, store.Options{}); err != nil {
		t.Fatal(err)
	}
}

// slicesEntries is es as an entry stream.
func slicesEntries(es []store.Entry) func(func(store.Entry, error) bool) {
	return func(yield func(store.Entry, error) bool) {
		for _, e := range es {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// importLive is importEntries into lf's catalog, then swaps it in (the
// server is told what changed, as custos serve is).
func (lf *liveFixture) importLive(n *store.Namer, es ...store.Entry) {
	lf.t.Helper()
	importEntries(lf.t, lf.catPath, n, es...)
	if _, swapped, err := lf.live.Reload(); err != nil || !swapped {
		lf.t.Fatalf("Reload: %v %v", swapped, err)
	}
}
