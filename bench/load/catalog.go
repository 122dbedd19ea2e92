package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

// The big-catalog scenario (-catalog N): custos alone, through the shipped
// assembly over HTTPS, on a synthetic catalog of N patients (about ten
// resources each: 10,000 patients make ~100,000 resources), with one
// bearer token per persona of the synthetic data set (its principals/
// directory: clinician, clinician-hiv, billing, researcher, auditor,
// outsider). It measures what a caller meets first on a big catalog:
//
//   - the first resources/list page (no cursor) of each persona, in a new
//     session, -catalog-rounds times; the first round is the persona's
//     first on the server (its policy values not yet cached);
//   - for a persona whose first page is empty, how many pages it takes to
//     reach the end (the target: one, without a cursor, when nothing is
//     visible);
//   - a researcher's first read (of an alias listed before) in a new
//     session on a freshly reopened assembly (nothing cached: no research
//     aliases, no policy values), then in later new sessions.
//
// Targets (issue 17): every persona's first page ≤ 50 ms; one empty page
// for a caller who sees nothing; a researcher's first read ≤ 50 ms.
const (
	targetFirstPageMs    = 50.0
	targetResearchReadMs = 50.0
)

// cliCatalog runs the scenario for cli and prints its report.
func cliCatalog(ctx context.Context, o catalogOptions, asJSON, check bool, stdout, stderr io.Writer) int {
	rep, err := runCatalog(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "load: %v\n", err)
		return 1
	}
	return emit(rep, rep.Pass, asJSON, check, stdout, stderr)
}

// catalogOptions configure the big-catalog scenario.
type catalogOptions struct {
	Patients int
	Rounds   int
	DataDir  string // "": a temporary directory, removed
	Logger   *slog.Logger
	Progress io.Writer
}

// catalogReport is the scenario's result.
type catalogReport struct {
	Machine   machine `json:"machine"`
	Patients  int     `json:"patients"`
	Resources int     `json:"resources"`
	// OpenMs is app.Open on the imported catalog (the catalog index is
	// built there).
	OpenMs   []float64       `json:"open_ms"`
	Personas []personaResult `json:"personas"`
	// ResearchReadMs is a researcher's first read in a new session: [0]
	// on a freshly reopened assembly, then in later sessions.
	ResearchReadMs []float64 `json:"research_read_ms"`
	Pass           bool      `json:"pass"`
	Missed         []string  `json:"missed,omitempty"`
}

type personaResult struct {
	Persona string `json:"persona"`
	// FirstPageMs is the first page, per round, each in a new session.
	FirstPageMs []float64 `json:"first_page_ms"`
	Items       int       `json:"items"`
	Cursor      bool      `json:"cursor"`
	// PagesToEnd is how many pages reach the end when the first is empty.
	PagesToEnd int `json:"pages_to_end,omitempty"`
}

// runCatalog runs the scenario.
func runCatalog(ctx context.Context, o catalogOptions) (_ *catalogReport, err error) {
	if o.Patients < 1 || o.Rounds < 1 {
		return nil, errors.New("-catalog and -catalog-rounds must be at least 1")
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	dir := o.DataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "custos-catalog-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	rep := &catalogReport{Machine: describeMachine(), Patients: o.Patients}
	seed := filepath.Join(dir, "seed")
	fmt.Fprintf(progress, "load: generating %d synthetic patients\n", o.Patients)
	if _, err := synth.Generate(ctx, seed, synth.Options{Patients: o.Patients, Seed: 1}); err != nil {
		return nil, err
	}
	st, err := store.Open(filepath.Join(dir, app.CatalogFile), store.Options{Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	_, err = st.Import(ctx, seed, nil)
	if err == nil {
		rep.Resources, err = st.Count()
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("importing: %w", err)
	}
	for _, sub := range []string{"fhir", "notes", "reports", "images"} { // the content is in the catalog now
		if err := os.RemoveAll(filepath.Join(seed, sub)); err != nil {
			return nil, err
		}
	}
	tokens, verifier, err := personaTokens(filepath.Join(seed, "principals"))
	if err != nil {
		return nil, err
	}
	tlsCfg, pool, err := tlsSetup()
	if err != nil {
		return nil, err
	}
	c := &catalogClient{tokens: tokens, pool: pool}

	open := func() (*app.App, func() error, error) {
		t0 := time.Now()
		a, err := app.Open(ctx, app.Options{
			DataDir: dir, Dev: true, Node: benchNode, Version: "load-bench", Logger: o.Logger,
			Checkpoints: app.CheckpointOptions{Every: checkpointEvery, Interval: checkpointInterval},
			HTTP:        &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: verifier, TLSConfig: tlsCfg},
		})
		if err != nil {
			return nil, nil, err
		}
		rep.OpenMs = append(rep.OpenMs, ms(time.Since(t0)))
		sctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- a.Serve(sctx) }()
		c.url = a.URL()
		return a, func() error { stop(); return errors.Join(<-served, a.Close()) }, nil
	}
	_, closeApp, err := open()
	if err != nil {
		return nil, err
	}
	defer func() {
		if closeApp != nil {
			err = errors.Join(err, closeApp())
		}
	}()

	personas := make([]string, 0, len(tokens))
	for p := range tokens {
		personas = append(personas, p)
	}
	slices.Sort(personas)
	results := map[string]*personaResult{}
	alias := ""
	for round := range o.Rounds {
		fmt.Fprintf(progress, "load: first list pages, round %d of %d\n", round+1, o.Rounds)
		for _, p := range personas {
			r := results[p]
			if r == nil {
				r = &personaResult{Persona: p}
				results[p] = r
			}
			res, d, err := c.firstPage(ctx, p)
			if err != nil {
				return nil, fmt.Errorf("%s: list: %w", p, err)
			}
			r.FirstPageMs = append(r.FirstPageMs, ms(d))
			r.Items, r.Cursor = len(res.Resources), res.NextCursor != ""
			if p == "researcher" && len(res.Resources) > 0 {
				alias = res.Resources[len(res.Resources)-1].URI
			}
		}
	}
	for _, p := range personas {
		r := results[p]
		if r.Items == 0 {
			if r.PagesToEnd, err = c.pagesToEnd(ctx, p); err != nil {
				return nil, fmt.Errorf("%s: list: %w", p, err)
			}
		}
		rep.Personas = append(rep.Personas, *r)
	}

	if alias != "" {
		fmt.Fprintln(progress, "load: a researcher's first read, after reopening the assembly")
		err := closeApp()
		closeApp = nil
		if err != nil {
			return nil, err
		}
		if _, closeApp, err = open(); err != nil {
			return nil, err
		}
		for range o.Rounds + 1 {
			d, err := c.read(ctx, "researcher", alias)
			if err != nil {
				return nil, fmt.Errorf("researcher: read: %w", err)
			}
			rep.ResearchReadMs = append(rep.ResearchReadMs, ms(d))
		}
	}
	rep.judge()
	rep.Machine.LoadAfter = loadavg()
	return rep, nil
}

// judge sets Pass and Missed: the median first page of every persona, the
// empty list's page count and the cold research read against the targets.
func (r *catalogReport) judge() {
	for _, p := range r.Personas {
		if m := median(p.FirstPageMs); m > targetFirstPageMs {
			r.Missed = append(r.Missed, fmt.Sprintf("%s: first page %.1f ms (median) > %.0f ms", p.Persona, m, targetFirstPageMs))
		}
		if p.Items == 0 && p.PagesToEnd != 1 {
			r.Missed = append(r.Missed, fmt.Sprintf("%s sees nothing in %d pages, not one", p.Persona, p.PagesToEnd))
		}
	}
	if len(r.ResearchReadMs) == 0 {
		r.Missed = append(r.Missed, "no research read measured (the researcher listed nothing)")
	} else if r.ResearchReadMs[0] > targetResearchReadMs {
		r.Missed = append(r.Missed, fmt.Sprintf("researcher: first read after a restart %.1f ms > %.0f ms", r.ResearchReadMs[0], targetResearchReadMs))
	}
	r.Pass = len(r.Missed) == 0
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func (r *catalogReport) print(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "machine: %d CPU %s, %.1f GiB, %s, %s; load average before %s, after %s\n", m.NumCPU, m.CPU, m.MemGiB, m.OS, m.Go, m.LoadBefore, m.LoadAfter)
	fmt.Fprintf(w, "catalog: %d patients, %d resources; app.Open %s ms\n\n", r.Patients, r.Resources, joinMs(r.OpenMs))
	fmt.Fprintln(w, "persona        first page ms (round 1 = first on the server; each a new session)   items  cursor  pages to end")
	for _, p := range r.Personas {
		end := ""
		if p.Items == 0 {
			end = fmt.Sprint(p.PagesToEnd)
		}
		fmt.Fprintf(w, "%-14s %-70s %5d  %-6v  %s\n", p.Persona, joinMs(p.FirstPageMs)+fmt.Sprintf(" (median %.1f)", median(p.FirstPageMs)), p.Items, p.Cursor, end)
	}
	fmt.Fprintf(w, "\nresearcher's first read in a new session: %s ms (the first after reopening the assembly)\n", joinMs(r.ResearchReadMs))
	for _, s := range r.Missed {
		fmt.Fprintln(w, "MISSED:", s)
	}
	fmt.Fprintf(w, "targets (first page ≤ %.0f ms for every persona, median; one empty page when nothing is visible; research first read ≤ %.0f ms): %s\n",
		targetFirstPageMs, targetResearchReadMs, passFail(r.Pass))
}

func joinMs(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(s, ", ")
}

// personaTokens makes a bearer token for every principal file in dir
// (persona name = file name without .json) and the verifier of them.
func personaTokens(dir string) (map[string]string, *server.Tokens, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, nil, fmt.Errorf("no principals in the synthetic data set (%v)", err)
	}
	tokens := map[string]string{}
	var tf server.TokenFile
	for _, f := range files {
		p, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		b := make([]byte, 32)
		rand.Read(b)
		tok := hex.EncodeToString(b)
		tokens[strings.TrimSuffix(filepath.Base(f), ".json")] = tok
		tf.Tokens = append(tf.Tokens, server.TokenEntry{TokenSHA256: server.HashToken(tok), Principal: p})
	}
	data, err := json.Marshal(tf)
	if err != nil {
		return nil, nil, err
	}
	v, err := server.ParseTokenFile(data)
	return tokens, v, err
}

// catalogClient opens a new session per measurement, as a persona.
type catalogClient struct {
	url    string
	tokens map[string]string
	pool   *x509.CertPool
}

// session connects a new stateless (2026-07-28) client as persona; the
// handshake is not measured.
func (c *catalogClient) session(ctx context.Context, persona string) (*mcp.ClientSession, func(), error) {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS13}}
	hc := &http.Client{Transport: bearer{token: c.tokens[persona], next: tr}}
	cl := mcp.NewClient(&mcp.Implementation{Name: "custos-load-catalog", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion(true)})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, nil, err
	}
	// One request on the connection first, so that the measured request
	// does not pay the TLS handshake: templates, which reads no catalog.
	if _, err := cs.ListResourceTemplates(ctx, nil); err != nil {
		cs.Close()
		tr.CloseIdleConnections()
		return nil, nil, err
	}
	return cs, func() { cs.Close(); tr.CloseIdleConnections() }, nil
}

func (c *catalogClient) firstPage(ctx context.Context, persona string) (*mcp.ListResourcesResult, time.Duration, error) {
	cs, done, err := c.session(ctx, persona)
	if err != nil {
		return nil, 0, err
	}
	defer done()
	t0 := time.Now()
	res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{})
	return res, time.Since(t0), err
}

func (c *catalogClient) pagesToEnd(ctx context.Context, persona string) (int, error) {
	cs, done, err := c.session(ctx, persona)
	if err != nil {
		return 0, err
	}
	defer done()
	pages := 0
	for cursor := ""; ; {
		res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			return pages, err
		}
		pages++
		if cursor = res.NextCursor; cursor == "" {
			return pages, nil
		}
	}
}

func (c *catalogClient) read(ctx context.Context, persona, uri string) (time.Duration, error) {
	cs, done, err := c.session(ctx, persona)
	if err != nil {
		return 0, err
	}
	defer done()
	t0 := time.Now()
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	d := time.Since(t0)
	if err == nil && (len(res.Contents) != 1 || res.Contents[0].URI != uri) {
		err = errors.New("the answer does not name the alias read")
	}
	return d, err
}
