package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

// Data set constants. The tenant is synth's default tenant; every note
// belongs to one of len(resources)/notesPerPatient patients.
const (
	tenant        = "general-hospital"
	noteMIME      = "text/markdown"
	benchClientID = "custos-load-bench"
	benchNode     = "bench"
	// checkpointEvery and checkpointInterval are serve's defaults.
	checkpointEvery    = 1000
	checkpointInterval = time.Second
)

// dataset is the synthetic catalog both servers serve.
type dataset struct {
	uris     []string
	contents []string // contents[i] is the text of uris[i]
	patients []string
}

// newDataset makes n notes of exactly size bytes of ASCII markdown each,
// perPatient notes per patient (the last patient may have fewer),
// deterministically (the same URIs and bytes on every run). Every note has
// distinct content, so the content-addressed store holds n blobs.
func newDataset(n, size, perPatient int) dataset {
	src := mrand.NewChaCha8([32]byte{'c', 'u', 's', 't', 'o', 's', '-', 'l', 'o', 'a', 'd'})
	newID := func() string {
		u, err := uuid.NewRandomFromReader(src)
		if err != nil { // ChaCha8.Read never fails
			panic(err)
		}
		return u.String()
	}
	var d dataset
	for i := 0; i < n; i++ {
		if i%perPatient == 0 {
			d.patients = append(d.patients, newID())
		}
		p := d.patients[len(d.patients)-1]
		d.uris = append(d.uris, fmt.Sprintf("note://%s/patients/%s/notes/%s", tenant, p, newID()))
		d.contents = append(d.contents, noteText(i, size))
	}
	return d
}

// noteText is note #i: a markdown progress note of exactly size bytes
// (synthetic, never real PHI).
func noteText(i, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Progress note %d\n\nSynthetic load-test note; not real PHI.\n\n", i)
	lines := []string{
		"Subjective: patient reports improved sleep and no new symptoms since the last visit.\n",
		"Objective: vitals within normal limits; lungs clear; no peripheral edema.\n",
		"Assessment: condition stable on current regimen; adherence good.\n",
		"Plan: continue medication, repeat laboratory panel in three months, follow up as needed.\n",
	}
	for j := 0; b.Len() < size; j++ {
		b.WriteString(lines[(i+j)%len(lines)])
	}
	s := b.String()[:size]
	if size > 0 {
		s = s[:size-1] + "\n"
	}
	return s
}

// writeManifest writes the data set as an import directory (manifest.jsonl
// and one file per note) under dir.
func writeManifest(dir string, d dataset) error {
	if err := os.MkdirAll(filepath.Join(dir, "notes"), 0o700); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, store.ManifestName))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for i, raw := range d.uris {
		u, err := store.ParseURI(raw)
		if err != nil {
			f.Close()
			return err
		}
		file := filepath.ToSlash(filepath.Join("notes", u.ID+".md"))
		if err := os.WriteFile(filepath.Join(dir, file), []byte(d.contents[i]), 0o600); err != nil {
			f.Close()
			return err
		}
		e := store.ManifestEntry{
			URI: raw, Name: "note-" + u.ID[:8], Title: "Progress note", MIMEType: noteMIME,
			Annotations: store.Annotations{Audience: []string{"assistant", "user"}, Priority: 0.5},
			Labels:      store.Labels{Tenant: u.Tenant, Patient: u.Patient, Type: u.Type},
			File:        file,
		}
		if err := enc.Encode(e); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// tlsSetup is the servers' TLS configuration (a fresh self-signed ECDSA
// P-256 certificate for 127.0.0.1, TLS 1.3 as `custos serve` defaults to)
// and the pool the clients trust it through.
func tlsSetup() (*tls.Config, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "custos load bench"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}},
	}
	return cfg, pool, nil
}

// httpOptions are the Streamable HTTP options of the bare server: those
// server.HTTPHandler gives the go-sdk handler that serves the revision of
// the mode (see mcpHandler in server/transport.go): stateless (2026-07-28)
// with application/json responses (custos frames every stateless answer but
// subscriptions/listen as JSON) and 1 MiB request bodies, or stateful
// (2025-11-25) with SSE and a 30-minute idle session timeout.
// jsonResponse is the bare server's framing (-bare-framing).
func httpOptions(stateless, jsonResponse bool) *mcp.StreamableHTTPOptions {
	o := &mcp.StreamableHTTPOptions{MaxRequestBodyBytes: 1 << 20, JSONResponse: jsonResponse}
	if stateless {
		o.Stateless = true
	} else {
		o.SessionTimeout = server.SessionTimeout
	}
	return o
}

// protocolVersion is the MCP revision the clients ask for in a mode: the
// stateless revision, or the last one with sessions. custos serves both on
// one endpoint and routes by revision; the bare server serves only the
// mode's.
func protocolVersion(stateless bool) string {
	if stateless {
		return server.ProtocolStateless
	}
	return "2025-11-25"
}

// listening is an HTTPS server on 127.0.0.1.
type listening struct {
	url string
	hs  *http.Server
}

// listenTLS serves h over TLS on a random 127.0.0.1 port the way `custos
// serve --tls-cert` does (server.NewHTTPServer, tls.NewListener, Serve):
// the TLS configuration offers no ALPN, so connections are HTTP/1.1.
func listenTLS(h http.Handler, cfg *tls.Config) (*listening, error) {
	hs, err := server.NewHTTPServer("127.0.0.1:0", h, cfg)
	if err != nil {
		return nil, err
	}
	hs.ErrorLog = nil
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	url := "https://" + ln.Addr().String() + server.MCPPath
	go hs.Serve(tls.NewListener(ln, cfg))
	return &listening{url: url, hs: hs}, nil
}

func (l *listening) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.hs.Shutdown(ctx); err != nil {
		l.hs.Close()
	}
}

// bareServer is the baseline: the same resources added to a go-sdk server,
// with no authentication, policy or audit.
func bareServer(d dataset, stateless, jsonResponse bool) http.Handler {
	ms := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	for i, uri := range d.uris {
		text := d.contents[i]
		ms.AddResource(&mcp.Resource{URI: uri, Name: "note", MIMEType: noteMIME},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: noteMIME, Text: text}}}, nil
			})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, httpOptions(stateless, jsonResponse))
	mux := http.NewServeMux()
	mux.Handle(server.MCPPath, h)
	return mux
}

// custosSide is custos as `custos serve --dev` runs it: the shipped
// assembly (app.Open) on the imported data directory, with dev keys
// persisted in it, the built-in policy, the audit log at its default
// group-commit settings with the checkpointer notified of each append, an
// (empty) break-the-glass grant cache, served over HTTPS by app.Serve with
// serve's HTTP server settings.
type custosSide struct {
	app    *app.App
	stop   context.CancelFunc
	served chan error
	url    string
	tokens []string // one bearer token per client (clinician), by client index
	audit  string   // audit.db path
}

// openCustos imports d into dir/catalog.db, makes a dev token for each of
// maxClients clinicians and serves the assembly (startCustos).
func openCustos(ctx context.Context, dir string, d dataset, maxClients int, rate server.RateLimit, batchDelay time.Duration, tlsCfg *tls.Config, profile, ops bool, logger *slog.Logger) (*custosSide, error) {
	if err := importCatalog(ctx, dir, d, logger); err != nil {
		return nil, err
	}
	tokens, tf, err := tokenFile(maxClients, d.patients)
	if err != nil {
		return nil, err
	}
	return startCustos(ctx, dir, tokens, tf, rate, batchDelay, tlsCfg, profile, ops, logger)
}

// clinicianSide is what a custos-alone scenario (-flood, -auditor) serves
// its clinicians from: the dataset, imported into dir's catalog, the TLS
// setup, and one dev bearer token per clinician (tf: the token file).
type clinicianSide struct {
	d      dataset
	tlsCfg *tls.Config
	pool   *x509.CertPool
	tokens []string
	tf     []byte
}

// clinicianSetup makes o's dataset, imports it into dir and makes n
// clinicians' tokens.
func clinicianSetup(ctx context.Context, o options, dir string, n int, logger *slog.Logger) (clinicianSide, error) {
	c := clinicianSide{d: newDataset(o.Resources, o.Size, o.PerPatient)}
	var err error
	if c.tlsCfg, c.pool, err = tlsSetup(); err != nil {
		return c, err
	}
	if err := importCatalog(ctx, dir, c.d, logger); err != nil {
		return c, err
	}
	c.tokens, c.tf, err = tokenFile(n, c.d.patients)
	return c, err
}

// importCatalog writes d as an import directory under dir/seed and imports
// it into dir/catalog.db.
func importCatalog(ctx context.Context, dir string, d dataset, logger *slog.Logger) error {
	seed := filepath.Join(dir, "seed")
	if err := writeManifest(seed, d); err != nil {
		return fmt.Errorf("writing the manifest: %w", err)
	}
	st, err := store.Open(filepath.Join(dir, app.CatalogFile), store.Options{Logger: logger})
	if err != nil {
		return err
	}
	if _, err := st.Import(ctx, seed, nil); err != nil {
		st.Close()
		return fmt.Errorf("importing: %w", err)
	}
	return st.Close()
}

// startCustos opens the assembly on dir (its catalog imported) with the
// dev token file tf (tokens[i] is client i's bearer token) and serves it
// on a random 127.0.0.1 port with tlsCfg. batchDelay, if not 0, fixes the
// audit log's group-commit window (0: the audit package's adaptive
// default, as serve uses). With profile, the server's goroutines carry the
// pprof label side=custos. With ops it also serves the ops endpoint
// (/metrics) on a random 127.0.0.1 port, as serve --ops-listen does.
// mods change the options before the assembly opens.
func startCustos(ctx context.Context, dir string, tokens []string, tf []byte, rate server.RateLimit, batchDelay time.Duration, tlsCfg *tls.Config, profile, ops bool, logger *slog.Logger, mods ...func(*app.Options)) (*custosSide, error) {
	verifier, err := server.ParseTokenFile(tf)
	if err != nil {
		return nil, err
	}
	ao := app.Options{
		DataDir: dir, Dev: true, Node: benchNode, Version: "load-bench", Logger: logger,
		AuditBatchDelay: batchDelay,
		Checkpoints:     app.CheckpointOptions{Every: checkpointEvery, Interval: checkpointInterval},
		HTTP:            &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: verifier, TLSConfig: tlsCfg, RateLimit: rate},
	}
	if ops {
		ao.Ops.Listen = "127.0.0.1:0"
	}
	for _, mod := range mods {
		mod(&ao)
	}
	a, err := app.Open(ctx, ao)
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(context.Background())
	c := &custosSide{app: a, stop: stop, served: make(chan error, 1), url: a.URL(), tokens: tokens, audit: filepath.Join(dir, app.AuditFile)}
	serve := func(ctx context.Context) { c.served <- a.Serve(ctx) }
	if profile {
		// Goroutines inherit the labels of the one that starts them: every
		// connection's goroutine is labelled side=custos.
		go pprof.Do(sctx, pprof.Labels("side", "custos"), serve)
	} else {
		go serve(sctx)
	}
	return c, nil
}

// head is the audit log's head sequence number.
func (c *custosSide) head() uint64 {
	seq, _ := c.app.AuditLog().Head()
	return seq
}

// opsURL is the base URL of custos's ops endpoint, "" if not served.
func (c *custosSide) opsURL() string { return c.app.OpsURL() }

// commits is the number of group commits the audit log has started.
func (c *custosSide) commits() uint64 { return c.app.AuditLog().Commits() }

// close stops serving and closes the assembly (a final checkpoint, then the
// audit log and the catalog). Later calls return nil.
func (c *custosSide) close(context.Context) error {
	if c.app == nil {
		return nil
	}
	c.stop()
	err := <-c.served
	err = errors.Join(err, c.app.Close())
	c.app = nil
	return err
}

// tokenFile makes n random bearer tokens and the dev token file mapping
// token i to clinician i, who has a care relationship with every patient
// and reads for treatment (TREAT): the default policy allows every read
// with no obligation.
func tokenFile(n int, patients []string) ([]string, []byte, error) {
	var tf server.TokenFile
	tokens := make([]string, n)
	for i := range tokens {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, nil, err
		}
		tokens[i] = hex.EncodeToString(b)
		p, err := json.Marshal(map[string]any{
			"sub": fmt.Sprintf("bench-clinician-%03d", i), "roles": []string{"clinician"},
			"client_id": benchClientID, "tenant": tenant, "patients": patients, "purpose_of_use": "TREAT",
		})
		if err != nil {
			return nil, nil, err
		}
		tf.Tokens = append(tf.Tokens, server.TokenEntry{TokenSHA256: server.HashToken(tokens[i]), Principal: p})
	}
	data, err := json.Marshal(tf)
	return tokens, data, err
}
